// The Highway kernels of simd_kernels.h. This file is compiled once per Highway target
// (foreach_target.h re-includes it with HWY_NAMESPACE set to N_AVX2, N_AVX3, ...); the block at
// the end (HWY_ONCE) exports one table of kernels per target. Arithmetic as architecture.md 1.4.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// (after foreach_target.h)
#include "hwy/highway.h"

#include <array>
#include <bit>
#include <climits>
#include <cstring>
#include <utility>

#include "mac_kernels.h"
#include "npu/hw/isa.h"
#include "simd_kernels.h"
#include "vec_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace npu::sim {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway's scalar fallback (one lane per vector, no lane-size casts) has no table: the
// portable kernels are the scalar code.
#if HWY_TARGET != HWY_SCALAR

// --- requantisation -----------------------------------------------------------------------
// int64 lanes: the product of an int32 value and an int32 multiplier is exact in 64 bits
// (MulEven, vpmuldq on x86: the signed product of the low halves of the int64 lanes).
using D64 = hn::ScalableTag<int64_t>;
using DU64 = hn::RebindToUnsigned<D64>;
using D32W = hn::Repartition<int32_t, D64>;  // the int32 view of an int64 vector
using D32H = hn::Rebind<int32_t, D64>;       // one int32 per int64 lane (half a vector)
using D8Q = hn::Rebind<int8_t, D64>;         // one int8 per int64 lane
using DU8Q = hn::Rebind<uint8_t, D64>;

HWY_INLINE hn::Vec<D64> WideProduct(hn::Vec<D64> a, hn::Vec<D64> b) {
  const D32W d32;
  return hn::MulEven(hn::BitCast(d32, a), hn::BitCast(d32, b));
}

// + zp, then vec_clamp (the low test first, on the unclamped value, which matters when
// lo > hi), then the low byte, stored. With wrap the bounds are the whole int64 range, so the
// clamp passes every value and the truncation is vec_finish's wrap result. With `wide` (ISA
// 1.4) the zero point and bounds are refined by 256 and the low int16 is stored (store16).
struct Finish {
  hn::Vec<D64> zp, lo, hi;
  Finish(int8_t zp8, int8_t lo8, int8_t hi8, bool wrap, bool wide = false) {
    const D64 d;
    zp = hn::Set(d, wide ? zp8 * 256 : zp8);
    lo = hn::Set(d, wrap ? INT64_MIN : int64_t{wide ? wide_lo(lo8) : lo8});
    hi = hn::Set(d, wrap ? INT64_MAX : int64_t{wide ? wide_hi(hi8) : hi8});
  }
  HWY_INLINE hn::Vec<D64> clamped(hn::Vec<D64> r) const {
    r = hn::Add(r, zp);
    return hn::IfThenElse(hn::Lt(r, lo), lo, hn::Min(r, hi));
  }
  HWY_INLINE void store(hn::Vec<D64> r, int8_t* y) const {
    const DU8Q du8;
    hn::StoreU(hn::TruncateTo(du8, hn::BitCast(DU64(), clamped(r))), du8, reinterpret_cast<uint8_t*>(y));
  }
  // The lanes as int16 at y (2 bytes each, little-endian: a wide row's layout).
  HWY_INLINE void store16(hn::Vec<D64> r, int8_t* y) const {
    const hn::Rebind<uint16_t, D64> du16;
    hn::StoreU(hn::TruncateTo(du16, hn::BitCast(DU64(), clamped(r))), du16, reinterpret_cast<uint16_t*>(y));
  }
};

// REQUANT's per-lane parameters for N lanes, widened once per instruction (the row loops
// store int8 through pointers that may alias anything, so values read from RequantParams
// inside them would be reloaded and re-widened for every row).
template <uint32_t N>
struct HeldRequant {
  alignas(64) int64_t mult[N], half[N], shift[N];
  alignas(64) int32_t bias[N];  // zero without a bias (adding 0 is the no-bias result)
  Finish finish;
  // When every lane's shift is at least 33 the rounding addend 2^(s-1) lies above the low 32
  // bits of v·m, so round_shift(v·m, s) = (hi32(v·m) + 2^(s-33)) >> (s - 32) exactly, in int32
  // lanes (twice as many per vector, native variable shifts and clamps). |v·m| <= 2^62 makes
  // |hi32| <= 2^30 and the addend is at most 2^30; the one sum that reaches 2^31 (v = m =
  // INT32_MIN, s = 63) wraps to -2^31 as the 64-bit sum wraps to -2^63, and both shift to -1.
  // Compiled models requantise by scales below 2^-2, so their shifts are all above 32.
  bool high = false;
  alignas(64) int32_t mult32[N], shift32[N], add32[N];
  int32_t zp32, lo32, hi32;
  bool wrap;
  bool wide;  // wide destination rows (ISA 1.4): bounds and zero point refined by 256

  HeldRequant(const RequantParams& p, const int32_t* b)
      : finish(p.zp, p.lo, p.hi, p.wrap, p.wide),
        zp32(p.wide ? p.zp * 256 : p.zp),
        lo32(p.wrap ? INT32_MIN : (p.wide ? wide_lo(p.lo) : p.lo)),  // with wrap the clamp passes every value
        hi32(p.wrap ? INT32_MAX : (p.wide ? wide_hi(p.hi) : p.hi)),
        wrap(p.wrap),
        wide(p.wide) {
    const D64 d;
    const D32H d32;
    for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
      const auto s = hn::PromoteTo(d, hn::And(hn::LoadU(d32, p.shift + c), hn::Set(d32, 63)));
      hn::Store(hn::PromoteTo(d, hn::LoadU(d32, p.mult + c)), d, mult + c);
      hn::Store(s, d, shift + c);
      const DU64 du;  // (1 << s) >> 1, logical: 0 for s = 0, 2^62 for s = 63
      hn::Store(hn::BitCast(d, hn::ShiftRight<1>(hn::Set(du, 1) << hn::BitCast(du, s))), d, half + c);
      hn::Store(b ? hn::LoadU(d32, b + c) : hn::Zero(d32), d32, bias + c);
    }
    const hn::CappedTag<int32_t, N> dw;
    bool all_high = true;
    for (uint32_t c = 0; c < N; c += hn::Lanes(dw)) {
      const auto s = hn::And(hn::LoadU(dw, p.shift + c), hn::Set(dw, 63));
      all_high = all_high && hn::AllTrue(dw, hn::Gt(s, hn::Set(dw, 32)));
      hn::Store(hn::LoadU(dw, p.mult + c), dw, mult32 + c);
      hn::Store(hn::Sub(s, hn::Set(dw, 32)), dw, shift32 + c);
      // 2^(s-33); lanes with s <= 32 (then unused) shift by a count outside 0..31, which gives 0.
      hn::Store(hn::Set(dw, 1) << hn::Sub(s, hn::Set(dw, 33)), dw, add32 + c);
    }
    high = all_high;
  }

  // How rows are requantised: by 64-bit products, by the high halves (`high`), and on AVX2 by
  // the high halves sixteen lanes per store without wrap (kPacked when lo <= hi, else
  // kPackedUnordered). Fixed per instruction: with_row() picks it once, not per row.
  // kWide16 and kHigh16: kWide and kHigh storing int16 (wide destination rows).
  enum class Mode { kWide, kHigh, kPacked, kPackedUnordered, kWide16, kHigh16 };

  // Calls body(row) where row(x, y) sets y[c] = requantise(x[c] + bias[c]) for c < N, in the
  // mode of these parameters (each mode a row function of its own, so the row loop in `body`
  // tests none of them). With a wide destination, y is the 2N bytes of a wide row.
  template <class Body>
  HWY_INLINE void with_row(Body body) const {
    if (wide) {
      if (high) return body([this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kHigh16>(x, y); });
      return body([this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kWide16>(x, y); });
    }
#if HWY_TARGET == HWY_AVX2
    if constexpr (N % 16 == 0) {
      if (high && !wrap) {
        if (lo32 <= hi32)
          return body([this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kPacked>(x, y); });
        return body(
            [this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kPackedUnordered>(x, y); });
      }
    }
#endif
    if (high) return body([this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kHigh>(x, y); });
    return body([this](const int32_t* HWY_RESTRICT x, int8_t* y) HWY_ATTR { row_as<Mode::kWide>(x, y); });
  }

  // The rounding shift of v + bias by the high halves (see `high`), + zp, for the lanes c..
  template <class D>
  HWY_INLINE hn::Vec<D> high_lanes(D d, const int32_t* HWY_RESTRICT x, uint32_t c) const {
    const auto v = hn::Add(hn::LoadU(d, x + c), hn::Load(d, bias + c));  // wraps
    const auto m = hn::Load(d, mult32 + c);
    // The high halves of the exact products: even lanes' from MulEven, odd lanes' from
    // MulEven of the lanes swapped into even positions.
    const auto even = hn::BitCast(d, hn::MulEven(v, m));
    const auto odd = hn::BitCast(d, hn::MulEven(hn::Shuffle2301(v), hn::Shuffle2301(m)));
    const auto t_hi = hn::OddEven(odd, hn::Shuffle2301(even));
    return hn::Add(hn::Add(t_hi, hn::Load(d, add32 + c)) >> hn::Load(d, shift32 + c), hn::Set(d, zp32));
  }

  template <Mode M>
  HWY_INLINE void row_as(const int32_t* HWY_RESTRICT x, int8_t* y) const {
    if constexpr (M == Mode::kWide || M == Mode::kWide16) {
      const D64 d;
      const D32H d32;
      for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
        const auto v = hn::Add(hn::LoadU(d32, x + c), hn::Load(d32, bias + c));  // wraps
        const auto t = WideProduct(hn::PromoteTo(d, v), hn::Load(d, mult + c));
        const auto r = hn::Add(t, hn::Load(d, half + c)) >> hn::Load(d, shift + c);  // wraps, then arithmetic
        if constexpr (M == Mode::kWide16) {
          finish.store16(r, y + 2 * c);
        } else {
          finish.store(r, y + c);
        }
      }
    } else if constexpr (M == Mode::kHigh || M == Mode::kHigh16) {
      const hn::CappedTag<int32_t, N> d;
      const hn::RebindToUnsigned<decltype(d)> du;
      const hn::Rebind<uint8_t, decltype(d)> du8;
      const hn::Rebind<uint16_t, decltype(d)> du16;
      const auto lo = hn::Set(d, lo32), hi = hn::Set(d, hi32);
      for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
        auto r = high_lanes(d, x, c);
        r = hn::IfThenElse(hn::Lt(r, lo), lo, hn::Min(r, hi));
        if constexpr (M == Mode::kHigh16) {
          hn::StoreU(hn::TruncateTo(du16, hn::BitCast(du, r)), du16, reinterpret_cast<uint16_t*>(y + 2 * c));
        } else {
          hn::StoreU(hn::TruncateTo(du8, hn::BitCast(du, r)), du8, reinterpret_cast<uint8_t*>(y + c));
        }
      }
    } else {
#if HWY_TARGET == HWY_AVX2
      // Sixteen lanes per store: two vectors packed by signed saturation to int8, then clamped
      // in int8. Saturation keeps the clamp's result (lo and hi are int8: u < lo iff
      // sat(u) < lo, and min(sat(u), hi) = sat(min(u, hi))). With wrap the result is the low
      // byte instead, which saturation would not keep (kHigh then).
      static_assert(N % 16 == 0);
      const hn::Full256<int32_t> d;
      const __m128i lo = _mm_set1_epi8(static_cast<char>(lo32)), hi = _mm_set1_epi8(static_cast<char>(hi32));
      for (uint32_t c = 0; c < N; c += 16) {
        const __m256i a = high_lanes(d, x, c).raw, b = high_lanes(d, x, c + 8).raw;
        // packs works per 128-bit block: [a0-3 b0-3 | a4-7 b4-7] as int16; the permute puts
        // the lanes in order, and the int16 -> int8 pack of the two halves keeps it.
        const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
        const __m128i r = _mm_packs_epi16(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
        // u < lo ? lo : min(u, hi), which is max(lo, min(u, hi)) unless lo > hi.
        const __m128i below = _mm_min_epi8(r, hi);
        const __m128i clamped = M == Mode::kPacked ? _mm_max_epi8(lo, below)
                                                   : _mm_blendv_epi8(below, lo, _mm_cmpgt_epi8(lo, r));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + c), clamped);
      }
#endif
    }
  }
};

template <uint32_t N>
void RequantizeRowsN(const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y, const RowWalk& rows) {
  const HeldRequant<N> q(p, bias);
  q.with_row([&](auto requant_row) HWY_ATTR {
    for (RowCursor row(rows); !row.done(); row.next()) requant_row(x + row.src, y + row.dst);
  });
}

// Every row of the walk's output set to v.
template <uint32_t N>
void FillRowsN(int8_t v, int8_t* y, const RowWalk& rows) {
  for (RowCursor row(rows); !row.done(); row.next()) std::memset(y + row.dst, v, N);
}

void RequantizeRows(const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y, const RowWalk& rows,
                    uint32_t n) {
  if (p.lo == p.hi && !p.wrap && !p.wide) {
    // Equal clamp bounds yield that bound whatever is clamped (the compiler fills depthwise
    // padding so): the rows are written with it, no arithmetic needed for the same bits. (With
    // wrap, legal only with both bounds 0, the result is the low byte instead.)
    switch (n) {  // (a fill of a size known at compile time is a store or two, not a call)
      case 8: return FillRowsN<8>(p.lo, y, rows);
      case 16: return FillRowsN<16>(p.lo, y, rows);
      default: return FillRowsN<32>(p.lo, y, rows);
    }
  }
  switch (n) {
    case 8: return RequantizeRowsN<8>(x, bias, p, y, rows);
    case 16: return RequantizeRowsN<16>(x, bias, p, y, rows);
    default: return RequantizeRowsN<32>(x, bias, p, y, rows);
  }
}

// --- ADD / MUL ----------------------------------------------------------------------------
// With |za|, |zb| <= 2^15 and m0, m1 in int32 no product wraps: |a − za|, |b − zb| < 2^16 and
// their product < 2^31 (so it is exact in int32 lanes), each product with m0 or m1 < 2^62.
template <uint32_t N, bool kMul>
void BinaryRowsN(const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y, const RowWalk& rows) {
  const D64 d;
  const D32H d32;
  const D8Q d8;
  const auto za = hn::Set(d32, static_cast<int32_t>(p.za)), zb = hn::Set(d32, static_cast<int32_t>(p.zb));
  const auto m0 = hn::Set(d, p.m0), m1 = hn::Set(d, p.m1);
  const auto half = hn::Set(d, static_cast<int64_t>((uint64_t{1} << p.shift) >> 1));
  const int shift = static_cast<int>(p.shift);
  const Finish f(p.zp, p.lo, p.hi, p.wrap);
  for (RowCursor row(rows); !row.done(); row.next())
    for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
      const auto da = hn::Sub(hn::PromoteTo(d32, hn::LoadU(d8, a + row.src + c)), za);
      const auto db = hn::Sub(hn::PromoteTo(d32, hn::LoadU(d8, b + row.src + c)), zb);
      hn::Vec<D64> t;
      if constexpr (kMul) {
        t = WideProduct(hn::PromoteTo(d, hn::Mul(da, db)), m0);
      } else {
        t = hn::Add(WideProduct(hn::PromoteTo(d, da), m0), WideProduct(hn::PromoteTo(d, db), m1));
      }
      f.store(hn::ShiftRightSame(hn::Add(t, half), shift), y + row.dst + c);
    }
}

// MUL with a shift of 33 or more (compiled models' scales): the product (a − za)·(b − zb) is
// exact in int32 (above), and its requantisation by m0 and the shift is REQUANT's with the same
// multiplier and shift in every lane and no bias, so it runs REQUANT's 32-bit path (HeldRequant:
// the high halves of the products, whole-vector clamps), bit for bit the 64-bit result.
template <uint32_t N>
void MulRowsHigh(const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y, const RowWalk& rows) {
  alignas(64) int32_t mult[N], shift[N];
  for (uint32_t c = 0; c < N; ++c) {
    mult[c] = static_cast<int32_t>(p.m0);
    shift[c] = static_cast<int32_t>(p.shift);
  }
  const HeldRequant<N> q(RequantParams{mult, shift, p.zp, p.lo, p.hi, p.wrap}, nullptr);
  const hn::CappedTag<int32_t, N> d;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const auto za = hn::Set(d, static_cast<int32_t>(p.za)), zb = hn::Set(d, static_cast<int32_t>(p.zb));
  q.with_row([&](auto requant_row) HWY_ATTR {
    alignas(64) int32_t v[N];
    for (RowCursor row(rows); !row.done(); row.next()) {
      for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
        const auto da = hn::Sub(hn::PromoteTo(d, hn::LoadU(d8, a + row.src + c)), za);
        const auto db = hn::Sub(hn::PromoteTo(d, hn::LoadU(d8, b + row.src + c)), zb);
        hn::Store(hn::Mul(da, db), d, v + c);
      }
      requant_row(v, y + row.dst);
    }
  });
}

bool BinaryRows(const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y, const RowWalk& rows, uint32_t n) {
  auto within = [](int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  constexpr int64_t kZero = int64_t{1} << 15;
  if (!within(p.za, -kZero, kZero) || !within(p.zb, -kZero, kZero) || !within(p.m0, INT32_MIN, INT32_MAX) ||
      !within(p.m1, INT32_MIN, INT32_MAX))
    return false;
  if (p.mul && p.shift >= 33) {
    switch (n) {
      case 8: MulRowsHigh<8>(a, b, p, y, rows); return true;
      case 16: MulRowsHigh<16>(a, b, p, y, rows); return true;
      default: MulRowsHigh<32>(a, b, p, y, rows); return true;
    }
  }
  switch (n) {
    case 8: p.mul ? BinaryRowsN<8, true>(a, b, p, y, rows) : BinaryRowsN<8, false>(a, b, p, y, rows); break;
    case 16: p.mul ? BinaryRowsN<16, true>(a, b, p, y, rows) : BinaryRowsN<16, false>(a, b, p, y, rows); break;
    default: p.mul ? BinaryRowsN<32, true>(a, b, p, y, rows) : BinaryRowsN<32, false>(a, b, p, y, rows); break;
  }
  return true;
}

// --- LUT ----------------------------------------------------------------------------------
// A 256-entry byte table by 16-entry byte shuffles (pshufb on x86, tbl on ARM), which give 0
// for an index with its top bit set (TableLookupBytesOr0). With i = x + 128 = 16h + l, the
// shuffle of v = i − 16k (wrapping) picks entry l of sub-table k exactly for k <= h among k =
// 0..7 when h <= 7 (v < 128 then; for k > h it wraps to 144 or more), so the XOR of shuffles of
// the difference tables E_k = T_k ^ T_(k−1) (E_0 = T_0) over k = 0..7 is T_h[l]. The tables 8..15
// are the same with x − 16k (= i − 128 − 16k) and F_k = T_(8+k) ^ T_(7+k) (F_0 = T_8), and the
// sign of x selects the half: two shuffles, two XORs and two subtractions per sub-table pair,
// instead of a compare, a shuffle and a blend per sub-table.
using D8 = hn::ScalableTag<int8_t>;
using DU8 = hn::RebindToUnsigned<D8>;

struct HeldLut {
  alignas(64) uint8_t low[8][16];   // E_k
  alignas(64) uint8_t high[8][16];  // F_k
  int8_t lo, hi;
  // (16-byte vectors: every instruction builds its tables, and many LUTs are a few rows.)
  HeldLut(const int8_t* table, int8_t lo8, int8_t hi8) : lo(lo8), hi(hi8) {
    const hn::Full128<uint8_t> d;
    const auto* t = reinterpret_cast<const uint8_t*>(table);
    hn::Store(hn::LoadU(d, t), d, low[0]);
    hn::Store(hn::LoadU(d, t + 128), d, high[0]);
    for (uint32_t k = 1; k < 8; ++k) {
      hn::Store(hn::Xor(hn::LoadU(d, t + 16 * k), hn::LoadU(d, t + 16 * (k - 1))), d, low[k]);
      hn::Store(hn::Xor(hn::LoadU(d, t + 128 + 16 * k), hn::LoadU(d, t + 128 + 16 * (k - 1))), d, high[k]);
    }
  }
};

// The lookup of K vectors at a time: each sub-table is loaded once for all K.
template <size_t K, class D>
HWY_INLINE void LookupK(D d, const hn::Vec<D>* x, const HeldLut& t, hn::Vec<D>* y) {
  const hn::RebindToUnsigned<D> du;
  using VU = hn::Vec<decltype(du)>;
  VU v[K], w[K], low[K], high[K];
  for (size_t i = 0; i < K; ++i) {
    v[i] = hn::Xor(hn::BitCast(du, x[i]), hn::Set(du, 0x80));  // i − 16k
    w[i] = hn::BitCast(du, x[i]);                               // i − 128 − 16k
    low[i] = high[i] = hn::Zero(du);
  }
  const auto step = hn::Set(du, 16);
  for (uint32_t k = 0; k < 8; ++k) {
    const auto tl = hn::LoadDup128(du, t.low[k]), th = hn::LoadDup128(du, t.high[k]);
    for (size_t i = 0; i < K; ++i) {
      low[i] = hn::Xor(low[i], hn::TableLookupBytesOr0(tl, v[i]));
      high[i] = hn::Xor(high[i], hn::TableLookupBytesOr0(th, w[i]));
      v[i] = hn::Sub(v[i], step);
      w[i] = hn::Sub(w[i], step);
#if HWY_ARCH_X86
      // One subtraction and one XOR per step, in registers (GCC 12 otherwise computes every
      // i − 16k from i with its own constant and XORs the shuffles as a tree, which with the
      // tables does not fit the registers and spills).
      asm("" : "+x"(v[i].raw), "+x"(w[i].raw), "+x"(low[i].raw), "+x"(high[i].raw));
#endif
    }
  }
  const auto lo = hn::Set(d, t.lo), hi = hn::Set(d, t.hi);
  for (size_t i = 0; i < K; ++i) {
    const auto s = hn::IfThenElse(hn::Lt(x[i], hn::Zero(d)), hn::BitCast(d, low[i]), hn::BitCast(d, high[i]));
    y[i] = hn::IfThenElse(hn::Lt(s, lo), lo, hn::Min(s, hi));
  }
}

template <class D>
HWY_INLINE hn::Vec<D> Lookup(D d, hn::Vec<D> x, const HeldLut& t) {
  hn::Vec<D> y;
  LookupK<1>(d, &x, t, &y);
  return y;
}

void LutRows(const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y, const RowWalk& rows,
             uint32_t n) {
  const HeldLut t(table, lo, hi);
  const D8 d;
  const size_t lanes = hn::Lanes(d);
  // LUT is per byte, so when the walk's rows are one contiguous run on both sides (an
  // elementwise layer over a whole tensor) it runs a vector at a time. That equals the row
  // order when the output does not start after the input inside it (y <= x, or disjoint): a
  // byte is then overwritten only by the result of a byte at or after it, and each block is
  // read completely before it is written.
  const ptrdiff_t total = ptrdiff_t{rows.o_count} * rows.r_count * n;
  const auto x_at = reinterpret_cast<uintptr_t>(x), y_at = reinterpret_cast<uintptr_t>(y);
  const bool one_run = walk_is_one_run(rows, n) && (y_at <= x_at || y_at >= x_at + static_cast<uintptr_t>(total));
  if (one_run && total >= static_cast<ptrdiff_t>(lanes)) {
    ptrdiff_t at = 0;
    // Two vectors at a time (each read before either is stored: the same bytes as one by one).
    for (; at + 2 * static_cast<ptrdiff_t>(lanes) <= total; at += 2 * static_cast<ptrdiff_t>(lanes)) {
      const hn::Vec<D8> in[2] = {hn::LoadU(d, x + at), hn::LoadU(d, x + at + lanes)};
      hn::Vec<D8> out[2];
      LookupK<2>(d, in, t, out);
      hn::StoreU(out[0], d, y + at);
      hn::StoreU(out[1], d, y + at + lanes);
    }
    for (; at + static_cast<ptrdiff_t>(lanes) <= total; at += static_cast<ptrdiff_t>(lanes))
      hn::StoreU(Lookup(d, hn::LoadU(d, x + at), t), d, y + at);
    // The tail byte by byte, in order (as the portable kernel).
    for (; at < total; ++at) y[at] = vec_clamp(table[x[at] + 128], lo, hi);
    return;
  }
  // Row by row, a row of n lanes at a time (n <= 32: partial vectors through a buffer).
  alignas(64) int8_t in[HWY_MAX_BYTES > 32 ? HWY_MAX_BYTES : 32] = {};
  alignas(64) int8_t out[HWY_MAX_BYTES > 32 ? HWY_MAX_BYTES : 32];
  for (RowCursor row(rows); !row.done(); row.next()) {
    std::memcpy(in, x + row.src, n);
    for (uint32_t c = 0; c < n; c += static_cast<uint32_t>(lanes)) hn::Store(Lookup(d, hn::Load(d, in + c), t), d, out + c);
    std::memcpy(y + row.dst, out, n);
  }
}

// --- LUT with a wide source (ISA 1.4) -----------------------------------------------------
// vec_lut_interpolate in int32 lanes: one 32-bit gather per lane at byte offset 2i of the
// int16 table reads T[i] (low half, little-endian) and T[i + 1] (high half) together; i <= 255,
// so the word lies inside the 257 entries. A row's lanes are all computed before any is stored
// (an int8 destination may overlap the second half of its own wide source row).
template <uint32_t N, bool kWideDst>
void LutRowsWideN(const int16_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y, const RowWalk& rows) {
  const hn::CappedTag<int32_t, N> d;
  const hn::RebindToUnsigned<decltype(d)> du;
  const hn::Rebind<int16_t, decltype(d)> d16x;
  const hn::Rebind<uint16_t, decltype(d)> du16;
  const hn::Rebind<uint8_t, decltype(d)> du8;
  const auto* words = reinterpret_cast<const int32_t*>(table);
  const auto vlo = hn::Set(d, kWideDst ? wide_lo(lo) : lo), vhi = hn::Set(d, kWideDst ? wide_hi(hi) : hi);
  const auto round = hn::Set(d, kWideDst ? 128 : 32768);
  const auto bias = hn::Set(d, 128), low_bits = hn::Set(d, 255);
  using V = hn::Vec<decltype(d)>;
  constexpr size_t kMaxVecs = N;  // (at least one lane per vector)
  for (RowCursor row(rows); !row.done(); row.next()) {
    const auto* xr = reinterpret_cast<const int16_t*>(x + row.src);
    V out[kMaxVecs];
    size_t v = 0;
    for (uint32_t c = 0; c < N; c += hn::Lanes(d), ++v) {
      const auto xv = hn::PromoteTo(d, hn::LoadU(d16x, xr + c));
      const auto pair = hn::GatherOffset(d, words, hn::ShiftLeft<1>(hn::Add(hn::ShiftRight<8>(xv), bias)));
      const auto t0 = hn::ShiftRight<16>(hn::ShiftLeft<16>(pair)), t1 = hn::ShiftRight<16>(pair);
      const auto t = hn::Add(hn::ShiftLeft<8>(t0), hn::Mul(hn::Sub(t1, t0), hn::And(xv, low_bits)));
      const auto r = kWideDst ? hn::ShiftRight<8>(hn::Add(t, round)) : hn::ShiftRight<16>(hn::Add(t, round));
      out[v] = hn::IfThenElse(hn::Lt(r, vlo), vlo, hn::Min(r, vhi));
    }
    v = 0;
    for (uint32_t c = 0; c < N; c += hn::Lanes(d), ++v) {
      if constexpr (kWideDst) {
        hn::StoreU(hn::TruncateTo(du16, hn::BitCast(du, out[v])), du16, reinterpret_cast<uint16_t*>(y + row.dst) + c);
      } else {
        hn::StoreU(hn::TruncateTo(du8, hn::BitCast(du, out[v])), du8, reinterpret_cast<uint8_t*>(y + row.dst) + c);
      }
    }
  }
}

void LutRowsWide(const int16_t* table, const int8_t* x, int8_t lo, int8_t hi, bool wide_dst, int8_t* y,
                 const RowWalk& rows, uint32_t n) {
  auto run = [&]<uint32_t N>(std::integral_constant<uint32_t, N>) {
    return wide_dst ? LutRowsWideN<N, true>(table, x, lo, hi, y, rows) : LutRowsWideN<N, false>(table, x, lo, hi, y, rows);
  };
  switch (n) {
    case 8: return run(std::integral_constant<uint32_t, 8>{});
    case 16: return run(std::integral_constant<uint32_t, 16>{});
    default: return run(std::integral_constant<uint32_t, 32>{});
  }
}

// a[2i]·b[2i] + a[2i+1]·b[2i+1] per int32 lane i (vpmaddwd on x86; Highway 1.0.3 has no
// WidenMulPairwiseAdd, and adding the zero sums folds away).
template <class D, class V16>
HWY_INLINE hn::Vec<D> Madd(D d, V16 a, V16 b) {
  auto odd = hn::Zero(d);
  const auto even = hn::ReorderWidenMulAccumulate(d, a, b, hn::Zero(d), odd);
  return hn::RearrangeToOddPlusEven(even, odd);
}

// --- window reductions (MAXPOOL, AVGPOOL, and DWCONV's sum) --------------------------------
template <uint32_t N, WindowOp Op>
void WindowReduceN(const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh, const int8_t* w, int32_t* sum) {
  const hn::CappedTag<int32_t, N> d;
  const hn::Rebind<int8_t, decltype(d)> d8;
  for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
    auto acc = Op == WindowOp::kMax ? hn::Set(d, INT32_MIN) : hn::Zero(d);
    for (uint32_t ky = 0; ky < kh; ++ky) {
      const int8_t* xr = x + ky * row_stride + c;
      for (uint32_t kx = 0; kx < kw; ++kx, xr += N) {
        const auto xv = hn::PromoteTo(d, hn::LoadU(d8, xr));
        if constexpr (Op == WindowOp::kMax) {
          acc = hn::Max(acc, xv);
        } else if constexpr (Op == WindowOp::kAdd) {
          acc = hn::Add(acc, xv);
        } else {
          const int8_t* wr = w + static_cast<size_t>(ky * kw + kx) * N + c;
          acc = hn::Add(acc, hn::Mul(xv, hn::PromoteTo(d, hn::LoadU(d8, wr))));
        }
      }
    }
    hn::StoreU(acc, d, sum + c);
  }
}

// DWCONV's window sum over wide taps (Window::wide) of any size, the weights read per tap.
template <uint32_t N>
void WideWindowMacN(const int8_t* x, const Window& win, int32_t* sum) {
  const hn::CappedTag<int32_t, N> d;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const hn::Rebind<int16_t, decltype(d)> d16x;
  for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
    auto acc = hn::Zero(d);
    for (uint32_t ky = 0; ky < win.kh; ++ky)
      for (uint32_t kx = 0; kx < win.kw; ++kx) {
        const int8_t* xr = x + ky * win.row_stride + (kx * N + c) * 2;
        const int8_t* wr = win.weights + static_cast<size_t>(ky * win.kw + kx) * N + c;
        acc = hn::Add(acc, hn::Mul(hn::PromoteTo(d, hn::LoadU(d16x, reinterpret_cast<const int16_t*>(xr))),
                                   hn::PromoteTo(d, hn::LoadU(d8, wr))));
      }
    hn::StoreU(acc, d, sum + c);
  }
}

template <uint32_t N>
void WindowReduceOp(WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh, const int8_t* w,
                    int32_t* sum) {
  switch (op) {
    case WindowOp::kMax: return WindowReduceN<N, WindowOp::kMax>(x, row_stride, kw, kh, w, sum);
    case WindowOp::kAdd: return WindowReduceN<N, WindowOp::kAdd>(x, row_stride, kw, kh, w, sum);
    case WindowOp::kMac: return WindowReduceN<N, WindowOp::kMac>(x, row_stride, kw, kh, w, sum);
  }
}

void WindowReduce(WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh, const int8_t* w,
                  uint32_t n, int32_t* sum) {
  switch (n) {
    case 8: return WindowReduceOp<8>(op, x, row_stride, kw, kh, w, sum);
    case 16: return WindowReduceOp<16>(op, x, row_stride, kw, kh, w, sum);
    default: return WindowReduceOp<32>(op, x, row_stride, kw, kh, w, sum);
  }
}

// --- DWCONV -------------------------------------------------------------------------------
// The tap weights are widened once per instruction, as int16 in the low half of each int32
// lane with a zero high half, so that a widening multiply-add of int16 pairs (vpmaddwd) against
// a sign-extended activation is the exact product x·w (the high halves multiply by 0). The int32
// sum is exact (|Σ| < 2^31), so the tap order does not matter. kKw, kKh: the window when known
// at compile time (3×3 and 5×5, the depthwise convolutions of CNNs), 0 to take it from `win`.
// requant_row: HeldRequant::with_row's row function. kWideSrc: the taps are wide rows
// (Window::wide), whose int16 lanes sign-extend the same way.
template <uint32_t N, uint32_t kKw, uint32_t kKh, bool kWideSrc, class RequantRow>
void DwconvRowsHeld(const int8_t* x, const Window& win, const int32_t* weights, RequantRow requant_row, int8_t* y,
                    const RowWalk& rows) {
  const hn::CappedTag<int32_t, N> d;
  const hn::Repartition<int16_t, decltype(d)> d16;
  const hn::Rebind<int8_t, decltype(d)> d8;
  const hn::Rebind<int16_t, decltype(d)> d16x;  // one int16 per int32 lane
  constexpr uint32_t kBytes = kWideSrc ? 2 : 1;  // per element
  const uint32_t kw = kKw ? kKw : win.kw, kh = kKh ? kKh : win.kh;
  const ptrdiff_t row_stride = win.row_stride;
  alignas(64) int32_t sum[N];
  for (RowCursor row(rows); !row.done(); row.next()) {
    for (uint32_t c = 0; c < N; c += hn::Lanes(d)) {
      auto acc = hn::Zero(d), odd = hn::Zero(d);
      for (uint32_t ky = 0; ky < kh; ++ky) {
        const int8_t* xr = x + row.src + ky * row_stride + c * kBytes;
        for (uint32_t kx = 0; kx < kw; ++kx) {
          hn::Vec<decltype(d)> xv;
          if constexpr (kWideSrc) {
            xv = hn::PromoteTo(d, hn::LoadU(d16x, reinterpret_cast<const int16_t*>(xr + kx * N * kBytes)));
          } else {
            xv = hn::PromoteTo(d, hn::LoadU(d8, xr + kx * N));
          }
          const auto wv = hn::Load(d, weights + size_t{ky * kw + kx} * N + c);
          acc = hn::ReorderWidenMulAccumulate(d, hn::BitCast(d16, xv), hn::BitCast(d16, wv), acc, odd);
        }
      }
      hn::Store(hn::RearrangeToOddPlusEven(acc, odd), d, sum + c);
    }
    requant_row(sum, y + row.dst);
  }
}

#if HWY_TARGET == HWY_AVX2
// AVX2, N a multiple of 16: taps in pairs. The bytes of two taps interleaved (punpck) and
// sign-extended to int16 (one vpmovsxbw per 8 columns) meet the two taps' weights as int16
// pairs in one vpmaddwd: 8 instructions per 16 lanes and 2 taps instead of 12 (a widening and
// a multiply-add per tap and 8 lanes). An odd last tap pairs with zero weights (and the same
// activation bytes, which multiply by 0). The sums are exact in int32, as above.
template <uint32_t N, uint32_t kKw, uint32_t kKh, class RequantRow>
void DwconvRowsTapPairs(const int8_t* x, const Window& win, const int16_t* pairs, RequantRow requant_row, int8_t* y,
                        const RowWalk& rows) {
  const hn::Full128<int8_t> d8;
  const hn::Full256<int16_t> d16;
  const hn::Full256<int32_t> d32;
  const uint32_t kw = kKw ? kKw : win.kw, taps = (kKw ? kKw : win.kw) * (kKh ? kKh : win.kh);
  const ptrdiff_t row_stride = win.row_stride;
  auto tap_at = [&](const int8_t* base, uint32_t t) { return base + (t / kw) * row_stride + (t % kw) * N; };
  alignas(64) int32_t sum[N];
  for (RowCursor row(rows); !row.done(); row.next()) {
    const int8_t* base = x + row.src;
    for (uint32_t c = 0; c < N; c += 16) {
      auto acc0 = hn::Zero(d32), acc1 = hn::Zero(d32);
      for (uint32_t t = 0; t < taps; t += 2) {
        const auto a = hn::LoadU(d8, tap_at(base, t) + c);
        const auto b = t + 1 < taps ? hn::LoadU(d8, tap_at(base, t + 1) + c) : a;
        const int16_t* w = pairs + size_t{t / 2} * N * 2 + c * 2;
        acc0 = hn::Add(acc0, Madd(d32, hn::PromoteTo(d16, hn::InterleaveLower(d8, a, b)), hn::Load(d16, w)));
        acc1 = hn::Add(acc1, Madd(d32, hn::PromoteTo(d16, hn::InterleaveUpper(d8, a, b)), hn::Load(d16, w + 16)));
      }
      hn::Store(acc0, d32, sum + c);
      hn::Store(acc1, d32, sum + c + 8);
    }
    requant_row(sum, y + row.dst);
  }
}
#endif

template <uint32_t N>
void DwconvRowsN(const int8_t* x, const Window& win, const int32_t* bias, const RequantParams& p, int8_t* y,
                 const RowWalk& rows) {
  constexpr uint32_t kMaxHeldTaps = 64;
  const uint32_t taps = win.kw * win.kh;
  const HeldRequant<N> q(p, bias);
#if HWY_TARGET == HWY_AVX2
  if constexpr (N % 16 == 0) {
    if (taps <= kMaxHeldTaps && !win.wide) {
      // pairs[(t/2)·2N + 2c + h] = weight of tap t + h, lane c (0 past the last tap).
      alignas(64) int16_t pairs[(kMaxHeldTaps / 2) * N * 2];
      for (uint32_t t = 0; t < taps; t += 2)
        for (uint32_t c = 0; c < N; ++c) {
          pairs[(t / 2) * N * 2 + 2 * c] = win.weights[size_t{t} * N + c];
          pairs[(t / 2) * N * 2 + 2 * c + 1] = t + 1 < taps ? win.weights[size_t{t + 1} * N + c] : int16_t{0};
        }
      return q.with_row([&](auto requant_row) HWY_ATTR {
        if (win.kw == 3 && win.kh == 3) return DwconvRowsTapPairs<N, 3, 3>(x, win, pairs, requant_row, y, rows);
        if (win.kw == 5 && win.kh == 5) return DwconvRowsTapPairs<N, 5, 5>(x, win, pairs, requant_row, y, rows);
        return DwconvRowsTapPairs<N, 0, 0>(x, win, pairs, requant_row, y, rows);
      });
    }
  }
#endif
  if (taps <= kMaxHeldTaps) {
    alignas(64) int32_t weights[kMaxHeldTaps * N];
    const hn::CappedTag<int32_t, N> d;
    const hn::Rebind<int8_t, decltype(d)> d8;
    for (uint32_t t = 0; t < taps * N; t += hn::Lanes(d))  // the low 16 bits of the sign extension
      hn::Store(hn::And(hn::PromoteTo(d, hn::LoadU(d8, win.weights + t)), hn::Set(d, 0xFFFF)), d, weights + t);
    return q.with_row([&](auto requant_row) HWY_ATTR {
      if (win.wide) {
        if (win.kw == 3 && win.kh == 3) return DwconvRowsHeld<N, 3, 3, true>(x, win, weights, requant_row, y, rows);
        return DwconvRowsHeld<N, 0, 0, true>(x, win, weights, requant_row, y, rows);
      }
      if (win.kw == 3 && win.kh == 3) return DwconvRowsHeld<N, 3, 3, false>(x, win, weights, requant_row, y, rows);
      if (win.kw == 5 && win.kh == 5) return DwconvRowsHeld<N, 5, 5, false>(x, win, weights, requant_row, y, rows);
      return DwconvRowsHeld<N, 0, 0, false>(x, win, weights, requant_row, y, rows);
    });
  }
  q.with_row([&](auto requant_row) HWY_ATTR {
    alignas(64) int32_t sum[N];
    for (RowCursor row(rows); !row.done(); row.next()) {
      if (win.wide) {
        WideWindowMacN<N>(x + row.src, win, sum);
      } else {
        WindowReduceN<N, WindowOp::kMac>(x + row.src, win.row_stride, win.kw, win.kh, win.weights, sum);
      }
      requant_row(sum, y + row.dst);
    }
  });
}

void DwconvRows(const int8_t* x, const Window& win, const int32_t* bias, const RequantParams& p, int8_t* y,
                const RowWalk& rows, uint32_t n) {
  switch (n) {
    case 8: return DwconvRowsN<8>(x, win, bias, p, y, rows);
    case 16: return DwconvRowsN<16>(x, win, bias, p, y, rows);
    default: return DwconvRowsN<32>(x, win, bias, p, y, rows);
  }
}

// --- GEMM on int16 k-pairs ------
// The k-pairs of PackPairs: pack_pair(r0, r1, out, n) packs rows 2j and 2j+1 as pair j and
// returns whether any of their weights is non-zero. kN: n when known at compile time (16 on
// AVX2, unrolled: a tile is packed for about every GEMM instruction, as the weight scratchpad
// is reloaded), else 0.
template <uint32_t kN, class PackPair>
HWY_INLINE uint32_t PackPairsWith(const int8_t* tile, uint32_t n_arg, int16_t* pairs, PackPair pack_pair) {
  const uint32_t n = kN != 0 ? kN : n_arg;
  uint32_t live = 0;
#pragma GCC unroll 16
  for (uint32_t j = 0; j < n / 2; ++j) {
    const int8_t* r0 = tile + size_t{2 * j} * n;
    if (pack_pair(r0, r0 + n, pairs + size_t{j} * n * 2, n)) live = j + 1;
  }
  return live;
}

// Rows 2j and 2j+1, sign-extended to int16 eight columns at a time and interleaved (128-bit
// vectors, so that the interleave does not work per block of a wider one).
// With 256-bit vectors or wider, sixteen columns at a time: the two rows' bytes are
// interleaved first (128-bit, so in column order) and each half then sign-extended to sixteen
// int16, two shuffles and two extensions per 16 columns instead of four extensions and four
// shuffles. The live pairs are found from the same loads (an OR of the two rows per pair).
uint32_t PackPairs(const int8_t* tile, uint32_t n, int16_t* pairs) {
#if HWY_TARGET <= HWY_AVX2
  if (n % 16 == 0) {
    auto wide = [](const int8_t* r0, const int8_t* r1, int16_t* out, uint32_t cols) HWY_ATTR {
      const hn::Full128<int8_t> d8;
      const hn::Rebind<int16_t, decltype(d8)> d16w;  // sixteen int16
      auto any = hn::Zero(d8);
      for (uint32_t c = 0; c < cols; c += 16) {
        const auto a = hn::LoadU(d8, r0 + c), b = hn::LoadU(d8, r1 + c);
        hn::StoreU(hn::PromoteTo(d16w, hn::InterleaveLower(d8, a, b)), d16w, out + c * 2);
        hn::StoreU(hn::PromoteTo(d16w, hn::InterleaveUpper(d8, a, b)), d16w, out + c * 2 + 16);
        any = hn::Or(any, hn::Or(a, b));
      }
      return !hn::AllTrue(d8, hn::Eq(any, hn::Zero(d8)));
    };
    return n == 16 ? PackPairsWith<16>(tile, n, pairs, wide) : PackPairsWith<0>(tile, n, pairs, wide);
  }
#endif
  return PackPairsWith<0>(tile, n, pairs, [](const int8_t* r0, const int8_t* r1, int16_t* out, uint32_t cols) HWY_ATTR {
    const hn::CappedTag<int16_t, 8> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    auto any = hn::Zero(d16);
    for (uint32_t c = 0; c < cols; c += 8) {
      const auto a = hn::PromoteTo(d16, hn::LoadU(d8, r0 + c)), b = hn::PromoteTo(d16, hn::LoadU(d8, r1 + c));
      hn::StoreU(hn::InterleaveLower(d16, a, b), d16, out + c * 2);
      hn::StoreU(hn::InterleaveUpper(d16, a, b), d16, out + c * 2 + 8);
      any = hn::Or(any, hn::Or(a, b));
    }
    return !hn::AllTrue(d16, hn::Eq(any, hn::Zero(d16)));
  });
}

// A widening multiply-add of int16 pairs (vpmaddwd on x86) does two MACs per int32 lane:
// with the tile packed as k-pairs and the activation pair broadcast, one instruction covers
// a pair of k for a vector of output columns. Rows are batched (independent accumulator
// chains hide the instruction's latency) across the whole O×R walk, in (o, r) order, then
// applied to the accumulators one after another, so aliasing accumulator rows still see
// sequential updates.
//
// The k-pairs unrolled for each live_pairs of 1..8 (every tile of N <= 16; N = 32 tiles with
// more live pairs run a loop).
template <uint32_t N>
constexpr uint32_t LiveOrLoop(uint32_t live) {
  return live <= N / 2 ? live : 0;  // (an n×n tile has n/2 k-pairs)
}

// A GEMM row's N activations as int16 at `out`: sign-extended bytes, or with kWide the row's
// int16 as they are (a wide row, little-endian as x86 stores them).
template <uint32_t N, bool kWide>
HWY_INLINE void ActivationsAsInt16(const int8_t* a, int16_t* out) {
  if constexpr (kWide) {
    std::memcpy(out, a, N * sizeof(int16_t));
  } else {
    const hn::CappedTag<int16_t, N> d16;
    const hn::Rebind<int8_t, decltype(d16)> d8;
    for (uint32_t c = 0; c < N; c += hn::Lanes(d16)) hn::Store(hn::PromoteTo(d16, hn::LoadU(d8, a + c)), d16, out + c);
  }
}

// Activation pair j (a16[2j], a16[2j + 1]) in every int32 lane of d, as int16 pairs: the
// int32 at element 2j, broadcast by one load (vpbroadcastd).
template <class D>
HWY_INLINE hn::Vec<hn::Repartition<int16_t, D>> BroadcastPair(D d, const int16_t* a16, uint32_t j) {
  int32_t pair;
  std::memcpy(&pair, a16 + 2 * j, 4);
  return hn::BitCast(hn::Repartition<int16_t, D>(), hn::Set(d, pair));
}

// The case of a row of N int32 in exactly two vectors (N = 16 on AVX2, the MobileNet-sized
// array on a CPU without AVX-512; N = 8 on SSE4, N = 32 on AVX-512): four rows at a time, with
// the eight accumulators named, so that they stay in registers with no moves between k-pairs
// (the generic loop below keeps them in arrays, which GCC 12 shuffles between registers every
// k-pair) and the first k-pair's products start the sums instead of an addition to zero.
// The rows' sums run over `tile_count` tiles (tile t reads the activations at + t·act_st)
// before the accumulators are updated once (mac_rows_2d_tiles' contract).
// kLive, when not 0, is the last tile's live_pairs, and the other tiles' too unless
// kFullFirst, when all N/2 pairs of the others are live: the k-pairs are then unrolled at
// compile time (when N <= 16 for the N/2; no loop counter, no branch, constant weight offsets;
// GCC 12 also left two register moves per iteration in the loop).
// Same walk, order and wrapping as below.
// (The cursor is the function's own: one passed by reference lives in memory, stored every row.)
template <uint32_t N, bool kWide, uint32_t kLive, bool kFullFirst, class D>
HWY_NOINLINE void MacRows2dTwoVecsLive(D d, const PackedTile* const* tiles, uint32_t tile_count, ptrdiff_t act_st,
                                       const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
                                       ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count,
                                       bool overwrite) {
  GemmRowCursor cursor(act, act_so, act_sr, acc, acc_so, acc_sr, r_count);
  const uint64_t rows = uint64_t{o_count} * r_count;
  const hn::Repartition<int16_t, D> d16;
  using V = hn::Vec<D>;
  const size_t lanes = hn::Lanes(d);
  auto widen = [](const int8_t* a, int16_t* out) HWY_ATTR { ActivationsAsInt16<N, kWide>(a, out); };
  auto pair_of = [&](const int16_t* a16, uint32_t j) HWY_ATTR { return BroadcastPair(d, a16, j); };
  auto apply = [&](int32_t* row, V p0, V p1) {
    hn::StoreU(overwrite ? p0 : hn::Add(hn::LoadU(d, row), p0), d, row);
    hn::StoreU(overwrite ? p1 : hn::Add(hn::LoadU(d, row + lanes), p1), d, row + lanes);
  };
  // Pairs from a tile's live_pairs on are zero (PackedTile); pair 0 starts the sums either way.
  const PackedTile& last = *tiles[tile_count - 1];
  const uint32_t live = kLive != 0 ? kLive : last.live_pairs;
  using Full = std::integral_constant<uint32_t, (N / 2 <= 8 ? N / 2 : 0)>;
  using Last = std::integral_constant<uint32_t, kLive>;
  uint64_t k = 0;
  for (; k + 4 <= rows; k += 4) {
    const int8_t* a_row[4];
    int32_t* acc_row[4];
    cursor.next(a_row, acc_row, 4);
    alignas(64) int16_t a16[4][N];
    for (uint32_t b = 0; b < 4; ++b) widen(a_row[b], a16[b]);
    const int16_t* HWY_RESTRICT pairs = tiles[0]->pairs;
    auto w0 = hn::Load(d16, pairs), w1 = hn::Load(d16, pairs + lanes * 2);
    auto a = pair_of(a16[0], 0);
    V c00 = Madd(d, a, w0), c01 = Madd(d, a, w1);
    a = pair_of(a16[1], 0);
    V c10 = Madd(d, a, w0), c11 = Madd(d, a, w1);
    a = pair_of(a16[2], 0);
    V c20 = Madd(d, a, w0), c21 = Madd(d, a, w1);
    a = pair_of(a16[3], 0);
    V c30 = Madd(d, a, w0), c31 = Madd(d, a, w1);
    auto step = [&](uint32_t j) HWY_ATTR __attribute__((always_inline)) {
      const int16_t* w = pairs + static_cast<size_t>(j) * N * 2;
      w0 = hn::Load(d16, w);
      w1 = hn::Load(d16, w + lanes * 2);
      a = pair_of(a16[0], j);
      c00 = hn::Add(c00, Madd(d, a, w0));
      c01 = hn::Add(c01, Madd(d, a, w1));
      a = pair_of(a16[1], j);
      c10 = hn::Add(c10, Madd(d, a, w0));
      c11 = hn::Add(c11, Madd(d, a, w1));
      a = pair_of(a16[2], j);
      c20 = hn::Add(c20, Madd(d, a, w0));
      c21 = hn::Add(c21, Madd(d, a, w1));
      a = pair_of(a16[3], j);
      c30 = hn::Add(c30, Madd(d, a, w0));
      c31 = hn::Add(c31, Madd(d, a, w1));
#if HWY_ARCH_X86
      // Each sum stays in its register across k-pairs (GCC 12 otherwise adds into the
      // product's register and moves the sum back, eight moves per k-pair).
      asm("" : "+x"(c00.raw), "+x"(c01.raw), "+x"(c10.raw), "+x"(c11.raw), "+x"(c20.raw), "+x"(c21.raw),
          "+x"(c30.raw), "+x"(c31.raw));
#endif
    };
    // Pairs kFrom .. count - 1 of the tile at `pairs`, unrolled when the count is known (kCount).
    auto steps = [&]<uint32_t kFrom, uint32_t kCount>(std::integral_constant<uint32_t, kFrom>,
                                                      std::integral_constant<uint32_t, kCount>, uint32_t count)
                     HWY_ATTR __attribute__((always_inline)) {
      if constexpr (kCount != 0) {
        [&]<size_t... J>(std::index_sequence<J...>) HWY_ATTR __attribute__((always_inline)) {
          (step(static_cast<uint32_t>(kFrom + J)), ...);
        }(std::make_index_sequence<kCount - kFrom>{});
      } else {
#pragma GCC unroll 1
        for (uint32_t j = kFrom; j < count; ++j) step(j);
      }
    };
    using Zero = std::integral_constant<uint32_t, 0>;
    using One = std::integral_constant<uint32_t, 1>;
    if constexpr (kFullFirst) {
      steps(One{}, Full{}, N / 2);
    } else {
      steps(One{}, Last{}, live);
    }
    for (uint32_t t = 1; t < tile_count; ++t) {
      pairs = tiles[t]->pairs;
      for (uint32_t b = 0; b < 4; ++b) widen(a_row[b] + t * act_st, a16[b]);
      if (kFullFirst && t + 1 < tile_count) {
        steps(Zero{}, Full{}, N / 2);
      } else {
        steps(Zero{}, Last{}, live);
      }
    }
    apply(acc_row[0], c00, c01);
    apply(acc_row[1], c10, c11);
    apply(acc_row[2], c20, c21);
    apply(acc_row[3], c30, c31);
  }
  for (; k < rows; ++k) {
    const int8_t* a_row;
    int32_t* acc_row;
    cursor.next(&a_row, &acc_row);
    V c0 = hn::Zero(d), c1 = hn::Zero(d);
    for (uint32_t t = 0; t < tile_count; ++t) {
      alignas(64) int16_t a16[N];
      widen(a_row + t * act_st, a16);
      const int16_t* HWY_RESTRICT pairs = tiles[t]->pairs;
      for (uint32_t j = 0; j < tiles[t]->live_pairs; ++j) {
        const int16_t* w = pairs + static_cast<size_t>(j) * N * 2;
        const auto a = pair_of(a16, j);
        c0 = hn::Add(c0, Madd(d, a, hn::Load(d16, w)));
        c1 = hn::Add(c1, Madd(d, a, hn::Load(d16, w + lanes * 2)));
      }
    }
    apply(acc_row, c0, c1);
  }
}

// MacRows2dTwoVecsLive for the tiles' live_pairs: all the same, or all N/2 but the last's;
// other tiles run one at a time, in order.
template <uint32_t N, bool kWide, class D>
HWY_INLINE void MacRows2dTwoVecs(D d, const PackedTile* const* tiles, uint32_t tile_count, ptrdiff_t act_st,
                                 const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
                                 ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  const uint32_t live = tiles[tile_count - 1]->live_pairs;
  bool same = true, full = true;
  for (uint32_t t = 0; t + 1 < tile_count; ++t) {
    same = same && tiles[t]->live_pairs == live;
    full = full && tiles[t]->live_pairs == N / 2;
  }
  if (!same && !full) {
    for (uint32_t t = 0; t < tile_count; ++t)
      MacRows2dTwoVecs<N, kWide>(d, tiles + t, 1, 0, act + t * act_st, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count,
                          overwrite && t == 0);
    return;
  }
#define NPU_MAC_TWO_VECS(kLive)                                                                                      \
  (same ? MacRows2dTwoVecsLive<N, kWide, LiveOrLoop<N>(kLive), false>(d, tiles, tile_count, act_st, act, act_so, act_sr,   \
                                                                 acc, acc_so, acc_sr, o_count, r_count, overwrite) \
        : MacRows2dTwoVecsLive<N, kWide, LiveOrLoop<N>(kLive), true>(d, tiles, tile_count, act_st, act, act_so, act_sr,    \
                                                                acc, acc_so, acc_sr, o_count, r_count, overwrite))
  switch (live) {
    case 1: return NPU_MAC_TWO_VECS(1);
    case 2: return NPU_MAC_TWO_VECS(2);
    case 3: return NPU_MAC_TWO_VECS(3);
    case 4: return NPU_MAC_TWO_VECS(4);
    case 5: return NPU_MAC_TWO_VECS(5);
    case 6: return NPU_MAC_TWO_VECS(6);
    case 7: return NPU_MAC_TWO_VECS(7);
    case 8: return NPU_MAC_TWO_VECS(8);
    default: return NPU_MAC_TWO_VECS(0);
  }
#undef NPU_MAC_TWO_VECS
}

// The most vectors a row of N int32 takes on this target.
template <uint32_t N>
constexpr size_t MaxVecs() {
  return N / (HWY_MAX_BYTES / 4 < N ? HWY_MAX_BYTES / 4 : N);
}

// Any other row size: the rows' sums in arrays of vectors (one tile).
template <uint32_t N, bool kWide>
void MacRows2dN(const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
                ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  const hn::CappedTag<int32_t, N> d;
  const hn::Repartition<int16_t, decltype(d)> d16;
  using V = hn::Vec<decltype(d)>;
  constexpr size_t kMaxVecs = MaxVecs<N>();
  const size_t lanes = hn::Lanes(d), vecs = N / lanes;
  constexpr uint32_t kBatch = kMaxVecs <= 2 ? 4 : 2;
  GemmRowCursor cursor(act, act_so, act_sr, acc, acc_so, acc_sr, r_count);
  // A row's activations sign-extended to int16 once (vectors), so that pair j is the int32 at
  // element 2j, broadcast by one load (vpbroadcastd) instead of being assembled from two bytes.
  auto widen = [](const int8_t* a, int16_t* out) HWY_ATTR { ActivationsAsInt16<N, kWide>(a, out); };
  auto pair_of = [&](const int16_t* a16, uint32_t j) HWY_ATTR { return BroadcastPair(d, a16, j); };
  auto apply = [&](int32_t* row, const V* p, const V* odd) {
    for (size_t v = 0; v < vecs; ++v) {
      const V sum = hn::RearrangeToOddPlusEven(p[v], odd[v]);
      hn::StoreU(overwrite ? sum : hn::Add(hn::LoadU(d, row + v * lanes), sum), d, row + v * lanes);
    }
  };
  const uint64_t rows = uint64_t{o_count} * r_count;
  uint64_t k = 0;
  for (; k + kBatch <= rows; k += kBatch) {
    const int8_t* a_row[kBatch];
    int32_t* acc_row[kBatch];
    cursor.next(a_row, acc_row, kBatch);
    alignas(64) int16_t a16[kBatch][N];
    for (uint32_t b = 0; b < kBatch; ++b) widen(a_row[b], a16[b]);
    V p[kBatch][kMaxVecs], odd[kBatch][kMaxVecs];
    for (uint32_t b = 0; b < kBatch; ++b)
      for (size_t v = 0; v < vecs; ++v) p[b][v] = odd[b][v] = hn::Zero(d);
    // Not unrolled: GCC 12 unrolls the k-pairs fully and spills the accumulators.
#pragma GCC unroll 1
    for (uint32_t j = 0; j < tile.live_pairs; ++j) {  // later pairs are zero (PackedTile)
      const int16_t* w = tile.pairs + static_cast<size_t>(j) * N * 2;
      for (uint32_t b = 0; b < kBatch; ++b) {
        const auto av = pair_of(a16[b], j);
        for (size_t v = 0; v < vecs; ++v)
          p[b][v] = hn::ReorderWidenMulAccumulate(d, av, hn::LoadU(d16, w + v * lanes * 2), p[b][v], odd[b][v]);
      }
    }
    for (uint32_t b = 0; b < kBatch; ++b) apply(acc_row[b], p[b], odd[b]);
  }
  for (; k < rows; ++k) {
    const int8_t* a_row;
    int32_t* acc_row;
    cursor.next(&a_row, &acc_row);
    alignas(64) int16_t a16[N];
    widen(a_row, a16);
    V p[kMaxVecs], odd[kMaxVecs];
    for (size_t v = 0; v < vecs; ++v) p[v] = odd[v] = hn::Zero(d);
    for (uint32_t j = 0; j < tile.live_pairs; ++j) {
      const int16_t* w = tile.pairs + static_cast<size_t>(j) * N * 2;
      const auto av = pair_of(a16, j);
      for (size_t v = 0; v < vecs; ++v)
        p[v] = hn::ReorderWidenMulAccumulate(d, av, hn::LoadU(d16, w + v * lanes * 2), p[v], odd[v]);
    }
    apply(acc_row, p, odd);
  }
}

// One or more tiles into one accumulator row: one walk whose rows sum every tile when the rows
// are two vectors, else the tiles one after another (mac_rows_2d_tiles' contract either way).
template <uint32_t N, bool kWide>
void MacRows2dTilesN(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                     ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                     uint32_t o_count, uint32_t r_count, bool overwrite) {
  const hn::CappedTag<int32_t, N> d;
  if constexpr (MaxVecs<N>() == 2) {
    if (N / hn::Lanes(d) == 2)
      return MacRows2dTwoVecs<N, kWide>(d, tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count,
                                 overwrite);
  }
  for (uint32_t t = 0; t < count; ++t)
    MacRows2dN<N, kWide>(*tiles[t], act + t * act_st, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite && t == 0);
}

template <bool kWide>
void MacRows2dTilesOf(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                      ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                      uint32_t o_count, uint32_t r_count, bool overwrite) {
  switch (tiles[0]->n) {
    case 8: return MacRows2dTilesN<8, kWide>(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
    case 16: return MacRows2dTilesN<16, kWide>(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
    default: return MacRows2dTilesN<32, kWide>(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
  }
}

void MacRows2dTiles(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                    ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                    uint32_t o_count, uint32_t r_count, bool overwrite) {
  MacRows2dTilesOf<false>(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
}

// Wide activation rows (ISA 1.4): the same kernels, each row's n int16 taken as they are.
void MacRows2dTilesWide(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                        ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                        uint32_t o_count, uint32_t r_count, bool overwrite) {
  MacRows2dTilesOf<true>(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
}

void MacRows2d(const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
               ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  const PackedTile* const tiles[1] = {&tile};
  MacRows2dTiles(tiles, 1, 0, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
}

// --- DMA rows -----------------------------------------------------------------------------
// CopyPartialRows of kLen-byte rows into kRow-byte rows: a copy and a clear of sizes known at
// compile time are a few moves, not two library calls per row.
template <uint32_t kLen, uint32_t kRow>
void CopyPartialRowsOf(std::byte* dst, const std::byte* src, size_t src_stride, uint32_t count) {
  for (uint32_t x = 0; x < count; ++x, dst += kRow, src += src_stride) {
    std::memcpy(dst, src, kLen);
    std::memset(dst + kLen, 0, kRow - kLen);
  }
}
template <uint32_t kRow, size_t... kLen>
constexpr auto PartialRowCopies(std::index_sequence<kLen...>) {
  return std::array{&CopyPartialRowsOf<static_cast<uint32_t>(kLen), kRow>...};
}

void CopyPartialRows(std::byte* dst, size_t row_bytes, const std::byte* src, size_t src_stride, uint32_t count,
                     uint32_t len) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // AVX-512: each row is one masked load (which reads only the row's bytes: masked-off lanes
  // never fault) and one masked store.
  const hn::ScalableTag<uint8_t> d;
  if (row_bytes <= hn::Lanes(d)) {
    const auto read = hn::FirstN(d, len), write = hn::FirstN(d, row_bytes);
    for (uint32_t x = 0; x < count; ++x, dst += row_bytes, src += src_stride)
      hn::BlendedStore(hn::MaskedLoad(read, d, reinterpret_cast<const uint8_t*>(src)), write, d,
                       reinterpret_cast<uint8_t*>(dst));
    return;
  }
#endif
  // Elsewhere a masked load may read the whole vector (past the row, possibly past the end of
  // DRAM): a copy and a clear per row, of sizes known at compile time for rows of 16 bytes
  // (N = 16 activation rows).
  if (row_bytes == 16 && len < 16) {
    static constexpr auto kCopies = PartialRowCopies<16>(std::make_index_sequence<16>{});
    return kCopies[len](dst, src, src_stride, count);
  }
  for (uint32_t x = 0; x < count; ++x, dst += row_bytes, src += src_stride) {
    std::memcpy(dst, src, len);
    std::memset(dst + len, 0, row_bytes - len);
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

const SimdKernels* GetSimdKernels() {
#if HWY_TARGET == HWY_SCALAR
  return nullptr;
#else
  static constexpr SimdKernels kKernels{HWY_TARGET, &RequantizeRows, &BinaryRows, &LutRows,        &WindowReduce,
                                        &DwconvRows, &PackPairs, &MacRows2d,     &MacRows2dTiles,
                                        &MacRows2dTilesWide, &LutRowsWide,       &CopyPartialRows};
  return &kKernels;
#endif
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace npu::sim
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npu::sim {

HWY_EXPORT(GetSimdKernels);

namespace {

const SimdKernels* find_simd_kernels(int64_t target) {
  // One bit, tested unsigned: the sign bit's target - 1 would overflow.
  const auto bits = static_cast<uint64_t>(target);
  if (bits == 0 || (bits & (bits - 1)) != 0 || (target & HWY_TARGETS) == 0) return nullptr;
  // The dispatch table's index of one target, as hwy::ChosenTarget::GetIndex computes it for a
  // CPU whose best target is `target`: the fallback (EMU128/SCALAR) is the last entry.
  const auto shifted = static_cast<uint64_t>(HWY_CHOSEN_TARGET_SHIFT(target));
  const size_t index = shifted != 0 ? hwy::Num0BitsBelowLS1Bit_Nonzero64(shifted) : HWY_MAX_DYNAMIC_TARGETS + 1;
  const auto get = HWY_DISPATCH_TABLE(GetSimdKernels)[index];
  if (get == nullptr) return nullptr;
  const SimdKernels* kernels = get();
  return kernels != nullptr && kernels->target == target ? kernels : nullptr;
}

// find_simd_kernels of every target bit (out of line: the lookup below stays a leaf function).
HWY_NOINLINE std::array<const SimdKernels*, 64> simd_kernels_by_bit() {
  std::array<const SimdKernels*, 64> table{};
  for (uint32_t bit = 0; bit < 64; ++bit) table[bit] = find_simd_kernels(static_cast<int64_t>(uint64_t{1} << bit));
  return table;
}

}  // namespace

const SimdKernels* simd_kernels(int64_t target) {
  // Found once per target bit: the GEMM and VEC kernels look their table up on every call.
  static const std::array<const SimdKernels*, 64> kByBit = simd_kernels_by_bit();
  const auto bits = static_cast<uint64_t>(target);
  if (bits == 0 || (bits & (bits - 1)) != 0) return nullptr;
  return kByBit[static_cast<size_t>(std::countr_zero(bits))];
}

std::vector<int64_t> runnable_simd_targets() {
  std::vector<int64_t> targets;
  for (int64_t t = hwy::SupportedTargets() & HWY_TARGETS; t != 0; t &= t - 1)
    if (simd_kernels(t & -t) != nullptr) targets.push_back(t & -t);
  return targets;
}

std::string_view simd_target_name(int64_t target) { return hwy::TargetName(target); }

}  // namespace npu::sim
#endif  // HWY_ONCE
