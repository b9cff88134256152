// Already-quantised (QDQ) models: the scales and zero points a model declares through
// QuantizeLinear/DequantizeLinear are honoured instead of calibrated.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace npu::compiler {

struct QdqSummary {
  int activation_pairs = 0;        // Q -> DQ pairs folded into the producing value's quantisation
  int weights = 0;                 // DequantizeLinear of constant int8/uint8 data (weights)
  std::vector<std::string> notes;  // what could not be honoured, for the progress stream
};

// QOperator models: rewrites QLinearConv and QLinearMatMul whose weights, scales and zero
// points are constants into DequantizeLinear -> Conv/MatMul -> QuantizeLinear (int32 Conv
// bias through a DequantizeLinear at scale x_scale·w_scale), the QDQ form fold_qdq then
// folds where the codes only pass between such operators. Integer operators with run-time
// parameters stay as they are (host). Returns how many it rewrote in *expanded.
// With `runtime_b`, a QLinearMatMul whose B is an int8/uint8 graph input read by it alone
// (per-tensor scale and zero point) is rewritten too: its DequantizeLinear is then a
// candidate for bind_integer_io, and the NPU's dynamic-B GEMM corrects both zero points
// (lower.h). Only a compile that binds integer I/O may ask for it: unbound, the float MatMul
// would see a calibrated B, not the user's codes.
Status expand_qlinear(Graph& g, int* expanded, bool runtime_b = false);

// Integer GEMM operators (runs only in a compile that binds integer I/O, before fold_qdq):
//  - MatMulInteger(A, B, a_zp, b_zp) with per-tensor constant zero points becomes
//    DequantizeLinear(A, 1, a_zp) -> MatMul <- DequantizeLinear(B, 1, b_zp) for a run-time B,
//    or MatMul with the constant float weights B - b_zp (per column) for a constant B;
//  - ConvInteger(x, w, x_zp, w_zp) with constant w and zero points becomes
//    DequantizeLinear(x, 1, x_zp) -> Conv with the constant float weights w - w_zp (per
//    output channel, declared scale 1).
// The int32 output Y is then written by the MatMul/Conv itself and bound as an int32 graph
// output (Value::io_codes = kI32, declared scale 1, zero point 0): the NPU stores its int32
// accumulators (constant weights beyond int8 as several int8 weight sets). A per-row or
// per-column zero point of a run-time operand, a run-time ConvInteger w, or other dtypes are
// left as they are (the operator then runs on the host) and named in *notes. The accumulators are exact integers;
// the compiler checks that the layer holds Y at scale 1 (else it compiles again without
// binding, which also leaves these operators untouched).
Status expand_integer_ops(Graph& g, int* expanded, std::vector<std::string>* notes);

// Runs before constant folding. For every DequantizeLinear of constant int8/uint8 data with
// constant scale/zero point, records the declared quantisation on its output (the folded
// float weights keep it: real = scale·q). For every QuantizeLinear(x) of a float value with a
// constant per-tensor scale whose only readers are DequantizeLinear nodes with the same
// parameters, removes the pair: the pair's float output takes x's place and carries the
// declared quantisation, so the NPU layer producing x requantises straight onto the model's
// grid (uint8 codes become int8 by the exact -128 shift); a folded value only host operators
// read is not re-rounded (the host computes in float). Q/DQ nodes it cannot fold stay as
// graph nodes (the partitioner decides where they run). Not thread-safe: mutates `g`.
Status fold_qdq(Graph& g, QdqSummary* summary);

// Integer graph inputs and outputs whose codes the device can hold directly (runs after
// fold_qdq, before constant folding). Such a value becomes a float value of the graph with a
// declared per-tensor quantisation (so the partitioner and the NPU layers take it like any
// quantised activation) and remembers its integer dtype in Value::io_codes; its binding is
// then the user's int8 codes as is, uint8 codes by the exact -128 shift. Bound are:
//  - an int8/uint8 graph input read only by DequantizeLinear nodes with the same constant
//    per-tensor parameters (whose outputs are not graph outputs): the nodes are removed and
//    the input carries their quantisation;
//  - an int8/uint8 graph output written by a QuantizeLinear with constant per-tensor
//    parameters from a float value that only it reads and that a node produces: the node is
//    removed and the producer writes the output on the model's grid;
//  - an int8/uint8 graph input read only by operators that are exact on codes (MaxPool without
//    Indices, Relu, Clip with constant bounds or bounds fed as inputs of the same dtype read
//    by it alone, Add/Sub/Mul (and uint8 Div) whose other operand is x itself or an input of
//    the same dtype that only it reads: ONNX integer arithmetic, marked Node::integer_wrap) whose outputs
//    are graph outputs of the same dtype nobody reads: all of them take the quantisation
//    scale 1 with the code's own zero (uint8: -128 after the shift, int8: 0).
// Returns how many values it bound in *bound. The compiler must check that no host step
// touches a bound value (the host would compute on codes): compile without the pass then.
Status bind_integer_io(Graph& g, int* bound);

// The per-output-channel scales a model declares for a weight constant, or empty when it
// declares none or declares them in a form the int8 symmetric hardware cannot take exactly
// (a non-zero zero point, another axis). `channel_axis` is the weight's output-channel axis,
// `channels` their count; `gain` multiplies the scales (Gemm's alpha).
std::vector<float> declared_weight_scales(const Graph& g, int weight_value, int64_t channel_axis,
                                          int64_t channels, float gain);

}  // namespace npu::compiler
