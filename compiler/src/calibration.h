// Activation-range calibration: min/max, percentile and entropy (KL-divergence) thresholds
// over the values the float reference computes for the calibration samples.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "npu/compiler/compiler.h"

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

// The range [lo, hi] (min/max of the value) clipped to ±threshold for the chosen method.
std::pair<float, float> calibrated_range(const CalibrationMethod& method, float lo, float hi,
                                         const AbsHistogram* histogram);

}  // namespace npu::compiler
