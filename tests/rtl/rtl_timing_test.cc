// The RTL's cycle costs are exactly those documented in sim/rtl/TIMING.md. This test keeps
// that document honest: each case computes the expected cycle count from the TIMING.md
// formulas and compares it with the cycles the RTL took.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

struct Timing {
  uint64_t L;  // DRAM first-beat latency
  uint64_t n;  // array dim

  uint64_t ring_entry() const { return L + 8; }
  uint64_t fetch(bool itlb_miss) const { return L + 9 + (itlb_miss ? L + 1 : 0); }
  uint64_t instr_overhead(bool itlb_miss) const { return fetch(itlb_miss) + 3; }
  static uint64_t beats(uint64_t pa, uint64_t len) { return (pa % 16 + len + 15) / 16; }
  uint64_t load_row(uint64_t pa, uint64_t len, bool dtlb_miss) const {
    return 7 + L + beats(pa, len) + (dtlb_miss ? L + 1 : 0);
  }
  uint64_t store_row(uint64_t pa, uint64_t len, bool dtlb_miss) const {
    return 7 + beats(pa, len) + (dtlb_miss ? L + 1 : 0);
  }
  // First block: setup + tile load + rows; later blocks overlap the next tile's load with the
  // current block's rows (weight double buffering).
  uint64_t gemm(uint64_t o, uint64_t i, uint64_t r) const {
    return 1 + n + r + (o * i - 1) * std::max(r, n);
  }
  static uint64_t vec(uint64_t o, uint64_t r) { return 3 + o * r; }
};

class RtlTiming : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {
 protected:
  RtlTiming()
      : n(std::get<0>(GetParam())),
        lat(std::get<1>(GetParam())),
        b(make_rtl, n, kDramBytes, lat),
        t{lat, n} {
    b.setup_rings(0);
  }

  uint64_t run_job(const std::vector<Instr>& prog) {
    const uint32_t len = b.put_program(prog);
    b.exec(0, kCmdVa, len);
    b.doorbell(0);
    const uint64_t c0 = b.dev().cycle();
    EXPECT_EQ(b.dev().run(100'000'000), sim::StopReason::kIdle);
    EXPECT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
    return b.dev().cycle() - c0;
  }

  uint32_t n, lat;
  Bench b;
  Timing t;
};

TEST_P(RtlTiming, RingEntriesAndFetch) {
  EXPECT_EQ(run_job({nop()}), t.ring_entry() + t.instr_overhead(true));
  EXPECT_EQ(run_job({nop(), sync(0, 0), nop()}),
            t.ring_entry() + t.instr_overhead(true) + 2 * t.instr_overhead(false));
  b.fence(0, 3);
  b.doorbell(0);
  const uint64_t c0 = b.dev().cycle();
  EXPECT_EQ(b.dev().run(1'000'000), sim::StopReason::kIdle);
  EXPECT_EQ(b.dev().cycle() - c0, t.ring_entry());
}

TEST_P(RtlTiming, LoadRowsPaddingAndAlignment) {
  const uint32_t va = kDataVa + 8;  // each 16-byte-or-wider row spans one more beat
  const uint64_t len = n;
  std::vector<Instr> prog = {load({.va = va, .sp_row = 0, .x = 3, .y = 2, .xs = n, .ys = 4 * n,
                                   .pad_l = 1, .pad_b = 2})};
  uint64_t engine = 0;
  bool first = true;
  for (uint32_t y = 0; y < 2 + 2; ++y) {
    for (uint32_t x = 0; x < 3 + 1; ++x) {
      if (x == 0 || y >= 2) {
        engine += 1;
        continue;
      }
      const uint64_t pa = va + y * 4 * n + (x - 1) * n;
      engine += t.load_row(pa, len, first);
      first = false;
    }
  }
  EXPECT_EQ(run_job(prog), t.ring_entry() + t.instr_overhead(true) + engine);
}

TEST_P(RtlTiming, PageCrossingRows) {
  // One LOAD row and one STORE row, each straddling a 64 KiB page: both pieces are
  // translated (both miss the one-entry data TLB), then moved as two bursts.
  const uint32_t va = kDataVa + kPageBytes - 4;  // 4 bytes on the first page, N - 4 on the next
  const uint64_t b0 = Timing::beats(va, 4), b1 = Timing::beats(va + 4, n - 4);
  const uint64_t load_row = 11 + 2 * t.L + b0 + b1 + 2 * (t.L + 1);
  const uint64_t store_row = 11 + b0 + b1 + 2 * (t.L + 1);
  EXPECT_EQ(run_job({load({.va = va, .x = 1}), store({.va = va, .x = 1})}),
            t.ring_entry() + t.instr_overhead(true) + load_row + t.instr_overhead(false) +
                store_row);
}

TEST_P(RtlTiming, StoreRowsAccElements) {
  std::vector<Instr> prog = {store({.sp = hw::Scratchpad::kAcc, .va = kDataVa, .x = 4,
                                    .xs = 4 * n, .row_elems = 3})};
  uint64_t engine = 0;
  for (uint32_t x = 0; x < 4; ++x) engine += t.store_row(kDataVa + x * 4 * n, 12, x == 0);
  EXPECT_EQ(run_job(prog), t.ring_entry() + t.instr_overhead(true) + engine);
}

TEST_P(RtlTiming, GemmAndVec) {
  std::vector<Instr> prog = {gemm({.r = 5, .o = 2, .i = 3}), vec({.r = 3, .o = 2})};
  EXPECT_EQ(run_job(prog), t.ring_entry() + t.instr_overhead(true) + t.gemm(2, 3, 5) +
                               t.instr_overhead(false) + t.vec(2, 3));
  // Long R: the next tile is loaded while the rows stream, so blocks cost R each.
  const uint32_t r = 3 * n;
  EXPECT_EQ(run_job({gemm({.r = r, .o = 3, .i = 2, .asr = 1, .csr = 1})}),
            t.ring_entry() + t.instr_overhead(true) + t.gemm(3, 2, r));
  EXPECT_EQ(run_job({gemm({.r = n, .o = 1, .i = 4})}),
            t.ring_entry() + t.instr_overhead(true) + t.gemm(1, 4, n));
}

INSTANTIATE_TEST_SUITE_P(
    Dims, RtlTiming,
    ::testing::Combine(::testing::ValuesIn(sim::rtl_supported_array_dims()),
                       ::testing::Values(64u, 10u)),
    [](const auto& param_info) {
      char name[32];
      std::snprintf(name, sizeof(name), "N%u_L%u", std::get<0>(param_info.param),
                    std::get<1>(param_info.param));
      return std::string(name);
    });

}  // namespace
}  // namespace npu::rtltest
