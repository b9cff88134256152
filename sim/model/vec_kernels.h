// The functional model's VEC-unit row kernels: the per-lane arithmetic of REQUANT, ADD/MUL
// and the window modes (MAXPOOL, AVGPOOL, DWCONV) on one row of n lanes. The portable kernel is
// the reference; the others are Google Highway's code for one target (simd_kernels.h: SSE4,
// AVX2, AVX-512) and, on AVX-512 VBMI CPUs, LUT by byte permutes in intrinsics, all chosen by the
// device's kernel path (npu/sim/kernel_paths.h) and computing the same bits. The arithmetic is
// architecture.md 1.4 "VEC modes". Row pointers may be equal (in place) but must not otherwise
// overlap. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npu/sim/kernel_paths.h"
#include "row_walk.h"

namespace npu::sim {

struct VecKernel {
  int64_t target = 0;  // a Highway target bit (HWY_AVX2, ...); 0: the portable kernels
  // LUT by AVX-512 VBMI byte permutes (vpermi2b) instead of Highway's 16 byte shuffles; only
  // with target HWY_AVX3 (Highway 1.0.3 has no 256-entry byte table lookup).
  bool vbmi = false;
  friend bool operator==(const VecKernel&, const VecKernel&) = default;
};
inline constexpr VecKernel kPortableVecKernel{};

// Every VEC kernel this build has: portable, one per Highway target compiled, AVX3 with VBMI.
std::vector<VecKernel> all_vec_kernels();
// "portable", "hwy:AVX2", "hwy:AVX3+vbmi".
std::string vec_kernel_name(VecKernel kernel);
// Whether this CPU (and OS) runs `kernel`.
bool vec_kernel_usable(VecKernel kernel);
// The kernel of `path`.
VecKernel vec_kernel_for(KernelPath path);
// vec_kernel_for(best_kernel_path()).
VecKernel best_vec_kernel();

// The VEC unit's rounding shift on 64-bit two's-complement values (shift in 0..63).
inline int64_t vec_round_shift(int64_t t, uint32_t shift) {
  auto u = static_cast<uint64_t>(t);
  if (shift > 0) u += uint64_t{1} << (shift - 1);
  return static_cast<int64_t>(u) >> shift;
}
// Clamp, testing the low bound first: below lo yields lo, else above hi yields hi (no
// std::clamp precondition; with lo > hi a value in [hi, lo) yields lo and one >= lo yields hi).
inline int8_t vec_clamp(int64_t t, int8_t lo, int8_t hi) {
  return static_cast<int8_t>(t < lo ? lo : (t > hi ? hi : t));
}
// The final result of REQUANT, ADD and MUL: with `wrap` (ISA 1.2) the low byte of t as
// two's complement (integer modular arithmetic; the instruction's clamp bounds are then 0),
// else vec_clamp.
inline int8_t vec_finish(int64_t t, int8_t lo, int8_t hi, bool wrap) {
  return wrap ? static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint64_t>(t) & 0xFFu)) : vec_clamp(t, lo, hi);
}
// One lane of REQUANT: round_shift(v·mult, shift) + zp, then vec_finish. Two's-complement
// wrapping, as the 64-bit datapath does (only v = mult = INT32_MIN, shift = 63 wraps).
inline int8_t vec_requantize(int32_t v, int32_t mult, uint32_t shift, int8_t zp, int8_t lo, int8_t hi,
                             bool wrap = false) {
  return vec_finish(vec_round_shift(static_cast<int64_t>(v) * mult, shift) + zp, lo, hi, wrap);
}

// Whether every row of the walk follows the previous one directly on both sides (row k of
// the walk at element offset k·n), so that the walk is one run of o_count·r_count·n elements.
inline bool walk_is_one_run(const RowWalk& w, uint32_t n) {
  const ptrdiff_t row = n, run = ptrdiff_t{w.r_count} * n;
  const bool rows_follow = w.r_count == 1 || (w.src_sr == row && w.dst_sr == row);
  const bool blocks_follow = w.o_count == 1 || (w.src_so == run && w.dst_so == run);
  return rows_follow && blocks_follow;
}

// The per-lane parameters of a requantisation (REQUANT, DWCONV): multiplier and shift rows
// (the shift's low 6 bits count), the output zero point, clamp bounds and the wrap bit
// (REQUANT only: DWCONV with wrap is an illegal instruction).
// wide (ISA 1.4, never with wrap): the destination rows are wide, n int16 in the 2n bytes at
// each row's address, little-endian; the zero point and bounds are refined by 256 (zp·256,
// lo·256, hi·256 + 255).
struct RequantParams {
  const int32_t* mult;
  const int32_t* shift;
  int8_t zp, lo, hi;
  bool wrap;
  bool wide = false;
};

// REQUANT: y[c] = vec_requantize(x[c] + bias[c] (wrapping; no bias when null), ..., p.wrap)
// for c < n, per row. n is 8, 16 or 32 everywhere.
void requantize_rows(VecKernel kernel, const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                     const RowWalk& rows, uint32_t n);

// ADD (mul = false): t = (a - za)·m0 + (b - zb)·m1; MUL: t = (a - za)·(b - zb)·m0; all in
// wrapping 64-bit arithmetic; y[c] = vec_finish(round_shift(t, shift) + zp, lo, hi, wrap),
// per row.
struct BinaryParams {
  bool mul;
  int64_t za, zb, m0, m1;
  uint32_t shift;
  int8_t zp, lo, hi;
  bool wrap;
};
void binary_rows(VecKernel kernel, const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y,
                 const RowWalk& rows, uint32_t n);

// LUT: y[c] = vec_clamp(table[x[c] + 128]) per row; `table` holds the 256 entries (the
// caller's snapshot of the table rows, taken when the instruction starts, as the RTL does).
void lut_rows(VecKernel kernel, const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y,
              const RowWalk& rows, uint32_t n);

// A window reduction: sum[c] over the kh×kw taps, tap (ky, kx) being the row
// x + ky·row_stride + kx·n. kMax: max (starting from INT32_MIN); kAdd: sum; kMac: Σ x·w with
// tap weights w + (ky·kw + kx)·n. int32 is exact for every legal window (|Σ| < 2^31).
enum class WindowOp : uint8_t { kMax, kAdd, kMac };
void window_reduce(VecKernel kernel, WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw,
                   uint32_t kh, const int8_t* w, uint32_t n, int32_t* sum);

// DWCONV: per row, the kMac window reduction from the source row, then REQUANT of it (+ bias;
// p.wrap must be false). Each output row is computed from its window before it is written.
struct Window {
  ptrdiff_t row_stride;  // elements between window rows
  uint32_t kw, kh;
  const int8_t* weights;  // kh·kw rows of n
  // ISA 1.4: the taps are wide rows (n int16 little-endian, tap (ky, kx) at x + ky·row_stride
  // + kx·2n bytes), multiplied as int16 × int8.
  bool wide = false;
};
void dwconv_rows(VecKernel kernel, const int8_t* x, const Window& window, const int32_t* bias,
                 const RequantParams& p, int8_t* y, const RowWalk& rows, uint32_t n);

// The clamp bounds of a wide destination (ISA 1.4): the int8 fields refined by 256.
inline int32_t wide_lo(int8_t lo) { return int32_t{lo} * 256; }
inline int32_t wide_hi(int8_t hi) { return int32_t{hi} * 256 + 255; }

// An element of a wide row (ISA 1.4): the int16 in bytes 2k (low) and 2k + 1 (high) of `row`.
inline int16_t wide_element(const int8_t* row, uint32_t k) {
  return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(row[2 * k]) |
                                                    static_cast<uint16_t>(static_cast<uint8_t>(row[2 * k + 1])) << 8));
}

// LUT with a wide source (ISA 1.4, architecture.md 1.4.3): the interpolated table of
// isa::kWideLutEntries int16 entries, indexed by the top 8 bits of x and interpolated exactly
// in the low 8, rounded onto the destination's grid (wide_dst: int16, else int8) before the
// clamp. t = 256·T[i] + (T[i+1] - T[i])·f is exact in int32.
inline int32_t vec_lut_interpolate(const int16_t* table, int16_t x, bool wide_dst) {
  const int32_t i = (x >> 8) + 128, f = x & 255;
  const int32_t t = 256 * int32_t{table[i]} + (int32_t{table[i + 1]} - table[i]) * f;
  return wide_dst ? (t + 128) >> 8 : (t + 32768) >> 16;
}

// LUT with a wide source: y = clamp(vec_lut_interpolate(table, x[c], wide_dst)) per row, the
// bounds refined by 256 when wide_dst (then y is a wide row). `table`: the caller's snapshot of
// the 257 entries. Each output row is computed from its source row before it is written.
void lut_rows_wide(VecKernel kernel, const int16_t* table, const int8_t* x, int8_t lo, int8_t hi, bool wide_dst,
                   int8_t* y, const RowWalk& rows, uint32_t n);

}  // namespace npu::sim
