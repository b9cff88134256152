// Bias correction of convolutions for the mean rounding error of their input's int8 grid.
//
// A per-tensor int8 grid rounds a flat region of a feature map (a page's background, the
// same value in every pixel of a channel) the same way everywhere, so the error of that
// channel is a constant rather than noise, and a conv whose kernel sums to k multiplies it
// by k on every output pixel. The correction subtracts, from each constant-weight conv's
// float bias, the weights times the mean error that rounding its input onto its grid adds
// per input channel, measured on the calibration samples with the float reference's values
// rounded as the NPU rounds them (a fused lookup table's output: the conv's requantisation
// onto the table's input grid, the table, then the output grid).
//
// Each layer corrects only the error its own input's rounding adds to the float value, not
// the error its input inherits from the layers before it (which those layers correct), so
// correcting every layer at once does not correct an error twice (correcting the measured
// total error per layer does, and diverges).
#pragma once

#include <map>
#include <vector>

#include "partition.h"
#include "quantize.h"

namespace npu::compiler {

struct BiasCorrectionFacts {
  int layers = 0;            // convs whose bias changed
  double max_shift = 0;      // the largest |change| of a bias, in output steps of the conv's grid
};

// Corrects the `bias` of every ConvLayer in `steps` with constant 2-D weights and a float
// output (a ConvTranspose's taps averaged over its stride_h·stride_w output phases) whose
// input has no declared quantisation (a QDQ model's rounding is the model's own) and whose
// input values the float reference computes. `qp` holds every NPU value's parameters (fused
// tables' inputs included). One float reference run per sample. Errors: a reference run
// that fails.
Result<BiasCorrectionFacts> correct_conv_biases(const Graph& g, std::vector<PartitionStep>& steps,
                                                const std::map<int, QParams>& qp,
                                                const std::vector<std::vector<Tensor>>& samples);

}  // namespace npu::compiler
