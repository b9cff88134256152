// plan_quantisation, round_weights, correct_biases, check_int32_outputs, export_qdq (pipeline.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "attention_layout.h"
#include "bias_correction.h"
#include "export_qdq.h"
#include "lower_attention.h"
#include "pipeline.h"
#include "quantize.h"
#include "weight_rounding.h"

namespace npu::compiler {

std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
  return st;
}
namespace {

// What the layers require of the parameters of the values they read and write.
struct QuantConstraints {
  // A padded convolution's input must have zero point 0, so that the DMA's zero padding
  // is the real value 0 (depthwise convolutions correct their border biases instead).
  std::set<int> symmetric;
  // Values whose lowering is only correct with zero point 0 (even against a QDQ model's
  // declared parameters): dynamic GEMM/conv operands and ConvTranspose inputs.
  std::set<int> zero_point_zero;
  std::map<int, int> same_quant;  // MaxPool, views: the output keeps the input's quantisation
  std::map<int, float> quant_factor;  // ... times this factor on the scale (a view of x·c)
  std::set<int> softmax_outputs;  // VEC SOFTMAX writes probabilities on a 2^-k grid
};

// The constraints, and the views (`alias`: the output is the input's bytes).
QuantConstraints quant_constraints(const Graph& g, const std::vector<PartitionStep>& steps, std::map<int, int>& alias) {
  QuantConstraints out;
  std::set<int>& symmetric = out.symmetric;
  std::set<int>& zero_point_zero = out.zero_point_zero;
  std::map<int, int>& same_quant = out.same_quant;
  std::map<int, float>& quant_factor = out.quant_factor;
  std::set<int>& softmax_outputs = out.softmax_outputs;
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      if (const auto* c = std::get_if<ConvLayer>(&op)) {
        if (!c->depthwise && (c->pad_t || c->pad_l || c->pad_b || c->pad_r)) symmetric.insert(c->input);
        // ConvTranspose: the zero-point correction would depend on the output position.
        // 3-D Conv skips padding taps the same way (lower_tap_gemm_conv).
        if (c->transposed || c->three_d) zero_point_zero.insert(c->input);
        if (c->weight_input >= 0) {  // unknown weights: no zero-point correction is possible
          zero_point_zero.insert(c->input);
          zero_point_zero.insert(c->weight_input);
        }
      }
      if (const auto* f = std::get_if<FcLayer>(&op))
        if (f->weight_input >= 0) {
          // The dynamic-B GEMM corrects both zero points (lower.h), so a declared per-tensor
          // quantisation (QDQ, bound integer inputs) is honoured; calibrated operands stay
          // symmetric (no correction GEMMs).
          for (int v : {f->input, f->weight_input}) {
            const auto& declared = g.value(v).quant;
            if (!declared || declared->scale.size() != 1) zero_point_zero.insert(v);
          }
        }
      if (const auto* e = std::get_if<EltLayer>(&op)) {
        if (e->kind == EltLayer::Kind::kMaxPool || e->kind == EltLayer::Kind::kView ||
            e->kind == EltLayer::Kind::kRepack || e->kind == EltLayer::Kind::kTranspose ||
            e->kind == EltLayer::Kind::kReshapeCopy || e->kind == EltLayer::Kind::kResize ||
            e->kind == EltLayer::Kind::kClip)
          same_quant[e->output] = e->inputs[0];
        // Clip's run-time bounds are quantised like x, so that int8 codes compare like reals.
        if (e->kind == EltLayer::Kind::kClip)
          for (size_t k = 1; k < e->inputs.size(); ++k) same_quant[e->inputs[k]] = e->inputs[0];
        if (e->kind == EltLayer::Kind::kView) alias[e->output] = e->inputs[0];
        if (e->kind == EltLayer::Kind::kSoftmax) softmax_outputs.insert(e->output);
        if (e->kind == EltLayer::Kind::kView && e->view_scale != 1.0f) quant_factor[e->output] = e->view_scale;
      }
    }
  // A symmetric MaxPool output needs a symmetric input (they share parameters).
  for (auto it = same_quant.rbegin(); it != same_quant.rend(); ++it) {
    if (symmetric.count(it->first)) symmetric.insert(it->second);
    if (zero_point_zero.count(it->first)) zero_point_zero.insert(it->second);
  }
  return out;
}

// Dense NHWC (no padding lanes) for values that only tap-folding convolutions read and
// no NPU layer writes (graph inputs, host outputs): the runtime quantises into whatever
// layout the binding's strides describe, so the first conv reads KW·C contiguous bytes.
std::set<int> dense_values(const std::vector<PartitionStep>& steps, uint32_t N) {
  std::set<int> dense;
  std::set<int> written, other_readers;
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      written.insert(npu_layer_output(op));
      const auto* c = std::get_if<ConvLayer>(&op);
      for (int v : npu_layer_inputs(op))
        if (c && conv_folds_taps(*c, N)) dense.insert(v);
        else other_readers.insert(v);
    }
  for (int v : written) dense.erase(v);
  for (int v : other_readers) dense.erase(v);
  return dense;
}

// Device layouts chosen per operand (element strides in the float shape's order) instead
// of the default (NHWC for 4-D, dense otherwise): dynamic GEMM/conv operands, whose rows
// must be what the WGT/ACT scratchpads load. Only graph inputs of one node (partition
// checks it) and 4-D GEMM results nobody else reads get them. int32 values (dynamic biases,
// accumulator units) are quantised with the scale of their layer's products.
// The int32 and spread-bias parameters are evaluated when place() reaches the value, after
// its layer's operands (npu_layer_inputs order); they read `plan.qp` and write
// `plan.bias_spread`.
struct DeviceLayouts {
  std::map<int, std::vector<int64_t>> layout;
  std::map<int, std::function<QParams()>> int32_quant;
  std::map<int, std::function<QParams()>> spread_bias;  // one-element Gemm biases (int8)
  std::set<int> device_scalars;  // rank-0 values that still get a device view (Clip bounds, biases)
};

DeviceLayouts device_layouts(const Graph& g, const std::vector<PartitionStep>& steps, uint32_t N,
                             ValueRanges& ranges, QuantPlan& plan) {
  DeviceLayouts out;
  std::map<int, std::vector<int64_t>>& layout = out.layout;
  std::map<int, std::function<QParams()>>& int32_quant = out.int32_quant;
  std::map<int, std::function<QParams()>>& spread_bias = out.spread_bias;
  std::map<int, int32_t>& bias_spread = plan.bias_spread;  // their spreading factor k
  std::set<int>& device_scalars = out.device_scalars;
  std::map<int, QParams>& qp = plan.qp;
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      if (const auto* f = std::get_if<FcLayer>(&op); f && f->weight_input >= 0) {
        const auto& xs = g.value(f->input).shape;
        const auto& bs = g.value(f->weight_input).shape;
        if (f->input_transposed) layout[f->input] = {1, xs[0]};  // stored [M][K]
        else if (xs.size() == 4) layout[f->input] = dense_strides(xs);
        if (f->weight_transposed) layout[f->weight_input] = {1, bs[0]};  // stored [K][N]
        else if (bs.size() == 4) layout[f->weight_input] = dense_strides(bs);
        if (g.value(f->output).shape.size() == 4) layout[f->output] = dense_strides(g.value(f->output).shape);
        if (f->bias_input >= 0 && f->bias_scalar) {
          // int8 at a scale k times the accumulator unit, k the smallest that fits its range
          // (k <= 127, or a multiple of 127: the spreading GEMM repeats over i; lower.h).
          layout[f->bias_input] = dense_strides(g.value(f->bias_input).shape);
          device_scalars.insert(f->bias_input);
          const FcLayer* fl = f;
          spread_bias[f->bias_input] = [&qp, &ranges, &bias_spread, fl] {
            const double unit = static_cast<double>(fl->alpha) * qp[fl->input].scale * qp[fl->weight_input].scale / fl->beta;
            const auto [lo, hi] = ranges[fl->bias_input];
            const double m = std::max(std::fabs(lo), std::fabs(hi));
            auto k = static_cast<int32_t>(std::clamp(std::ceil(m / (127.0 * unit)), 1.0, 127.0 * 65535.0));
            if (k > 127) k = 127 * ((k + 126) / 127);
            bias_spread[fl->bias_input] = k;
            return QParams{static_cast<float>(unit * k), 0};
          };
        } else if (f->bias_input >= 0) {
          layout[f->bias_input] = dense_strides(g.value(f->bias_input).shape);
          const FcLayer* fl = f;
          int32_quant[f->bias_input] = [&qp, fl] {
            return QParams{fl->alpha * qp[fl->input].scale * qp[fl->weight_input].scale / fl->beta, 0};
          };
        }
      }
      if (const auto* f = std::get_if<FcLayer>(&op); f && f->int32_output) {
        // int32 accumulators, dense, at the scale of the layer's products: one scale for all
        // columns (a per-channel weight scale has no single int32 unit: NaN fails the check
        // of bound values below).
        layout[f->output] = dense_strides(g.value(f->output).shape);
        const FcLayer* fl = f;
        int32_quant[f->output] = [&qp, fl] {
          if (fl->weight_input >= 0) return QParams{fl->alpha * qp[fl->input].scale * qp[fl->weight_input].scale, 0};
          const std::vector<float> sw = fc_weight_scales(*fl);
          const bool uniform = std::all_of(sw.begin(), sw.end(), [&](float scale) { return scale == sw[0]; });
          return QParams{uniform ? qp[fl->input].scale * sw[0] : NAN, 0};
        };
      }
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->int32_output) {
        // NHWC with the channels padded to N, int32 elements.
        const int64_t cp = padded_channels(c->Cout, N);
        layout[c->output] = {c->OH * c->OW * cp, 1, c->OW * cp, cp};
        const ConvLayer* cl = c;
        int32_quant[c->output] = [&qp, cl] {
          const std::vector<float> sw = conv_weight_scales(*cl);
          const bool uniform = std::all_of(sw.begin(), sw.end(), [&](float scale) { return scale == sw[0]; });
          return QParams{uniform ? qp[cl->input].scale * sw[0] : NAN, 0};
        };
      }
      if (const auto* e = std::get_if<EltLayer>(&op); e && e->dense_4d >= 0)
        layout[e->dense_4d] = dense_strides(g.value(e->dense_4d).shape);
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->one_d) {
        // [N,C,L] stored [N][L][C padded]: NHWC with H = 1.
        layout[c->input] = {c->W * padded_channels(c->C, N), 1, padded_channels(c->C, N)};
        layout[c->output] = {c->OW * padded_channels(c->Cout, N), 1, padded_channels(c->Cout, N)};
      }
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->three_d) {
        // [N,C,D,H,W] stored [N][D][H][W][C padded] (NDHWC).
        const int64_t cp = padded_channels(c->C, N), coutp = padded_channels(c->Cout, N);
        layout[c->input] = {c->D * c->H * c->W * cp, 1, c->H * c->W * cp, c->W * cp, cp};
        layout[c->output] = {c->OD * c->OH * c->OW * coutp, 1, c->OH * c->OW * coutp, c->OW * coutp, coutp};
      }
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->weight_input >= 0) {
        // W [Cout][C][KH][KW] (ConvTranspose: [C][Cout][KH][KW], 1-D: [C][Cout][KW]) stored
        // [KH][KW][C][Cout].
        if (c->transposed && c->one_d) layout[c->weight_input] = {c->Cout, 1, c->C * c->Cout};
        else if (c->transposed && c->three_d)  // [C][Cout][KD][KH][KW] stored [KD][KH][KW][C][Cout]
          layout[c->weight_input] = {c->Cout, 1, c->KH * c->KW * c->C * c->Cout, c->KW * c->C * c->Cout, c->C * c->Cout};
        else if (c->transposed) layout[c->weight_input] = {c->Cout, 1, c->KW * c->C * c->Cout, c->C * c->Cout};
        else if (c->three_d)  // [Cout][C][KD][KH][KW] stored [KD][KH][KW][C][Cout]
          layout[c->weight_input] = {1, c->Cout, c->KH * c->KW * c->C * c->Cout, c->KW * c->C * c->Cout, c->C * c->Cout};
        else layout[c->weight_input] = {1, c->Cout, c->KW * c->C * c->Cout, c->C * c->Cout};
        if (c->bias_input >= 0) {
          layout[c->bias_input] = {1};
          const ConvLayer* cl = c;
          int32_quant[c->bias_input] = [&qp, cl] {
            return QParams{qp[cl->input].scale * qp[cl->weight_input].scale, 0};
          };
        }
      }
    }
  // The 4-D values around attention's run-time MatMuls are dense (attention_layout.h), as
  // partition assumed when it put those MatMuls and their reshapes on the NPU.
  for (int v : dense_attention_values(g)) layout.emplace(v, dense_strides(g.value(v).shape));
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops)
      if (const auto* e = std::get_if<EltLayer>(&op); e && e->kind == EltLayer::Kind::kClip)
        for (size_t k = 1; k < e->inputs.size(); ++k) device_scalars.insert(e->inputs[k]);
  return out;
}

// Per-axis quantisation of a device view (a lone per-axis QuantizeLinear/DequantizeLinear
// at the graph boundary, bind_integer_io): legal only where every NPU layer touching the
// value copies codes unchanged to or from a value of the same per-axis quantisation (an
// identity Transpose); the layers then see one placeholder per-tensor QParams on both
// sides, and the image's device view carries the per-axis scales and zero points.
std::map<int, DeclaredQuant> per_axis_views(const Graph& g, const std::vector<PartitionStep>& steps) {
  std::map<int, DeclaredQuant> per_axis;
  auto is_per_axis = [&](int v) { return g.value(v).quant && g.value(v).quant->scale.size() > 1; };
  std::set<int> refused;
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      std::vector<int> touched = npu_layer_inputs(op);
      touched.push_back(npu_layer_output(op));
      const auto* e = std::get_if<EltLayer>(&op);
      bool identity_copy = e && e->kind == EltLayer::Kind::kTranspose && e->inputs.size() == 1 && e->slice_begin.empty();
      for (size_t d = 0; identity_copy && d < e->perm.size(); ++d) identity_copy = e->perm[d] == static_cast<int64_t>(d);
      const bool same = identity_copy && is_per_axis(e->inputs[0]) && is_per_axis(e->output) &&
                        g.value(e->inputs[0]).quant->scale == g.value(e->output).quant->scale &&
                        g.value(e->inputs[0]).quant->zero_point == g.value(e->output).quant->zero_point &&
                        g.value(e->inputs[0]).quant->axis == g.value(e->output).quant->axis;
      for (int v : touched) {
        if (!is_per_axis(v)) continue;
        if (same) per_axis.emplace(v, *g.value(v).quant);
        else refused.insert(v);
      }
    }
  for (int v : refused) per_axis.erase(v);
  return per_axis;
}

// Convs whose lowering writes wide rows: lower_conv_layer's standard path and tap folding
// (lower_conv_folded); the standard path also reads them (a folding conv reads dense int8).
bool conv_writes_wide(const ConvLayer& c) {
  return !c.transposed && !c.three_d && c.weight_input < 0 && c.bias_input < 0 && !c.int32_output;
}
bool conv_takes_wide(const ConvLayer& c, const std::set<int>& dense, uint32_t N) {
  return conv_writes_wide(c) && !dense.count(c.input) && conv_fits_wide(c, N);
}

// Which values become wide: 4-D outputs of such convs in the plain NHWC layout that only such
// convs read, as their activation input (not the model's outputs, host steps' inputs, views
// or values with a layout of their own); and the fused tables' inputs of such convs. Values
// an accuracy report exposes keep their width (the host reads them as int16 views).
void choose_wide_values(const Graph& g, const Partition& partition,
                        const std::map<int, std::vector<int64_t>>& layout, uint32_t N, QuantPlan& plan) {
  const std::vector<PartitionStep>& steps = partition.steps;
  std::set<int> int8_only(partition.model_outputs.begin(), partition.model_outputs.end()), produced, read;
  for (const auto& [view, of] : plan.alias) {
    int8_only.insert(view);
    int8_only.insert(of);
  }
  for (const auto& s : steps) {
    if (!s.on_npu) {
      for (int v : g.nodes[static_cast<size_t>(s.node)].inputs) int8_only.insert(v);
      continue;
    }
    for (const NpuLayer& op : s.ops) {
      const auto* c = std::get_if<ConvLayer>(&op);
      const bool takes = c && conv_takes_wide(*c, plan.dense, N);
      for (int v : npu_layer_inputs(op)) {
        read.insert(v);
        if (!takes || v != c->input) int8_only.insert(v);
      }
      const bool writes = c && conv_writes_wide(*c) && (plan.dense.count(c->input) || conv_fits_wide(*c, N));
      if (writes && g.value(c->output).shape.size() == 4) produced.insert(c->output);
      if (writes && c->lut_input >= 0) plan.wide_lut.insert(c->lut_input);
    }
  }
  for (int v : produced)
    if (read.count(v) && !int8_only.count(v) && !layout.count(v) && !plan.dense.count(v) && !plan.per_axis.count(v) &&
        !plan.int32_values.count(v))
      plan.wide.insert(v);
}

}  // namespace

QuantPlan plan_quantisation(const Graph& g, const Partition& partition, ValueRanges& ranges, uint32_t N,
                            const Say& say, bool wide_activations) {
  const std::vector<PartitionStep>& steps = partition.steps;
  QuantPlan plan;
  // Quantisation and placement of every value an NPU layer reads or writes.
  const QuantConstraints constraints = quant_constraints(g, steps, plan.alias);
  const std::set<int>& symmetric = constraints.symmetric;
  const std::set<int>& zero_point_zero = constraints.zero_point_zero;
  const std::map<int, int>& same_quant = constraints.same_quant;
  const std::map<int, float>& quant_factor = constraints.quant_factor;
  const std::set<int>& softmax_outputs = constraints.softmax_outputs;
  plan.dense = dense_values(steps, N);
  const std::set<int>& dense = plan.dense;
  const DeviceLayouts layouts = device_layouts(g, steps, N, ranges, plan);
  const std::map<int, std::vector<int64_t>>& layout = layouts.layout;
  const std::map<int, std::function<QParams()>>& int32_quant = layouts.int32_quant;
  const std::map<int, std::function<QParams()>>& spread_bias = layouts.spread_bias;
  const std::set<int>& device_scalars = layouts.device_scalars;
  plan.per_axis = per_axis_views(g, steps);
  const std::map<int, DeclaredQuant>& per_axis = plan.per_axis;
  std::map<int, QParams>& qp = plan.qp;
  std::map<int, uint64_t> act_offset;
  std::map<int, std::vector<int64_t>>& act_strides = plan.strides;  // byte strides in the float shape's order
  std::map<int, uint64_t>& act_size = plan.bytes;
  std::function<void(int)> place = [&](int v) {
    if (act_offset.count(v)) return;
    const auto [lo, hi] = ranges[v];
    const std::optional<DeclaredQuant>& declared = g.value(v).quant;
    if (auto pa = per_axis.find(v); pa != per_axis.end()) {
      qp[v] = QParams{pa->second.scale[0], pa->second.zero_point[0]};  // placeholder: codes are only copied
    } else if (softmax_outputs.count(v)) {
      qp[v] = softmax_output_qparams(hi, zero_point_zero.count(v) || symmetric.count(v));
      if (declared)
        say("note: '" + g.value(v).name + "' is quantised on the grid VEC SOFTMAX writes (scale 2^-k), not as the model declares");
    } else if (auto iq = int32_quant.find(v); iq != int32_quant.end()) {
      qp[v] = iq->second();  // its layer's operands are placed first (npu_layer_inputs order)
    } else if (auto sb = spread_bias.find(v); sb != spread_bias.end()) {
      qp[v] = sb->second();
    } else if (auto sq = same_quant.find(v); sq != same_quant.end()) {
      // Views and MaxPool share their input's parameters (QDQ models declare the same).
      place(sq->second);
      qp[v] = qp[sq->second];
      if (auto f = quant_factor.find(v); f != quant_factor.end()) qp[v].scale *= f->second;
      if (declared && (declared->scale.size() != 1 || declared->scale[0] != qp[v].scale ||
                       declared->zero_point[0] != qp[v].zero_point))
        say("note: '" + g.value(v).name + "' keeps its input's quantisation, not the one the model declares (" +
            "MaxPool, reshapes, Transpose, Resize and run-time Clip do not rescale on the NPU)");
    } else if (zero_point_zero.count(v)) {
      const float m = std::max({std::fabs(lo), std::fabs(hi), 1e-6f});
      qp[v] = QParams{m / 127.0f, 0};
      if (declared && (declared->zero_point.size() != 1 || declared->zero_point[0] != 0))
        say("note: '" + g.value(v).name + "' is quantised symmetrically, not as the model declares (a dynamic " +
            "GEMM/conv operand or a ConvTranspose input needs zero point 0 on the NPU)");
    } else if (declared && declared->scale.size() == 1) {
      // The model's own parameters; padded convolutions correct their borders for a
      // non-zero zero point (lower_conv_layer), so they are honoured as declared.
      qp[v] = QParams{declared->scale[0], declared->zero_point[0]};
    } else if (symmetric.count(v)) {
      const float m = std::max({std::fabs(lo), std::fabs(hi), 1e-6f});
      qp[v] = QParams{m / 127.0f, 0};
    } else {
      qp[v] = activation_qparams(lo, hi);
    }
    const std::vector<int64_t>& shape = g.value(v).shape;
    if (g.is_constant(v) || (shape.empty() && !device_scalars.count(v))) return;
    std::vector<int64_t> strides(shape.size(), 1);
    uint64_t bytes = device_bytes(shape, N);
    if (auto it = layout.find(v); it != layout.end()) {
      const uint64_t esize = int32_quant.count(v) ? 4 : 1;
      uint64_t last = 0;
      for (size_t d = 0; d < shape.size(); ++d) last += static_cast<uint64_t>((shape[d] - 1) * it->second[d]);
      act_strides[v] = it->second;
      for (auto& st : act_strides[v]) st *= static_cast<int64_t>(esize);
      act_offset[v] = 0;
      act_size[v] = (last + 1) * esize + N;  // a LOAD of the last row reads up to N - 1 bytes more
      return;
    }
    if (dense.count(v)) {  // NHWC, C channels per pixel
      strides = {shape[2] * shape[3] * shape[1], 1, shape[3] * shape[1], shape[1]};
      bytes = static_cast<uint64_t>(shape[0] * shape[1] * shape[2] * shape[3]);
    } else if (shape.size() == 4) {  // NHWC, channels padded to the array dim
      const int64_t cp = padded_channels(shape[1], N);
      strides = {shape[2] * shape[3] * cp, 1, shape[3] * cp, cp};
    } else {
      for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    }
    act_strides[v] = strides;
    act_offset[v] = 0;  // assigned by the memory planner below
    act_size[v] = bytes;
  };
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      for (int v : npu_layer_inputs(op)) place(v);
      place(npu_layer_output(op));
      // A fused lookup table's input is the conv's own output: never stored, quantised over
      // its calibrated range like any activation.
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->lut_input >= 0) {
        const auto [lo, hi] = ranges[c->lut_input];
        qp[c->lut_input] = activation_qparams(lo, hi);
      }
    }
  for (const auto& [v, off] : act_offset) plan.on_device.insert(v);
  for (const auto& [v, q] : int32_quant) plan.int32_values.insert(v);
  if (wide_activations) {
    choose_wide_values(g, partition, layout, N, plan);
    for (int v : plan.wide) {
      act_size[v] *= 2;
      for (auto& st : act_strides[v]) st *= 2;
    }
    if (!plan.wide.empty() || !plan.wide_lut.empty())
      say("wide activations: " + std::to_string(plan.wide.size()) + " conv output(s) stored and " +
          std::to_string(plan.wide_lut.size()) + " fused activation input(s) evaluated with 16-bit codes (ISA 1.4)");
  }
  return plan;
}

Status round_weights(const Graph& g, Partition& partition, const std::vector<std::vector<Tensor>>& samples,
                     const Say& say) {
  if (samples.empty()) {
    say("weight rounding: no calibration samples, weights rounded to the nearest code");
    return Status::ok();
  }
  NPU_ASSIGN_OR_RETURN(const WeightRoundingFacts wr,
                       in_stage("weight rounding", round_conv_weights(g, partition.steps, samples)));
  char gain[32];
  std::snprintf(gain, sizeof gain, "%.1f", wr.gain_db);
  say("weight rounding: " + std::to_string(wr.layers) + " conv(s) rounded with error feedback (calibration output error " +
      gain + " dB below nearest rounding, mean over them)");
  return Status::ok();
}

Status correct_biases(const Graph& g, Partition& partition, const QuantPlan& qplan,
                      const std::vector<std::vector<Tensor>>& samples, const Say& say) {
  std::vector<PartitionStep>& steps = partition.steps;
  // Wide values round onto grids 256 times finer: their mean error is not what the int8 grid
  // of qp would add, so convs reading them are not corrected, and a fused table's wide input
  // is not rounded where the correction emulates a producer.
  std::map<int, QParams> qp = qplan.qp;
  for (int v : qplan.wide) qp.erase(v);
  for (int v : qplan.wide_lut) qp.erase(v);
    NPU_ASSIGN_OR_RETURN(const BiasCorrectionFacts bc, in_stage("bias correction", correct_conv_biases(g, steps, qp, samples)));
    if (bc.layers) say("bias correction: " + std::to_string(bc.layers) + " conv bias(es) absorb their input grid's mean error (up to " + std::to_string(bc.max_shift) + " output steps)");
  return Status::ok();
}

Status check_int32_outputs(const Graph& g, const Partition& partition, QuantPlan& qplan, std::string* io_refused) {
  const std::vector<PartitionStep>& steps = partition.steps;
  std::map<int, QParams>& qp = qplan.qp;
  // An int32 graph output (ConvInteger/MatMulInteger) is exact only as the accumulators of a
  // layer whose operands hold the model's own codes (declared: bound inputs, QDQ values) and
  // whose products are at scale 1, the declared scale of the output.
  for (const auto& s : steps)
    for (const NpuLayer& op : s.ops) {
      const int out = npu_layer_output(op);
      if (g.value(out).io_codes != DType::kI32) continue;
      const auto* f = std::get_if<FcLayer>(&op);
      const auto* c = std::get_if<ConvLayer>(&op);
      const int in = f ? f->input : c ? c->input : -1;
      const int w = f ? f->weight_input : c ? c->weight_input : -1;
      const bool declared_operands = in >= 0 && g.value(in).quant && (w < 0 || g.value(w).quant);
      if (!declared_operands || !qplan.int32_values.count(out) || qp[out].scale != g.value(out).quant->scale[0] ||
          qp[out].zero_point != 0) {
        *io_refused = "the int32 output '" + g.value(out).name +
                      "' is not the exact accumulators of an NPU layer over the model's own codes";
        return make_error(StatusCode::kUnsupported, *io_refused);
      }
    }
  return Status::ok();
}

Status export_qdq(const Graph& g, const Partition& partition, const QuantPlan& qplan, const std::string& path,
                  const Say& say) {
  const std::vector<PartitionStep>& steps = partition.steps;
  std::set<int> quantised = qplan.on_device;
    for (const auto& s : steps)  // fused lookup tables' inputs are rounding points too
      for (const NpuLayer& op : s.ops)
        if (const auto* c = std::get_if<ConvLayer>(&op); c && c->lut_input >= 0) quantised.insert(c->lut_input);
  NPU_RETURN_IF_ERROR(write_qdq_model(g, steps, qplan.qp, quantised, path));
  say("wrote the quantised graph as a QDQ ONNX model to " + path);
  return Status::ok();
}

}  // namespace npu::compiler
