// The functional model's hot kernels written once with Google Highway (portable SIMD) and
// compiled for every x86 target Highway's build policy attains but SSSE3 (SSE4, AVX2 and AVX-512,
// "AVX3"; Highway's scalar fallback has no table: the portable kernels are the scalar code). A kernel set is looked up by Highway
// target, so each functional device runs the target of its kernel path (npu/sim/kernel_paths.h),
// not Highway's process-wide choice. Every kernel computes the bits of its portable reference
// (vec_kernels.cc, mac_kernels.cc, functional_device.cc); the tests compare them on every target
// compiled in that this CPU runs. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "vec_kernels.h"

namespace npu::sim {

struct PackedTile;

// The kernels of one Highway target. Semantics are those of the functions of the same name in
// vec_kernels.h and mac_kernels.h; n is 8, 16 or 32.
struct SimdKernels {
  int64_t target;  // the Highway target bit (HWY_AVX2, ...)
  void (*requantize_rows)(const int32_t* x, const int32_t* bias, const RequantParams& p, int8_t* y,
                          const RowWalk& rows, uint32_t n);
  // Returns false (nothing written) when the parameters need the general 64-bit products
  // (|za| or |zb| above 2^15, or m0/m1 outside int32): the caller runs the portable kernel.
  bool (*binary_rows)(const int8_t* a, const int8_t* b, const BinaryParams& p, int8_t* y, const RowWalk& rows,
                      uint32_t n);
  void (*lut_rows)(const int8_t* table, const int8_t* x, int8_t lo, int8_t hi, int8_t* y, const RowWalk& rows,
                   uint32_t n);
  void (*window_reduce)(WindowOp op, const int8_t* x, ptrdiff_t row_stride, uint32_t kw, uint32_t kh,
                        const int8_t* w, uint32_t n, int32_t* sum);
  void (*dwconv_rows)(const int8_t* x, const Window& window, const int32_t* bias, const RequantParams& p, int8_t* y,
                      const RowWalk& rows, uint32_t n);
  // Packs an n×n tile (W[k][c] = tile[k*n + c]) as int16 k-pairs: pairs[(j*n + c)*2 + h] =
  // W[2j + h][c]. Returns PackedTile::live_pairs: one past the last k-pair with a non-zero
  // weight (0 for a zero tile).
  uint32_t (*pack_pairs)(const int8_t* tile, uint32_t n, int16_t* pairs);
  // GEMM on a tile packed as int16 k-pairs (PackedTile::pairs): mac_rows_2d's contract.
  void (*mac_rows_2d)(const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
                      ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite);
  // The same for several tiles of one n: mac_rows_2d_tiles' contract.
  void (*mac_rows_2d_tiles)(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                            ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                            uint32_t o_count, uint32_t r_count, bool overwrite);
  // mac_rows_2d_tiles_wide's contract: wide activation rows (ISA 1.4).
  void (*mac_rows_2d_tiles_wide)(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                                 ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
                                 ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite);
  // lut_rows_wide's contract (vec_kernels.h).
  void (*lut_rows_wide)(const int16_t* table, const int8_t* x, int8_t lo, int8_t hi, bool wide_dst, int8_t* y,
                        const RowWalk& rows, uint32_t n);
  // `count` rows of `len` bytes from src + x·src_stride, each zero-filled to row_bytes (<= 128)
  // at dst + x·row_bytes; reads no byte outside the rows.
  void (*copy_partial_rows)(std::byte* dst, size_t row_bytes, const std::byte* src, size_t src_stride,
                            uint32_t count, uint32_t len);
};

// The kernels compiled for `target`, a single Highway target bit; nullptr when this build did
// not compile that target (or it is Highway's scalar fallback). Does not check that the CPU runs it.
const SimdKernels* simd_kernels(int64_t target);
// Every Highway target this build compiled and this CPU runs, best first (hwy::SupportedTargets).
std::vector<int64_t> runnable_simd_targets();
// Highway's name of a target ("AVX2", "AVX3", "SSE4", "EMU128").
std::string_view simd_target_name(int64_t target);

}  // namespace npu::sim
