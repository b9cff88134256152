// The functional model's cycle predictor. Timing is not architectural (architecture.md
// 1.7): this model mirrors the RTL's documented costs (sim/rtl/TIMING.md) so that the
// functional model predicts RTL cycle counts at functional-model speed.
//
// The model charges costs to a job's running cycle count. Engines execute in program
// order, as the first RTL does.
#pragma once

#include <cstdint>

#include "npu/sim/device.h"
#include "npu/sim/isa.h"

namespace npu::sim {

class CycleModel {
 public:
  explicit CycleModel(const DeviceConfig& config)
      : n_(config.array_dim),
        latency_(config.dram_latency_cycles),
        beat_(config.dma_beat_bytes) {}

  void begin_job() {}
  void end_job(uint64_t& cycles) { cycles += 1; }
  void ring_fetch(uint64_t& cycles) { cycles += memory_access(32); }
  void instr_fetch(uint64_t& cycles) { cycles += memory_access(32); }
  void pte_read(uint64_t& cycles) { cycles += memory_access(4); }
  void begin_dma(isa::Engine, uint64_t& cycles) { cycles += 1; }
  void end_dma(isa::Engine, uint64_t&) {}
  void pad_row(uint64_t& cycles) { cycles += 1; }
  void dma_row(uint32_t bytes, uint64_t& cycles) { cycles += memory_access(bytes); }
  // A weight tile enters the array (N cycles), then one activation row streams per cycle.
  void gemm_tile(uint32_t rows, uint64_t& cycles) { cycles += n_ + rows; }
  void vec_row(uint64_t& cycles) { cycles += 1; }
  void sync(isa::Engine, uint64_t& cycles) { cycles += 1; }

 private:
  uint64_t memory_access(uint32_t bytes) const { return latency_ + (bytes + beat_ - 1) / beat_; }

  uint32_t n_;
  uint32_t latency_;
  uint32_t beat_;
};

}  // namespace npu::sim
