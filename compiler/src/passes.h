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

// Folds inference BatchNormalization into the preceding Conv (weights and bias) when the
// Conv output has no other reader. Returns how many it folded in *folded.
Status fold_batchnorm(Graph& g, int* folded);

}  // namespace npu::compiler
