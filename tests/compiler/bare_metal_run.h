// Runs a lowered command stream on a fresh functional-model device (no driver, no runtime):
// the weights blob and the activation buffer are mapped, relocations patched, the stream run
// to its end. For lowering tests at any array dim.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "program.h"

namespace npu::compiler::test {

// Runs `prog` on a fresh functional device of array dim n with `act` as the activation
// buffer; returns the buffer afterwards (a fault fails the calling test).
inline std::vector<int8_t> run_on_bare_metal(const Program& prog,
                                             const std::vector<uint8_t>& weights,
                                             std::vector<int8_t> act, uint32_t n) {
  sim::BareMetal bm(16ull << 20);
  sim::DeviceConfig dc;
  dc.array_dim = n;
  auto dev = sim::make_functional_device(dc, bm.dram());
  const uint32_t wva = bm.allocate(weights.size(), false);
  const uint32_t ava = bm.allocate(act.size(), true);
  const size_t cmd_bytes = static_cast<size_t>(prog.size()) * hw::kInstructionBytes;
  const uint32_t cva = bm.allocate(cmd_bytes, false);
  std::memcpy(bm.view(wva, weights.size()).data(), weights.data(), weights.size());
  std::memcpy(bm.view(ava, act.size()).data(), act.data(), act.size());
  auto cmd = bm.view(cva, cmd_bytes);
  for (uint32_t i = 0; i < prog.size(); ++i)
    std::memcpy(cmd.data() + static_cast<size_t>(i) * hw::kInstructionBytes, prog.words()[i].data(),
                hw::kInstructionBytes);
  for (const auto& r : prog.relocations()) {
    const uint32_t v = (r.buffer == image::BufferKind::Weights ? wva : ava) + r.offset;
    std::memcpy(cmd.data() + r.instr * hw::kInstructionBytes + r.word * 4, &v, 4);
  }
  auto res = bm.run(*dev, cva, static_cast<uint32_t>(cmd_bytes));
  EXPECT_TRUE(res.completed) << "error " << res.error_code << " at instruction "
                             << res.error_instr / hw::kInstructionBytes;
  std::memcpy(act.data(), bm.view(ava, act.size()).data(), act.size());
  return act;
}

}  // namespace npu::compiler::test
