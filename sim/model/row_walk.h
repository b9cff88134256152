// The (o, r) row walk that the functional model's VEC and GEMM kernels share (vec_kernels.h,
// mac_kernels.h): one instruction's rows in order, as element offsets. Header-only; a cursor
// belongs to one kernel call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace npu::sim {

// The rows of one VEC or GEMM instruction: row (o, r), o < o_count, r < r_count (both >= 1),
// reads the source row at element offset o·src_so + r·src_sr from the source pointer (VEC: and
// the same offset from the second operand's pointer for ADD/MUL; GEMM: the activations) and
// writes the row at o·dst_so + r·dst_sr from the output pointer (GEMM: the accumulators). Rows
// go in (o, r) order, each read completely before it is written, as the ISA defines for
// overlapping rows.
struct RowWalk {
  uint32_t o_count = 1, r_count = 1;
  ptrdiff_t src_so = 0, src_sr = 0, dst_so = 0, dst_sr = 0;
};

// Walks the rows of a RowWalk in order: src and dst are the current row's element offsets.
// The walk is held by value and the offsets advance by additions: the row loops store through
// pointers that may alias anything (int8 rows), so fields read through a reference would be
// reloaded, and the offsets recomputed by multiplications, for every row.
struct RowCursor {
  explicit RowCursor(const RowWalk& walk) : w(walk) {}
  bool done() const { return o == w.o_count; }
  void next() {
    if (++r == w.r_count) {
      r = 0;
      ++o;
      block_src += w.src_so;
      block_dst += w.dst_so;
      src = block_src;
      dst = block_dst;
    } else {
      src += w.src_sr;
      dst += w.dst_sr;
    }
  }
  const RowWalk w;
  uint32_t o = 0, r = 0;
  ptrdiff_t src = 0, dst = 0;
  ptrdiff_t block_src = 0, block_dst = 0;  // row (o, 0)'s offsets
};

}  // namespace npu::sim
