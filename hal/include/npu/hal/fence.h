// hal::Fence: the completion of one submitted job, named by (context, sequence number).
//
// wait() blocks the calling thread until the job has ended or the std::chrono deadline has
// passed, and turns the job's end into a Status:
//   OK                  the job ran to its FENCE; JobInfo carries its device cycles
//   DEADLINE_EXCEEDED   the deadline passed first; the job may still run (wait again later)
//   DEVICE_TIMEOUT      the device made no progress on this job and was reset
//   ABORTED             a reset caused by another job (or the context's destruction) ended it;
//                       the job did not complete and may be resubmitted
//   DEVICE_FAULT        the job faulted: the message names the device error
//                       (npu::hw::error_name) and its address; a page fault bans the context
//   DEVICE_LOST         the device is gone
// Once the job has ended the result is cached: later waits return it at once.
//
// Ownership: a Fence is a cheap, copyable handle to shared state. That state holds the
// context and every buffer of the job until the job has ended (observed by any wait() or
// is_signaled()), then drops the buffers.
// Threading: all members are thread-safe; several threads may wait on the same fence.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "npu/hal/status.h"

namespace npu::hal {

class Buffer;
class Context;

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline deadline_after(Clock::duration d) { return Clock::now() + d; }
inline constexpr Deadline kInfiniteDeadline = Deadline::max();

// How a job ended, as the backend reports it.
enum class JobEnd : uint8_t { kSuccess, kAborted, kTimeout, kPageFault, kDeviceError, kLost };

struct JobResult {
  JobEnd end = JobEnd::kSuccess;
  uint32_t device_error = 0;  // npu::hw::ErrorCode value
  uint64_t error_addr = 0;
  uint64_t device_cycles = 0;
};

// What a successful wait reports.
struct JobInfo {
  uint64_t device_cycles = 0;
};

// Status for a job's end; `what` names the job ("sim: context 3 job 7").
Status job_result_to_status(const JobResult& result, const std::string& what);

class Fence final {
 public:
  Fence() = default;  // an empty fence: wait() returns INVALID_ARGUMENT
  Fence(std::shared_ptr<Context> context, uint64_t sequence,
        std::vector<std::shared_ptr<Buffer>> keep_alive);
  // `keep_alive` holds the job's buffers (CommandBuffer::keep_alive()) until the job has ended.
  Fence(std::shared_ptr<Context> context, uint64_t sequence, std::shared_ptr<const void> keep_alive);

  bool valid() const { return state_ != nullptr; }
  uint64_t sequence() const;
  Context* context() const;

  // Blocks until the job has ended or `deadline` passes (see the file comment).
  Result<JobInfo> wait(Deadline deadline) const;
  // wait() with a deadline in the past: never blocks; DEADLINE_EXCEEDED while running.
  Result<JobInfo> poll() const { return wait(Clock::time_point::min()); }

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace npu::hal
