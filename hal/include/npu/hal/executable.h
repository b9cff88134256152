// hal::Executable: a program loaded onto one device — weights, command streams with their
// relocations — and hal::ExecutableInstance: the per-request device state of one in-flight
// execution.
//
// The HAL does not read model images: it takes an ExecutableSpec, opaque command streams,
// relocations and the buffer sizes they bind, which the runtime builds from a verified image
// (runtime/src/image_to_hal.cc, npu/runtime/image_to_hal.h).
//
// load() refuses a program compiled for other hardware (fingerprint or array dim, naming both
// values), allocates the read-only weights buffer and uploads the weights. The Activations
// buffer is per request: instantiate() allocates one activation buffer plus one read-only
// command buffer holding every NPU step's command stream, with every relocation patched to
// the final NPU virtual addresses (weights, these activations, this command stream). A runtime
// keeps a pool of instances, one per request in flight.
//
// Ownership: Executable is shared and immutable after load; it keeps the spec (and, through
// ExecutableSpec::owner, the bytes its spans point into) and the weights buffer alive. An
// ExecutableInstance keeps its Executable alive; its buffers are additionally held by every
// job submitted from it until that job's fence signals.
// Threading: Executable is thread-safe (instantiate() may run concurrently). An instance is
// used by one request at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "npu/hal/buffer.h"
#include "npu/hal/command_buffer.h"
#include "npu/hal/device.h"
#include "npu/hal/status.h"

namespace npu::hal {

enum class StepKind : uint8_t { kNpu = 0, kHost = 1 };

struct StepInfo {
  StepKind kind = StepKind::kNpu;
  // kNpu: where the segment's commands live in an instance's command buffer.
  uint64_t command_offset = 0;
  uint64_t command_bytes = 0;
  uint64_t macs = 0;
  uint64_t predicted_cycles = 0;
  // kHost: the operator and node, for messages.
  std::string op_type;
  std::string node_name;
};

// The buffers a relocation can point into.
enum class BindingKind : uint8_t { kWeights = 0, kActivations = 1, kCommands = 2 };

// Patch the little-endian 32-bit word at byte `cmd_offset` of a step's command stream with
// (NPU virtual address of `binding`) + `offset` (kCommands: the step's own stream).
struct Relocation {
  uint32_t cmd_offset = 0;
  BindingKind binding = BindingKind::kWeights;
  uint32_t offset = 0;
};

// One step as the HAL sees it. kNpu: a command stream (32-byte instructions, a multiple of 32
// bytes) and its relocations, each inside the stream and inside its binding (the runtime's
// image verifier has checked both); kHost: only its name, for messages.
struct StepSpec {
  StepKind kind = StepKind::kNpu;
  std::span<const uint8_t> commands;
  std::vector<Relocation> relocations;
  uint64_t macs = 0;
  uint64_t predicted_cycles = 0;
  std::string op_type;
  std::string node_name;
};

// Everything load() needs. The spans point into memory `owner` keeps alive.
struct ExecutableSpec {
  std::string origin;  // the program's name in messages (the image file)
  uint64_t hw_fingerprint = 0;
  uint32_t array_dim = 0;
  uint32_t isa_version = 0;  // major << 16 | minor
  std::span<const uint8_t> weights;
  uint64_t activation_bytes = 0;
  std::vector<StepSpec> steps;
  std::shared_ptr<const void> owner;
};

class ExecutableInstance;

class Executable final : public std::enable_shared_from_this<Executable> {
 public:
  // Loads `spec` onto `device`. INCOMPATIBLE when it targets other hardware;
  // RESOURCE_EXHAUSTED when device memory runs out.
  static Result<std::shared_ptr<Executable>> load(std::shared_ptr<Device> device,
                                                  ExecutableSpec spec);

  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  Device& device() const { return *device_; }
  const std::shared_ptr<Device>& shared_device() const { return device_; }
  const ExecutableSpec& spec() const { return spec_; }
  const std::vector<StepInfo>& steps() const { return steps_; }
  uint64_t activation_bytes() const { return activation_bytes_; }
  // Σ macs of the NPU segments, and Σ predicted cycles.
  uint64_t total_macs() const { return total_macs_; }
  uint64_t predicted_cycles() const { return predicted_cycles_; }
  const std::shared_ptr<Buffer>& weights() const { return weights_; }

  // Allocates the device state of one request (see the file comment).
  Result<std::unique_ptr<ExecutableInstance>> instantiate();

 private:
  Executable() = default;
  std::shared_ptr<Device> device_;
  ExecutableSpec spec_;
  std::shared_ptr<Buffer> weights_;  // null when the model has no weights
  std::vector<StepInfo> steps_;
  uint64_t activation_bytes_ = 0;
  uint64_t command_bytes_ = 0;  // one instance's command buffer
  uint64_t total_macs_ = 0;
  uint64_t predicted_cycles_ = 0;
};

class ExecutableInstance final {
 public:
  ExecutableInstance(const ExecutableInstance&) = delete;
  ExecutableInstance& operator=(const ExecutableInstance&) = delete;

  const Executable& executable() const { return *executable_; }
  // The request's activation buffer: inputs are written here, outputs read from here.
  Buffer& activations() const { return *activations_; }
  const std::shared_ptr<Buffer>& shared_activations() const { return activations_; }
  // The job of NPU step `step` (INVALID_ARGUMENT for a host step or an index out of range).
  // Recorded once by instantiate(): a copy shares it, with no allocation per request.
  Result<CommandBuffer> command_buffer(size_t step) const;

 private:
  friend class Executable;
  ExecutableInstance() = default;
  std::shared_ptr<Executable> executable_;
  std::shared_ptr<Buffer> activations_;
  std::shared_ptr<Buffer> commands_;
  std::vector<std::optional<CommandBuffer>> recorded_;  // by step; empty for host steps
};

}  // namespace npu::hal
