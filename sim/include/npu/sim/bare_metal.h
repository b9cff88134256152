// Runs command streams on a Device without the driver: a DRAM image with an identity
// page table and one ring. Used by the compiler (cycle prediction), npu-sim-diff,
// npu-bench and tests. Not thread-safe; one BareMetal drives one Device at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npu/sim/device.h"

namespace npu::sim {

struct BareMetalResult {
  bool completed = false;     // the job's FENCE arrived
  uint32_t error_code = 0;    // ERROR_CODE (hw::ErrorCode) when the device faulted
  uint32_t error_addr = 0;
  uint32_t error_instr = 0;
  uint64_t cycles = 0;        // device cycles from doorbell to FENCE (or halt)
  bool cycle_limit = false;   // gave up after max_cycles
};

class BareMetal final {
 public:
  // DRAM of `dram_bytes` (rounded up to pages); the page table lives at physical 0 and is
  // never mapped, so VA 0 faults.
  explicit BareMetal(uint64_t dram_bytes);

  std::span<std::byte> dram() { return dram_; }

  // Allocates `bytes` (page-rounded) and maps it at VA == physical address. Returns the VA.
  uint32_t allocate(uint64_t bytes, bool writable);
  // Unmaps a page range so that accesses fault (tests of the error paths).
  void unmap(uint32_t va, uint64_t bytes);
  std::span<std::byte> view(uint32_t va, uint64_t bytes);

  // Resets and programs `device`, then runs one EXEC + FENCE on queue 0.
  BareMetalResult run(Device& device, uint32_t cmd_va, uint32_t cmd_bytes,
                      uint64_t max_cycles = 4'000'000'000ull);
  // Programs the ring without resetting (for several jobs in a row).
  BareMetalResult run_no_reset(Device& device, uint32_t cmd_va, uint32_t cmd_bytes,
                               uint64_t max_cycles);

  static constexpr uint32_t kPageTableBase = 0;
  static constexpr uint32_t kRingBase = 0x40000;
  static constexpr uint32_t kRingBytes = 0x10000;

 private:
  std::vector<std::byte> storage_;
  std::span<std::byte> dram_;
  uint64_t next_free_;
  uint32_t seq_ = 0;
};

}  // namespace npu::sim
