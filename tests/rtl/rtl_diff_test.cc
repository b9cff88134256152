// Differential test: the RTL against the functional model (make_functional_device) on the
// same constrained-random programs. A run that ends cleanly compares all of DRAM, every
// architectural register, the architectural counters and the instructions completed (as a
// multiset: the RTL's engines overlap, so completion order is not program order; cycles
// excluded: timing is not architectural). A run that ends in an error compares what
// architecture.md 1.6 keeps precise: the error registers, STATUS, IRQ_STATUS, every ring's
// HEAD/TAIL and COMPLETED_SEQ, and JOBS (DRAM, scratchpads and the other counters are
// undefined after an error: later instructions may have run ahead). Programs cover every
// instruction class; a third of them inject one error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <utility>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "npu/sim/rtl_device.h"
#include "rtl_test_util.h"

namespace npu::rtltest {
namespace {

constexpr uint64_t kDiffDram = 8ull << 20;  // 8 MiB, identity-mapped
// Special pages outside the identity map.
constexpr uint32_t kUnmappedVa = 0x01000000;
constexpr uint32_t kReadOnlyVa = 0x01100000;   // -> PA 0x300000, not writable
constexpr uint32_t kBeyondDramVa = 0x01200000; // -> PA 0x7FFF0000 (BUS_ERROR)
constexpr uint32_t kLoadSpan = 1u << 20;       // LOADs read kDataVa + [0, 1 MiB)
constexpr uint32_t kStoreVa = kDataVa + kLoadSpan;

class Gen {
 public:
  Gen(uint32_t seed, uint32_t n) : rng_(seed), n_(n) {}

  uint32_t u(uint32_t lo, uint32_t hi) {  // inclusive
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_);
  }
  bool p(double prob) { return std::bernoulli_distribution(prob)(rng_); }

  // Scratchpad regions the programs use (small, so instructions interact).
  uint32_t act_region() const { return 512; }
  uint32_t wgt_tiles() const { return 8; }
  uint32_t acc_region() const { return 256; }
  uint32_t rows_of(hw::Scratchpad sp) const {
    return sp == hw::Scratchpad::kAct ? act_region()
           : sp == hw::Scratchpad::kWgt ? wgt_tiles() * n_ : acc_region();
  }

  uint32_t dram_va(uint32_t base, uint32_t span, uint32_t extent) {
    if (p(0.2)) {  // straddle a page boundary
      uint32_t page = u(1, span / kPageBytes - 1);
      return base + page * kPageBytes - u(1, 64);
    }
    return base + u(0, span - extent - 1);
  }

  Instr load() {
    DmaArgs a;
    a.sp = static_cast<hw::Scratchpad>(u(0, 2));
    a.row_elems = p(0.7) ? 0 : u(1, n_);
    const uint32_t esize = a.sp == hw::Scratchpad::kAcc ? 4 : 1;
    const uint32_t row_bytes = (a.row_elems ? a.row_elems : n_) * esize;
    a.x = u(1, 4);
    a.y = u(1, 3);
    a.z = u(1, 2);
    if (p(0.4)) {
      a.pad_l = u(0, 2);
      a.pad_r = u(0, 2);
      a.pad_t = u(0, 2);
      a.pad_b = u(0, 2);
    }
    a.xs = p(0.5) ? row_bytes : u(0, 300);
    a.ys = u(0, 4096);
    a.zs = u(0, 30000);
    const uint32_t extent = (a.x - 1) * a.xs + (a.y - 1) * a.ys + (a.z - 1) * a.zs + row_bytes;
    a.va = dram_va(kDataVa, kLoadSpan, extent);
    const uint32_t rows = a.z * (a.y + a.pad_t + a.pad_b) * (a.x + a.pad_l + a.pad_r);
    a.sp_row = u(0, rows_of(a.sp) - rows);
    return rtltest::load(a);
  }

  Instr store() {
    DmaArgs a;
    a.sp = static_cast<hw::Scratchpad>(u(0, 2));
    a.row_elems = p(0.7) ? 0 : u(1, n_);
    const uint32_t esize = a.sp == hw::Scratchpad::kAcc ? 4 : 1;
    const uint32_t row_bytes = (a.row_elems ? a.row_elems : n_) * esize;
    a.x = u(1, 4);
    a.y = u(1, 3);
    a.z = u(1, 2);
    a.xs = p(0.5) ? row_bytes : u(0, 300);
    a.ys = u(0, 4096);
    a.zs = u(0, 30000);
    const uint32_t extent = (a.x - 1) * a.xs + (a.y - 1) * a.ys + (a.z - 1) * a.zs + row_bytes;
    a.va = dram_va(kStoreVa, kLoadSpan, extent);
    a.sp_row = u(0, rows_of(a.sp) - a.x * a.y * a.z);
    return rtltest::store(a);
  }

  Instr gemm() {
    for (;;) {
      GemmArgs g;
      g.o = u(1, 2);
      g.i = u(1, 3);
      g.r = u(1, 8);
      g.aso = u(0, 16);
      g.asi = u(0, 16);
      g.asr = u(0, 2);
      g.cso = u(0, 16);
      g.csi = u(0, 2);
      g.csr = u(0, 2);
      g.wso = u(0, 3);
      g.wsi = u(0, 2);
      g.act = u(0, 200);
      g.acc = u(0, 100);
      g.wgt = u(0, 4);
      g.clear = p(0.5);
      const uint32_t amax = g.act + (g.o - 1) * g.aso + (g.i - 1) * g.asi + (g.r - 1) * g.asr;
      const uint32_t wmax = g.wgt + (g.o - 1) * g.wso + (g.i - 1) * g.wsi;
      const uint32_t cmax = g.acc + (g.o - 1) * g.cso + (g.i - 1) * g.csi + (g.r - 1) * g.csr;
      if (amax < act_region() && wmax < wgt_tiles() && cmax < acc_region()) return rtltest::gemm(g);
    }
  }

  // A VEC of any mode (architecture.md 1.4), fields within the small scratchpad regions.
  Instr vec() {
    const uint32_t mode = u(0, 6);
    if (mode == 0) return requant();
    for (;;) {
      const bool window = mode >= 4;
      VecArgs v;
      v.o = u(1, 2);
      v.r = u(1, 6);
      v.src = u(0, 200);
      v.dst = u(0, 300);
      v.sso = u(0, 20);
      v.ssr = u(0, 3);
      v.dso = u(0, 20);
      v.dsr = u(0, 2);
      v.zp = static_cast<int8_t>(u(0, 255));
      v.lo = static_cast<int8_t>(u(0, 255));
      v.hi = static_cast<int8_t>(u(0, 255));
      if (v.lo > v.hi && p(0.8)) std::swap(v.lo, v.hi);
      v.wrap = (mode == 2 || mode == 3) && p(0.3);
      if (v.wrap) v.lo = v.hi = 0;
      uint32_t kw = 1, kh = 1, wys = 0, aux = 0, param = 0;
      if (window) {
        // Window rows narrower than, equal to and wider than the W elements read per cycle
        // (ISA 1.3), several groups with a partial last one included.
        kw = p(0.5) ? u(1, 3) : u(1, 2 * hw::kVecWindowElems + 3);
        kh = u(1, 3);
        wys = u(0, 12);
      }
      if (mode == 1) param = u(0, act_region() - 256 / n_);        // LUT table rows (ACT)
      else if (mode == 6) param = u(0, acc_region() - 3);
      else if (mode != 4) param = u(0, acc_region() - 1);
      if (mode == 2 || mode == 3) aux = u(0, 200);
      if (mode == 6) aux = u(0, wgt_tiles() * n_ - kh * kw);
      v.param = param;
      v.bias = (mode == 6) && p(0.5);
      Instr i = rtltest::vec(v);
      i.w[0] = (i.w[0] & ~(0xFu << 16)) | (mode << 16);
      i.w[6] |= aux << 16;
      i.w[7] = window ? (kw | (kh << 8) | (wys << 16)) : 0;
      const uint32_t ext = (v.o - 1) * v.sso + (v.r - 1) * v.ssr + (kh - 1) * wys + (kw - 1);
      const uint32_t dmax = v.dst + (v.o - 1) * v.dso + (v.r - 1) * v.dsr;
      if (v.src + ext < act_region() && dmax < act_region() &&
          ((mode != 2 && mode != 3) || aux + ext < act_region()))
        return i;
    }
  }

  Instr requant() {
    for (;;) {
      VecArgs v;
      v.o = u(1, 2);
      v.r = u(1, 8);
      v.src = u(0, 150);
      v.dst = u(0, 300);
      v.param = u(0, acc_region() - 3);
      v.sso = u(0, 20);
      v.ssr = u(0, 2);
      v.dso = u(0, 20);
      v.dsr = u(0, 2);
      v.zp = static_cast<int8_t>(u(0, 255));
      v.lo = static_cast<int8_t>(u(0, 255));
      v.hi = static_cast<int8_t>(u(0, 255));
      if (v.lo > v.hi && p(0.8)) std::swap(v.lo, v.hi);
      v.bias = p(0.5);
      v.wrap = p(0.25);
      if (v.wrap) v.lo = v.hi = 0;
      const uint32_t smax = v.src + (v.o - 1) * v.sso + (v.r - 1) * v.ssr;
      const uint32_t dmax = v.dst + (v.o - 1) * v.dso + (v.r - 1) * v.dsr;
      if (smax < acc_region() && dmax < act_region()) return rtltest::vec(v);
    }
  }

  // A faulting instruction of a random kind.
  Instr error() {
    switch (u(0, 9)) {
      case 0: { Instr i; i.w[0] = u(6, 255); return i; }                      // opcode
      case 1: { Instr i = load(); i.w[3] &= 0xFFFF0000u; return i; }           // X = 0
      case 2: { Instr i = load(); i.w[2] = 0x7FFFFFF0u + u(0, 15); return i; } // SP range
      case 3: { Instr i = load(); i.w[1] = kUnmappedVa + u(0, 1000); return i; }
      case 4: { Instr i = store(); i.w[1] = kReadOnlyVa + u(0, 1000); return i; }
      case 5: { Instr i = load(); i.w[1] = kBeyondDramVa + u(0, 1000); return i; }
      case 6: { Instr i = gemm(); i.w[3] = (i.w[3] & 0xFFFF0000u) | 0x3000u; return i; }
      case 7: { Instr i = requant(); i.w[2] = (i.w[2] & 0xFFFF0000u) | 0xFFF0u; return i; }
      case 8: {  // wrap with a clamp bound set, or in a mode without it (LUT, MAXPOOL)
        Instr i = requant();
        i.w[0] |= 1u << 21;
        i.w[6] = u(1, 0xFFFF);
        if (p(0.5)) {
          i.w[6] = 0;
          i.w[0] = (i.w[0] & ~(0xFu << 16) & ~(1u << 20)) | ((p(0.5) ? 1u : 4u) << 16);
          if (((i.w[0] >> 16) & 0xF) == 4) {
            i.w[2] &= 0xFFFF0000u;  // MAXPOOL: no P
            i.w[7] = 1u | (1u << 8);
          } else {
            i.w[2] &= 0xFFFF0000u;  // LUT: table at ACT row 0
          }
        }
        return i;
      }
      default: { Instr i = nop(); i.w[0] |= (1u << 12); return i; }            // reserved
    }
  }

  static uint32_t engine(const Instr& i) {
    switch (static_cast<hw::Opcode>(i.w[0] & 0xFF)) {
      case hw::Opcode::kLoad: return 0;
      case hw::Opcode::kStore: return 2;
      case hw::Opcode::kSync: return (i.w[0] >> 16) & 3;
      default: return 1;
    }
  }

  // A token-chained program: every change of engine is ordered by a push/pop pair, so the
  // result is the same for any implementation that overlaps engines.
  std::vector<Instr> program(bool inject_error) {
    std::vector<Instr> body;
    const uint32_t len = u(3, 24);
    for (uint32_t k = 0; k < len; ++k) {
      switch (u(0, 9)) {
        case 0: case 1: case 2: body.push_back(load()); break;
        case 3: case 4: body.push_back(gemm()); break;
        case 5: case 6: body.push_back(vec()); break;
        case 7: case 8: body.push_back(store()); break;
        default: body.push_back(p(0.5) ? nop() : sync(u(0, 2), 0)); break;
      }
    }
    if (inject_error) body[u(0, len - 1)] = error();
    std::vector<Instr> prog;
    for (const Instr& ins : body) {
      if (!prog.empty()) {
        const uint32_t a = engine(prog.back()), b = engine(ins);
        if ((a == 0 && b == 2) || (a == 2 && b == 0)) prog.push_back(sync(1, 0));
      }
      prog.push_back(ins);
    }
    for (size_t k = 1; k < prog.size(); ++k) {
      const uint32_t a = engine(prog[k - 1]), b = engine(prog[k]);
      if (a == b) continue;
      if (b > a) {
        prog[k - 1].w[0] |= kPushNext;
        prog[k].w[0] |= kPopPrev;
      } else {
        prog[k - 1].w[0] |= kPushPrev;
        prog[k].w[0] |= kPopNext;
      }
    }
    if (inject_error && p(0.3)) prog.push_back(sync(1, kPopPrev));  // deadlock (if reached)
    return prog;
  }

 private:
  std::mt19937 rng_;
  uint32_t n_;
};

std::unique_ptr<sim::Device> make_rtl(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_rtl_device(c, d);
}
std::unique_ptr<sim::Device> make_model(const sim::DeviceConfig& c, std::span<std::byte> d) {
  return sim::make_functional_device(c, d);
}

// Registers that stay precise after an error (architecture.md 1.6).
std::vector<uint32_t> precise_registers() {
  std::vector<uint32_t> regs = {reg::STATUS,     reg::IRQ_STATUS,  reg::ERROR_CODE,
                                reg::ERROR_ADDR, reg::ERROR_QUEUE, reg::ERROR_INSTR};
  for (uint32_t q = 0; q < hw::kNumQueues; ++q) {
    for (uint32_t f : {reg::RING_HEAD(q), reg::RING_TAIL(q), reg::COMPLETED_SEQ(q)}) regs.push_back(f);
  }
  const auto jobs = static_cast<uint32_t>(hw::Counter::kJobs);
  regs.push_back(reg::COUNTER_LO(jobs));
  regs.push_back(reg::COUNTER_HI(jobs));
  return regs;
}

// The instructions a run completed, in a canonical order (queue, offset, words).
std::vector<std::vector<uint32_t>> completed(const std::vector<sim::TraceEvent>& trace) {
  std::vector<std::vector<uint32_t>> out;
  for (const auto& e : trace) {
    std::vector<uint32_t> v = {e.queue, e.cmd_offset};
    v.insert(v.end(), std::begin(e.words), std::end(e.words));
    out.push_back(std::move(v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Registers compared after a clean run: everything but the timing counters.
std::vector<uint32_t> arch_registers() {
  std::vector<uint32_t> regs;
  for (uint32_t off = 0; off <= reg::RESET_COUNT; off += 4) regs.push_back(off);
  for (uint32_t q = 0; q < hw::kNumQueues; ++q) {
    for (uint32_t f : {reg::RING_BASE(q), reg::RING_SIZE(q), reg::RING_HEAD(q),
                       reg::RING_TAIL(q), reg::COMPLETED_SEQ(q)})
      regs.push_back(f);
  }
  for (uint32_t c = 0; c < hw::kNumCounters; ++c) {
    if (hw::kCounterArchitectural[c]) {
      regs.push_back(reg::COUNTER_LO(c));
      regs.push_back(reg::COUNTER_HI(c));
    }
  }
  return regs;
}

struct DeviceRun {
  std::unique_ptr<Bench> bench;
  std::vector<sim::TraceEvent> trace;
};

// Parameters: array dim (every dim built into npu_sim_rtl) and seed shard.
class RtlDiff : public ::testing::TestWithParam<std::tuple<uint32_t, int>> {};

TEST_P(RtlDiff, RandomProgramsMatchFunctionalModel) {
  const uint32_t n = std::get<0>(GetParam());
  const int shard = std::get<1>(GetParam());
  // NPU_RTL_DIFF_SEEDS raises the seeds per shard for a soak (default 12, 8 shards).
  const char* env = std::getenv("NPU_RTL_DIFF_SEEDS");
  const int kSeedsPerShard = env ? std::max(1, std::atoi(env)) : 12;
  uint64_t rtl_cycles = 0, model_cycles = 0;
  for (int s = 0; s < kSeedsPerShard; ++s) {
    const uint32_t seed = static_cast<uint32_t>(shard * kSeedsPerShard + s);
    SCOPED_TRACE("seed " + std::to_string(seed));
    Gen gen(seed, n);
    const bool inject = gen.p(0.33);
    std::vector<std::vector<Instr>> jobs;
    const uint32_t njobs = gen.u(1, 3);
    for (uint32_t j = 0; j < njobs; ++j) jobs.push_back(gen.program(inject && j == njobs - 1));
    std::vector<uint8_t> data(2 * kLoadSpan);
    for (auto& x : data) x = static_cast<uint8_t>(gen.u(0, 255));
    std::vector<uint32_t> queues;
    for (uint32_t j = 0; j < njobs; ++j) queues.push_back(gen.u(0, 3));

    DeviceRun runs[2];
    for (int k = 0; k < 2; ++k) {
      // Shards 6 and 7 run with a 1- and 0-cycle DRAM latency (queue corner cases).
      const uint32_t latency = shard == 6 ? 1 : shard == 7 ? 0 : 64;
      runs[k].bench =
          std::make_unique<Bench>(k == 0 ? make_model : make_rtl, n, kDiffDram, latency);
      Bench& b = *runs[k].bench;
      b.write(kDataVa, data.data(), data.size());
      b.map(kReadOnlyVa, 0x300000, false);
      b.map_raw(kBeyondDramVa, 0x7FFF0003);
      auto& trace = runs[k].trace;
      b.dev().set_trace([&trace](const sim::TraceEvent& e) { trace.push_back(e); });
      b.setup_rings();
      uint32_t off = 0;
      for (uint32_t j = 0; j < njobs; ++j) {
        const uint32_t len = b.put_program(jobs[j], off);
        b.exec(queues[j], kCmdVa + off, len, kPtBase, j);
        b.fence(queues[j], 100 + j);
        off += (len + 255) & ~255u;
      }
      for (uint32_t q = 0; q < hw::kNumQueues; ++q) b.doorbell(q);
      const auto why = b.run_to_idle(20'000'000);
      EXPECT_NE(why, sim::StopReason::kCycleLimit);
    }
    Bench& m = *runs[0].bench;
    Bench& r = *runs[1].bench;
    const bool error_run = m.dev().read_reg(reg::ERROR_CODE) != 0;
    for (uint32_t off : error_run ? precise_registers() : arch_registers()) {
      EXPECT_EQ(r.dev().read_reg(off), m.dev().read_reg(off))
          << "register 0x" << std::hex << off;
    }
    const auto& md = m.dram();
    const auto& rd = r.dram();
    auto mismatch = std::mismatch(md.begin(), md.end(), rd.begin());
    if (!error_run && mismatch.first != md.end()) {
      const size_t at = static_cast<size_t>(mismatch.first - md.begin());
      size_t count = 0, last = at;
      for (size_t i = at; i < md.size(); ++i) {
        if (md[i] != rd[i]) {
          ++count;
          last = i;
        }
      }
      ADD_FAILURE() << "DRAM differs in " << count << " bytes, 0x" << std::hex << at << "..0x"
                    << last << " (model 0x" << static_cast<int>(md[at]) << ", rtl 0x"
                    << static_cast<int>(rd[at]) << ")";
      for (uint32_t j = 0; j < njobs; ++j) {
        for (const Instr& ins : jobs[j]) {
          std::printf("  job %u:", j);
          for (uint32_t w : ins.w) std::printf(" %08x", w);
          std::printf("\n");
        }
      }
    }
    if (!error_run) {
      EXPECT_EQ(completed(runs[0].trace), completed(runs[1].trace));
    }
    model_cycles += m.counter(hw::Counter::kCycles);
    rtl_cycles += r.counter(hw::Counter::kCycles);
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("N=%u shard %d: RTL CYCLES %llu, model-predicted CYCLES %llu (ratio %.3f)\n", n, shard,
              static_cast<unsigned long long>(rtl_cycles),
              static_cast<unsigned long long>(model_cycles),
              rtl_cycles ? static_cast<double>(model_cycles) / static_cast<double>(rtl_cycles) : 0.0);
}

// Directed scenarios the random programs do not reach: ring-level errors, ring register
// rules, reset and recovery, token overflow. Each runs on both devices; registers and DRAM
// must match.
class RtlDiffDirected : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RtlDiffDirected, RingErrorsResetAndTokens) {
  const uint32_t n = GetParam();
  using Scenario = std::function<void(Bench&)>;
  const std::vector<std::pair<const char*, Scenario>> scenarios = {
      {"bad ring opcode", [](Bench& b) {
         b.setup_rings();
         b.fence(1, 4);
         b.push_entry(1, {0x7, 1, 2, 3, 4, 5, 6, 7});
         b.doorbell(1);
         b.run_to_idle();
       }},
      {"bad exec fields", [](Bench& b) {
         b.setup_rings();
         b.push_entry(2, {1, kCmdVa, 40, kPtBase, 0, 0, 0, 0});
         b.doorbell(2);
         b.run_to_idle();
       }},
      {"ignored ring words", [](Bench& b) {
         b.setup_rings();
         uint32_t len = b.put_program({nop()});
         b.push_entry(0, {0xFF01, kCmdVa, len, kPtBase, 9, 1, 2, 3});
         b.push_entry(0, {0xAB02, 77, 1, 1, 1, 1, 1, 1});
         b.doorbell(0);
         b.run_to_idle();
       }},
      {"ring size not a power of two", [](Bench& b) {
         b.setup_rings();
         b.dev().write_reg(reg::RING_SIZE(3), 96);
         b.dev().write_reg(reg::RING_TAIL(3), 32);
         b.run_to_idle();
       }},
      {"ring tail misaligned", [](Bench& b) {
         b.setup_rings();
         b.dev().write_reg(reg::RING_TAIL(0), 40);
         b.run_to_idle();
       }},
      {"ring beyond dram", [](Bench& b) {
         b.setup_rings();
         b.dev().write_reg(reg::RING_BASE(1), 0xFFFFF000);
         b.dev().write_reg(reg::RING_SIZE(1), 0x1000);
         b.dev().write_reg(reg::RING_TAIL(1), 64);
         b.run_to_idle();
       }},
      {"ring base write empties ring", [](Bench& b) {
         b.setup_rings();
         b.fence(0, 5);
         b.doorbell(0);
         b.dev().write_reg(reg::RING_BASE(0), kRingBase);
         b.run_to_idle();
       }},
      {"token overflow", [n](Bench& b) {
         b.setup_rings();
         std::vector<Instr> prog(256, load({.x = 1, .xs = n, .flags = kPushNext}));
         b.run_program(prog);
       }},
      {"pt beyond dram", [n](Bench& b) {
         b.setup_rings();
         uint32_t len = b.put_program({load({.x = 1, .xs = n})});
         b.exec(0, kCmdVa, len, 0xFFFFFF00);
         b.doorbell(0);
         b.run_to_idle();
       }},
      {"store rewrites a later instruction of its own job", [n](Bench& b) {
         b.setup_rings();
         // Instruction 3 is a NOP in DRAM; instruction 2 overwrites it (in its own buffered
         // block) with the LOAD kept at data VA + 0x100, which then runs. Fetch waits for the
         // STORE (the hardware orders fetch after overlapping STOREs); tokens order the
         // scratchpad rows between the engines (via COMPUTE).
         Instr ld = load({.va = kDataVa, .sp_row = 7, .x = 2, .xs = n, .flags = kPushNext});
         for (int k = 0; k < 8; ++k) b.w32(kDataVa + 0x100 + 4 * k, ld.w[k]);
         const uint32_t rows = 32 / n > 0 ? 32 / n : 1;
         b.run_program({load({.va = kDataVa + 0x100, .sp_row = 20, .x = rows, .xs = n,
                              .flags = kPushNext}),
                        sync(1, kPopPrev | kPushNext),
                        store({.va = kCmdVa + 3 * 32, .sp_row = 20, .x = rows, .xs = n,
                               .flags = kPopPrev}),
                        nop(), nop(kPopPrev | kPushNext),
                        store({.va = kDataVa + 0x200, .sp_row = 7, .x = 2, .xs = n,
                               .flags = kPopPrev})});
         EXPECT_EQ(b.r32(kDataVa + 0x200), b.r32(kDataVa)) << "the rewritten LOAD did not run";
       }},
      {"strided store rewrites a later instruction of its own job", [n](Bench& b) {
         b.setup_rings();
         // As above, but the rewriting STORE moves 4 bytes per row with a 4-byte DRAM stride
         // (a strided line, not one contiguous copy), so the rows land one by one inside the
         // fetched block.
         Instr ld = load({.va = kDataVa, .sp_row = 7, .x = 2, .xs = n, .flags = kPushNext});
         for (int k = 0; k < 8; ++k) b.w32(kDataVa + 0x100 + 4 * k, ld.w[k]);
         b.run_program({load({.va = kDataVa + 0x100, .sp_row = 20, .x = 8, .xs = 4, .row_elems = 4,
                              .flags = kPushNext}),
                        sync(1, kPopPrev | kPushNext),
                        store({.va = kCmdVa + 3 * 32, .sp_row = 20, .x = 8, .xs = 4, .row_elems = 4,
                               .flags = kPopPrev}),
                        nop(), nop(kPopPrev | kPushNext),
                        store({.va = kDataVa + 0x200, .sp_row = 7, .x = 2, .xs = n,
                               .flags = kPopPrev})});
         EXPECT_EQ(b.r32(kDataVa + 0x200), b.r32(kDataVa)) << "the rewritten LOAD did not run";
       }},
      {"store remaps a page mid-job (ordered by a token path)", [n](Bench& b) {
         b.setup_rings();
         // A STORE writes a new PTE for data page 5 (pointing at data page 6), then a LOAD
         // reads through it; the old translation must not be used. Writing the job's page
         // table is defined only with a token path from the STORE to the LOAD (architecture.md
         // 1.4): STORE -> COMPUTE -> LOAD.
         const uint32_t page5 = kDataVa + 5 * kPageBytes, page6 = kDataVa + 6 * kPageBytes;
         b.w32(page6, 0x66666666);
         b.w32(page5, 0x55555555);
         std::vector<uint32_t> pte_row(n / 4 > 0 ? n / 4 : 1, 0);
         pte_row[0] = (page6 & 0xFFFF0000u) | 3u;
         b.write(kDataVa + 0x300, pte_row.data(), 4 * pte_row.size());
         b.run_program({load({.va = page5, .sp_row = 1, .x = 1, .xs = n}),
                        load({.va = kDataVa + 0x300, .sp_row = 2, .x = 1, .xs = n,
                              .flags = kPushNext}),
                        sync(1, kPopPrev | kPushNext),
                        store({.va = kPtBase + 4 * (page5 >> 16), .sp_row = 2, .x = 1,
                               .row_elems = 4, .flags = kPopPrev | kPushPrev}),
                        sync(1, kPopNext | kPushPrev),
                        load({.va = page5, .sp_row = 3, .x = 1, .xs = n, .flags = kPopNext | kPushNext}),
                        sync(1, kPopPrev | kPushNext),
                        store({.va = kDataVa + 0x400, .sp_row = 1, .x = 1, .flags = kPopPrev}),
                        store({.va = kDataVa + 0x500, .sp_row = 3, .x = 1})});
         EXPECT_EQ(b.r32(kDataVa + 0x400), 0x55555555u);
         EXPECT_EQ(b.r32(kDataVa + 0x500), 0x66666666u) << "the old translation was used";
       }},
      {"LUT output rows overwrite its own table", [n](Bench& b) {
         b.setup_rings();
         // Input rows 0..3, table rows 4.., and the output goes over the first table rows:
         // the table is read before any output row is written, so later rows still look up
         // the original entries.
         const uint32_t table_rows = 256 / n;
         Instr lut = vec({.src = 0, .dst = 4, .param = 4, .r = 4, .o = 1, .ssr = 1, .dsr = 1,
                          .flags = kPopPrev | kPushNext});
         lut.w[0] |= 1u << 16;  // mode LUT
         b.run_program({load({.va = kDataVa, .x = 4 + table_rows, .xs = n, .flags = kPushNext}), lut,
                        store({.va = kDataVa + 0x2000, .x = 4 + table_rows, .xs = n, .flags = kPopPrev})});
       }},
      {"reset and recover", [n](Bench& b) {
         b.setup_rings();
         Instr bad;
         bad.w[0] = 0x55;
         b.run_program({load({.x = 3, .xs = n}), bad});
         b.dev().write_reg(reg::CONTROL, hw::bits::CONTROL_RESET);
         b.reset_tails();
         b.setup_rings();
         b.run_program({store({.va = kDataVa, .x = 3, .xs = n, .flags = kPushPrev}),
                        sync(1, kPopNext | kPushPrev),
                        load({.va = kDataVa + 64, .x = 1, .flags = kPopNext})}, 3);
       }},
  };
  for (const auto& [name, scenario] : scenarios) {
    SCOPED_TRACE(name);
    Bench m(make_model, n, kDiffDram), r(make_rtl, n, kDiffDram);
    for (Bench* b : {&m, &r}) {
      std::vector<uint8_t> data(4096);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
      b->write(kDataVa, data.data(), data.size());
      scenario(*b);
    }
    const bool error_run = m.dev().read_reg(reg::ERROR_CODE) != 0;
    for (uint32_t off : error_run ? precise_registers() : arch_registers()) {
      EXPECT_EQ(r.dev().read_reg(off), m.dev().read_reg(off)) << "register 0x" << std::hex << off;
    }
    if (!error_run) {
      EXPECT_TRUE(m.dram() == r.dram());
    }
  }
}

// The VEC wrap bit (ISA 1.2, architecture.md 1.4) on both devices against integer arithmetic
// computed here: uint8 Add, Sub and Mul on codes shifted by -128 (the compiler's lowering of
// ONNX integer arithmetic: multipliers 1/±1, shift 0, za = zb = zp = -128) and a REQUANT
// whose exact results leave the int8 range, then the illegal uses of the bit.
TEST_P(RtlDiffDirected, VecWrapIsIntegerArithmetic) {
  const uint32_t n = GetParam();
  constexpr uint32_t kRows = 6;
  const uint32_t lanes = kRows * n;
  std::mt19937 rng(n);
  std::vector<uint8_t> ua(lanes), ub(lanes);
  for (uint32_t k = 0; k < lanes; ++k) {
    ua[k] = static_cast<uint8_t>(rng());
    ub[k] = static_cast<uint8_t>(rng());
  }
  ua[0] = ub[0] = 255;  // sum 510, product 65025
  ua[1] = 0;            // difference -1
  ub[1] = 1;
  std::vector<int32_t> acc_src(lanes), rq_par(3 * n);
  for (auto& v : acc_src) v = static_cast<int32_t>(rng() % 2000001) - 1000000;
  for (uint32_t c = 0; c < n; ++c) {
    rq_par[c] = static_cast<int32_t>(rng() % 2001) - 1000;  // bias
    rq_par[n + c] = static_cast<int32_t>(rng() % 7) + 1;    // multiplier
    rq_par[2 * n + c] = static_cast<int32_t>(c % 9);        // shift 0..8
  }
  // Parameter rows: P0 add (m0 1, m1 1), P1 sub (m1 -1), P2 mul; lanes m0, m1, s, za, zb.
  std::vector<int32_t> params(3 * n, 0);
  for (uint32_t r = 0; r < 3; ++r) {
    params[r * n + 0] = 1;
    params[r * n + 1] = r == 0 ? 1 : r == 1 ? -1 : 0;
    params[r * n + 3] = params[r * n + 4] = -128;
  }
  const uint32_t a_va = kDataVa, b_va = kDataVa + 0x1000, par_va = kDataVa + 0x2000, src_va = kDataVa + 0x3000,
                 rqp_va = kDataVa + 0x8000, out_va = kDataVa + 0x10000;
  auto wrap_op = [&](hw::VecMode mode, uint32_t P, uint32_t dst, uint32_t flags) {
    Instr i = vec({.src = 0, .dst = dst, .param = P, .r = kRows, .zp = -128, .lo = 0, .hi = 0, .ssr = 1, .dsr = 1,
                   .wrap = true, .flags = flags});
    i.w[0] |= static_cast<uint32_t>(mode) << 16;
    i.w[6] |= 64u << 16;  // b at ACT row 64
    return i;
  };
  const std::vector<Instr> prog = {
      load({.va = a_va, .sp_row = 0, .x = kRows, .xs = n}),
      load({.va = b_va, .sp_row = 64, .x = kRows, .xs = n}),
      load({.sp = hw::Scratchpad::kAcc, .va = par_va, .sp_row = 0, .x = 3, .xs = 4 * n}),
      load({.sp = hw::Scratchpad::kAcc, .va = src_va, .sp_row = 8, .x = kRows, .xs = 4 * n}),
      load({.sp = hw::Scratchpad::kAcc, .va = rqp_va, .sp_row = 4, .x = 3, .xs = 4 * n, .flags = kPushNext}),
      wrap_op(hw::VecMode::kAdd, 0, 128, kPopPrev),
      wrap_op(hw::VecMode::kAdd, 1, 128 + kRows, 0),
      wrap_op(hw::VecMode::kMul, 2, 128 + 2 * kRows, 0),
      vec({.src = 8, .dst = 128 + 3 * kRows, .param = 4, .r = kRows, .zp = 5, .lo = 0, .hi = 0, .ssr = 1, .dsr = 1,
           .bias = true, .wrap = true, .flags = kPushNext}),
      store({.va = out_va, .sp_row = 128, .x = 4 * kRows, .xs = n, .flags = kPopPrev}),
  };
  // Expected bytes: the uint8 results' codes (result - 128) and REQUANT's low byte.
  std::vector<uint8_t> want(4 * lanes);
  size_t outside_int8 = 0;
  for (uint32_t k = 0; k < lanes; ++k) {
    const int32_t sum = ua[k] + ub[k], diff = ua[k] - ub[k], prod = ua[k] * ub[k];
    want[k] = static_cast<uint8_t>(sum - 128);
    want[lanes + k] = static_cast<uint8_t>(diff - 128);
    want[2 * lanes + k] = static_cast<uint8_t>(prod - 128);
    const uint32_t c = k % n, s = static_cast<uint32_t>(rq_par[2 * n + c]);
    const int64_t t = int64_t{acc_src[k] + rq_par[c]} * rq_par[n + c];
    const int64_t r = s ? (t + (int64_t{1} << (s - 1))) >> s : t;  // floor: arithmetic shift
    want[3 * lanes + k] = static_cast<uint8_t>(r + 5);
    outside_int8 += static_cast<size_t>((sum - 128 > 127) + (diff - 128 < -128) + (prod - 128 > 127) +
                                        (r + 5 < -128 || r + 5 > 127));
  }
  // The data must reach outside int8, where wrap and clamp differ, or the test proves nothing.
  ASSERT_GT(outside_int8, lanes);
  for (auto factory : {make_model, make_rtl}) {
    Bench b(factory, n, kDiffDram);
    SCOPED_TRACE(factory == make_model ? "functional model" : "rtl");
    std::vector<int8_t> codes_a(lanes), codes_b(lanes);
    for (uint32_t k = 0; k < lanes; ++k) {
      codes_a[k] = static_cast<int8_t>(ua[k] - 128);
      codes_b[k] = static_cast<int8_t>(ub[k] - 128);
    }
    b.write(a_va, codes_a.data(), lanes);
    b.write(b_va, codes_b.data(), lanes);
    b.write(par_va, params.data(), 4 * params.size());
    b.write(src_va, acc_src.data(), 4 * acc_src.size());
    b.write(rqp_va, rq_par.data(), 4 * rq_par.size());
    b.setup_rings();
    b.run_program(prog);
    ASSERT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
    std::vector<uint8_t> got(4 * lanes);
    b.read(out_va, got.data(), got.size());
    for (uint32_t k = 0; k < got.size(); ++k) {
      static const char* what[] = {"uint8 add", "uint8 sub", "uint8 mul", "requant"};
      ASSERT_EQ(static_cast<int>(got[k]), static_cast<int>(want[k])) << what[k / lanes] << ", lane " << k % lanes;
    }
  }

  // Illegal: wrap with a clamp bound set, and in LUT, MAXPOOL, AVGPOOL and DWCONV.
  struct Illegal {
    const char* name;
    uint32_t mode;
    uint32_t w6, w7;
  };
  for (const Illegal& bad : {Illegal{"ADD, clamp low 1", 2, (64u << 16) | 1u, 0},
                             Illegal{"REQUANT, clamp high 1", 0, 1u << 8, 0}, Illegal{"LUT", 1, 0, 0},
                             Illegal{"MAXPOOL", 4, 0, 0x101}, Illegal{"AVGPOOL", 5, 0, 0x101},
                             Illegal{"DWCONV", 6, 0, 0x101}}) {
    SCOPED_TRACE(bad.name);
    Instr i = vec({.src = 0, .dst = 128, .param = bad.mode == 4 ? 0u : 8u, .r = 2, .lo = 0, .hi = 0, .ssr = 1,
                   .dsr = 1, .wrap = true});
    i.w[0] |= bad.mode << 16;
    i.w[6] = bad.w6;
    i.w[7] = bad.w7;
    uint32_t codes[2];
    for (int k = 0; k < 2; ++k) {
      Bench b(k == 0 ? make_model : make_rtl, n, kDiffDram);
      b.setup_rings();
      b.run_program({nop(), i});
      codes[k] = b.dev().read_reg(reg::ERROR_CODE);
      EXPECT_EQ(b.dev().read_reg(reg::ERROR_INSTR), 32u);
    }
    EXPECT_EQ(codes[0], static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
    EXPECT_EQ(codes[1], codes[0]);
    // The same instruction without the bit is legal (the bit alone makes it illegal).
    i.w[0] &= ~(1u << 21);
    if (bad.w6 == 0) {
      Bench b(make_rtl, n, kDiffDram);
      b.setup_rings();
      b.run_program({nop(), i});
      EXPECT_EQ(b.dev().read_reg(reg::ERROR_CODE), 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dims, RtlDiffDirected,
                         ::testing::ValuesIn(sim::rtl_supported_array_dims()),
                         [](const auto& param_info) {
                           return std::string("N") + std::to_string(param_info.param);
                         });

INSTANTIATE_TEST_SUITE_P(
    Shards, RtlDiff,
    ::testing::Combine(::testing::ValuesIn(sim::rtl_supported_array_dims()), ::testing::Range(0, 8)),
    [](const auto& param_info) {
      char name[32];
      std::snprintf(name, sizeof(name), "N%u_shard%d", std::get<0>(param_info.param),
                    std::get<1>(param_info.param));
      return std::string(name);
    });

}  // namespace
}  // namespace npu::rtltest
