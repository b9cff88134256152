// The functional model's cycle predictor. Timing is not architectural (architecture.md
// 1.7): this follows the RTL's timing as docs/rtl-timing.md specifies it (and as
// tests/rtl/rtl_timing_test.cc checks it on the RTL), so that the functional model predicts
// RTL cycle counts at functional-model speed. L = DRAM first-beat latency, N = array dim,
// B(pa, len) = 16-byte beats touched.
//
// The engines overlap as in the RTL: the dispatcher fetches and decodes in program order and
// hands each instruction to its engine's queue (kEngineQueueDepth entries); each engine runs
// its instructions in order, starting one when it is free, the instruction has reached the
// queue, its pops are covered by pushes of completed instructions, and no earlier LOAD/STORE
// with an overlapping DRAM range (STORE/LOAD) is queued or running. The functional model
// executes in program order and reports each instruction here (instruction(), then its
// engine's cost through load()/store()/gemm()/vec(), or a remembered LOAD/STORE cost through
// charge_load()/charge_store()); end_job() closes the job. Each
// instruction's own cost is exact (docs/rtl-timing.md); what is approximated is the memory port shared
// by concurrent units (fetch, LOAD and STORE are each costed as if they had the port alone).
//
// Not thread-safe; one per device.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "npu/hw/isa.h"
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
  // Instructions each engine's queue holds (npu_hw.toml engine_queue_depth).
  static constexpr int kEngineQueueDepth = static_cast<int>(hw::kEngineQueueDepth);

  explicit CycleModel(const DeviceConfig& config)
      : n_(config.array_dim), latency_(config.dram_latency_cycles), memoize_(config.memoize_dma_costs) {}

  // EXEC starts: every translation cache and the fetch buffer are emptied, the engines and
  // token channels are idle.
  void begin_job() {
    flush_caches();
    pending_ = false;
    fetch_ = 0;
    job_end_ = 0;
    for (Engine& e : engines_) e = Engine{};
    for (Channel& c : channels_) c.ready.clear(), c.next = 0;
    recent_.clear();
    stores_lo_ = UINT64_MAX;
    stores_hi_ = 0;
    position_ = 0;
  }
  // A STORE wrote [pa, pa + len): a write into the page table flushes every cache; a write
  // into the fetched block empties the fetch buffer.
  void store_written(uint32_t pa, uint32_t len, bool into_page_table) {
    if (into_page_table) flush_caches();
    if (buf_valid_ && pa < buf_pa_hi_ && uint64_t{pa} + len > buf_pa_lo_) buf_valid_ = false;
  }

  // store_written() for the rows pa0 + x·stride (x < count) of `len` bytes, none of them in
  // the page table: the fetch buffer can only be emptied, so the rows need looking at only
  // when the line's span overlaps the fetched block.
  void store_line_written(uint32_t pa0, uint32_t stride, uint32_t count, uint32_t len) {
    if (!buf_valid_ || pa0 >= buf_pa_hi_ || uint64_t{pa0} + uint64_t{count - 1} * stride + len <= buf_pa_lo_) return;
    for (uint32_t x = 0; x < count; ++x) store_written(pa0 + x * stride, len, false);
  }

  // A ring entry (NOP, FENCE, or an EXEC up to its first fetch), including decode.
  uint64_t ring_entry() const { return latency_ + 7; }

  // The instruction `w` at `va` (physical `pa`) is fetched and dispatched; command buffer
  // ending at `cmd_end`. Its engine cost follows through load()/store()/gemm()/vec() (none
  // for NOP and SYNC). Returns 0: a job's cycles come from end_job().
  uint64_t instruction(uint32_t va, uint32_t pa, uint64_t cmd_end, uint64_t dram_end, const uint32_t* w) {
    if (pending_) schedule();
    ++position_;
    // Fetch waits while an earlier STORE that overlaps the instruction is queued or running.
    int64_t f = fetch_;
    if (stores_lo_ < uint64_t{va} + 32 && va < stores_hi_)
      for (const Dma& d : recent_)
        if (d.store && d.lo < uint64_t{va} + 32 && va < d.hi) f = std::max(f, d.done + 1);
    int64_t cycles = 4;
    if (!buf_valid_ || va < buf_lo_ || va >= buf_hi_) {
      cycles = latency_ + 6;
      if (ifu_tlb_ != (va >> 16)) {
        cycles += latency_ + 1;
        ifu_tlb_ = va >> 16;
      }
      const uint64_t len = std::min<uint64_t>({256, 0x10000u - (va & 0xFFFFu), cmd_end - va, dram_end - pa}) & ~uint64_t{31};
      cycles += static_cast<int64_t>(len / 16);
      buf_lo_ = va;
      buf_hi_ = va + len;
      buf_pa_lo_ = pa;
      buf_pa_hi_ = pa + len;
      buf_valid_ = true;
    }
    // Decode, range check, then into the engine's queue.
    cur_ = Instr{};
    cur_.ready = f + cycles + 2;
    const uint32_t op = w[0] & 0xFF;
    cur_.engine = op == 1 ? 0 : op == 2 ? 2 : op == 5 ? static_cast<int>((w[0] >> 16) & 3) : 1;
    cur_.flags = (w[0] >> 8) & 0xF;
    if (op == 1 || op == 2) {
      const uint32_t elems = (w[0] >> 24) ? (w[0] >> 24) : n_;
      const uint64_t row = uint64_t{elems} << (((w[0] >> 16) & 3) == 2 ? 2 : 0);
      const uint64_t end = uint64_t{w[1]} + (uint64_t{w[4] & 0xFFFF} - 1) * w[7] +
                           (uint64_t{w[3] >> 16} - 1) * w[6] + (uint64_t{w[3] & 0xFFFF} - 1) * w[5] + row;
      cur_.lo = end > (uint64_t{1} << 32) ? 0 : w[1];
      cur_.hi = end > (uint64_t{1} << 32) ? uint64_t{1} << 32 : end;
    }
    pending_ = true;
    return 0;
  }

  // Edges from the job's first fetch to the completion of the instruction reported last
  // (for the instruction trace; call after its engine cost).
  uint64_t completion() {
    if (pending_) schedule();
    return static_cast<uint64_t>(last_done_);
  }

  // The job's last instruction has been dispatched (or the job stopped on an error): the
  // cycles from its first fetch until the command processor is idle again.
  uint64_t end_job() {
    if (pending_) schedule();
    return static_cast<uint64_t>(std::max(fetch_, job_end_) + 1);
  }

  // Engine costs of the current instruction (docs/rtl-timing.md); they return 0 (see end_job()).
  // `w` is the LOAD or STORE instruction; its cost is remembered for known_load()/known_store().
  uint64_t load(const std::vector<DmaRow>& rows, const uint32_t* w) {
    const int64_t tlb = ldq_tlb_;
    const uint64_t cycles = LoadPipe{latency_, &ldq_tlb_}.run(rows);
    if (memoize_) load_memo_.remember(w, tlb, DmaCost{cycles, ldq_tlb_}, position_);
    return cost(cycles);
  }
  uint64_t store(const std::vector<DmaRow>& rows, const uint32_t* w) {
    const int64_t tlb = stq_tlb_;
    const uint64_t cycles = store_cycles(rows);
    if (memoize_) store_memo_.remember(w, tlb, DmaCost{cycles, stq_tlb_}, position_);
    return cost(cycles);
  }

  // A complete LOAD's or STORE's cost is a function of its rows (virtual addresses and
  // lengths, a function of its instruction words alone) and of its queue's translation cache
  // when the cost is computed. So an instruction seen before with the same cache (every
  // inference of a model repeats its command stream) needs no rows: known_load(w) /
  // known_store(w) find the remembered cost (nullptr if none) and charge_load() /
  // charge_store() apply it, leaving the cache as the first costing did. For a LOAD that is
  // the cache when it starts (a LOAD writes no DRAM). A STORE into the page table flushes
  // the caches part way, before its cost is computed: call known_store() after the STORE's
  // data path, as store() is, so that the key holds the cache store() would have used. The
  // row walks are the predictor's most expensive part.
  struct DmaCost {
    uint64_t cycles;
    int64_t tlb_after;
  };
  const DmaCost* known_load(const uint32_t* w) { return memoize_ ? load_memo_.find(w, ldq_tlb_, position_) : nullptr; }
  uint64_t charge_load(const DmaCost& known) {
    ldq_tlb_ = known.tlb_after;
    return cost(known.cycles);
  }
  const DmaCost* known_store(const uint32_t* w) { return memoize_ ? store_memo_.find(w, stq_tlb_, position_) : nullptr; }
  uint64_t charge_store(const DmaCost& known) {
    stq_tlb_ = known.tlb_after;
    return cost(known.cycles);
  }

  // Setup, the first weight tile, R streamed rows, then max(R, N) per further (o, i) block
  // because the next tile loads while the current block streams.
  uint64_t gemm(uint32_t o, uint32_t i, uint32_t r) {
    return cost(1 + n_ + r + (uint64_t{o} * i - 1) * std::max(r, n_));
  }
  // REQUANT: 3 parameter-row reads, then a row per cycle. LUT: its 256/N table rows, then a
  // row per cycle. ADD/MUL: the scalar row, then two source rows per output row. Window
  // modes (ISA 1.3): up to kVecWindowElems consecutive elements of one window row per cycle,
  // so a window of kh rows of kw takes kh·⌈kw / kVecWindowElems⌉ cycles.
  // `wide_src` (ISA 1.4, architecture.md 1.4.3): a LUT reads the ⌈514/N⌉ rows of its
  // interpolated table two per cycle; a window mode reads W wide elements (2W rows) per
  // cycle, as W int8 ones.
  uint64_t vec(uint32_t mode, uint32_t o, uint32_t r, uint32_t kh, uint32_t kw, bool wide_src = false) {
    const uint64_t rows = uint64_t{o} * r;
    switch (mode) {
      case 0: return cost(3 + rows);
      case 1: return cost(1 + (wide_src ? (isa::wide_lut_rows(n_) + 1) / 2 : 256 / n_) + rows);
      case 2: case 3: return cost(2 + 2 * rows);
      // SOFTMAX: its 256/N table rows, then per segment three passes of R rows and the
      // 63-step division between the second and the third.
      case static_cast<uint32_t>(hw::VecMode::kSoftmax): return cost(1 + 256 / n_ + uint64_t{o} * (3 * uint64_t{r} + 63));
      default: return cost(3 + rows * window_cycles(kh, kw));
    }
  }
  // Cycles of one output row of a window mode (MAXPOOL, AVGPOOL, DWCONV), int8 or wide.
  static uint64_t window_cycles(uint32_t kh, uint32_t kw) {
    return uint64_t{kh} * ((uint64_t{kw} + hw::kVecWindowElems - 1) / hw::kVecWindowElems);
  }

 private:
  static constexpr int64_t kEmpty = -1;

  void flush_caches() {
    ifu_tlb_ = ldq_tlb_ = stq_tlb_ = kEmpty;
    buf_lo_ = buf_hi_ = 0;
    buf_valid_ = false;
  }

  // Remembered DMA costs by (instruction words, translation cache): at most kEntries,
  // forgotten all at once when full. An open-addressing table (linear probing, at most half
  // full, its size a power of two), in front of which sits a cache by the instruction's
  // position in its job: a job that repeats its command stream finds each instruction's entry
  // at its position, in the order it runs (one sequential walk instead of a random probe per
  // LOAD/STORE). Both are keyed by the full key, so either answers exactly. A pointer from
  // find() stays valid until the next find() or remember().
  class DmaCostMemo {
   public:
    const DmaCost* find(const uint32_t* w, int64_t tlb, uint32_t position) {
      if (slots_.empty()) return nullptr;
      const Key k = key(w, tlb);
      Slot* front = position < by_position_.size() ? &by_position_[position] : nullptr;
      if (front && front->used && front->key == k) return &front->cost;
      for (size_t i = hash(k) & mask();; i = (i + 1) & mask()) {
        const Slot& s = slots_[i];
        if (!s.used) return nullptr;
        if (s.key == k) {
          if (!front) return &s.cost;
          *front = s;
          return &front->cost;
        }
      }
    }
    void remember(const uint32_t* w, int64_t tlb, const DmaCost& c, uint32_t position) {
      if (used_ >= kEntries) {
        slots_.clear();
        by_position_.clear();
        used_ = 0;
      }
      if (2 * (used_ + 1) > slots_.size()) grow();
      const Key k = key(w, tlb);
      if (position < kPositions) {
        if (position >= by_position_.size()) by_position_.resize(std::max<size_t>(position + 1, 2 * by_position_.size()));
        by_position_[position] = Slot{true, k, c};
      }
      for (size_t i = hash(k) & mask();; i = (i + 1) & mask()) {
        Slot& s = slots_[i];
        if (!s.used) {
          s = Slot{true, k, c};
          ++used_;
          return;
        }
        if (s.key == k) {
          s.cost = c;
          return;
        }
      }
    }

   private:
    static constexpr size_t kEntries = size_t{1} << 16;
    struct Key {
      std::array<uint32_t, 8> words;
      int64_t tlb;
      bool operator==(const Key&) const = default;
    };
    struct Slot {
      bool used = false;
      Key key{};
      DmaCost cost{};
    };
    static size_t hash(const Key& k) {
      uint64_t h = 0xcbf29ce484222325ull ^ static_cast<uint64_t>(k.tlb);  // FNV-1a
      for (uint32_t v : k.words) h = (h ^ v) * 0x100000001b3ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    static Key key(const uint32_t* w, int64_t tlb) {
      Key k{{}, tlb};
      std::copy(w, w + 8, k.words.begin());
      return k;
    }
    size_t mask() const { return slots_.size() - 1; }
    // Doubles the table (from 1024 slots) and re-inserts the entries.
    void grow() {
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.empty() ? 1024 : 2 * old.size(), Slot{});
      for (const Slot& s : old)
        if (s.used)
          for (size_t i = hash(s.key) & mask();; i = (i + 1) & mask())
            if (!slots_[i].used) {
              slots_[i] = s;
              break;
            }
    }
    static constexpr uint32_t kPositions = uint32_t{1} << 16;  // positions cached in front
    std::vector<Slot> slots_;
    std::vector<Slot> by_position_;
    size_t used_ = 0;
  };

  uint64_t cost(uint64_t engine_cycles) {
    cur_.cycles = static_cast<int64_t>(engine_cycles);
    return 0;
  }

  // Places the pending instruction on its engine's timeline (edges relative to the job's
  // first fetch): it enters the queue once a slot is free (the instruction kEngineQueueDepth
  // before it on that engine has started), starts on the edge after it is visible, the engine
  // is free and its pops are pushed, runs `cycles`, and completes one edge later; its pushes
  // are visible the edge after that.
  void schedule() {
    pending_ = false;
    if (cur_.engine > 2) return;  // an illegal SYNC: the dispatcher stopped here
    Engine& e = engines_[static_cast<size_t>(cur_.engine)];
    const int64_t issue = std::max(cur_.ready, e.starts[e.count % kEngineQueueDepth] + 1);
    fetch_ = issue + 1;
    int64_t start = std::max(issue + 1, e.free);
    const bool pop_prev = cur_.flags & 1, pop_next = cur_.flags & 2;
    const bool push_prev = cur_.flags & 4, push_next = cur_.flags & 8;
    if (pop_prev) start = std::max(start, take(cur_.engine == 1 ? 0 : 2));
    if (pop_next) start = std::max(start, take(cur_.engine == 0 ? 1 : 3));
    // DRAM hazards against earlier STOREs (for a LOAD) or LOADs (for a STORE).
    if (cur_.hi > cur_.lo) {
      for (const Dma& d : recent_)
        if (d.store != (cur_.engine == 2) && d.lo < cur_.hi && cur_.lo < d.hi) start = std::max(start, d.done + 1);
    }
    const int64_t done = start + 1 + cur_.cycles;
    last_done_ = done;
    e.starts[e.count % kEngineQueueDepth] = start;
    ++e.count;
    e.free = done + 1;
    job_end_ = std::max(job_end_, done + 1);
    if (push_prev) channels_[cur_.engine == 1 ? 1 : 3].ready.push_back(done + 1);
    if (push_next) channels_[cur_.engine == 0 ? 0 : 2].ready.push_back(done + 1);
    if (cur_.hi > cur_.lo) {
      // Only DMAs still running after the dispatcher's time can delay a later instruction.
      // One pass drops the others and takes the span of the STOREs that stay: instruction()
      // looks for a STORE over the fetched instruction only when it lies inside that span (a
      // command buffer rarely does).
      recent_.push_back(Dma{cur_.engine == 2, cur_.lo, cur_.hi, done});
      stores_lo_ = UINT64_MAX;
      stores_hi_ = 0;
      size_t kept = 0;
      for (const Dma& d : recent_) {
        if (d.done + 1 <= fetch_) continue;
        if (d.store) {
          stores_lo_ = std::min(stores_lo_, d.lo);
          stores_hi_ = std::max(stores_hi_, d.hi);
        }
        recent_[kept++] = d;
      }
      recent_.resize(kept);
    }
  }
  // The edge from which the next token of `channel` is available.
  int64_t take(int channel) {
    Channel& c = channels_[static_cast<size_t>(channel)];
    return c.next < c.ready.size() ? c.ready[c.next++] : 0;
  }

  struct Instr {
    int engine = 1;
    uint32_t flags = 0;        // pop_prev, pop_next, push_prev, push_next
    uint64_t lo = 0, hi = 0;   // DRAM VA range of a LOAD/STORE
    int64_t ready = 0;         // edge on which the dispatcher could put it into the queue
    int64_t cycles = 0;        // engine cycles (docs/rtl-timing.md)
  };
  struct Engine {
    std::array<int64_t, kEngineQueueDepth> starts = [] {
      std::array<int64_t, kEngineQueueDepth> never;  // no earlier instruction holds a slot
      never.fill(-1000);
      return never;
    }();
    uint64_t count = 0;
    int64_t free = 0;
  };
  struct Channel {
    std::vector<int64_t> ready;  // edges the pushes become visible, in program order
    size_t next = 0;
  };
  struct Dma {
    bool store;
    uint64_t lo, hi;
    int64_t done;
  };
  Instr cur_;
  bool pending_ = false;
  int64_t fetch_ = 0;          // edge the dispatcher may start the next fetch
  int64_t job_end_ = 0;        // edge after the last completion
  int64_t last_done_ = 0;      // completion edge of the instruction scheduled last
  std::array<Engine, 3> engines_;
  std::array<Channel, 4> channels_;
  std::vector<Dma> recent_;
  uint64_t stores_lo_ = UINT64_MAX, stores_hi_ = 0;  // the span of the STOREs in recent_
  // The memory bus is hw::kDmaBeatBytes wide (the RTL is generated for that width only).
  static int64_t beats(uint32_t pa, uint32_t len) {
    constexpr int64_t kBeat = static_cast<int64_t>(hw::kDmaBeatBytes);
    return (pa % kBeat + len + kBeat - 1) / kBeat;
  }

  // LOAD's pipelined read path (docs/rtl-timing.md "LOAD"): up to 128 bursts in flight on one data
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

  uint64_t store_cycles(const std::vector<DmaRow>& rows);

  uint32_t n_;
  uint32_t latency_;
  bool memoize_;
  DmaCostMemo load_memo_, store_memo_;
  uint32_t position_ = 0;  // instructions of the current job dispatched so far
  int64_t ifu_tlb_ = kEmpty, ldq_tlb_ = kEmpty;
  int64_t stq_tlb_ = kEmpty;
  bool buf_valid_ = false;
  uint64_t buf_lo_ = 0, buf_hi_ = 0, buf_pa_lo_ = 0, buf_pa_hi_ = 0;
};

// STORE's write path (docs/rtl-timing.md "STORE"): rows handed over one at a time, posted writes.
inline uint64_t CycleModel::store_cycles(const std::vector<DmaRow>& rows) {
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
