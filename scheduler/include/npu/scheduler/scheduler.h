// npu::scheduler: queues jobs (a loaded executable instance = an executable plus one request's
// activation buffer) onto a few device contexts ("lanes"), for many sessions at once.
//
// Queueing: one bounded queue of `queue_capacity` jobs shared by four priority levels; a lane
// always takes the highest-priority waiting job (FIFO within a level) and runs it on a device
// context of that priority. submit() waits for room until its deadline, try_submit() never
// waits; both report RESOURCE_EXHAUSTED when the queue stays full.
//
// Completion: every accepted job completes exactly once: its on_complete runs on the
// scheduler's completion thread (Boost.Asio io_context), with no scheduler lock held. It may
// call any scheduler member, including shutdown(), and may drop the last reference to the
// scheduler's owner. A job with JobSpec::complete_on_lane instead completes on the thread
// that ends it (its lane, or the caller of cancel() or shutdown() for a queued job): no hop
// to the completion thread, for callbacks that only hand the outcome over.
//
// Chaining: consecutive NPU steps of a job that need no host work between them (no host
// step, no step hook before or after them: JobSpec::hook_mask) are submitted together, each
// waiting on the fence of the one before (hal::Context::execute), on devices whose contexts
// honour wait lists (DeviceInfo::wait_fences). The lane then sleeps once per chain, on the
// chain's last fence, instead of once per step. On other devices every step is its own chain.
//
// Running on the caller: run() executes a job on the calling thread when a lane is idle and
// no job of its priority or higher is waiting (the caller borrows the lane's contexts), and
// otherwise queues it and sleeps until a lane has run it. Either way the result comes back
// as run()'s return value, with no hop through the completion thread.
//
// Streaming: a lane that takes a single-chain job (NPU steps only, no host work between them)
// keeps a window of up to SchedulerOptions::pipeline_depth such jobs of that priority on the
// device and completes them in order, taking the ones queued behind them as it goes. A job
// submitted while a lane streams at its priority, with room and no job of that priority or
// higher waiting, enters the window at once on the submitting thread: submit() then runs its
// kBeforeDevice hook and queues it on the device before it returns, and the lane only
// completes it. Jobs in a window are running, not queued (see Cancellation); the priority
// order applies to jobs that wait. pipeline_depth = 1: every job waits for a lane.
//
// Cancellation (JobHandle::cancel) touches only that job: a queued job completes CANCELLED at
// once; a running job stops before its next step, and completes CANCELLED once the device has
// finished with its buffers (a chain of device steps already submitted runs to its end first).
// Other jobs, and the device context, are unaffected.
//
// Recovery: a step that ends ABORTED (a reset caused by another job) is resubmitted once,
// with the rest of its chain; a second ABORTED in that chain is reported. DEVICE_TIMEOUT and DEVICE_FAULT are reported, never retried. A
// context that is banned (after a page fault) or lost is replaced by a new one before the next
// job. A step that outlives job_timeout on the host side is reported as DEVICE_TIMEOUT and its
// context is destroyed (which ends only that job) and replaced.
//
// Threading: all members are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "npu/hal/api.h"

namespace npu::scheduler {

using hal::Clock;
using hal::Deadline;
using hal::Priority;

struct JobOutcome {
  uint64_t job_id = 0;
  Status status;               // OK, CANCELLED, or the device/host error (with the request id)
  uint64_t device_cycles = 0;  // Σ over the NPU steps that ran
  uint32_t device_submissions = 0;
  uint32_t device_waits = 0;  // host sleeps on a device fence (one per chain that ran)
  double host_us = 0;         // time spent in step_hook (host steps and boundary conversions)
  bool retried = false;           // an ABORTED step was resubmitted
  bool instance_reusable = true;  // false when the device may still touch its buffers
  Clock::time_point queued, started, finished;  // started == queued if it never ran
};

// Per-step hook: kBeforeDevice before NPU step `step` is submitted (e.g. quantise the values
// it reads), kAfterDevice after it completed successfully (e.g. dequantise the values it
// writes), kHost to run host step `step` (a HostSegment). An error ends the job with that
// status. It runs on the lane thread, except the kBeforeDevice of a job that enters a
// streaming lane's window from submit(): that one runs on the submitting thread.
enum class StepPhase : uint8_t { kBeforeDevice, kAfterDevice, kHost };
using StepHook = std::function<Status(size_t step, StepPhase phase)>;
using CompletionFn = std::function<void(JobOutcome&&)>;

// Bits of JobSpec::hook_mask, per step.
inline constexpr uint8_t kHookBefore = 1;  // the NPU step needs step_hook(kBeforeDevice)
inline constexpr uint8_t kHookAfter = 2;   // the NPU step needs step_hook(kAfterDevice)

struct JobSpec {
  std::shared_ptr<hal::ExecutableInstance> instance;  // required
  Priority priority = Priority::kNormal;
  uint64_t request_id = 0;  // named in error messages
  StepHook step_hook;       // optional; required when the executable has host steps
  // With step_hook: per step, which of kHookBefore/kHookAfter the NPU step needs (shorter or
  // null: every NPU step needs both). Steps that need neither chain on the device.
  std::shared_ptr<const std::vector<uint8_t>> hook_mask;
  CompletionFn on_complete; // submit(): required; called exactly once. run(): must be empty.
  // on_complete runs on the thread that ends the job, not the completion thread: a lane for
  // a job that ran, the caller of JobHandle::cancel() or shutdown() for a queued one. For
  // short callbacks that hand the outcome over (fill a promise, push to a queue and notify):
  // a lane runs no other job meanwhile. Such a callback must not block on this scheduler's
  // jobs (run(), waiting for another job's completion); it may submit, cancel, call
  // shutdown() (which then returns without waiting, as from the completion thread) and drop
  // the last reference to the scheduler's owner.
  bool complete_on_lane = false;
};

struct SchedulerOptions {
  uint32_t num_contexts = 2;     // lanes; each runs one job at a time on its own contexts
  uint32_t queue_capacity = 64;  // jobs waiting for a lane, all priorities together
  // Jobs one lane keeps on the device at once (1..64). Above 1, a lane that takes a
  // single-chain job streams (see the file comment): jobs of its priority queued behind it,
  // and jobs submitted while it has room, join it on the device, and the lane completes them
  // in order, sleeping at most once per half window. Jobs taken so are running: a cancel
  // completes them CANCELLED once the device is done with them.
  uint32_t pipeline_depth = 8;
  // Host-side bound on one device step. The driver's hang detection normally ends a hung job
  // first (DEVICE_TIMEOUT); this catches a device that never reports.
  std::chrono::milliseconds step_timeout{std::chrono::minutes(10)};
};

struct SchedulerStats {
  uint64_t submitted = 0;
  uint64_t completed = 0;  // every outcome, including errors and cancellations
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint64_t retried = 0;
  uint64_t contexts_created = 0;
  uint64_t contexts_replaced = 0;
  uint64_t queued = 0;  // now waiting for a lane
};

namespace internal {
struct Job;
struct Core;
}  // namespace internal

// A submitted job. Copyable; outlives the scheduler safely.
class JobHandle final {
 public:
  JobHandle() = default;
  uint64_t id() const;
  // Cancels this job only. A queued job completes CANCELLED at once (true). A running job
  // completes CANCELLED once the device is done with its current step, unless that step
  // fails, which is then reported (true). False when it had already completed. Never blocks.
  bool cancel() const;

 private:
  friend class Scheduler;
  explicit JobHandle(std::shared_ptr<internal::Job> job) : job_(std::move(job)) {}
  std::shared_ptr<internal::Job> job_;
};

class Scheduler final {
 public:
  static Result<std::unique_ptr<Scheduler>> create(std::shared_ptr<hal::Device> device,
                                                   SchedulerOptions options = {});
  // shutdown(kCancelPending).
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job, waiting for room until `deadline`. RESOURCE_EXHAUSTED when the queue is
  // still full at the deadline, UNAVAILABLE after shutdown, INVALID_ARGUMENT for a bad spec
  // (the job is then not accepted and on_complete is not called).
  Result<JobHandle> submit(JobSpec spec, Deadline deadline);
  // As submit() with a deadline of now: never blocks.
  Result<JobHandle> try_submit(JobSpec spec);
  // Runs a job and returns its outcome (see "Running on the caller" above); blocks until the
  // job has ended. `deadline` bounds only the wait for queue room (RESOURCE_EXHAUSTED); once
  // accepted the job runs to its end. Errors as submit(); the outcome's status carries the
  // job's own error. spec.on_complete must be empty. Safe from any thread except a callback
  // of this scheduler.
  Result<JobOutcome> run(JobSpec spec, Deadline deadline);

  enum class ShutdownMode {
    kDrain,          // run every queued job, then stop
    kCancelPending,  // queued jobs complete CANCELLED; running jobs finish
  };
  // Stops accepting jobs and waits until every accepted job has completed and its
  // on_complete has returned. Idempotent; safe from any thread, including from on_complete.
  // From on_complete it does not wait: on the completion thread it stops accepting and lets
  // the rest finish behind it; from a complete_on_lane callback it stops accepting and hands
  // the rest of the shutdown (joining the lanes, waiting for the jobs) to a thread of its own,
  // which keeps the scheduler's state alive until it is done.
  void shutdown(ShutdownMode mode);

  SchedulerStats stats() const;
  hal::Device& device() const;
  const SchedulerOptions& options() const;

 private:
  explicit Scheduler(std::shared_ptr<internal::Core> core);
  std::shared_ptr<internal::Core> core_;
};

}  // namespace npu::scheduler
