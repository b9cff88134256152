#include "mac_kernels.h"

#include <immintrin.h>

#include <cstring>

#include "cpu_features.h"
#include "hwy/targets.h"
#include "simd_kernels.h"

namespace npu::sim {
namespace {

void mac_rows_portable(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc,
                       ptrdiff_t acc_stride, uint32_t rows, bool overwrite) {
  const uint32_t n = tile.n;
  for (uint32_t r = 0; r < rows; ++r) {
    const int8_t* a = act + r * act_stride;
    int32_t* row = acc + r * acc_stride;
    int32_t p[32] = {};
    for (uint32_t j = 0; j < n / 2; ++j) {
      const int32_t a0 = a[2 * j], a1 = a[2 * j + 1];
      const int16_t* w = tile.pairs + static_cast<size_t>(j) * n * 2;
      for (uint32_t c = 0; c < n; ++c) p[c] += a0 * w[2 * c] + a1 * w[2 * c + 1];
    }
    // Wrapping add through unsigned arithmetic: int32 overflow is defined by the ISA.
    for (uint32_t c = 0; c < n; ++c)
      row[c] = overwrite ? p[c] : static_cast<int32_t>(static_cast<uint32_t>(row[c]) + static_cast<uint32_t>(p[c]));
  }
}

// Four activation bytes a[0..3] + 128 each, as one little-endian int32 for a broadcast.
inline int32_t biased_quad(const int8_t* a) {
  uint32_t q;
  std::memcpy(&q, a, 4);
  return static_cast<int32_t>(q ^ 0x80808080u);
}

// The VNNI kernels compute a batch of B rows at once (independent vpdpbusd chains hide the
// instruction's latency), then apply the batch to the accumulators one row after another, in
// order, so that aliasing accumulator rows still see sequential updates.

// acc_row = overwrite ? p : acc_row + p, for kVecs zmm of int32 (wrapping).
template <uint32_t kVecs>
__attribute__((target("avx512f"))) inline void apply_row_avx512(int32_t* row, const __m512i* p, bool overwrite) {
  for (uint32_t v = 0; v < kVecs; ++v) {
    int32_t* dst = row + v * 16;
    _mm512_storeu_si512(dst, overwrite ? p[v] : _mm512_add_epi32(_mm512_loadu_si512(dst), p[v]));
  }
}

// AVX-512 VNNI for n = 16 or 32: one zmm holds 16 output columns; the whole tile stays in
// registers (n/4 k-quads × n/16 zmm). The rows are an O×R walk (row (o, r) at o·so + r·sr on
// both sides), taken in (o, r) order and batched across o, so that a GEMM block of short rows
// (a 1×1 convolution of a small image: R = 8) still fills whole batches.
template <uint32_t N>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void mac_walk_avx512vnni(
    const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
    ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  constexpr uint32_t kQuads = N / 4, kVecs = N / 16, kBatch = N == 16 ? 4 : 2;
  __m512i w[kQuads][kVecs], init[kVecs];
  for (uint32_t q = 0; q < kQuads; ++q)
    for (uint32_t v = 0; v < kVecs; ++v) w[q][v] = _mm512_load_si512(tile.quads + (q * N + v * 16) * 4);
  for (uint32_t v = 0; v < kVecs; ++v) init[v] = _mm512_load_si512(tile.minus_128_colsum + v * 16);
  GemmRowCursor cursor(act, act_so, act_sr, acc, acc_so, acc_sr, r_count);
  const uint64_t rows = uint64_t{o_count} * r_count;
  uint64_t k = 0;
  for (; k + kBatch <= rows; k += kBatch) {
    const int8_t* a_row[kBatch];
    int32_t* acc_row[kBatch];
    cursor.next(a_row, acc_row, kBatch);
    __m512i p[kBatch][kVecs];
    for (uint32_t b = 0; b < kBatch; ++b)
      for (uint32_t v = 0; v < kVecs; ++v) p[b][v] = init[v];
    for (uint32_t q = 0; q < kQuads; ++q)
      for (uint32_t b = 0; b < kBatch; ++b) {
        const __m512i a = _mm512_set1_epi32(biased_quad(a_row[b] + 4 * q));
        for (uint32_t v = 0; v < kVecs; ++v) p[b][v] = _mm512_dpbusd_epi32(p[b][v], a, w[q][v]);
      }
    for (uint32_t b = 0; b < kBatch; ++b) apply_row_avx512<kVecs>(acc_row[b], p[b], overwrite);
  }
  for (; k < rows; ++k) {
    const int8_t* a_row;
    int32_t* acc_row;
    cursor.next(&a_row, &acc_row);
    __m512i p[kVecs];
    for (uint32_t v = 0; v < kVecs; ++v) p[v] = init[v];
    for (uint32_t q = 0; q < kQuads; ++q) {
      const __m512i a = _mm512_set1_epi32(biased_quad(a_row + 4 * q));
      for (uint32_t v = 0; v < kVecs; ++v) p[v] = _mm512_dpbusd_epi32(p[v], a, w[q][v]);
    }
    apply_row_avx512<kVecs>(acc_row, p, overwrite);
  }
}

// The 256-bit VNNI kernel (8 output columns per ymm), for AVX-VNNI (VEX encoding) and for
// AVX-512 VNNI with VL (EVEX encoding): the same code under two targets, because a CPU may
// have either encoding without the other.
#define NPU_VNNI256_KERNEL(NAME, TARGET, DPBUSD)                                                             \
  template <uint32_t N>                                                                                     \
  __attribute__((target(TARGET))) void NAME(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, \
                                            int32_t* acc, ptrdiff_t acc_stride, uint32_t rows,            \
                                            bool overwrite) {                                             \
    constexpr uint32_t kQuads = N / 4, kVecs = N / 8, kBatch = N == 8 ? 4 : 2;                              \
    const __m256i* w = reinterpret_cast<const __m256i*>(tile.quads); /* w[q * kVecs + v] */                 \
    const __m256i* init = reinterpret_cast<const __m256i*>(tile.minus_128_colsum);                         \
    uint32_t r = 0;                                                                                         \
    while (r < rows) {                                                                                      \
      const uint32_t batch = rows - r >= kBatch ? kBatch : 1;                                               \
      __m256i p[kBatch][kVecs];                                                                             \
      for (uint32_t b = 0; b < kBatch; ++b)                                                                 \
        for (uint32_t v = 0; v < kVecs; ++v) p[b][v] = _mm256_load_si256(init + v);                         \
      for (uint32_t q = 0; q < kQuads; ++q)                                                                 \
        for (uint32_t b = 0; b < kBatch; ++b) {                                                             \
          if (b >= batch) break;                                                                            \
          const __m256i a = _mm256_set1_epi32(biased_quad(act + (r + b) * act_stride + 4 * q));            \
          for (uint32_t v = 0; v < kVecs; ++v)                                                              \
            p[b][v] = DPBUSD(p[b][v], a, _mm256_load_si256(w + q * kVecs + v));                             \
        }                                                                                                   \
      for (uint32_t b = 0; b < batch; ++b)                                                                  \
        for (uint32_t v = 0; v < kVecs; ++v) {                                                              \
          auto* dst = reinterpret_cast<__m256i*>(acc + (r + b) * acc_stride + v * 8);                       \
          _mm256_storeu_si256(dst, overwrite ? p[b][v] : _mm256_add_epi32(_mm256_loadu_si256(dst), p[b][v])); \
        }                                                                                                   \
      r += batch;                                                                                           \
    }                                                                                                       \
  }
NPU_VNNI256_KERNEL(mac_rows_avxvnni, "avx2,avxvnni", _mm256_dpbusd_avx_epi32)
NPU_VNNI256_KERNEL(mac_rows_avx512vnni_ymm, "avx2,avx512f,avx512vl,avx512vnni", _mm256_dpbusd_epi32)
#undef NPU_VNNI256_KERNEL

bool n_supported(uint32_t n) { return n == 8 || n == 16 || n == 32; }

// Packs a 16×16 tile for the AVX-512 VNNI kernel with VBMI: the four rows 4j..4j+3 are one
// zmm, and k-quad j is that zmm with its bytes permuted (byte c·4 + h from byte h·16 + c); the
// column sums come from vpdpbusd against ones (Σ_h 1·W[4j+h][c] in int32 lane c, exact).
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void pack_tile16_vbmi(const int8_t* tile,
                                                                                       PackedTile* out) {
  alignas(64) static constexpr uint8_t kQuadOrder[64] = {
      0, 16, 32, 48, 1, 17, 33, 49, 2,  18, 34, 50, 3,  19, 35, 51, 4,  20, 36, 52, 5,  21,
      37, 53, 6, 22, 38, 54, 7, 23, 39, 55, 8,  24, 40, 56, 9,  25, 41, 57, 10, 26, 42, 58,
      11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
  const __m512i order = _mm512_load_si512(kQuadOrder);
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i sum = _mm512_setzero_si512();
  for (uint32_t j = 0; j < 4; ++j) {
    // (maskz forms: GCC 12's unmasked ones start from a self-initialised "undefined" vector,
    // which -Wuninitialized reports, GCC bug 105593.)
    const __m512i quads = _mm512_maskz_permutexvar_epi8(~__mmask64{0}, order, _mm512_loadu_si512(tile + j * 64));
    _mm512_store_si512(out->quads + j * 64, quads);
    sum = _mm512_dpbusd_epi32(sum, ones, quads);
  }
  _mm512_store_si512(out->minus_128_colsum, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, sum, 7)));
}

}  // namespace

std::vector<MacKernel> all_mac_kernels() {
  std::vector<MacKernel> kernels{MacKernel{}};
  for (const int64_t t : {int64_t{HWY_SSE4}, int64_t{HWY_AVX2}, int64_t{HWY_AVX3}})
    if (simd_kernels(t) != nullptr) kernels.push_back(MacKernel{MacKind::kMadd, t});
  for (MacKind k : {MacKind::kAvxVnni, MacKind::kAvx512Vnni, MacKind::kAvx512VnniVbmi}) kernels.push_back(MacKernel{k, 0});
  return kernels;
}

std::string mac_kernel_name(MacKernel kernel) {
  switch (kernel.kind) {
    case MacKind::kPortable: return "portable";
    case MacKind::kMadd: return "hwy:" + std::string(simd_target_name(kernel.target));
    case MacKind::kAvxVnni: return "avx-vnni";
    case MacKind::kAvx512Vnni: return "avx512-vnni";
    case MacKind::kAvx512VnniVbmi: return "avx512-vnni-vbmi";
  }
  return "?";
}

bool mac_kernel_usable(MacKernel kernel, uint32_t n) {
  if (!n_supported(n)) return false;
  const CpuFeatures& cpu = host_cpu_features();
  switch (kernel.kind) {
    case MacKind::kPortable: return true;
    case MacKind::kMadd: return simd_kernels(kernel.target) != nullptr && (hwy::SupportedTargets() & kernel.target) != 0;
    case MacKind::kAvxVnni: return cpu.avx_vnni;
    case MacKind::kAvx512Vnni: return cpu.avx512_vnni;
    case MacKind::kAvx512VnniVbmi: return cpu.avx512_vnni && cpu.avx512_vbmi;
  }
  return false;
}

MacKernel mac_kernel_for(KernelPath path, uint32_t n) {
  const CpuFeatures f = kernel_path_features(path);
  // The VBMI packing exists for 16×16 tiles only; other sizes run the plain VNNI kernel.
  if (f.avx512_vnni) return MacKernel{f.avx512_vbmi && n == 16 ? MacKind::kAvx512VnniVbmi : MacKind::kAvx512Vnni, 0};
  if (f.avx_vnni) return MacKernel{MacKind::kAvxVnni, 0};
  if (f.avx512) return MacKernel{MacKind::kMadd, HWY_AVX3};
  if (f.avx2) return MacKernel{MacKind::kMadd, HWY_AVX2};
  return MacKernel{};
}

MacKernel best_mac_kernel(uint32_t n) { return mac_kernel_for(best_kernel_path(), n); }

// The int16 k-pairs of a tile (PackedTile::pairs) and its live_pairs, in plain C++.
static uint32_t pack_pairs_portable(const int8_t* tile, uint32_t n, int16_t* pairs) {
  uint32_t live = 0;
  for (uint32_t j = 0; j < n / 2; ++j)
    for (uint32_t c = 0; c < n; ++c) {
      pairs[(j * n + c) * 2] = tile[(2 * j) * n + c];
      pairs[(j * n + c) * 2 + 1] = tile[(2 * j + 1) * n + c];
      if (tile[(2 * j) * n + c] != 0 || tile[(2 * j + 1) * n + c] != 0) live = j + 1;
    }
  return live;
}

void ensure_pairs(const int8_t* tile, uint32_t n, PackedTile* out) {
  if (out->has_pairs) return;
  out->live_pairs = pack_pairs_portable(tile, n, out->pairs);
  out->has_pairs = true;
}

void pack_tile(const int8_t* tile, uint32_t n, MacKernel kernel, PackedTile* out) {
  out->kernel = kernel;
  out->n = n;
  out->has_pairs = kernel.kind == MacKind::kMadd || kernel.kind == MacKind::kPortable;
  if (kernel.kind == MacKind::kMadd) {
    out->live_pairs = simd_kernels(kernel.target)->pack_pairs(tile, n, out->pairs);
    return;
  }
  if (kernel.kind == MacKind::kPortable) {
    out->live_pairs = pack_pairs_portable(tile, n, out->pairs);
    return;
  }
  if (kernel.kind == MacKind::kAvx512VnniVbmi && n == 16) return pack_tile16_vbmi(tile, out);
  // SSE2 (part of x86-64), 8 columns at a time: interleave each group of four weight rows
  // byte by byte (the 32 bytes W[4q..4q+3][c] land in column order) and sum the columns in
  // int16 (|Σ| <= 32·128 fits).
  for (uint32_t c0 = 0; c0 < n; c0 += 8) {
    __m128i sum = _mm_setzero_si128();
    for (uint32_t q = 0; q < n / 4; ++q) {
      __m128i row[4];
      for (uint32_t h = 0; h < 4; ++h) {
        row[h] = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(tile + (4 * q + h) * n + c0));
        sum = _mm_add_epi16(sum, _mm_srai_epi16(_mm_unpacklo_epi8(row[h], row[h]), 8));
      }
      const __m128i r01 = _mm_unpacklo_epi8(row[0], row[1]), r23 = _mm_unpacklo_epi8(row[2], row[3]);
      auto* dst = reinterpret_cast<__m128i*>(out->quads + (q * n + c0) * 4);
      _mm_storeu_si128(dst, _mm_unpacklo_epi16(r01, r23));
      _mm_storeu_si128(dst + 1, _mm_unpackhi_epi16(r01, r23));
    }
    // Widen to int32 and scale by -128.
    const __m128i lo = _mm_srai_epi32(_mm_unpacklo_epi16(sum, sum), 16);
    const __m128i hi = _mm_srai_epi32(_mm_unpackhi_epi16(sum, sum), 16);
    auto* dst = reinterpret_cast<__m128i*>(out->minus_128_colsum + c0);
    _mm_storeu_si128(dst, _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(lo, 7)));
    _mm_storeu_si128(dst + 1, _mm_sub_epi32(_mm_setzero_si128(), _mm_slli_epi32(hi, 7)));
  }
}

void mac_rows_2d(const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
                 ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  if (tile.kernel.kind == MacKind::kMadd)
    return simd_kernels(tile.kernel.target)
        ->mac_rows_2d(tile, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
  const bool avx512vnni = tile.kernel.kind == MacKind::kAvx512Vnni || tile.kernel.kind == MacKind::kAvx512VnniVbmi;
  if (avx512vnni && tile.n != 8) {
    if (tile.n == 16)
      return mac_walk_avx512vnni<16>(tile, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
    return mac_walk_avx512vnni<32>(tile, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
  }
  for (uint32_t o = 0; o < o_count; ++o)
    mac_rows(tile, act + static_cast<ptrdiff_t>(o) * act_so, act_sr, acc + static_cast<ptrdiff_t>(o) * acc_so, acc_sr,
             r_count, overwrite);
}

void mac_rows_2d_tiles(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                       ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                       uint32_t o_count, uint32_t r_count, bool overwrite) {
  if (tiles[0]->kernel.kind == MacKind::kMadd)
    return simd_kernels(tiles[0]->kernel.target)
        ->mac_rows_2d_tiles(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count, overwrite);
  for (uint32_t t = 0; t < count; ++t)
    mac_rows_2d(*tiles[t], act + static_cast<ptrdiff_t>(t) * act_st, act_so, act_sr, acc, acc_so, acc_sr, o_count,
                r_count, overwrite && t == 0);
}

void mac_rows_2d_tiles_wide(int64_t target, const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st,
                            const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
                            ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite) {
  if (target != 0)
    return simd_kernels(target)->mac_rows_2d_tiles_wide(tiles, count, act_st, act, act_so, act_sr, acc, acc_so, acc_sr,
                                                        o_count, r_count, overwrite);
  // The definition's order: for o, for each tile, for r; int16 × int8 products, wrapping sums.
  for (uint32_t o = 0; o < o_count; ++o)
    for (uint32_t t = 0; t < count; ++t) {
      const uint32_t n = tiles[t]->n;
      for (uint32_t r = 0; r < r_count; ++r) {
        const int8_t* bytes = act + static_cast<ptrdiff_t>(t) * act_st + static_cast<ptrdiff_t>(o) * act_so +
                              static_cast<ptrdiff_t>(r) * act_sr;
        int32_t* row = acc + static_cast<ptrdiff_t>(o) * acc_so + static_cast<ptrdiff_t>(r) * acc_sr;
        uint32_t p[32] = {};  // unsigned: the sums wrap
        for (uint32_t k = 0; k < n; ++k) {
          int16_t a;
          std::memcpy(&a, bytes + 2 * k, 2);  // little-endian, as x86 and the ISA store it
          const int16_t* w = tiles[t]->pairs + static_cast<size_t>(k / 2) * n * 2 + k % 2;
          for (uint32_t c = 0; c < n; ++c) p[c] += static_cast<uint32_t>(int32_t{a} * w[2 * c]);
        }
        for (uint32_t c = 0; c < n; ++c)
          row[c] = static_cast<int32_t>(overwrite && t == 0 ? p[c] : static_cast<uint32_t>(row[c]) + p[c]);
      }
    }
}

void mac_rows(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc, ptrdiff_t acc_stride,
              uint32_t rows, bool overwrite) {
  switch (tile.kernel.kind) {
    case MacKind::kPortable: return mac_rows_portable(tile, act, act_stride, acc, acc_stride, rows, overwrite);
    case MacKind::kMadd:
      return simd_kernels(tile.kernel.target)->mac_rows_2d(tile, act, 0, act_stride, acc, 0, acc_stride, 1, rows, overwrite);
    case MacKind::kAvxVnni:
      switch (tile.n) {
        case 8: return mac_rows_avxvnni<8>(tile, act, act_stride, acc, acc_stride, rows, overwrite);
        case 16: return mac_rows_avxvnni<16>(tile, act, act_stride, acc, acc_stride, rows, overwrite);
        default: return mac_rows_avxvnni<32>(tile, act, act_stride, acc, acc_stride, rows, overwrite);
      }
    case MacKind::kAvx512Vnni:
    case MacKind::kAvx512VnniVbmi:  // (differs in packing only)
      switch (tile.n) {
        case 8: return mac_rows_avx512vnni_ymm<8>(tile, act, act_stride, acc, acc_stride, rows, overwrite);
        case 16: return mac_walk_avx512vnni<16>(tile, act, 0, act_stride, acc, 0, acc_stride, 1, rows, overwrite);
        default: return mac_walk_avx512vnni<32>(tile, act, 0, act_stride, acc, 0, acc_stride, 1, rows, overwrite);
      }
  }
}

}  // namespace npu::sim
