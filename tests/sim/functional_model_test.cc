// The functional model against docs/architecture.md section 1: registers, a real program,
// every error path, and reset recovery.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "npu/sim/device.h"
#include "npu/hw/isa.h"
#include "npu/sim/program_generator.h"

namespace npu::sim {
namespace {

constexpr uint32_t N = 16;

class FunctionalModel : public ::testing::Test {
 protected:
  FunctionalModel() : bm_(8u << 20) {
    DeviceConfig dc;
    dc.array_dim = N;
    dev_ = make_functional_device(dc, bm_.dram());
    data_ = bm_.allocate(1 << 16, true);
    cmds_ = bm_.allocate(1 << 16, false);
  }

  BareMetalResult run(const std::vector<isa::Words>& program) {
    auto view = bm_.view(cmds_, program.size() * 32);
    std::memcpy(view.data(), program.data(), program.size() * 32);
    return bm_.run(*dev_, cmds_, static_cast<uint32_t>(program.size() * 32));
  }
  int8_t* bytes(uint32_t offset) { return reinterpret_cast<int8_t*>(bm_.view(data_ + offset, 1).data()); }
  // The depthwise tests' int32 sum at output (oy, ox) lane c of a 3x3 window over a 5-wide
  // plane: bias c·100 − 700 plus the weights at data+0x2000 times read(plane row, lane).
  template <class Read>
  int64_t depthwise_3x3_sum(uint32_t oy, uint32_t ox, uint32_t c, const Read& read) {
    int64_t t = static_cast<int32_t>(c) * 100 - 700;
    for (uint32_t ky = 0; ky < 3; ++ky)
      for (uint32_t kx = 0; kx < 3; ++kx)
        t += int64_t{read((oy + ky) * 5 + ox + kx, c)} * *bytes(0x2000 + (ky * 3 + kx) * N + c);
    return t;
  }
  int32_t* words(uint32_t offset) { return reinterpret_cast<int32_t*>(bm_.view(data_ + offset, 4).data()); }

  BareMetal bm_;
  std::unique_ptr<Device> dev_;
  uint32_t data_ = 0, cmds_ = 0;
};

TEST_F(FunctionalModel, IdentityRegisters) {
  EXPECT_EQ(dev_->read_reg(hw::reg::ID), hw::kDeviceId);
  EXPECT_EQ(dev_->read_reg(hw::reg::VERSION), hw::kIsaVersion);
  EXPECT_EQ(read_fingerprint(*dev_), hw::fingerprint_for_dim(N));
  EXPECT_EQ(dev_->read_reg(hw::reg::CONFIG) & 0xFF, N);
  EXPECT_EQ(dev_->read_reg(hw::reg::ACC_SP_ROWS), hw::kAccSpBytes / (4 * N));
  EXPECT_EQ(dev_->run(1000), StopReason::kIdle);  // nothing to do: returns at once
}

// x[2][16] · W[16][16] (+bias, requant) -> y[2][16], checked against a scalar reference.
TEST_F(FunctionalModel, GemmRequantProgramMatchesReference) {
  for (uint32_t i = 0; i < 2 * N; ++i) *bytes(i) = static_cast<int8_t>(static_cast<int>(i * 37 % 255) - 127);
  for (uint32_t i = 0; i < N * N; ++i) *bytes(0x100 + i) = static_cast<int8_t>(static_cast<int>(i * 91 % 255) - 127);
  for (uint32_t c = 0; c < N; ++c) {
    *words(0x400 + 4 * c) = static_cast<int32_t>(c * 1000) - 5000;  // bias
    *words(0x440 + 4 * c) = 1 << 30;                                  // multiplier 0.5 * 2^31
    *words(0x480 + 4 * c) = 38;                                       // shift: total scale 2^-8
  }
  std::vector<isa::Words> p;
  p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = data_, .x = 2, .x_stride = N}));
  p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kWgt, .va = data_ + 0x100, .x = N, .x_stride = N}));
  isa::Load params{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x400, .sp_base = 10, .x = 3, .x_stride = 4 * N};
  params.tokens.push_next = true;
  p.push_back(isa::encode(params));
  isa::Gemm g{.clear = true, .r = 2, .act_sr = 1, .acc_sr = 1};
  g.tokens.pop_prev = true;
  p.push_back(isa::encode(g));
  isa::VecRequant v{.bias = true, .src = 0, .dst = 100, .param = 10, .r = 2, .zero_point = 3,
                    .src_sr = 1, .dst_sr = 1, .clamp_lo = -100, .clamp_hi = 100};
  v.tokens.push_next = true;
  p.push_back(isa::encode(v));
  isa::Store st{.sp = hw::Scratchpad::kAct, .va = data_ + 0x800, .sp_base = 100, .x = 2, .x_stride = N};
  st.tokens.pop_prev = true;
  p.push_back(isa::encode(st));
  auto res = run(p);
  ASSERT_TRUE(res.completed) << "error " << res.error_code;
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t c = 0; c < N; ++c) {
      int64_t acc = 0;
      for (uint32_t k = 0; k < N; ++k) acc += int64_t{*bytes(r * N + k)} * *bytes(0x100 + k * N + c);
      acc += static_cast<int32_t>(c * 1000) - 5000;
      int64_t t = (acc * (int64_t{1} << 30) + (int64_t{1} << 37)) >> 38;
      t = std::clamp<int64_t>(t + 3, -100, 100);
      EXPECT_EQ(*bytes(0x800 + r * N + c), t) << "row " << r << " col " << c;
    }
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kMacs), 2u * N * N);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaWrBytes), 2u * N);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaRdBytes), 2u * N + N * N + 3u * 4 * N);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kInstrs), 6u);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kJobs), 1u);
}

// REQUANT with the wrap bit (ISA 1.2) writes the low byte of round_shift(v·m) + zp; the bit
// is illegal with a clamp bound set and in the modes without it.
TEST_F(FunctionalModel, VecWrapWritesTheLowByteAndIsIllegalWhereTheSpecSaysSo) {
  const int32_t values[4] = {300, -129, 70000, -1000000};
  for (uint32_t c = 0; c < N; ++c) {
    *words(4 * c) = values[c % 4] + static_cast<int32_t>(c);  // source row
    *words(0x40 + 4 * c) = 0;                                  // bias
    *words(0x80 + 4 * c) = 3;                                  // multiplier
    *words(0xC0 + 4 * c) = 1;                                  // shift
  }
  isa::VecRequant v{.wrap = true, .src = 0, .dst = 50, .param = 1, .zero_point = -7, .clamp_lo = 0, .clamp_hi = 0,
                    .tokens = {.pop_prev = true, .push_next = true}};
  std::vector<isa::Words> p = {
      isa::encode(isa::Load{.sp = hw::Scratchpad::kAcc, .va = data_, .x = 4, .x_stride = 4 * N,
                            .tokens = {.push_next = true}}),
      isa::encode(v),
      isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .va = data_ + 0x800, .sp_base = 50, .x = 1, .x_stride = N,
                             .tokens = {.pop_prev = true}})};
  ASSERT_TRUE(run(p).completed);
  for (uint32_t c = 0; c < N; ++c) {
    const int64_t t = ((int64_t{values[c % 4] + static_cast<int32_t>(c)} * 3) + 1) >> 1;
    EXPECT_EQ(*bytes(0x800 + c), static_cast<int8_t>(static_cast<uint8_t>(t - 7))) << "lane " << c;
  }
  for (auto [mode, w6, w7] : {std::tuple{0u, 1u, 0u}, std::tuple{1u, 0u, 0u}, std::tuple{4u, 0u, 0x101u},
                              std::tuple{5u, 0u, 0x101u}, std::tuple{6u, 0u, 0x101u}}) {
    SCOPED_TRACE("mode " + std::to_string(mode) + " w6 " + std::to_string(w6));
    isa::Words bad = p[1];
    bad[0] = (bad[0] & ~(0xFu << 16)) | (mode << 16);
    bad[2] &= mode == 4 ? 0xFFFF0000u : 0xFFFFFFFFu;  // MAXPOOL has no P
    bad[6] = w6;
    bad[7] = w7;
    const auto res = run({p[0], bad});
    EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
    EXPECT_EQ(res.error_instr, 32u);
  }
}

// VEC SOFTMAX (ISA 1.3, architecture.md 1.4.1) against the documented formula: two segments
// of 3 rows with a tail of 5 lanes, in place, the table of exp at scale 0.1 (2^30 peak), the
// output at scale 2^-8 with zero point -128; lanes beyond the tail write clamp(zp). Then the
// fields it may not use.
TEST_F(FunctionalModel, VecSoftmaxMatchesItsDefinition) {
  constexpr uint32_t R = 3, O = 2, tail = 5;
  for (uint32_t i = 0; i < O * R * N; ++i) *bytes(i) = static_cast<int8_t>(static_cast<int>(i * 53 % 255) - 127);
  int32_t table[256];
  for (int i = 0; i < 256; ++i) {
    table[i] = static_cast<int32_t>(std::llround(1073741824.0 * std::exp(0.1 * (i - 255))));
    *words(0x1000 + 4 * static_cast<uint32_t>(i)) = table[i];
  }
  isa::VecSoftmax v{.src = 0, .dst = 0, .table = 7, .r = R, .o = O, .zero_point = -128, .src_so = R, .src_sr = 1,
                    .dst_so = R, .dst_sr = 1, .shift = 54, .tail = tail, .tokens = {.pop_prev = true, .push_next = true}};
  std::vector<isa::Words> p = {
      isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = data_, .x = O * R, .x_stride = N}),
      isa::encode(isa::Load{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x1000, .sp_base = 7, .x = 256 / N,
                            .x_stride = 4 * N, .tokens = {.push_next = true}}),
      isa::encode(v),
      isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .va = data_ + 0x800, .x = O * R, .x_stride = N,
                             .tokens = {.pop_prev = true}})};
  ASSERT_TRUE(run(p).completed);
  for (uint32_t o = 0; o < O; ++o) {
    auto valid = [&](uint32_t r, uint32_t c) { return r + 1 < R || c < tail; };
    auto x = [&](uint32_t r, uint32_t c) { return int{*bytes((o * R + r) * N + c)}; };
    int m = -128;
    int64_t sum = 0;
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t c = 0; c < N; ++c)
        if (valid(r, c)) m = std::max(m, x(r, c));
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t c = 0; c < N; ++c)
        if (valid(r, c)) sum += table[x(r, c) - m + 255];
    const uint64_t q = (uint64_t{1} << 62) / static_cast<uint64_t>(sum);
    for (uint32_t r = 0; r < R; ++r)
      for (uint32_t c = 0; c < N; ++c) {
        const int64_t e = valid(r, c) ? table[x(r, c) - m + 255] : 0;
        const int64_t t = ((e * static_cast<int64_t>(q)) + (int64_t{1} << 53)) >> 54;
        EXPECT_EQ(*bytes(0x800 + (o * R + r) * N + c), std::clamp<int64_t>(t - 128, -128, 127))
            << "segment " << o << " row " << r << " lane " << c;
      }
  }
  for (auto [w0, w6, w7] : {std::tuple{1u << 20, 0u, 0u}, std::tuple{0u, 5u << 16, 0u}, std::tuple{0u, 0u, 1u << 6},
                            std::tuple{0u, 0u, (N + 1) << 8}, std::tuple{isa::kVecWrapBit, 0u, 0u}}) {
    isa::Words bad = p[2];
    bad[0] |= w0;
    bad[6] |= w6;
    bad[7] |= w7;
    const auto res = run({p[1], bad});
    EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
    EXPECT_EQ(res.error_instr, 32u);
  }
}

TEST_F(FunctionalModel, LoadZeroPadsBorders) {
  for (uint32_t i = 0; i < 4; ++i) *bytes(i) = static_cast<int8_t>(i + 1);  // 2x2 image, 1 channel
  std::vector<isa::Words> p;
  p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .row_elems = 1, .va = data_, .x = 2, .y = 2,
                                    .pad_l = 1, .pad_r = 1, .pad_t = 1, .pad_b = 1, .x_stride = 1, .y_stride = 2,
                                    .tokens = {.push_next = true}}));
  p.push_back(isa::encode(isa::Sync{isa::Engine::kCompute, {.pop_prev = true, .push_next = true}}));
  p.push_back(isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .row_elems = 1, .va = data_ + 0x100, .x = 16,
                                     .x_stride = 1, .tokens = {.pop_prev = true}}));
  ASSERT_TRUE(run(p).completed);
  const int8_t expect[16] = {0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 0};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(*bytes(0x100 + static_cast<uint32_t>(i)), expect[i]) << i;
}

struct ErrorCase {
  const char* name;
  hw::ErrorCode code;
};

TEST_F(FunctionalModel, IllegalOpcode) {
  isa::Words w{0x7F, 0, 0, 0, 0, 0, 0, 0};
  auto res = run({w});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
  EXPECT_EQ(res.error_addr, cmds_);
  EXPECT_TRUE(dev_->read_reg(hw::reg::STATUS) & hw::bits::STATUS_ERROR);
}

TEST_F(FunctionalModel, ScratchpadRange) {
  const uint32_t rows = dev_->read_reg(hw::reg::ACT_SP_ROWS);
  auto res = run({isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = data_, .sp_base = rows - 1, .x = 2})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kSpRange));
  EXPECT_EQ(res.error_addr, rows);
}

TEST_F(FunctionalModel, PageFaultReportsVirtualAddress) {
  const uint32_t hole = bm_.allocate(1 << 16, true);
  bm_.unmap(hole, 1 << 16);
  auto res = run({isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = hole + 48, .x = 1})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kPageFault));
  EXPECT_EQ(res.error_addr, hole + 48);
}

// A LOAD line whose third row straddles into an unmapped page: the two rows before it are
// read, nothing of the faulting row is, and the fault names the first unmapped address.
TEST_F(FunctionalModel, LoadFaultMidLineCompletesEarlierRowsOnly) {
  const uint32_t pages = bm_.allocate(2 << 16, true);
  const uint32_t hole = pages + (1 << 16);
  bm_.unmap(hole, 1 << 16);
  auto res = run({isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = hole - 40, .x = 6, .x_stride = N})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kPageFault));
  EXPECT_EQ(res.error_addr, hole);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaRdBytes), 2u * N);
}

// The same for a STORE: the rows before the faulting one are in DRAM, the faulting row's
// bytes on the mapped page are not written, and neither is anything after it.
TEST_F(FunctionalModel, StoreFaultMidLineWritesEarlierRowsOnly) {
  const uint32_t pages = bm_.allocate(2 << 16, true);
  const uint32_t hole = pages + (1 << 16);
  auto* before = reinterpret_cast<uint8_t*>(bm_.view(hole - 64, 64).data());
  std::memset(before, 0x55, 64);
  bm_.unmap(hole, 1 << 16);
  // The scratchpad is zero after reset; rows go to hole-40, hole-24, hole-8 (straddles).
  auto res = run({isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .va = hole - 40, .x = 6, .x_stride = N})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kPageFault));
  EXPECT_EQ(res.error_addr, hole);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaWrBytes), 2u * N);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(before[i], (i >= 24 && i < 56) ? 0 : 0x55) << "byte hole-" << 64 - i;
}

TEST_F(FunctionalModel, WriteToReadOnlyPageFaults) {
  auto res = run({isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .va = cmds_ + 0x1000, .x = 1})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kPageFault));
  EXPECT_EQ(res.error_addr, cmds_ + 0x1000);
}

TEST_F(FunctionalModel, TokenDeadlock) {
  auto res = run({isa::encode(isa::Gemm{.tokens = {.pop_prev = true}})});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kTokenDeadlock));
  EXPECT_EQ(res.error_addr, 0u);  // channel LOAD->COMPUTE
}

TEST_F(FunctionalModel, BadRingEntryAndRecoveryAfterReset) {
  // EXEC with a misaligned command address.
  auto res = bm_.run(*dev_, cmds_ + 4, 32);
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kBadRingEntry));
  EXPECT_EQ(dev_->read_reg(hw::reg::ERROR_INSTR), 0xFFFFFFFFu);
  const uint32_t resets = dev_->read_reg(hw::reg::RESET_COUNT);
  // BareMetal::run resets first: the next job must succeed.
  auto ok = run({isa::encode(isa::Sync{isa::Engine::kLoad, {}})});
  EXPECT_TRUE(ok.completed);
  EXPECT_EQ(dev_->read_reg(hw::reg::RESET_COUNT), resets + 1);
  EXPECT_EQ(dev_->read_reg(hw::reg::ERROR_CODE), 0u);
}

TEST_F(FunctionalModel, RandomWordsNeverHang) {
  // Garbage command streams end in an error or complete; the process survives.
  uint32_t state = 12345;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<isa::Words> p(4);
    for (auto& w : p)
      for (auto& word : w) {
        state = state * 1664525u + 1013904223u;
        word = state;
      }
    for (auto& w : p) w[0] = (w[0] & ~0xFFu) | (w[0] % 7);
    auto res = run(p);
    EXPECT_TRUE(res.completed || res.error_code != 0) << "trial " << trial;
    EXPECT_FALSE(res.cycle_limit);
  }
}


// run(max_cycles) keeps to its budget inside a job (fuzz_exec's finding: a legal VEC of
// 42919 x 42752 rows ran inside one run(2M) call for minutes): the job waits at the long
// instruction, time passes up to the budget, STATUS shows the entry in progress, and a job cut
// into many small run() calls ends exactly as in one call.
TEST_F(FunctionalModel, RunKeepsToItsBudgetInsideAJob) {
  for (uint32_t i = 0; i < 4 * 64 * N; ++i) *words(i * 4) = static_cast<int32_t>(i * 7919 % 20001) - 10000;
  for (uint32_t c = 0; c < N; ++c) {
    *words(0x8000 + 4 * c) = 1 << 30;
    *words(0x8040 + 4 * c) = 36;
  }
  auto program = [&](uint16_t o, uint16_t r, uint16_t sr) {
    std::vector<isa::Words> p;
    p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAcc, .va = data_, .x = 64, .x_stride = 4 * N}));
    isa::Load params{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x8000 - 4 * N, .sp_base = 100, .x = 3,
                     .x_stride = 4 * N};
    params.tokens.push_next = true;
    p.push_back(isa::encode(params));
    isa::VecRequant v{.src = 0, .dst = 0, .param = 100, .r = r, .o = o, .src_sr = sr, .dst_sr = sr};
    v.tokens.pop_prev = true;
    v.tokens.push_next = true;
    p.push_back(isa::encode(v));
    isa::Store st{.sp = hw::Scratchpad::kAct, .va = data_ + 0x9000, .x = 64, .x_stride = N};
    st.tokens.pop_prev = true;
    p.push_back(isa::encode(st));
    return p;
  };
  // 60000 x 60000 rows over the same row: about 3.6e9 cycles on the RTL.
  auto huge = program(60000, 60000, 0);
  auto view = bm_.view(cmds_, huge.size() * 32);
  std::memcpy(view.data(), huge.data(), huge.size() * 32);
  const auto res = bm_.run(*dev_, cmds_, static_cast<uint32_t>(huge.size() * 32), 1'000'000);
  EXPECT_TRUE(res.cycle_limit);
  EXPECT_FALSE(res.completed);
  EXPECT_EQ(dev_->read_reg(hw::reg::ERROR_CODE), 0u);
  EXPECT_NE(dev_->read_reg(hw::reg::STATUS) & hw::bits::STATUS_BUSY, 0u);  // the entry is in progress
  EXPECT_LE(res.cycles, 1'000'000u + 100'000u);

  // A job of 64 rows, once in one call and once in budgets of 50 cycles: same bytes, same cycles.
  auto small = program(1, 64, 1);
  const auto whole = run(small);
  ASSERT_TRUE(whole.completed) << "error " << whole.error_code;
  std::vector<int8_t> expected(bytes(0x9000), bytes(0x9000) + 64 * N);
  const uint64_t instrs = read_counter(*dev_, hw::Counter::kInstrs);
  std::memset(bytes(0x9000), 0, 64 * N);
  auto v2 = bm_.view(cmds_, small.size() * 32);
  std::memcpy(v2.data(), small.data(), small.size() * 32);
  dev_->write_reg(hw::reg::CONTROL, hw::bits::CONTROL_RESET);
  BareMetalResult sliced;
  sliced = bm_.run(*dev_, cmds_, static_cast<uint32_t>(small.size() * 32), 50);
  int calls = 1;
  while (!sliced.completed && sliced.error_code == 0 && calls < 100000) {
    dev_->run(50);
    ++calls;
    sliced.completed = (dev_->read_reg(hw::reg::IRQ_STATUS) & 1u) != 0;
  }
  EXPECT_GT(calls, 1);
  EXPECT_TRUE(sliced.completed);
  EXPECT_EQ(std::vector<int8_t>(bytes(0x9000), bytes(0x9000) + 64 * N), expected);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kInstrs), instrs);
}

// The budget bound of a window-mode VEC follows ISA 1.3's timing (kh·⌈kw/W⌉ cycles per
// output row): a job given exactly the cycles it takes ends within that one run() call. With
// the 1.2 bound (kh·kw per row, 8x the cost of this 8x8 window) the DWCONV waited for a later
// call, and the OCR rec model took 6.60 M cycles per line on sim against 5.74 M predicted.
TEST_F(FunctionalModel, WindowModeBudgetBoundIsBelowItsCost) {
  isa::VecRequant v{.bias = false, .src = 0, .dst = 1000, .param = 100, .r = 64, .src_sr = 1, .dst_sr = 1};
  v.tokens.pop_prev = true;
  v.tokens.push_next = true;
  isa::Words dw = isa::encode(v);
  dw[0] = (dw[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kDwconv) << 16);
  dw[7] = 8u | (8u << 8) | (80u << 16);  // 8x8 window, 80 rows between window rows
  isa::Load params{.sp = hw::Scratchpad::kAcc, .va = data_, .sp_base = 100, .x = 3, .x_stride = 4 * N};
  params.tokens.push_next = true;
  isa::Store st{.sp = hw::Scratchpad::kAct, .va = data_ + 0x9000, .sp_base = 1000, .x = 64, .x_stride = N};
  st.tokens.pop_prev = true;
  const std::vector<isa::Words> p = {isa::encode(params), dw, isa::encode(st)};
  const auto whole = run(p);
  ASSERT_TRUE(whole.completed) << "error " << whole.error_code;
  EXPECT_LT(whole.cycles, 64u * 64u);  // below the 1.2 bound of the DWCONV alone
  dev_->write_reg(hw::reg::CONTROL, hw::bits::CONTROL_RESET);
  const auto budgeted = bm_.run(*dev_, cmds_, static_cast<uint32_t>(p.size() * 32), whole.cycles);
  EXPECT_TRUE(budgeted.completed);
  EXPECT_EQ(budgeted.cycles, whole.cycles);
}

// VEC modes beyond REQUANT: each checked against a scalar evaluation of architecture.md 1.4.
class VecModes : public FunctionalModel {
 protected:
  // Loads ACT rows [0, rows) from data+0 and ACC row 50 (params) from data+0x4000, runs `vec`,
  // stores ACT rows [200, 200+out_rows) to data+0x8000.
  void run_vec(isa::Words vec, uint32_t act_rows, uint32_t out_rows, bool load_wgt = false) {
    std::vector<isa::Words> p;
    p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAct, .va = data_, .x = static_cast<uint16_t>(act_rows), .x_stride = N}));
    if (load_wgt)
      p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kWgt, .va = data_ + 0x2000, .x = 16, .x_stride = N}));
    isa::Load params{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x4000, .sp_base = 50, .x = 3, .x_stride = 4 * N};
    params.tokens.push_next = true;
    p.push_back(isa::encode(params));
    vec[0] |= (1u << 8) | (1u << 11);  // pop_prev, push_next
    p.push_back(vec);
    p.push_back(isa::encode(isa::Store{.sp = hw::Scratchpad::kAct, .va = data_ + 0x8000, .sp_base = 200,
                                       .x = static_cast<uint16_t>(out_rows), .x_stride = N, .tokens = {.pop_prev = true}}));
    auto res = run(p);
    ASSERT_TRUE(res.completed) << "error " << res.error_code << " addr " << res.error_addr;
  }
  static isa::Words vec_words(uint32_t mode, uint32_t src, uint32_t param, uint32_t r, uint32_t o, int8_t zp,
                              uint32_t ssr, uint32_t sso, uint32_t aux, uint32_t kw, uint32_t kh, uint32_t wys,
                              bool bias = false) {
    isa::VecRequant v{.bias = bias, .src = static_cast<uint16_t>(src), .dst = 200, .param = static_cast<uint16_t>(param),
                      .r = static_cast<uint16_t>(r), .o = static_cast<uint16_t>(o), .zero_point = zp,
                      .src_so = static_cast<uint16_t>(sso), .src_sr = static_cast<uint16_t>(ssr),
                      .dst_so = static_cast<uint16_t>(r), .dst_sr = 1};
    isa::Words w = isa::encode(v);
    w[0] = (w[0] & ~(0xFu << 16)) | (mode << 16);
    w[6] |= aux << 16;
    w[7] = kw | (kh << 8) | (wys << 16);
    return w;
  }
  void fill_act(uint32_t rows) {
    for (uint32_t i = 0; i < rows * N; ++i) *bytes(i) = static_cast<int8_t>(static_cast<int>((i * 73 + 11) % 256) - 128);
  }
  int8_t act(uint32_t row, uint32_t c) { return *bytes(row * N + c); }
  int8_t out(uint32_t row, uint32_t c) { return *bytes(0x8000 + row * N + c); }
  static int64_t rq(int64_t t, uint32_t s) { return s ? (t + (int64_t{1} << (s - 1))) >> s : t; }
  static int8_t clamp8(int64_t t) { return static_cast<int8_t>(std::clamp<int64_t>(t, -128, 127)); }
};

TEST_F(VecModes, LookupTable) {
  fill_act(24);  // rows 0..7 input, rows 8..23 the table (256 entries)
  for (uint32_t e = 0; e < 256; ++e) *bytes(8 * N + e) = static_cast<int8_t>(255 - e);
  run_vec(vec_words(1, 0, 8, 8, 1, 0, 1, 0, 0, 0, 0, 0), 24, 8);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t c = 0; c < N; ++c) ASSERT_EQ(out(r, c), static_cast<int8_t>(255 - (act(r, c) + 128))) << r << "," << c;
}

TEST_F(VecModes, AddAndMulWithRescale) {
  fill_act(16);
  *words(0x4000) = 1 << 29;      // m0
  *words(0x4004) = 3 << 28;      // m1
  *words(0x4008) = 31;           // s
  *words(0x400C) = 5;            // za
  *words(0x4010) = -7;           // zb
  run_vec(vec_words(2, 0, 50, 8, 1, 3, 1, 0, 8, 0, 0, 0), 16, 8);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t c = 0; c < N; ++c) {
      const int64_t t = (act(r, c) - 5) * int64_t{1 << 29} + (act(8 + r, c) + 7) * int64_t{3 << 28};
      ASSERT_EQ(out(r, c), clamp8(rq(t, 31) + 3)) << r << "," << c;
    }
  run_vec(vec_words(3, 0, 50, 8, 1, -2, 1, 0, 8, 0, 0, 0), 16, 8);
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t c = 0; c < N; ++c) {
      const int64_t t = (act(r, c) - 5) * int64_t{act(8 + r, c) + 7} * (1 << 29);
      ASSERT_EQ(out(r, c), clamp8(rq(t, 31) - 2)) << r << "," << c;
    }
}

TEST_F(VecModes, MaxAndAveragePooling) {
  fill_act(36);  // a 6x6 plane, row = y*6 + x
  // 2x2 windows with stride 2: output (o = out y, r = out x), 3x3 outputs.
  run_vec(vec_words(4, 0, 0, 3, 3, 0, 2, 12, 0, 2, 2, 6), 36, 9);
  for (uint32_t oy = 0; oy < 3; ++oy)
    for (uint32_t ox = 0; ox < 3; ++ox)
      for (uint32_t c = 0; c < N; ++c) {
        const uint32_t b = oy * 12 + ox * 2;
        const int8_t m = std::max({act(b, c), act(b + 1, c), act(b + 6, c), act(b + 7, c)});
        ASSERT_EQ(out(oy * 3 + ox, c), m);
      }
  *words(0x4000) = 1 << 30;  // m0 = 0.5 * 2^31 -> with s = 33: divide by 4 (2x2 mean)
  *words(0x4008) = 33;
  *words(0x400C) = -3;       // za
  run_vec(vec_words(5, 0, 50, 3, 3, 4, 2, 12, 0, 2, 2, 6), 36, 9);
  for (uint32_t oy = 0; oy < 3; ++oy)
    for (uint32_t ox = 0; ox < 3; ++ox)
      for (uint32_t c = 0; c < N; ++c) {
        const uint32_t b = oy * 12 + ox * 2;
        const int64_t sum = act(b, c) + act(b + 1, c) + act(b + 6, c) + act(b + 7, c);
        ASSERT_EQ(out(oy * 3 + ox, c), clamp8(rq((sum + 12) * (int64_t{1} << 30), 33) + 4));
      }
}

TEST_F(VecModes, DepthwiseConvolution) {
  fill_act(25);  // 5x5 plane
  for (uint32_t i = 0; i < 9 * N; ++i) *bytes(0x2000 + i) = static_cast<int8_t>(static_cast<int>(i * 29 % 31) - 15);
  for (uint32_t c = 0; c < N; ++c) {
    *words(0x4000 + 4 * c) = static_cast<int32_t>(c) * 100 - 700;  // bias
    *words(0x4000 + 4 * N + 4 * c) = 1 << 30;                      // multiplier
    *words(0x4000 + 8 * N + 4 * c) = 36;                           // shift
  }
  // 3x3 window, stride 1: 3x3 outputs.
  run_vec(vec_words(6, 0, 50, 3, 3, 1, 1, 5, 0, 3, 3, 5, true), 25, 9, true);
  for (uint32_t oy = 0; oy < 3; ++oy)
    for (uint32_t ox = 0; ox < 3; ++ox)
      for (uint32_t c = 0; c < N; ++c) {
        const int64_t t = depthwise_3x3_sum(oy, ox, c, [&](uint32_t row, uint32_t lane) { return act(row, lane); });
        ASSERT_EQ(out(oy * 3 + ox, c), clamp8(rq(t * (1 << 30), 36) + 1)) << oy << "," << ox << "," << c;
      }
}

TEST_F(VecModes, UnusedFieldsMustBeZero) {
  isa::Words w = vec_words(4, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 0);  // MAXPOOL with P != 0
  auto res = run({w});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
  isa::Words lut_window = vec_words(1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0);  // LUT with a window
  EXPECT_EQ(run({lut_window}).error_code, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
}

// Wide rows (ISA 1.4, architecture.md 1.4.3), each against the spec's formula: int16 data
// through a wide LOAD, GEMM, REQUANT with a wide destination, DWCONV and the interpolated LUT
// (both widths out), and a wide STORE; the extremes of int16 are among the inputs.
class WideRows : public FunctionalModel {
 protected:
  int16_t* halves(uint32_t offset) { return reinterpret_cast<int16_t*>(bm_.view(data_ + offset, 2).data()); }
  void fill_wide(uint32_t offset, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i)
      *halves(offset + 2 * i) = static_cast<int16_t>(i % 7 == 0 ? (i % 2 ? 32767 : -32768) : (int32_t(i) * 7919) % 65536 - 32768);
  }
  // Loads `rows` wide rows from data+0 to ACT row 0 (2·rows ACT rows), WGT tiles from
  // data+0x2000, ACC rows 50.. from data+0x4000, runs `op`, stores `out_rows` rows from ACT
  // row 400 to data+0x8000 (wide rows if `wide_out`).
  BareMetalResult run_wide(isa::Words op, uint32_t rows, uint32_t out_rows, bool wide_out, uint32_t acc_rows = 3) {
    std::vector<isa::Words> p;
    p.push_back(isa::encode(isa::Load{.wide = true, .sp = hw::Scratchpad::kAct, .va = data_,
                                      .x = static_cast<uint16_t>(rows), .x_stride = 2 * N}));
    p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kWgt, .va = data_ + 0x2000, .x = 2 * N, .x_stride = N}));
    p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x4000, .sp_base = 50,
                                      .x = static_cast<uint16_t>(acc_rows), .x_stride = 4 * N,
                                      .tokens = {.push_next = true}}));
    op[0] |= (1u << 8) | (1u << 11);  // pop_prev, push_next
    p.push_back(op);
    p.push_back(isa::encode(isa::Store{.wide = wide_out, .sp = hw::Scratchpad::kAct, .va = data_ + 0x8000,
                                       .sp_base = 400, .x = static_cast<uint16_t>(out_rows),
                                       .x_stride = (wide_out ? 2 : 1) * N, .tokens = {.pop_prev = true}}));
    return run(p);
  }
  static int64_t rq(int64_t t, uint32_t s) { return s ? (t + (int64_t{1} << (s - 1))) >> s : t; }
  int16_t in(uint32_t row, uint32_t c) { return *halves(2 * (row * N + c)); }
};

// GEMM over wide operands, REQUANT to a wide destination (zp and clamps refined by 256).
TEST_F(WideRows, GemmAndRequantMatchTheDefinition) {
  fill_wide(0, 4 * N);
  for (uint32_t i = 0; i < N * N; ++i) *bytes(0x2000 + i) = static_cast<int8_t>(static_cast<int>(i * 91 % 255) - 127);
  for (uint32_t c = 0; c < N; ++c) {
    *words(0x4000 + 4 * c) = static_cast<int32_t>(c) * 12345 - 99999;  // bias
    *words(0x4000 + 4 * N + 4 * c) = 1 << 30;                          // multiplier
    *words(0x4000 + 8 * N + 4 * c) = 35 + c % 3;                       // shift
  }
  isa::Words gemm = isa::encode(isa::Gemm{.clear = true, .wide = true, .acc = 0, .r = 4, .act_sr = 2, .acc_sr = 1});
  isa::VecRequant v{.bias = true, .wide_dst = true, .src = 0, .dst = 400, .param = 50, .r = 4, .zero_point = 3,
                    .src_sr = 1, .dst_sr = 2, .clamp_lo = -100, .clamp_hi = 100};
  // GEMM then REQUANT in one COMPUTE stream: LOAD's token is popped by the GEMM.
  std::vector<isa::Words> p;
  p.push_back(isa::encode(isa::Load{.wide = true, .sp = hw::Scratchpad::kAct, .va = data_, .x = 4, .x_stride = 2 * N}));
  p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kWgt, .va = data_ + 0x2000, .x = N, .x_stride = N}));
  p.push_back(isa::encode(isa::Load{.sp = hw::Scratchpad::kAcc, .va = data_ + 0x4000, .sp_base = 50, .x = 3,
                                    .x_stride = 4 * N, .tokens = {.push_next = true}}));
  gemm[0] |= 1u << 8;
  p.push_back(gemm);
  isa::Words vq = isa::encode(v);
  vq[0] |= 1u << 11;
  p.push_back(vq);
  p.push_back(isa::encode(isa::Store{.wide = true, .sp = hw::Scratchpad::kAct, .va = data_ + 0x8000, .sp_base = 400,
                                     .x = 4, .x_stride = 2 * N, .tokens = {.pop_prev = true}}));
  const auto res = run(p);
  ASSERT_TRUE(res.completed) << "error " << res.error_code << " addr " << res.error_addr;
  for (uint32_t r = 0; r < 4; ++r)
    for (uint32_t c = 0; c < N; ++c) {
      int64_t acc = 0;
      for (uint32_t k = 0; k < N; ++k) acc += int64_t{in(r, k)} * *bytes(0x2000 + k * N + c);
      acc = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(static_cast<int32_t>(c) * 12345 - 99999));
      const int64_t u = rq(acc * (1 << 30), 35 + c % 3) + 3 * 256;
      ASSERT_EQ(*halves(0x8000 + 2 * (r * N + c)), std::clamp<int64_t>(u, -100 * 256, 100 * 256 + 255)) << r << "," << c;
    }
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaRdBytes), 4u * 2 * N + N * N + 3u * 4 * N);
  EXPECT_EQ(read_counter(*dev_, hw::Counter::kDmaWrBytes), 4u * 2 * N);
}

// The interpolated table: random int16 entries, inputs over the whole int16 range; int8 and
// wide results.
TEST_F(WideRows, LutInterpolatesBetweenTableEntries) {
  fill_wide(0, 8 * N);
  const uint32_t table_row = 16;  // ACT row 16 = wide row 8: after the 8 input rows
  for (uint32_t e = 0; e < isa::kWideLutEntries; ++e)
    *halves(table_row * N + 2 * e) = static_cast<int16_t>((int32_t(e) * 40503 + 17) % 65536 - 32768);
  const uint32_t rows = (table_row + isa::wide_lut_rows(N) + 1) / 2;  // load the table with the inputs
  auto table = [&](int32_t e) { return int32_t{*halves(table_row * N + 2 * e)}; };
  for (bool wide_out : {false, true}) {
    SCOPED_TRACE(wide_out ? "wide result" : "int8 result");
    isa::VecRequant v{.wide_dst = wide_out, .src = 0, .dst = 400, .param = static_cast<uint16_t>(table_row), .r = 8,
                      .src_sr = 2, .dst_sr = static_cast<uint16_t>(wide_out ? 2 : 1), .clamp_lo = -120, .clamp_hi = 125};
    isa::Words w = isa::encode(v);
    w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kLut) << 16) | isa::kVecWideSrcBit;
    const auto res = run_wide(w, rows, 8, wide_out);
    ASSERT_TRUE(res.completed) << "error " << res.error_code << " addr " << res.error_addr;
    for (uint32_t r = 0; r < 8; ++r)
      for (uint32_t c = 0; c < N; ++c) {
        const int32_t x = in(r, c), i = (x >> 8) + 128, f = x & 255;
        const int64_t t = 256 * int64_t{table(i)} + (table(i + 1) - table(i)) * int64_t{f};
        if (wide_out) {
          ASSERT_EQ(*halves(0x8000 + 2 * (r * N + c)), std::clamp<int64_t>((t + 128) >> 8, -120 * 256, 125 * 256 + 255));
        } else {
          ASSERT_EQ(*bytes(0x8000 + r * N + c), std::clamp<int64_t>((t + 32768) >> 16, -120, 125)) << r << "," << c;
        }
      }
  }
}

// DWCONV over wide rows: window elements two ACT rows apart, int8 and wide results.
TEST_F(WideRows, DepthwiseReadsWideWindows) {
  fill_wide(0, 25 * N);  // a 5x5 plane of wide rows: wide row y*5 + x at ACT row 2(y*5 + x)
  for (uint32_t i = 0; i < 9 * N; ++i) *bytes(0x2000 + i) = static_cast<int8_t>(static_cast<int>(i * 29 % 31) - 15);
  for (uint32_t c = 0; c < N; ++c) {
    *words(0x4000 + 4 * c) = static_cast<int32_t>(c) * 100 - 700;
    *words(0x4000 + 4 * N + 4 * c) = 1 << 30;
    *words(0x4000 + 8 * N + 4 * c) = 40;
  }
  for (bool wide_out : {false, true}) {
    SCOPED_TRACE(wide_out ? "wide result" : "int8 result");
    isa::VecRequant v{.bias = true, .wide_dst = wide_out, .src = 0, .dst = 400, .param = 50, .r = 3, .o = 3,
                      .zero_point = -2, .src_so = 10, .src_sr = 2, .dst_so = static_cast<uint16_t>(wide_out ? 6 : 3),
                      .dst_sr = static_cast<uint16_t>(wide_out ? 2 : 1)};
    isa::Words w = isa::encode(v);
    w[0] = (w[0] & ~(0xFu << 16)) | (static_cast<uint32_t>(hw::VecMode::kDwconv) << 16) | isa::kVecWideSrcBit;
    w[7] = 3u | (3u << 8) | (10u << 16);  // 3x3, window rows 10 ACT rows (5 wide rows) apart
    const auto res = run_wide(w, 25, 9, wide_out);
    ASSERT_TRUE(res.completed) << "error " << res.error_code << " addr " << res.error_addr;
    for (uint32_t oy = 0; oy < 3; ++oy)
      for (uint32_t ox = 0; ox < 3; ++ox)
        for (uint32_t c = 0; c < N; ++c) {
          const int64_t t = depthwise_3x3_sum(oy, ox, c, [&](uint32_t row, uint32_t lane) { return in(row, lane); });
          const int64_t u = rq(t * (1 << 30), 40);
          const uint32_t o = oy * 3 + ox;
          if (wide_out) {
            ASSERT_EQ(*halves(0x8000 + 2 * (o * N + c)), std::clamp<int64_t>(u - 2 * 256, -32768, 32767));
          } else {
            ASSERT_EQ(*bytes(0x8000 + o * N + c), std::clamp<int64_t>(u - 2, -128, 127)) << oy << "," << ox << "," << c;
          }
        }
  }
}

// Where 1.4.3 does not allow the wide bits, and the ranges that cover a wide row's second row.
TEST_F(WideRows, IllegalCombinationsAndRanges) {
  const auto illegal = static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction);
  isa::Words load_wgt = isa::encode(isa::Load{.wide = true, .sp = hw::Scratchpad::kWgt, .va = data_});
  EXPECT_EQ(run({load_wgt}).error_code, illegal);
  for (uint32_t mode : {0u, 2u, 3u, 4u, 5u, 12u}) {  // wide_src where the source is not wide-capable
    isa::Words w = isa::encode(isa::VecRequant{});
    w[0] = (w[0] & ~(0xFu << 16)) | (mode << 16) | isa::kVecWideSrcBit;
    if (mode == 4 || mode == 5) w[7] = 0x101;
    EXPECT_EQ(run({w}).error_code, illegal) << "mode " << mode;
  }
  isa::Words lut_dst = isa::encode(isa::VecRequant{});  // wide_dst in a LUT with an int8 source
  lut_dst[0] = (lut_dst[0] & ~(0xFu << 16)) | (1u << 16) | isa::kVecWideDstBit;
  EXPECT_EQ(run({lut_dst}).error_code, illegal);
  EXPECT_EQ(run({isa::encode(isa::VecRequant{.wrap = true, .wide_dst = true, .clamp_lo = 0, .clamp_hi = 0})}).error_code,
            illegal);
  const uint32_t act_rows = hw::kActSpBytes / N;
  isa::Gemm g{.wide = true, .act = static_cast<uint16_t>(act_rows - 1)};  // its second row is past ACT
  const auto res = run({isa::encode(g)});
  EXPECT_EQ(res.error_code, static_cast<uint32_t>(hw::ErrorCode::kSpRange));
  EXPECT_EQ(res.error_addr, act_rows);
  g.wide = false;
  EXPECT_TRUE(run({isa::encode(g)}).completed);
}

// The predictor remembers the cost of every LOAD and STORE it has costed (cycle_model.h:
// same words, same translation cache). That must change no prediction: random programs, each
// run three times and all sharing one device (so LOADs and STOREs meet remembered costs of
// their own earlier runs and of other programs, with other cache states), predict exactly the
// cycles of a device that costs every LOAD and STORE from its rows.
TEST(DmaCostMemo, ChangesNoPrediction) {
  for (uint32_t dim : hw::kSupportedArrayDims) {
    DeviceConfig memo_config, rows_config;
    memo_config.array_dim = rows_config.array_dim = dim;
    rows_config.memoize_dma_costs = false;
    BareMetal bm_memo(64u << 20), bm_rows(64u << 20);
    // VA page 0x300 maps the page table itself (frame 0, writable), for STOREs into it. They
    // write the entries of pages from 0x200 on, which nothing maps.
    constexpr uint32_t kPageTableVa = 0x0300'0000;
    for (BareMetal* bm : {&bm_memo, &bm_rows}) {
      const uint32_t pte = 3;  // valid, writable, frame 0
      std::memcpy(bm->dram().data() + BareMetal::kPageTableBase + 4 * (kPageTableVa >> 16), &pte, 4);
    }
    auto with_memo = make_functional_device(memo_config, bm_memo.dram());
    auto from_rows = make_functional_device(rows_config, bm_rows.dram());
    auto run = [](Device& dev, BareMetal& bm, const ProgramMemory& mem, const GeneratedProgram& prog) {
      auto cmd = bm.view(mem.cmd_va, ProgramMemory::kCmdBytes);
      std::memset(cmd.data(), 0, cmd.size());
      std::memcpy(cmd.data(), prog.instructions.data(), prog.instructions.size() * 32);
      const uint32_t va = mem.cmd_va + (prog.misaligned_exec ? 16 : 0);
      return bm.run(dev, va, static_cast<uint32_t>(std::max<size_t>(prog.instructions.size(), 1) * 32), 50'000'000);
    };
    uint64_t cycles = 0;
    for (uint64_t seed = 0; seed <= 40; ++seed) {
      const ProgramMemory mem_memo = ProgramMemory::create(bm_memo, seed);
      const ProgramMemory mem_rows = ProgramMemory::create(bm_rows, seed);
      ASSERT_EQ(mem_memo.cmd_va, mem_rows.cmd_va);
      GeneratedProgram prog = generate_program(seed, dim, mem_memo);
      if (seed == 0) {
        // Directed: the same LOAD after a LOAD of its own page (translation hit), first in its
        // job (cache empty) and after a LOAD of another page (miss).
        const isa::Words a = isa::encode(isa::Load{.va = mem_memo.data_va, .x = 8, .x_stride = 64});
        const isa::Words b = isa::encode(isa::Load{.va = mem_memo.data_va + 2 * 65536, .sp_base = 64, .x = 8, .x_stride = 64});
        prog = GeneratedProgram{{a, a, b, a, a}, "", false};
      } else if (seed == 1) {
        // The same for STORE.
        const isa::Words a = isa::encode(isa::Store{.va = mem_memo.data_va, .x = 8, .x_stride = 64});
        const isa::Words b = isa::encode(isa::Store{.va = mem_memo.data_va + 2 * 65536, .sp_base = 64, .x = 8, .x_stride = 64});
        prog = GeneratedProgram{{a, a, b, a, a}, "", false};
      } else if (seed == 2) {
        // STOREs into the page table (which flush the translation caches part way) between
        // and after STOREs of a data page.
        const isa::Words data = isa::encode(isa::Store{.va = mem_memo.data_va, .x = 4, .x_stride = 64});
        const isa::Words into_pt = isa::encode(isa::Store{.va = kPageTableVa + 0x800, .x = 4, .x_stride = 16});
        prog = GeneratedProgram{{data, into_pt, data, into_pt, into_pt, data}, "", false};
      }
      for (int repeat = 0; repeat < 3; ++repeat) {
        const BareMetalResult a = run(*with_memo, bm_memo, mem_memo, prog);
        const BareMetalResult b = run(*from_rows, bm_rows, mem_rows, prog);
        ASSERT_EQ(a.cycles, b.cycles) << "array " << dim << ", program seed " << seed << ", run " << repeat;
        ASSERT_EQ(a.error_code, b.error_code) << "array " << dim << ", program seed " << seed;
        if (seed <= 2) {
          ASSERT_EQ(a.error_code, 0u) << "the directed program " << seed << " must complete";
        }
        cycles += a.cycles;
      }
    }
    EXPECT_GT(cycles, 0u);
  }
}

}  // namespace
}  // namespace npu::sim
