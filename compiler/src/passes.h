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

}  // namespace npu::compiler
