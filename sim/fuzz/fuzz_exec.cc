// libFuzzer target for the functional model's command-stream executor: random programs on
// random memory, through BareMetal (one EXEC + FENCE on queue 0) and a bounded cycle budget.
//
// Input: byte 0 picks the array dim (8/16/32) and the mode, bytes 1-8 seed the memory
// (ProgramMemory::create: random data, a read-only page, an unmapped hole, the command buffer)
// and the rest is the program. Mode "raw": the rest is the command stream itself (whole
// 32-byte instructions). Mode "mutate": generate_program(seed) is XORed with the rest, so
// that mostly-valid programs reach deep into every engine. Any crash, sanitizer report or
// hang (the -timeout) is a model bug; a device error (ERROR_CODE) is a correct outcome.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "npu/sim/bare_metal.h"
#include "npu/sim/device.h"
#include "npu/sim/program_generator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace npu;
  if (size < 9) return 0;
  constexpr uint32_t kDims[3] = {8, 16, 32};
  const uint32_t dim = kDims[(data[0] & 3) % 3];
  const bool mutate = (data[0] & 4) != 0;
  uint64_t seed = 0;
  std::memcpy(&seed, data + 1, 8);
  const uint8_t* payload = data + 9;
  const size_t payload_size = size - 9;

  sim::BareMetal bm(2u << 20);
  const sim::ProgramMemory mem = sim::ProgramMemory::create(bm, seed);
  sim::DeviceConfig dc;
  dc.array_dim = dim;
  std::unique_ptr<sim::Device> dev = sim::make_functional_device(dc, bm.dram());
  if (!dev) __builtin_trap();  // 8, 16 and 32 are all supported

  auto cmd = bm.view(mem.cmd_va, sim::ProgramMemory::kCmdBytes);
  std::memset(cmd.data(), 0, cmd.size());
  size_t bytes = 0;
  uint32_t offset = 0;
  if (mutate) {
    const sim::GeneratedProgram prog = sim::generate_program(seed, dim, mem);
    bytes = std::min(prog.instructions.size() * 32, cmd.size());
    std::memcpy(cmd.data(), prog.instructions.data(), bytes);
    for (size_t i = 0; i < payload_size && i < bytes; ++i)
      cmd[i] ^= static_cast<std::byte>(payload[i]);
    if (prog.misaligned_exec) offset = 16;
  } else {
    bytes = std::min(payload_size / 32 * 32, cmd.size());
    std::memcpy(cmd.data(), payload, bytes);
  }
  if (bytes == 0) bytes = 32;
  bm.run(*dev, mem.cmd_va + offset, static_cast<uint32_t>(bytes), 2'000'000);
  return 0;
}
