// npu-compile's pipeline: ONNX -> IR -> partition (NPU layers, host operators) ->
// calibration -> int8 quantisation -> command streams -> cycle prediction on the functional
// model -> verified model image.
#include "npu/compiler/compiler.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>

#include "attention_layout.h"
#include "bias_correction.h"
#include "calibration.h"
#include "export_qdq.h"
#include "expose.h"
#include "ir.h"
#include "lower.h"
#include "lower_attention.h"
#include "npu/compiler/image.h"
#include "npu/host_kernels/host_step.h"
#include "npu/sim/bare_metal.h"
#include "partition.h"
#include "passes.h"
#include "program.h"
#include "qdq.h"
#include "quantize.h"

namespace npu::compiler {
namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v, uint64_t a = kAlign) { return (v + a - 1) / a * a; }

std::vector<std::vector<Tensor>> random_samples(const Graph& g, size_t count) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<Tensor>> samples(count);
  for (auto& sample : samples)
    for (int in : g.inputs) {
      Tensor t = Tensor::zeros(DType::kF32, g.value(in).shape);
      for (auto& v : t.as<float>()) v = dist(rng);
      sample.push_back(std::move(t));
    }
  return samples;
}

image::DType to_image_dtype(DType d) {
  switch (d) {
    case DType::kF32: return image::DType::F32;
    case DType::kI8: return image::DType::I8;
    case DType::kU8: return image::DType::U8;
    case DType::kI32: return image::DType::I32;
    case DType::kI64: return image::DType::I64;
  }
  return image::DType::F32;
}

// One compiled NPU segment before serialisation.
struct Segment {
  Program prog;
  std::vector<LayerFacts> facts;
  std::vector<std::pair<std::string, std::string>> layers;  // name, op
  std::vector<uint32_t> layer_end;  // instruction count after each layer
  std::vector<uint64_t> layer_cycles;
  uint64_t cycles = 0;
  std::vector<int> inputs, outputs;  // graph values exchanged with the host side
};

// Runs a segment once on the functional model with zero data: predicted cycles, per layer.
Status predict_cycles(Segment& seg, const std::vector<uint8_t>& weights, uint64_t act_bytes, uint32_t N) {
  std::vector<uint8_t> commands(static_cast<size_t>(seg.prog.size()) * hw::kInstructionBytes);
  for (uint32_t i = 0; i < seg.prog.size(); ++i)
    std::memcpy(commands.data() + static_cast<size_t>(i) * hw::kInstructionBytes, seg.prog.words()[i].data(),
                hw::kInstructionBytes);
  sim::BareMetal bm(align_up(weights.size(), 1 << 16) + align_up(act_bytes, 1 << 16) +
                    align_up(commands.size(), 1 << 16) + (1u << 20));
  sim::DeviceConfig dc;
  dc.array_dim = N;
  auto dev = sim::make_functional_device(dc, bm.dram());
  const uint32_t wva = bm.allocate(weights.size(), false);
  const uint32_t ava = bm.allocate(act_bytes, true);
  const uint32_t cva = bm.allocate(commands.size(), false);
  std::memcpy(bm.view(wva, weights.size()).data(), weights.data(), weights.size());
  auto cmd_view = bm.view(cva, commands.size());
  std::memcpy(cmd_view.data(), commands.data(), commands.size());
  for (const auto& r : seg.prog.relocations()) {
    const uint32_t v = (r.buffer == image::BufferKind::Weights ? wva : ava) + r.offset;
    std::memcpy(cmd_view.data() + r.instr * hw::kInstructionBytes + r.word * 4, &v, 4);
  }
  std::vector<uint64_t> instr_cycle(seg.prog.size(), 0);
  dev->set_trace([&](const sim::TraceEvent& ev) { instr_cycle[ev.cmd_offset / hw::kInstructionBytes] = ev.cycle; });
  const uint64_t start = dev->cycle();
  auto res = bm.run(*dev, cva, static_cast<uint32_t>(commands.size()));
  if (!res.completed)
    return make_error(StatusCode::kInternal,
                      "the generated command stream faulted on the functional model (" +
                          std::string(hw::error_name(static_cast<hw::ErrorCode>(res.error_code))) + " at instruction " +
                          std::to_string(res.error_instr / hw::kInstructionBytes) + "); please report this bug");
  seg.cycles = res.cycles;
  uint64_t prev = start;
  uint32_t prev_end = 0;
  for (uint32_t end : seg.layer_end) {
    // A layer without instructions (a view) takes no cycles.
    const uint64_t done = end > prev_end ? instr_cycle[end - 1] : prev;
    seg.layer_cycles.push_back(done - prev);
    prev = done;
    prev_end = end;
  }
  return Status::ok();
}

// A graph input read only at operand slots that `slot_is_parameter(node, slot)` accepts, and
// holding the same value in every calibration sample, becomes a constant of the graph; the
// image records the value (SpecializedInput) and the runtime rejects a request with any other
// by the input's name. Returns (input index, value) pairs.
template <typename SlotPredicate>
std::vector<std::pair<size_t, Tensor>> specialize_inputs(Graph& g, const std::vector<std::vector<Tensor>>& samples,
                                                         SlotPredicate slot_is_parameter) {
  std::vector<std::pair<size_t, Tensor>> out;
  if (samples.empty()) return out;
  auto parameter_only = [&](int v) {
    bool used = false;
    for (const Node& n : g.nodes)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] != v) continue;
        if (!slot_is_parameter(n, k)) return false;
        used = true;
      }
    return used && std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end();
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int v = g.inputs[i];
    if (g.is_constant(v) || !parameter_only(v)) continue;
    const bool same = std::all_of(samples.begin(), samples.end(), [&](const std::vector<Tensor>& sample) {
      return sample.size() == g.inputs.size() && sample[i].dtype == samples[0][i].dtype &&
             sample[i].shape == samples[0][i].shape && sample[i].data == samples[0][i].data;
    });
    if (!same) continue;
    g.value(v).constant = samples[0][i];
    out.emplace_back(i, samples[0][i]);
  }
  return out;
}

// Shape operands (Reshape's shape, Resize's roi/scales/sizes) fix the shapes the image is
// compiled for.
bool is_shape_operand(const Node& n, size_t k) {
  return (n.op == "Reshape" && k == 1) || (n.op == "Resize" && k >= 1) || (n.op == "Upsample" && k == 1);
}

// Quantisation parameters (scales, zero points) and the integer filters and biases of the
// quantised convolutions are parameters of the operator: specialised, they become constants
// before expand_qlinear/fold_qdq, so the operator is lowered with the model's own
// quantisation. The second operand of an integer matmul is deliberately not among them: a
// MatMul B fed as an input is a run-time operand (attention's K, V) that a user expects to
// vary, not a parameter to freeze.
bool is_quant_parameter(const Node& n, size_t k) {
  if (n.op == "QuantizeLinear" || n.op == "DequantizeLinear") return k == 1 || k == 2;
  if (n.op == "QLinearConv") return k >= 1;  // x_scale .. y_zero_point, w (3), B (8)
  if (n.op == "QLinearMatMul") return k != 0 && k != 3;
  if (n.op == "ConvInteger") return k >= 1;  // w (1), x_zero_point (2), w_zero_point (3)
  if (n.op == "MatMulInteger") return k == 2 || k == 3;
  return false;
}

// npu-compile's errors say which stage failed: "model" (the ONNX graph, its operators and
// their lowering), "input shape", "calibration" or "image" (the image it writes).
bool has_stage(const std::string& message) {
  for (const char* stage : {"model: ", "input shape: ", "calibration: ", "image: "})
    if (message.rfind(stage, 0) == 0) return true;
  return false;
}

Status in_stage(const char* stage, Status s) {
  if (s.is_ok() || has_stage(s.message())) return s;
  return Status(s.code(), std::string(stage) + ": " + s.message());
}

template <typename T>
Result<T> in_stage(const char* stage, Result<T> r) {
  if (r.is_ok()) return r;
  return in_stage(stage, r.status());
}

// The float reference run holds every value of a sample at once (float32); past this the
// compiler refuses instead of swapping or being killed.
constexpr uint64_t kMaxReferenceBytes = 8ull << 30;
// Above this, the layers are lowered once on placeholder quantisation before calibration, so
// that a layer that can never fit the scratchpads is named in seconds, not after minutes of
// reference runs. Below it calibration is quick and the check would only cost time.
constexpr uint64_t kEarlyFitCheckBytes = 64ull << 20;

// Sizes, memory needs and scratchpad fit, before calibration runs the reference.
// `input_copies`: the calibration samples still to be made (each holds every input).
Status check_before_calibration(const Graph& g, uint32_t N, uint64_t input_copies) {
  uint64_t total = 0, largest = 0;
  int largest_value = -1;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const auto& shape = g.values[v].shape;
    if (shape.empty() || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
      continue;
    uint64_t bytes = 4;
    for (int64_t d : shape)
      bytes = std::min<uint64_t>(bytes * static_cast<uint64_t>(d), kMaxReferenceBytes + 1);
    const bool input =
        std::find(g.inputs.begin(), g.inputs.end(), static_cast<int>(v)) != g.inputs.end();
    total = std::min(total + bytes * (input ? 1 + input_copies : 1), kMaxReferenceBytes + 1);
    if (bytes > largest) {
      largest = bytes;
      largest_value = static_cast<int>(v);
    }
  }
  if (total > kMaxReferenceBytes)
    return make_error(StatusCode::kResourceExhausted,
                      "calibration: the float reference run and its samples would need more than " +
                          std::to_string(kMaxReferenceBytes >> 30) + " GiB (largest value '" +
                          g.values[static_cast<size_t>(largest_value)].name + "' " +
                          shape_to_string(g.values[static_cast<size_t>(largest_value)].shape) +
                          "); give smaller input shapes with --input-shape");
  if (total < kEarlyFitCheckBytes) return Status::ok();
  const QParams placeholder{1.0f, 0};
  for (const PartitionStep& step : partition(g, N))
    for (const NpuLayer& op : step.ops) {
      // Constant-weight GEMMs and convolutions: whether they fit does not depend on the
      // quantisation. Tap-folding convolutions have their own lowering; they are checked
      // where they are lowered.
      Program prog;
      std::vector<uint8_t> weights;
      Result<LayerFacts> facts = LayerFacts{};
      if (const auto* fc = std::get_if<FcLayer>(&op); fc && fc->weight_input < 0)
        facts = lower_fc_layer(*fc, placeholder, placeholder, N, 0, 0, weights, prog);
      else if (const auto* c = std::get_if<ConvLayer>(&op);
               c && c->weight_input < 0 && !conv_folds_taps(*c, N))
        facts = lower_conv_layer(*c, placeholder, placeholder, N, 0, 0, weights, prog, {}, placeholder);
      if (!facts.is_ok() && facts.status().code() == StatusCode::kUnsupported)
        return Status(
            StatusCode::kUnsupported,
            "model: " + facts.status().message() +
                " (found before calibration; give smaller input shapes with --input-shape)");
    }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::vector<Tensor>>> read_calibration_dir(const std::string& dir, size_t num_inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(StatusCode::kNotFound, "--calib " + dir + ": not a directory");
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) subdirs.push_back(e.path());
  std::sort(subdirs.begin(), subdirs.end());
  if (subdirs.empty())
    return make_error(StatusCode::kInvalidArgument,
                      "--calib " + dir + ": no sample folders; expected one subfolder per sample holding input_<k>.npy");
  std::vector<std::vector<Tensor>> samples;
  for (const auto& sd : subdirs) {
    std::vector<Tensor> sample;
    for (size_t k = 0; k < num_inputs; ++k) {
      NPU_ASSIGN_OR_RETURN(Tensor t, read_npy((sd / ("input_" + std::to_string(k) + ".npy")).string()));
      sample.push_back(std::move(t));  // keep the dtype: integer inputs stay integer
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

namespace {

// The whole compilation. With `bind_io`, integer graph inputs/outputs are bound to device
// views (bind_integer_io); when a host step would touch one of them, or the device cannot
// hold its codes exactly, it stops with an error and says why in *io_refused. With
// `exposed`, every value a step computes is also an image output (expose_values).
Result<std::vector<uint8_t>> compile_model(const std::string& onnx_path, const CompileOptions& options, bool bind_io,
                                           std::string* io_refused, ExposedImage* exposed = nullptr) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  const uint32_t N = options.array_dim;
  if (std::find(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end(), N) == hw::kSupportedArrayDims.end())
    return make_error(StatusCode::kInvalidArgument, "array dim " + std::to_string(N) + " is not one of 8, 16, 32");
  say("loading " + onnx_path);
  NPU_ASSIGN_OR_RETURN(Graph g, in_stage("model", load_onnx(onnx_path, options.input_shapes)));
  for (const std::string& note : g.notes) say("note: " + note);
  // Calibration samples are read first: quantisation parameters fed as inputs are
  // specialised to their calibration value before the QDQ passes need them constant.
  std::vector<std::vector<Tensor>> samples = options.calibration;
  if (samples.empty() && !options.calibration_dir.empty()) {
    NPU_ASSIGN_OR_RETURN(
        samples,
        in_stage("calibration", read_calibration_dir(options.calibration_dir, g.inputs.size())));
  }
  std::vector<std::pair<size_t, Tensor>> specialized = specialize_inputs(g, samples, is_quant_parameter);
  for (const auto& [i, t] : specialized)
    say("input '" + g.value(g.inputs[i]).name + "' is a quantisation parameter: compiled for its calibration value only");
  // Before constant folding, which would turn dequantised weights into plain floats.
  int qlinear = 0;
  // A run-time B and the integer GEMM operators are exact on the NPU only with their codes
  // bound to the device (bind_io); without binding they stay host operators.
  NPU_RETURN_IF_ERROR(expand_qlinear(g, &qlinear, bind_io));
  if (qlinear) say("rewrote " + std::to_string(qlinear) + " QLinearConv/QLinearMatMul node(s) as DequantizeLinear -> op -> QuantizeLinear");
  if (bind_io) {
    int integer_ops = 0;
    std::vector<std::string> notes;
    NPU_RETURN_IF_ERROR(expand_integer_ops(g, &integer_ops, &notes));
    if (integer_ops)
      say("rewrote " + std::to_string(integer_ops) + " ConvInteger/MatMulInteger node(s) as DequantizeLinear -> Conv/MatMul with an int32 output");
    for (const std::string& note : notes) say("note: " + note);
  }
  QdqSummary qdq;
  NPU_RETURN_IF_ERROR(fold_qdq(g, &qdq));
  if (qdq.activation_pairs || qdq.weights)
    say("quantised model: " + std::to_string(qdq.activation_pairs) + " QuantizeLinear/DequantizeLinear pair(s) and " +
        std::to_string(qdq.weights) + " quantised weight(s) keep the model's scales and zero points");
  for (const std::string& note : qdq.notes) say("note: " + note + " (left as a graph node)");
  int integer_io = 0;
  if (bind_io) NPU_RETURN_IF_ERROR(bind_integer_io(g, &integer_io));
  if (integer_io) {
    say(std::to_string(integer_io) + " integer graph input(s)/output(s) bound to int8 device views");
    // The graph now reads those inputs as the reals their codes stand for.
    for (auto& sample : samples)
      for (size_t i = 0; i < g.inputs.size() && i < sample.size(); ++i) {
        const Value& in = g.value(g.inputs[i]);
        if (!in.io_codes || sample[i].dtype != *in.io_codes) continue;
        const Tensor codes = to_float(sample[i]);  // the user's codes as floats (uint8 unshifted)
        Tensor real = Tensor::zeros(DType::kF32, codes.shape);
        const float shift = *in.io_codes == DType::kU8 ? -128.0f : 0.0f;
        for (size_t k = 0; k < real.as<float>().size(); ++k)
          real.as<float>()[k] =
              in.quant->scale[0] * (codes.as<float>()[k] + shift - static_cast<float>(in.quant->zero_point[0]));
        sample[i] = std::move(real);
      }
  }
  int folded_constants = 0, folded_bn = 0, swapped = 0;
  NPU_RETURN_IF_ERROR(fold_constants(g, &folded_constants));
  NPU_RETURN_IF_ERROR(canonicalize_commutative(g, &swapped));
  NPU_RETURN_IF_ERROR(fold_batchnorm(g, &folded_bn));
  if (folded_constants || folded_bn)
    say("folded " + std::to_string(folded_constants) + " constant node(s), and " + std::to_string(folded_bn) +
        " BatchNormalization/Mul/Add node(s) into convolutions");
  int gates = 0;
  NPU_RETURN_IF_ERROR(residual_gate_as_mul(g, &gates));
  if (gates) say("rewrote " + std::to_string(gates) + " residual gate(s) x + x*s as x*(s + 1)");

  // Calibration: the float reference over every sample gives each value's range and shape
  // (and checks that every operator has a host kernel).
  constexpr size_t kRandomSamples = 8;
  NPU_RETURN_IF_ERROR(check_before_calibration(g, N, samples.empty() ? kRandomSamples : 0));
  if (samples.empty()) {
    samples = random_samples(g, kRandomSamples);
    say("warning: no calibration data; calibrating on 8 deterministic N(0,1) samples. Pass --calib DIR for accuracy on real data");
  }
  NPU_ASSIGN_OR_RETURN(ValueRanges ranges, in_stage("calibration", calibrate(g, samples, options.calibration_method)));
  say("calibrated on " + std::to_string(samples.size()) + " sample(s) (" + calibration_method_name(options.calibration_method) + ")");
  for (const auto& [i, t] : specialize_inputs(g, samples, is_shape_operand)) {
    say("input '" + g.value(g.inputs[i]).name + "' is a shape operand: compiled for its calibration value only");
    specialized.emplace_back(i, t);
  }

  // The reference run gave every value its static shape, so Shape nodes of values that shape
  // inference left unknown (behind a Reshape whose shape a Shape/Slice/Concat chain
  // computes) fold now, and with them the rest of such chains.
  {
    int refolded = 0;
    NPU_RETURN_IF_ERROR(fold_constants(g, &refolded));
    if (refolded) say("folded " + std::to_string(refolded) + " shape-chain node(s) of calibrated static shapes");
    int means = 0;
    NPU_RETURN_IF_ERROR(reduce_mean_as_matmul(g, &means));
    if (means) say(std::to_string(means) + " last-axis ReduceMean(s) as MatMuls by 1/C (LayerNorm statistics on the MAC array)");
  }
  // Partition into NPU layers and host operators; every host operator is named. After
  // calibration, because the reference run gives every value its static shape (shape
  // inference cannot see through folded shape chains).
  std::vector<PartitionStep> steps = partition(g, N, &ranges);
  size_t npu_layers = 0, host_ops = 0;
  std::string host_list;
  for (const auto& s : steps) {
    if (s.on_npu) {
      npu_layers += s.ops.size();
    } else {
      ++host_ops;
      const Node& n = g.nodes[static_cast<size_t>(s.node)];
      host_list += (host_list.empty() ? "" : ", ") + n.op + " '" + n.name + "'";
    }
  }
  say("graph: " + std::to_string(g.nodes.size()) + " nodes -> " + std::to_string(npu_layers) + " NPU layer(s), " +
      std::to_string(host_ops) + " host operator(s)" + (host_ops ? ": " + host_list : ""));
  // A host step computes on reals: it must not see a bound value's codes.
  for (const auto& s : steps) {
    if (s.on_npu) continue;
    const Node& n = g.nodes[static_cast<size_t>(s.node)];
    for (const std::vector<int>* vs : {&n.inputs, &n.outputs})
      for (int v : *vs)
        if (v >= 0 && g.value(v).io_codes) {
          *io_refused = "host operator " + n.op + " '" + n.name + "' touches '" + g.value(v).name + "'";
          return make_error(StatusCode::kUnsupported, *io_refused);
        }
  }
  const ValueRanges narrowed = narrow_ranges_for_lut_readers(g, steps, ranges);
  if (!narrowed.empty())
    say("narrowed the ranges of " + std::to_string(narrowed.size()) +
        " value(s) that only lookup tables read to where their functions change");
  // After every decision that depends on which values are graph outputs.
  if (exposed) expose_values(g, steps, narrowed, &exposed->values, &exposed->outputs);

  // Quantisation and placement of every value an NPU layer reads or writes.
  // A padded convolution's input must have zero point 0, so that the DMA's zero padding
  // is the real value 0 (depthwise convolutions correct their border biases instead).
  std::set<int> symmetric;
  // Values whose lowering is only correct with zero point 0 (even against a QDQ model's
  // declared parameters): dynamic GEMM/conv operands and ConvTranspose inputs.
  std::set<int> zero_point_zero;
  std::map<int, int> same_quant;  // MaxPool, views: the output keeps the input's quantisation
  std::map<int, float> quant_factor;  // ... times this factor on the scale (a view of x·c)
  std::map<int, int> alias;       // views: the output is the input's bytes
  std::set<int> softmax_outputs;  // VEC SOFTMAX writes probabilities on a 2^-k grid
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
  // Device layouts chosen per operand (element strides in the float shape's order) instead
  // of the default (NHWC for 4-D, dense otherwise): dynamic GEMM/conv operands, whose rows
  // must be what the WGT/ACT scratchpads load. Only graph inputs of one node (partition
  // checks it) and 4-D GEMM results nobody else reads get them. int32 values (dynamic biases,
  // accumulator units) are quantised with the scale of their layer's products.
  std::map<int, std::vector<int64_t>> layout;
  std::map<int, std::function<QParams()>> int32_quant;
  std::map<int, std::function<QParams()>> spread_bias;  // one-element Gemm biases (int8)
  std::map<int, int32_t> bias_spread;                   // their spreading factor k
  std::set<int> device_scalars;  // rank-0 values that still get a device view (Clip bounds, biases)
  auto dense_strides = [](const std::vector<int64_t>& shape) {
    std::vector<int64_t> st(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) st[d - 1] = st[d] * shape[d];
    return st;
  };
  // Dense NHWC (no padding lanes) for values that only tap-folding convolutions read and
  // no NPU layer writes (graph inputs, host outputs): the runtime quantises into whatever
  // layout the binding's strides describe, so the first conv reads KW·C contiguous bytes.
  std::set<int> dense;
  {
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
  }
  std::map<int, QParams> qp;
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
  // Per-axis quantisation of a device view (a lone per-axis QuantizeLinear/DequantizeLinear
  // at the graph boundary, bind_integer_io): legal only where every NPU layer touching the
  // value copies codes unchanged to or from a value of the same per-axis quantisation (an
  // identity Transpose); the layers then see one placeholder per-tensor QParams on both
  // sides, and the image's device view carries the per-axis scales and zero points.
  std::map<int, DeclaredQuant> per_axis;
  {
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
  }
  std::map<int, uint64_t> act_offset;
  std::map<int, std::vector<int64_t>> act_strides;  // byte strides in the float shape's order
  std::map<int, uint64_t> act_size;
  uint64_t act_bytes = 0;
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
  if (options.bias_correction) {
    NPU_ASSIGN_OR_RETURN(const BiasCorrectionFacts bc, in_stage("bias correction", correct_conv_biases(g, steps, qp, samples)));
    if (bc.layers) say("bias correction: " + std::to_string(bc.layers) + " conv bias(es) absorb their input grid's mean error (up to " + std::to_string(bc.max_shift) + " output steps)");
  }
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
      if (!declared_operands || !int32_quant.count(out) || qp[out].scale != g.value(out).quant->scale[0] ||
          qp[out].zero_point != 0) {
        *io_refused = "the int32 output '" + g.value(out).name +
                      "' is not the exact accumulators of an NPU layer over the model's own codes";
        return make_error(StatusCode::kUnsupported, *io_refused);
      }
    }
  if (!options.export_qdq_path.empty()) {
    std::set<int> quantised;
    for (const auto& [v, off] : act_offset) quantised.insert(v);
    for (const auto& s : steps)  // fused lookup tables' inputs are rounding points too
      for (const NpuLayer& op : s.ops)
        if (const auto* c = std::get_if<ConvLayer>(&op); c && c->lut_input >= 0) quantised.insert(c->lut_input);
    NPU_RETURN_IF_ERROR(write_qdq_model(g, steps, qp, quantised, options.export_qdq_path));
    say("wrote the quantised graph as a QDQ ONNX model to " + options.export_qdq_path);
  }

  // Memory planning: each device value lives from its first to its last use, in layer order
  // (graph inputs from the start, graph outputs to the end, values a segment exchanges with
  // the host for that whole segment); values whose lives do not overlap share bytes. A view
  // shares its input's bytes and extends its life.
  {
    auto root = [&](int v) {
      while (alias.count(v)) v = alias.at(v);
      return v;
    };
    std::map<int, std::pair<int, int>> life;  // root value -> [first, last] layer index
    std::set<int> read_by_host(g.outputs.begin(), g.outputs.end());
    for (const auto& s : steps)
      if (!s.on_npu)
        for (int v : g.nodes[static_cast<size_t>(s.node)].inputs) read_by_host.insert(v);
    auto use = [&](int v, int first, int last) {
      auto [it, fresh] = life.emplace(root(v), std::make_pair(first, last));
      if (!fresh) it->second = {std::min(it->second.first, first), std::max(it->second.second, last)};
    };
    int t = 0;
    for (const auto& s : steps) {
      if (!s.on_npu) continue;
      const int seg_first = t, seg_last = t + static_cast<int>(s.ops.size()) - 1;
      std::set<int> produced;
      for (const NpuLayer& op : s.ops) {
        for (int v : npu_layer_inputs(op)) use(v, produced.count(v) ? t : seg_first, t);
        produced.insert(npu_layer_output(op));
        use(npu_layer_output(op), t, t);
        ++t;
      }
      for (int v : produced)
        if (read_by_host.count(v)) use(v, life.at(root(v)).first, seg_last);  // dequantised after the segment
    }
    for (int v : g.inputs)
      if (act_offset.count(v)) use(v, 0, life.count(root(v)) ? life.at(root(v)).second : 0);
    for (int v : g.outputs)
      if (act_offset.count(v)) use(v, life.count(root(v)) ? life.at(root(v)).first : 0, t);
    std::vector<int> order;
    for (const auto& [v, range] : life) order.push_back(v);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return life[a].first < life[b].first; });
    struct Block {
      uint64_t offset, size;
      int first, last;
    };
    std::vector<Block> placed;
    for (int v : order) {
      uint64_t size = align_up(act_size[v]);
      for (const auto& [other, r] : alias)  // a view may be larger than its root (padding)
        if (root(other) == v) size = std::max(size, align_up(act_size[other]));
      const auto [first, last] = life[v];
      uint64_t offset = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (const Block& b : placed)
          if (b.first <= last && first <= b.last && offset < b.offset + b.size && b.offset < offset + size) {
            offset = b.offset + b.size;
            moved = true;
          }
      }
      placed.push_back({offset, size, first, last});
      act_offset[v] = offset;
      act_bytes = std::max(act_bytes, offset + size);
    }
    for (auto& [v, off] : act_offset) off = act_offset[root(v)];
    uint64_t unshared = 0;
    for (const Block& b : placed) unshared += b.size;
    say("activation buffer: " + std::to_string(act_bytes) + " bytes for " + std::to_string(placed.size()) +
        " values (" + std::to_string(unshared) + " without reuse)");
  }
  if (act_bytes == 0) act_bytes = kAlign;

  // Values the host side handles: graph inputs/outputs, host operator operands, and the
  // values crossing between NPU segments and the host.
  std::set<int> produced_on_npu_group;
  std::vector<uint8_t> weights;
  std::vector<Segment> segments;
  std::set<int> host_side;  // graph value indices that need a host value
  for (int v : g.inputs) host_side.insert(v);
  for (int v : g.outputs) host_side.insert(v);
  for (const auto& s : steps)
    if (!s.on_npu)
      for (int v : g.nodes[static_cast<size_t>(s.node)].inputs)
        if (v >= 0) host_side.insert(v);
  for (const auto& s : steps) {
    if (!s.on_npu) {
      for (int v : g.nodes[static_cast<size_t>(s.node)].outputs) host_side.insert(v);
      continue;
    }
    Segment seg;
    std::set<int> inside;
    auto note_input = [&](int v) {
      if (!inside.count(v) && std::find(seg.inputs.begin(), seg.inputs.end(), v) == seg.inputs.end())
        seg.inputs.push_back(v);
    };
    for (const NpuLayer& op : s.ops) {
      for (int v : npu_layer_inputs(op)) note_input(v);
      const int out = npu_layer_output(op);
      LayerFacts facts;
      auto dynamic_operands = [&](int w, int bias, bool w_transposed) {
        DynamicOperands d;
        if (w >= 0) {
          const auto& st = act_strides[w];
          d.qw = qp[w];
          d.w_off = static_cast<uint32_t>(act_offset[w]);
          // The k index of B: its second-last dimension, or the last one of a transposed B.
          if (st.size() >= 2) d.w_k_stride = static_cast<uint32_t>(w_transposed ? st.back() : st[st.size() - 2]);
          if (st.size() >= 3) d.w_batch_stride = static_cast<uint32_t>(st[st.size() - 3]);
        }
        if (bias >= 0) {
          const auto& st = act_strides[bias];
          d.bias_off = static_cast<uint32_t>(act_offset[bias]);
          // A row bias ([N] or [1, N]) serves every m: stride 0.
          d.bias_m_stride = st.size() == 2 && g.value(bias).shape[0] > 1 ? static_cast<uint32_t>(st[0]) : 0;
          if (auto k = bias_spread.find(bias); k != bias_spread.end()) d.bias_spread = k->second;
        }
        return d;
      };
      int64_t out_elements = 1;
      for (int64_t d : g.value(out).shape) out_elements *= d;
      if (out_elements == 0) {
        // An empty output (a zero dimension): nothing to compute or move, so no instructions
        // (a lowering would emit loops of count 0, which the ISA forbids).
      } else if (const auto* fc = std::get_if<FcLayer>(&op)) {
        NPU_ASSIGN_OR_RETURN(facts, lower_fc_layer(*fc, qp[fc->input], qp[out], N,
                                                   static_cast<uint32_t>(act_offset[fc->input]),
                                                   static_cast<uint32_t>(act_offset[out]), weights, seg.prog,
                                                   dynamic_operands(fc->weight_input, fc->bias_input, fc->weight_transposed)));
      } else if (const auto* conv = std::get_if<ConvLayer>(&op)) {
        // A fused lookup table's input is the conv's own output: never stored, quantised
        // over its calibrated range like any activation.
        std::optional<QParams> q_lut_input;
        if (conv->lut_input >= 0) q_lut_input = qp.at(conv->lut_input);
        if (dense.count(conv->input)) {
          NPU_ASSIGN_OR_RETURN(facts, lower_conv_folded(*conv, qp[conv->input], qp[out], N,
                                                        static_cast<uint32_t>(act_offset[conv->input]),
                                                        static_cast<uint32_t>(act_offset[out]), weights, seg.prog,
                                                        q_lut_input));
        } else {
          NPU_ASSIGN_OR_RETURN(facts, lower_conv_layer(*conv, qp[conv->input], qp[out], N,
                                                       static_cast<uint32_t>(act_offset[conv->input]),
                                                       static_cast<uint32_t>(act_offset[out]), weights, seg.prog,
                                                       dynamic_operands(conv->weight_input, conv->bias_input, false),
                                                       q_lut_input));
        }
      } else {
        const auto& e = std::get<EltLayer>(op);
        if (e.kind == EltLayer::Kind::kSoftmax) {
          const int in = e.inputs[0];
          NPU_ASSIGN_OR_RETURN(facts, lower_softmax(g.value(in).shape, static_cast<uint32_t>(act_offset[in]), act_strides[in],
                                                    static_cast<uint32_t>(act_offset[out]), act_strides[out], qp[in],
                                                    qp[out], N, weights, seg.prog));
        } else if (e.kind == EltLayer::Kind::kReshapeCopy) {
          // Row-major order is what a reshape keeps: walk the 4-D side's shape with the
          // dense side's row-major strides of that same shape.
          const int in = e.inputs[0];
          const bool in4 = g.value(in).shape.size() == 4;
          const auto& shape = g.value(in4 ? in : out).shape;
          const std::vector<int64_t> flat = dense_strides(shape);
          NPU_ASSIGN_OR_RETURN(facts, lower_copy(shape, static_cast<uint32_t>(act_offset[in]), in4 ? act_strides[in] : flat,
                                                 static_cast<uint32_t>(act_offset[out]), in4 ? flat : act_strides[out],
                                                 qp[in], qp[out], N, weights, seg.prog));
        } else if (e.kind == EltLayer::Kind::kTranspose || e.kind == EltLayer::Kind::kConcat) {
          // Data movement between strided views (any layout on either side).
          const std::vector<int64_t>& out_strides = act_strides[out];
          int64_t axis_offset = 0;
          for (int v : e.inputs) {
            const auto& shape = g.value(v).shape;
            std::vector<int64_t> dst = out_strides, src = act_strides[v], copy_shape = shape;
            uint64_t dst_off = act_offset[out];
            uint64_t src_off = act_offset[v];
            if (e.kind == EltLayer::Kind::kTranspose) {
              copy_shape = g.value(out).shape;
              for (size_t d = 0; d < e.perm.size(); ++d) src[d] = act_strides[v][static_cast<size_t>(e.perm[d])];
              for (size_t d = 0; d < e.slice_begin.size(); ++d) {  // a Slice: offset and steps
                src_off += static_cast<uint64_t>(e.slice_begin[d] * act_strides[v][d]);
                src[d] = act_strides[v][d] * e.slice_step[d];
              }
            } else {
              dst_off += static_cast<uint64_t>(axis_offset * out_strides[static_cast<size_t>(e.axis)]);
              axis_offset += shape[static_cast<size_t>(e.axis)];
            }
            if (std::find(copy_shape.begin(), copy_shape.end(), 0) != copy_shape.end()) continue;  // an empty piece
            NPU_ASSIGN_OR_RETURN(LayerFacts f, lower_copy(copy_shape, static_cast<uint32_t>(src_off), src,
                                                          static_cast<uint32_t>(dst_off), dst, qp[v], qp[out], N,
                                                          weights, seg.prog));
            facts.scratchpad_bytes = std::max(facts.scratchpad_bytes, f.scratchpad_bytes);
            if (!f.note.empty()) facts.note += (facts.note.empty() ? "" : "; ") + f.note;
          }
        } else {
          std::vector<std::vector<int64_t>> shapes;
          std::vector<QParams> qs;
          std::vector<uint32_t> offs;
          for (int v : e.inputs) {
            shapes.push_back(g.value(v).shape);
            qs.push_back(qp[v]);
            offs.push_back(static_cast<uint32_t>(act_offset[v]));
          }
          NPU_ASSIGN_OR_RETURN(facts, lower_elt_layer(e, shapes, g.value(out).shape, qs, qp[out], offs,
                                                      static_cast<uint32_t>(act_offset[out]), N, weights, seg.prog));
        }
      }
      if (!facts.note.empty()) say("layer '" + npu_layer_name(op) + "' (" + npu_layer_op(op) + "): " + facts.note);
      seg.facts.push_back(facts);
      seg.layers.emplace_back(npu_layer_name(op), npu_layer_op(op));
      seg.layer_end.push_back(seg.prog.size());
      inside.insert(out);
    }
    for (int v : inside) seg.outputs.push_back(v);  // filtered to host-side values below
    for (int v : seg.inputs) host_side.insert(v);
    segments.push_back(std::move(seg));
  }
  if (weights.empty()) weights.resize(kAlign, 0);
  for (auto& seg : segments) {
    // A segment of views only still is a job: the stream must not be empty.
    if (seg.prog.size() == 0) seg.prog.nop();
    say("predicting cycles on the functional model (" + std::to_string(seg.prog.size()) + " instructions)");
    NPU_RETURN_IF_ERROR(predict_cycles(seg, weights, act_bytes, N));
    std::vector<int> outs;
    for (int v : seg.outputs)
      if (host_side.count(v)) outs.push_back(v);
    seg.outputs = outs;
  }

  // The codes of a bound value are the user's: the device must hold it on its declared grid.
  for (int v = 0; v < static_cast<int>(g.values.size()); ++v) {
    const Value& val = g.value(v);
    if (!val.io_codes) continue;
    // int32 outputs are accumulators (checked above); the others int8 codes, per tensor or
    // per axis.
    const bool on_grid = val.quant->scale.size() > 1
                             ? per_axis.count(v) > 0
                             : qp[v].scale == val.quant->scale[0] && qp[v].zero_point == val.quant->zero_point[0];
    if (!act_offset.count(v) || int32_quant.count(v) != (*val.io_codes == DType::kI32) || !on_grid) {
      *io_refused = "'" + val.name + "' is not held on the device with its own codes";
      return make_error(StatusCode::kUnsupported, *io_refused);
    }
  }

  // A value the device holds needs a finite int8 scale: an infinite calibrated range (float64
  // data beyond float32, an overflow in the reference) has none.
  for (const auto& [v, q] : qp)
    if (act_offset.count(v) && !(q.scale > 0.0f && std::isfinite(q.scale))) {
      const auto [lo, hi] = ranges[v];
      return make_error(StatusCode::kUnsupported, "calibration: value '" + g.value(v).name +
                                                      "' reaches [" + std::to_string(lo) + ", " +
                                                      std::to_string(hi) +
                                                      "] on the calibration samples, which no int8 "
                                                      "scale covers; give finite float32 samples");
    }

  // Build the image.
  flatbuffers::FlatBufferBuilder fb(1 << 16);
  auto quant = [&](const QParams& q) {
    return image::CreateQuant(fb, fb.CreateVector(std::vector<float>{q.scale}),
                              fb.CreateVector(std::vector<int32_t>{q.zero_point}), -1);
  };
  // A value's quantisation (per axis, or qp's per tensor), zero points shifted by `zp_shift`.
  auto value_quant = [&](int v, int32_t zp_shift) {
    if (auto pa = per_axis.find(v); pa != per_axis.end()) {
      std::vector<int32_t> zps = pa->second.zero_point;
      for (auto& z : zps) z += zp_shift;
      return image::CreateQuant(fb, fb.CreateVector(pa->second.scale), fb.CreateVector(zps),
                                static_cast<int32_t>(pa->second.axis));
    }
    return quant(QParams{qp[v].scale, qp[v].zero_point + zp_shift});
  };
  auto binding = [&](int v) {
    const Value& val = g.value(v);
    flatbuffers::Offset<image::DeviceView> view = 0;
    flatbuffers::Offset<image::Quant> desc_quant = 0;
    if (act_offset.count(v)) {
      desc_quant = value_quant(v, 0);
      view = image::CreateDeviceView(fb, image::BufferKind::Activations, act_offset[v], fb.CreateVector(act_strides[v]),
                                     int32_quant.count(v) ? image::DType::I32 : image::DType::I8, value_quant(v, 0));
    }
    if (val.io_codes && *val.io_codes == DType::kU8) {
      // The user's uint8 codes: the device's int8 codes shifted by +128.
      desc_quant = value_quant(v, 128);
    }
    auto desc = image::CreateTensorDesc(fb, fb.CreateString(val.name), to_image_dtype(val.io_codes.value_or(val.dtype)),
                                        fb.CreateVector(val.shape),
                                        fb.CreateString(val.shape.size() == 2 ? "NC" : val.shape.size() == 4 ? "NCHW" : "ND"),
                                        desc_quant);
    return image::CreateIoBinding(fb, desc, view);
  };
  std::map<int, uint32_t> host_index;
  std::vector<flatbuffers::Offset<image::IoBinding>> host_values;
  std::vector<flatbuffers::Offset<image::HostConstant>> constants;
  for (int v : host_side) {
    host_index[v] = static_cast<uint32_t>(host_values.size());
    host_values.push_back(binding(v));
    if (g.is_constant(v)) {
      const Tensor& t = *g.value(v).constant;
      constants.push_back(image::CreateHostConstant(fb, host_index[v], fb.CreateVector(t.data)));
    }
  }
  std::vector<flatbuffers::Offset<image::IoBinding>> ins, outs;
  std::vector<uint32_t> in_values, out_values;
  for (int v : g.inputs) {
    ins.push_back(binding(v));
    in_values.push_back(host_index[v]);
  }
  for (int v : g.outputs) {
    outs.push_back(binding(v));
    out_values.push_back(host_index[v]);
  }
  std::vector<flatbuffers::Offset<image::Step>> image_steps;
  size_t next_segment = 0;
  uint64_t total_macs = 0, total_cycles = 0;
  size_t total_instructions = 0;
  for (const auto& s : steps) {
    if (s.on_npu) {
      const Segment& seg = segments[next_segment++];
      std::vector<uint8_t> commands(static_cast<size_t>(seg.prog.size()) * hw::kInstructionBytes);
      for (uint32_t i = 0; i < seg.prog.size(); ++i)
        std::memcpy(commands.data() + static_cast<size_t>(i) * hw::kInstructionBytes, seg.prog.words()[i].data(),
                    hw::kInstructionBytes);
      std::vector<image::Relocation> relocs;
      for (const auto& r : seg.prog.relocations())
        relocs.emplace_back(r.instr * hw::kInstructionBytes + r.word * 4, r.buffer, r.offset);
      std::vector<flatbuffers::Offset<image::LayerInfo>> infos;
      uint64_t seg_macs = 0;
      for (size_t l = 0; l < seg.layers.size(); ++l) {
        seg_macs += seg.facts[l].macs;
        infos.push_back(image::CreateLayerInfo(fb, fb.CreateString(seg.layers[l].first),
                                               fb.CreateString(seg.layers[l].second), seg.facts[l].macs,
                                               seg.layer_cycles[l], seg.facts[l].scratchpad_bytes));
      }
      std::vector<uint32_t> seg_in, seg_out;
      for (int v : seg.inputs) seg_in.push_back(host_index.at(v));
      for (int v : seg.outputs) seg_out.push_back(host_index.at(v));
      fb.ForceVectorAlignment(commands.size(), 1, 32);
      auto cmd_vec = fb.CreateVector(commands);
      auto npu_seg = image::CreateNpuSegment(fb, cmd_vec, fb.CreateVectorOfStructs(relocs), seg.cycles, seg_macs,
                                             fb.CreateVector(infos), fb.CreateVector(seg_in), fb.CreateVector(seg_out));
      image_steps.push_back(image::CreateStep(fb, image::Segment::NpuSegment, npu_seg.Union()));
      total_macs += seg_macs;
      total_cycles += seg.cycles;
      total_instructions += seg.prog.size();
    } else {
      const Node& n = g.nodes[static_cast<size_t>(s.node)];
      std::vector<uint32_t> hin, hout;
      for (int v : n.inputs) hin.push_back(v >= 0 ? host_index.at(v) : UINT32_MAX);
      for (int v : n.outputs) hout.push_back(host_index.at(v));
      // Unused optional inputs are marked UINT32_MAX; the verifier and runtime treat them as absent.
      auto host_seg = image::CreateHostSegment(fb, fb.CreateString(n.op), fb.CreateString(n.name),
                                               fb.CreateVector(hin), fb.CreateVector(hout), g.opset,
                                               host::encode_attributes(fb, n.attrs),
                                               static_cast<uint32_t>(n.outputs.size()));
      image_steps.push_back(image::CreateStep(fb, image::Segment::HostSegment, host_seg.Union()));
    }
  }
  std::vector<flatbuffers::Offset<image::SpecializedInput>> specialized_inputs;
  for (const auto& [i, t] : specialized)
    specialized_inputs.push_back(image::CreateSpecializedInput(fb, static_cast<uint32_t>(i), fb.CreateVector(t.data)));
  fb.ForceVectorAlignment(weights.size(), 1, 64);
  auto wvec = fb.CreateVector(weights);
  auto model = image::CreateModel(fb, kImageSchemaVersion, hw::fingerprint_for_dim(N), N, hw::kIsaVersion,
                                  fb.CreateString("npu-compile 0.1.0"),
                                  fb.CreateString(std::filesystem::path(onnx_path).filename().string()),
                                  fb.CreateVector(ins), fb.CreateVector(outs), wvec, act_bytes,
                                  fb.CreateVector(image_steps), fb.CreateVector(host_values),
                                  fb.CreateVector(in_values), fb.CreateVector(out_values), fb.CreateVector(constants),
                                  specialized_inputs.empty() ? 0 : fb.CreateVector(specialized_inputs));
  image::FinishModelBuffer(fb, model);
  std::vector<uint8_t> bytes = seal_image({fb.GetBufferPointer(), fb.GetSize()});
  // Verify what we wrote exactly as the runtime will.
  if (auto check = ModelImage::from_bytes(bytes, onnx_path); !check.is_ok())
    return make_error(StatusCode::kInternal,
                      "image: the image npu-compile built fails its own verification (" +
                          check.status().message() + "); please report this bug");
  say("image: " + std::to_string(bytes.size()) + " bytes, " + std::to_string(segments.size()) + " NPU segment(s), " +
      std::to_string(host_ops) + " host step(s), " + std::to_string(total_instructions) + " instructions, " +
      std::to_string(total_macs) + " MACs, " + std::to_string(total_cycles) + " predicted cycles");
  return bytes;
}

}  // namespace

Result<std::vector<uint8_t>> compile_onnx_file(const std::string& onnx_path, const CompileOptions& options) {
  // --export-qdq writes the float graph with its quantisation: it keeps integer inputs and
  // outputs as graph nodes, so it compiles without binding them.
  const bool bind_io = options.export_qdq_path.empty();
  std::string io_refused;
  auto bytes = in_stage("model", compile_model(onnx_path, options, bind_io, &io_refused));
  if (bytes.is_ok() || io_refused.empty()) return bytes;
  if (options.progress)
    options.progress("integer graph inputs/outputs stay as they are (" + io_refused +
                     "): compiling again without binding them to the device");
  return in_stage("model", compile_model(onnx_path, options, false, &io_refused));
}

Result<ExposedImage> compile_exposing_values(const std::string& onnx_path, const CompileOptions& options) {
  // The same binding decision as compile_onnx_file, so that the layers are the same.
  const bool bind_io = options.export_qdq_path.empty();
  std::string io_refused;
  ExposedImage out;
  auto bytes = in_stage("model", compile_model(onnx_path, options, bind_io, &io_refused, &out));
  if (!bytes.is_ok() && !io_refused.empty()) {
    out = ExposedImage{};
    bytes = in_stage("model", compile_model(onnx_path, options, false, &io_refused, &out));
  }
  if (!bytes.is_ok()) return bytes.status();
  out.bytes = std::move(bytes.value());
  return out;
}

Result<std::vector<std::pair<std::string, Tensor>>> run_float_model(
    const std::string& onnx_path, const std::map<std::string, std::vector<int64_t>>& input_shapes,
    const std::vector<Tensor>& inputs) {
  NPU_ASSIGN_OR_RETURN(Graph g, in_stage("model", load_onnx(onnx_path, input_shapes)));
  NPU_ASSIGN_OR_RETURN(std::vector<Tensor> env, in_stage("calibration", run_reference(g, inputs)));
  std::vector<std::pair<std::string, Tensor>> out;
  auto keep = [&](int v) {
    const Value& val = g.value(v);
    Tensor& t = env[static_cast<size_t>(v)];
    if (!val.name.empty() && t.dtype == DType::kF32 && !g.is_constant(v)) out.emplace_back(val.name, std::move(t));
  };
  for (int v : g.inputs) keep(v);
  for (const Node& n : g.nodes)
    for (int v : n.outputs)
      if (v >= 0) keep(v);
  return out;
}

}  // namespace npu::compiler
