#include "mac_kernels.h"

#include <immintrin.h>

namespace npu::sim {
namespace {

void mac_rows_portable(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc,
                       ptrdiff_t acc_stride, uint32_t rows, uint32_t n, bool overwrite) {
  for (uint32_t r = 0; r < rows; ++r) {
    const int8_t* a = act + r * act_stride;
    int32_t* row = acc + r * acc_stride;
    int32_t p[32] = {};
    for (uint32_t j = 0; j < n / 2; ++j) {
      const int32_t a0 = a[2 * j], a1 = a[2 * j + 1];
      const int16_t* w = tile.data + static_cast<size_t>(j) * n * 2;
      for (uint32_t c = 0; c < n; ++c) p[c] += a0 * w[2 * c] + a1 * w[2 * c + 1];
    }
    // Wrapping add through unsigned arithmetic: int32 overflow is defined by the ISA.
    for (uint32_t c = 0; c < n; ++c)
      row[c] = overwrite ? p[c] : static_cast<int32_t>(static_cast<uint32_t>(row[c]) + static_cast<uint32_t>(p[c]));
  }
}

// vpmaddwd multiplies int16 pairs and adds each pair into an int32 lane: with the tile
// packed as k-pairs and the activation pair broadcast, one instruction does 16 MACs.
__attribute__((target("avx2"))) void mac_rows_avx2(const PackedTile& tile, const int8_t* act,
                                                   ptrdiff_t act_stride, int32_t* acc, ptrdiff_t acc_stride,
                                                   uint32_t rows, uint32_t n, bool overwrite) {
  const uint32_t chunks = n / 8;  // 8 int32 outputs per 256-bit register
  for (uint32_t r = 0; r < rows; ++r) {
    const int8_t* a = act + r * act_stride;
    int32_t* row = acc + r * acc_stride;
    __m256i p[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (uint32_t j = 0; j < n / 2; ++j) {
      const uint32_t pair = static_cast<uint16_t>(a[2 * j]) | (static_cast<uint32_t>(static_cast<uint16_t>(a[2 * j + 1])) << 16);
      const __m256i av = _mm256_set1_epi32(static_cast<int32_t>(pair));
      const int16_t* w = tile.data + static_cast<size_t>(j) * n * 2;
      for (uint32_t c = 0; c < chunks; ++c) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + c * 16));
        p[c] = _mm256_add_epi32(p[c], _mm256_madd_epi16(av, wv));
      }
    }
    for (uint32_t c = 0; c < chunks; ++c) {
      __m256i* dst = reinterpret_cast<__m256i*>(row + c * 8);
      const __m256i v = overwrite ? p[c] : _mm256_add_epi32(_mm256_loadu_si256(dst), p[c]);
      _mm256_storeu_si256(dst, v);
    }
  }
}

}  // namespace

void pack_tile(const int8_t* tile, uint32_t n, PackedTile* out) {
  for (uint32_t j = 0; j < n / 2; ++j)
    for (uint32_t c = 0; c < n; ++c) {
      out->data[(j * n + c) * 2] = tile[(2 * j) * n + c];
      out->data[(j * n + c) * 2 + 1] = tile[(2 * j + 1) * n + c];
    }
}

void mac_rows(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc, ptrdiff_t acc_stride,
              uint32_t rows, uint32_t n, bool overwrite) {
  static const bool has_avx2 = __builtin_cpu_supports("avx2");
  if (has_avx2 && n % 8 == 0)
    mac_rows_avx2(tile, act, act_stride, acc, acc_stride, rows, n, overwrite);
  else
    mac_rows_portable(tile, act, act_stride, acc, acc_stride, rows, n, overwrite);
}

}  // namespace npu::sim
