// write_image (pipeline.h): the FlatBuffers model image, verified as the runtime verifies it.
#include <cstring>
#include <filesystem>

#include "npu/compiler/image.h"
#include "npu/host_kernels/host_step.h"
#include "pipeline.h"

namespace npu::compiler {
namespace {

image::DType to_image_dtype(DType d) {
  switch (d) {
    case DType::kF32: return image::DType::F32;
    case DType::kI8: return image::DType::I8;
    case DType::kU8: return image::DType::U8;
    case DType::kI32: return image::DType::I32;
    case DType::kI64: return image::DType::I64;
    case DType::kI16: return image::DType::I16;
  }
  return image::DType::F32;
}

// What the image's NPU steps add up to (the closing progress line).
struct Totals {
  uint64_t macs = 0, cycles = 0;
  size_t instructions = 0;
};

// An NPU segment as an image step: its command stream, relocations and layer facts, and the
// host values (host_index) it reads and writes.
flatbuffers::Offset<image::Step> npu_step(flatbuffers::FlatBufferBuilder& fb, const Segment& seg,
                                          const std::map<int, uint32_t>& host_index, Totals* totals) {
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
  totals->macs += seg_macs;
  totals->cycles += seg.cycles;
  totals->instructions += seg.prog.size();
  return image::CreateStep(fb, image::Segment::NpuSegment, npu_seg.Union());
}

// A host operator as an image step.
flatbuffers::Offset<image::Step> host_step(flatbuffers::FlatBufferBuilder& fb, const Graph& g, const Node& n,
                                           const std::map<int, uint32_t>& host_index) {
  std::vector<uint32_t> hin, hout;
  for (int v : n.inputs) hin.push_back(v >= 0 ? host_index.at(v) : UINT32_MAX);
  for (int v : n.outputs) hout.push_back(host_index.at(v));
  // Unused optional inputs are marked UINT32_MAX; the verifier and runtime treat them as absent.
  auto host_seg = image::CreateHostSegment(fb, fb.CreateString(n.op), fb.CreateString(n.name),
                                           fb.CreateVector(hin), fb.CreateVector(hout), g.opset,
                                           host::encode_attributes(fb, n.attrs),
                                           static_cast<uint32_t>(n.outputs.size()));
  return image::CreateStep(fb, image::Segment::HostSegment, host_seg.Union());
}

}  // namespace

Result<std::vector<uint8_t>> write_image(const std::string& onnx_path, uint32_t N, const Graph& g,
                                         const std::vector<std::pair<size_t, Tensor>>& specialized,
                                         const Partition& partition, QuantPlan& qplan, MemoryPlan& mem,
                                         const LoweredModel& lowered, const Say& say) {
  const std::vector<PartitionStep>& steps = partition.steps;
  const size_t host_ops = partition.host_ops;
  std::map<int, QParams>& qp = qplan.qp;
  std::map<int, std::vector<int64_t>>& act_strides = qplan.strides;
  const std::map<int, DeclaredQuant>& per_axis = qplan.per_axis;
  std::map<int, uint64_t>& act_offset = mem.offset;
  const uint64_t act_bytes = mem.bytes;
  const std::vector<uint8_t>& weights = lowered.weights;
  const std::vector<Segment>& segments = lowered.segments;
  const std::set<int>& host_side = lowered.host_side;
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
      // A wide value (ISA 1.4): int16 codes on the 8.8 refinement of its int8 grid.
      const bool wide = qplan.wide.count(v) > 0;
      view = image::CreateDeviceView(fb, image::BufferKind::Activations, act_offset[v], fb.CreateVector(act_strides[v]),
                                     qplan.int32_values.count(v) ? image::DType::I32
                                     : wide                      ? image::DType::I16
                                                                 : image::DType::I8,
                                     wide ? quant(QParams{qp[v].scale / 256.0f, qp[v].zero_point * 256}) : value_quant(v, 0));
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
  Totals totals;
  for (const auto& s : steps)
    image_steps.push_back(s.on_npu ? npu_step(fb, segments[next_segment++], host_index, &totals)
                                   : host_step(fb, g, g.nodes[static_cast<size_t>(s.node)], host_index));
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
      std::to_string(host_ops) + " host step(s), " + std::to_string(totals.instructions) + " instructions, " +
      std::to_string(totals.macs) + " MACs, " + std::to_string(totals.cycles) + " predicted cycles");
  return bytes;
}

}  // namespace npu::compiler
