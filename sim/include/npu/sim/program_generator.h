// Constrained-random NPU programs for differential testing (npu-sim-diff, tests).
// A generated program covers every instruction class, every error path and the token
// patterns; it is race-free (cross-engine hazards are ordered by tokens), so every correct
// implementation produces the same architectural state. Deterministic in `seed`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "npu/hw/isa.h"

namespace npu::sim {

struct GeneratedProgram {
  std::vector<isa::Words> instructions;
  std::string expected_error;  // "" for a program meant to complete, else the error class aimed at
  bool misaligned_exec = false;  // the ring entry itself is bad (BAD_RING_ENTRY)
};

// The memory every generated program runs in: allocate it identically in each BareMetal.
struct ProgramMemory {
  uint32_t data_va = 0;      // kDataBytes, read-write, random contents
  uint32_t readonly_va = 0;  // one page, read-only
  uint32_t hole_va = 0;      // one page, unmapped
  uint32_t cmd_va = 0;       // command buffer
  static constexpr uint32_t kDataBytes = 4 * 65536;
  static constexpr uint32_t kCmdBytes = 65536;

  // Allocates the regions in `bm` and fills the data region from `seed`.
  static ProgramMemory create(BareMetal& bm, uint64_t seed);
};

GeneratedProgram generate_program(uint64_t seed, uint32_t array_dim, const ProgramMemory& memory);

// "LOAD act va=0x... x=3 ..." for traces.
std::string disassemble(const isa::Words& w);

}  // namespace npu::sim
