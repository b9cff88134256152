// npu-model-kernels-bench [google benchmark flags]
// The functional model's CPU kernels (sim/model/mac_kernels.h, vec_kernels.h), every kernel
// this CPU runs, each on the same data: Google Benchmark's table, then one line per kernel
// with its time per call and its speed-up over the portable kernel measured in the same run.
// Kernels this CPU lacks are listed as skipped.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "mac_kernels.h"
#include "vec_kernels.h"

namespace {

using namespace npu::sim;

std::vector<int8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(d(rng));
  return v;
}

// One GEMM instruction's inner work: a tile against `rows` activation rows, accumulating.
void mac_rows_bench(benchmark::State& state, MacKernel kernel, uint32_t n, uint32_t rows) {
  const std::vector<int8_t> w = random_bytes(n * n, 1), act = random_bytes(size_t{rows} * n, 2);
  std::vector<int32_t> acc(size_t{rows} * n, 0);
  PackedTile tile;
  pack_tile(w.data(), n, kernel, &tile);
  for (auto _ : state) {
    mac_rows(tile, act.data(), n, acc.data(), n, rows, false);
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  state.counters["MAC/s"] = benchmark::Counter(double(rows) * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void pack_bench(benchmark::State& state, MacKernel kernel, uint32_t n) {
  const std::vector<int8_t> w = random_bytes(n * n, 3);
  PackedTile tile;
  for (auto _ : state) {
    pack_tile(w.data(), n, kernel, &tile);
    benchmark::DoNotOptimize(&tile);
    benchmark::ClobberMemory();
  }
}

// One VEC instruction of 64 consecutive rows.
constexpr uint32_t kVecRows = 64;
RowWalk consecutive_rows(uint32_t n) { return RowWalk{1, kVecRows, 0, n, 0, n}; }

// min_shift 30: some lanes take the 64-bit rounding; 33: every lane takes the 32-bit high
// halves, as compiled models do (their scales lie below 2^-2).
void requantize_bench(benchmark::State& state, VecKernel kernel, uint32_t n, uint32_t min_shift) {
  std::mt19937 rng(4);
  std::vector<int32_t> x(kVecRows * n), bias(n), mult(n), shift(n);
  for (auto& v : x) v = static_cast<int32_t>(rng());
  for (uint32_t c = 0; c < n; ++c) {
    bias[c] = static_cast<int32_t>(rng() % 1000);
    mult[c] = static_cast<int32_t>(rng() >> 1);
    shift[c] = static_cast<int32_t>(min_shift + rng() % 10);
  }
  const RequantParams p{mult.data(), shift.data(), 3, -128, 127, false};
  std::vector<int8_t> y(kVecRows * n);
  for (auto _ : state) {
    requantize_rows(kernel, x.data(), bias.data(), p, y.data(), consecutive_rows(n), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

// shift 21 takes the 64-bit rounding; 36 (the multipliers scaled to match) the 32-bit path of
// MUL, as compiled models' scales do.
void binary_bench(benchmark::State& state, VecKernel kernel, uint32_t n, bool mul, uint32_t shift) {
  const std::vector<int8_t> a = random_bytes(kVecRows * n, 5), b = random_bytes(kVecRows * n, 6);
  const int64_t m0 = shift >= 33 ? 1 << 28 : 1 << 20, m1 = 3 * m0 / 2;
  const BinaryParams p{mul, 3, -2, m0, m1, shift, 1, -128, 127, false};
  std::vector<int8_t> y(kVecRows * n);
  for (auto _ : state) {
    binary_rows(kernel, a.data(), b.data(), p, y.data(), consecutive_rows(n), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

void lut_bench(benchmark::State& state, VecKernel kernel, uint32_t n) {
  const std::vector<int8_t> table = random_bytes(256, 7), x = random_bytes(kVecRows * n, 8);
  std::vector<int8_t> y(kVecRows * n);
  for (auto _ : state) {
    lut_rows(kernel, table.data(), x.data(), -100, 100, y.data(), consecutive_rows(n), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

// A 3×3 window over a 3-row strip of 3 pixels per output row: MAXPOOL's reduction per row,
// DWCONV's reduction and requantisation over the instruction's rows.
void maxpool_bench(benchmark::State& state, VecKernel kernel, uint32_t n) {
  const std::vector<int8_t> x = random_bytes(size_t{9} * n, 9);
  int32_t sum[32];
  for (auto _ : state) {
    for (uint32_t r = 0; r < kVecRows; ++r) window_reduce(kernel, WindowOp::kMax, x.data(), 3 * n, 3, 3, nullptr, n, sum);
    benchmark::DoNotOptimize(sum);
    benchmark::ClobberMemory();
  }
}

void dwconv_bench(benchmark::State& state, VecKernel kernel, uint32_t n) {
  const std::vector<int8_t> x = random_bytes(size_t{kVecRows + 9} * n, 9), w = random_bytes(size_t{9} * n, 10);
  std::vector<int32_t> mult(n, 1 << 20), shift(n, 24), bias(n, 5);
  const RequantParams p{mult.data(), shift.data(), 0, -128, 127, false};
  std::vector<int8_t> y(kVecRows * n);
  for (auto _ : state) {
    // Output row r's window starts at source row r (rows of the strip are 3n apart).
    dwconv_rows(kernel, x.data(), Window{3 * ptrdiff_t{n}, 3, 3, w.data()}, bias.data(), p, y.data(),
                RowWalk{1, kVecRows, 0, n, 0, n}, n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
}

// Keeps every run's time per iteration for the ratio table.
class RatioReporter final : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration && !r.error_occurred) ns_[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
  // Names are "<case>/<kernel>"; the reference is "<case>/portable".
  void print_ratios() const {
    std::printf("\n%-44s %12s %14s\n", "kernel (same run)", "ns per call", "vs portable");
    for (const auto& [name, ns] : ns_) {
      const std::string base = name.substr(0, name.rfind('/'));
      const auto ref = ns_.find(base + "/portable");
      if (ref == ns_.end()) continue;
      std::printf("%-44s %12.1f %13.2fx\n", name.c_str(), ns, ref->second / ns);
    }
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> skipped;
  for (uint32_t n : {8u, 16u, 32u}) {
    const std::string dim = "/n=" + std::to_string(n);
    for (MacKernel k : all_mac_kernels()) {
      const std::string kn = mac_kernel_name(k);
      if (!mac_kernel_usable(k, n)) {
        skipped.push_back("mac_rows" + dim + "/" + kn);
        continue;
      }
      benchmark::RegisterBenchmark(("mac_rows_r16" + dim + "/" + kn).c_str(), mac_rows_bench, k, n, 16u);
      benchmark::RegisterBenchmark(("mac_rows_r256" + dim + "/" + kn).c_str(), mac_rows_bench, k, n, 256u);
      benchmark::RegisterBenchmark(("pack_tile" + dim + "/" + kn).c_str(), pack_bench, k, n);
    }
    for (VecKernel k : all_vec_kernels()) {
      const std::string kn = vec_kernel_name(k);
      if (!vec_kernel_usable(k)) {
        skipped.push_back("vec" + dim + "/" + kn);
        continue;
      }
      benchmark::RegisterBenchmark(("requantize_x64" + dim + "/" + kn).c_str(), requantize_bench, k, n, 30u);
      benchmark::RegisterBenchmark(("requantize_high_x64" + dim + "/" + kn).c_str(), requantize_bench, k, n, 33u);
      benchmark::RegisterBenchmark(("add_x64" + dim + "/" + kn).c_str(), binary_bench, k, n, false, 21u);
      benchmark::RegisterBenchmark(("mul_x64" + dim + "/" + kn).c_str(), binary_bench, k, n, true, 21u);
      benchmark::RegisterBenchmark(("mul_high_x64" + dim + "/" + kn).c_str(), binary_bench, k, n, true, 36u);
      benchmark::RegisterBenchmark(("lut_x64" + dim + "/" + kn).c_str(), lut_bench, k, n);
      benchmark::RegisterBenchmark(("dwconv3x3_x64" + dim + "/" + kn).c_str(), dwconv_bench, k, n);
      benchmark::RegisterBenchmark(("maxpool3x3_x64" + dim + "/" + kn).c_str(), maxpool_bench, k, n);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  for (const std::string& s : skipped) std::printf("%-44s skipped: this CPU does not run it\n", s.c_str());
  benchmark::Shutdown();
  return 0;
}
