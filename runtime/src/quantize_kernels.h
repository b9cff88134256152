// The runtime's boundary conversions on contiguous runs, written once with Google Highway and
// dispatched at run time to the best target this CPU runs (hwy::SupportedTargets: SSSE3, SSE4,
// AVX2, AVX-512, AVX-512 with VBMI2 "AVX3_DL"; NEON/SVE on ARM). Every target computes the same
// bits as the scalar definitions in npu/runtime/quantize.h. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npu::runtime {

// out[k] = quantize_int8(x[k], scale, zero_point) for k < count; |zero_point| <= 2^20.
void quantize_int8_run_simd(const float* x, int64_t count, float scale, int32_t zero_point, int8_t* out);
// out[k] = dequantize(q[k], scale, zero_point) for k < count; |zero_point| <= 2^20.
void dequantize_int8_run_simd(const int8_t* q, int64_t count, float scale, int32_t zero_point, float* out);
// y[k·stride] = chunk[k] for k < count (stride >= 1), leaving the bytes between untouched.
void scatter_bytes_simd(const int8_t* chunk, int64_t count, int64_t stride, std::byte* y);

}  // namespace npu::runtime
