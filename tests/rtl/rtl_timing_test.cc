// The RTL's cycle costs are exactly those documented in docs/rtl-timing.md. This test keeps
// that document honest: each case computes the expected cycle count from the docs/rtl-timing.md
// formulas and compares it with the cycles the RTL took (programs whose instructions run one
// after the other). The Overlap cases check that LOAD, COMPUTE and STORE really run
// concurrently, and that tokens and DRAM hazards still order them (each of those fails if the
// RTL ignored the token or the hazard).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "npu/hw/isa.h"
#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

// Reference model of LOAD's pipelined read path (docs/rtl-timing.md "LOAD"). Edges are counted from
// the first LOAD-engine cycle (edge 0); returns the engine's cycle count. `rows` lists the
// LOAD's rows in (z, y, x) order: a padding row, or the row's VA and length. Translation is
// identity (pa = va) and never faults here. `tlb_page` is the load queue's one-entry TLB,
// carried across LOADs of one EXEC (-1 = empty, as after the flush at EXEC).
struct LoadRow {
  bool pad = false;
  uint32_t va = 0, len = 0;
};

struct LoadPipeModel {
  int64_t L;
  int64_t depth = 128;
  int64_t tlb_page = -1;

  int64_t bus_last = -1000000;          // edge of the last scheduled beat
  std::vector<int64_t> pops;            // edges at which in-flight bursts complete
  std::vector<int64_t> writes;          // edges at which returned rows are written

  // A burst accepted by the memory on `edge`: returns the edge of its last beat.
  int64_t burst(int64_t edge, int64_t beats) {
    const int64_t first = std::max(edge + L, bus_last + 1);
    bus_last = first + beats - 1;
    pops.push_back(bus_last);
    return bus_last;
  }
  int64_t in_flight_at(int64_t edge) const {  // descriptors pushed before `edge`, not popped
    int64_t n = 0;
    for (int64_t p : pops) n += (p >= edge);
    return n;
  }
  static int64_t beats(uint32_t pa, uint32_t len) { return (pa % 16 + len + 15) / 16; }

  uint64_t run(const std::vector<LoadRow>& rows) {
    int64_t g = 0, t_ready = 0, finish = 0;
    for (const LoadRow& r : rows) {
      if (r.pad) {
        // A padding row needs the scratchpad write port, which returned rows own.
        while (std::find(writes.begin(), writes.end(), g) != writes.end()) ++g;
        finish = std::max(finish, g + 1);
        ++g;
        continue;
      }
      // The request is visible from g + 1; the queue accepts when idle and not too full.
      int64_t a = std::max(g + 1, t_ready);
      while (in_flight_at(a) > depth - 2) ++a;
      const uint32_t page = r.va >> 16;
      const bool cross = (r.va & 0xFFFF) + r.len > 0x10000;
      int64_t last;
      if (!cross && tlb_page == page) {
        last = burst(a + 1, beats(r.va, r.len));  // fast path: issued on the accept edge
        t_ready = a + 1;
      } else {
        int64_t c = a + 1;                         // T_XL
        const uint32_t len0 = cross ? 0x10000 - (r.va & 0xFFFF) : r.len;
        const uint32_t pages[2] = {page, (page + 1) & 0xFFFF};
        for (int p = 0; p < (cross ? 2 : 1); ++p) {
          int64_t chk;
          if (tlb_page == pages[p]) {
            chk = c + 1;
          } else {
            chk = burst(c + 1, 1) + 1;             // PTE read behind the bursts in flight
            tlb_page = pages[p];
          }
          c = chk + 1;                             // next T_XL, or T_ISS
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

// Reference model of STORE's write path (docs/rtl-timing.md "STORE"): rows are handed over one at a
// time; `tlb_page` is the store queue's one-entry TLB (-1 = empty). Returns engine cycles.
struct StorePipeModel {
  int64_t L;
  int64_t tlb_page = -1;

  static int64_t beats(uint32_t pa, uint32_t len) { return (pa % 16 + len + 15) / 16; }

  uint64_t run(const std::vector<LoadRow>& rows) {
    int64_t a = 1, done = 0;
    for (const LoadRow& r : rows) {
      const uint32_t page = r.va >> 16;
      const bool cross = (r.va & 0xFFFF) + r.len > 0x10000;
      const uint32_t len0 = cross ? 0x10000 - (r.va & 0xFFFF) : r.len;
      if (!cross && tlb_page == page) {
        done = a + beats(r.va, r.len);                 // beats start on the accept edge
      } else {
        int64_t c = a + 1;
        const uint32_t pages[2] = {page, (page + 1) & 0xFFFF};
        for (int p = 0; p < (cross ? 2 : 1); ++p) {
          const int64_t chk = tlb_page == pages[p] ? c + 1 : c + L + 2;
          tlb_page = pages[p];
          c = chk + 1;
        }
        done = c + beats(r.va, len0);
        if (cross) done += 1 + beats(r.va + len0, r.len - len0);
      }
      a = done + 1;
    }
    return static_cast<uint64_t>(done + 2);
  }
};

struct Timing {
  uint64_t L;  // DRAM first-beat latency
  uint64_t n;  // array dim

  uint64_t ring_entry() const { return L + 8 - 1; }

  // A job of instructions with the given engine cycles, its command buffer at kCmdVa, whose
  // instructions run one after the other on one engine (or are ordered by a DRAM hazard):
  // ring entry; the dispatcher fetches (block fetch or buffer hit), decodes and range-checks
  // (2), and puts the instruction into the engine's queue once one of its 4 slots is free;
  // the engine starts it on the next edge once it is free, runs it, and completes it on one
  // more edge; the job ends the edge after the dispatcher and the engines are all idle.
  uint64_t job(const std::vector<uint64_t>& engines) const {
    const uint32_t cb_len = static_cast<uint32_t>(32 * engines.size());
    int64_t buf_lo = -1, buf_hi = -1, tlb = -1;
    int64_t fetch_at = 0, engine_free = 0, end = 0;
    std::vector<int64_t> starts;
    for (size_t i = 0; i < engines.size(); ++i) {
      const uint32_t pc = static_cast<uint32_t>(32 * i), va = kCmdVa + pc;
      int64_t fetch = 4;
      if (va < buf_lo || va >= buf_hi) {
        fetch = static_cast<int64_t>(L) + 6;
        if (tlb != (va >> 16)) {
          fetch += static_cast<int64_t>(L) + 1;
          tlb = va >> 16;
        }
        const uint32_t len = std::min({256u, 0x10000u - (va & 0xFFFF), cb_len - pc}) & ~31u;
        fetch += len / 16;
        buf_lo = va;
        buf_hi = va + len;
      }
      int64_t issue = fetch_at + fetch + 2;
      if (i >= 4) issue = std::max(issue, starts[i - 4] + 1);
      fetch_at = issue + 1;
      const int64_t start = std::max(issue + 1, engine_free);
      starts.push_back(start);
      const int64_t done = start + 1 + static_cast<int64_t>(engines[i]);
      engine_free = done + 1;
      end = done + 1;
    }
    return ring_entry() + static_cast<uint64_t>(std::max(fetch_at, end) + 1);
  }
  static uint64_t beats(uint64_t pa, uint64_t len) { return (pa % 16 + len + 15) / 16; }
  uint64_t load(const std::vector<LoadRow>& rows) const {
    LoadPipeModel m{static_cast<int64_t>(L)};
    return m.run(rows);
  }
  uint64_t store(const std::vector<LoadRow>& rows) const {
    StorePipeModel m{static_cast<int64_t>(L)};
    return m.run(rows);
  }
  // First block: setup + tile load + rows; later blocks overlap the next tile's load with the
  // current block's rows (weight double buffering).
  uint64_t gemm(uint64_t o, uint64_t i, uint64_t r) const {
    return 1 + n + r + (o * i - 1) * std::max(r, n);
  }
  static uint64_t vec(uint64_t o, uint64_t r) { return 3 + o * r; }
};

class RtlTiming : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {
 protected:
  RtlTiming()
      : n(std::get<0>(GetParam())),
        lat(std::get<1>(GetParam())),
        b(make_rtl, n, kDramBytes, lat),
        t{lat, n} {
    b.setup_rings(0);
  }

  uint64_t run_job(const std::vector<Instr>& prog) {
    const uint32_t len = b.put_program(prog);
    b.exec(0, kCmdVa, len);
    b.doorbell(0);
    const uint64_t c0 = b.dev().cycle();
    EXPECT_EQ(b.dev().run(100'000'000), sim::StopReason::kIdle);
    EXPECT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
    return b.dev().cycle() - c0;
  }

  uint32_t n, lat;
  Bench b;
  Timing t;
};

TEST_P(RtlTiming, RingEntriesAndFetch) {
  EXPECT_EQ(run_job({nop()}), t.job({0}));
  EXPECT_EQ(run_job({nop(), sync(0, 0), nop()}), t.job({0, 0, 0}));
  // 20 instructions: blocks of 8, 8 and 4.
  EXPECT_EQ(run_job(std::vector<Instr>(20, nop())), t.job(std::vector<uint64_t>(20, 0)));
  b.fence(0, 3);
  b.doorbell(0);
  const uint64_t c0 = b.dev().cycle();
  EXPECT_EQ(b.dev().run(1'000'000), sim::StopReason::kIdle);
  EXPECT_EQ(b.dev().cycle() - c0, t.ring_entry());
}

TEST_P(RtlTiming, LoadRowsPaddingAndAlignment) {
  const uint32_t va = kDataVa + 8;  // each 16-byte-or-wider row spans one more beat
  std::vector<Instr> prog = {load({.va = va, .sp_row = 0, .x = 3, .y = 2, .xs = n, .ys = 4 * n,
                                   .pad_l = 1, .pad_b = 2})};
  std::vector<LoadRow> rows;
  for (uint32_t y = 0; y < 2 + 2; ++y) {
    for (uint32_t x = 0; x < 3 + 1; ++x) {
      if (x == 0 || y >= 2) {
        rows.push_back({.pad = true});
      } else {
        rows.push_back({.va = va + y * 4 * n + (x - 1) * n, .len = n});
      }
    }
  }
  EXPECT_EQ(run_job(prog), t.job({t.load(rows)}));
}

TEST_P(RtlTiming, LoadStreamsRows) {
  // 200 dense rows, then a second LOAD in the same job (TLB still warm) with 3-D strides.
  std::vector<Instr> prog = {load({.va = kDataVa, .x = 200, .xs = n}),
                             load({.sp = hw::Scratchpad::kAcc, .va = kDataVa + 0x8000, .x = 5,
                                   .y = 3, .z = 2, .xs = 4 * n + 4, .ys = 1000, .zs = 7000})};
  std::vector<LoadRow> first, second;
  for (uint32_t x = 0; x < 200; ++x) first.push_back({.va = kDataVa + x * n, .len = n});
  for (uint32_t z = 0; z < 2; ++z)
    for (uint32_t y = 0; y < 3; ++y)
      for (uint32_t x = 0; x < 5; ++x)
        second.push_back({.va = kDataVa + 0x8000 + z * 7000 + y * 1000 + x * (4 * n + 4),
                          .len = 4 * n});
  LoadPipeModel m{static_cast<int64_t>(t.L)};
  const uint64_t e1 = m.run(first);
  LoadPipeModel m2{static_cast<int64_t>(t.L)};
  m2.tlb_page = m.tlb_page;
  const uint64_t e2 = m2.run(second);
  EXPECT_EQ(run_job(prog), t.job({e1, e2}));
}

TEST_P(RtlTiming, PageCrossingRows) {
  // One LOAD row and one STORE row, each straddling a 64 KiB page: both pieces are
  // translated (both miss the one-entry data TLB), then moved as two bursts.
  const uint32_t va = kDataVa + kPageBytes - 4;  // 4 bytes on the first page, N - 4 on the next
  const uint64_t load_row = t.load({{.va = va, .len = n}});
  const uint64_t store_row = t.store({{.va = va, .len = n}});
  EXPECT_EQ(run_job({load({.va = va, .x = 1}), store({.va = va, .x = 1})}),
            t.job({load_row, store_row}));
}

TEST_P(RtlTiming, StoreRowsAccElements) {
  std::vector<Instr> prog = {store({.sp = hw::Scratchpad::kAcc, .va = kDataVa, .x = 4,
                                    .xs = 4 * n, .row_elems = 3})};
  std::vector<LoadRow> rows;
  for (uint32_t x = 0; x < 4; ++x) rows.push_back({.va = kDataVa + x * 4 * n, .len = 12});
  EXPECT_EQ(run_job(prog), t.job({t.store(rows)}));
  // Misaligned rows spanning two beats, one of them crossing a page.
  std::vector<Instr> prog2 = {store({.va = kDataVa + kPageBytes - 3 * n - 8, .x = 4, .xs = n})};
  std::vector<LoadRow> rows2;
  for (uint32_t x = 0; x < 4; ++x) rows2.push_back({.va = kDataVa + kPageBytes - 3 * n - 8 + x * n, .len = n});
  EXPECT_EQ(run_job(prog2), t.job({t.store(rows2)}));
}

TEST_P(RtlTiming, GemmAndVec) {
  std::vector<Instr> prog = {gemm({.r = 5, .o = 2, .i = 3}), vec({.r = 3, .o = 2})};
  EXPECT_EQ(run_job(prog), t.job({t.gemm(2, 3, 5), t.vec(2, 3)}));
  // Long R: the next tile is loaded while the rows stream, so blocks cost R each.
  const uint32_t r = 3 * n;
  EXPECT_EQ(run_job({gemm({.r = r, .o = 3, .i = 2, .asr = 1, .csr = 1})}),
            t.job({t.gemm(3, 2, r)}));
  EXPECT_EQ(run_job({gemm({.r = n, .o = 1, .i = 4})}),
            t.job({t.gemm(1, 4, n)}));
}

TEST_P(RtlTiming, VecModes) {
  // REQUANT 3 + rows; LUT 1 + 256/N + rows; ADD, MUL 2 + 2 rows; window modes
  // 3 + rows kh ceil(kw / W), W = vec_window_elems (ISA 1.3): windows narrower than W, exactly
  // W wide, and wider (a full group and a partial one per window row).
  const uint64_t rows = 2 * 3, win = hw::kVecWindowElems;
  for (uint32_t mode = 0; mode <= 6; ++mode) {
    for (const uint32_t kw : {2u, static_cast<uint32_t>(win), static_cast<uint32_t>(win + 3)}) {
      if (mode < 4 && kw != 2) continue;
      Instr v = vec({.src = 0, .dst = 300, .param = mode == 4 ? 0u : 40u, .r = 3, .o = 2,
                     .sso = 8, .ssr = 1, .dso = 3, .dsr = 1});
      v.w[0] |= mode << 16;
      uint64_t expect = 3 + rows;
      if (mode == 1) expect = 1 + 256 / n + rows;
      if (mode == 2 || mode == 3) {
        v.w[6] |= 50u << 16;
        expect = 2 + 2 * rows;
      }
      if (mode >= 4) {
        v.w[7] = kw | (3u << 8) | ((kw + 2) << 16);  // kh 3, wys kw + 2
        expect = 3 + rows * 3 * ((kw + win - 1) / win);
      }
      SCOPED_TRACE(testing::Message() << "mode " << mode << " kw " << kw);
      EXPECT_EQ(run_job({v}), t.job({expect}));
    }
  }
  // SOFTMAX (ISA 1.3): 1 + 256/N table rows, then 3R + 63 per segment.
  for (uint32_t r : {1u, 4u}) {
    Instr v;
    v.w = npu::isa::encode(npu::isa::VecSoftmax{.src = 0, .dst = 100, .table = 40, .r = static_cast<uint16_t>(r), .o = 3,
                                      .src_so = static_cast<uint16_t>(r), .dst_so = static_cast<uint16_t>(r),
                                      .shift = 54, .tail = 3});
    SCOPED_TRACE(r);
    EXPECT_EQ(run_job({v}), t.job({1 + 256 / n + 3 * (3 * r + 63)}));
  }
}

// Wide rows (ISA 1.4, architecture.md 1.4.3): a wide LOAD or STORE row moves 2·row_elems
// bytes (the DMA algorithms with len = 2·row_elems; a padding pair is one padding row); GEMM,
// REQUANT and LUT read or write both rows of a pair in one cycle; a wide LUT reads
// ceil(514/N) table rows two per cycle; DWCONV with a wide source reads W wide elements (2W rows) per cycle.
TEST_P(RtlTiming, WideLoadStoreRows) {
  const uint32_t re = n - 1, xs = 2 * n + 8;  // each row spans one beat more than it needs
  Instr l = load({.va = kDataVa + 8, .sp_row = 10, .x = 3, .y = 2, .xs = xs, .ys = 4 * xs,
                  .pad_l = 1, .pad_b = 1, .row_elems = re});
  l.w[0] |= isa::kDmaWideBit;
  std::vector<LoadRow> rows;
  for (uint32_t y = 0; y < 2 + 1; ++y)
    for (uint32_t x = 0; x < 3 + 1; ++x) {
      if (x == 0 || y >= 2) rows.push_back({.pad = true});
      else rows.push_back({.va = kDataVa + 8 + y * 4 * xs + (x - 1) * xs, .len = 2 * re});
    }
  EXPECT_EQ(run_job({l}), t.job({t.load(rows)}));
  // A dense wide STORE of full rows (row_elems 0 = N int16 = 2N bytes), misaligned.
  Instr s = store({.va = kDataVa + 0x8000 + 4, .sp_row = 10, .x = 5, .xs = 2 * n});
  s.w[0] |= isa::kDmaWideBit;
  std::vector<LoadRow> srows;
  for (uint32_t x = 0; x < 5; ++x) srows.push_back({.va = kDataVa + 0x8000 + 4 + x * 2 * n, .len = 2 * n});
  EXPECT_EQ(run_job({s}), t.job({t.store(srows)}));
}

TEST_P(RtlTiming, WideGemmRequantLutDwconv) {
  Instr g = gemm({.r = 5, .o = 2, .i = 3, .asr = 2});
  g.w[0] |= isa::kGemmWideBit;
  Instr rq = vec({.src = 0, .dst = 300, .param = 40, .r = 3, .o = 2, .sso = 8, .ssr = 1,
                  .dso = 6, .dsr = 2});
  rq.w[0] |= isa::kVecWideDstBit;
  EXPECT_EQ(run_job({g, rq}), t.job({t.gemm(2, 3, 5), t.vec(2, 3)}));
  const uint64_t rows = 2 * 3, table = (isa::wide_lut_rows(n) + 1) / 2;  // two table rows per cycle
  for (const bool wide_dst : {false, true}) {
    Instr v = vec({.src = 0, .dst = 300, .param = 40, .r = 3, .o = 2, .sso = 8, .ssr = 2,
                   .dso = 6, .dsr = 2});
    v.w[0] |= (static_cast<uint32_t>(hw::VecMode::kLut) << 16) | isa::kVecWideSrcBit |
              (wide_dst ? isa::kVecWideDstBit : 0u);
    SCOPED_TRACE(wide_dst);
    EXPECT_EQ(run_job({v}), t.job({1 + table + rows}));
  }
  // DWCONV: windows narrower than, as wide as and wider than the W wide elements of a cycle.
  const uint32_t g16 = hw::kVecWindowElems;
  for (const uint32_t kw : {std::max(1u, g16 - 1), g16, g16 + 3, 2 * g16 + 1}) {
    for (const bool wide_dst : {false, true}) {
      Instr v = vec({.src = 0, .dst = 300, .param = 40, .r = 3, .o = 2, .sso = 64, .ssr = 2,
                     .dso = 6, .dsr = 2});
      v.w[0] |= (static_cast<uint32_t>(hw::VecMode::kDwconv) << 16) | isa::kVecWideSrcBit |
                (wide_dst ? isa::kVecWideDstBit : 0u);
      v.w[6] |= 50u << 16;
      v.w[7] = kw | (3u << 8) | ((2 * kw + 2) << 16);  // kh 3
      SCOPED_TRACE(testing::Message() << "kw " << kw << " wide_dst " << wide_dst);
      EXPECT_EQ(run_job({v}), t.job({3 + rows * 3 * ((kw + g16 - 1) / g16)}));
    }
  }
  // wide_dst alone (an int8 window, a wide result) keeps the int8 window rate.
  Instr v = vec({.src = 0, .dst = 300, .param = 40, .r = 3, .o = 2, .sso = 64, .ssr = 1,
                 .dso = 6, .dsr = 2});
  v.w[0] |= (static_cast<uint32_t>(hw::VecMode::kDwconv) << 16) | isa::kVecWideDstBit;
  v.w[6] |= 50u << 16;
  const uint32_t win = hw::kVecWindowElems, kw = win + 1;
  v.w[7] = kw | (3u << 8) | ((kw + 2) << 16);
  EXPECT_EQ(run_job({v}), t.job({3 + rows * 3 * ((kw + win - 1) / win)}));
}

// --- Overlap -----------------------------------------------------------------------------

// A double-buffered tile pipeline: LOAD tile t into buffer t % 2, GEMM it, REQUANT, STORE.
// Tokens: LOAD -> GEMM (L->C), STORE -> next use of the buffer's ACT rows (S->C), GEMM of
// tile t frees LOAD buffer t % 2 for tile t + 2 (C->L), REQUANT -> STORE (C->S).
std::vector<Instr> pipeline(uint32_t n, uint32_t tiles, uint32_t rows) {
  std::vector<Instr> prog;
  // Weights and requant parameters once (ordered before the first GEMM by the L->C token).
  prog.push_back(load({.sp = hw::Scratchpad::kWgt, .va = kDataVa + 0x80000, .x = n, .xs = n}));
  prog.push_back(load({.sp = hw::Scratchpad::kAcc, .va = kDataVa + 0x90000, .sp_row = 1000,
                       .x = 3, .xs = 4 * n, .flags = kPushNext}));
  prog.push_back(sync(1, kPopPrev));
  for (uint32_t t = 0; t < tiles; ++t) {
    const uint32_t buf = (t % 2) * rows;
    prog.push_back(load({.va = kDataVa + t * rows * n, .sp_row = buf, .x = rows, .xs = n,
                         .flags = (t >= 2 ? kPopNext : 0u) | kPushNext}));
    GemmArgs g{.act = buf, .wgt = 0, .acc = buf, .r = rows, .asr = 1, .csr = 1, .clear = true,
               .flags = kPopPrev | (t + 2 < tiles ? kPushPrev : 0u) | (t >= 2 ? kPopNext : 0u)};
    prog.push_back(gemm(g));
    prog.push_back(vec({.src = buf, .dst = 512 + buf, .param = 1000, .r = rows, .ssr = 1,
                        .dsr = 1, .flags = kPushNext}));
    prog.push_back(store({.va = kDataVa + 0x100000 + t * rows * n, .sp_row = 512 + buf,
                          .x = rows, .xs = n, .flags = kPopPrev | (t + 2 < tiles ? kPushPrev : 0u)}));
  }
  return prog;
}

TEST_P(RtlTiming, OverlapPipelineRunsEnginesConcurrently) {
  const uint32_t tiles = 8, rows = 64;
  std::vector<uint8_t> data(0x100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  b.write(kDataVa, data.data(), data.size());
  const auto prog = pipeline(n, tiles, rows);
  const uint64_t overlapped = run_job(prog);
  // The sum of its parts: every instruction as its own job, less the cost of an empty job
  // (one NOP), i.e. each instruction's engine cycles.
  const uint64_t empty = run_job({nop()});
  uint64_t serial = 0;
  for (const Instr& ins : prog) {
    Instr plain = ins;
    plain.w[0] &= ~0xF00u;  // no tokens: each job runs alone
    serial += run_job({plain}) - empty;
  }
  std::printf("N=%u L=%u: pipeline of %u tiles %llu cycles, instructions one at a time %llu (%.2fx)\n", n,
              lat, tiles, static_cast<unsigned long long>(overlapped), static_cast<unsigned long long>(serial),
              static_cast<double>(serial) / static_cast<double>(overlapped));
  EXPECT_LT(overlapped * 10, serial * 7) << "LOAD, GEMM and STORE did not overlap";
}

// A GEMM that pops the LOAD's token must see the LOAD's rows: with a long LOAD (many rows, high
// latency) a GEMM that ignored its pop would read the zeroed scratchpad.
TEST_P(RtlTiming, OverlapHonoursTokens) {
  b.dev().write_reg(reg::CONTROL, hw::bits::CONTROL_RESET);
  b.reset_tails();
  b.setup_rings(0);
  std::vector<uint8_t> data(256 * n, 1);
  b.write(kDataVa, data.data(), data.size());
  std::vector<uint8_t> wgt(n * n, 0);
  for (uint32_t k = 0; k < n; ++k) wgt[k * n + k] = 1;  // identity
  b.write(kDataVa + 0x40000, wgt.data(), wgt.size());
  std::vector<uint8_t> zero(4 * n, 0);
  b.write(kDataVa + 0x50000, zero.data(), zero.size());
  run_job({load({.sp = hw::Scratchpad::kWgt, .va = kDataVa + 0x40000, .x = n, .xs = n}),
           load({.va = kDataVa, .x = 256, .xs = n, .flags = kPushNext}),
           gemm({.act = 255, .acc = 0, .r = 1, .clear = true, .flags = kPopPrev | kPushNext}),
           store({.sp = hw::Scratchpad::kAcc, .va = kDataVa + 0x50000, .x = 1,
                  .flags = kPopPrev})});
  EXPECT_EQ(b.r32(kDataVa + 0x50000), 1u) << "the GEMM ran before the LOAD it popped";
}

// DRAM hazards: a LOAD after a STORE of the same bytes (read after write) and a STORE after a
// LOAD of the same bytes (write after read), with no token between them, still see the
// program-order data.
TEST_P(RtlTiming, OverlapOrdersDramHazards) {
  const uint32_t rows = 64, src = kDataVa, dst = kDataVa + 0x10000, out = kDataVa + 0x20000;
  std::vector<uint8_t> a(rows * n), old(rows * n);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 5 + 1);
    old[i] = static_cast<uint8_t>(i * 3 + 2);
  }
  b.write(src, a.data(), a.size());
  b.write(dst, old.data(), old.size());
  // Read after write: STORE rows of `a` to dst (after a token path from their LOAD through a
  // long GEMM), then LOAD dst with no token: the LOAD engine is free long before the STORE.
  run_job({load({.va = src, .x = rows, .xs = n, .flags = kPushNext}),
           gemm({.act = 300, .acc = 0, .r = 2000, .asr = 1, .csr = 1, .clear = true,
                 .flags = kPopPrev | kPushNext}),
           store({.va = dst, .x = rows, .xs = n, .flags = kPopPrev}),
           load({.va = dst, .sp_row = 200, .x = rows, .xs = n, .flags = kPushNext}),
           sync(1, kPopPrev | kPushNext),
           store({.va = out, .sp_row = 200, .x = rows, .xs = n, .flags = kPopPrev})});
  std::vector<uint8_t> got(rows * n);
  b.read(out, got.data(), got.size());
  EXPECT_EQ(got, a) << "the LOAD overtook the STORE of the same bytes";

  // Write after read: LOAD dst (the old bytes again, behind a long LOAD on its engine) while
  // a STORE whose token is already there overwrites dst; the LOAD must still read the old
  // bytes.
  b.write(dst, old.data(), old.size());
  run_job({load({.va = src, .sp_row = 400, .x = rows, .xs = n, .flags = kPushNext}),
           sync(1, kPopPrev | kPushNext),
           load({.va = kDataVa + 0x40000, .sp_row = 1000, .x = 1000, .xs = n}),
           load({.va = dst, .sp_row = 600, .x = rows, .xs = n}),
           store({.va = dst, .sp_row = 400, .x = rows, .xs = n, .flags = kPopPrev}),
           sync(0, kPushNext),
           sync(1, kPopPrev | kPushNext),
           store({.va = out, .sp_row = 600, .x = rows, .xs = n, .flags = kPopPrev})});
  b.read(out, got.data(), got.size());
  EXPECT_EQ(got, old) << "the STORE overtook the LOAD of the same bytes";
}

INSTANTIATE_TEST_SUITE_P(
    Dims, RtlTiming,
    ::testing::Combine(::testing::ValuesIn(sim::rtl_supported_array_dims()),
                       ::testing::Values(64u, 10u, 200u, 1u, 0u)),
    [](const auto& param_info) {
      char name[32];
      std::snprintf(name, sizeof(name), "N%u_L%u", std::get<0>(param_info.param),
                    std::get<1>(param_info.param));
      return std::string(name);
    });

}  // namespace
}  // namespace npu::rtltest
