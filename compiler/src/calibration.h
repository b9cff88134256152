// Activation-range calibration: min/max, percentile and entropy (KL-divergence) thresholds
// over the values the float reference computes for the calibration samples.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "npu/compiler/compiler.h"
#include "partition.h"

namespace npu::compiler {

// Histogram of |x| over [0, limit) in `bins` equal bins (values at or beyond the limit land
// in the last bin). Built in a second pass over the samples, once the absolute maximum of
// each value is known from the first (min/max) pass.
class AbsHistogram {
 public:
  AbsHistogram(double limit, int bins = 2048)
      : limit_(limit), counts_(static_cast<size_t>(bins), 0.0) {}
  void add(std::span<const float> values);
  const std::vector<double>& counts() const { return counts_; }
  double bin_width() const { return limit_ / static_cast<double>(counts_.size()); }
  double limit() const { return limit_; }

 private:
  double limit_;
  std::vector<double> counts_;
};

// The smallest threshold t (a bin's upper edge) with at least `percent` % of the histogram's
// mass at |x| <= t.
double percentile_threshold(const AbsHistogram& h, double percent);

// TensorRT's entropy calibration: for every candidate threshold i·width (i from
// `quant_bins` to the bin count), the reference distribution P is the histogram's first i
// bins with the tail's mass added to bin i−1; Q is those i bins quantised into `quant_bins`
// levels (each level spread evenly over its non-empty source bins). Returns the threshold
// whose KL(P‖Q) is smallest (the histogram's limit when it is empty). Candidates that would
// clip more than kMaxClippedFraction of the mass are skipped: there P degenerates into a
// spike that Q matches trivially (values away from 0, e.g. a sigmoid's output).
inline constexpr double kMaxClippedFraction = 0.01;
double entropy_threshold(const AbsHistogram& h, int quant_bins = 128);

// The threshold t (a bin's upper edge) that minimises the expected squared error of
// quantising the histogram's values to 256 levels over [max(lo, −t), min(hi, t)]: rounding
// noise step²/12 for each value inside, (|x| − t)² for each clipped one (at its bin centre).
// Outliers are clipped exactly when clipping them costs less than the coarser step would.
double mse_threshold(const AbsHistogram& h, double lo, double hi);

// Softmax outputs: calibrate() also picks each Softmax output's grid 2^-k (VEC SOFTMAX writes
// power-of-two grids, softmax_output_qparams) by the squared error over the calibration
// samples, rounding included and clipping at c = 2^-k · kSoftmaxGridCodes counted
// ((p − c)² above it): the k of the least error among those at least as fine as the one
// holding the calibrated maximum (ties: the coarser), and lowers the value's upper bound to
// c when that k clips. softmax_output_qparams then writes that grid (symmetric: 128 codes
// up to c; with zero point −128 the 256 codes up to c, a step finer).
// Attention weights are mostly small and rarely near 1: a grid twice as fine that clips
// the few largest costs less than it gains (PP-OCRv4 rec: 2^-7 -> 2^-8); a graph output
// whose rows peak near 1 (the final class probabilities) keeps its grid.
inline constexpr int kSoftmaxMaxK = 24;
inline constexpr double kSoftmaxGridCodes = 128.0;  // the symmetric grid's codes above 0
// The k of the least error in err (indexed by k) among those at least as fine as the one
// holding hi (hi in (0, 1]; anything else counts as 1).
int softmax_output_grid(const std::array<double, kSoftmaxMaxK + 1>& err, float hi);

// "auto", "min/max", "mse", ... for messages.
std::string calibration_method_name(const CalibrationMethod& method);

// Calibration: the float reference over every sample gives each float value's [min, max]
// (NaN skipped) and every computed value its shape and dtype in `g`; then values whose
// method (method_for_value) is not min/max get |x| histograms in a second pass and their
// ranges clipped (calibrated_range). Errors: a sample of the wrong count or shape, a
// reference run that fails.
Result<ValueRanges> calibrate(Graph& g, const std::vector<std::vector<Tensor>>& samples,
                              const CalibrationMethod& method);

// The range [lo, hi] (min/max of the value) clipped to ±threshold for the chosen method.
std::pair<float, float> calibrated_range(const CalibrationMethod& method, float lo, float hi,
                                         const AbsHistogram* histogram);

// Consumer-aware ranges: a value that only lookup-table layers read (Sigmoid, Tanh, a
// hard-swish chain, ...), or a conv's output that only its fused table reads
// (ConvLayer::lut_input, the conv's requantisation target), needs its int8 grid only where
// those functions still change. Each
// range is narrowed to [a, b], the smallest interval outside which every reader's function
// stays within a quarter of its output step of f(a) (below a) or f(b) (above b); codes
// beyond it saturate at a or b (the producer's requantisation clamps), which costs less
// than that. Graph outputs, values a host operator reads and values with a declared
// quantisation keep their ranges. Returns the narrowed values with the bounds beyond which
// their readers are flat (-inf or +inf for a side that was not narrowed).
ValueRanges narrow_ranges_for_lut_readers(const Graph& g, const std::vector<PartitionStep>& steps, ValueRanges& ranges);

// The flat (saturated) ends of f over [lo, hi] within `tolerance`: the largest a such that
// |f(x) - f(a)| <= tolerance for every x in [lo, a], and the smallest such b above.
std::pair<float, float> lut_live_interval(const std::function<float(float)>& f, float lo, float hi, float tolerance);

}  // namespace npu::compiler
