// Scheduler throughput on the scripted device (no device time): what the queue, the lanes and
// the completion thread cost per job. Each iteration, every producer thread submits kJobs jobs
// (each on its own instance) into one scheduler and the iteration ends when all completed.
//   runtime_scheduler_bench [--benchmark_filter=...]
// Figures: items_per_second = jobs/s (wall time), and "CPU" is the whole process's CPU time
// per iteration (every thread: producers, lanes, completion thread), which on a shared
// machine is steadier than the wall time.
#include <benchmark/benchmark.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_device.h"
#include "image_builder.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/scheduler/scheduler.h"

namespace npu::scheduler {
namespace {

constexpr int kJobs = 256;

void BM_SchedulerJobs(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  const auto lanes = static_cast<uint32_t>(state.range(1));
  auto device = std::make_shared<test::FakeDevice>();
  auto exe = runtime::load_executable(device, test::identity_image());
  if (!exe.is_ok()) return state.SkipWithError(exe.status().to_string().c_str());
  std::vector<std::shared_ptr<hal::ExecutableInstance>> instances;
  for (int i = 0; i < producers * kJobs; ++i) instances.push_back((*exe)->instantiate().value());
  SchedulerOptions o;
  o.num_contexts = lanes;
  o.queue_capacity = 64;
  auto sched = Scheduler::create(device, o).value();

  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  for (auto _ : state) {
    done = 0;
    std::vector<std::thread> threads;
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        for (int j = 0; j < kJobs; ++j) {
          JobSpec spec;
          spec.instance = instances[static_cast<size_t>(p * kJobs + j)];
          spec.priority = static_cast<Priority>(j % 2 == 0 ? 1 : 2);
          spec.on_complete = [&](JobOutcome&&) {
            std::lock_guard lock(mu);
            if (++done == producers * kJobs) cv.notify_all();
          };
          if (!sched->submit(std::move(spec), hal::kInfiniteDeadline).is_ok()) std::abort();
        }
      });
    }
    for (auto& t : threads) t.join();
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done == producers * kJobs; });
  }
  state.SetItemsProcessed(state.iterations() * producers * kJobs);
}
BENCHMARK(BM_SchedulerJobs)
    ->ArgNames({"producers", "lanes"})
    ->Args({1, 1})
    ->Args({4, 2})
    ->Args({8, 4})
    ->UseRealTime()
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace npu::scheduler

BENCHMARK_MAIN();
