// The functional model against docs/architecture.md section 1: registers, a real program,
// every error path, and reset recovery.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "npu/sim/device.h"
#include "npu/sim/isa.h"

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

}  // namespace
}  // namespace npu::sim
