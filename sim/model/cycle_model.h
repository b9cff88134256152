// The functional model's cycle predictor. Timing is not architectural (architecture.md
// 1.7): this is the RTL's timing exactly as sim/rtl/TIMING.md specifies it (and as
// tests/rtl/rtl_timing_test.cc checks it on the RTL), so that the functional model predicts
// RTL cycle counts at functional-model speed. Engines run one instruction at a time in
// program order, as in the RTL. L = DRAM first-beat latency, N = array dim,
// B(pa, len) = 16-byte beats touched.
//
// Not thread-safe; one per device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "npu/sim/device.h"

namespace npu::sim {

// One row of a LOAD or STORE, as timing sees it: a padding row, or `len` bytes at `va`.
struct DmaRow {
  bool pad = false;
  uint32_t va = 0;
  uint32_t len = 0;
};

class CycleModel {
 public:
  explicit CycleModel(const DeviceConfig& config)
      : n_(config.array_dim), latency_(config.dram_latency_cycles) {}

  // EXEC starts: every translation cache and the fetch buffer are emptied.
  void begin_job() {
    ifu_tlb_ = ldq_tlb_ = stq_tlb_ = kEmpty;
    buf_lo_ = buf_hi_ = 0;
    buf_valid_ = false;
  }
  // A STORE wrote [pa, pa + len): a write into the page table flushes every cache; a write
  // into the fetched block empties the fetch buffer.
  void store_written(uint32_t pa, uint32_t len, bool into_page_table) {
    if (into_page_table) begin_job();
    if (buf_valid_ && pa < buf_pa_hi_ && uint64_t{pa} + len > buf_pa_lo_) buf_valid_ = false;
  }

  // A ring entry (NOP, FENCE, or an EXEC up to its first fetch), including decode.
  uint64_t ring_entry() const { return latency_ + 7; }

  // Fetch of the instruction at `va` (physical `pa`), command buffer ending at `cmd_end`,
  // plus decode, dispatch and completion (3).
  uint64_t instruction(uint32_t va, uint32_t pa, uint64_t cmd_end, uint64_t dram_end) {
    uint64_t cycles = 4;
    if (!buf_valid_ || va < buf_lo_ || va >= buf_hi_) {
      cycles = latency_ + 6;
      if (ifu_tlb_ != (va >> 16)) {
        cycles += latency_ + 1;
        ifu_tlb_ = va >> 16;
      }
      const uint64_t len = std::min<uint64_t>({256, 0x10000u - (va & 0xFFFFu), cmd_end - va, dram_end - pa}) & ~uint64_t{31};
      cycles += len / 16;
      buf_lo_ = va;
      buf_hi_ = va + len;
      buf_pa_lo_ = pa;
      buf_pa_hi_ = pa + len;
      buf_valid_ = true;
    }
    return cycles + 3;
  }

  uint64_t load(const std::vector<DmaRow>& rows) { return LoadPipe{latency_, &ldq_tlb_}.run(rows); }
  uint64_t store(const std::vector<DmaRow>& rows) const;

  // Setup, the first weight tile, R streamed rows, then max(R, N) per further (o, i) block
  // because the next tile loads while the current block streams.
  uint64_t gemm(uint32_t o, uint32_t i, uint32_t r) const {
    return 1 + n_ + r + (uint64_t{o} * i - 1) * std::max(r, n_);
  }
  // REQUANT: 3 parameter-row reads, then a row per cycle. LUT: its 256/N table rows, then a
  // row per cycle. ADD/MUL: the scalar row, then two source rows per output row. Window
  // modes: one window element per cycle.
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
  static constexpr int64_t kEmpty = -1;
  // The memory bus is hw::kDmaBeatBytes wide (the RTL is generated for that width only).
  static int64_t beats(uint32_t pa, uint32_t len) {
    constexpr int64_t kBeat = static_cast<int64_t>(hw::kDmaBeatBytes);
    return (pa % kBeat + len + kBeat - 1) / kBeat;
  }

  // LOAD's pipelined read path (TIMING.md "LOAD"): up to 128 bursts in flight on one data
  // bus, rows written in order. Edges count from the LOAD engine's first cycle.
  struct LoadPipe {
    int64_t L;
    int64_t* tlb_page;
    int64_t depth = 128;
    int64_t bus_last = -1000000;
    std::vector<int64_t> pops;    // last-beat edges, ascending
    std::vector<int64_t> writes;  // row-write edges, ascending
    // The edges asked about only grow, so two cursors replace searches.
    size_t first_live = 0;        // first pop at or after the last asked edge
    size_t next_write = 0;        // first write at or after the last asked edge

    int64_t burst(int64_t edge, int64_t n) {
      const int64_t first = std::max(edge + L, bus_last + 1);
      bus_last = first + n - 1;
      pops.push_back(bus_last);
      return bus_last;
    }
    int64_t in_flight_at(int64_t edge) {
      while (first_live < pops.size() && pops[first_live] < edge) ++first_live;
      return static_cast<int64_t>(pops.size() - first_live);
    }
    bool written_at(int64_t edge) {
      while (next_write < writes.size() && writes[next_write] < edge) ++next_write;
      return next_write < writes.size() && writes[next_write] == edge;
    }

    uint64_t run(const std::vector<DmaRow>& rows) {
      int64_t g = 0, t_ready = 0, finish = 0;
      for (const DmaRow& r : rows) {
        if (r.pad) {
          while (written_at(g)) ++g;  // the scratchpad write port belongs to returned rows
          finish = std::max(finish, g + 1);
          ++g;
          continue;
        }
        int64_t a = std::max(g + 1, t_ready);
        while (in_flight_at(a) > depth - 2) ++a;
        const uint32_t page = r.va >> 16;
        const bool cross = (r.va & 0xFFFFu) + r.len > 0x10000u;
        int64_t last;
        if (!cross && *tlb_page == page) {
          last = burst(a + 1, beats(r.va, r.len));
          t_ready = a + 1;
        } else {
          int64_t c = a + 1;
          const uint32_t len0 = cross ? 0x10000u - (r.va & 0xFFFFu) : r.len;
          const uint32_t pages[2] = {page, (page + 1) & 0xFFFFu};
          for (int p = 0; p < (cross ? 2 : 1); ++p) {
            int64_t chk;
            if (*tlb_page == pages[p]) {
              chk = c + 1;
            } else {
              chk = burst(c + 1, 1) + 1;  // the PTE read queues behind the data in flight
              *tlb_page = pages[p];
            }
            c = chk + 1;
          }
          last = burst(c + 1, beats(r.va, len0));
          if (cross) last = burst(c + 2, beats(r.va + len0, r.len - len0));
          t_ready = c + (cross ? 2 : 1);
        }
        writes.push_back(last + 1);
        finish = std::max({finish, last + 1, a + 1});
        g = a;
      }
      return static_cast<uint64_t>(finish + 1);
    }
  };

  uint32_t n_;
  uint32_t latency_;
  int64_t ifu_tlb_ = kEmpty, ldq_tlb_ = kEmpty;
  mutable int64_t stq_tlb_ = kEmpty;
  bool buf_valid_ = false;
  uint64_t buf_lo_ = 0, buf_hi_ = 0, buf_pa_lo_ = 0, buf_pa_hi_ = 0;
};

// STORE's write path (TIMING.md "STORE"): rows handed over one at a time, posted writes.
inline uint64_t CycleModel::store(const std::vector<DmaRow>& rows) const {
  const int64_t L = latency_;
  int64_t a = 1, done = 0;
  for (const DmaRow& r : rows) {
    const uint32_t page = r.va >> 16;
    const bool cross = (r.va & 0xFFFFu) + r.len > 0x10000u;
    const uint32_t len0 = cross ? 0x10000u - (r.va & 0xFFFFu) : r.len;
    if (!cross && stq_tlb_ == page) {
      done = a + beats(r.va, r.len);
    } else {
      int64_t c = a + 1;
      const uint32_t pages[2] = {page, (page + 1) & 0xFFFFu};
      for (int p = 0; p < (cross ? 2 : 1); ++p) {
        const int64_t chk = stq_tlb_ == pages[p] ? c + 1 : c + L + 2;
        stq_tlb_ = pages[p];
        c = chk + 1;
      }
      done = c + beats(r.va, len0);
      if (cross) done += 1 + beats(r.va + len0, r.len - len0);
    }
    a = done + 1;
  }
  return static_cast<uint64_t>(done + 2);
}

}  // namespace npu::sim
