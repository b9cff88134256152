// The functional model's cycle predictor. Timing is not architectural (architecture.md
// 1.7): these are the RTL's costs as sim/rtl/TIMING.md documents them (and as
// tests/rtl/rtl_timing_test.cc checks on the RTL), so that the functional model predicts
// RTL cycle counts at functional-model speed. Engines run in program order, as in the RTL.
// L = DRAM first-beat latency, N = array dim, B(pa, len) = 16-byte beats touched.
#pragma once

#include <algorithm>
#include <cstdint>

#include "npu/sim/device.h"

namespace npu::sim {

class CycleModel {
 public:
  explicit CycleModel(const DeviceConfig& config)
      : n_(config.array_dim), latency_(config.dram_latency_cycles), beat_(config.dma_beat_bytes) {}

  // A ring entry (NOP, FENCE, or an EXEC up to its first fetch), including decode.
  uint64_t ring_entry() const { return latency_ + 8; }
  // Fetch (L + 9), decode/dispatch/completion (3), and the translation misses of the fetch.
  uint64_t instruction(uint32_t tlb_misses) const { return latency_ + 12 + tlb_misses * miss(); }
  uint64_t pad_row() const { return 1; }
  // One DRAM row of a LOAD (reads pay the latency per piece) or a STORE (posted writes).
  uint64_t dma_row(bool read, const uint32_t* phys, const uint32_t* len, int pieces, uint32_t tlb_misses) const {
    uint64_t cycles = pieces == 2 ? 11 : 7;
    for (int k = 0; k < pieces; ++k) cycles += beats(phys[k], len[k]) + (read ? latency_ : 0);
    return cycles + tlb_misses * miss();
  }
  // Setup, the first weight tile, R streamed rows, then max(R, N) per further (o, i) block
  // because the next tile loads while the current block streams.
  uint64_t gemm(uint32_t o, uint32_t i, uint32_t r) const {
    return 1 + n_ + r + (uint64_t{o} * i - 1) * std::max(r, n_);
  }
  // REQUANT: 3 parameter-row reads, then a row per cycle. Other modes: one window element
  // (or one source row) per cycle; LUT first reads its 256/N table rows.
  uint64_t vec(uint32_t mode, uint32_t o, uint32_t r, uint32_t window) const {
    const uint64_t rows = uint64_t{o} * r;
    switch (mode) {
      case 0: return 3 + rows;
      case 1: return 1 + 256 / n_ + rows;
      case 2: case 3: return 2 + 2 * rows;
      default: return 3 + rows * window;
    }
  }

 private:
  uint64_t miss() const { return latency_ + 1; }
  uint64_t beats(uint32_t pa, uint32_t len) const { return (pa % beat_ + len + beat_ - 1) / beat_; }

  uint32_t n_;
  uint32_t latency_;
  uint32_t beat_;
};

}  // namespace npu::sim
