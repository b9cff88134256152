// Hand-built model images for runtime tests (FlatBuffers API + the ISA encoders).
//
// identity_image(): input x float32[4,16] (device int8, row stride `in_stride` bytes) copied
// by LOAD -> SYNC -> STORE to output y float32[4,16] at offset 256, both with the same
// quantisation, so y == dequantize(quantize(x)) exactly.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "model_image_generated.h"
#include "npu/compiler/image.h"
#include "npu/hw/config.h"
#include "npu/hw/isa.h"

namespace npu::test {

struct ImageOptions {
  uint32_t array_dim = 16;
  uint64_t fingerprint = hw::fingerprint_for_dim(16);
  float scale = 0.05f;
  int32_t zero_point = 3;
  uint32_t in_stride = 32;       // bytes between input rows (>= 16; the gap stays zero)
  bool fault = false;            // LOAD from an unmapped address: a PAGE_FAULT
  uint32_t fault_va = 0x00000040;
  bool host_step = false;        // value maps + a HostSegment "FancyOp" (node "fancy_1")
  bool value_maps = false;       // value maps without a host step: x in, y out
  int repeat = 1;                // copy the rows this many times (longer jobs)
  int npu_steps = 1;             // the NPU segment this many times, as consecutive steps
  int fault_step = -1;           // with fault and npu_steps > 1: only this step faults
  bool null_job = false;         // the NPU segment is one SYNC that moves nothing (a null job)
  bool store_to_weights = false;  // STORE into the (device read-only) weights buffer
  int specialized_input = -1;     // >= 0: a SpecializedInput naming this input index ...
  size_t specialized_bytes = 256;  // ... with this many bytes of value (x needs 4·16·4)
  bool int32_view_misaligned = false;  // the input view as int32 at offset 2 (not 4-byte aligned)
  // The input view's quantisation per axis when input_scales is not empty (x is [4,16]).
  std::vector<float> input_scales;
  std::vector<int32_t> input_zero_points;
  int32_t input_axis = -1;
  uint32_t schema_version = compiler::kImageSchemaVersion;
  bool sealed = true;  // false: no integrity trailer (an image as version 1 wrote them)
};

inline void append(std::vector<uint8_t>& cmds, const isa::Words& w) {
  const size_t at = cmds.size();
  cmds.resize(at + 32);
  std::memcpy(cmds.data() + at, w.data(), 32);
}

inline std::vector<uint8_t> build_identity_image(const ImageOptions& o = {}) {
  flatbuffers::FlatBufferBuilder fb;
  const std::vector<int64_t> shape{4, 16};
  const std::vector<float> scale{o.scale};
  const std::vector<int32_t> zp{o.zero_point};
  auto quant = [&] { return image::CreateQuantDirect(fb, &scale, &zp, -1); };
  const std::vector<int64_t> in_strides{static_cast<int64_t>(o.in_stride), 1};
  const std::vector<int64_t> out_strides{16, 1};
  constexpr uint32_t kOut = 256;

  auto in_desc = image::CreateTensorDescDirect(fb, "x", image::DType::F32, &shape, "NC");
  const std::vector<int64_t> i32_strides{64, 4};
  auto in_view = o.int32_view_misaligned
                     ? image::CreateDeviceViewDirect(fb, image::BufferKind::Activations, 2, &i32_strides,
                                                     image::DType::I32, quant())
                     : image::CreateDeviceViewDirect(fb, image::BufferKind::Activations, 0, &in_strides,
                                                     image::DType::I8,
                                                     o.input_scales.empty()
                                                         ? quant()
                                                         : image::CreateQuantDirect(fb, &o.input_scales,
                                                                                    &o.input_zero_points, o.input_axis));
  auto out_desc = image::CreateTensorDescDirect(fb, "y", image::DType::F32, &shape, "NC");
  auto out_view = image::CreateDeviceViewDirect(fb, image::BufferKind::Activations, kOut,
                                                &out_strides, image::DType::I8, quant());
  std::vector<flatbuffers::Offset<image::IoBinding>> inputs{image::CreateIoBinding(fb, in_desc, in_view)};
  std::vector<flatbuffers::Offset<image::IoBinding>> outputs{
      image::CreateIoBinding(fb, out_desc, out_view)};

  auto emit = [&](bool fault, std::vector<uint8_t>& cmds, std::vector<image::Relocation>& relocs) {
  if (o.null_job) {
    isa::Sync nop;
    nop.engine = isa::Engine::kCompute;
    append(cmds, isa::encode(nop));
    return;
  }
  for (int r = 0; r < o.repeat; ++r) {
    isa::Load load;
    load.sp = hw::Scratchpad::kAct;
    load.row_elems = 16;
    load.sp_base = 0;
    load.x = 4;
    load.x_stride = o.in_stride;
    load.tokens.push_next = true;
    if (fault) {
      load.va = o.fault_va;
    } else {
      relocs.emplace_back(static_cast<uint32_t>(cmds.size() + 4), image::BufferKind::Activations, 0);
    }
    append(cmds, isa::encode(load));
    isa::Sync sync;
    sync.engine = isa::Engine::kCompute;
    sync.tokens.pop_prev = true;
    sync.tokens.push_next = true;
    append(cmds, isa::encode(sync));
    isa::Store store;
    store.sp = hw::Scratchpad::kAct;
    store.row_elems = 16;
    store.x = 4;
    store.x_stride = 16;
    store.tokens.pop_prev = true;
    if (o.store_to_weights) {
      relocs.emplace_back(static_cast<uint32_t>(cmds.size() + 4), image::BufferKind::Weights, 0);
    } else {
      relocs.emplace_back(static_cast<uint32_t>(cmds.size() + 4), image::BufferKind::Activations,
                          kOut);
    }
    append(cmds, isa::encode(store));
  }
  };
  // With a host step the image has value maps: 0 = x (device), 1 = y (device, written by the
  // NPU segment), 2 = z (host only, the model output), 3 = c (a host constant float32[16]);
  // the host step "FancyOp" (node "fancy_1") computes z from y and c.
  // Without a host step (value_maps), y is the model output.
  const bool maps = o.host_step || o.value_maps;
  const std::vector<uint32_t> seg_in{0}, seg_out{1};
  std::vector<flatbuffers::Offset<image::Step>> steps;
  for (int k = 0; k < o.npu_steps; ++k) {
    std::vector<uint8_t> cmds;
    std::vector<image::Relocation> relocs;
    emit(o.fault && (o.fault_step < 0 || o.fault_step == k), cmds, relocs);
    auto seg = image::CreateNpuSegmentDirect(fb, &cmds, &relocs, 100, 0, nullptr,
                                             maps ? &seg_in : nullptr, maps ? &seg_out : nullptr);
    steps.push_back(image::CreateStep(fb, image::Segment::NpuSegment, seg.Union()));
  }
  std::vector<flatbuffers::Offset<image::IoBinding>> host_values;
  std::vector<flatbuffers::Offset<image::HostConstant>> constants;
  const std::vector<uint32_t> input_values{0}, output_values{o.host_step ? 2u : 1u};
  if (maps) {
    if (o.host_step) {
      auto z_desc = image::CreateTensorDescDirect(fb, "z", image::DType::F32, &shape, "NC");
      outputs = {image::CreateIoBinding(fb, z_desc, 0)};
    }
    host_values.push_back(image::CreateIoBinding(
        fb, image::CreateTensorDescDirect(fb, "x", image::DType::F32, &shape, "NC"),
        image::CreateDeviceViewDirect(fb, image::BufferKind::Activations, 0, &in_strides,
                                      image::DType::I8, quant())));
    host_values.push_back(image::CreateIoBinding(
        fb, image::CreateTensorDescDirect(fb, "y", image::DType::F32, &shape, "NC"),
        image::CreateDeviceViewDirect(fb, image::BufferKind::Activations, kOut, &out_strides,
                                      image::DType::I8, quant())));
  }
  if (o.host_step) {
    const std::vector<int64_t> cshape{16};
    host_values.push_back(image::CreateIoBinding(
        fb, image::CreateTensorDescDirect(fb, "z", image::DType::F32, &shape, "NC"), 0));
    host_values.push_back(image::CreateIoBinding(
        fb, image::CreateTensorDescDirect(fb, "c", image::DType::F32, &cshape, "C"), 0));
    std::vector<uint8_t> cdata(16 * 4);
    for (int k = 0; k < 16; ++k) {
      const float f = 0.5f * static_cast<float>(k);
      std::memcpy(cdata.data() + 4 * k, &f, 4);
    }
    constants.push_back(image::CreateHostConstantDirect(fb, 3, &cdata));
    const std::vector<uint32_t> hin{1, 3}, hout{2};
    auto host = image::CreateHostSegmentDirect(fb, "FancyOp", "fancy_1", &hin, &hout, 13);
    steps.push_back(image::CreateStep(fb, image::Segment::HostSegment, host.Union()));
  }
  const std::vector<uint8_t> weights{1, 2, 3, 4};
  std::vector<flatbuffers::Offset<image::SpecializedInput>> specialized;
  if (o.specialized_input >= 0) {
    const std::vector<uint8_t> value(o.specialized_bytes, 0);
    specialized.push_back(image::CreateSpecializedInputDirect(fb, static_cast<uint32_t>(o.specialized_input), &value));
  }
  auto model = image::CreateModelDirect(
      fb, o.schema_version, o.fingerprint, o.array_dim, hw::kIsaVersion, "image_builder", "test",
      &inputs, &outputs, &weights, 512, &steps, maps ? &host_values : nullptr,
      maps ? &input_values : nullptr, maps ? &output_values : nullptr,
      o.host_step ? &constants : nullptr, o.specialized_input >= 0 ? &specialized : nullptr);
  image::FinishModelBuffer(fb, model);
  if (!o.sealed) return {fb.GetBufferPointer(), fb.GetBufferPointer() + fb.GetSize()};
  return compiler::seal_image({fb.GetBufferPointer(), fb.GetSize()});
}

inline std::shared_ptr<const compiler::ModelImage> identity_image(const ImageOptions& o = {}) {
  auto r = compiler::ModelImage::from_bytes(build_identity_image(o), "identity.npuimg");
  if (!r.is_ok()) return nullptr;
  return std::move(r).value();
}

}  // namespace npu::test
