// Device layout of the 4-D values around attention's run-time MatMuls.
#pragma once

#include <set>

#include "ir.h"

namespace npu::compiler {

// The 4-D values to store dense (row-major in the float shape's order) instead of NHWC with
// padded channels, so that a MatMul of two run-time tensors [.., M, K] · [.., K, N] (batch
// dims included) can read and write them as the GEMM needs: rows of K (act) and of N (the
// WGT tiles) contiguous in DRAM. A value qualifies with the set of 4-D values it shares bytes
// with (views: a Mul/Div by a positive scalar constant, a reshape between two 4-D shapes)
// when one of them is an operand or the result of such a MatMul or of a last-axis Softmax
// (VEC SOFTMAX reads its axis along contiguous rows), and every node that reads or
// writes one of them works on any strided layout: Transpose, Slice, a reshape to or from
// another rank (then a free view), those views, the MatMul itself, Softmax on the last
// axis, or the graph boundary. Anything else (an element-wise layer, a convolution) keeps
// the whole set NHWC, and the MatMul stays on the host. Pure: partition() and the compiler's
// layout step call it on the same graph and get the same set.
std::set<int> dense_attention_values(const Graph& g);

// True for a MatMul whose two operands are run-time values (not constants).
bool is_runtime_matmul(const Graph& g, const Node& n);

}  // namespace npu::compiler
