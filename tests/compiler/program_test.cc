// Token emission of the command-stream builder (compiler/src/program.h): instructions of
// different engines are ordered exactly when their scratchpad footprints conflict, and every
// stream it builds runs on the functional model without a TOKEN_DEADLOCK.
#include <gtest/gtest.h>

#include <cstring>

#include "npu/sim/bare_metal.h"
#include "npu/sim/device.h"
#include "program.h"

namespace npu::compiler {
namespace {

constexpr uint32_t kPopPrev = 1u << 8, kPopNext = 1u << 9;
constexpr uint32_t kN = 16;

isa::Load act_rows(uint32_t base, uint32_t rows) {
  isa::Load ld;
  ld.sp = hw::Scratchpad::kAct;
  ld.sp_base = base;
  ld.x = static_cast<uint16_t>(rows);
  ld.x_stride = kN;
  return ld;
}

isa::Gemm gemm_rows(uint32_t act, uint32_t acc, uint32_t rows) {
  isa::Gemm g;
  g.act = static_cast<uint16_t>(act);
  g.acc = static_cast<uint16_t>(acc);
  g.r = static_cast<uint16_t>(rows);
  g.act_sr = 1;
  g.acc_sr = 1;
  g.clear = true;
  return g;
}

// Runs the program on the functional model (VAs are used as they are: no relocation).
sim::BareMetalResult run(const Program& prog, uint32_t cmd_va, sim::BareMetal& bm) {
  sim::DeviceConfig dc;
  dc.array_dim = kN;
  auto dev = sim::make_functional_device(dc, bm.dram());
  auto cmd = bm.view(cmd_va, prog.size() * 32);
  for (uint32_t i = 0; i < prog.size(); ++i) std::memcpy(cmd.data() + 32 * i, prog.words()[i].data(), 32);
  return bm.run(*dev, cmd_va, prog.size() * 32);
}

TEST(ProgramTokens, OnlyConflictingInstructionsAreOrdered) {
  Program prog;
  prog.load(act_rows(0, 10), image::BufferKind::Activations, 0x100000);
  prog.gemm(gemm_rows(100, 0, 4));  // ACT rows 100..103: no conflict with the LOAD
  prog.gemm(gemm_rows(5, 8, 2));    // ACT rows 5..6: waits for the LOAD
  const auto& w = prog.words();
  ASSERT_EQ(prog.size(), 3u);
  EXPECT_EQ(w[1][0] & (kPopPrev | kPopNext), 0u);
  EXPECT_EQ(w[2][0] & kPopPrev, kPopPrev);
  // A STORE of the rows a LOAD wrote: relayed through a COMPUTE SYNC.
  isa::Store st;
  st.sp = hw::Scratchpad::kAct;
  st.sp_base = 2;
  st.x = 1;
  prog.store(st, image::BufferKind::Activations, 0x200000);
  ASSERT_EQ(prog.size(), 5u);
  EXPECT_EQ(w[3][0] & 0xFF, static_cast<uint32_t>(hw::Opcode::kSync));
  EXPECT_EQ(w[4][0] & kPopPrev, kPopPrev);
}

// Wide rows (ISA 1.4) cover two ACT rows each: a wide LOAD of 5 steps writes rows 0..9, a
// wide GEMM operand at row 11 reads rows 11 and 12, a wide REQUANT destination at 20 writes
// 20 and 21. Each is ordered against the instruction that touches its second row (PP-OCRv4
// det differed between sim and RTL before the footprints knew wide rows).
TEST(ProgramTokens, WideRowsCoverTheirSecondRow) {
  Program prog;
  isa::Load wide = act_rows(0, 5);
  wide.wide = true;
  wide.x_stride = 2 * kN;
  prog.load(wide, image::BufferKind::Activations, 0x100000);      // rows 0..9
  prog.gemm(gemm_rows(10, 0, 1));                                // row 10: after it, no token
  isa::Gemm g = gemm_rows(9, 8, 1);                              // row 9: waits
  prog.gemm(g);
  const auto& w = prog.words();
  EXPECT_EQ(w[1][0] & kPopPrev, 0u);
  EXPECT_EQ(w[2][0] & kPopPrev, kPopPrev);
  prog.load(act_rows(12, 1), image::BufferKind::Activations, 0x100000);  // row 12
  g = gemm_rows(11, 16, 1);
  g.wide = true;                                                 // rows 11, 12: waits for it
  prog.gemm(g);
  EXPECT_EQ(w[4][0] & kPopPrev, kPopPrev);
  isa::VecRequant v{.wide_dst = true, .src = 100, .dst = 20, .param = 200};  // rows 20, 21
  prog.vec(v);
  isa::Store st;
  st.sp = hw::Scratchpad::kAct;
  st.sp_base = 21;
  st.x = 1;
  prog.store(st, image::BufferKind::Activations, 0x200000);      // row 21: after the REQUANT
  EXPECT_EQ(w.back()[0] & kPopPrev, kPopPrev);
}

TEST(ProgramTokens, ManyProducersBeforeTheirConsumersStayBelowMaxTokens) {
  // 300 LOADs, then 300 GEMMs each reading the row of one of them: waiting on each LOAD
  // itself would leave 300 tokens outstanding on L->C (more than 255); the builder's
  // look-back window makes the early GEMMs wait for a later LOAD instead.
  sim::BareMetal bm(8u << 20);
  const uint32_t data = bm.allocate(300 * kN, true);
  const uint32_t cmd = bm.allocate(1u << 16, false);
  Program prog;
  for (uint32_t k = 0; k < 300; ++k) prog.load(act_rows(k, 1), image::BufferKind::Activations, data + k * kN);
  for (uint32_t k = 0; k < 300; ++k) prog.gemm(gemm_rows(k, k, 1));
  const auto r = run(prog, cmd, bm);
  EXPECT_TRUE(r.completed) << "error " << r.error_code << " at instruction offset 0x" << std::hex << r.error_instr;
}

}  // namespace
}  // namespace npu::compiler
