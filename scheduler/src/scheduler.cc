// The scheduler: bounded priority queues (one mutex, a deque per priority), lanes that own
// device contexts, and a Boost.Asio completion thread.
//
// The queues were Boost.Lockfree queues of heap-allocated shared_ptrs. On x86-64 their nodes
// are linked by compressed pointers (a 16-bit tag in the upper bits), which LeakSanitizer does
// not recognise as pointers: it could not see what a live queue holds, so its reports could
// neither be trusted nor be clean. A lane takes the lock once per job, next to a semaphore
// wake-up and a device round trip; runtime_scheduler_bench showed no loss (figures in the
// commit that made the change).
#include "npu/scheduler/scheduler.h"

#include "npu/driver/log.h"

#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <semaphore>
#include <shared_mutex>
#include <thread>
#include <vector>

namespace npu::scheduler {
namespace internal {

enum JobState : int { kQueued = 0, kRunning = 1, kDone = 2 };

struct Job {
  uint64_t id = 0;
  JobSpec spec;
  std::atomic<int> state{kQueued};
  std::atomic<bool> cancel_requested{false};
  Clock::time_point queued;
  std::shared_ptr<Core> core;  // reset when the job has completed
};

struct Core : std::enable_shared_from_this<Core> {
  std::shared_ptr<hal::Device> device;
  SchedulerOptions options;
  bool log_sched = false;

  // Waiting jobs, one FIFO per priority (cancelled ones stay until a lane or shutdown pops
  // them: the state transition decides, not the queue).
  std::mutex queues_mu;
  std::array<std::deque<std::shared_ptr<Job>>, hal::kNumPriorities> queues;  // by queues_mu
  std::counting_semaphore<> ready{0};  // one token per queued job, plus lane exit tokens

  // Capacity: jobs accepted and not yet taken by a lane or cancelled.
  std::mutex slots_mu;
  std::condition_variable slots_cv;
  uint32_t slots_used = 0;
  bool submits_stopped = false;  // guarded by slots_mu; wakes submits waiting for room

  // Accepted and not yet completed (on_complete returned).
  std::mutex outstanding_mu;
  std::condition_variable outstanding_cv;
  uint64_t outstanding = 0;

  std::shared_mutex accept_mu;  // submit (shared) vs. shutdown (exclusive)
  bool accepting = true;         // guarded by accept_mu
  std::atomic<bool> lanes_stopping{false};
  std::once_flag shutdown_once;
  std::mutex shutdown_mu;
  bool shutdown_done = false;

  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread completion_thread;
  std::thread::id completion_thread_id;
  std::vector<std::thread> lanes;

  std::atomic<uint64_t> next_id{1};
  std::atomic<uint64_t> n_submitted{0}, n_completed{0}, n_failed{0}, n_cancelled{0},
      n_retried{0}, n_ctx_created{0}, n_ctx_replaced{0};

  void release_slot() {
    {
      std::lock_guard lock(slots_mu);
      --slots_used;
    }
    slots_cv.notify_one();
  }

  // Completes `job` exactly once: the caller has won the transition to kDone.
  void complete(const std::shared_ptr<Job>& job, JobOutcome outcome) {
    outcome.job_id = job->id;
    outcome.finished = Clock::now();
    if (outcome.started == Clock::time_point{}) outcome.started = outcome.queued;
    if (outcome.status.code() == StatusCode::kCancelled) {
      n_cancelled.fetch_add(1, std::memory_order_relaxed);
    } else if (!outcome.status.is_ok()) {
      n_failed.fetch_add(1, std::memory_order_relaxed);
    }
    if (log_sched)
      npu::log::write(npu::log::kSched, "job %llu (request %llu) completed: %s",
                   static_cast<unsigned long long>(job->id),
                   static_cast<unsigned long long>(job->spec.request_id),
                   outcome.status.is_ok() ? "OK" : outcome.status.to_string().c_str());
    boost::asio::post(io, [self = shared_from_this(), job, outcome = std::move(outcome)]() mutable {
      CompletionFn fn = std::move(job->spec.on_complete);
      job->spec = JobSpec{};  // drop the instance and host hook before reporting
      job->core.reset();
      fn(std::move(outcome));
      self->n_completed.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard lock(self->outstanding_mu);
        --self->outstanding;
      }
      self->outstanding_cv.notify_all();
    });
  }

  JobOutcome cancelled_outcome(const Job& job) const {
    JobOutcome o;
    o.status = make_error(StatusCode::kCancelled,
                          "request " + std::to_string(job.spec.request_id) + " was cancelled");
    o.queued = job.queued;
    return o;
  }

  void push(std::shared_ptr<Job> job, size_t priority) {
    std::lock_guard lock(queues_mu);
    queues[priority].push_back(std::move(job));
  }

  // The oldest job of the highest priority that has one, or null.
  std::shared_ptr<Job> pop() {
    std::lock_guard lock(queues_mu);
    for (int p = hal::kNumPriorities - 1; p >= 0; --p) {
      auto& q = queues[static_cast<size_t>(p)];
      if (!q.empty()) {
        std::shared_ptr<Job> job = std::move(q.front());
        q.pop_front();
        return job;
      }
    }
    return nullptr;
  }

  void lane_main(uint32_t lane);
};

// One lane: a worker thread with its own device context per priority.
class Lane {
 public:
  Lane(Core& core, uint32_t index) : core_(core), index_(index) {}

  void run_job(const std::shared_ptr<Job>& job) {
    JobOutcome out;
    out.queued = job->queued;
    out.started = Clock::now();
    out.status = execute(*job, out);
    if (!out.status.is_ok() && out.status.code() != StatusCode::kCancelled)
      out.status = Status(out.status.code(), "request " + std::to_string(job->spec.request_id) +
                                                 ": " + out.status.message());
    if (job->cancel_requested.load() && out.status.is_ok()) out = cancelled_keep(*job, out);
    job->state.store(kDone);
    core_.complete(job, std::move(out));
  }

 private:
  JobOutcome cancelled_keep(const Job& job, const JobOutcome& ran) {
    JobOutcome o = core_.cancelled_outcome(job);
    o.started = ran.started;
    o.device_cycles = ran.device_cycles;
    o.device_submissions = ran.device_submissions;
    o.instance_reusable = ran.instance_reusable;
    return o;
  }

  Result<std::shared_ptr<hal::Context>> context(Priority p) {
    auto& slot = contexts_[static_cast<size_t>(p)];
    if (!slot) {
      NPU_ASSIGN_OR_RETURN(slot, core_.device->create_context(p));
      core_.n_ctx_created.fetch_add(1, std::memory_order_relaxed);
      if (core_.log_sched)
        npu::log::write(npu::log::kSched, "lane %u uses %s (%s priority)", index_,
                     slot->name().c_str(), std::string(hal::priority_name(p)).c_str());
    }
    return slot;
  }

  // Drops the context of priority `p`; the next job creates a new one.
  void replace(Priority p, const char* why) {
    auto& slot = contexts_[static_cast<size_t>(p)];
    if (!slot) return;
    if (core_.log_sched)
      npu::log::write(npu::log::kSched, "lane %u replaces %s (%s)", index_, slot->name().c_str(),
                   why);
    slot.reset();
    core_.n_ctx_replaced.fetch_add(1, std::memory_order_relaxed);
  }

  // After a failed job: replace the context when it is no longer usable.
  void check_health(Priority p) {
    auto& slot = contexts_[static_cast<size_t>(p)];
    if (!slot) return;
    Result<hal::ContextStatus> st = slot->query();
    if (!st.is_ok() || st->health != hal::ContextHealth::kActive)
      replace(p, st.is_ok() ? (st->health == hal::ContextHealth::kBanned ? "banned" : "lost")
                            : "query failed");
  }

  Status execute(Job& job, JobOutcome& out) {
    hal::ExecutableInstance& inst = *job.spec.instance;
    const auto& steps = inst.executable().steps();
    const Priority prio = job.spec.priority;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (job.cancel_requested.load()) return core_.cancelled_outcome(job).status;
      if (steps[i].kind == hal::StepKind::kHost) {
        if (!job.spec.step_hook)
          return make_error(StatusCode::kUnsupported,
                            "host operator " + steps[i].op_type + " (node '" +
                                steps[i].node_name + "') has no host kernel");
        NPU_RETURN_IF_ERROR(job.spec.step_hook(i, StepPhase::kHost));
        continue;
      }
      if (job.spec.step_hook) NPU_RETURN_IF_ERROR(job.spec.step_hook(i, StepPhase::kBeforeDevice));
      NPU_ASSIGN_OR_RETURN(hal::CommandBuffer cb, inst.command_buffer(i));
      bool resubmitted = false;
      bool replaced_banned = false;
      for (;;) {
        NPU_ASSIGN_OR_RETURN(std::shared_ptr<hal::Context> ctx, context(prio));
        Result<hal::Fence> fence = ctx->submit(cb);
        if (!fence.is_ok()) {
          if (fence.status().code() == StatusCode::kUnavailable && !replaced_banned) {
            // Banned by an earlier fault; this job never reached the device.
            replaced_banned = true;
            replace(prio, "banned");
            continue;
          }
          if (fence.status().code() == StatusCode::kDeviceLost) replace(prio, "device lost");
          return fence.status();
        }
        ++out.device_submissions;
        Result<hal::JobInfo> r =
            fence->wait(Clock::now() + core_.options.step_timeout);
        if (r.is_ok()) {
          out.device_cycles += r->device_cycles;
          if (job.spec.step_hook)
            NPU_RETURN_IF_ERROR(job.spec.step_hook(i, StepPhase::kAfterDevice));
          break;
        }
        const StatusCode code = r.status().code();
        if (code == StatusCode::kDeadlineExceeded) {
          // The device never reported. Destroying the context ends this job (the only one on
          // it); its buffers may still be touched, so they are not reused.
          out.instance_reusable = false;
          fence = hal::Fence();
          replace(prio, "step timeout");
          return make_error(StatusCode::kDeviceTimeout,
                            "no completion within the step timeout of " +
                                std::to_string(core_.options.step_timeout.count()) +
                                " ms; the context was destroyed: " + r.status().message());
        }
        if (code == StatusCode::kAborted && !resubmitted) {
          resubmitted = true;
          out.retried = true;
          core_.n_retried.fetch_add(1, std::memory_order_relaxed);
          if (core_.log_sched)
            npu::log::write(npu::log::kSched, "request %llu step %zu aborted, resubmitting once",
                         static_cast<unsigned long long>(job.spec.request_id), i);
          check_health(prio);
          continue;
        }
        check_health(prio);
        if (code == StatusCode::kDeviceLost) replace(prio, "device lost");
        return r.status();
      }
    }
    return Status::ok();
  }

  Core& core_;
  uint32_t index_;
  std::array<std::shared_ptr<hal::Context>, hal::kNumPriorities> contexts_;
};

void Core::lane_main(uint32_t index) {
  Lane lane(*this, index);
  for (;;) {
    ready.acquire();
    std::shared_ptr<Job> job = pop();
    if (!job) {
      if (lanes_stopping.load()) return;
      continue;
    }
    int expected = kQueued;
    if (!job->state.compare_exchange_strong(expected, kRunning)) continue;  // cancelled
    release_slot();
    lane.run_job(job);
  }
}

}  // namespace internal

using internal::Core;
using internal::Job;

uint64_t JobHandle::id() const { return job_ ? job_->id : 0; }

bool JobHandle::cancel() const {
  if (!job_) return false;
  job_->cancel_requested.store(true);
  int expected = internal::kQueued;
  if (job_->state.compare_exchange_strong(expected, internal::kDone)) {
    std::shared_ptr<Core> core = job_->core;  // set while the job is not completed
    core->release_slot();
    core->complete(job_, core->cancelled_outcome(*job_));
    return true;
  }
  return expected == internal::kRunning;
}

Scheduler::Scheduler(std::shared_ptr<Core> core) : core_(std::move(core)) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(std::shared_ptr<hal::Device> device,
                                                     SchedulerOptions options) {
  if (!device) return make_error(StatusCode::kInvalidArgument, "scheduler needs a device");
  if (options.num_contexts == 0 || options.num_contexts > 64)
    return make_error(StatusCode::kInvalidArgument, "num_contexts must be 1..64");
  if (options.queue_capacity == 0 || options.queue_capacity > 65536)
    return make_error(StatusCode::kInvalidArgument, "queue_capacity must be 1..65536");
  auto core = std::make_shared<Core>();
  core->device = std::move(device);
  core->options = options;
  core->log_sched = npu::log::enabled(npu::log::kSched);
  core->work.emplace(boost::asio::make_work_guard(core->io));
  core->completion_thread = std::thread([c = core] { c->io.run(); });
  core->completion_thread_id = core->completion_thread.get_id();
  for (uint32_t i = 0; i < options.num_contexts; ++i)
    core->lanes.emplace_back([c = core.get(), i] { c->lane_main(i); });
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(core)));
}

Scheduler::~Scheduler() { shutdown(ShutdownMode::kCancelPending); }

Result<JobHandle> Scheduler::try_submit(JobSpec spec) {
  return submit(std::move(spec), Clock::time_point::min());
}

Result<JobHandle> Scheduler::submit(JobSpec spec, Deadline deadline) {
  if (!spec.instance || !spec.on_complete)
    return make_error(StatusCode::kInvalidArgument, "a job needs an instance and on_complete");
  if (&spec.instance->executable().device() != core_->device.get())
    return make_error(StatusCode::kInvalidArgument,
                      "the job's executable is loaded on another device than this scheduler's");
  const auto prio = static_cast<size_t>(spec.priority);
  if (prio >= hal::kNumPriorities) return make_error(StatusCode::kInvalidArgument, "bad priority");

  {
    std::shared_lock accept(core_->accept_mu);
    if (!core_->accepting)
      return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
  }
  // Wait for room without holding accept_mu, so shutdown never waits for a blocked submit.
  {
    std::unique_lock lock(core_->slots_mu);
    auto ready = [&] {
      return core_->submits_stopped || core_->slots_used < core_->options.queue_capacity;
    };
    if (!ready()) {
      if (deadline == Deadline::max()) {
        core_->slots_cv.wait(lock, ready);
      } else if (!core_->slots_cv.wait_until(lock, deadline, ready)) {
        return make_error(StatusCode::kResourceExhausted,
                          "the scheduler queue is full (" +
                              std::to_string(core_->options.queue_capacity) +
                              " jobs waiting); retry later or raise queue_capacity");
      }
    }
    if (core_->submits_stopped)
      return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
    ++core_->slots_used;
  }
  std::shared_lock accept(core_->accept_mu);
  if (!core_->accepting) {
    core_->release_slot();
    return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
  }
  {
    std::lock_guard lock(core_->outstanding_mu);
    ++core_->outstanding;
  }
  auto job = std::make_shared<Job>();
  job->id = core_->next_id.fetch_add(1);
  job->spec = std::move(spec);
  job->queued = Clock::now();
  job->core = core_;
  core_->n_submitted.fetch_add(1, std::memory_order_relaxed);
  core_->push(job, prio);
  core_->ready.release();
  return JobHandle(std::move(job));
}

void Scheduler::shutdown(ShutdownMode mode) {
  Core& c = *core_;
  std::unique_lock shutdown_lock(c.shutdown_mu, std::defer_lock);
  {
    std::unique_lock accept(c.accept_mu);
    if (!c.accepting) {
      accept.unlock();
      // Another caller is shutting down or has: wait for it, unless we are a callback (the
      // first caller may be waiting for us).
      if (std::this_thread::get_id() != c.completion_thread_id) shutdown_lock.lock();
      return;
    }
    c.accepting = false;
    shutdown_lock.lock();  // before accept_mu is released: later callers wait for us
  }
  {
    std::lock_guard lock(c.slots_mu);
    c.submits_stopped = true;
  }
  c.slots_cv.notify_all();
  if (mode == ShutdownMode::kCancelPending) {
    // Drain the queues ourselves; lanes racing us lose the state transition.
    for (;;) {
      std::shared_ptr<Job> job = c.pop();
      if (!job) break;
      int expected = internal::kQueued;
      if (job->state.compare_exchange_strong(expected, internal::kDone)) {
        c.release_slot();
        c.complete(job, c.cancelled_outcome(*job));
      }
    }
  }
  c.lanes_stopping.store(true);
  c.ready.release(static_cast<std::ptrdiff_t>(c.lanes.size()));
  for (auto& t : c.lanes)
    if (t.joinable()) t.join();
  c.lanes.clear();
  // Jobs left in the queues were cancelled and popped by nobody: clear the tombstones.
  while (c.pop()) {
  }
  const bool on_completion_thread = std::this_thread::get_id() == c.completion_thread_id;
  if (!on_completion_thread) {
    std::unique_lock lock(c.outstanding_mu);
    c.outstanding_cv.wait(lock, [&] { return c.outstanding == 0; });
  }
  c.work.reset();
  if (on_completion_thread) {
    c.completion_thread.detach();  // it holds the core; it ends after the last completion
  } else if (c.completion_thread.joinable()) {
    c.completion_thread.join();
  }
  c.shutdown_done = true;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.submitted = core_->n_submitted.load();
  s.completed = core_->n_completed.load();
  s.failed = core_->n_failed.load();
  s.cancelled = core_->n_cancelled.load();
  s.retried = core_->n_retried.load();
  s.contexts_created = core_->n_ctx_created.load();
  s.contexts_replaced = core_->n_ctx_replaced.load();
  std::lock_guard lock(core_->slots_mu);
  s.queued = core_->slots_used;
  return s;
}

hal::Device& Scheduler::device() const { return *core_->device; }
const SchedulerOptions& Scheduler::options() const { return core_->options; }

}  // namespace npu::scheduler
