// The scheduler: bounded priority queues (one mutex, a deque per priority), lanes that own
// device contexts (run by worker threads, or borrowed by a run() caller), and a Boost.Asio
// completion thread.
//
// The queues were Boost.Lockfree queues of heap-allocated shared_ptrs. On x86-64 their nodes
// are linked by compressed pointers (a 16-bit tag in the upper bits), which LeakSanitizer does
// not recognise as pointers: it could not see what a live queue holds, so its reports could
// neither be trusted nor be clean. A lane takes the lock once per job, next to a semaphore
// wake-up and a device round trip; runtime_scheduler_bench showed no loss (figures in the
// commit that made the change).
#include "npu/scheduler/scheduler.h"

#include <pthread.h>

#include "npu/driver/log.h"

#include <algorithm>
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
#include <shared_mutex>
#include <thread>
#include <vector>

namespace npu::scheduler {
namespace internal {

enum JobState : int { kQueued = 0, kRunning = 1, kDone = 2 };

// Where run() sleeps until a lane has run its queued job: the outcome is handed over here
// instead of being posted to the completion thread.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<JobOutcome> outcome;  // guarded by mu
};

struct Job {
  uint64_t id = 0;
  JobSpec spec;
  std::atomic<int> state{kQueued};
  std::atomic<bool> cancel_requested{false};
  Clock::time_point queued;
  std::shared_ptr<Core> core;  // reset when the job has completed
  Waiter* waiter = nullptr;    // run(): the caller waiting for the outcome
};

class Lane;
struct Core;

// The scheduler whose complete_on_lane callback this thread is running, if any: shutdown()
// from there must neither wait for that job nor join the lane it runs on.
thread_local const Core* t_in_callback = nullptr;

struct Core : std::enable_shared_from_this<Core> {
  std::shared_ptr<hal::Device> device;
  SchedulerOptions options;
  bool log_sched = false;

  // Waiting jobs, one FIFO per priority (cancelled ones stay until a lane or shutdown pops
  // them: the state transition decides, not the queue), and the lanes no one is using.
  // Workers sleep on work_cv until a job waits and a lane is idle.
  std::mutex queues_mu;
  std::array<std::deque<std::shared_ptr<Job>>, hal::kNumPriorities> queues;  // by queues_mu
  size_t queued_jobs = 0;                                                    // by queues_mu
  std::vector<Lane*> idle_lanes;                                             // by queues_mu
  // Per priority, the lanes streaming at it (Lane::try_enter).                // by queues_mu
  std::array<std::vector<Lane*>, hal::kNumPriorities> streamers;
  std::condition_variable work_cv;

  // Capacity: jobs accepted and not yet taken by a lane or cancelled.
  std::mutex slots_mu;
  std::condition_variable slots_cv;
  uint32_t slots_used = 0;
  bool submits_stopped = false;  // guarded by slots_mu; wakes submits waiting for room

  // Accepted and not yet completed (on_complete returned, or run() has its outcome).
  std::mutex outstanding_mu;
  std::condition_variable outstanding_cv;
  uint64_t outstanding = 0;

  std::shared_mutex accept_mu;  // submit (shared) vs. shutdown (exclusive)
  bool accepting = true;         // guarded by accept_mu
  bool lanes_stopping = false;   // guarded by queues_mu
  std::mutex shutdown_mu;
  std::condition_variable shutdown_cv;  // later shutdown() callers wait for shutdown_done
  bool shutdown_done = false;           // guarded by shutdown_mu

  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread completion_thread;
  std::thread::id completion_thread_id;
  std::vector<std::unique_ptr<Lane>> lane_objects;
  std::vector<std::thread> workers;

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

  void finished_one() {
    n_completed.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(outstanding_mu);
      --outstanding;
    }
    outstanding_cv.notify_all();
  }

  // Stamps and counts an outcome.
  void finalize(const Job& job, JobOutcome& outcome) {
    outcome.job_id = job.id;
    outcome.finished = Clock::now();
    if (outcome.started == Clock::time_point{}) outcome.started = outcome.queued;
    if (outcome.status.code() == StatusCode::kCancelled) {
      n_cancelled.fetch_add(1, std::memory_order_relaxed);
    } else if (!outcome.status.is_ok()) {
      n_failed.fetch_add(1, std::memory_order_relaxed);
    }
    if (log_sched)
      npu::log::write(npu::log::kSched, "job %llu (request %llu) completed: %s",
                   static_cast<unsigned long long>(job.id),
                   static_cast<unsigned long long>(job.spec.request_id),
                   outcome.status.is_ok() ? "OK" : outcome.status.to_string().c_str());
  }

  // Completes `job` exactly once: the caller has won the transition to kDone.
  void complete(const std::shared_ptr<Job>& job, JobOutcome outcome) {
    finalize(*job, outcome);
    if (Waiter* w = job->waiter) {
      job->spec = JobSpec{};
      job->core.reset();
      {
        // Notified under the lock: the waiter lives on run()'s stack and is gone once run()
        // sees the outcome.
        std::lock_guard lock(w->mu);
        w->outcome.emplace(std::move(outcome));
        w->cv.notify_one();
      }
      finished_one();
      return;
    }
    if (job->spec.complete_on_lane) {
      deliver_here(*job, std::move(outcome));
      return;
    }
    boost::asio::post(io, [self = shared_from_this(), job, outcome = std::move(outcome)]() mutable {
      self->deliver(*job, std::move(outcome));
    });
  }

  // Runs a complete_on_lane job's on_complete on this thread.
  void deliver_here(Job& job, JobOutcome&& outcome) {
    // The callback may drop the last reference to the scheduler: the core outlives it here.
    const std::shared_ptr<Core> keep = shared_from_this();
    const Core* outer = t_in_callback;
    t_in_callback = this;
    deliver(job, std::move(outcome));
    t_in_callback = outer;
  }

  // Completes several jobs (each won by the caller), in order: outcomes for run() callers and
  // complete_on_lane jobs are handed over at once, the rest reach the completion thread in one
  // hand-over.
  void complete_all(std::vector<std::pair<std::shared_ptr<Job>, JobOutcome>>& done) {
    std::vector<std::pair<std::shared_ptr<Job>, JobOutcome>> posted;
    for (auto& [job, outcome] : done) {
      if (job->waiter || job->spec.complete_on_lane) {
        complete(job, std::move(outcome));
        continue;
      }
      finalize(*job, outcome);
      posted.emplace_back(std::move(job), std::move(outcome));
    }
    done.clear();
    if (posted.empty()) return;
    boost::asio::post(io, [self = shared_from_this(), posted = std::move(posted)]() mutable {
      for (auto& [job, outcome] : posted) self->deliver(*job, std::move(outcome));
    });
  }

  // Runs a job's on_complete (completion thread, or deliver_here).
  void deliver(Job& job, JobOutcome&& outcome) {
    CompletionFn fn = std::move(job.spec.on_complete);
    job.spec = JobSpec{};  // drop the instance and host hook before reporting
    job.core.reset();
    fn(std::move(outcome));
    finished_one();
  }

  JobOutcome cancelled_outcome(const Job& job) const {
    JobOutcome o;
    o.status = make_error(StatusCode::kCancelled,
                          "request " + std::to_string(job.spec.request_id) + " was cancelled");
    o.queued = job.queued;
    return o;
  }

  void push(std::shared_ptr<Job> job, size_t priority) {
    {
      std::lock_guard lock(queues_mu);
      queues[priority].push_back(std::move(job));
      ++queued_jobs;
      if (idle_lanes.empty()) return;  // the lane that becomes idle looks at the queue
    }
    work_cv.notify_one();
  }

  std::shared_ptr<Job> pop_locked() {
    for (int p = hal::kNumPriorities - 1; p >= 0; --p) {
      auto& q = queues[static_cast<size_t>(p)];
      if (!q.empty()) {
        std::shared_ptr<Job> job = std::move(q.front());
        q.pop_front();
        --queued_jobs;
        return job;
      }
    }
    return nullptr;
  }

  // Whether a job of priority `from` or above waits.
  bool waits_from_locked(size_t from) const {
    for (size_t p = from; p < hal::kNumPriorities; ++p)
      if (!queues[p].empty()) return true;
    return false;
  }

  // The oldest job of the highest priority that has one, or null.
  std::shared_ptr<Job> pop() {
    std::lock_guard lock(queues_mu);
    return pop_locked();
  }

  // An idle lane for a job of `priority` run by its caller, when no job of that priority or
  // higher waits (it would be overtaken); else null.
  Lane* borrow_lane(size_t priority) {
    std::lock_guard lock(queues_mu);
    if (lanes_stopping || idle_lanes.empty() || waits_from_locked(priority)) return nullptr;
    Lane* lane = idle_lanes.back();
    idle_lanes.pop_back();
    return lane;
  }

  void return_lane(Lane* lane) {
    bool wake;
    {
      std::lock_guard lock(queues_mu);
      idle_lanes.push_back(lane);
      wake = queued_jobs > 0 || lanes_stopping;
    }
    if (wake) work_cv.notify_one();
  }

  // Enters a new job into the window of a lane streaming at its priority, on this thread,
  // when one has room and no job of that priority or higher waits (it would be overtaken).
  // False, with `job` untouched, when it must be queued.
  bool try_stream(std::shared_ptr<Job>& job, size_t priority);

  void worker_main();
  // The part of shutdown() after accepting stopped: cancels or drains the queue, stops the
  // lanes, waits for the outstanding jobs (unless `on_completion_thread`: it runs them) and
  // stops the completion thread.
  void finish_shutdown(Scheduler::ShutdownMode mode, bool on_completion_thread);
};

// One lane: the device contexts (one per priority) that one job at a time runs on. A worker
// thread or a run() caller holds it while it runs a job.
class Lane {
 public:
  Lane(Core& core, uint32_t index) : core_(core), index_(index) {}

  // Runs `job`'s steps and returns its outcome (not yet stamped by Core::finalize).
  JobOutcome run(Job& job) {
    JobOutcome out;
    out.queued = job.queued;
    out.started = Clock::now();
    Status st = execute(job, out);
    conclude(job, out, std::move(st));
    return out;
  }

 private:
  // Sets the outcome's status (naming the request) and ends the job's run.
  void conclude(Job& job, JobOutcome& out, Status st) {
    out.status = std::move(st);
    if (!out.status.is_ok() && out.status.code() != StatusCode::kCancelled)
      out.status = Status(out.status.code(), "request " + std::to_string(job.spec.request_id) +
                                                 ": " + out.status.message());
    if (job.cancel_requested.load() && out.status.is_ok()) out = cancelled_keep(job, out);
    job.state.store(kDone);
  }

  JobOutcome cancelled_keep(const Job& job, const JobOutcome& ran) {
    JobOutcome o = core_.cancelled_outcome(job);
    o.started = ran.started;
    o.device_cycles = ran.device_cycles;
    o.device_submissions = ran.device_submissions;
    o.device_waits = ran.device_waits;
    o.host_us = ran.host_us;
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

  static uint8_t hook_needs(const JobSpec& spec, size_t step) {
    if (!spec.step_hook) return 0;
    if (!spec.hook_mask || step >= spec.hook_mask->size()) return kHookBefore | kHookAfter;
    return (*spec.hook_mask)[step];
  }

  static Status hook(Job& job, JobOutcome& out, size_t step, StepPhase phase) {
    const Clock::time_point t = Clock::now();
    Status s = job.spec.step_hook(step, phase);
    out.host_us += std::chrono::duration<double, std::micro>(Clock::now() - t).count();
    return s;
  }

  Status execute(Job& job, JobOutcome& out) {
    hal::ExecutableInstance& inst = *job.spec.instance;
    const auto& steps = inst.executable().steps();
    const bool chains = core_.device->info().wait_fences;
    size_t i = 0;
    while (i < steps.size()) {
      if (job.cancel_requested.load()) return core_.cancelled_outcome(job).status;
      if (steps[i].kind == hal::StepKind::kHost) {
        if (!job.spec.step_hook)
          return make_error(StatusCode::kUnsupported,
                            "host operator " + steps[i].op_type + " (node '" +
                                steps[i].node_name + "') has no host kernel");
        NPU_RETURN_IF_ERROR(hook(job, out, i, StepPhase::kHost));
        ++i;
        continue;
      }
      // The chain [i, end): NPU steps with no host work between them.
      size_t end = i + 1;
      while (chains && end < steps.size() && end - i < max_chain() &&
             steps[end].kind == hal::StepKind::kNpu &&
             (hook_needs(job.spec, end - 1) & kHookAfter) == 0 &&
             (hook_needs(job.spec, end) & kHookBefore) == 0)
        ++end;
      if (hook_needs(job.spec, i) & kHookBefore)
        NPU_RETURN_IF_ERROR(hook(job, out, i, StepPhase::kBeforeDevice));
      NPU_RETURN_IF_ERROR(run_chain(job, out, i, end));
      if (hook_needs(job.spec, end - 1) & kHookAfter)
        NPU_RETURN_IF_ERROR(hook(job, out, end - 1, StepPhase::kAfterDevice));
      i = end;
    }
    return Status::ok();
  }

  // Submits NPU steps [first, end) as one chain and sleeps once, on its last fence.
  Status run_chain(Job& job, JobOutcome& out, size_t first, size_t end) {
    NPU_RETURN_IF_ERROR(command_buffers(job, first, end, commands_));
    bool replaced_banned = false;
    Status st = submit_from(job, out, commands_, 0, fences_, replaced_banned);
    return finish_chain(job, out, commands_, 0, fences_, std::move(st), replaced_banned);
  }

  static Status command_buffers(const Job& job, size_t first, size_t end,
                                std::vector<hal::CommandBuffer>& cmds) {
    cmds.clear();
    for (size_t s = first; s < end; ++s) {
      NPU_ASSIGN_OR_RETURN(hal::CommandBuffer cb, job.spec.instance->command_buffer(s));
      cmds.push_back(std::move(cb));
    }
    return Status::ok();
  }

  // Queues cmds[from..] as a chain on the context of the job's priority; `fences` gets one
  // fence per job queued (empty when the first submit failed). Returns the submit status.
  Status submit_from(Job& job, JobOutcome& out, std::vector<hal::CommandBuffer>& cmds,
                     size_t from, std::vector<hal::Fence>& fences, bool& replaced_banned) {
    const Priority prio = job.spec.priority;
    for (;;) {
      fences.clear();
      NPU_ASSIGN_OR_RETURN(std::shared_ptr<hal::Context> ctx, context(prio));
      Status st = ctx->execute({}, std::span(cmds).subspan(from), &fences);
      out.device_submissions += static_cast<uint32_t>(fences.size());
      if (!st.is_ok() && fences.empty()) {
        if (st.code() == StatusCode::kUnavailable && !replaced_banned) {
          // Banned by an earlier fault; this job never reached the device.
          replaced_banned = true;
          replace(prio, "banned");
          continue;
        }
        if (st.code() == StatusCode::kDeviceLost) replace(prio, "device lost");
      }
      return st;
    }
  }

  // Sleeps once, on the last fence of what submit_from queued (`st` its status), resubmits
  // from an ABORTED step once, and returns the chain's status.
  Status finish_chain(Job& job, JobOutcome& out, std::vector<hal::CommandBuffer>& cmds,
                      size_t from, std::vector<hal::Fence>& fences, Status st,
                      bool& replaced_banned) {
    const Priority prio = job.spec.priority;
    bool resubmitted = false;
    for (;;) {
      if (fences.empty()) return st;
      // The ones before the last ended first (one context runs its jobs in order, and each
      // waits on the one before).
      ++out.device_waits;
      Result<hal::JobInfo> last = fences.back().wait(
          Clock::now() + core_.options.step_timeout * static_cast<int64_t>(fences.size()));
      if (!last.is_ok() && last.status().code() == StatusCode::kDeadlineExceeded) {
        // The device never reported. Destroying the context ends this job (the only one on
        // it); its buffers may still be touched, so they are not reused.
        out.instance_reusable = false;
        fences.clear();
        replace(prio, "step timeout");
        return make_error(StatusCode::kDeviceTimeout,
                          "no completion within the step timeout of " +
                              std::to_string(core_.options.step_timeout.count()) +
                              " ms per step; the context was destroyed: " +
                              last.status().message());
      }
      // The first step that did not succeed decides; the ones after it were aborted by it.
      const size_t queued = fences.size();
      size_t failed = queued;
      Status failure;
      for (size_t k = 0; k < queued; ++k) {
        Result<hal::JobInfo> r = k + 1 == queued ? last : fences[k].poll();
        if (r.is_ok()) {
          out.device_cycles += r->device_cycles;
          continue;
        }
        failed = k;
        failure = r.status();
        break;
      }
      fences.clear();
      if (failed == queued) {
        if (st.is_ok()) return Status::ok();
        // Every queued step succeeded, but a later submit of the chain was refused.
        if (st.code() == StatusCode::kDeviceLost) replace(prio, "device lost");
        return st;
      }
      const StatusCode code = failure.code();
      if (code == StatusCode::kAborted && !resubmitted) {
        resubmitted = true;
        out.retried = true;
        core_.n_retried.fetch_add(1, std::memory_order_relaxed);
        if (core_.log_sched)
          npu::log::write(npu::log::kSched, "request %llu step %zu aborted, resubmitting once",
                       static_cast<unsigned long long>(job.spec.request_id), from + failed);
        check_health(prio);
        from += failed;
        st = submit_from(job, out, cmds, from, fences, replaced_banned);
        continue;
      }
      check_health(prio);
      if (code == StatusCode::kDeviceLost) replace(prio, "device lost");
      return failure;
    }
  }

 public:
  // Whether `job` is one chain: NPU steps only, no hook between them, no longer than a
  // context's queue. Such jobs can be pipelined: queued while the lane waits for earlier ones.
  bool single_chain(const Job& job) const {
    const auto& steps = job.spec.instance->executable().steps();
    if (steps.empty() || steps.size() > max_chain()) return false;
    if (steps.size() > 1 && !core_.device->info().wait_fences) return false;
    for (size_t s = 0; s < steps.size(); ++s) {
      if (steps[s].kind != hal::StepKind::kNpu) return false;
      if (s > 0 && ((hook_needs(job.spec, s - 1) & kHookAfter) ||
                    (hook_needs(job.spec, s) & kHookBefore)))
        return false;
    }
    return true;
  }

  // Streaming: a lane that takes a single-chain job (single_chain()) keeps a window of up to
  // pipeline_depth such jobs of that priority on its context, and completes them in order as
  // they end. Jobs enter the window from the back, from two sides: the lane takes them from
  // the queue between completions (refill), and submit() enters a job itself when the lane
  // has room and nothing waits ahead of it (try_enter): the caller's thread quantises and
  // queues it on the device, so that the device has the next job while the lane completes
  // the last one, with no thread woken. The lane only completes (harvest). Entries (and
  // contexts_) are serialised by window_mu_; the lane takes ended jobs out without it (see
  // head_ and tail_). Whether the lane takes entries (stream_prio_) is guarded by both
  // window_mu_ and Core::queues_mu.

  // Opens a stream at the priority of `first` (a claimed single-chain job), which takes the
  // window's first slot; the worker holds queues_mu, so that submit() can enter jobs from
  // now and none of them overtakes `first`: entries wait until it is on the device.
  void open_stream(std::shared_ptr<Job> first) {
    std::lock_guard w(window_mu_);
    // The window is empty: its slots may be resized.
    if (window_.size() < core_.options.pipeline_depth)
      window_.resize(core_.options.pipeline_depth);
    const auto prio = static_cast<size_t>(first->spec.priority);
    reserve(std::move(first));
    first_pending_ = true;
    stream_prio_ = static_cast<int>(prio);
    core_.streamers[prio].push_back(this);
  }

  // Runs the stream opened by open_stream() until its window is empty and no job it could
  // take waits. A claimed job that cannot stream (another kind, or too long for what is on
  // the device) ends the stream and is left in `after`, to run once the window has drained.
  // The outcomes are those of run().
  void stream(std::shared_ptr<Job>& after) {
    const auto prio = static_cast<size_t>(stream_prio_);
    {
      std::lock_guard w(window_mu_);
      Pending& p = at(tail_.load(std::memory_order_relaxed));  // reserved by open_stream()
      p.status = start(*p.job, p);
      publish();
      first_pending_ = false;
    }
    for (;;) {
      if (stream_prio_ >= 0) refill(prio, after);
      if (!harvest()) return;
    }
  }

  // submit()'s side: enters `job` (a new job, never queued) at the back of the window when
  // the lane streams at `prio` and the job fits. On this thread: its before-hook and its
  // submission. False, with `job` untouched, otherwise.
  bool try_enter(std::shared_ptr<Job>& job, size_t prio) {
    std::lock_guard w(window_mu_);
    if (stream_prio_ != static_cast<int>(prio) || first_pending_ ||
        count() >= core_.options.pipeline_depth ||
        !fits(*job, window_steps_.load(std::memory_order_relaxed)))
      return false;
    job->state.store(kRunning);
    enter(std::move(job));
    return true;
  }

 private:
  struct Pending {
    std::shared_ptr<Job> job;
    JobOutcome out;
    Status status;
    bool submitted = false;
    bool replaced_banned = false;
    Status submit_status;
    std::vector<hal::CommandBuffer> cmds;
    std::vector<hal::Fence> fences;
  };

  // A job taken out of the window, to be concluded outside window_mu_.
  struct Harvested {
    std::shared_ptr<Job> job;
    JobOutcome out;
    Status status;
    bool ran = false;  // its chain was submitted, and ended with `status`
  };

  // The slot of the window's `seq`-th job since the lane began (head_ and tail_ count them).
  Pending& at(uint64_t seq) { return window_[seq % window_.size()]; }

  // Jobs in the window. Exact for the lane's owner; for an entrant (holding window_mu_) at
  // least the number there, since the lane may have taken some out meanwhile.
  size_t count() const {
    return static_cast<size_t>(tail_.load(std::memory_order_acquire) -
                               head_.load(std::memory_order_acquire));
  }

  static size_t steps_of(const Job& job) {
    return job.spec.instance->executable().steps().size();
  }

  // Whether `job` can stream behind `steps` steps already in the window (they all sit in one
  // context's queue).
  bool fits(const Job& job, size_t steps) const {
    return single_chain(job) && steps + steps_of(job) <= core_.device->info().queue_depth;
  }

  // Fills the window's next slot for a claimed job; publish() makes it the lane's. Holds
  // window_mu_.
  Pending& reserve(std::shared_ptr<Job> job) {
    Pending& p = at(tail_.load(std::memory_order_relaxed));
    p.job = std::move(job);
    p.out = JobOutcome{};
    p.out.queued = p.job->queued;
    p.out.started = Clock::now();
    p.submitted = false;
    p.replaced_banned = false;
    window_steps_.fetch_add(steps_of(*p.job), std::memory_order_relaxed);
    return p;
  }

  // The reserved slot, started, joins the window: the lane may take it from now. Holds
  // window_mu_.
  void publish() {
    tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Starts a claimed job (its before-hook and its chain's submission) at the window's back.
  // Holds window_mu_ (the submission order is the window's, and contexts_ is shared).
  void enter(std::shared_ptr<Job> job) {
    Pending& p = reserve(std::move(job));
    p.status = start(*p.job, p);
    publish();
  }

  // No more entries (the worker's stream is ending): holds queues_mu and window_mu_.
  void end_stream_locked(size_t prio) {
    auto& s = core_.streamers[prio];
    s.erase(std::find(s.begin(), s.end(), this));
    stream_prio_ = -1;
  }

  // Claims the jobs of priority `prio` waiting at the queue's front while the window has room
  // and no job of a higher priority waits (it would be served first), and starts them. A job's
  // spec may be read only once this lane has claimed it (a cancel clears it), so the first
  // claimed job that does not fit goes to `after` and ends the stream. So does an empty
  // window with nothing to claim.
  void refill(size_t prio, std::shared_ptr<Job>& after) {
    std::unique_lock queues(core_.queues_mu);
    auto& queue = core_.queues[prio];
    // Whether a job can be claimed behind `taken` ones (in the window and claimed).
    auto claimable = [&](size_t taken) {
      return taken < core_.options.pipeline_depth && !queue.empty() &&
             !core_.waits_from_locked(prio + 1);
    };
    // Nothing to claim, and jobs left in the window (only this thread takes them out): the
    // stream goes on, without the window lock, which an entrant may hold for a while.
    const size_t in_window = count();
    if (in_window > 0 && !claimable(in_window)) return;
    std::unique_lock w(window_mu_);
    size_t claimed = 0;
    size_t steps = window_steps_.load(std::memory_order_relaxed);
    while (claimable(count() + claimed_.size())) {
      std::shared_ptr<Job> next = std::move(queue.front());
      queue.pop_front();
      --core_.queued_jobs;
      int e = kQueued;
      // A tombstone: its cancel released its queue slot.
      if (!next->state.compare_exchange_strong(e, kRunning)) continue;
      ++claimed;
      if (fits(*next, steps)) {
        steps += steps_of(*next);
        claimed_.push_back(std::move(next));
        continue;
      }
      after = std::move(next);
      break;
    }
    if (after || count() + claimed_.size() == 0) end_stream_locked(prio);
    queues.unlock();
    for (size_t k = 0; k < claimed; ++k) core_.release_slot();
    for (auto& job : claimed_) enter(std::move(job));
    claimed_.clear();
  }

  // The end of a chain whose steps have all ended well, as finish_chain() would record it,
  // without sleeping; false, with nothing recorded, while a step runs or when one failed.
  static bool ended_well(std::vector<hal::Fence>& fences, JobOutcome& out) {
    if (fences.empty()) return false;
    uint64_t cycles = 0;
    for (size_t k = fences.size(); k-- > 0;) {  // the last ends last
      const Result<hal::JobInfo> r = fences[k].poll();
      if (!r.is_ok()) return false;
      cycles += r->device_cycles;
    }
    out.device_cycles += cycles;
    ++out.device_waits;
    fences.clear();
    return true;
  }

  // Whether a window slot's chain is known to have ended (or never reached the device).
  static bool ended(const Pending& p) {
    if (!p.submitted || p.fences.empty()) return true;
    const Result<hal::JobInfo> r = p.fences.back().poll();
    return r.is_ok() || r.status().code() != StatusCode::kDeadlineExceeded;
  }

  // Completes the oldest job of the window and every one after it that has ended too; false
  // when the window is empty. When the oldest is still on the device, the lane first sleeps,
  // without window_mu_ (entries go on meanwhile), until the middle of the window ends (one
  // context runs its jobs in order): one host sleep serves half a window.
  //
  // The jobs that were in the window when the lane looked, and have ended well, are taken
  // without window_mu_ too: the slots from head_ to tail_ are the lane's until it moves head_
  // past them (an entrant fills the slot at tail_ and publishes it, started, by moving tail_
  // with release order), and only the lane's owner writes head_. A job that did not end
  // well (a failed submit or step, a resubmission after an ABORTED step, a hang) is finished
  // under window_mu_, since that may resubmit or replace the context entries use; so is a
  // head job still running after the sleep (its own wait then reports the hang).
  bool harvest() {
    uint64_t head = head_.load(std::memory_order_relaxed);
    const uint64_t tail = tail_.load(std::memory_order_acquire);
    if (head == tail) return false;
    hal::Fence hint;
    if (!ended(at(head))) {
      for (uint64_t k = head + (tail - head - 1) / 2 + 1; k-- > head;) {
        const Pending& p = at(k);
        if (!p.submitted || p.fences.empty()) continue;
        hint = p.fences.back();
        break;
      }
    }
    if (hint.valid()) (void)hint.wait(Clock::now() + core_.options.step_timeout);
    harvested_.clear();
    size_t steps = 0;
    for (; head < tail; ++head) {
      Pending& p = at(head);
      if (!p.submitted || !p.submit_status.is_ok() || !ended_well(p.fences, p.out)) break;
      steps += steps_of(*p.job);
      harvested_.push_back({std::move(p.job), std::move(p.out), Status::ok(), true});
      p.cmds.clear();
    }
    if (!harvested_.empty()) {
      window_steps_.fetch_sub(steps, std::memory_order_relaxed);
      head_.store(head, std::memory_order_release);  // the slots are free for entries
    } else {
      std::lock_guard w(window_mu_);
      do {
        Pending& p = at(head);
        if (p.submitted)
          p.status = finish_chain(*p.job, p.out, p.cmds, 0, p.fences,
                                  std::move(p.submit_status), p.replaced_banned);
        window_steps_.fetch_sub(steps_of(*p.job), std::memory_order_relaxed);
        harvested_.push_back(
            {std::move(p.job), std::move(p.out), std::move(p.status), p.submitted});
        p.cmds.clear();
        head_.store(++head, std::memory_order_release);
      } while (head < tail_.load(std::memory_order_relaxed) && ended(at(head)));
    }
    done_.clear();
    for (Harvested& h : harvested_) {
      Job& job = *h.job;
      const size_t last = steps_of(job) - 1;
      if (h.ran && h.status.is_ok() && (hook_needs(job.spec, last) & kHookAfter))
        h.status = hook(job, h.out, last, StepPhase::kAfterDevice);
      conclude(job, h.out, std::move(h.status));
      done_.emplace_back(std::move(h.job), std::move(h.out));
    }
    core_.complete_all(done_);
    return true;
  }

  // The first half of a streamed job: its before-hook and its chain's submission.
  Status start(Job& job, Pending& p) {
    if (job.cancel_requested.load()) return core_.cancelled_outcome(job).status;
    if (hook_needs(job.spec, 0) & kHookBefore)
      NPU_RETURN_IF_ERROR(hook(job, p.out, 0, StepPhase::kBeforeDevice));
    NPU_RETURN_IF_ERROR(
        command_buffers(job, 0, job.spec.instance->executable().steps().size(), p.cmds));
    p.submit_status = submit_from(job, p.out, p.cmds, 0, p.fences, p.replaced_banned);
    p.submitted = true;
    return Status::ok();
  }

  size_t max_chain() const {
    // A context holds queue_depth jobs; a longer chain is split.
    return std::clamp<size_t>(core_.device->info().queue_depth, 1, hal::Context::kMaxWaitFences);
  }

  Core& core_;
  uint32_t index_;
  std::array<std::shared_ptr<hal::Context>, hal::kNumPriorities> contexts_;
  // Reused by every chain of this lane: no allocation per job in the steady state.
  std::vector<hal::CommandBuffer> commands_;
  std::vector<hal::Fence> fences_;
  // The stream's window: the jobs from head_ to tail_, in the order they entered, in the
  // slots at(head_) .. at(tail_ - 1). Entrants (under window_mu_) fill the slot at tail_ and
  // publish it; the lane's owner takes jobs at head_ (harvest) and frees their slots by
  // moving head_, without window_mu_ unless a job did not end well. window_ is resized only
  // while empty (open_stream).
  std::mutex window_mu_;
  std::vector<Pending> window_;
  std::atomic<uint64_t> head_{0};  // written by the lane's owner only
  std::atomic<uint64_t> tail_{0};  // written under window_mu_
  std::atomic<size_t> window_steps_{0};  // steps of the jobs in the window (at least)
  int stream_prio_ = -1;  // the stream's priority, -1 when it takes no entries; see above
  bool first_pending_ = false;  // the stream's first job is not on the device yet (window_mu_)
  // The worker's own, reused: no allocation per job in the steady state.
  std::vector<std::shared_ptr<Job>> claimed_;
  std::vector<Harvested> harvested_;
  std::vector<std::pair<std::shared_ptr<Job>, JobOutcome>> done_;
};

bool Core::try_stream(std::shared_ptr<Job>& job, size_t priority) {
  // The candidates, taken under queues_mu and tried without it: a lane's window lock may be
  // held for a job's quantisation and submission, which should not hold up the queue. A
  // stream that ended meanwhile refuses the entry.
  std::array<Lane*, 64> lanes;
  size_t n = 0;
  {
    std::lock_guard lock(queues_mu);
    if (waits_from_locked(priority)) return false;
    for (Lane* lane : streamers[priority]) lanes[n++] = lane;
  }
  for (size_t k = 0; k < n; ++k) {
    if (lanes[k]->try_enter(job, priority)) {
      release_slot();  // taken by admit(); the job never waited in the queue
      return true;
    }
  }
  return false;
}

void Core::worker_main() {
  const bool streams = options.pipeline_depth > 1;
  std::shared_ptr<Job> after;
  std::unique_lock lock(queues_mu);
  for (;;) {
    work_cv.wait(lock, [&] {
      return (queued_jobs > 0 && !idle_lanes.empty()) || (lanes_stopping && queued_jobs == 0);
    });
    if (queued_jobs == 0) return;  // stopping, and nothing left to drain
    std::shared_ptr<Job> job = pop_locked();
    Lane* lane = idle_lanes.back();
    idle_lanes.pop_back();
    int expected = kQueued;
    if (!job->state.compare_exchange_strong(expected, kRunning)) {
      idle_lanes.push_back(lane);  // cancelled while queued: a tombstone
      continue;
    }
    const bool stream = streams && lane->single_chain(*job);
    if (stream) lane->open_stream(std::move(job));
    lock.unlock();
    release_slot();
    if (stream) {
      lane->stream(after);
      job = std::move(after);  // claimed during the stream, but not a job it could take
    }
    if (job) {
      JobOutcome out = lane->run(*job);
      complete(job, std::move(out));
      job.reset();
    }
    lock.lock();
    idle_lanes.push_back(lane);
    // Another worker may sleep while jobs wait (this one took the only idle lane). This one
    // takes the next job itself (the lock is held until its wait re-checks), so one job alone
    // wakes no one: a woken worker would find the queue empty and sleep again.
    if (queued_jobs > 1 || lanes_stopping) work_cv.notify_one();
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
  if (options.pipeline_depth == 0 || options.pipeline_depth > 64)
    return make_error(StatusCode::kInvalidArgument, "pipeline_depth must be 1..64");
  auto core = std::make_shared<Core>();
  core->device = std::move(device);
  core->options = options;
  core->log_sched = npu::log::enabled(npu::log::kSched);
  core->work.emplace(boost::asio::make_work_guard(core->io));
  // Threads are named for top -H, perf --sort comm and gdb.
  core->completion_thread = std::thread([c = core] {
    pthread_setname_np(pthread_self(), "npu-completion");
    c->io.run();
  });
  core->completion_thread_id = core->completion_thread.get_id();
  for (uint32_t i = 0; i < options.num_contexts; ++i) {
    core->lane_objects.push_back(std::make_unique<internal::Lane>(*core, i));
    core->idle_lanes.push_back(core->lane_objects.back().get());
  }
  // As many workers as lanes: whenever a lane is idle and a job waits, a worker is free.
  for (uint32_t i = 0; i < options.num_contexts; ++i)
    core->workers.emplace_back([c = core.get()] {
      pthread_setname_np(pthread_self(), "npu-lane");
      c->worker_main();
    });
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(core)));
}

Scheduler::~Scheduler() { shutdown(ShutdownMode::kCancelPending); }

Result<JobHandle> Scheduler::try_submit(JobSpec spec) {
  return submit(std::move(spec), Clock::time_point::min());
}

namespace {

Status check_spec(const JobSpec& spec, const hal::Device& device, bool needs_on_complete) {
  if (!spec.instance)
    return make_error(StatusCode::kInvalidArgument, "a job needs an instance");
  if (needs_on_complete != static_cast<bool>(spec.on_complete))
    return make_error(StatusCode::kInvalidArgument,
                      needs_on_complete ? "a submitted job needs on_complete"
                                        : "run() returns the outcome: leave on_complete empty");
  if (&spec.instance->executable().device() != &device)
    return make_error(StatusCode::kInvalidArgument,
                      "the job's executable is loaded on another device than this scheduler's");
  if (static_cast<size_t>(spec.priority) >= hal::kNumPriorities)
    return make_error(StatusCode::kInvalidArgument, "bad priority");
  return Status::ok();
}

// Takes a queue slot (waiting until `deadline`) and counts the job as outstanding. On success
// the caller owns one slot and one outstanding count.
Status admit(Core& c, Deadline deadline) {
  {
    std::shared_lock accept(c.accept_mu);
    if (!c.accepting) return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
  }
  // Wait for room without holding accept_mu, so shutdown never waits for a blocked submit.
  {
    std::unique_lock lock(c.slots_mu);
    auto ready = [&] { return c.submits_stopped || c.slots_used < c.options.queue_capacity; };
    if (!ready()) {
      if (deadline == Deadline::max()) {
        c.slots_cv.wait(lock, ready);
      } else if (!c.slots_cv.wait_until(lock, deadline, ready)) {
        return make_error(StatusCode::kResourceExhausted,
                          "the scheduler queue is full (" +
                              std::to_string(c.options.queue_capacity) +
                              " jobs waiting); retry later or raise queue_capacity");
      }
    }
    if (c.submits_stopped) return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
    ++c.slots_used;
  }
  std::shared_lock accept(c.accept_mu);
  if (!c.accepting) {
    c.release_slot();
    return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
  }
  std::lock_guard lock(c.outstanding_mu);
  ++c.outstanding;
  return Status::ok();
}

}  // namespace

Result<JobHandle> Scheduler::submit(JobSpec spec, Deadline deadline) {
  NPU_RETURN_IF_ERROR(check_spec(spec, *core_->device, true));
  const auto prio = static_cast<size_t>(spec.priority);
  NPU_RETURN_IF_ERROR(admit(*core_, deadline));
  auto job = std::make_shared<Job>();
  job->id = core_->next_id.fetch_add(1);
  job->spec = std::move(spec);
  job->queued = Clock::now();
  job->core = core_;
  core_->n_submitted.fetch_add(1, std::memory_order_relaxed);
  JobHandle handle(job);
  if (!core_->try_stream(job, prio)) core_->push(std::move(job), prio);
  return handle;
}

Result<JobOutcome> Scheduler::run(JobSpec spec, Deadline deadline) {
  Core& c = *core_;
  NPU_RETURN_IF_ERROR(check_spec(spec, *c.device, false));
  const auto prio = static_cast<size_t>(spec.priority);
  if (internal::Lane* lane = c.borrow_lane(prio)) {
    // The fast path: this thread runs the job on an idle lane. It counts as outstanding (so
    // shutdown waits for it) but never takes a queue slot: it does not queue.
    {
      std::shared_lock accept(c.accept_mu);
      if (!c.accepting) {
        c.return_lane(lane);
        return make_error(StatusCode::kUnavailable, "the scheduler is shut down");
      }
      std::lock_guard lock(c.outstanding_mu);
      ++c.outstanding;
    }
    Job job;
    job.id = c.next_id.fetch_add(1);
    job.spec = std::move(spec);
    job.queued = Clock::now();
    job.state.store(internal::kRunning);
    c.n_submitted.fetch_add(1, std::memory_order_relaxed);
    JobOutcome out = lane->run(job);
    c.return_lane(lane);
    c.finalize(job, out);
    job.spec = JobSpec{};
    c.finished_one();
    return out;
  }
  // Every lane is busy (or jobs wait ahead of this one): queue it and sleep until a lane has
  // run it; the lane hands the outcome over directly.
  NPU_RETURN_IF_ERROR(admit(c, deadline));
  internal::Waiter waiter;
  auto job = std::make_shared<Job>();
  job->id = c.next_id.fetch_add(1);
  job->spec = std::move(spec);
  job->queued = Clock::now();
  job->core = core_;
  job->waiter = &waiter;
  c.n_submitted.fetch_add(1, std::memory_order_relaxed);
  c.push(job, prio);
  job.reset();
  std::unique_lock lock(waiter.mu);
  waiter.cv.wait(lock, [&] { return waiter.outcome.has_value(); });
  return std::move(*waiter.outcome);
}

void Scheduler::shutdown(ShutdownMode mode) {
  // A callback may destroy this Scheduler while we run: only `core` is used below.
  const std::shared_ptr<Core> core = core_;
  Core& c = *core;
  const bool on_completion_thread = std::this_thread::get_id() == c.completion_thread_id;
  const bool in_lane_callback = internal::t_in_callback == &c;
  {
    std::unique_lock accept(c.accept_mu);
    if (!c.accepting) {
      accept.unlock();
      // Another caller is shutting down or has: wait for it, unless we are a callback (the
      // first caller may be waiting for us).
      if (!on_completion_thread && !in_lane_callback) {
        std::unique_lock lock(c.shutdown_mu);
        c.shutdown_cv.wait(lock, [&] { return c.shutdown_done; });
      }
      return;
    }
    c.accepting = false;
  }
  {
    std::lock_guard lock(c.slots_mu);
    c.submits_stopped = true;
  }
  c.slots_cv.notify_all();
  if (in_lane_callback) {
    // This thread is inside a job's completion (perhaps on a lane the rest must join): the
    // rest runs on a thread of its own, which holds the core until it is done.
    std::thread([core, mode] { core->finish_shutdown(mode, false); }).detach();
    return;
  }
  c.finish_shutdown(mode, on_completion_thread);
}

namespace internal {

void Core::finish_shutdown(Scheduler::ShutdownMode mode, bool on_completion_thread) {
  if (mode == Scheduler::ShutdownMode::kCancelPending) {
    // Drain the queues ourselves; lanes racing us lose the state transition.
    for (;;) {
      std::shared_ptr<Job> job = pop();
      if (!job) break;
      int expected = kQueued;
      if (job->state.compare_exchange_strong(expected, kDone)) {
        release_slot();
        complete(job, cancelled_outcome(*job));
      }
    }
  }
  {
    std::lock_guard lock(queues_mu);
    lanes_stopping = true;
  }
  work_cv.notify_all();
  for (auto& t : workers)
    if (t.joinable()) t.join();
  workers.clear();
  // Jobs left in the queues were cancelled and popped by nobody: clear the tombstones.
  while (pop()) {
  }
  if (!on_completion_thread) {
    std::unique_lock lock(outstanding_mu);
    outstanding_cv.wait(lock, [&] { return outstanding == 0; });
  }
  work.reset();
  if (on_completion_thread) {
    completion_thread.detach();  // it holds the core; it ends after the last completion
  } else if (completion_thread.joinable()) {
    completion_thread.join();
  }
  {
    std::lock_guard lock(shutdown_mu);
    shutdown_done = true;
  }
  shutdown_cv.notify_all();
}

}  // namespace internal

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
