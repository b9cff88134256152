// Partitioning: which nodes run on the NPU (as fused layers) and which on the host.
#pragma once

#include <cmath>
#include <functional>
#include <variant>
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
  // Per-output-channel weight scales the model declares (QDQ, qdq.h); empty: the compiler
  // chooses max|w|/127.
  std::vector<float> weight_scales;
  bool relu = false;
  std::vector<std::string> fused;  // nodes folded into this layer
};

// A 2-D convolution on NHWC activations (channels padded to the array dim): regular
// convolution as implicit GEMM on the MAC array, depthwise (group == C == Cout) on the VEC
// unit's DWCONV. Dilation 1. A following Relu or constant Clip is fused.
struct ConvLayer {
  std::string name;
  int input = -1, output = -1;
  int64_t batch = 1, C = 0, H = 0, W = 0, Cout = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  bool depthwise = false;
  std::vector<float> weights;  // [Cout][C or 1][KH][KW]
  std::vector<float> bias;     // [Cout]
  std::vector<float> weight_scales;  // declared per Cout (QDQ), or empty (see FcLayer)
  float act_lo = -INFINITY, act_hi = INFINITY;  // fused Relu/Clip bounds (float)
  std::vector<std::string> fused;
};

// Element-wise and pooling work on the VEC unit, on activations in their device layout.
struct EltLayer {
  // kView: Reshape/Flatten/Squeeze/Unsqueeze whose output has the same device bytes as its
  // input: no instructions, the output aliases the input.
  // kRepack: the same reshapes between [N,C,1,1] (channels padded to the array dim) and dense
  // [N,C] when C is not a multiple of it: the rows are copied (LOAD, STORE of C lanes).
  enum class Kind { kLut, kAdd, kMul, kGlobalAvgPool, kMaxPool, kAvgPool, kView,
                    kRepack };
  Kind kind = Kind::kLut;
  std::string name, op;
  std::vector<int> inputs;  // kLut/pools: 1; kAdd/kMul: 2 (b may broadcast per channel)
  int output = -1;
  std::function<float(float)> fn;  // kLut: the real-valued function the table samples
  float b_sign = 1.0f;             // kAdd: -1 for Sub
  bool broadcast_channels = false; // kMul/kAdd: b is [N,C,1,1] against a [N,C,H,W]
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;  // pools
};

using NpuLayer = std::variant<FcLayer, ConvLayer, EltLayer>;
int npu_layer_output(const NpuLayer& layer);
std::vector<int> npu_layer_inputs(const NpuLayer& layer);
std::string npu_layer_name(const NpuLayer& layer);
std::string npu_layer_op(const NpuLayer& layer);

// One step of the compiled model, in execution order: a run of NPU layers (one command
// stream) or one host operator.
struct PartitionStep {
  bool on_npu = false;
  std::vector<NpuLayer> ops;  // on_npu, in execution order
  int node = -1;                // !on_npu: index into graph.nodes
};

// Splits the graph into steps. Nodes the NPU cannot take become host steps; the caller
// reports them. Constant-producing nodes (Constant) are folded by the frontend, never steps.
// `array_dim` decides which reshapes are free views of the NHWC layout.
std::vector<PartitionStep> partition(const Graph& g, uint32_t array_dim);

}  // namespace npu::compiler
