// hal::Context: an execution context on a device: a bounded FIFO of jobs (its depth is
// DeviceInfo::queue_depth) served at one priority. Jobs of one context run in submission
// order; jobs of different contexts are interleaved by the device.
//
// Ownership: shared (shared_ptr); fences hold their context. Destroying the last reference
// destroys the driver context: its jobs that have not ended end ABORTED (only this context's).
// Threading: thread-safe; submit() never blocks (RESOURCE_EXHAUSTED when the queue is full).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npu/hal/command_buffer.h"
#include "npu/hal/device.h"
#include "npu/hal/fence.h"
#include "npu/hal/status.h"

namespace npu::hal {

enum class ContextHealth : uint8_t {
  kActive = 0,
  kBanned = 1,  // a job faulted; submits fail with UNAVAILABLE: create a new context
  kLost = 2,    // the device is gone
};

struct ContextStatus {
  ContextHealth health = ContextHealth::kActive;
  uint32_t pending = 0;       // jobs submitted and not yet ended
  uint32_t reset_count = 0;   // device resets that affected this context
  uint32_t fault_code = 0;    // device error that banned it
  uint64_t fault_addr = 0;
};

class Context : public std::enable_shared_from_this<Context> {
 public:
  virtual ~Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  virtual uint32_t id() const = 0;
  virtual Priority priority() const = 0;
  virtual Device& device() const = 0;
  // "<device spec>: context <id>", for messages.
  std::string name() const;

  // Queues `commands`; returns the fence of the job, which signals when it has ended.
  // Validates that every buffer belongs to this context's device. Errors: RESOURCE_EXHAUSTED
  // (queue full: wait for an older fence), UNAVAILABLE (the context is banned after a fault:
  // create a new one), DEVICE_LOST. Never blocks.
  //
  // `wait` is IREE's queue_execute wait list: the device starts the job only after every
  // fence in it has signalled, and if one of those jobs did not succeed this one ends ABORTED
  // without running. The host is not involved in between. Fences must be of contexts of this
  // device (INVALID_ARGUMENT otherwise); at most kMaxWaitFences; a non-empty list needs
  // DeviceInfo::wait_fences (UNSUPPORTED otherwise: the caller waits on the host instead).
  Result<Fence> submit(const CommandBuffer& commands, std::span<const Fence> wait = {});

  // queue_execute over a batch: runs `commands` in order, the first after every fence of
  // `wait`, each later one after the one before it, and appends one fence per command buffer
  // to `*signal` (signal->back() signals when the whole batch has ended; a failed job aborts
  // the ones after it). Commands of one context run in order anyway; the chain adds that a
  // failure stops the rest. When a submit fails part-way, `*signal` holds the fences of the
  // jobs already queued (they still hold their buffers: wait on them) and the error is
  // returned. A batch of more than one needs DeviceInfo::wait_fences.
  static constexpr size_t kMaxWaitFences = 64;
  Status execute(std::span<const Fence> wait, std::span<const CommandBuffer> commands,
                 std::vector<Fence>* signal);

  // Current health and counters (one driver query).
  virtual Result<ContextStatus> query() = 0;

  // Backend hooks, used by submit() and Fence.
  virtual Result<uint64_t> submit_job(const CommandBuffer& commands) = 0;
  // As submit_job, started on the device after the jobs of `wait` (validated by submit()).
  // Backends with DeviceInfo::wait_fences implement it; the default says UNSUPPORTED.
  virtual Result<uint64_t> submit_job_after(const CommandBuffer& commands,
                                            std::span<const Fence> wait);
  // Waits for job `sequence`; DEADLINE_EXCEEDED if `deadline` passes first.
  virtual Result<JobResult> wait_job(uint64_t sequence, Deadline deadline) = 0;

 protected:
  Context() = default;
};

}  // namespace npu::hal
