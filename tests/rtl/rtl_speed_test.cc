// Simulation speed of the RTL (simulated device cycles per wall-clock second) on three
// workloads: GEMM-bound, DMA-bound and a mixed convolution-like job. Prints the numbers; the
// only assertion is a loose floor that catches a pathological slowdown (e.g. a debug build
// of the Verilated model or a per-cycle full-array copy).
#include <gtest/gtest.h>

#include <time.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

// The default configuration (16) when built, else the first built dim.
uint32_t speed_dim() {
  const auto dims = sim::rtl_supported_array_dims();
  for (uint32_t d : dims) {
    if (d == hw::kDefaultArrayDim) return d;
  }
  return dims.front();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double measure(const char* name, const std::vector<Instr>& prog, int repeats) {
  const uint32_t n = speed_dim();
  Bench b(make_rtl, n);
  b.setup_rings();
  const uint32_t len = b.put_program(prog);
  for (int i = 0; i < repeats; ++i) b.exec(0, kCmdVa, len);
  b.fence(0, 1);
  const uint64_t c0 = b.dev().cycle();
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  b.doorbell(0);
  EXPECT_EQ(b.run_to_idle(), sim::StopReason::kIdle);
  const double cpu = thread_cpu_seconds() - cpu0;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
  const uint64_t cycles = b.dev().cycle() - c0;
  // CPU time of this thread: the rate on one core, independent of other load on the machine.
  const double rate = static_cast<double>(cycles) / cpu;
  std::printf("[ speed ] N=%u %-5s %9llu cycles: %.0f cycles/s per CPU-second (%.3f s CPU, "
              "%.3f s wall), MACS %llu\n", n, name, static_cast<unsigned long long>(cycles), rate,
              cpu, secs, static_cast<unsigned long long>(b.counter(hw::Counter::kMacs)));
  return rate;
}

TEST(RtlSpeed, Gemm) {
  // 8 weight tiles x 512 activation rows, accumulated into 512 ACC rows.
  std::vector<Instr> prog = {gemm({.act = 0, .wgt = 0, .acc = 0, .r = 512, .o = 1, .i = 8,
                                   .asi = 512, .asr = 1, .csr = 1, .wsi = 1, .clear = true})};
  EXPECT_GT(measure("gemm", prog, 40), 20'000.0);
}

TEST(RtlSpeed, Dma) {
  const uint32_t n = speed_dim();
  std::vector<Instr> prog = {
      load({.va = kDataVa, .sp_row = 0, .x = 256, .y = 4, .xs = n, .ys = 256 * n}),
      store({.va = kDataVa + 0x100000, .sp_row = 0, .x = 256, .y = 4, .xs = n, .ys = 256 * n}),
  };
  EXPECT_GT(measure("dma", prog, 4), 20'000.0);
}

TEST(RtlSpeed, ConvLike) {
  const uint32_t n = speed_dim();
  // 3x3 conv over a 16x16 image, 1 input block, 1 output block: 9 taps as I, rows as R.
  std::vector<Instr> prog = {
      load({.va = kDataVa, .sp_row = 0, .x = 16, .y = 16, .xs = n, .ys = 16 * n, .pad_l = 1,
            .pad_r = 1, .pad_t = 1, .pad_b = 1}),
      load({.sp = hw::Scratchpad::kWgt, .va = kDataVa + 0x10000, .x = 9 * n, .xs = n}),
      load({.sp = hw::Scratchpad::kAcc, .va = kDataVa + 0x20000, .sp_row = 1000, .x = 3,
            .xs = 4 * n, .flags = kPushNext}),
      gemm({.act = 0, .wgt = 0, .acc = 0, .r = 16, .o = 16, .i = 9, .aso = 18, .asi = 1,
            .asr = 1, .cso = 16, .csr = 1, .wsi = 1, .clear = true, .flags = kPopPrev}),
      vec({.src = 0, .dst = 400, .param = 1000, .r = 256, .ssr = 1, .dsr = 1, .bias = true,
           .flags = kPushNext}),
      store({.va = kDataVa + 0x30000, .sp_row = 400, .x = 256, .xs = n, .flags = kPopPrev}),
  };
  EXPECT_GT(measure("conv", prog, 10), 20'000.0);
}

}  // namespace
}  // namespace npu::rtltest
