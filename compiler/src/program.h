// Command-stream builder: collects instructions with their engine, inserts the dependency
// tokens that order them, and records relocations for DRAM addresses.
//
// Ordering policy: the engines run concurrently (architecture.md 1.4), so every pair of
// instructions of different engines that touch the same scratchpad rows (one of them
// writing) is ordered by a token path, and nothing else is. Each instruction's scratchpad
// footprint (rows read and written, as bounding intervals per scratchpad) is compared with
// the earlier instructions of the other engines that it is not already known to follow; it
// waits for the latest conflicting one through the VTA channel between the two engines (the
// producer gets the push, the new instruction the pop). LOAD <-> STORE share no channel: the
// wait is relayed through a COMPUTE SYNC. DRAM hazards between LOAD and STORE are ordered by
// the hardware and need no token. Emitters that alternate scratchpad buffers (conv) thereby
// get LOAD/COMPUTE/STORE overlap without naming any dependency themselves.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "model_image_generated.h"
#include "npu/hw/isa.h"

namespace npu::compiler {

struct PendingRelocation {
  uint32_t instr = 0;  // instruction index
  uint32_t word = 1;   // word within the instruction
  image::BufferKind buffer = image::BufferKind::Activations;
  uint32_t offset = 0;
};

class Program {
 public:
  void load(isa::Load in, image::BufferKind buffer, uint32_t offset) {
    in.va = offset;
    add(isa::Engine::kLoad, isa::encode(in));
    relocations_.push_back({last(), 1, buffer, offset});
  }
  void store(isa::Store in, image::BufferKind buffer, uint32_t offset) {
    in.va = offset;
    add(isa::Engine::kStore, isa::encode(in));
    relocations_.push_back({last(), 1, buffer, offset});
  }
  void gemm(const isa::Gemm& in) { add(isa::Engine::kCompute, isa::encode(in)); }
  void vec(const isa::VecRequant& in) { add(isa::Engine::kCompute, isa::encode(in)); }
  // A COMPUTE SYNC without tokens: does nothing (keeps a stream non-empty).
  void nop() { add(isa::Engine::kCompute, isa::encode(isa::Sync{})); }
  // A VEC instruction whose mode-specific fields the caller encoded itself.
  void vec_words(const isa::Words& w) { add(isa::Engine::kCompute, w); }

  uint32_t size() const { return static_cast<uint32_t>(words_.size()); }
  const std::vector<isa::Words>& words() const { return words_; }
  const std::vector<PendingRelocation>& relocations() const { return relocations_; }

 private:
  uint32_t last() const { return size() - 1; }

  static constexpr uint32_t kPopPrev = 1u << 8, kPopNext = 1u << 9;
  static constexpr uint32_t kPushPrev = 1u << 10, kPushNext = 1u << 11;

  // Rows [lo, hi) of one scratchpad (0 ACT, 1 WGT, 2 ACC).
  struct Rows {
    uint32_t sp = 0;
    uint64_t lo = 0, hi = 0;
  };
  struct Footprint {
    std::array<Rows, 4> reads{};
    uint32_t nreads = 0;
    std::array<Rows, 2> writes{};
    uint32_t nwrites = 0;
    void read(uint32_t sp, uint64_t lo, uint64_t hi) { reads[nreads++] = {sp, lo, hi}; }
    void write(uint32_t sp, uint64_t lo, uint64_t hi) { writes[nwrites++] = {sp, lo, hi}; }
  };
  static bool overlaps(const Rows& a, const Rows& b) { return a.sp == b.sp && a.lo < b.hi && b.lo < a.hi; }
  // One of the two writes what the other touches.
  static bool conflict(const Footprint& a, const Footprint& b) {
    for (uint32_t i = 0; i < a.nwrites; ++i) {
      for (uint32_t j = 0; j < b.nreads; ++j) if (overlaps(a.writes[i], b.reads[j])) return true;
      for (uint32_t j = 0; j < b.nwrites; ++j) if (overlaps(a.writes[i], b.writes[j])) return true;
    }
    for (uint32_t i = 0; i < b.nwrites; ++i)
      for (uint32_t j = 0; j < a.nreads; ++j) if (overlaps(b.writes[i], a.reads[j])) return true;
    return false;
  }
  static uint32_t f(uint32_t w, int lo, int bits) { return (w >> lo) & ((1u << bits) - 1); }

  // Bounding scratchpad rows an instruction reads and writes (the ranges SP_RANGE checks).
  // WGT rows of a GEMM weight tile depend on the array dim, unknown here: tile t is taken as
  // rows [t * smallest N, (t + 1) * largest N), a superset at every dim; likewise a LUT table
  // as 256 / smallest N rows (a wide LUT's ⌈514 / smallest N⌉). A wide row (ISA 1.4) covers
  // two ACT rows: a wide LOAD/STORE two per step, a wide operand its address + 1.
  static Footprint footprint(const isa::Words& w) {
    constexpr uint64_t kMinN = *std::min_element(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end());
    constexpr uint64_t kMaxN = *std::max_element(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end());
    Footprint fp;
    const uint32_t op = w[0] & 0xFF;
    if (op == static_cast<uint32_t>(hw::Opcode::kLoad) || op == static_cast<uint32_t>(hw::Opcode::kStore)) {
      const uint64_t X = f(w[3], 0, 16), Y = f(w[3], 16, 16), Z = f(w[4], 0, 16);
      const uint64_t Xp = X + f(w[4], 16, 4) + f(w[4], 20, 4), Yp = Y + f(w[4], 24, 4) + f(w[4], 28, 4);
      const uint64_t step = (w[0] & isa::kDmaWideBit) ? 2 : 1;
      if (op == static_cast<uint32_t>(hw::Opcode::kLoad)) fp.write(f(w[0], 16, 2), w[2], w[2] + Z * Yp * Xp * step);
      else fp.read(f(w[0], 16, 2), w[2], w[2] + Z * Y * X * step);
    } else if (op == static_cast<uint32_t>(hw::Opcode::kGemm)) {
      const uint64_t o1 = f(w[3], 0, 16) - 1, i1 = f(w[3], 16, 16) - 1, r1 = f(w[2], 16, 16) - 1;
      const uint64_t act = f(w[1], 0, 16), wgt = f(w[1], 16, 16), acc = f(w[2], 0, 16);
      fp.read(0, act, act + o1 * f(w[4], 0, 16) + i1 * f(w[4], 16, 16) + r1 * f(w[5], 0, 16) + 1 +
                          ((w[0] & isa::kGemmWideBit) ? 1 : 0));
      fp.read(1, wgt * kMinN, (wgt + o1 * f(w[7], 0, 16) + i1 * f(w[7], 16, 16) + 1) * kMaxN);
      const uint64_t acc_hi = acc + o1 * f(w[5], 16, 16) + i1 * f(w[6], 0, 16) + r1 * f(w[6], 16, 16) + 1;
      fp.read(2, acc, acc_hi);
      fp.write(2, acc, acc_hi);
    } else if (op == static_cast<uint32_t>(hw::Opcode::kVec) &&
               f(w[0], 16, 4) == static_cast<uint32_t>(hw::VecMode::kSoftmax)) {
      // SOFTMAX: its segments in ACT, the int32 table in ACC (no window: w7 holds shift/tail).
      const uint64_t o1 = f(w[3], 0, 16) - 1, r1 = f(w[2], 16, 16) - 1;
      const uint64_t src = f(w[1], 0, 16), dst = f(w[1], 16, 16), par = f(w[2], 0, 16);
      fp.read(0, src, src + o1 * f(w[4], 0, 16) + r1 * f(w[4], 16, 16) + 1);
      fp.read(2, par, par + 256 / kMinN);
      fp.write(0, dst, dst + o1 * f(w[5], 0, 16) + r1 * f(w[5], 16, 16) + 1);
    } else if (op == static_cast<uint32_t>(hw::Opcode::kVec)) {
      const uint32_t mode = f(w[0], 16, 4);
      const bool window = mode >= static_cast<uint32_t>(hw::VecMode::kMaxpool);
      const uint64_t kw = window ? f(w[7], 0, 8) : 1, kh = window ? f(w[7], 8, 8) : 1;
      const uint64_t o1 = f(w[3], 0, 16) - 1, r1 = f(w[2], 16, 16) - 1;
      const bool wide_src = w[0] & isa::kVecWideSrcBit, wide_dst = w[0] & isa::kVecWideDstBit;
      // (a wide source's window elements lie two rows apart and end one row further)
      const uint64_t ext = o1 * f(w[4], 0, 16) + r1 * f(w[4], 16, 16) + (kh - 1) * f(w[7], 16, 16) +
                           (wide_src ? 2 * (kw - 1) + 1 : kw - 1);
      const uint64_t src = f(w[1], 0, 16), dst = f(w[1], 16, 16), par = f(w[2], 0, 16), aux = f(w[6], 16, 16);
      const auto m = static_cast<hw::VecMode>(mode);
      fp.read(m == hw::VecMode::kRequant ? 2 : 0, src, src + ext + 1);
      if (m == hw::VecMode::kAdd || m == hw::VecMode::kMul) fp.read(0, aux, aux + ext + 1);
      if (m == hw::VecMode::kDwconv) fp.read(1, aux, aux + kh * kw);
      if (m == hw::VecMode::kRequant || m == hw::VecMode::kDwconv) fp.read(2, par, par + 3);
      else if (m == hw::VecMode::kLut) fp.read(0, par, par + (wide_src ? isa::wide_lut_rows(kMinN) : 256 / kMinN));
      else if (m != hw::VecMode::kMaxpool) fp.read(2, par, par + 1);
      fp.write(0, dst, dst + o1 * f(w[5], 0, 16) + r1 * f(w[5], 16, 16) + 1 + (wide_dst ? 1 : 0));
    }
    return fp;
  }

  struct Emitted {
    isa::Engine engine;
    Footprint fp;
    std::array<uint32_t, 3> after;  // per engine: instructions of it this one is ordered after
  };

  // Conflicts are looked for among this many latest instructions of an engine; anything older
  // is waited for wholesale. This keeps lowering linear on long programs, and bounds the
  // tokens outstanding on a channel: every pushing producer was among the kWindow latest of
  // its engine when its consumer was emitted, so at most kWindow pushes are ever unpopped.
  static constexpr uint32_t kWindow = 64;
  static_assert(kWindow < hw::kMaxTokens, "tokens outstanding on a channel must stay below MAX_TOKENS");

  void add(isa::Engine engine, isa::Words w) {
    using E = isa::Engine;
    const Footprint fp = footprint(w);
    const auto y = static_cast<size_t>(engine);
    std::array<uint32_t, 3> after = next_after_[y];
    // The latest conflicting instruction of each other engine (as a count: 0 = none).
    std::array<uint32_t, 3> need{};
    for (size_t x = 0; x < 3; ++x) {
      if (x == y) continue;
      const auto& list = by_engine_[x];
      const auto count = static_cast<uint32_t>(list.size());
      const uint32_t floor = std::max(after[x], count > kWindow ? count - kWindow : 0u);
      for (uint32_t k = count; k > floor; --k) {
        if (conflict(emitted_[list[k - 1]].fp, fp)) {
          need[x] = k;
          break;
        }
      }
      if (need[x] == 0 && floor > after[x]) need[x] = floor;  // beyond the window: wait for all
    }
    const auto dma_other = static_cast<size_t>(engine == E::kLoad ? E::kStore : E::kLoad);
    if (engine != E::kCompute && need[dma_other] > 0) {
      // LOAD <-> STORE: relay through a COMPUTE SYNC, which also follows every COMPUTE so far.
      isa::Words relay = isa::encode(isa::Sync{E::kCompute, {}});
      if (need[dma_other] > next_after_[1][dma_other])  // else COMPUTE already follows it
        relay[0] |= wait_for(E::kCompute, static_cast<E>(dma_other), need[dma_other]);
      append(E::kCompute, relay, Footprint{});
      need[1] = static_cast<uint32_t>(by_engine_[1].size());
      need[dma_other] = 0;
    }
    for (size_t x = 0; x < 3; ++x)
      if (need[x] > 0) w[0] |= wait_for(engine, static_cast<E>(x), need[x]);
    append(engine, w, fp);
  }

  // Makes the next instruction of `consumer` wait for the first `count` instructions of
  // `producer`: the latest of them pushes, the consumer pops. Returns the pop bit.
  uint32_t wait_for(isa::Engine consumer, isa::Engine producer, uint32_t count) {
    const auto y = static_cast<size_t>(consumer), x = static_cast<size_t>(producer);
    const uint32_t instr = by_engine_[x][count - 1];
    // Producer before consumer in the engine order L, C, S: push_next / pop_prev.
    const bool forward = x < y;
    words_[instr][0] |= forward ? kPushNext : kPushPrev;
    for (size_t z = 0; z < 3; ++z)
      next_after_[y][z] = std::max(next_after_[y][z], emitted_[instr].after[z]);
    next_after_[y][x] = std::max(next_after_[y][x], count);
    return forward ? kPopPrev : kPopNext;
  }

  void append(isa::Engine engine, const isa::Words& w, const Footprint& fp) {
    const auto y = static_cast<size_t>(engine);
    std::array<uint32_t, 3> after = next_after_[y];
    after[y] = static_cast<uint32_t>(by_engine_[y].size());
    emitted_.push_back({engine, fp, after});
    by_engine_[y].push_back(size());
    words_.push_back(w);
    engines_.push_back(engine);
  }

  std::vector<Emitted> emitted_;
  std::array<std::vector<uint32_t>, 3> by_engine_;     // instruction indices per engine
  std::array<std::array<uint32_t, 3>, 3> next_after_{};  // per engine: what its next one follows
  std::vector<isa::Words> words_;
  std::vector<isa::Engine> engines_;
  std::vector<PendingRelocation> relocations_;
};

}  // namespace npu::compiler
