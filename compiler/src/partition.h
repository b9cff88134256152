// Partitioning: which nodes run on the NPU (as fused layers) and which on the host.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <optional>
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
  // Dynamic operands: graph values quantised at run time instead of constants. A dynamic B
  // is symmetric per-tensor int8 (x is then symmetric too, so no zero-point correction needs
  // the unknown weights), walked with its output-channel index contiguous so that a LOAD
  // row of the WGT scratchpad is a DRAM row (the compiler picks such layouts for graph
  // inputs: a transposed operand is stored transposed by the runtime's input binding).
  int weight_input = -1;           // B; `weights` is then empty
  bool weight_transposed = false;  // B is [N, K] (Gemm transB)
  bool input_transposed = false;   // A is [K, M] (Gemm transA)
  int bias_input = -1;             // Gemm C: [N], [1, N] or [M, N], int32 in accumulator units,
  bool bias_scalar = false;        // or one element ([] or [1]): int8, spread by a GEMM (lower.h)
  float alpha = 1.0f, beta = 1.0f; // dynamic B: alpha joins the requantisation, beta the bias scale
  int64_t batches = 1;             // batched MatMul: x [..., M, K] · B [..., K, N], same batch dims
  // The output is an int32 graph output (MatMulInteger, Value::io_codes == kI32): the int32
  // accumulators (zero-point corrections and bias included) are stored as they are, no
  // requantisation; the compiler holds the output at the accumulator scale s_x·s_w.
  bool int32_output = false;
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
  // The float weights when `weights` holds values chosen on the int8 grid by error-feedback
  // rounding (weight_rounding.h), for the accuracy report; empty otherwise.
  std::vector<float> float_weights;
  std::vector<float> bias;     // [Cout]
  int weight_input = -1;       // dynamic W (graph value, symmetric per-tensor int8, stored
                               // [KH][KW][C][Cout]); `weights` is then empty
  // ConvTranspose: weights are [C][Cout][KH][KW]; pad_t/pad_l are the begin pads the output
  // is cropped by (OH/OW say the rest); the input is always symmetric.
  bool transposed = false;
  int64_t dil_h = 1, dil_w = 1;  // ConvTranspose and 3-D Conv only
  bool one_d = false;            // ConvTranspose of [N,C,L] values (H = 1, stored channels-last)
  // Conv and ConvTranspose of [N,C,D,H,W] values (stored channels-last,
  // [N][D][H][W][C padded]): the depth axis's size, kernel, stride, dilation and pads
  // (ConvTranspose: the begin pad only); 2-D layers keep D = OD = KD = 1. A 3-D Conv also
  // uses dil_h/dil_w and its pads are only skipped taps (lower.h).
  bool three_d = false;
  int64_t D = 1, OD = 1, KD = 1, stride_d = 1, dil_d = 1, pad_f = 0, pad_k = 0;
  int bias_input = -1;         // dynamic B [Cout], int32 in accumulator units
  std::vector<float> weight_scales;  // declared per Cout (QDQ), or empty (see FcLayer)
  float act_lo = -INFINITY, act_hi = INFINITY;  // fused Relu/Clip bounds (float)
  bool int32_output = false;   // ConvInteger: int32 accumulators stored as they are (see FcLayer)
  // A lookup-table activation (an element-wise chain such as hard-swish, or Sigmoid, ...)
  // fused into the requantisation: the conv requantises to `lut_input`, the conv's own
  // output (quantised over its calibrated range, never stored), then one VEC LUT in the
  // scratchpad maps it to `output` before the STORE. -1 when none is fused.
  int lut_input = -1;
  std::function<float(float)> lut_fn;
  std::vector<std::string> fused;
};

// Element-wise and pooling work on the VEC unit, on activations in their device layout.
struct EltLayer {
  // kView: Reshape/Flatten/Squeeze/Unsqueeze whose output has the same device bytes as its
  // input: no instructions, the output aliases the input.
  // kRepack: the same reshapes between [N,C,1,1] (channels padded to the array dim) and dense
  // [N,C] when C is not a multiple of it: the rows are copied (LOAD, STORE of C lanes).
  // kTranspose/kConcat: data movement only (DMA copies through the ACT scratchpad, see
  // lower_copy); the output keeps the input's quantisation.
  // kReshapeCopy: any other reshape between a 4-D NHWC value and a dense one (a strided copy).
  // kResize: nearest-neighbour Resize of the H and W axes of an NHWC value (pixel gathers).
  // kPRelu: x with a slope tensor (dynamic, or constant per channel / along the last axis);
  // a scalar constant slope is a kLut.
  // kClip: Clip with a bound fed at run time (see lo_input).
  // kDiv: x / y for a run-time y of one sign: a reciprocal table, then VEC MUL.
  // kSoftmax: Softmax over the last axis of a dense value, VEC SOFTMAX (lower_attention.h).
  enum class Kind { kLut, kAdd, kMul, kGlobalAvgPool, kMaxPool, kAvgPool, kView, kRepack, kTranspose, kConcat,
                    kReshapeCopy, kResize, kPRelu, kClip, kDiv, kSoftmax };
  Kind kind = Kind::kLut;
  std::string name, op;
  std::vector<int> inputs;  // kLut/pools: 1; kAdd/kMul: 2 (b may broadcast per channel)
  int output = -1;
  std::function<float(float)> fn;  // kLut: the real-valued function the table samples
  float b_sign = 1.0f;             // kAdd: -1 for Sub
  bool wrap = false;               // kAdd/kMul/kDiv: integer arithmetic on codes (Node::integer_wrap)
  bool broadcast_channels = false; // kMul/kAdd: b is [N,C,1,1] against a [N,C,H,W]
  bool broadcast_last = false;     // kMul/kAdd/kPRelu: dense a [..., L] against b [L] (or [1, .., L])
  bool b_per_image = true;         // broadcast_channels: b has one row block per image (else one for all)
  std::vector<float> const_b;      // kPRelu, kAdd, kMul: constant b (per channel, or one row along the last axis)
  // kView of a Mul/Div by a positive constant: the output is the input's codes at
  // view_scale times its scale (no pass over the data, no rounding).
  float view_scale = 1.0f;
  // kClip with a bound fed at run time (a rank-0 graph input, quantised like x): inputs are
  // {x, then the dynamic bounds}; constant bounds stay clamp immediates.
  int lo_input = -1, hi_input = -1;
  float clip_lo = -INFINITY, clip_hi = INFINITY;
  float divisor_lo = 1.0f, divisor_hi = 1.0f;  // kDiv: y's calibrated range (one sign)
  // kPRelu: calibrated ranges of x and of a run-time slope (when partition had ranges); the
  // intermediates are quantised over them instead of over everything the int8 codes reach.
  std::optional<std::pair<float, float>> x_range, b_range;
  std::vector<int64_t> perm;       // kTranspose: output dim d is input dim perm[d]
  // kTranspose of a Slice (identity perm): output element o reads input element
  // slice_begin + o·slice_step per dimension (steps >= 1). Empty for a Transpose.
  std::vector<int64_t> slice_begin, slice_step;
  int64_t axis = 0;                // kConcat: the (non-negative) concatenation axis
  int dense_4d = -1;               // kView: this 4-D side is stored dense (not NHWC)
  std::vector<int64_t> src_rows, src_cols;  // kResize: input row of each output row, column of each column
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;  // pools (a 1-D pool has kh = sh = 1)
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;  // pools: never materialised (see lower_elt_layer)
  bool count_include_pad = false;          // AveragePool
  int64_t dh = 1, dw = 1;                  // MaxPool dilations
  // 3-D pools of dense [N, C, D, H, W] values: the depth window (kernel, stride, pads,
  // dilation); 1-D and 2-D pools keep kd = 1.
  int64_t kd = 1, sd = 1, pad_f = 0, pad_k = 0, dd = 1;
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
// `ranges` (the calibrated [min, max] of values, optional) lets Div by a run-time tensor onto
// the NPU when its divisor keeps one sign, and gives PRelu's intermediates their ranges.
using ValueRanges = std::map<int, std::pair<float, float>>;
std::vector<PartitionStep> partition(const Graph& g, uint32_t array_dim, const ValueRanges* ranges = nullptr);

}  // namespace npu::compiler
