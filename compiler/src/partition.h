// Partitioning: which nodes run on the NPU (as fused layers) and which on the host.
#pragma once

#include <string>
#include <vector>

#include "ir.h"

namespace npu::compiler {

// A fully connected layer, the NPU form of Gemm/MatMul: y = act(x · W + b).
struct FcLayer {
  std::string name;
  std::string op;
  int input = -1;   // value index of x
  int output = -1;  // value index of y (after fused ops)
  int64_t M = 0, K = 0, N = 0;
  std::vector<float> weights;  // [K][N]
  std::vector<float> bias;     // [N]
  bool relu = false;
  std::vector<std::string> fused;  // nodes folded into this layer
};

// One step of the compiled model, in execution order: a run of NPU layers (one command
// stream) or one host operator.
struct PartitionStep {
  bool on_npu = false;
  std::vector<FcLayer> layers;  // on_npu
  int node = -1;                // !on_npu: index into graph.nodes
};

// Splits the graph into steps. Nodes the NPU cannot take become host steps; the caller
// reports them. Constant-producing nodes (Constant) are folded by the frontend, never steps.
std::vector<PartitionStep> partition(const Graph& g);

}  // namespace npu::compiler
