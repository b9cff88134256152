// Runtime benchmarks (Google Benchmark) on the functional model ("sim") through the whole
// stack: Session::run latency on a null job and on the tiny Gemm+Relu model, and
// AsyncSession throughput at 1, 4, 16 and 64 requests in flight.
//   npu-runtime-bench [--benchmark_filter=...] [--benchmark_min_time=...]
// Each benchmark also measures, in the same run and on the same device, its reference: the
// HAL alone submitting the model's command buffers and waiting on their fences (no runtime,
// no scheduler: quantisation, queueing and completion delivery are what the ratio shows).
// Counters (absolute times in microseconds, ratios against the reference):
//   Session:  p50_us, p99_us, hal_p50_us, hal_p99_us (alternating with the session's
//             requests), x_hal_p50 (= p50_us / hal_p50_us), x_hal_p99 (= p99_us / hal_p99_us)
//   Async:    req_per_s (= items_per_second), hal_req_per_s (the HAL keeping the same number
//             of jobs in flight on one context), x_hal (= req_per_s / hal_req_per_s);
//             cpu_us (process CPU time per request, every thread: the device model's too) and
//             sleeps (voluntary context switches per request, every thread), each also for the
//             HAL (hal_cpu_us, hal_sleeps); caller_us, lanes_us and device_us split cpu_us
//             by thread (the submitting and receiving thread, the scheduler's lanes, the
//             device model's thread). On a shared machine the rates follow the CPU time
//             other processes leave; CPU time and sleeps per request much less so.
#include <benchmark/benchmark.h>
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

#include "image_builder.h"
#include "npu/compiler/compiler.h"
#include "npu/runtime/api.h"
#include "npu/runtime/image_to_hal.h"

namespace npu::bench {
namespace {

using Clock = std::chrono::steady_clock;
using runtime::Model;


std::shared_ptr<runtime::Runtime> shared_runtime() {
  static std::shared_ptr<runtime::Runtime> rt = [] {
    setenv("NPU_LOG", "quiet", 0);
    runtime::RuntimeOptions o;
    o.device = "sim";
    auto r = runtime::Runtime::open(o);
    if (!r.is_ok()) {
      std::fprintf(stderr, "npu-runtime-bench: %s\n", r.status().to_string().c_str());
      std::exit(1);
    }
    return std::move(r).value();
  }();
  return rt;
}

enum class Workload { kNull, kGemmRelu };

std::shared_ptr<const Model> load(Workload w) {
  if (w == Workload::kNull) {
    auto m = Model::from_image(test::identity_image({.null_job = true}));
    return m.is_ok() ? std::move(m).value() : nullptr;
  }
  compiler::CompileOptions co;
  co.array_dim = shared_runtime()->device(0)->info().array_dim;
  auto bytes = compiler::compile_onnx_file(NPU_BENCH_DATA "/gemm_relu.onnx", co);
  if (!bytes.is_ok()) return nullptr;
  auto m = Model::from_bytes(std::move(bytes).value(), "gemm_relu.onnx");
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::vector<Tensor> inputs_for(const Model& m) {
  std::vector<Tensor> in;
  for (const auto& info : m.inputs()) {
    Tensor t = Tensor::zeros(DType::kF32, info.shape);
    float v = 0.25f;
    for (float& x : t.as<float>()) x = (v = -v * 1.01f);
    in.push_back(std::move(t));
  }
  return in;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Process-wide CPU time (µs) and voluntary context switches, summed over every thread.
struct Usage {
  double cpu_us = 0;
  double sleeps = 0;
  static Usage now() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto tv_us = [](const timeval& tv) {
      return static_cast<double>(tv.tv_sec) * 1e6 + static_cast<double>(tv.tv_usec);
    };
    return {tv_us(ru.ru_utime) + tv_us(ru.ru_stime), static_cast<double>(ru.ru_nvcsw)};
  }
  Usage per(size_t n, const Usage& since) const {
    const auto k = static_cast<double>(std::max<size_t>(n, 1));
    return {(cpu_us - since.cpu_us) / k, (sleeps - since.sleeps) / k};
  }
};

// CPU time (µs) of the process's threads by role, from /proc/self/task/*/schedstat (the
// scheduler's own account, in nanoseconds): the calling thread, the scheduler's lanes and the
// device model's thread. Roles are told apart by thread name (pthread_setname_np).
struct ThreadCpu {
  double caller_us = 0, lanes_us = 0, device_us = 0;
  static ThreadCpu now() {
    ThreadCpu t;
    DIR* dir = opendir("/proc/self/task");
    if (!dir) return t;
    const std::string self = std::to_string(gettid());
    while (const dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      const std::string base = std::string("/proc/self/task/") + e->d_name;
      std::string comm;
      double ns = 0;
      std::getline(std::ifstream(base + "/comm"), comm);
      std::ifstream(base + "/schedstat") >> ns;
      if (e->d_name == self) {
        t.caller_us += ns / 1e3;
      } else if (comm.rfind("npu-lane", 0) == 0) {
        t.lanes_us += ns / 1e3;
      } else if (comm.rfind("npu-dev", 0) == 0) {
        t.device_us += ns / 1e3;
      }
    }
    closedir(dir);
    return t;
  }
  ThreadCpu per(size_t n, const ThreadCpu& since) const {
    const auto k = static_cast<double>(std::max<size_t>(n, 1));
    return {(caller_us - since.caller_us) / k, (lanes_us - since.lanes_us) / k,
            (device_us - since.device_us) / k};
  }
};

// The reference: the model's NPU steps through the HAL alone, one context.
struct HalReference {
  std::shared_ptr<hal::Executable> exe;
  std::shared_ptr<hal::Context> ctx;
  std::vector<std::unique_ptr<hal::ExecutableInstance>> instances;

  static HalReference make(const Model& m, size_t instances) {
    HalReference r;
    auto device = shared_runtime()->device(0);
    r.exe = runtime::load_executable(device, m.shared_image()).value();
    r.ctx = device->create_context(hal::Priority::kNormal).value();
    for (size_t i = 0; i < instances; ++i) r.instances.push_back(r.exe->instantiate().value());
    return r;
  }
  // Queues instance i's NPU steps; returns the fence of the last.
  hal::Fence submit(size_t i) {
    hal::Fence last;
    for (size_t s = 0; s < exe->steps().size(); ++s) {
      if (exe->steps()[s].kind != hal::StepKind::kNpu) continue;
      last = ctx->submit(instances[i]->command_buffer(s).value()).value();
    }
    return last;
  }
  // Latencies of `n` submit-and-wait round trips.
  std::vector<double> round_trips(size_t n) {
    std::vector<double> lat;
    lat.reserve(n);
    for (size_t k = 0; k < n; ++k) {
      const auto t = Clock::now();
      if (!submit(0).wait(hal::kInfiniteDeadline).is_ok()) std::abort();
      lat.push_back(us(Clock::now() - t));
    }
    return lat;
  }
  // Jobs per second with `depth` in flight, over `n` jobs.
  double throughput(size_t depth, size_t n) {
    std::deque<hal::Fence> inflight;
    const auto t = Clock::now();
    for (size_t k = 0; k < n; ++k) {
      if (inflight.size() == depth) {
        if (!inflight.front().wait(hal::kInfiniteDeadline).is_ok()) std::abort();
        inflight.pop_front();
      }
      inflight.push_back(submit(k % depth));
    }
    for (auto& f : inflight) (void)f.wait(hal::kInfiniteDeadline);
    return static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - t).count();
  }
};

void BM_SessionRun(benchmark::State& state, Workload w) {
  auto model = load(w);
  if (!model) return state.SkipWithError("the model did not load");
  auto session = runtime::Session::create(shared_runtime(), model);
  if (!session.is_ok()) return state.SkipWithError(session.status().to_string().c_str());
  const std::vector<Tensor> in = inputs_for(*model);
  for (int k = 0; k < 100; ++k) (void)(*session)->run(in);  // warm: pools, contexts, caches
  HalReference ref = HalReference::make(*model, 1);
  (void)ref.round_trips(100);
  // The reference alternates with the session, one round trip each per iteration (untimed by
  // the framework), so that both see the same load from other processes: on a shared machine
  // the tails (p99) are the machine's as much as ours.
  std::vector<double> lat, hal;
  lat.reserve(1 << 20);
  hal.reserve(1 << 20);
  for (auto _ : state) {
    const auto t = Clock::now();
    auto out = (*session)->run(in);
    lat.push_back(us(Clock::now() - t));
    if (!out.is_ok()) return state.SkipWithError(out.status().to_string().c_str());
    benchmark::DoNotOptimize(out);
    state.PauseTiming();
    hal.push_back(ref.round_trips(1).front());
    state.ResumeTiming();
  }
  state.counters["p50_us"] = percentile(lat, 0.50);
  state.counters["p99_us"] = percentile(lat, 0.99);
  state.counters["hal_p50_us"] = percentile(hal, 0.50);
  state.counters["hal_p99_us"] = percentile(hal, 0.99);
  state.counters["x_hal_p50"] = percentile(lat, 0.50) / percentile(hal, 0.50);
  state.counters["x_hal_p99"] = percentile(lat, 0.99) / percentile(hal, 0.99);
}
BENCHMARK_CAPTURE(BM_SessionRun, null_job, Workload::kNull)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_SessionRun, gemm_relu, Workload::kGemmRelu)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_AsyncThroughput(benchmark::State& state) {
  const auto depth = static_cast<uint32_t>(state.range(0));
  auto model = load(Workload::kGemmRelu);
  if (!model) return state.SkipWithError("the model did not load");
  runtime::SessionOptions so;
  so.max_in_flight = depth;
  so.max_outstanding = depth;
  auto pair = runtime::AsyncSession::create(shared_runtime(), model, so);
  if (!pair.is_ok()) return state.SkipWithError(pair.status().to_string().c_str());
  auto& [session, queue] = pair.value();
  const std::vector<Tensor> in = inputs_for(*model);
  auto submit = [&] { return session->submit(in).is_ok(); };
  for (uint32_t k = 0; k < depth; ++k)
    if (!submit()) return state.SkipWithError("submit failed");
  const Usage u0 = Usage::now();
  const ThreadCpu c0 = ThreadCpu::now();
  const auto t0 = Clock::now();
  for (auto _ : state) {
    auto c = queue->recv();
    if (!c.is_ok() || !c->status.is_ok()) return state.SkipWithError("a request failed");
    if (!submit()) return state.SkipWithError("submit failed");
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto iterations = static_cast<size_t>(state.iterations());
  const Usage used = Usage::now().per(iterations, u0);
  const ThreadCpu threads = ThreadCpu::now().per(iterations, c0);
  for (uint32_t k = 0; k < depth; ++k) (void)queue->recv();
  state.SetItemsProcessed(state.iterations());
  HalReference ref = HalReference::make(*model, depth);
  const size_t hal_jobs = std::max<size_t>(iterations, 2000);
  const Usage h0 = Usage::now();
  const ThreadCpu hc0 = ThreadCpu::now();
  const double hal = ref.throughput(depth, hal_jobs);
  const Usage hal_used = Usage::now().per(hal_jobs, h0);
  const ThreadCpu hal_threads = ThreadCpu::now().per(hal_jobs, hc0);
  const double rate = seconds > 0 ? static_cast<double>(iterations) / seconds : 0;
  state.counters["req_per_s"] = rate;
  state.counters["hal_req_per_s"] = hal;
  state.counters["x_hal"] = rate / hal;
  state.counters["cpu_us"] = used.cpu_us;
  state.counters["sleeps"] = used.sleeps;
  state.counters["caller_us"] = threads.caller_us;
  state.counters["lanes_us"] = threads.lanes_us;
  state.counters["device_us"] = threads.device_us;
  state.counters["hal_caller_us"] = hal_threads.caller_us;
  state.counters["hal_device_us"] = hal_threads.device_us;
  state.counters["hal_cpu_us"] = hal_used.cpu_us;
  state.counters["hal_sleeps"] = hal_used.sleeps;
}
BENCHMARK(BM_AsyncThroughput)
    ->ArgName("in_flight")
    ->Arg(1)
    ->Arg(4)
    ->Arg(16)
    ->Arg(64)
    ->UseRealTime()
    ->MeasureProcessCPUTime();  // "CPU": every thread of the process, per request

}  // namespace
}  // namespace npu::bench

BENCHMARK_MAIN();
