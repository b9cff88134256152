// Scheduler behaviour on a scripted device: priorities, backpressure, cancellation, recovery,
// exactly-once completion and shutdown.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "fake_device.h"
#include "image_builder.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/scheduler/scheduler.h"

namespace npu::scheduler {
namespace {

using test::FakeDevice;
using test::FakeJob;

// Collects outcomes; tests wait on it instead of sleeping.
class Outcomes {
 public:
  CompletionFn callback(uint8_t marker) {
    return [this, marker](JobOutcome&& o) {
      std::lock_guard lock(mu_);
      calls_[marker]++;
      outcomes_[marker] = std::move(o);
      order_.push_back(marker);
      cv_.notify_all();
    };
  }
  bool wait_count(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return order_.size() >= n; });
  }
  bool wait_for(uint8_t marker) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_.count(marker) > 0; });
  }
  JobOutcome get(uint8_t marker) {
    std::lock_guard lock(mu_);
    return outcomes_.at(marker);
  }
  std::map<uint8_t, int> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return order_.size();
  }
  std::vector<uint8_t> order() {
    std::lock_guard lock(mu_);
    return order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint8_t, int> calls_;
  std::map<uint8_t, JobOutcome> outcomes_;
  std::vector<uint8_t> order_;
};

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = std::make_shared<FakeDevice>();
    auto exe = runtime::load_executable(device_, test::identity_image());
    ASSERT_TRUE(exe.is_ok()) << exe.status().to_string();
    exe_ = std::move(exe).value();
  }
  std::unique_ptr<Scheduler> make(uint32_t lanes, uint32_t capacity,
                                  std::chrono::milliseconds step_timeout = std::chrono::minutes(1),
                                  uint32_t pipeline_depth = 8) {
    SchedulerOptions o;
    o.num_contexts = lanes;
    o.queue_capacity = capacity;
    o.step_timeout = step_timeout;
    o.pipeline_depth = pipeline_depth;
    auto s = Scheduler::create(device_, o);
    EXPECT_TRUE(s.is_ok());
    return std::move(s).value();
  }
  JobSpec job(uint8_t marker, Priority prio = Priority::kNormal) {
    auto inst = exe_->instantiate();
    EXPECT_TRUE(inst.is_ok());
    std::shared_ptr<hal::ExecutableInstance> i = std::move(inst).value();
    i->activations().host()[0] = static_cast<std::byte>(marker);
    JobSpec spec;
    spec.instance = i;
    spec.priority = prio;
    spec.request_id = marker;
    spec.on_complete = outcomes_.callback(marker);
    return spec;
  }
  std::vector<uint8_t> executed_markers() {
    std::vector<uint8_t> m;
    for (const FakeJob& j : device_->jobs()) m.push_back(j.marker);
    return m;
  }

  std::shared_ptr<FakeDevice> device_;
  std::shared_ptr<hal::Executable> exe_;
  Outcomes outcomes_;
};

TEST_F(SchedulerTest, RunsAJobAndReportsDeviceCycles) {
  auto s = make(2, 8);
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(outcomes_.wait_for(1));
  JobOutcome o = outcomes_.get(1);
  EXPECT_TRUE(o.status.is_ok()) << o.status.to_string();
  EXPECT_EQ(o.device_cycles, 100u);
  EXPECT_EQ(o.device_submissions, 1u);
  EXPECT_FALSE(o.retried);
}

// Queueing tests run one job at a time (pipeline_depth 1): with streaming, a job submitted
// behind the held one would enter the lane's window instead of waiting (see the Streaming
// tests below).
TEST_F(SchedulerTest, HigherPriorityJobsRunFirst) {
  auto s = make(1, 16, std::chrono::minutes(1), /*pipeline_depth=*/1);
  device_->hold();
  ASSERT_TRUE(s->submit(job(100), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));  // the lane is busy with job 100
  ASSERT_TRUE(s->submit(job(1, Priority::kLow), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(s->submit(job(2, Priority::kNormal), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(s->submit(job(3, Priority::kRealtime), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(s->submit(job(4, Priority::kHigh), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(s->submit(job(5, Priority::kNormal), hal::kInfiniteDeadline).is_ok());
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(6));
  EXPECT_EQ(executed_markers(), (std::vector<uint8_t>{100, 3, 4, 2, 5, 1}));
  // Each priority runs on a context of that priority.
  for (const FakeJob& j : device_->jobs()) {
    if (j.marker == 3) {
      EXPECT_EQ(j.priority, Priority::kRealtime);
    }
  }
}

TEST_F(SchedulerTest, TrySubmitReportsAFullQueueAndSubmitWaitsUntilItsDeadline) {
  auto s = make(1, 2, std::chrono::minutes(1), /*pipeline_depth=*/1);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->try_submit(job(2)).is_ok());
  ASSERT_TRUE(s->try_submit(job(3)).is_ok());
  auto full = s->try_submit(job(4));
  ASSERT_FALSE(full.is_ok());
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  const auto t0 = Clock::now();
  auto late = s->submit(job(5), Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(late.status().code(), StatusCode::kResourceExhausted);
  EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(50));
  EXPECT_EQ(s->stats().queued, 2u);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(3));
  // Rejected jobs never complete.
  EXPECT_EQ(outcomes_.calls().count(4), 0u);
  EXPECT_EQ(outcomes_.calls().count(5), 0u);
  // Room again.
  ASSERT_TRUE(s->try_submit(job(6)).is_ok());
  ASSERT_TRUE(outcomes_.wait_for(6));
}

TEST_F(SchedulerTest, SubmitBlocksUntilRoomFrees) {
  auto s = make(1, 1);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->try_submit(job(2)).is_ok());
  std::thread releaser([&] {
    // Frees room by letting the device finish job 1, so the lane takes job 2.
    device_->release();
  });
  auto r = s->submit(job(3), Clock::now() + std::chrono::seconds(10));
  releaser.join();
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_TRUE(outcomes_.wait_count(3));
}

TEST_F(SchedulerTest, CancellingAQueuedJobTouchesOnlyThatJob) {
  auto s = make(1, 8, std::chrono::minutes(1), /*pipeline_depth=*/1);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());
  auto h3 = s->submit(job(3), hal::kInfiniteDeadline);
  ASSERT_TRUE(s->submit(job(4), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(h3.is_ok());
  EXPECT_TRUE(h3->cancel());
  // Completes at once, while the device is still held.
  ASSERT_TRUE(outcomes_.wait_for(3));
  EXPECT_EQ(outcomes_.get(3).status.code(), StatusCode::kCancelled);
  EXPECT_EQ(outcomes_.count(), 1u);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(4));
  for (uint8_t m : {1, 2, 4}) EXPECT_TRUE(outcomes_.get(m).status.is_ok()) << int(m);
  EXPECT_EQ(executed_markers(), (std::vector<uint8_t>{1, 2, 4}));
  EXPECT_FALSE(h3->cancel());  // already completed
  for (auto [m, n] : outcomes_.calls()) EXPECT_EQ(n, 1) << "marker " << int(m);
  EXPECT_EQ(s->stats().cancelled, 1u);
}

TEST_F(SchedulerTest, StreamingASubmitEntersTheLanesWindowOnTheCallersThreadUntilItIsFull) {
  auto s = make(1, 8, std::chrono::minutes(1), /*pipeline_depth=*/3);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));  // the lane streams job 1 (on its own thread)
  // Jobs 2 and 3 go to the device at once, from this thread: nothing waits in the queue.
  auto h2 = s->submit(job(2), hal::kInfiniteDeadline);
  ASSERT_TRUE(h2.is_ok());
  ASSERT_TRUE(s->submit(job(3), hal::kInfiniteDeadline).is_ok());
  ASSERT_EQ(device_->jobs().size(), 3u);
  EXPECT_NE(device_->jobs()[0].thread, std::this_thread::get_id());
  EXPECT_EQ(device_->jobs()[1].thread, std::this_thread::get_id());
  EXPECT_EQ(device_->jobs()[2].thread, std::this_thread::get_id());
  EXPECT_EQ(s->stats().queued, 0u);
  // The window (pipeline_depth 3) is full: job 4 waits in the queue.
  ASSERT_TRUE(s->submit(job(4), hal::kInfiniteDeadline).is_ok());
  EXPECT_EQ(device_->jobs().size(), 3u);
  EXPECT_EQ(s->stats().queued, 1u);
  // A job in the window is running: cancelling it completes it once the device is done.
  EXPECT_TRUE(h2->cancel());
  EXPECT_EQ(outcomes_.count(), 0u);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(4));
  EXPECT_EQ(executed_markers(), (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(outcomes_.get(2).status.code(), StatusCode::kCancelled);
  for (uint8_t m : {1, 3, 4}) EXPECT_TRUE(outcomes_.get(m).status.is_ok()) << int(m);
  EXPECT_EQ(outcomes_.order(), (std::vector<uint8_t>{1, 2, 3, 4}));
  for (auto [m, n] : outcomes_.calls()) EXPECT_EQ(n, 1) << "marker " << int(m);
}

TEST_F(SchedulerTest, StreamingSkipsACancelledQueuedJobAndKeepsItsQueueSlotsRight) {
  auto s = make(1, 2, std::chrono::minutes(1), /*pipeline_depth=*/2);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());  // enters the window
  auto h3 = s->submit(job(3), hal::kInfiniteDeadline);               // the window is full
  ASSERT_TRUE(h3.is_ok());
  ASSERT_TRUE(s->submit(job(4), hal::kInfiniteDeadline).is_ok());
  EXPECT_EQ(s->stats().queued, 2u);
  EXPECT_TRUE(h3->cancel());  // leaves a tombstone that the lane's refill skips
  EXPECT_EQ(s->stats().queued, 1u);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(4));
  EXPECT_EQ(executed_markers(), (std::vector<uint8_t>{1, 2, 4}));
  EXPECT_EQ(outcomes_.get(3).status.code(), StatusCode::kCancelled);
  // Every slot is free again: two jobs fit the queue, a third does not.
  EXPECT_EQ(s->stats().queued, 0u);
  device_->hold();
  ASSERT_TRUE(s->submit(job(5), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(4));
  ASSERT_TRUE(s->submit(job(6), hal::kInfiniteDeadline).is_ok());  // enters the window
  ASSERT_TRUE(s->try_submit(job(7)).is_ok());
  ASSERT_TRUE(s->try_submit(job(8)).is_ok());
  EXPECT_EQ(s->try_submit(job(9)).status().code(), StatusCode::kResourceExhausted);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(8));
}

TEST_F(SchedulerTest, StreamingTakesNoEntryPastAWaitingJobOfHigherPriority) {
  auto s = make(1, 8);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());  // enters the window
  ASSERT_TRUE(s->submit(job(3, Priority::kHigh), hal::kInfiniteDeadline).is_ok());
  // Job 4 would overtake job 3 in the window: it waits behind it.
  ASSERT_TRUE(s->submit(job(4), hal::kInfiniteDeadline).is_ok());
  EXPECT_EQ(device_->jobs().size(), 2u);
  EXPECT_EQ(s->stats().queued, 2u);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(4));
  EXPECT_EQ(executed_markers(), (std::vector<uint8_t>{1, 2, 3, 4}));
  for (const FakeJob& j : device_->jobs())
    EXPECT_EQ(j.priority, j.marker == 3 ? Priority::kHigh : Priority::kNormal) << int(j.marker);
}

TEST_F(SchedulerTest, CancellingARunningJobCompletesItCancelledAfterTheDevice) {
  auto s = make(1, 8);
  device_->hold();
  auto h1 = s->submit(job(1), hal::kInfiniteDeadline);
  ASSERT_TRUE(h1.is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());
  EXPECT_TRUE(h1->cancel());
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(2));
  EXPECT_EQ(outcomes_.get(1).status.code(), StatusCode::kCancelled);
  EXPECT_TRUE(outcomes_.get(2).status.is_ok());
}

TEST_F(SchedulerTest, AnAbortedJobIsRetriedOnce) {
  device_->set_policy([](const FakeJob& j) {
    if (j.marker == 1 && j.attempt == 1) return hal::JobResult{hal::JobEnd::kAborted, 0, 0, 0};
    if (j.marker == 2) return hal::JobResult{hal::JobEnd::kAborted, 0, 0, 0};
    return hal::JobResult{hal::JobEnd::kSuccess, 0, 0, 100};
  });
  auto s = make(1, 8);
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(outcomes_.wait_count(2));
  JobOutcome o1 = outcomes_.get(1), o2 = outcomes_.get(2);
  EXPECT_TRUE(o1.status.is_ok()) << o1.status.to_string();
  EXPECT_TRUE(o1.retried);
  EXPECT_EQ(o1.device_submissions, 2u);
  EXPECT_EQ(o2.status.code(), StatusCode::kAborted) << o2.status.to_string();
  EXPECT_EQ(o2.device_submissions, 2u);
  EXPECT_NE(o2.status.message().find("request 2"), std::string::npos) << o2.status.message();
  EXPECT_EQ(s->stats().retried, 2u);
}

TEST_F(SchedulerTest, FaultsAndTimeoutsAreReportedNeverRetriedAndABannedContextIsReplaced) {
  device_->set_policy([](const FakeJob& j) {
    if (j.marker == 1) return hal::JobResult{hal::JobEnd::kPageFault, 3, 0x1234, 0};
    if (j.marker == 2) return hal::JobResult{hal::JobEnd::kTimeout, 0, 0, 0};
    if (j.marker == 3) return hal::JobResult{hal::JobEnd::kDeviceError, 4, 2, 0};
    return hal::JobResult{hal::JobEnd::kSuccess, 0, 0, 100};
  });
  auto s = make(1, 8, std::chrono::minutes(1), /*pipeline_depth=*/1);  // one job at a time
  for (uint8_t m : {1, 2, 3, 4}) ASSERT_TRUE(s->submit(job(m), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(outcomes_.wait_count(4));
  JobOutcome fault = outcomes_.get(1);
  EXPECT_EQ(fault.status.code(), StatusCode::kDeviceFault);
  EXPECT_NE(fault.status.message().find("PAGE_FAULT"), std::string::npos) << fault.status.message();
  EXPECT_NE(fault.status.message().find("0x1234"), std::string::npos) << fault.status.message();
  EXPECT_EQ(fault.device_submissions, 1u);
  EXPECT_EQ(outcomes_.get(2).status.code(), StatusCode::kDeviceTimeout);
  EXPECT_EQ(outcomes_.get(2).device_submissions, 1u);
  EXPECT_NE(outcomes_.get(3).status.message().find("TOKEN_DEADLOCK"), std::string::npos)
      << outcomes_.get(3).status.message();
  EXPECT_TRUE(outcomes_.get(4).status.is_ok());
  // Job 1 banned its context: job 2 ran on a new one.
  auto jobs = device_->jobs();
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_NE(jobs[0].ctx, jobs[1].ctx);
  EXPECT_EQ(s->stats().contexts_replaced, 1u);
  EXPECT_EQ(s->stats().failed, 3u);
}

TEST_F(SchedulerTest, FaultsInAPipelinedBatchAreEachReportedOnceAndTheRestSucceed) {
  device_->set_policy([](const FakeJob& j) {
    if (j.marker == 1) return hal::JobResult{hal::JobEnd::kPageFault, 3, 0x1234, 0};
    if (j.marker == 3) return hal::JobResult{hal::JobEnd::kDeviceError, 4, 2, 0};
    return hal::JobResult{hal::JobEnd::kSuccess, 0, 0, 100};
  });
  auto s = make(1, 8);
  device_->hold();  // the lane takes all four into one batch
  for (uint8_t m : {1, 2, 3, 4}) ASSERT_TRUE(s->submit(job(m), hal::kInfiniteDeadline).is_ok());
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(4));
  EXPECT_EQ(outcomes_.get(1).status.code(), StatusCode::kDeviceFault);
  EXPECT_TRUE(outcomes_.get(2).status.is_ok()) << outcomes_.get(2).status.to_string();
  EXPECT_EQ(outcomes_.get(3).status.code(), StatusCode::kDeviceFault);
  EXPECT_TRUE(outcomes_.get(4).status.is_ok()) << outcomes_.get(4).status.to_string();
  for (uint8_t m : {1, 2, 3, 4}) EXPECT_EQ(outcomes_.calls()[m], 1) << "marker " << int(m);
  EXPECT_EQ(s->stats().failed, 2u);
  EXPECT_GE(s->stats().contexts_replaced, 1u);
}

TEST_F(SchedulerTest, AStepThatOutlivesTheStepTimeoutEndsAsDeviceTimeoutAndIsNotReused) {
  auto s = make(1, 8, std::chrono::milliseconds(30));
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(outcomes_.wait_for(1));
  JobOutcome o = outcomes_.get(1);
  EXPECT_EQ(o.status.code(), StatusCode::kDeviceTimeout) << o.status.to_string();
  EXPECT_FALSE(o.instance_reusable);
  device_->release();
  ASSERT_TRUE(s->submit(job(2), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(outcomes_.wait_for(2));
  EXPECT_TRUE(outcomes_.get(2).status.is_ok());
  auto jobs = device_->jobs();
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_NE(jobs[0].ctx, jobs[1].ctx);  // the stuck context was destroyed and replaced
}

TEST_F(SchedulerTest, ShutdownCompletesEveryAcceptedJobExactlyOnce) {
  auto s = make(2, 64);
  device_->hold();
  for (uint8_t m = 1; m <= 40; ++m) ASSERT_TRUE(s->submit(job(m), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(2));
  std::thread closer([&] { s->shutdown(Scheduler::ShutdownMode::kCancelPending); });
  // Let the queued jobs be cancelled by shutdown, then free the running ones: each lane runs
  // one job, or a pipelined batch of them, all on the device already.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (outcomes_.count() + device_->jobs().size() < 40 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  device_->release();
  closer.join();
  EXPECT_EQ(outcomes_.count(), 40u);
  size_t ok = 0, cancelled = 0;
  std::set<uint8_t> ran;
  for (const FakeJob& j : device_->jobs()) ran.insert(j.marker);
  for (uint8_t m = 1; m <= 40; ++m) {
    EXPECT_EQ(outcomes_.calls()[m], 1) << "marker " << int(m);
    const StatusCode c = outcomes_.get(m).status.code();
    if (c == StatusCode::kOk) ++ok;
    if (c == StatusCode::kCancelled) ++cancelled;
    EXPECT_EQ(c == StatusCode::kOk, ran.count(m) == 1) << "marker " << int(m);
  }
  EXPECT_GE(ok, 2u);
  EXPECT_EQ(ok, ran.size());
  EXPECT_EQ(ok + cancelled, 40u);
  EXPECT_GT(cancelled, 0u);
  EXPECT_EQ(s->submit(job(99), hal::kInfiniteDeadline).status().code(), StatusCode::kUnavailable);
  s->shutdown(Scheduler::ShutdownMode::kDrain);  // idempotent
}

TEST_F(SchedulerTest, ShutdownWakesASubmitWaitingForRoom) {
  auto s = make(1, 1, std::chrono::minutes(1), /*pipeline_depth=*/1);
  device_->hold();
  ASSERT_TRUE(s->submit(job(1), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->try_submit(job(2)).is_ok());  // the queue is full
  Status blocked;
  std::thread submitter([&] { blocked = s->submit(job(3), hal::kInfiniteDeadline).status(); });
  std::thread closer([&] { s->shutdown(Scheduler::ShutdownMode::kCancelPending); });
  submitter.join();  // returns although the queue stays full until the device is released
  EXPECT_EQ(blocked.code(), StatusCode::kUnavailable) << blocked.to_string();
  device_->release();
  closer.join();
  EXPECT_EQ(outcomes_.count(), 2u);
  EXPECT_EQ(outcomes_.get(2).status.code(), StatusCode::kCancelled);
}

TEST_F(SchedulerTest, DrainRunsEveryQueuedJob) {
  auto s = make(2, 64);
  for (uint8_t m = 1; m <= 30; ++m) ASSERT_TRUE(s->submit(job(m), hal::kInfiniteDeadline).is_ok());
  s->shutdown(Scheduler::ShutdownMode::kDrain);
  EXPECT_EQ(outcomes_.count(), 30u);
  for (uint8_t m = 1; m <= 30; ++m) EXPECT_TRUE(outcomes_.get(m).status.is_ok());
}

TEST_F(SchedulerTest, ShutdownFromACompletionCallbackDoesNotDeadlock) {
  auto s = make(1, 8);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  JobSpec spec = job(1);
  Scheduler* raw = s.get();
  spec.on_complete = [&, raw](JobOutcome&&) {
    raw->shutdown(Scheduler::ShutdownMode::kDrain);
    raw->shutdown(Scheduler::ShutdownMode::kCancelPending);
    std::lock_guard lock(mu);
    done = true;
    cv.notify_all();
  };
  ASSERT_TRUE(s->submit(std::move(spec), hal::kInfiniteDeadline).is_ok());
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
  lock.unlock();
  s.reset();
}

TEST_F(SchedulerTest, RejectsJobsOfAnotherDevice) {
  auto s = make(1, 8);
  auto other = std::make_shared<FakeDevice>();
  auto exe = runtime::load_executable(other, test::identity_image());
  ASSERT_TRUE(exe.is_ok());
  JobSpec spec = job(1);
  spec.instance = std::move((*exe)->instantiate()).value();
  EXPECT_EQ(s->submit(std::move(spec), hal::kInfiniteDeadline).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, RunExecutesOnTheCallersThreadWhenALaneIsIdle) {
  auto s = make(2, 8);
  JobSpec spec = job(7);
  spec.on_complete = nullptr;
  auto o = s->run(std::move(spec), hal::kInfiniteDeadline);
  ASSERT_TRUE(o.is_ok()) << o.status().to_string();
  EXPECT_TRUE(o->status.is_ok()) << o->status.to_string();
  EXPECT_EQ(o->device_cycles, 100u);
  EXPECT_EQ(o->device_waits, 1u);
  ASSERT_EQ(device_->jobs().size(), 1u);
  EXPECT_EQ(device_->jobs()[0].thread, std::this_thread::get_id());
  EXPECT_EQ(s->stats().completed, 1u);
  JobSpec with_callback = job(8);
  EXPECT_EQ(s->run(std::move(with_callback), hal::kInfiniteDeadline).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(SchedulerTest, RunQueuesBehindABusyLaneAndALaneHandsItTheOutcome) {
  auto s = make(1, 8);
  device_->hold();
  ASSERT_TRUE(s->submit(job(100), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));  // the only lane is busy
  std::optional<Result<JobOutcome>> got;
  std::thread caller([&] {
    JobSpec spec = job(1);
    spec.on_complete = nullptr;
    got.emplace(s->run(std::move(spec), hal::kInfiniteDeadline));
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s->stats().queued == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  ASSERT_EQ(s->stats().queued, 1u) << "the caller's job waits for the lane";
  device_->release();
  caller.join();
  ASSERT_TRUE(got && got->is_ok()) << (got ? got->status().to_string() : "no result");
  EXPECT_TRUE((*got)->status.is_ok()) << (*got)->status.to_string();
  ASSERT_TRUE(outcomes_.wait_for(100));
  const auto jobs = device_->jobs();
  ASSERT_EQ(jobs.size(), 2u);
  // Both ran on the worker, in order: the caller's job queued behind job 100.
  EXPECT_EQ(jobs[1].marker, 1);
  EXPECT_EQ(jobs[1].thread, jobs[0].thread);
}

TEST_F(SchedulerTest, ShutdownCancelsAQueuedRunExactlyOnce) {
  auto s = make(1, 8);
  device_->hold();
  ASSERT_TRUE(s->submit(job(100), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  std::optional<Result<JobOutcome>> got;
  std::thread caller([&] {
    JobSpec spec = job(1);
    spec.on_complete = nullptr;
    got.emplace(s->run(std::move(spec), hal::kInfiniteDeadline));
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s->stats().queued == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  ASSERT_EQ(s->stats().queued, 1u);
  std::thread stopper([&] { s->shutdown(Scheduler::ShutdownMode::kCancelPending); });
  caller.join();  // cancelled while job 100 still holds the lane
  ASSERT_TRUE(got && got->is_ok());
  EXPECT_EQ((*got)->status.code(), StatusCode::kCancelled) << (*got)->status.to_string();
  device_->release();
  stopper.join();
  EXPECT_EQ(device_->jobs().size(), 1u);
  EXPECT_EQ(s->stats().completed, 2u);
  EXPECT_EQ(s->stats().cancelled, 1u);
}

// complete_on_lane: the job's on_complete runs on the thread that ends it (the lane that ran it,
// or the caller of cancel() for a queued one), other jobs' on the completion thread.
TEST_F(SchedulerTest, CompleteOnLaneRunsTheCallbackOnTheThreadThatEndsTheJob) {
  auto s = make(1, 8, std::chrono::minutes(1), /*pipeline_depth=*/1);
  std::mutex mu;
  std::map<int, std::thread::id> where;
  auto record = [&](int marker, CompletionFn then) {
    return [&, marker, then = std::move(then)](JobOutcome&& o) {
      {
        std::lock_guard lock(mu);
        where[marker] = std::this_thread::get_id();
      }
      then(std::move(o));
    };
  };
  device_->hold();
  JobSpec on_lane = job(1);
  on_lane.complete_on_lane = true;
  on_lane.on_complete = record(1, std::move(on_lane.on_complete));
  JobSpec posted = job(2);
  posted.on_complete = record(2, std::move(posted.on_complete));
  JobSpec cancelled = job(3);
  cancelled.complete_on_lane = true;
  cancelled.on_complete = record(3, std::move(cancelled.on_complete));
  ASSERT_TRUE(s->submit(std::move(on_lane), hal::kInfiniteDeadline).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(s->submit(std::move(posted), hal::kInfiniteDeadline).is_ok());
  auto h3 = s->submit(std::move(cancelled), hal::kInfiniteDeadline);
  ASSERT_TRUE(h3.is_ok());
  ASSERT_TRUE(h3->cancel());
  {
    // Delivered inside cancel(), on this thread: no wait needed.
    std::lock_guard lock(mu);
    ASSERT_EQ(where.count(3), 1u);
    EXPECT_EQ(where[3], std::this_thread::get_id());
  }
  EXPECT_EQ(outcomes_.get(3).status.code(), StatusCode::kCancelled);
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(3));
  ASSERT_EQ(device_->jobs().size(), 2u);
  const std::thread::id lane = device_->jobs()[0].thread;
  EXPECT_EQ(device_->jobs()[1].thread, lane);  // one lane ran both
  std::lock_guard lock(mu);
  EXPECT_EQ(where[1], lane);
  EXPECT_NE(where[2], lane);  // the completion thread
  EXPECT_NE(where[2], std::this_thread::get_id());
  for (auto [m, n] : outcomes_.calls()) EXPECT_EQ(n, 1) << "marker " << int(m);
}

// A lane's callback may shut the scheduler down and destroy it: the rest of the shutdown runs
// on a thread of its own, every job still completes exactly once.
TEST_F(SchedulerTest, ALaneCallbackMayShutDownAndDestroyTheScheduler) {
  auto s = make(1, 16);
  device_->hold();
  constexpr uint8_t kJobs = 10;
  for (uint8_t m = 1; m <= kJobs; ++m) {
    JobSpec spec = job(m);
    spec.complete_on_lane = true;
    if (m == 1) {
      spec.on_complete = [&, then = std::move(spec.on_complete)](JobOutcome&& o) {
        s->shutdown(Scheduler::ShutdownMode::kCancelPending);  // returns without waiting
        s.reset();  // destroys the scheduler from its own lane
        then(std::move(o));
      };
    }
    ASSERT_TRUE(s->submit(std::move(spec), hal::kInfiniteDeadline).is_ok());
    if (m == 1) {
      ASSERT_TRUE(device_->wait_submitted(1));
    }
  }
  device_->release();
  ASSERT_TRUE(outcomes_.wait_count(kJobs));
  size_t ok = 0;
  for (uint8_t m = 1; m <= kJobs; ++m) {
    EXPECT_EQ(outcomes_.calls()[m], 1) << "marker " << int(m);
    const StatusCode c = outcomes_.get(m).status.code();
    EXPECT_TRUE(c == StatusCode::kOk || c == StatusCode::kCancelled) << int(m);
    ok += c == StatusCode::kOk;
  }
  EXPECT_EQ(ok, device_->jobs().size());
  EXPECT_TRUE(outcomes_.get(1).status.is_ok());
}

}  // namespace
}  // namespace npu::scheduler
