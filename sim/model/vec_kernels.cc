#include "vec_kernels.h"

// GCC 12's AVX-512 intrinsics initialise their "undefined" vectors from themselves, which
// -Wmaybe-uninitialized (or -Wuninitialized, once inlined into a loop) reports at every use
// (GCC bug 105593); the warning says nothing here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "cpu_features.h"

namespace npu::sim {
namespace {

int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Walks the rows of a RowWalk in order: src and dst are the current row's element offsets.
struct RowCursor {
  explicit RowCursor(const RowWalk& walk) : w(walk) {}
  bool done() const { return o == w.o_count; }
  void next() {
    if (++r == w.r_count) {
      r = 0;
      ++o;
    }
    src = static_cast<ptrdiff_t>(o) * w.src_so + static_cast<ptrdiff_t>(r) * w.src_sr;
    dst = static_cast<ptrdiff_t>(o) * w.dst_so + static_cast<ptrdiff_t>(r) * w.dst_sr;
  }
  const RowWalk& w;
  uint32_t o = 0, r = 0;
  ptrdiff_t src = 0, dst = 0;
};

// Whether every row of the walk follows the previous one directly on both sides (row k of
// the walk at element offset k·n), so that the walk is one run of o_count·r_count·n elements.
bool walk_is_one_run(const RowWalk& w, uint32_t n) {
  const ptrdiff_t row = n, run = ptrdiff_t{w.r_count} * n;
  const bool rows_follow = w.r_count == 1 || (w.src_sr == row && w.dst_sr == row);
  const bool blocks_follow = w.o_count == 1 || (w.src_so == run && w.dst_so == run);
  return rows_follow && blocks_follow;
}

// --- portable ------------------------------------------------------------------------------
void requantize_row_portable(const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                             uint32_t n) {
  for (uint32_t c = 0; c < n; ++c) {
    const int32_t v = bias ? wrap_add(x[c], bias[c]) : x[c];
    y[c] = vec_requantize(v, p.mult[c], static_cast<uint32_t>(p.shift[c]) & 63u, p.zp, p.lo, p.hi, p.wrap);
  }
}

void binary_row_portable(const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y, uint32_t n) {
  for (uint32_t c = 0; c < n; ++c) {
    const int64_t da = a[c] - p.za, db = b[c] - p.zb;
    const int64_t t = p.mul ? wrap_mul(wrap_mul(da, db), p.m0)
                            : static_cast<int64_t>(static_cast<uint64_t>(wrap_mul(da, p.m0)) +
                                                   static_cast<uint64_t>(wrap_mul(db, p.m1)));
    y[c] = vec_finish(vec_round_shift(t, p.shift) + p.zp, p.lo, p.hi, p.wrap);
  }
}

void lut_row_portable(const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y, uint32_t n) {
  for (uint32_t c = 0; c < n; ++c) y[c] = vec_clamp(table[x[c] + 128], lo, hi);
}

void window_reduce_portable(WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh,
                            const int8_t* w, uint32_t n, int32_t* sum) {
  // Lanes innermost so that the compiler vectorises the tap loop.
  for (uint32_t c = 0; c < n; ++c) sum[c] = op == WindowOp::kMax ? INT32_MIN : 0;
  for (uint32_t ky = 0; ky < kh; ++ky)
    for (uint32_t kx = 0; kx < kw; ++kx) {
      const int8_t* xr = x + ky * row_stride + static_cast<ptrdiff_t>(kx) * n;
      if (op == WindowOp::kMax) {
        for (uint32_t c = 0; c < n; ++c) sum[c] = std::max<int32_t>(sum[c], xr[c]);
      } else if (op == WindowOp::kAdd) {
        for (uint32_t c = 0; c < n; ++c) sum[c] += xr[c];
      } else {
        const int8_t* wr = w + static_cast<size_t>(ky * kw + kx) * n;
        for (uint32_t c = 0; c < n; ++c) sum[c] += int32_t{xr[c]} * wr[c];
      }
    }
}

// --- AVX-512 -------------------------------------------------------------------------------
// Row bodies are always inlined into the row loops below, which carry the target.
#define NPU_AVX512_TARGET "avx512f,avx512bw,avx512vl,avx512dq"
#define NPU_AVX512_INLINE __attribute__((target(NPU_AVX512_TARGET), always_inline)) inline

// round_shift on eight int64 lanes with per-lane shifts: (1 << s) >> 1 is the rounding
// addend (0 for s = 0), the add wraps, the shift is arithmetic.
NPU_AVX512_INLINE __m512i round_shift8(__m512i t, __m512i shift) {
  const __m512i half = _mm512_srli_epi64(_mm512_sllv_epi64(_mm512_set1_epi64(1), shift), 1);
  return _mm512_srav_epi64(_mm512_add_epi64(t, half), shift);
}
// One instruction's output parameters and requantisation parameters for lanes c..c+7,
// widened once: the row loops store int8 through pointers that may alias anything, so values
// read from RequantParams inside them would be reloaded and re-widened for every row.
struct HeldFinish {
  __m512i zp, lo, hi;
};
struct HeldRequant8 {
  __m512i mult, shift, half;  // int64 lanes; half = (1 << shift) >> 1, the rounding addend
  __m256i bias;               // zero without a bias (adding 0 is the no-bias result)
};
// With wrap the bounds are the whole int64 range, so the clamp in finish8 passes every value
// and the truncating narrow (vpmovqb) leaves the low byte: vec_finish's wrap result.
NPU_AVX512_INLINE HeldFinish hold_finish(int8_t zp, int8_t lo, int8_t hi, bool wrap) {
  return HeldFinish{_mm512_set1_epi64(zp), _mm512_set1_epi64(wrap ? INT64_MIN : int64_t{lo}),
                    _mm512_set1_epi64(wrap ? INT64_MAX : int64_t{hi})};
}
NPU_AVX512_INLINE HeldRequant8 hold_requant8(const RequantParams& p, const int32_t* bias, uint32_t c) {
  const __m256i s = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.shift + c)),
                                     _mm256_set1_epi32(63));
  HeldRequant8 q;
  q.mult = _mm512_cvtepi32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.mult + c)));
  q.shift = _mm512_cvtepu32_epi64(s);
  q.half = _mm512_srli_epi64(_mm512_sllv_epi64(_mm512_set1_epi64(1), q.shift), 1);
  q.bias = bias ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + c)) : _mm256_setzero_si256();
  return q;
}
// + zp, vec_clamp (the low test on the unclamped value, as the scalar rule, which matters
// when lo > hi), in int64 lanes: int8 values, or with wrap (bounds the whole int64 range)
// every value, whose low byte the narrowing keeps.
NPU_AVX512_INLINE __m512i clamp8(__m512i r, const HeldFinish& f) {
  r = _mm512_add_epi64(r, f.zp);
  return _mm512_mask_mov_epi64(_mm512_min_epi64(r, f.hi), _mm512_cmplt_epi64_mask(r, f.lo), f.lo);
}
// clamp8, narrowed to int8.
NPU_AVX512_INLINE __m128i finish8(__m512i r, const HeldFinish& f) { return _mm512_cvtepi64_epi8(clamp8(r, f)); }
// A requantisation of the int32 values v (+ bias), clamped, in int64 lanes.
NPU_AVX512_INLINE __m512i requantized8(__m256i v, const HeldRequant8& q, const HeldFinish& f) {
  // vpmuldq: the exact 64-bit product of the sign-extended low halves.
  const __m512i t = _mm512_mul_epi32(_mm512_cvtepi32_epi64(_mm256_add_epi32(v, q.bias)), q.mult);
  return clamp8(_mm512_srav_epi64(_mm512_add_epi64(t, q.half), q.shift), f);
}
// Lanes c..c+7 of a requantisation of the int32 values v (+ bias) into y + c.
NPU_AVX512_INLINE void requantize8(__m256i v, const HeldRequant8& q, const HeldFinish& f, int8_t* y, uint32_t c) {
  _mm_storel_epi64(reinterpret_cast<__m128i*>(y + c), _mm512_cvtepi64_epi8(requantized8(v, q, f)));
}

// Lanes 8·G wide (n = 8, 16, 32), every parameter held in registers for the whole walk.
template <uint32_t G>
__attribute__((target(NPU_AVX512_TARGET))) void requantize_rows_held(const int32_t* x, const int32_t* bias,
                                                                     const RequantParams& p, int8_t* y,
                                                                     const RowWalk& rows) {
  HeldRequant8 q[G];
  for (uint32_t g = 0; g < G; ++g) q[g] = hold_requant8(p, bias, 8 * g);
  const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
  for (RowCursor row(rows); !row.done(); row.next())
    for (uint32_t g = 0; g < G; ++g)
      requantize8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + row.src + 8 * g)), q[g], f, y + row.dst,
                  8 * g);
}

// n = 16 with VBMI: the two halves' clamped int64 lanes are narrowed together by one vpermt2b
// (the low byte of each qword, as vpmovqb takes it) and stored as one 16-byte row, instead of
// two vpmovqb (two shuffle uops each) and two 8-byte stores.
#define NPU_AVX512_VBMI_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi"
// Lanes 0..15 of a requantisation of v_lo, v_hi (lanes 0..7, 8..15) into y.
__attribute__((target(NPU_AVX512_VBMI_TARGET), always_inline)) inline void requantize16_vbmi(
    __m256i v_lo, __m256i v_hi, const HeldRequant8& q0, const HeldRequant8& q1, const HeldFinish& f, int8_t* y) {
  // Result byte k < 8 is byte 8k of the low half, byte 8 + k byte 8k of the high half.
  const __m512i low_bytes = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0x7870686058504840, 0x3830282018100800);
  const __m512i lo = requantized8(v_lo, q0, f), hi = requantized8(v_hi, q1, f);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_castsi512_si128(_mm512_permutex2var_epi8(lo, low_bytes, hi)));
}
__attribute__((target(NPU_AVX512_VBMI_TARGET))) void requantize_rows16_vbmi(const int32_t* x, const int32_t* bias,
                                                                            const RequantParams& p, int8_t* y,
                                                                            const RowWalk& rows) {
  const HeldRequant8 q0 = hold_requant8(p, bias, 0), q1 = hold_requant8(p, bias, 8);
  const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
  for (RowCursor row(rows); !row.done(); row.next()) {
    const int32_t* src = x + row.src;
    requantize16_vbmi(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)),
                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 8)), q0, q1, f, y + row.dst);
  }
}

__attribute__((target(NPU_AVX512_TARGET))) void requantize_rows_avx512(const int32_t* x, const int32_t* bias,
                                                                       const RequantParams& p, int8_t* y,
                                                                       const RowWalk& rows, uint32_t n, bool vbmi) {
  if (p.lo == p.hi && !p.wrap) {
    // Equal clamp bounds yield that bound whatever is clamped (the compiler fills depthwise
    // padding so): the rows are written with it, no arithmetic needed for the same bits. (With
    // wrap, legal only with both bounds 0, the result is the low byte instead.)
    for (RowCursor row(rows); !row.done(); row.next()) std::memset(y + row.dst, p.lo, n);
    return;
  }
  switch (n) {
    case 8: return requantize_rows_held<1>(x, bias, p, y, rows);
    case 16:
      if (vbmi) return requantize_rows16_vbmi(x, bias, p, y, rows);
      return requantize_rows_held<2>(x, bias, p, y, rows);
    case 32: return requantize_rows_held<4>(x, bias, p, y, rows);
    default: break;
  }
  const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
  for (RowCursor row(rows); !row.done(); row.next())
    for (uint32_t c = 0; c < n; c += 8)
      requantize8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + row.src + c)), hold_requant8(p, bias, c), f,
                  y + row.dst, c);
}

__attribute__((target(NPU_AVX512_TARGET))) void binary_rows_avx512(const int8_t* a, const int8_t* b,
                                                                   const BinaryParams& p, int8_t* y,
                                                                   const RowWalk& rows, uint32_t n) {
  const __m512i za = _mm512_set1_epi64(p.za), zb = _mm512_set1_epi64(p.zb);
  const __m512i m0 = _mm512_set1_epi64(p.m0), m1 = _mm512_set1_epi64(p.m1);
  const __m512i shift = _mm512_set1_epi64(p.shift);
  const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
  const bool mul = p.mul;
  // With |za|, |zb| <= 2^15 and m0, m1 in int32 (always, from ACC lanes) no product wraps:
  // |a − za|, |b − zb| < 2^16, their product < 2^31, each product with m0 or m1 < 2^62. The
  // exact products are then vpmuldq (one uop, 32×32 → 64 bits signed) instead of vpmullq
  // (three), with the same bits.
  auto within = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  constexpr int64_t kZero = int64_t{1} << 15;
  const bool narrow = within(p.za, -kZero, kZero) && within(p.zb, -kZero, kZero) &&
                      within(p.m0, INT32_MIN, INT32_MAX) && within(p.m1, INT32_MIN, INT32_MAX);
  for (RowCursor row(rows); !row.done(); row.next())
    for (uint32_t c = 0; c < n; c += 8) {
      const __m512i da = _mm512_sub_epi64(
          _mm512_cvtepi8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + row.src + c))), za);
      const __m512i db = _mm512_sub_epi64(
          _mm512_cvtepi8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + row.src + c))), zb);
      __m512i t;
      if (narrow) {
        t = mul ? _mm512_mul_epi32(_mm512_mul_epi32(da, db), m0)
                : _mm512_add_epi64(_mm512_mul_epi32(da, m0), _mm512_mul_epi32(db, m1));
      } else {
        // vpmullq keeps the low 64 bits: the wrapping products of the scalar definition.
        t = mul ? _mm512_mullo_epi64(_mm512_mullo_epi64(da, db), m0)
                : _mm512_add_epi64(_mm512_mullo_epi64(da, m0), _mm512_mullo_epi64(db, m1));
      }
      _mm_storel_epi64(reinterpret_cast<__m128i*>(y + row.dst + c), finish8(round_shift8(t, shift), f));
    }
}

// Lanes whose mask bits are set, for the n - c0 lanes from c0 (16 per zmm of int32).
NPU_AVX512_INLINE __mmask16 lanes16(uint32_t n, uint32_t c0) {
  return n - c0 >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - c0)) - 1);
}

template <WindowOp Op>
NPU_AVX512_INLINE __m512i window16(const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh, const int8_t* w,
                                   uint32_t n, uint32_t c0, __mmask16 lanes) {
  __m512i acc = Op == WindowOp::kMax ? _mm512_set1_epi32(INT32_MIN) : _mm512_setzero_si512();
  for (uint32_t ky = 0; ky < kh; ++ky) {
    const int8_t* xr = x + ky * row_stride + c0;
    for (uint32_t kx = 0; kx < kw; ++kx, xr += n) {
      const __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, xr));
      if constexpr (Op == WindowOp::kMax) {
        acc = _mm512_max_epi32(acc, xv);
      } else if constexpr (Op == WindowOp::kAdd) {
        acc = _mm512_add_epi32(acc, xv);
      } else {
        const int8_t* wr = w + static_cast<size_t>(ky * kw + kx) * n + c0;
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(xv, _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, wr))));
      }
    }
  }
  return acc;
}

template <WindowOp Op>
__attribute__((target(NPU_AVX512_TARGET))) void window_reduce_avx512(const int8_t* x, ptrdiff_t row_stride, uint32_t kw,
                                                                     uint32_t kh, const int8_t* w, uint32_t n,
                                                                     int32_t* sum) {
  for (uint32_t c0 = 0; c0 < n; c0 += 16) {
    const __mmask16 lanes = lanes16(n, c0);
    _mm512_mask_storeu_epi32(sum + c0, lanes, window16<Op>(x, row_stride, kw, kh, w, n, c0, lanes));
  }
}

// DWCONV rows for n <= 16 with the widened tap weights and the requantisation held. kKw and
// kKh are the window when the caller knows it (the loops then unroll fully), 0 to take it from
// `win`. The int32 sum is exact (|Σ| < 2^31), so the tap order does not matter. FINISH
// requantises the row's sum into y + row.dst: two 8-lane halves, or (n = 16 with VBMI) one
// 16-byte row as REQUANT does.
#define NPU_DWCONV_ROWS_HELD(NAME, TARGET, FINISH)                                                                \
  template <uint32_t kKw, uint32_t kKh>                                                                         \
  __attribute__((target(TARGET))) void NAME(const int8_t* x, const Window& win, const __m512i* weights,         \
                                            const HeldRequant8& q0, const HeldRequant8& q1, const HeldFinish& f, \
                                            int8_t* y, const RowWalk& rows, uint32_t n) {                         \
    const uint32_t kw = kKw ? kKw : win.kw, kh = kKh ? kKh : win.kh;                                            \
    const ptrdiff_t row_stride = win.row_stride;                                                                \
    const __mmask16 lanes = lanes16(n, 0);                                                                      \
    for (RowCursor row(rows); !row.done(); row.next()) {                                                        \
      __m512i sum = _mm512_setzero_si512();                                                                     \
      for (uint32_t ky = 0; ky < kh; ++ky) {                                                                    \
        const int8_t* xr = x + row.src + ky * row_stride;                                                       \
        for (uint32_t kx = 0; kx < kw; ++kx)                                                                    \
          sum = _mm512_add_epi32(                                                                               \
              sum, _mm512_madd_epi16(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(lanes, xr + kx * n)),            \
                                     weights[ky * kw + kx]));                                                   \
      }                                                                                                         \
      FINISH(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1), q0, q1, f, y + row.dst, n);         \
    }                                                                                                           \
  }
NPU_AVX512_INLINE void finish_halves(__m256i lo, __m256i hi, const HeldRequant8& q0, const HeldRequant8& q1,
                                     const HeldFinish& f, int8_t* y, uint32_t n) {
  requantize8(lo, q0, f, y, 0);
  if (n > 8) requantize8(hi, q1, f, y, 8);
}
__attribute__((target(NPU_AVX512_VBMI_TARGET), always_inline)) inline void finish16_vbmi(
    __m256i lo, __m256i hi, const HeldRequant8& q0, const HeldRequant8& q1, const HeldFinish& f, int8_t* y, uint32_t) {
  requantize16_vbmi(lo, hi, q0, q1, f, y);
}
NPU_DWCONV_ROWS_HELD(dwconv_rows_held, NPU_AVX512_TARGET, finish_halves)
NPU_DWCONV_ROWS_HELD(dwconv_rows16_held_vbmi, NPU_AVX512_VBMI_TARGET, finish16_vbmi)
#undef NPU_DWCONV_ROWS_HELD
#undef NPU_AVX512_VBMI_TARGET

__attribute__((target(NPU_AVX512_TARGET))) void dwconv_rows_avx512(const int8_t* x, const Window& win,
                                                                   const int32_t* bias, const RequantParams& p,
                                                                   int8_t* y, const RowWalk& rows, uint32_t n,
                                                                   bool vbmi) {
  constexpr uint32_t kMaxHeldTaps = 32;
  const uint32_t taps = win.kw * win.kh;
  if (n <= 16 && taps <= kMaxHeldTaps) {
    // The tap weights are widened once per instruction, as int16 in the low half of each
    // int32 lane with a zero high half, so that vpmaddwd against a sign-extended activation
    // is the exact product x·w (the high halves multiply by 0).
    const __mmask16 lanes = lanes16(n, 0);
    __m512i weights[kMaxHeldTaps];
    for (uint32_t t = 0; t < taps; ++t)
      weights[t] = _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(_mm_maskz_loadu_epi8(lanes, win.weights + size_t{t} * n)));
    const HeldRequant8 q0 = hold_requant8(p, bias, 0);
    const HeldRequant8 q1 = n > 8 ? hold_requant8(p, bias, 8) : q0;
    const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
    // The depthwise convolutions of CNNs are 3x3 and 5x5.
    if (n == 16 && vbmi) {
      if (win.kw == 3 && win.kh == 3) return dwconv_rows16_held_vbmi<3, 3>(x, win, weights, q0, q1, f, y, rows, n);
      if (win.kw == 5 && win.kh == 5) return dwconv_rows16_held_vbmi<5, 5>(x, win, weights, q0, q1, f, y, rows, n);
      return dwconv_rows16_held_vbmi<0, 0>(x, win, weights, q0, q1, f, y, rows, n);
    }
    if (win.kw == 3 && win.kh == 3) return dwconv_rows_held<3, 3>(x, win, weights, q0, q1, f, y, rows, n);
    if (win.kw == 5 && win.kh == 5) return dwconv_rows_held<5, 5>(x, win, weights, q0, q1, f, y, rows, n);
    return dwconv_rows_held<0, 0>(x, win, weights, q0, q1, f, y, rows, n);
  }
  const HeldFinish f = hold_finish(p.zp, p.lo, p.hi, p.wrap);
  for (RowCursor row(rows); !row.done(); row.next())
    for (uint32_t c0 = 0; c0 < n; c0 += 16) {
      const __m512i sum =
          window16<WindowOp::kMac>(x + row.src, win.row_stride, win.kw, win.kh, win.weights, n, c0, lanes16(n, c0));
      requantize8(_mm512_castsi512_si256(sum), hold_requant8(p, bias, c0), f, y + row.dst, c0);
      if (n - c0 > 8) requantize8(_mm512_extracti64x4_epi64(sum, 1), hold_requant8(p, bias, c0 + 8), f, y + row.dst, c0 + 8);
    }
}

// vpermi2b looks up 128 entries from two registers by the low 7 index bits; two lookups and
// a blend on bit 7 cover the 256-entry table.
#define NPU_VBMI_TARGET "avx512f,avx512bw,avx512vl,avx512vbmi"
struct HeldLut {
  __m512i t0, t1, t2, t3, low, high;
};
__attribute__((target(NPU_VBMI_TARGET), always_inline)) inline __m512i lut64(__m512i x, const HeldLut& t) {
  const __m512i index = _mm512_xor_si512(x, _mm512_set1_epi8(-128));
  const __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), _mm512_permutex2var_epi8(t.t0, index, t.t1),
                                           _mm512_permutex2var_epi8(t.t2, index, t.t3));
  return _mm512_mask_mov_epi8(_mm512_min_epi8(v, t.high), _mm512_cmplt_epi8_mask(v, t.low), t.low);
}

__attribute__((target(NPU_VBMI_TARGET))) void lut_rows_vbmi(const int8_t* table, const int8_t* x, int8_t lo, int8_t hi,
                                                            int8_t* y, const RowWalk& rows, uint32_t n) {
  const HeldLut t{_mm512_loadu_si512(table),       _mm512_loadu_si512(table + 64), _mm512_loadu_si512(table + 128),
                  _mm512_loadu_si512(table + 192), _mm512_set1_epi8(lo),           _mm512_set1_epi8(hi)};
  // LUT is per byte, so when the walk's rows are one contiguous run on both sides (an
  // elementwise layer over a whole tensor) it runs 64 bytes at a time. That equals the row
  // order when the output does not start after the input inside it (y <= x, or disjoint):
  // a byte is then overwritten only by the result of a byte at or after it, and each block
  // is read completely before it is written.
  const ptrdiff_t total = ptrdiff_t{rows.o_count} * rows.r_count * n;
  const auto x_at = reinterpret_cast<uintptr_t>(x), y_at = reinterpret_cast<uintptr_t>(y);
  if (walk_is_one_run(rows, n) && (y_at <= x_at || y_at >= x_at + static_cast<uintptr_t>(total))) {
    for (ptrdiff_t at = 0; at < total; at += 64) {
      const __mmask64 block = total - at >= 64 ? ~__mmask64{0} : (__mmask64{1} << (total - at)) - 1;
      _mm512_mask_storeu_epi8(y + at, block, lut64(_mm512_maskz_loadu_epi8(block, x + at), t));
    }
    return;
  }
  const __mmask64 lanes = (__mmask64{1} << n) - 1;  // n <= 32
  for (RowCursor row(rows); !row.done(); row.next())
    _mm512_mask_storeu_epi8(y + row.dst, lanes, lut64(_mm512_maskz_loadu_epi8(lanes, x + row.src), t));
}
#undef NPU_VBMI_TARGET
#undef NPU_AVX512_INLINE
#undef NPU_AVX512_TARGET

}  // namespace

std::string_view vec_kernel_name(VecKernel kernel) {
  switch (kernel) {
    case VecKernel::kPortable: return "portable";
    case VecKernel::kAvx512: return "avx512";
    case VecKernel::kAvx512Vbmi: return "avx512-vbmi";
  }
  return "?";
}

bool vec_kernel_usable(VecKernel kernel) {
  const CpuFeatures& cpu = host_cpu_features();
  switch (kernel) {
    case VecKernel::kPortable: return true;
    case VecKernel::kAvx512: return cpu.avx512;
    case VecKernel::kAvx512Vbmi: return cpu.avx512 && cpu.avx512_vbmi;
  }
  return false;
}

VecKernel vec_kernel_for(KernelPath path) {
  const CpuFeatures f = kernel_path_features(path);
  if (!f.avx512) return VecKernel::kPortable;
  return f.avx512_vbmi ? VecKernel::kAvx512Vbmi : VecKernel::kAvx512;
}

VecKernel best_vec_kernel() { return vec_kernel_for(best_kernel_path()); }

void requantize_rows(VecKernel kernel, const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                     const RowWalk& rows, uint32_t n) {
  if (kernel != VecKernel::kPortable)
    return requantize_rows_avx512(x, bias, p, y, rows, n, kernel == VecKernel::kAvx512Vbmi);
  for (RowCursor row(rows); !row.done(); row.next()) requantize_row_portable(x + row.src, bias, p, y + row.dst, n);
}

void binary_rows(VecKernel kernel, const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y,
                 const RowWalk& rows, uint32_t n) {
  if (kernel != VecKernel::kPortable) return binary_rows_avx512(a, b, p, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next())
    binary_row_portable(a + row.src, b + row.src, p, y + row.dst, n);
}

void lut_rows(VecKernel kernel, const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y,
              const RowWalk& rows, uint32_t n) {
  if (kernel == VecKernel::kAvx512Vbmi) return lut_rows_vbmi(table, x, lo, hi, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next()) lut_row_portable(table, x + row.src, lo, hi, y + row.dst, n);
}

void window_reduce(VecKernel kernel, WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh,
                   const int8_t* w, uint32_t n, int32_t* sum) {
  if (kernel == VecKernel::kPortable) return window_reduce_portable(op, x, row_stride, kw, kh, w, n, sum);
  switch (op) {
    case WindowOp::kMax: return window_reduce_avx512<WindowOp::kMax>(x, row_stride, kw, kh, w, n, sum);
    case WindowOp::kAdd: return window_reduce_avx512<WindowOp::kAdd>(x, row_stride, kw, kh, w, n, sum);
    case WindowOp::kMac: return window_reduce_avx512<WindowOp::kMac>(x, row_stride, kw, kh, w, n, sum);
  }
}

void dwconv_rows(VecKernel kernel, const int8_t* x, const Window& window, const int32_t* bias, const RequantParams& p,
                 int8_t* y, const RowWalk& rows, uint32_t n) {
  if (kernel != VecKernel::kPortable)
    return dwconv_rows_avx512(x, window, bias, p, y, rows, n, kernel == VecKernel::kAvx512Vbmi);
  for (RowCursor row(rows); !row.done(); row.next()) {
    int32_t sum[32];
    window_reduce_portable(WindowOp::kMac, x + row.src, window.row_stride, window.kw, window.kh, window.weights, n,
                           sum);
    requantize_row_portable(sum, bias, p, y + row.dst, n);
  }
}

}  // namespace npu::sim
