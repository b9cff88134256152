// lower_segments, predict_cycles, check_device_values (pipeline.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lower.h"
#include "lower_attention.h"
#include "npu/sim/bare_metal.h"
#include "pipeline.h"

namespace npu::compiler {
namespace {

// An element-wise layer (EltLayer): Softmax, data movement between strided views
// (reshape copies, Transpose/Slice, Concat), or lower_elt_layer's families.
Result<LayerFacts> lower_elt_step(const EltLayer& e, int out, const Graph& g, QuantPlan& qplan, MemoryPlan& mem,
                                  uint32_t N, std::vector<uint8_t>& weights, Segment& seg) {
  std::map<int, QParams>& qp = qplan.qp;
  std::map<int, std::vector<int64_t>>& act_strides = qplan.strides;
  std::map<int, uint64_t>& act_offset = mem.offset;
  LayerFacts facts;
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
  return facts;
}

// One NPU layer of `seg`: its instructions appended to seg.prog, its constants to `weights`.
Result<LayerFacts> lower_layer(const NpuLayer& op, const Graph& g, QuantPlan& qplan, MemoryPlan& mem, uint32_t N,
                               std::vector<uint8_t>& weights, Segment& seg) {
  std::map<int, QParams>& qp = qplan.qp;
  std::map<int, std::vector<int64_t>>& act_strides = qplan.strides;
  const std::map<int, int32_t>& bias_spread = qplan.bias_spread;
  const std::set<int>& dense = qplan.dense;
  std::map<int, uint64_t>& act_offset = mem.offset;
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
    const ConvWidths widths{qplan.wide.count(conv->input) > 0, qplan.wide.count(out) > 0,
                            conv->lut_input >= 0 && qplan.wide_lut.count(conv->lut_input) > 0};
    if (dense.count(conv->input)) {
      NPU_ASSIGN_OR_RETURN(facts, lower_conv_folded(*conv, qp[conv->input], qp[out], N,
                                                    static_cast<uint32_t>(act_offset[conv->input]),
                                                    static_cast<uint32_t>(act_offset[out]), weights, seg.prog,
                                                    q_lut_input, widths));
    } else {
      NPU_ASSIGN_OR_RETURN(facts, lower_conv_layer(*conv, qp[conv->input], qp[out], N,
                                                   static_cast<uint32_t>(act_offset[conv->input]),
                                                   static_cast<uint32_t>(act_offset[out]), weights, seg.prog,
                                                   dynamic_operands(conv->weight_input, conv->bias_input, false),
                                                   q_lut_input, widths));
    }
  } else {
    NPU_ASSIGN_OR_RETURN(facts, lower_elt_step(std::get<EltLayer>(op), out, g, qplan, mem, N, weights, seg));
  }
  return facts;
}

}  // namespace

Result<LoweredModel> lower_segments(const Graph& g, const Partition& partition, QuantPlan& qplan, MemoryPlan& mem,
                                    uint32_t N, const Say& say) {
  const std::vector<PartitionStep>& steps = partition.steps;
  LoweredModel lowered;
  // Values the host side handles: graph inputs/outputs, host operator operands, and the
  // values crossing between NPU segments and the host.
  std::vector<uint8_t>& weights = lowered.weights;
  std::vector<Segment>& segments = lowered.segments;
  std::set<int>& host_side = lowered.host_side;  // graph value indices that need a host value
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
      NPU_ASSIGN_OR_RETURN(const LayerFacts facts, lower_layer(op, g, qplan, mem, N, weights, seg));
      if (!facts.note.empty()) say("layer '" + npu_layer_name(op) + "' (" + npu_layer_op(op) + "): " + facts.note);
      seg.facts.push_back(facts);
      seg.layers.emplace_back(npu_layer_name(op), npu_layer_op(op));
      seg.layer_end.push_back(seg.prog.size());
      inside.insert(npu_layer_output(op));
    }
    for (int v : inside) seg.outputs.push_back(v);  // filtered to host-side values below
    for (int v : seg.inputs) host_side.insert(v);
    segments.push_back(std::move(seg));
  }
  if (weights.empty()) weights.resize(kAlign, 0);
  return lowered;
}

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

Status predict_cycles(LoweredModel& lowered, const MemoryPlan& mem, uint32_t N, const Say& say) {
  const std::vector<uint8_t>& weights = lowered.weights;
  const uint64_t act_bytes = mem.bytes;
  const std::set<int>& host_side = lowered.host_side;
  std::vector<Segment>& segments = lowered.segments;
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
  return Status::ok();
}

Status check_device_values(const Graph& g, QuantPlan& qplan, const MemoryPlan& mem, ValueRanges& ranges,
                           std::string* io_refused) {
  std::map<int, QParams>& qp = qplan.qp;
  const std::map<int, DeclaredQuant>& per_axis = qplan.per_axis;
  const std::map<int, uint64_t>& act_offset = mem.offset;
  // The codes of a bound value are the user's: the device must hold it on its declared grid.
  for (int v = 0; v < static_cast<int>(g.values.size()); ++v) {
    const Value& val = g.value(v);
    if (!val.io_codes) continue;
    // int32 outputs are accumulators (checked above); the others int8 codes, per tensor or
    // per axis.
    const bool on_grid = val.quant->scale.size() > 1
                             ? per_axis.count(v) > 0
                             : qp[v].scale == val.quant->scale[0] && qp[v].zero_point == val.quant->zero_point[0];
    if (!act_offset.count(v) || qplan.int32_values.count(v) != (*val.io_codes == DType::kI32) || !on_grid) {
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
  return Status::ok();
}

}  // namespace npu::compiler
