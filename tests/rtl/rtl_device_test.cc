// Directed tests of the Verilator RTL: register reset values, a hand-written program with
// hand-computed results, every error path, and reset recovery.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

using sim::StopReason;

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

// Every test runs at each array dim built into npu_sim_rtl.
class RtlTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  RtlTest() : b(make_rtl, GetParam()), n(GetParam()) {}
  Bench b;
  uint32_t n;

  void expect_error(hw::ErrorCode code, uint32_t addr, uint32_t instr, uint32_t queue = 0) {
    auto& d = b.dev();
    EXPECT_EQ(d.read_reg(reg::ERROR_CODE), static_cast<uint32_t>(code))
        << hw::error_name(static_cast<hw::ErrorCode>(d.read_reg(reg::ERROR_CODE)));
    EXPECT_EQ(d.read_reg(reg::ERROR_ADDR), addr);
    EXPECT_EQ(d.read_reg(reg::ERROR_INSTR), instr);
    EXPECT_EQ(d.read_reg(reg::ERROR_QUEUE), queue);
    EXPECT_TRUE(d.read_reg(reg::STATUS) & hw::bits::STATUS_ERROR);
    EXPECT_TRUE(d.read_reg(reg::IRQ_STATUS) & hw::bits::IRQ_ERROR);
  }
};

TEST(RtlFactory, RejectsUnbuiltDim) {
  std::vector<std::byte> dram(1 << 20);
  sim::DeviceConfig cfg;
  cfg.array_dim = 12;
  EXPECT_THROW(sim::make_rtl_device(cfg, dram), std::invalid_argument);
  cfg.array_dim = sim::rtl_supported_array_dims().front();
  cfg.dma_beat_bytes = 32;
  EXPECT_THROW(sim::make_rtl_device(cfg, dram), std::invalid_argument);
}

TEST_P(RtlTest, RegisterResetValues) {
  auto& d = b.dev();
  EXPECT_EQ(d.kind(), "rtl");
  EXPECT_EQ(d.read_reg(reg::ID), hw::kDeviceId);
  EXPECT_EQ(d.read_reg(reg::VERSION), hw::kIsaVersion);
  uint64_t fp = d.read_reg(reg::FINGERPRINT_LO) |
                (static_cast<uint64_t>(d.read_reg(reg::FINGERPRINT_HI)) << 32);
  EXPECT_EQ(fp, hw::fingerprint_for_dim(n));
  EXPECT_EQ(d.read_reg(reg::CONFIG), n | (hw::kNumQueues << 8));
  EXPECT_EQ(d.read_reg(reg::CONTROL), 0u);
  EXPECT_EQ(d.read_reg(reg::STATUS), 0u);
  EXPECT_EQ(d.read_reg(reg::IRQ_STATUS), 0u);
  EXPECT_EQ(d.read_reg(reg::IRQ_MASK), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_CODE), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_ADDR), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_QUEUE), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_INSTR), 0u);
  EXPECT_EQ(d.read_reg(reg::ACT_SP_ROWS), hw::kActSpBytes / n);
  EXPECT_EQ(d.read_reg(reg::WGT_SP_TILES), hw::kWgtSpBytes / (n * n));
  EXPECT_EQ(d.read_reg(reg::ACC_SP_ROWS), hw::kAccSpBytes / (4 * n));
  EXPECT_EQ(d.read_reg(reg::RESET_COUNT), 0u);
  for (uint32_t q = 0; q < hw::kNumQueues; ++q) {
    EXPECT_EQ(d.read_reg(reg::RING_BASE(q)), 0u);
    EXPECT_EQ(d.read_reg(reg::RING_SIZE(q)), 0u);
    EXPECT_EQ(d.read_reg(reg::RING_HEAD(q)), 0u);
    EXPECT_EQ(d.read_reg(reg::RING_TAIL(q)), 0u);
    EXPECT_EQ(d.read_reg(reg::COMPLETED_SEQ(q)), 0u);
  }
  // Architectural counters start at zero; unknown offsets read zero.
  for (uint32_t c = 0; c < hw::kNumCounters; ++c) {
    if (hw::kCounterArchitectural[c]) {
      EXPECT_EQ(b.counter(static_cast<hw::Counter>(c)), 0u);
    }
  }
  EXPECT_EQ(d.read_reg(0x0FC), 0u);
  EXPECT_EQ(d.read_reg(reg::REGISTER_SPACE_BYTES), 0u);
  // RW registers read back; RO registers ignore writes.
  d.write_reg(reg::IRQ_MASK, 0x101);
  EXPECT_EQ(d.read_reg(reg::IRQ_MASK), 0x101u);
  d.write_reg(reg::ID, 0);
  EXPECT_EQ(d.read_reg(reg::ID), hw::kDeviceId);
  d.write_reg(reg::RING_BASE(2), 0x4000);
  EXPECT_EQ(d.read_reg(reg::RING_BASE(2)), 0x4000u);
  EXPECT_EQ(d.run(1000), StopReason::kIdle);  // nothing to do: returns at once
}

TEST_P(RtlTest, IdleRunReturnsImmediately) {
  b.setup_rings();
  uint64_t c0 = b.dev().cycle();
  EXPECT_EQ(b.dev().run(1'000'000), StopReason::kIdle);
  EXPECT_EQ(b.dev().cycle(), c0);
}

// Reference requant of one lane (architecture.md 1.4).
int8_t requant(int32_t acc, int32_t bias, int32_t mul, int32_t shift, int8_t zp, int8_t lo,
               int8_t hi) {
  int32_t v = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(bias));
  int64_t t = static_cast<int64_t>(v) * mul;
  int s = shift & 63;
  if (s > 0) t = (t + (int64_t{1} << (s - 1))) >> s;
  t += zp;
  if (t < lo) t = lo;
  if (t > hi) t = hi;
  return static_cast<int8_t>(t);
}

TEST_P(RtlTest, HandWrittenProgram) {
  // LOAD act (4 rows) + weight tile + params, GEMM, VEC requant, STORE, then a FENCE.
  constexpr uint32_t kR = 4;
  const uint32_t act_va = kDataVa, wgt_va = kDataVa + 0x1000, par_va = kDataVa + 0x2000;
  const uint32_t out_va = kDataVa + 0x3000, acc_out_va = kDataVa + 0x4000;
  std::mt19937 rng(1);
  std::vector<int8_t> a(kR * n), w(n * n);
  for (auto& x : a) x = static_cast<int8_t>(rng());
  for (auto& x : w) x = static_cast<int8_t>(rng());
  std::vector<int32_t> par(3 * n);
  for (uint32_t i = 0; i < n; ++i) {
    par[i] = static_cast<int32_t>(rng() % 2001) - 1000;           // bias
    par[n + i] = static_cast<int32_t>(rng() % (1u << 20)) + 1;    // multiplier
    par[2 * n + i] = static_cast<int32_t>(12 + rng() % 10);       // shift
  }
  b.write(act_va, a.data(), a.size());
  b.write(wgt_va, w.data(), w.size());
  b.write(par_va, par.data(), par.size() * 4);

  std::vector<Instr> prog = {
      load({.sp = hw::Scratchpad::kAct, .va = act_va, .sp_row = 0, .x = kR, .xs = n}),
      load({.sp = hw::Scratchpad::kWgt, .va = wgt_va, .sp_row = 0, .x = n, .xs = n}),
      load({.sp = hw::Scratchpad::kAcc, .va = par_va, .sp_row = 8, .x = 3, .xs = 4 * n,
            .flags = kPushNext}),
      gemm({.act = 0, .wgt = 0, .acc = 0, .r = kR, .asr = 1, .csr = 1, .clear = true,
            .flags = kPopPrev}),
      vec({.src = 0, .dst = 16, .param = 8, .r = kR, .zp = 3, .lo = -100, .hi = 90, .ssr = 1,
           .dsr = 1, .bias = true, .flags = kPushNext}),
      store({.sp = hw::Scratchpad::kAct, .va = out_va, .sp_row = 16, .x = kR, .xs = n,
             .flags = kPopPrev}),
      store({.sp = hw::Scratchpad::kAcc, .va = acc_out_va, .sp_row = 0, .x = kR, .xs = 4 * n}),
  };
  b.setup_rings();
  ASSERT_EQ(b.run_program(prog, 7), StopReason::kIdle);
  auto& d = b.dev();
  ASSERT_EQ(d.read_reg(reg::ERROR_CODE), 0u);
  EXPECT_EQ(d.read_reg(reg::COMPLETED_SEQ(0)), 7u);
  EXPECT_EQ(d.read_reg(reg::RING_HEAD(0)), 64u);

  std::vector<int32_t> acc(kR * n);
  for (uint32_t r = 0; r < kR; ++r)
    for (uint32_t c = 0; c < n; ++c) {
      int32_t s = 0;
      for (uint32_t k = 0; k < n; ++k) s += a[r * n + k] * w[k * n + c];
      acc[r * n + c] = s;
    }
  std::vector<int32_t> got_acc(kR * n);
  b.read(acc_out_va, got_acc.data(), got_acc.size() * 4);
  EXPECT_EQ(got_acc, acc);
  std::vector<int8_t> got(kR * n), want(kR * n);
  b.read(out_va, got.data(), got.size());
  for (uint32_t r = 0; r < kR; ++r)
    for (uint32_t c = 0; c < n; ++c)
      want[r * n + c] = requant(acc[r * n + c], par[c], par[n + c], par[2 * n + c], 3, -100, 90);
  EXPECT_EQ(got, want);

  EXPECT_EQ(b.counter(hw::Counter::kInstrs), prog.size());
  EXPECT_EQ(b.counter(hw::Counter::kJobs), 1u);
  EXPECT_EQ(b.counter(hw::Counter::kMacs), uint64_t{kR} * n * n);
  EXPECT_EQ(b.counter(hw::Counter::kDmaRdBytes), uint64_t{kR} * n + n * n + 3 * 4 * n);
  EXPECT_EQ(b.counter(hw::Counter::kDmaWrBytes), uint64_t{kR} * n + kR * 4 * n);
  EXPECT_GT(b.counter(hw::Counter::kCycles), 0u);
}

TEST_P(RtlTest, LoadPaddingRowElemsAndPageCrossing) {
  // A 2x3 image (z=2 planes) loaded with 1-pixel padding on every side, row_elems = 5, from
  // a buffer that straddles a page boundary; then stored back densely.
  const uint32_t src_va = kDataVa + kPageBytes - 7;  // first row crosses the page
  const uint32_t dst_va = kDataVa + 3 * kPageBytes;
  const uint32_t X = 3, Y = 2, Z = 2, re = 5, xs = 9, ys = 40, zs = 100;
  std::vector<uint8_t> src(400);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  b.write(src_va, src.data(), src.size());
  const uint32_t Xp = X + 2, Yp = Y + 2;
  std::vector<Instr> prog = {
      load({.va = src_va, .sp_row = 100, .x = X, .y = Y, .z = Z, .xs = xs, .ys = ys, .zs = zs,
            .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1, .row_elems = re, .flags = kPushNext}),
      sync(1, kPopPrev | kPushNext),  // the engines overlap: tokens order the rows
      store({.va = dst_va, .sp_row = 100, .x = Xp * Yp * Z, .xs = n, .flags = kPopPrev}),
  };
  b.setup_rings();
  ASSERT_EQ(b.run_program(prog), StopReason::kIdle);
  ASSERT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
  std::vector<uint8_t> got(Xp * Yp * Z * n);
  b.read(dst_va, got.data(), got.size());
  for (uint32_t z = 0; z < Z; ++z)
    for (uint32_t yy = 0; yy < Yp; ++yy)
      for (uint32_t xx = 0; xx < Xp; ++xx) {
        uint32_t row = (z * Yp + yy) * Xp + xx;
        bool pad = yy == 0 || yy == Yp - 1 || xx == 0 || xx == Xp - 1;
        for (uint32_t e = 0; e < n; ++e) {
          uint8_t want = 0;
          if (!pad && e < re) want = src[z * zs + (yy - 1) * ys + (xx - 1) * xs + e];
          ASSERT_EQ(got[row * n + e], want) << "row " << row << " elem " << e;
        }
      }
  EXPECT_EQ(b.counter(hw::Counter::kDmaRdBytes), uint64_t{X} * Y * Z * re);
}

TEST_P(RtlTest, GemmAccumulatesOverInputBlocks) {
  // O=2 output blocks, I=3 input blocks, R=5 rows, clear on i==0, plus a second GEMM that
  // accumulates on top (clear=0).
  const uint32_t O = 2, I = 3, R = 5;
  std::mt19937 rng(7);
  std::vector<int8_t> act(I * R * n), wgt(O * I * n * n);
  for (auto& x : act) x = static_cast<int8_t>(rng());
  for (auto& x : wgt) x = static_cast<int8_t>(rng());
  b.write(kDataVa, act.data(), act.size());
  b.write(kDataVa + 0x10000, wgt.data(), wgt.size());
  GemmArgs g{.act = 0, .wgt = 0, .acc = 0, .r = R, .o = O, .i = I, .aso = 0, .asi = R,
             .asr = 1, .cso = R, .csi = 0, .csr = 1, .wso = I, .wsi = 1, .clear = true};
  GemmArgs g2 = g;
  g2.clear = false;
  std::vector<Instr> prog = {
      load({.va = kDataVa, .sp_row = 0, .x = I * R, .xs = n}),
      load({.sp = hw::Scratchpad::kWgt, .va = kDataVa + 0x10000, .x = O * I * n, .xs = n,
            .flags = kPushNext}),
      gemm({.act = 0, .acc = 3, .r = 1, .clear = true, .flags = kPopPrev}),  // garbage row 3
      gemm(g), gemm(g2),
      sync(1, kPushNext),
      store({.sp = hw::Scratchpad::kAcc, .va = kDataVa + 0x20000, .x = O * R, .xs = 4 * n,
             .flags = kPopPrev}),
  };
  b.setup_rings();
  ASSERT_EQ(b.run_program(prog), StopReason::kIdle);
  ASSERT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
  std::vector<int32_t> got(O * R * n);
  b.read(kDataVa + 0x20000, got.data(), got.size() * 4);
  for (uint32_t o = 0; o < O; ++o)
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t c = 0; c < n; ++c) {
        int32_t s = 0;
        for (uint32_t i = 0; i < I; ++i)
          for (uint32_t k = 0; k < n; ++k)
            s += act[(i * R + r) * n + k] * wgt[((o * I + i) * n + k) * n + c];
        ASSERT_EQ(got[(o * R + r) * n + c], 2 * s) << o << " " << r << " " << c;
      }
  EXPECT_EQ(b.counter(hw::Counter::kMacs), uint64_t{n} * n * (1 + 2 * O * I * R));
}

TEST_P(RtlTest, IllegalInstruction) {
  Instr bad;
  bad.w[0] = 0x77;
  std::vector<Instr> prog = {nop(), bad};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kIllegalInstruction, kCmdVa + 32, 32);
  EXPECT_EQ(b.dev().read_reg(reg::RING_HEAD(0)), 0u);  // still at the faulting entry
  EXPECT_EQ(b.counter(hw::Counter::kInstrs), 1u);
  EXPECT_EQ(b.counter(hw::Counter::kJobs), 0u);
}

TEST_P(RtlTest, IllegalInstructionVariants) {
  std::vector<Instr> bads;
  bads.push_back(load({.x = 0}));                              // zero count
  bads.push_back(load({.flags = kPopPrev}));                   // LOAD has no prev
  bads.push_back(store({.flags = kPushNext}));                 // STORE has no next
  bads.push_back(store({.pad_l = 1}));                         // STORE padding
  bads.push_back(load({.row_elems = n + 1}));                  // row_elems > N
  bads.push_back(sync(3, 0));                                  // no such engine
  Instr v = vec({});
  v.w[0] |= 7u << 16;                                          // VEC mode 7
  bads.push_back(v);
  v = vec({});
  v.w[0] |= 4u << 16;                                          // MAXPOOL without a window
  bads.push_back(v);
  Instr r = nop();
  r.w[5] = 1;                                                  // reserved word
  bads.push_back(r);
  for (const auto& i : bads) {
    Bench t(make_rtl, n);
    t.setup_rings();
    EXPECT_EQ(t.run_program({i}), StopReason::kInterrupt);
    EXPECT_EQ(t.dev().read_reg(reg::ERROR_CODE),
              static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction))
        << std::hex << i.w[0];
  }
}

TEST_P(RtlTest, ScratchpadRange) {
  const uint32_t rows = hw::kActSpBytes / n;
  std::vector<Instr> prog = {nop(), load({.sp_row = rows - 1, .x = 2, .xs = n})};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kSpRange, rows, 32);
  EXPECT_EQ(b.counter(hw::Counter::kDmaRdBytes), 0u);
}

TEST_P(RtlTest, GemmWeightTileRange) {
  const uint32_t tiles = hw::kWgtSpBytes / (n * n);
  std::vector<Instr> prog = {gemm({.wgt = tiles - 2, .o = 3, .wso = 1})};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kSpRange, tiles, 0);
}

TEST_P(RtlTest, PageFaultMidInstruction) {
  // Rows 0..1 come from a mapped page, row 2 from an unmapped one: rows before it complete.
  const uint32_t va = kDataVa + 5 * kPageBytes - 2 * n;
  b.unmap(kDataVa + 5 * kPageBytes);
  std::vector<uint8_t> src(2 * n, 0x5A);
  b.write(va, src.data(), src.size());
  std::vector<Instr> prog = {load({.va = va, .sp_row = 0, .x = 3, .xs = n, .flags = kPushNext}),
                             sync(1, kPopPrev | kPushNext),
                             store({.va = kDataVa, .sp_row = 0, .x = 1, .xs = n, .flags = kPopPrev})};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kPageFault, kDataVa + 5 * kPageBytes, 0);
  EXPECT_EQ(b.counter(hw::Counter::kDmaRdBytes), 2u * n);
  EXPECT_EQ(b.counter(hw::Counter::kInstrs), 0u);
}

TEST_P(RtlTest, PageFaultOnReadOnlyStore) {
  const uint32_t va = kDataVa + 6 * kPageBytes;
  b.map(va, va, /*writable=*/false);
  std::vector<Instr> prog = {store({.va = va + 16, .x = 1, .xs = n})};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kPageFault, va + 16, 0);
  EXPECT_EQ(b.counter(hw::Counter::kDmaWrBytes), 0u);
}

TEST_P(RtlTest, PageFaultOnInstructionFetch) {
  b.unmap(kCmdVa);
  b.setup_rings();
  EXPECT_EQ(b.run_program({nop()}), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kPageFault, kCmdVa, 0);
}

TEST_P(RtlTest, TokenDeadlock) {
  std::vector<Instr> prog = {load({.x = 1, .xs = n, .flags = kPushNext}),
                             gemm({.flags = kPopPrev}),
                             store({.flags = kPopPrev})};  // C->S empty
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kTokenDeadlock, 2, 64);
  EXPECT_EQ(b.counter(hw::Counter::kInstrs), 2u);
}

TEST_P(RtlTest, TokenOverflow) {
  std::vector<Instr> prog(256, sync(0, kPushNext));  // the 256th push exceeds 255
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kTokenDeadlock, 0, 255 * 32);
  EXPECT_EQ(b.counter(hw::Counter::kInstrs), 255u);
}

TEST_P(RtlTest, TokensResetAtEveryExec) {
  // Job 1 pushes L->C; job 2 pops it: tokens do not carry across EXECs.
  uint32_t l1 = b.put_program({sync(0, kPushNext)}, 0);
  uint32_t l2 = b.put_program({sync(1, kPopPrev)}, 0x100);
  b.setup_rings();
  b.exec(0, kCmdVa, l1);
  b.exec(0, kCmdVa + 0x100, l2);
  b.doorbell(0);
  EXPECT_EQ(b.run_to_idle(), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kTokenDeadlock, 0, 0);
  EXPECT_EQ(b.dev().read_reg(reg::RING_HEAD(0)), 32u);
  EXPECT_EQ(b.counter(hw::Counter::kJobs), 1u);
}

TEST_P(RtlTest, BadRingEntry) {
  b.setup_rings();
  b.fence(1, 5);
  b.push_entry(1, {0x09, 0, 0, 0, 0, 0, 0, 0});
  b.doorbell(1);
  EXPECT_EQ(b.run_to_idle(), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kBadRingEntry, kRingBase + kRingSize + 32, 0xFFFFFFFF, 1);
  EXPECT_EQ(b.dev().read_reg(reg::COMPLETED_SEQ(1)), 5u);
  EXPECT_EQ(b.dev().read_reg(reg::RING_HEAD(1)), 32u);
}

TEST_P(RtlTest, BadExecFields) {
  const std::array<std::array<uint32_t, 3>, 4> cases = {{
      {kCmdVa + 8, 32, kPtBase},   // misaligned command buffer
      {kCmdVa, 0, kPtBase},        // empty
      {kCmdVa, 48, kPtBase},       // not a multiple of 32
      {kCmdVa, 32, kPtBase + 2},   // misaligned page table
  }};
  for (const auto& c : cases) {
    Bench t(make_rtl, n);
    t.setup_rings();
    t.push_entry(0, {1, c[0], c[1], c[2], 0, 0, 0, 0});
    t.doorbell(0);
    EXPECT_EQ(t.run_to_idle(), StopReason::kInterrupt);
    EXPECT_EQ(t.dev().read_reg(reg::ERROR_CODE),
              static_cast<uint32_t>(hw::ErrorCode::kBadRingEntry));
    EXPECT_EQ(t.dev().read_reg(reg::ERROR_ADDR), kRingBase);
  }
}

TEST_P(RtlTest, BusErrorFromPte) {
  const uint32_t va = kDataVa + 7 * kPageBytes;
  b.map_raw(va, 0xFFFF0003);  // physical page far beyond DRAM
  std::vector<Instr> prog = {load({.va = va + 0x40, .x = 1, .xs = n})};
  b.setup_rings();
  EXPECT_EQ(b.run_program(prog), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kBusError, 0xFFFF0040, 0);
}

TEST_P(RtlTest, BusErrorFromRing) {
  b.setup_rings();
  b.dev().write_reg(reg::RING_BASE(2), 0x80000000);
  b.dev().write_reg(reg::RING_TAIL(2), 32);
  EXPECT_EQ(b.run_to_idle(), StopReason::kInterrupt);
  expect_error(hw::ErrorCode::kBusError, 0x80000000, 0xFFFFFFFF, 2);
}

TEST_P(RtlTest, ErrorWithoutMaskReturnsIdle) {
  Instr bad;
  bad.w[0] = 0x66;
  b.setup_rings(/*irq_mask=*/0);
  EXPECT_EQ(b.run_program({bad}), StopReason::kIdle);
  EXPECT_EQ(b.dev().read_reg(reg::ERROR_CODE), 1u);
  EXPECT_EQ(b.dev().read_reg(reg::STATUS) & hw::bits::STATUS_BUSY, 0u);
}

TEST_P(RtlTest, ResetRecovery) {
  Instr bad;
  bad.w[0] = 0x66;
  b.setup_rings();
  EXPECT_EQ(b.run_program({load({.x = 1, .xs = n}), bad}), StopReason::kInterrupt);
  ASSERT_NE(b.dev().read_reg(reg::ERROR_CODE), 0u);
  auto& d = b.dev();
  d.write_reg(reg::CONTROL, hw::bits::CONTROL_RESET | hw::bits::CONTROL_ENABLE);
  EXPECT_EQ(d.read_reg(reg::RESET_COUNT), 1u);
  EXPECT_EQ(d.read_reg(reg::CONTROL), 0u);
  EXPECT_EQ(d.read_reg(reg::STATUS), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_CODE), 0u);
  EXPECT_EQ(d.read_reg(reg::ERROR_INSTR), 0u);
  EXPECT_EQ(d.read_reg(reg::IRQ_STATUS), 0u);
  EXPECT_EQ(d.read_reg(reg::IRQ_MASK), 0u);
  EXPECT_EQ(d.read_reg(reg::RING_HEAD(0)), 0u);
  EXPECT_EQ(d.read_reg(reg::RING_TAIL(0)), 0u);
  EXPECT_EQ(d.read_reg(reg::RING_BASE(0)), 0u);
  EXPECT_EQ(b.counter(hw::Counter::kInstrs), 0u);
  EXPECT_EQ(b.counter(hw::Counter::kCycles), 0u);

  // Scratchpads were cleared: storing row 0 (loaded before the reset) gives zeros.
  std::vector<uint8_t> junk(n, 0xEE);
  b.write(kDataVa + 0x100, junk.data(), n);
  b.reset_tails();
  b.setup_rings();
  EXPECT_EQ(b.run_program({store({.va = kDataVa + 0x100, .x = 1, .xs = n})}, 9),
            StopReason::kIdle);
  EXPECT_EQ(d.read_reg(reg::ERROR_CODE), 0u);
  EXPECT_EQ(d.read_reg(reg::COMPLETED_SEQ(0)), 9u);
  std::vector<uint8_t> got(n);
  b.read(kDataVa + 0x100, got.data(), n);
  EXPECT_EQ(got, std::vector<uint8_t>(n, 0));
}

TEST_P(RtlTest, QueuePriorityAndFences) {
  // Queue 2 and queue 0 both have work: queue 0 runs first; each FENCE raises its bit.
  b.setup_rings(/*irq_mask=*/0);
  b.fence(2, 20);
  b.fence(0, 10);
  b.doorbell(2);
  b.doorbell(0);
  EXPECT_EQ(b.dev().run(1'000'000), StopReason::kIdle);
  EXPECT_EQ(b.dev().read_reg(reg::COMPLETED_SEQ(0)), 10u);
  EXPECT_EQ(b.dev().read_reg(reg::COMPLETED_SEQ(2)), 20u);
  EXPECT_EQ(b.dev().read_reg(reg::IRQ_STATUS), 0x5u);
  b.dev().write_reg(reg::IRQ_STATUS, 0x1);  // RW1C
  EXPECT_EQ(b.dev().read_reg(reg::IRQ_STATUS), 0x4u);
  b.dev().write_reg(reg::IRQ_MASK, 0x4);
  EXPECT_EQ(b.dev().run(10), StopReason::kInterrupt);
}

TEST_P(RtlTest, TraceAndCycleLimit) {
  std::vector<sim::TraceEvent> events;
  b.dev().set_trace([&](const sim::TraceEvent& e) { events.push_back(e); });
  b.setup_rings();
  uint32_t len = b.put_program({nop(), load({.x = 4, .xs = n}), nop()});
  b.exec(0, kCmdVa, len);
  b.doorbell(0);
  EXPECT_EQ(b.dev().run(5), StopReason::kCycleLimit);
  EXPECT_EQ(b.dev().run(1'000'000), StopReason::kIdle);
  // Events come in completion order: the second NOP (COMPUTE) finishes while the LOAD runs.
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].cmd_offset, 0u);
  EXPECT_EQ(events[2].cmd_offset, 32u);
  EXPECT_EQ(events[2].words[0], static_cast<uint32_t>(hw::Opcode::kLoad));
  EXPECT_LT(events[0].cycle, events[2].cycle);
}

TEST_P(RtlTest, FstTraceOnRequest) {
  const std::string path = ::testing::TempDir() + "npu_rtl_trace_" + std::to_string(n) + ".fst";
  std::remove(path.c_str());
  {
    sim::RtlOptions opts;
    opts.fst_path = path;
    Bench t([&](const sim::DeviceConfig& c, std::span<std::byte> d) {
      return sim::make_rtl_device(c, d, opts);
    }, n);
    t.setup_rings();
    EXPECT_EQ(t.run_program({load({.x = 2, .xs = n})}), StopReason::kIdle);
  }  // the device's destructor calls final() and closes the trace
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  std::fseek(f, 0, SEEK_END);
  EXPECT_GT(std::ftell(f), 1000);
  std::fclose(f);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Dims, RtlTest, ::testing::ValuesIn(sim::rtl_supported_array_dims()),
                         [](const auto& param_info) { return "N" + std::to_string(param_info.param); });

}  // namespace
}  // namespace npu::rtltest
