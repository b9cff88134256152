// Graph passes that run between the frontend and partitioning. Each pass keeps the graph
// topologically sorted and leaves removed nodes out of graph.nodes.
#pragma once

#include "ir.h"

namespace npu::compiler {

// Evaluates every node whose inputs are all constants (initializers, Constant nodes, and
// what folding produces: Shape/Gather/Cast/Slice/Concat/Unsqueeze chains of static shapes)
// on the host-op library and replaces its outputs by constants. Returns how many nodes it
// folded in *folded.
Status fold_constants(Graph& g, int* folded);

// Add/Mul whose first operand is a constant and second a run-time value (Paddle2ONNX writes
// Mul(C, x)) get their operands swapped, so that every later pass and matcher finds the
// run-time operand first. Only where the output keeps that operand's shape. Returns how many
// it swapped in *swapped.
Status canonicalize_commutative(Graph& g, int* swapped);

// Folds what follows a Conv or ConvTranspose with constant weights into its weights and bias,
// when the conv's output has no other reader and declares no quantisation: inference
// BatchNormalization, and Mul/Add/Sub by a constant of one element or one per output channel
// (the learnable affine of PP-LCNet, a separate bias Add after ConvTranspose). Runs over the
// nodes in order, so a Mul then an Add (then a BatchNormalization) all fold. Returns how many
// nodes it folded in *folded.
Status fold_batchnorm(Graph& g, int* folded);

// x + x·s, an Add of a value x and a Mul of x by a run-time s that nothing else reads —
// the squeeze-and-excitation residual of PP-OCRv4 det's RSE layers, x + x·HardSigmoid(..) —
// becomes x·(s + 1): a new Add of s and the constant 1 (a gate vector of C elements, which
// the partitioner joins to the table lookup before it) and one Mul that now produces the old
// Add's output. The same real function with one pass over the feature map instead of two
// (and one rounding fewer). Only where x·s has x's shape (s broadcasts into x), no value
// involved is a graph output or declares a quantisation, and the codes do not wrap. Returns
// how many it rewrote in *rewritten.
Status residual_gate_as_mul(Graph& g, int* rewritten);

// A ReduceMean over the last axis (keepdims) of a rank-2/3 value [.., C] whose result is
// only broadcast back against [.., C] values by element-wise operators — LayerNorm's mean
// and variance as Paddle2ONNX and PyTorch export them — becomes a MatMul by the constant
// [C, C] of 1/C: every column of its result is the mean, so the value and the element-wise
// operators after it take the full shape [.., C] and the same values. The MAC array then
// reduces across channels (the weights are all 1/C: exact at int8, one per-channel scale),
// and the element-wise steps are equal-shape VEC operations. Needs static shapes (after the
// calibration run). Updates the shapes it widens; returns how many it rewrote in *rewritten.
Status reduce_mean_as_matmul(Graph& g, int* rewritten);

}  // namespace npu::compiler
