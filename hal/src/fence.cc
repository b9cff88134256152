// Fences: waiting with deadlines, caching the end of a job, and job status -> Status.
#include "npu/hal/fence.h"

#include <cstdio>
#include <mutex>

#include "npu/hal/buffer.h"
#include "npu/hal/context.h"
#include "npu/hw/config.h"

namespace npu::hal {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Status job_result_to_status(const JobResult& r, const std::string& what) {
  switch (r.end) {
    case JobEnd::kSuccess:
      return Status::ok();
    case JobEnd::kAborted:
      return make_error(StatusCode::kAborted,
                        what + " was aborted before it completed (a device reset caused by "
                               "another job, or its context was destroyed); it may be resubmitted");
    case JobEnd::kTimeout:
      return make_error(StatusCode::kDeviceTimeout,
                        what + " made no progress and the device was reset (hang timeout); "
                               "the command stream is likely wrong: recompile the model or "
                               "replay it with npu-sim-diff");
    case JobEnd::kPageFault:
    case JobEnd::kDeviceError: {
      const auto code = static_cast<hw::ErrorCode>(r.device_error);
      const std::string name(hw::error_name(code));
      std::string where;
      switch (code) {
        case hw::ErrorCode::kPageFault: where = " at virtual address " + hex(r.error_addr); break;
        case hw::ErrorCode::kBusError:
        case hw::ErrorCode::kBadRingEntry:
          where = " at physical address " + hex(r.error_addr);
          break;
        case hw::ErrorCode::kSpRange: where = " (scratchpad index " + hex(r.error_addr) + ")"; break;
        case hw::ErrorCode::kTokenDeadlock:
          where = " (token channel " + std::to_string(r.error_addr) + ")";
          break;
        default: where = " at " + hex(r.error_addr); break;
      }
      return make_error(StatusCode::kDeviceFault,
                        what + " faulted: " + name + where +
                            (r.end == JobEnd::kPageFault ? "; its context is banned" : ""));
    }
    case JobEnd::kLost:
      return make_error(StatusCode::kDeviceLost,
                        what + ": the device is gone (unplugged or its driver unloaded); "
                               "reopen the device");
  }
  return make_error(StatusCode::kInternal, what + ": unknown job end");
}

struct Fence::State {
  std::shared_ptr<Context> context;
  uint64_t sequence = 0;
  std::mutex mu;
  std::shared_ptr<const void> keep_alive;  // guarded by mu; cleared at the end
  bool ended = false;                               // guarded by mu
  Status status;                                    // valid when ended
  JobInfo info;
};

Fence::Fence(std::shared_ptr<Context> context, uint64_t sequence,
             std::vector<std::shared_ptr<Buffer>> keep_alive)
    : Fence(std::move(context), sequence,
            std::make_shared<const std::vector<std::shared_ptr<Buffer>>>(std::move(keep_alive))) {}

Fence::Fence(std::shared_ptr<Context> context, uint64_t sequence,
             std::shared_ptr<const void> keep_alive)
    : state_(std::make_shared<State>()) {
  state_->context = std::move(context);
  state_->sequence = sequence;
  state_->keep_alive = std::move(keep_alive);
}

uint64_t Fence::sequence() const { return state_ ? state_->sequence : 0; }
Context* Fence::context() const { return state_ ? state_->context.get() : nullptr; }

Result<JobInfo> Fence::wait(Deadline deadline) const {
  if (!state_) return make_error(StatusCode::kInvalidArgument, "wait on an empty fence");
  {
    std::lock_guard lock(state_->mu);
    if (state_->ended) {
      if (!state_->status.is_ok()) return state_->status;
      return state_->info;
    }
  }
  // The wait itself runs without the lock so several threads may wait at once.
  Result<JobResult> r = state_->context->wait_job(state_->sequence, deadline);
  if (!r.is_ok()) {
    if (r.status().code() == StatusCode::kDeadlineExceeded) return r.status();
    // A failed wait (device lost, ...) ends the job for us too.
  }
  std::shared_ptr<const void> release;
  std::lock_guard lock(state_->mu);
  if (!state_->ended) {
    state_->ended = true;
    if (r.is_ok()) {
      // The job's name only in an error: no string built per successful job.
      if (r->end != JobEnd::kSuccess)
        state_->status = job_result_to_status(
            *r, state_->context->name() + " job " + std::to_string(state_->sequence));
      state_->info.device_cycles = r->device_cycles;
    } else {
      state_->status = r.status();
    }
    release.swap(state_->keep_alive);
  }
  if (!state_->status.is_ok()) return state_->status;
  return state_->info;
}

}  // namespace npu::hal
