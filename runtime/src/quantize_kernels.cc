// The Highway kernels of quantize_kernels.h; compiled once per Highway target (foreach_target.h
// re-includes this file), exported and dispatched at the end (HWY_ONCE).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize_kernels.cc"
// AVX3_DL (AVX-512 with VBMI2, Ice Lake and later) is compiled for the byte scatter below.
#define HWY_WANT_AVX3_DL
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// (after foreach_target.h)
#include "hwy/highway.h"

#include <algorithm>
#include <array>

#include "quantize_kernels.h"

HWY_BEFORE_NAMESPACE();
namespace npu::runtime {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// round(x / scale) ties to even (Round: the default rounding mode's nearest-even, as
// nearbyint), NaN -> zero_point, clamped in float on [-128 - zp, 127 - zp] (integers a float
// holds exactly for |zp| <= 2^20, which equals clamping round(x / scale) + zp), then + zp.
void QuantizeInt8Run(const float* HWY_RESTRICT x, int64_t count, float scale, int32_t zero_point,
                     int8_t* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int16_t, decltype(df)> d16;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto vscale = hn::Set(df, scale);
  const auto lo = hn::Set(df, static_cast<float>(-128 - zero_point));
  const auto hi = hn::Set(df, static_cast<float>(127 - zero_point));
  const auto nan_q = hn::Set(df, static_cast<float>(std::clamp(zero_point, -128, 127) - zero_point));
  const auto zp = hn::Set(di, zero_point);
  auto one = [&](hn::Vec<decltype(df)> v) {
    auto q = hn::Round(hn::Div(v, vscale));
    q = hn::IfThenElse(hn::IsNaN(q), nan_q, q);
    q = hn::Min(hn::Max(q, lo), hi);
    // In int8 range after + zp: the saturating narrowing is exact.
    return hn::DemoteTo(d8, hn::DemoteTo(d16, hn::Add(hn::ConvertTo(di, q), zp)));
  };
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t k = 0;
  for (; k + lanes <= count; k += lanes) hn::StoreU(one(hn::LoadU(df, x + k)), d8, out + k);
  if (k < count) {
    // The tail through a buffer: no read or write past the run.
    HWY_ALIGN float in[HWY_MAX_BYTES / sizeof(float)] = {};
    HWY_ALIGN int8_t q[HWY_MAX_BYTES / sizeof(float)];
    std::copy(x + k, x + count, in);
    hn::Store(one(hn::Load(df, in)), d8, q);
    std::copy(q, q + (count - k), out + k);
  }
}

// scale · float(q − zp): the int32 difference is exact for |zp| <= 2^20 and converts exactly.
void DequantizeInt8Run(const int8_t* HWY_RESTRICT q, int64_t count, float scale, int32_t zero_point,
                       float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const auto vscale = hn::Set(df, scale);
  const auto zp = hn::Set(di, zero_point);
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t k = 0;
  for (; k + lanes <= count; k += lanes)
    hn::StoreU(hn::Mul(vscale, hn::ConvertTo(df, hn::Sub(hn::PromoteTo(di, hn::LoadU(d8, q + k)), zp))), df, out + k);
  for (; k < count; ++k) out[k] = scale * static_cast<float>(static_cast<int32_t>(q[k]) - zero_point);
}

void ScatterBytes(const int8_t* chunk, int64_t count, int64_t stride, std::byte* y) {
#if HWY_TARGET == HWY_AVX3_DL
  // Channels-last views of NCHW inputs with few channels (dense NHWC with C = 2..4, as
  // tap-folding convolutions read their input) scatter every row with stride C: a block of
  // elements is expanded to every stride-th byte of a zmm (VBMI2 vpexpandb; Highway 1.0.3 has no
  // Expand) and stored under that byte mask.
  if (stride >= 2 && stride <= 32) {
    const int64_t per_block = 63 / stride + 1;  // elements whose bytes lie in one 64-byte window
    auto positions = [&](int64_t elements) {
      __mmask64 m = 0;
      for (int64_t j = 0; j < elements; ++j) m |= __mmask64{1} << (j * stride);
      return m;
    };
    const __mmask64 block = positions(per_block);
    int64_t k = 0;
    for (; k + per_block <= count; k += per_block)
      _mm512_mask_storeu_epi8(y + k * stride, block, _mm512_maskz_expandloadu_epi8(block, chunk + k));
    if (k < count) {
      const __mmask64 tail = positions(count - k);
      _mm512_mask_storeu_epi8(y + k * stride, tail, _mm512_maskz_expandloadu_epi8(tail, chunk + k));
    }
    return;
  }
#endif
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
  // AVX2 has no byte-masked store: for strides 2..4 (channels-last inputs of 2..4 channels) the
  // elements of a 32-byte window of y are spread to every stride-th byte by one byte shuffle of
  // 16 elements and blended into the window's bytes as read, so the bytes between are rewritten
  // with their own values (the caller's one thread writes the buffer). A window is taken only
  // while 16 elements remain past it (its load reads no element past the run) and its bytes
  // end by the run's last byte (no byte past the run is read or written).
  if (stride >= 2 && stride <= 4) {
    // Per stride: the shuffle (byte b of the window takes element b / stride, or zero) and
    // the blend mask (the bytes b % stride == 0).
    struct Spread {
      alignas(32) int8_t index[32];
      alignas(32) int8_t select[32];
    };
    static constexpr auto kSpread = [] {
      std::array<Spread, 3> t{};
      for (int s = 2; s <= 4; ++s)
        for (int b = 0; b < 32; ++b) {
          t[s - 2].index[b] = b % s == 0 ? static_cast<int8_t>(b / s) : int8_t{-128};
          t[s - 2].select[b] = b % s == 0 ? int8_t{-1} : int8_t{0};
        }
      return t;
    }();
    const Spread& spread = kSpread[static_cast<size_t>(stride - 2)];
    const int64_t per_block = 31 / stride + 1;  // elements whose bytes lie in the 32-byte window
    const __m256i idx = _mm256_load_si256(reinterpret_cast<const __m256i*>(spread.index));
    const __m256i sel = _mm256_load_si256(reinterpret_cast<const __m256i*>(spread.select));
    int64_t k = 0;
    // The window's 32 bytes end at or before the run's last byte, (count - 1)·stride.
    for (; k + 16 <= count && k * stride + 32 <= (count - 1) * stride + 1; k += per_block) {
      const __m256i elements = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + k)));
      auto* window = reinterpret_cast<__m256i*>(y + k * stride);
      _mm256_storeu_si256(window, _mm256_blendv_epi8(_mm256_loadu_si256(window), _mm256_shuffle_epi8(elements, idx), sel));
    }
    for (; k < count; ++k) y[k * stride] = static_cast<std::byte>(chunk[k]);
    return;
  }
#endif
  for (int64_t k = 0; k < count; ++k) y[k * stride] = static_cast<std::byte>(chunk[k]);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace npu::runtime
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace npu::runtime {

HWY_EXPORT(QuantizeInt8Run);
HWY_EXPORT(DequantizeInt8Run);
HWY_EXPORT(ScatterBytes);

void quantize_int8_run_simd(const float* x, int64_t count, float scale, int32_t zero_point, int8_t* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8Run)(x, count, scale, zero_point, out);
}
void dequantize_int8_run_simd(const int8_t* q, int64_t count, float scale, int32_t zero_point, float* out) {
  HWY_DYNAMIC_DISPATCH(DequantizeInt8Run)(q, count, scale, zero_point, out);
}
void scatter_bytes_simd(const int8_t* chunk, int64_t count, int64_t stride, std::byte* y) {
  HWY_DYNAMIC_DISPATCH(ScatterBytes)(chunk, count, stride, y);
}

}  // namespace npu::runtime
#endif  // HWY_ONCE
