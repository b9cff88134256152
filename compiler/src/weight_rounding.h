// Error-feedback rounding of constant conv weights onto their int8 grids (GPTQ-style).
//
// Rounding every weight to its nearest code makes each weight's error as small as it can be,
// not the layer's output error: the errors of the weights that read correlated inputs (the
// taps of a smooth feature map, the channels of a pointwise conv) add up. This pass rounds an
// output channel's weights one at a time and moves each one's rounding error onto the weights
// not yet rounded, in proportion to how their inputs correlate with its input on the
// calibration samples (the Hessian H = E[x xᵀ] of the layer's squared output error, as in
// GPTQ, Frantar et al. 2022), so that later weights compensate for earlier ones.
//
// The grids are the ones the lowering chooses (max|w|/127 per output channel,
// conv_weight_scales): a channel's largest weight keeps its code ±127, so the scale is the
// same, and the pass replaces `weights` by values that lie on that grid (the lowering's
// rounding then reproduces the chosen codes exactly) and keeps the float weights in
// `float_weights` for the accuracy report.
#pragma once

#include <vector>

#include "partition.h"

namespace npu::compiler {

struct WeightRoundingFacts {
  int layers = 0;     // convs whose weights were rounded with error feedback
  double gain_db = 0; // mean over them of the calibration output-error ratio, nearest vs error feedback
};

// Rounds the weights of every ConvLayer in `steps` that has constant 2-D weights (not
// ConvTranspose), no declared weight scales and a float output, whose input the float
// reference computes, and whose K = C·KH·KW (depthwise: KH·KW) is at most 2304, from one
// float reference run per sample. Without samples it changes nothing. Errors: a reference
// run that fails.
Result<WeightRoundingFacts> round_conv_weights(const Graph& g, std::vector<PartitionStep>& steps,
                                               const std::vector<std::vector<Tensor>>& samples);

}  // namespace npu::compiler
