// The functional model's int8 GEMM kernels: one weight tile against many activation rows,
// the shape of the GEMM instruction (the tile is stationary while rows stream). Several
// kernels compute the same wrapping int32 result bit for bit; the device's kernel path
// (npu/sim/kernel_paths.h) chooses one, and the portable kernel runs anywhere. The int16-pair
// kernel is Google Highway's (simd_kernels.h), one implementation for every target; the VNNI
// kernels are intrinsics, because Highway 1.0.3 has no int8 dot product (vpdpbusd). Pure
// functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npu/sim/kernel_paths.h"
#include "row_walk.h"

namespace npu::sim {

enum class MacKind : uint8_t {
  kPortable,        // plain C++: the reference every other kernel is tested against
  kMadd,            // Highway: widening multiply-add of int16 k-pairs (vpmaddwd), for `target`
  kAvxVnni,         // AVX-VNNI vpdpbusd, 256-bit (n a multiple of 8)
  kAvx512Vnni,      // AVX-512 VNNI vpdpbusd, 512-bit for n >= 16, 256-bit (VL) for n = 8
  kAvx512VnniVbmi,  // the same, and 16×16 tiles packed by one VBMI byte permute per k-quad row
};
struct MacKernel {
  MacKind kind = MacKind::kPortable;
  int64_t target = 0;  // kMadd: the Highway target bit (HWY_AVX2, ...); else 0
  friend bool operator==(const MacKernel&, const MacKernel&) = default;
};

// Every GEMM kernel this build has: portable, kMadd per Highway target compiled, the VNNI ones.
std::vector<MacKernel> all_mac_kernels();
// "portable", "hwy:AVX2", "avx-vnni", "avx512-vnni", "avx512-vnni-vbmi".
std::string mac_kernel_name(MacKernel kernel);
// Whether this CPU (and OS) runs `kernel` for an n×n tile (n in {8, 16, 32}).
bool mac_kernel_usable(MacKernel kernel, uint32_t n);
// The kernel of `path` for n: the one with the most of the path's features.
MacKernel mac_kernel_for(KernelPath path, uint32_t n);
// mac_kernel_for(best_kernel_path(), n).
MacKernel best_mac_kernel(uint32_t n);

// A weight tile in the layout of the kernel it was packed for.
struct PackedTile {
  MacKernel kernel;
  uint32_t n = 0;
  // kPortable, kMadd, and after ensure_pairs() any kernel (GEMMs with wide activations,
  // which vpdpbusd cannot multiply): int16 k-pairs, pairs[(j*n + c)*2 + h] = W[2j + h][c].
  alignas(64) int16_t pairs[32 * 32];
  bool has_pairs = false;  // pairs and live_pairs are filled
  // With the pairs: the k-pairs before which the last non-zero weight lies (0..n/2); every
  // weight of a later pair is zero. The kernels stop there: a zero weight adds nothing to a wrapping int32
  // sum, and a tile whose input channels are padded (24 = 16 + 8 channels: the second k-tile's
  // last 8 rows) spends no multiply-adds on the padding.
  uint32_t live_pairs = 0;
  // VNNI: int8 k-quads, quads[(j*n + c)*4 + h] = W[4j + h][c], and minus_128_colsum[c] =
  // -128·Σ_k W[k][c]. vpdpbusd multiplies unsigned by signed bytes, so the kernels feed
  // a + 128 (an XOR of the sign bit) and start each column at -128·Σ_k W[k][c]:
  // Σ (a+128)·W - 128·ΣW = Σ a·W exactly (no intermediate saturates; int32 wraps).
  alignas(64) int8_t quads[32 * 32];
  alignas(64) int32_t minus_128_colsum[32];
};

// The rows of an o_count × r_count GEMM walk in (o, r) order: row (o, r) reads
// act + o·act_so + r·act_sr and updates acc + o·acc_so + r·acc_sr. Batching kernels take their
// rows from it in order (they count the rows themselves).
class GemmRowCursor {
 public:
  GemmRowCursor(const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
                ptrdiff_t acc_sr, uint32_t r_count)
      : act_(act),
        acc_(acc),
        rows_(RowWalk{.o_count = UINT32_MAX, .r_count = r_count, .src_so = act_so, .src_sr = act_sr,
                      .dst_so = acc_so, .dst_sr = acc_sr}) {}
  // The next row's activation and accumulator pointers.
  void next(const int8_t** a, int32_t** c) {
    *a = act_ + rows_.src;
    *c = acc_ + rows_.dst;
    rows_.next();
  }
  // The next `count` rows, into a[0..count) and c[0..count).
  void next(const int8_t** a, int32_t** c, uint32_t count) {
    for (uint32_t b = 0; b < count; ++b) next(&a[b], &c[b]);
  }

 private:
  const int8_t* act_;
  int32_t* acc_;
  RowCursor rows_;
};

// Packs an n×n int8 tile (W[k][c] = tile[k*n + c]) for `kernel`, which must be usable for n.
void pack_tile(const int8_t* tile, uint32_t n, MacKernel kernel, PackedTile* out);
// Fills out->pairs and live_pairs from the same tile when its packing has none (the VNNI
// kernels' packings: a wide GEMM on such a device needs them, an int8 one never does, so they
// are packed only when asked for).
void ensure_pairs(const int8_t* tile, uint32_t n, PackedTile* out);

// For each of `rows` rows r: p[c] = Σ_k a_r[k]·W[k][c] (int32), then
// acc_r = overwrite ? p : acc_r + p (wrapping). a_r = act + r*act_stride (int8 elements),
// acc_r = acc + r*acc_stride (int32 elements). The result is as if rows were processed in
// order, so aliasing accumulator rows behave as sequential updates. The activation rows must
// not overlap the accumulator rows. Runs the kernel the tile was packed for.
void mac_rows(const PackedTile& tile, const int8_t* act, ptrdiff_t act_stride, int32_t* acc,
              ptrdiff_t acc_stride, uint32_t rows, bool overwrite);

// mac_rows over an o_count × r_count walk: row (o, r) reads act + o·act_so + r·act_sr and
// updates acc + o·acc_so + r·acc_sr, in (o, r) order (the same as mac_rows once per o).
void mac_rows_2d(const PackedTile& tile, const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc,
                 ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite);

// mac_rows_2d over `count` tiles packed for one kernel, the rows' products summed before their
// accumulators are updated: row (o, r) adds Σ_t tile_t·a_t, a_t = act + t·act_st + o·act_so +
// r·act_sr (overwrite: is set to it). Equal to mac_rows_2d once per tile t in order, at
// act + t·act_st and with overwrite only for t = 0, when overwrite is false or no two rows of
// the walk share an accumulator row (the sums wrap, so their order does not matter); the
// caller ensures one of the two.
void mac_rows_2d_tiles(const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st, const int8_t* act,
                       ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so, ptrdiff_t acc_sr,
                       uint32_t o_count, uint32_t r_count, bool overwrite);

// GEMM with wide activation rows (ISA 1.4): mac_rows_2d_tiles' contract, except that each
// activation row a_t is n int16 (the 2n bytes at its address, little-endian, as two ACT rows
// hold them) and the products are int16 × int8. `target` is a Highway target of
// simd_kernels(), whose int16-pair kernel runs (whatever kernel the tiles were packed for:
// each must have its pairs, PackedTile::has_pairs), or 0 for the portable reference.
void mac_rows_2d_tiles_wide(int64_t target, const PackedTile* const* tiles, uint32_t count, ptrdiff_t act_st,
                            const int8_t* act, ptrdiff_t act_so, ptrdiff_t act_sr, int32_t* acc, ptrdiff_t acc_so,
                            ptrdiff_t acc_sr, uint32_t o_count, uint32_t r_count, bool overwrite);

}  // namespace npu::sim
