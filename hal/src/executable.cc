// Loading a program (ExecutableSpec) onto a device and instantiating its per-request state.
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

Result<std::shared_ptr<Executable>> Executable::load(std::shared_ptr<Device> device,
                                                     ExecutableSpec spec) {
  if (!device) return make_error(StatusCode::kInvalidArgument, "Executable::load needs a device");
  const ExecutableSpec& m = spec;
  const DeviceInfo& info = device->info();
  if (m.hw_fingerprint != info.fingerprint || m.array_dim != info.array_dim) {
    return make_error(
        StatusCode::kIncompatible,
        m.origin + ": compiled for hardware fingerprint " + hex(m.hw_fingerprint) +
            " (array " + std::to_string(m.array_dim) + "x" + std::to_string(m.array_dim) +
            "), but device " + info.spec + " has fingerprint " + hex(info.fingerprint) +
            " (array " + std::to_string(info.array_dim) + "x" + std::to_string(info.array_dim) +
            "); recompile the model for this device (npu-compile)");
  }
  if ((m.isa_version >> 16) != (info.isa_version >> 16))
    return make_error(StatusCode::kIncompatible,
                      m.origin + ": image targets ISA " + std::to_string(m.isa_version >> 16) +
                          ".x, device " + info.spec + " runs ISA " +
                          std::to_string(info.isa_version >> 16) + ".x; recompile the model");

  auto exe = std::shared_ptr<Executable>(new Executable());
  exe->device_ = device;
  exe->activation_bytes_ = m.activation_bytes;

  if (!m.weights.empty()) {
    NPU_ASSIGN_OR_RETURN(exe->weights_,
                         device->allocate(m.weights.size(), BufferUsage::kDeviceReadOnly));
    std::memcpy(exe->weights_->host().data(), m.weights.data(), m.weights.size());
    NPU_RETURN_IF_ERROR(exe->weights_->sync_to_device(0, m.weights.size()));
  }

  uint64_t offset = 0;
  for (const StepSpec& step : m.steps) {
    StepInfo si;
    si.kind = step.kind;
    if (step.kind == StepKind::kNpu) {
      if (step.commands.size() % 32 != 0)
        return make_error(StatusCode::kInvalidArgument,
                          m.origin + ": a command stream of " +
                              std::to_string(step.commands.size()) + " bytes (not 32-byte units)");
      for (const Relocation& r : step.relocations)
        if (uint64_t{r.cmd_offset} + 4 > step.commands.size())
          return make_error(StatusCode::kInvalidArgument,
                            m.origin + ": a relocation outside its command stream");
      si.command_offset = offset;
      si.command_bytes = step.commands.size();
      si.macs = step.macs;
      si.predicted_cycles = step.predicted_cycles;
      offset += si.command_bytes;
      exe->total_macs_ += si.macs;
      exe->predicted_cycles_ += si.predicted_cycles;
    } else {
      si.op_type = step.op_type;
      si.node_name = step.node_name;
    }
    exe->steps_.push_back(std::move(si));
  }
  exe->command_bytes_ = offset;
  exe->spec_ = std::move(spec);
  return exe;
}

Result<std::unique_ptr<ExecutableInstance>> Executable::instantiate() {
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
  for (size_t s = 0; s < spec_.steps.size(); ++s) {
    const StepSpec& step = spec_.steps[s];
    if (step.kind != StepKind::kNpu) continue;
    const StepInfo& si = steps_[s];
    std::byte* seg = base + si.command_offset;
    std::memcpy(seg, step.commands.data(), si.command_bytes);
    const uint64_t cmd_va = inst->commands_->device_address() + si.command_offset;
    for (const Relocation& r : step.relocations) {
      uint64_t target = 0;
      switch (r.binding) {
        case BindingKind::kWeights: target = wgt_va; break;
        case BindingKind::kActivations: target = act_va; break;
        case BindingKind::kCommands: target = cmd_va; break;
        default:
          return make_error(StatusCode::kCorruptData,
                            spec_.origin + ": relocation to an unknown buffer");
      }
      const uint64_t va = target + r.offset;
      if (va > 0xFFFFFFFFull)
        return make_error(StatusCode::kInternal,
                          "relocated address " + std::to_string(va) + " does not fit 32 bits");
      write_le32(seg + r.cmd_offset, static_cast<uint32_t>(va));
    }
  }
  NPU_RETURN_IF_ERROR(inst->commands_->sync_to_device(0, command_bytes_));
  // Record every NPU step's job once; submissions share these.
  std::vector<std::shared_ptr<Buffer>> uses{inst->activations_};
  if (weights_) uses.push_back(weights_);
  inst->recorded_.resize(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (steps_[s].kind != StepKind::kNpu) continue;
    NPU_ASSIGN_OR_RETURN(CommandBuffer cb,
                         CommandBuffer::create(inst->commands_, steps_[s].command_offset,
                                               steps_[s].command_bytes, uses));
    inst->recorded_[s] = std::move(cb);
  }
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
  if (step >= recorded_.size() || !recorded_[step])
    return make_error(StatusCode::kInvalidArgument,
                      "step " + std::to_string(step) + " has an empty command stream");
  return *recorded_[step];
}

}  // namespace npu::hal
