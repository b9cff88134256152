// The RTL's cycle costs are exactly those documented in sim/rtl/TIMING.md. This test keeps
// that document honest: each case computes the expected cycle count from the TIMING.md
// formulas and compares it with the cycles the RTL took.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}

// Reference model of LOAD's pipelined read path (TIMING.md "LOAD"). Edges are counted from
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

// Reference model of STORE's write path (TIMING.md "STORE"): rows are handed over one at a
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

  // A job of instructions with the given engine cycles, its command buffer at kCmdVa: ring
  // entry, then per instruction fetch (block fetch or buffer hit) + 3 + engine.
  uint64_t job(const std::vector<uint64_t>& engines) const {
    const uint32_t cb_len = static_cast<uint32_t>(32 * engines.size());
    int64_t buf_lo = -1, buf_hi = -1, tlb = -1;
    uint64_t total = ring_entry();
    for (size_t i = 0; i < engines.size(); ++i) {
      const uint32_t pc = static_cast<uint32_t>(32 * i), va = kCmdVa + pc;
      uint64_t fetch = 4;
      if (va < buf_lo || va >= buf_hi) {
        fetch = L + 6;
        if (tlb != (va >> 16)) {
          fetch += L + 1;
          tlb = va >> 16;
        }
        const uint32_t len = std::min({256u, 0x10000u - (va & 0xFFFF), cb_len - pc}) & ~31u;
        fetch += len / 16;
        buf_lo = va;
        buf_hi = va + len;
      }
      total += fetch + 3 + engines[i];
    }
    return total;
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
  // REQUANT 3 + rows; LUT 1 + 256/N + rows; ADD, MUL 2 + 2 rows; window modes 3 + rows kh kw.
  const uint64_t rows = 2 * 3;
  for (uint32_t mode = 0; mode <= 6; ++mode) {
    Instr v = vec({.src = 0, .dst = 100, .param = mode == 4 ? 0u : 40u, .r = 3, .o = 2,
                   .sso = 8, .ssr = 1, .dso = 3, .dsr = 1});
    v.w[0] |= mode << 16;
    uint64_t expect = 3 + rows;
    if (mode == 1) expect = 1 + 256 / n + rows;
    if (mode == 2 || mode == 3) {
      v.w[6] |= 50u << 16;
      expect = 2 + 2 * rows;
    }
    if (mode >= 4) {
      v.w[7] = 2 | (3u << 8) | (4u << 16);  // kw 2, kh 3, wys 4
      expect = 3 + rows * 6;
    }
    SCOPED_TRACE(mode);
    EXPECT_EQ(run_job({v}), t.job({expect}));
  }
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
