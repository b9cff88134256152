// Cross-layer equalisation of activation ranges (after calibration's reference run, before
// partitioning). A convolution's output channels can differ in range by 50× (PP-OCRv4 det's
// stem: per-channel maxima 0.6 to 15), and the per-tensor int8 grid of the value then leaves
// the small channels a few codes. Where the value reaches the next convolution only through
// positively homogeneous operators (f(x / s) = f(x) / s for s > 0: Relu, LeakyRelu, MaxPool),
// output channel c of the producer can compute y_c / s_c instead (its weights and bias
// divided by s_c) and the consumer multiply its input channel c by s_c (a depthwise
// consumer: channel c's kernel; a regular one: the weights reading channel c). The function
// of the graph is unchanged; the value between them carries every channel at a similar
// range, so one grid serves all. Not through hard-swish, Clip or any lookup table, and not
// where the value has another reader (an Add of residuals needs the original scale).
#pragma once

#include <map>
#include <vector>

#include "calibration.h"
#include "ir.h"

namespace npu::compiler {

// A producer conv, the values from its output to the consumer's input (its output first,
// then the output of each positively homogeneous operator in between), and the consumer.
// Nodes are indices into graph.nodes (equalize_chains must run before any pass reorders them).
struct EqualizationChain {
  int producer = -1;
  std::vector<int> values;
  int consumer = -1;
  int64_t channels = 0;
  bool depthwise_consumer = false;
};

// The chains of g where equalisation keeps the graph's function: producer and consumer Conv
// nodes with constant weights (and a constant bias or none) read by them alone, every value
// in between read by one node only, no graph output, no declared quantisation, [N, C, ...]
// with C the producer's output channels.
std::vector<EqualizationChain> find_equalization_chains(const Graph& g);

// Rescales every chain from the per-channel ranges of its values (`channel_ranges`, from
// calibrate): channel c's factor is s_c = (r_c / R)^alpha, r_c its largest magnitude over the
// chain's values, R the largest over the channels (alpha = 1 for a depthwise consumer, whose
// per-channel weight scales absorb any factor; `regular_alpha` for a regular one, whose
// per-output-channel weight scale is shared by all its input channels), at least 1/1024;
// a channel that is all zero keeps 1. New constants replace the weights and biases (the old
// ones are left to other readers). The values' ranges in `ranges` become those of the
// rescaled channels. `factors` receives, per rescaled value, s_c per channel: the float
// model's value is s_c times the graph's (the accuracy report compares them so). Returns how
// many chains it rescaled.
int equalize_chains(Graph& g, const std::vector<EqualizationChain>& chains, const ChannelRanges& channel_ranges,
                    double regular_alpha, ValueRanges* ranges, std::map<int, std::vector<float>>* factors);

}  // namespace npu::compiler
