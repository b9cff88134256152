// The functional model's int8 GEMM kernels: one weight tile against many activation rows,
// the shape of the GEMM instruction (the tile is stationary while rows stream). An AVX2
// kernel is chosen at run time when the CPU has it; the portable kernel is the reference.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npu::sim {

// Scratch for a packed tile: up to 32×32 weights as int16 k-pairs.
struct PackedTile {
  alignas(32) int16_t data[32 * 32];
};

// Packs an n×n int8 tile (W[k][c] = tile[k*n + c]) into k-pair-interleaved int16:
// data[(j*n + c)*2 + h] = W[2j + h][c].
void pack_tile(const int8_t* tile, uint32_t n, PackedTile* out);

// For each of `rows` rows r: p[c] = Σ_k a_r[k]·W[k][c] (int32), then
// acc_r = overwrite ? p : acc_r + p (wrapping). a_r = act + r*act_stride (int8 elements),
// acc_r = acc + r*acc_stride (int32 elements). Rows are processed in order, so aliasing
// accumulator rows behave as sequential updates.
void mac_rows(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc,
              ptrdiff_t acc_stride, uint32_t rows, uint32_t n, bool overwrite);

}  // namespace npu::sim
