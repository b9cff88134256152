// Command-stream builder: collects instructions with their engine, inserts the dependency
// tokens that order them, and records relocations for DRAM addresses.
//
// Ordering policy (first version): every instruction waits for the previous instruction
// of a different engine, through the VTA token channels; a LOAD after a STORE (or the
// reverse) is routed through a COMPUTE NOP because those engines share no channel.
// This is always correct; overlap (double buffering) comes from a finer dependency
// analysis that can replace `order_after_previous` without touching the emitters.
#pragma once

#include <cstdint>
#include <vector>

#include "model_image_generated.h"
#include "npu/sim/isa.h"

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

  void add(isa::Engine engine, isa::Words w) {
    if (!words_.empty() && engines_.back() != engine) order_after_previous(engine, w);
    words_.push_back(w);
    engines_.push_back(engine);
  }

  void order_after_previous(isa::Engine engine, isa::Words& w) {
    const isa::Engine prev = engines_.back();
    isa::Words& p = words_.back();
    using E = isa::Engine;
    if (prev == E::kLoad && engine == E::kCompute) { p[0] |= kPushNext; w[0] |= kPopPrev; return; }
    if (prev == E::kCompute && engine == E::kLoad) { p[0] |= kPushPrev; w[0] |= kPopNext; return; }
    if (prev == E::kCompute && engine == E::kStore) { p[0] |= kPushNext; w[0] |= kPopPrev; return; }
    if (prev == E::kStore && engine == E::kCompute) { p[0] |= kPushPrev; w[0] |= kPopNext; return; }
    // LOAD <-> STORE: no shared channel; relay through a COMPUTE NOP.
    isa::Words nop = isa::encode(isa::Sync{E::kCompute, {}});
    if (prev == E::kStore) {  // STORE -> NOP -> LOAD
      p[0] |= kPushPrev;
      nop[0] |= kPopNext | kPushPrev;
      w[0] |= kPopNext;
    } else {  // LOAD -> NOP -> STORE
      p[0] |= kPushNext;
      nop[0] |= kPopPrev | kPushNext;
      w[0] |= kPopPrev;
    }
    words_.push_back(nop);
    engines_.push_back(E::kCompute);
  }

  std::vector<isa::Words> words_;
  std::vector<isa::Engine> engines_;
  std::vector<PendingRelocation> relocations_;
};

}  // namespace npu::compiler
