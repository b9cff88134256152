// Encoders and field accessors for the NPU instruction set and ring entries
// (docs/architecture.md 1.3-1.4). Header-only; used by the compiler, the functional model,
// the program generator of npu-sim-diff, npu-smi's self-test and the tests.
// All functions are pure and thread-safe.
#pragma once

#include <array>
#include <cstdint>

#include "npu/hw/config.h"

namespace npu::isa {

using Words = std::array<uint32_t, 8>;

enum class Engine : uint8_t { kLoad = 0, kCompute = 1, kStore = 2 };

struct Tokens {
  bool pop_prev = false;
  bool pop_next = false;
  bool push_prev = false;
  bool push_next = false;
};

// Wide values (ISA 1.4, architecture.md 1.4.3): an int16 row of N elements in two
// consecutive ACT rows. LOAD/STORE w0 bit 18 (ACT only), GEMM w0 bit 17 (wide activation
// operands), VEC w0 bit 22 (wide sources: DWCONV, LUT) and bit 23 (wide destinations:
// REQUANT, DWCONV, LUT with a wide source).
inline constexpr uint32_t kDmaWideBit = 1u << 18;
inline constexpr uint32_t kGemmWideBit = 1u << 17;
inline constexpr uint32_t kVecWideSrcBit = 1u << 22;
inline constexpr uint32_t kVecWideDstBit = 1u << 23;
// A wide LUT's table: 257 int16 entries (514 bytes) from its parameter row.
inline constexpr uint32_t kWideLutEntries = 257;
constexpr uint32_t wide_lut_rows(uint32_t n) { return (2 * kWideLutEntries + n - 1) / n; }

struct Load {
  bool wide = false;  // kDmaWideBit: row_elems int16 elements per (z, y, x), two ACT rows each
  hw::Scratchpad sp = hw::Scratchpad::kAct;
  uint32_t row_elems = 0;  // 0 means N
  uint32_t va = 0;
  uint32_t sp_base = 0;
  uint16_t x = 1, y = 1, z = 1;
  uint8_t pad_l = 0, pad_r = 0, pad_t = 0, pad_b = 0;
  uint32_t x_stride = 0, y_stride = 0, z_stride = 0;
  Tokens tokens;
};

struct Store {
  bool wide = false;  // kDmaWideBit, as Load
  hw::Scratchpad sp = hw::Scratchpad::kAct;
  uint32_t row_elems = 0;
  uint32_t va = 0;
  uint32_t sp_base = 0;
  uint16_t x = 1, y = 1, z = 1;
  uint32_t x_stride = 0, y_stride = 0, z_stride = 0;
  Tokens tokens;
};

struct Gemm {
  bool clear = false;
  bool wide = false;  // kGemmWideBit: activation operands are wide rows
  uint16_t act = 0, wgt = 0, acc = 0;
  uint16_t r = 1, o = 1, i = 1;
  uint16_t act_so = 0, act_si = 0, act_sr = 0;
  uint16_t acc_so = 0, acc_si = 0, acc_sr = 0;
  uint16_t wgt_so = 0, wgt_si = 0;
  Tokens tokens;
};

// VEC w0 bit 21, `wrap` (ISA 1.2): REQUANT, ADD and MUL write the low byte of their result
// (integer modular arithmetic) instead of clamping it; clamp low and high must then be 0.
inline constexpr uint32_t kVecWrapBit = 1u << 21;

struct VecRequant {
  bool bias = false;
  bool wrap = false;  // kVecWrapBit; needs clamp_lo = clamp_hi = 0
  bool wide_dst = false;  // kVecWideDstBit: wide results (zp and clamps refined by 256)
  uint16_t src = 0, dst = 0, param = 0;
  uint16_t r = 1, o = 1;
  int8_t zero_point = 0;
  uint16_t src_so = 0, src_sr = 0, dst_so = 0, dst_sr = 0;
  int8_t clamp_lo = -128, clamp_hi = 127;
  Tokens tokens;
};

// VEC SOFTMAX (ISA 1.3, architecture.md 1.4.1): O segments of R ACT rows each, a segment
// being one vector of ·N + tail int8 elements (tail lanes of its last row; 0 = N). Per
// segment: m = max, e = table[x - m + 255] (256 int32 entries in ACC rows P .. P + 256/N - 1),
// S = Σ e (int64), q = S > 0 ? floor(2^62 / S) : 0, y = clamp(rq(e·q, shift) + zp).
struct VecSoftmax {
  uint16_t src = 0, dst = 0, table = 0;
  uint16_t r = 1, o = 1;
  int8_t zero_point = 0;
  uint16_t src_so = 0, src_sr = 1, dst_so = 0, dst_sr = 1;
  int8_t clamp_lo = -128, clamp_hi = 127;
  uint8_t shift = 0;  // 0..63
  uint8_t tail = 0;   // valid lanes of a segment's last row, 1..N; 0 means N
  Tokens tokens;
};

struct Sync {
  Engine engine = Engine::kCompute;
  Tokens tokens;
};

constexpr uint32_t token_bits(const Tokens& t) {
  return (t.pop_prev ? 1u << 8 : 0u) | (t.pop_next ? 1u << 9 : 0u) |
         (t.push_prev ? 1u << 10 : 0u) | (t.push_next ? 1u << 11 : 0u);
}
constexpr uint32_t pack16(uint32_t lo, uint32_t hi) { return (lo & 0xFFFFu) | (hi << 16); }
constexpr uint32_t op(hw::Opcode opcode) { return static_cast<uint32_t>(opcode); }

constexpr Words encode(const Load& in) {
  return {op(hw::Opcode::kLoad) | token_bits(in.tokens) | (static_cast<uint32_t>(in.sp) << 16) |
              (in.wide ? kDmaWideBit : 0u) |
              ((in.row_elems & 0xFFu) << 24),
          in.va,
          in.sp_base,
          pack16(in.x, in.y),
          pack16(in.z, 0) | ((in.pad_l & 0xFu) << 16) | ((in.pad_r & 0xFu) << 20) |
              ((in.pad_t & 0xFu) << 24) | ((in.pad_b & 0xFu) << 28),
          in.x_stride,
          in.y_stride,
          in.z_stride};
}

constexpr Words encode(const Store& in) {
  return {op(hw::Opcode::kStore) | token_bits(in.tokens) | (static_cast<uint32_t>(in.sp) << 16) |
              (in.wide ? kDmaWideBit : 0u) |
              ((in.row_elems & 0xFFu) << 24),
          in.va,
          in.sp_base,
          pack16(in.x, in.y),
          pack16(in.z, 0),
          in.x_stride,
          in.y_stride,
          in.z_stride};
}

constexpr Words encode(const Gemm& in) {
  return {op(hw::Opcode::kGemm) | token_bits(in.tokens) | (in.clear ? 1u << 16 : 0u) |
              (in.wide ? kGemmWideBit : 0u),
          pack16(in.act, in.wgt),
          pack16(in.acc, in.r),
          pack16(in.o, in.i),
          pack16(in.act_so, in.act_si),
          pack16(in.act_sr, in.acc_so),
          pack16(in.acc_si, in.acc_sr),
          pack16(in.wgt_so, in.wgt_si)};
}

constexpr Words encode(const VecRequant& in) {
  return {op(hw::Opcode::kVec) | token_bits(in.tokens) |
              (static_cast<uint32_t>(hw::VecMode::kRequant) << 16) | (in.bias ? 1u << 20 : 0u) |
              (in.wrap ? kVecWrapBit : 0u) | (in.wide_dst ? kVecWideDstBit : 0u),
          pack16(in.src, in.dst),
          pack16(in.param, in.r),
          pack16(in.o, static_cast<uint8_t>(in.zero_point)),
          pack16(in.src_so, in.src_sr),
          pack16(in.dst_so, in.dst_sr),
          static_cast<uint32_t>(static_cast<uint8_t>(in.clamp_lo)) |
              (static_cast<uint32_t>(static_cast<uint8_t>(in.clamp_hi)) << 8),
          0};
}

constexpr Words encode(const VecSoftmax& in) {
  return {op(hw::Opcode::kVec) | token_bits(in.tokens) | (static_cast<uint32_t>(hw::VecMode::kSoftmax) << 16),
          pack16(in.src, in.dst),
          pack16(in.table, in.r),
          pack16(in.o, static_cast<uint8_t>(in.zero_point)),
          pack16(in.src_so, in.src_sr),
          pack16(in.dst_so, in.dst_sr),
          static_cast<uint32_t>(static_cast<uint8_t>(in.clamp_lo)) |
              (static_cast<uint32_t>(static_cast<uint8_t>(in.clamp_hi)) << 8),
          (in.shift & 63u) | (static_cast<uint32_t>(in.tail) << 8)};
}

constexpr Words encode(const Sync& in) {
  return {op(hw::Opcode::kSync) | token_bits(in.tokens) | (static_cast<uint32_t>(in.engine) << 16),
          0, 0, 0, 0, 0, 0, 0};
}

constexpr Words ring_exec(uint32_t cmd_va, uint32_t cmd_bytes, uint32_t pt_base, uint32_t tag) {
  return {static_cast<uint32_t>(hw::RingOpcode::kExec), cmd_va, cmd_bytes, pt_base, tag, 0, 0, 0};
}

constexpr Words ring_fence(uint32_t seq) {
  return {static_cast<uint32_t>(hw::RingOpcode::kFence), seq, 0, 0, 0, 0, 0, 0};
}

// Page-table entry for a 64 KiB page at physical address `phys` (64 KiB aligned).
constexpr uint32_t pte(uint32_t phys, bool writable) {
  return (phys & 0xFFFF0000u) | (writable ? 2u : 0u) | 1u;
}

}  // namespace npu::isa
