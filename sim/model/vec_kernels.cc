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
#include "hwy/targets.h"
#include "simd_kernels.h"

namespace npu::sim {
namespace {

int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// --- portable ------------------------------------------------------------------------------
// The n int16 of a wide row, stored little-endian in its 2n bytes.
void store_wide_row(const int64_t* v, int8_t* y, uint32_t n) {
  for (uint32_t c = 0; c < n; ++c) {
    const auto u = static_cast<uint16_t>(v[c]);
    y[2 * c] = static_cast<int8_t>(u & 0xFF);
    y[2 * c + 1] = static_cast<int8_t>(u >> 8);
  }
}

// vec_clamp on the refined bounds of a wide destination (ISA 1.4): below wide_lo yields it,
// else above wide_hi yields that.
int64_t wide_clamp(int64_t t, int8_t lo, int8_t hi) {
  return t < wide_lo(lo) ? wide_lo(lo) : (t > wide_hi(hi) ? wide_hi(hi) : t);
}

void requantize_row_portable(const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                             uint32_t n) {
  if (p.wide) {
    int64_t v[32];
    for (uint32_t c = 0; c < n; ++c) {
      const int32_t t = bias ? wrap_add(x[c], bias[c]) : x[c];
      const int64_t q = vec_round_shift(wrap_mul(t, p.mult[c]), static_cast<uint32_t>(p.shift[c]) & 63u);
      v[c] = wide_clamp(static_cast<int64_t>(static_cast<uint64_t>(q) + static_cast<uint64_t>(int64_t{p.zp} * 256)),
                        p.lo, p.hi);
    }
    return store_wide_row(v, y, n);
  }
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

// DWCONV's window sum over wide taps (Window::wide): int16 × int8, exact in int32.
void wide_window_mac_portable(const int8_t* x, const Window& win, uint32_t n, int32_t* sum) {
  for (uint32_t c = 0; c < n; ++c) sum[c] = 0;
  for (uint32_t ky = 0; ky < win.kh; ++ky)
    for (uint32_t kx = 0; kx < win.kw; ++kx) {
      const int8_t* xr = x + ky * win.row_stride + static_cast<ptrdiff_t>(kx) * 2 * n;
      const int8_t* wr = win.weights + static_cast<size_t>(ky * win.kw + kx) * n;
      for (uint32_t c = 0; c < n; ++c) sum[c] += int32_t{wide_element(xr, c)} * wr[c];
    }
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

// --- AVX-512 VBMI LUT ----------------------------------------------------------------------
// Highway 1.0.3 has no 256-entry byte table lookup (its 16-byte shuffles need 16 lookups and
// blends per vector, npu-model-kernels-bench lut_x64: hwy:AVX3 vs hwy:AVX3+vbmi), so this one
// kernel stays in intrinsics behind the kernel path's dispatch.
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

// The Highway kernels of a non-portable kernel (their presence is checked when it is chosen).
const SimdKernels& simd(VecKernel kernel) { return *simd_kernels(kernel.target); }

}  // namespace

std::vector<VecKernel> all_vec_kernels() {
  std::vector<VecKernel> kernels{kPortableVecKernel};
  for (const int64_t t : {int64_t{HWY_SSE4}, int64_t{HWY_AVX2}, int64_t{HWY_AVX3}})
    if (simd_kernels(t) != nullptr) kernels.push_back(VecKernel{t, false});
  if (simd_kernels(HWY_AVX3) != nullptr) kernels.push_back(VecKernel{HWY_AVX3, true});
  return kernels;
}

std::string vec_kernel_name(VecKernel kernel) {
  if (kernel.target == 0) return "portable";
  return "hwy:" + std::string(simd_target_name(kernel.target)) + (kernel.vbmi ? "+vbmi" : "");
}

bool vec_kernel_usable(VecKernel kernel) {
  if (kernel.target == 0) return !kernel.vbmi;
  if (simd_kernels(kernel.target) == nullptr || (hwy::SupportedTargets() & kernel.target) == 0) return false;
  return !kernel.vbmi || (kernel.target == HWY_AVX3 && host_cpu_features().avx512_vbmi);
}

VecKernel vec_kernel_for(KernelPath path) {
  const CpuFeatures f = kernel_path_features(path);
  if (f.avx512) return VecKernel{HWY_AVX3, f.avx512_vbmi};
  if (f.avx2) return VecKernel{HWY_AVX2, false};
  return kPortableVecKernel;
}

VecKernel best_vec_kernel() { return vec_kernel_for(best_kernel_path()); }

void requantize_rows(VecKernel kernel, const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                     const RowWalk& rows, uint32_t n) {
  if (kernel.target != 0) return simd(kernel).requantize_rows(x, bias, p, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next()) requantize_row_portable(x + row.src, bias, p, y + row.dst, n);
}

void binary_rows(VecKernel kernel, const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y,
                 const RowWalk& rows, uint32_t n) {
  // The Highway kernels need the narrow products (always so in compiled models); other
  // parameters take the portable kernel.
  if (kernel.target != 0 && simd(kernel).binary_rows(a, b, p, y, rows, n)) return;
  for (RowCursor row(rows); !row.done(); row.next())
    binary_row_portable(a + row.src, b + row.src, p, y + row.dst, n);
}

void lut_rows(VecKernel kernel, const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y,
              const RowWalk& rows, uint32_t n) {
  if (kernel.vbmi) return lut_rows_vbmi(table, x, lo, hi, y, rows, n);
  if (kernel.target != 0) return simd(kernel).lut_rows(table, x, lo, hi, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next()) lut_row_portable(table, x + row.src, lo, hi, y + row.dst, n);
}

void window_reduce(VecKernel kernel, WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh,
                   const int8_t* w, uint32_t n, int32_t* sum) {
  if (kernel.target != 0) return simd(kernel).window_reduce(op, x, row_stride, kw, kh, w, n, sum);
  window_reduce_portable(op, x, row_stride, kw, kh, w, n, sum);
}

void dwconv_rows(VecKernel kernel, const int8_t* x, const Window& window, const int32_t* bias, const RequantParams& p,
                 int8_t* y, const RowWalk& rows, uint32_t n) {
  if (kernel.target != 0) return simd(kernel).dwconv_rows(x, window, bias, p, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next()) {
    int32_t sum[32];
    if (window.wide)
      wide_window_mac_portable(x + row.src, window, n, sum);
    else
      window_reduce_portable(WindowOp::kMac, x + row.src, window.row_stride, window.kw, window.kh, window.weights, n,
                             sum);
    requantize_row_portable(sum, bias, p, y + row.dst, n);
  }
}

void lut_rows_wide(VecKernel kernel, const int16_t* table, const int8_t* x, int8_t lo, int8_t hi, bool wide_dst,
                   int8_t* y, const RowWalk& rows, uint32_t n) {
  if (kernel.target != 0) return simd(kernel).lut_rows_wide(table, x, lo, hi, wide_dst, y, rows, n);
  for (RowCursor row(rows); !row.done(); row.next()) {
    int64_t v[32];
    for (uint32_t c = 0; c < n; ++c) {
      const int32_t t = vec_lut_interpolate(table, wide_element(x + row.src, c), wide_dst);
      v[c] = wide_dst ? wide_clamp(t, lo, hi) : vec_clamp(t, lo, hi);
    }
    if (wide_dst) {
      store_wide_row(v, y + row.dst, n);
    } else {
      for (uint32_t c = 0; c < n; ++c) y[row.dst + c] = static_cast<int8_t>(v[c]);
    }
  }
}

}  // namespace npu::sim
