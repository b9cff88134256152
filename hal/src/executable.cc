// Loading a model image onto a device and instantiating its per-request state.
#include "npu/hal/executable.h"

#include <cstdio>
#include <cstring>

#include "npu/hw/config.h"

namespace npu::hal {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void write_le32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xFFu);
}

}  // namespace

Result<std::shared_ptr<Executable>> Executable::load(
    std::shared_ptr<Device> device, std::shared_ptr<const compiler::ModelImage> image) {
  if (!device || !image)
    return make_error(StatusCode::kInvalidArgument, "Executable::load needs a device and an image");
  const image::Model& m = image->model();
  const DeviceInfo& info = device->info();
  if (m.hw_fingerprint() != info.fingerprint || m.array_dim() != info.array_dim) {
    return make_error(
        StatusCode::kIncompatible,
        image->origin() + ": compiled for hardware fingerprint " + hex(m.hw_fingerprint()) +
            " (array " + std::to_string(m.array_dim()) + "x" + std::to_string(m.array_dim()) +
            "), but device " + info.spec + " has fingerprint " + hex(info.fingerprint) +
            " (array " + std::to_string(info.array_dim) + "x" + std::to_string(info.array_dim) +
            "); recompile the model for this device (npu-compile)");
  }
  if ((m.isa_version() >> 16) != (info.isa_version >> 16))
    return make_error(StatusCode::kIncompatible,
                      image->origin() + ": image targets ISA " + std::to_string(m.isa_version() >> 16) +
                          ".x, device " + info.spec + " runs ISA " +
                          std::to_string(info.isa_version >> 16) + ".x; recompile the model");

  auto exe = std::shared_ptr<Executable>(new Executable());
  exe->device_ = device;
  exe->image_ = image;
  exe->activation_bytes_ = m.activation_bytes();

  if (m.weights() && m.weights()->size() > 0) {
    NPU_ASSIGN_OR_RETURN(exe->weights_,
                         device->allocate(m.weights()->size(), BufferUsage::kDeviceReadOnly));
    std::memcpy(exe->weights_->host().data(), m.weights()->data(), m.weights()->size());
    NPU_RETURN_IF_ERROR(exe->weights_->sync_to_device(0, m.weights()->size()));
  }

  uint64_t offset = 0;
  for (uint32_t s = 0; s < m.steps()->size(); ++s) {
    const image::Step* step = m.steps()->Get(s);
    StepInfo si;
    if (const auto* npu = step->segment_as_NpuSegment()) {
      si.kind = StepKind::kNpu;
      si.command_offset = offset;
      si.command_bytes = npu->commands()->size();
      si.macs = npu->macs();
      si.predicted_cycles = npu->predicted_cycles();
      offset += si.command_bytes;  // verified: a multiple of 32
      exe->total_macs_ += si.macs;
      exe->predicted_cycles_ += si.predicted_cycles;
    } else {
      const auto* host = step->segment_as_HostSegment();
      si.kind = StepKind::kHost;
      si.op_type = host->op_type() ? host->op_type()->str() : "";
      si.node_name = host->node_name() ? host->node_name()->str() : "";
    }
    exe->steps_.push_back(std::move(si));
  }
  exe->command_bytes_ = offset;
  return exe;
}

Result<std::unique_ptr<ExecutableInstance>> Executable::instantiate() {
  const image::Model& m = image_->model();
  auto inst = std::unique_ptr<ExecutableInstance>(new ExecutableInstance());
  inst->executable_ = shared_from_this();
  NPU_ASSIGN_OR_RETURN(inst->activations_,
                       device_->allocate(activation_bytes_, BufferUsage::kDeviceReadWrite));
  if (command_bytes_ == 0) return inst;
  NPU_ASSIGN_OR_RETURN(inst->commands_,
                       device_->allocate(command_bytes_, BufferUsage::kDeviceReadOnly));
  std::byte* base = inst->commands_->host().data();
  const uint64_t act_va = inst->activations_->device_address();
  const uint64_t wgt_va = weights_ ? weights_->device_address() : 0;
  for (uint32_t s = 0; s < m.steps()->size(); ++s) {
    const auto* npu = m.steps()->Get(s)->segment_as_NpuSegment();
    if (!npu) continue;
    const StepInfo& si = steps_[s];
    std::byte* seg = base + si.command_offset;
    std::memcpy(seg, npu->commands()->data(), si.command_bytes);
    if (!npu->relocations()) continue;
    const uint64_t cmd_va = inst->commands_->device_address() + si.command_offset;
    for (const image::Relocation* r : *npu->relocations()) {
      uint64_t target = 0;
      switch (r->buffer()) {
        case image::BufferKind::Weights: target = wgt_va; break;
        case image::BufferKind::Activations: target = act_va; break;
        case image::BufferKind::Commands: target = cmd_va; break;
        default:
          return make_error(StatusCode::kCorruptData,
                            image_->origin() + ": relocation to an unknown buffer");
      }
      const uint64_t va = target + r->offset();
      if (va > 0xFFFFFFFFull)
        return make_error(StatusCode::kInternal,
                          "relocated address " + std::to_string(va) + " does not fit 32 bits");
      write_le32(seg + r->cmd_offset(), static_cast<uint32_t>(va));
    }
  }
  NPU_RETURN_IF_ERROR(inst->commands_->sync_to_device(0, command_bytes_));
  return inst;
}

Result<CommandBuffer> ExecutableInstance::command_buffer(size_t step) const {
  const auto& steps = executable_->steps();
  if (step >= steps.size())
    return make_error(StatusCode::kInvalidArgument, "step " + std::to_string(step) + " out of range");
  const StepInfo& si = steps[step];
  if (si.kind != StepKind::kNpu)
    return make_error(StatusCode::kInvalidArgument,
                      "step " + std::to_string(step) + " is a host step (" + si.op_type + ")");
  std::vector<std::shared_ptr<Buffer>> uses{activations_};
  if (executable_->weights()) uses.push_back(executable_->weights());
  return CommandBuffer::create(commands_, si.command_offset, si.command_bytes, std::move(uses));
}

}  // namespace npu::hal
