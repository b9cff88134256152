// Threshold selection of the calibration methods on synthetic distributions.
#include "calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <random>
#include <vector>

namespace npu::compiler {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

AbsHistogram histogram_of(const std::vector<float>& v) {
  float mx = 0;
  for (float x : v) mx = std::max(mx, std::fabs(x));
  AbsHistogram h(mx);
  h.add(v);
  return h;
}

void add_node(Graph& g, const std::string& name, const std::string& op, std::vector<int> inputs, std::vector<int> outputs) {
  Node n;
  n.name = name;
  n.op = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  g.nodes.push_back(std::move(n));
}

// x -> Conv -> c -> Sigmoid -> y: the sigmoid joins the conv as its fused table, and c (the
// conv's requantisation target, read by that table alone) narrows like a value a separate
// table reads.
TEST(Calibration, RangesNarrowForAConvOutputOnlyItsFusedTableReads) {
  Graph g;
  const int x = g.add_value({"x", DType::kF32, {1, 16, 4, 4}});
  Tensor w = Tensor::zeros(DType::kF32, {16, 16, 1, 1});
  for (size_t k = 0; k < 16; ++k) w.as<float>()[k * 16 + k] = 1.0f;
  const int wv = g.add_value({"w", DType::kF32, {16, 16, 1, 1}, w});
  const int c = g.add_value({"c", DType::kF32, {1, 16, 4, 4}});
  const int y = g.add_value({"y", DType::kF32, {1, 16, 4, 4}});
  g.inputs = {x};
  g.outputs = {y};
  add_node(g, "conv", "Conv", {x, wv}, {c});
  add_node(g, "sig", "Sigmoid", {c}, {y});
  ValueRanges ranges{{x, {-60.0f, 40.0f}}, {c, {-60.0f, 40.0f}}, {y, {0.0f, 1.0f}}};
  const auto steps = partition(g, 16, &ranges);
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_EQ(steps[0].ops.size(), 1u);
  const auto* layer = std::get_if<ConvLayer>(&steps[0].ops[0]);
  ASSERT_NE(layer, nullptr);
  ASSERT_EQ(layer->lut_input, c);
  narrow_ranges_for_lut_readers(g, steps, ranges);
  EXPECT_NEAR(ranges[c].first, -6.9f, 0.3f);
  EXPECT_NEAR(ranges[c].second, 6.9f, 0.3f);
  EXPECT_EQ(ranges[x], std::make_pair(-60.0f, 40.0f));  // the conv's input: not table-read
}

}  // namespace

// x [rows, L] -> Softmax -> y: calibrate() picks y's power-of-two grid by squared error.
// Rows of 40 flat-ish scores whose largest weight rarely passes 0.5 (attention) get 2^-8,
// clipping those few; rows that peak near 1 (class probabilities) keep the range up to 1.
ValueRanges softmax_ranges(float peak_logit, int peaked_rows) {
  Graph g;
  const int64_t rows = 64, L = 40;
  const int x = g.add_value({"x", DType::kF32, {rows, L}});
  const int y = g.add_value({"y", DType::kF32, {rows, L}});
  g.inputs = {x};
  g.outputs = {y};
  g.opset = 13;
  add_node(g, "sm", "Softmax", {x}, {y});
  Tensor t = Tensor::zeros(DType::kF32, {rows, L});
  std::vector<float> noise = gaussian(static_cast<size_t>(rows * L), 5);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < L; ++c)
      t.as<float>()[static_cast<size_t>(r * L + c)] = noise[static_cast<size_t>(r * L + c)] + (c == 0 && r < peaked_rows ? peak_logit : 0.0f);
  float top = 0;  // the largest probability, to show what the grid has to hold
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < L; ++c) sum += std::exp(t.as<float>()[static_cast<size_t>(r * L + c)]);
    for (int64_t c = 0; c < L; ++c) top = std::max(top, static_cast<float>(std::exp(t.as<float>()[static_cast<size_t>(r * L + c)]) / sum));
  }
  if (peaked_rows == 1) {
    EXPECT_NEAR(top, 0.55f, 0.03f);
  }
  auto ranges = calibrate(g, {{t}}, CalibrationMethod{});
  EXPECT_TRUE(ranges.is_ok()) << ranges.status().to_string();
  return ranges.is_ok() ? *ranges : ValueRanges{};
}

TEST(Calibration, SoftmaxOutputGridIsChosenBySquaredError) {
  // One row peaks at 0.55 (the grid holding it is 2^-7), the others stay below 0.25:
  // clipping that one weight at 0.5 costs less than 2^-7 costs the rest.
  const ValueRanges attention = softmax_ranges(4.6f, 1);
  ASSERT_EQ(attention.count(1), 1u);
  EXPECT_EQ(attention.at(1).second, 0.5f);  // 2^-8 · 128: clipped
  // Every row peaks near 1: the grid up to 1 stays.
  const ValueRanges classes = softmax_ranges(12.0f, 64);
  EXPECT_GT(classes.at(1).second, 0.99f);
  EXPECT_LE(classes.at(1).second, 1.0f);
}

TEST(Calibration, ParsesMethods) {
  EXPECT_EQ(parse_calibration_method("minmax")->kind, CalibrationMethod::Kind::kMinMax);
  EXPECT_EQ(parse_calibration_method("entropy")->kind, CalibrationMethod::Kind::kEntropy);
  EXPECT_EQ(parse_calibration_method("mse")->kind, CalibrationMethod::Kind::kMse);
  auto p = parse_calibration_method("percentile");
  ASSERT_TRUE(p.is_ok());
  EXPECT_DOUBLE_EQ(p->percentile, 99.99);
  p = parse_calibration_method("percentile=99.5");
  ASSERT_TRUE(p.is_ok());
  EXPECT_DOUBLE_EQ(p->percentile, 99.5);
  for (const char* bad :
       {"percentile=0", "percentile=101", "percentile=x", "percentile=", "kl", ""})
    EXPECT_FALSE(parse_calibration_method(bad).is_ok()) << bad;
}

TEST(Calibration, PercentileOfUniformIsItsQuantile) {
  // |x| uniform on [0, 1): the 99% point is 0.99 to within one bin.
  std::vector<float> v;
  for (int i = 0; i < 100000; ++i)
    v.push_back(static_cast<float>((i + 0.5) / 100000.0) * (i % 2 ? 1.0f : -1.0f));
  const AbsHistogram h = histogram_of(v);
  EXPECT_NEAR(percentile_threshold(h, 99.0), 0.99, h.bin_width() * 1.01);
  EXPECT_NEAR(percentile_threshold(h, 100.0), h.limit(), 1e-9);
}

TEST(Calibration, PercentileClipsRareOutliers) {
  std::vector<float> v = gaussian(200000, 1);
  v.push_back(50.0f);  // one outlier sets the min/max range
  const AbsHistogram h = histogram_of(v);
  const double t = percentile_threshold(h, 99.99);
  // The 99.99% point of |N(0,1)| is about 3.89.
  EXPECT_GT(t, 3.5);
  EXPECT_LT(t, 4.3);
}

TEST(Calibration, EntropyKeepsAUniformRange) {
  // Nothing to gain from clipping a uniform distribution: the threshold stays near the end.
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) v.push_back(static_cast<float>(i % 1000) / 1000.0f * 4.0f);
  const AbsHistogram h = histogram_of(v);
  EXPECT_GT(entropy_threshold(h), 0.9 * h.limit());
}

TEST(Calibration, EntropyClipsALongTail) {
  // A Gaussian plus a few far outliers: the KL threshold lies in the body, far below the
  // outliers and well above one standard deviation.
  std::vector<float> v = gaussian(200000, 2);
  for (int i = 0; i < 20; ++i) v.push_back(40.0f + static_cast<float>(i));
  const AbsHistogram h = histogram_of(v);
  const double t = entropy_threshold(h);
  EXPECT_LT(t, 0.25 * h.limit());
  EXPECT_GT(t, 2.0);
}

TEST(Calibration, MseKeepsAUniformRangeAndClipsRareOutliers) {
  std::vector<float> u;
  for (int i = 0; i < 200000; ++i) u.push_back(static_cast<float>(i % 1000) / 1000.0f * 4.0f);
  const AbsHistogram hu = histogram_of(u);
  EXPECT_GT(mse_threshold(hu, 0.0, 4.0), 0.95 * hu.limit());
  // A Laplace(0, 1) tail (|x| up to about ln(200000) = 12): the squared-error optimum for
  // 256 levels clips it at about 10 scale units (a known result for 8 bits), keeping the body.
  std::mt19937 rng(3);
  std::exponential_distribution<float> e(1.0f);
  std::vector<float> v;
  for (int i = 0; i < 200000; ++i) v.push_back(i % 2 ? e(rng) : -e(rng));
  const AbsHistogram hv = histogram_of(v);
  const double t = mse_threshold(hv, -hv.limit(), hv.limit());
  EXPECT_LT(t, 0.9 * hv.limit());
  EXPECT_GT(t, 6.0);
  // And 20 far outliers among 200,000 N(0,1): clipping them would cost more (20·45² in squared
  // error) than the coarser step costs the body (200,000·step²/12), so they are kept.
  std::vector<float> g = gaussian(200000, 3);
  for (int i = 0; i < 20; ++i) g.push_back(40.0f + static_cast<float>(i));
  const AbsHistogram hg = histogram_of(g);
  EXPECT_GT(mse_threshold(hg, -5.0, 59.0), 0.9 * hg.limit());
}

TEST(Calibration, EntropyNeverClipsTheBodyOfAnOffsetDistribution) {
  // Values in [0.25, 0.85] (a sigmoid's output): no bin below 0.25 holds mass, so a naive
  // search would clip at the minimum, where P and Q are the same spike.
  std::vector<float> v;
  for (int i = 0; i < 50000; ++i) v.push_back(0.25f + 0.6f * static_cast<float>(i % 997) / 996.0f);
  const AbsHistogram h = histogram_of(v);
  EXPECT_GT(entropy_threshold(h), 0.84 * 0.99);
}

TEST(Calibration, RangeIsClippedOnlyByTheChosenMethod) {
  std::vector<float> v = gaussian(100000, 3);
  v.push_back(30.0f);
  const AbsHistogram h = histogram_of(v);
  CalibrationMethod minmax;
  EXPECT_EQ(calibrated_range(minmax, -4.0f, 30.0f, &h), std::make_pair(-4.0f, 30.0f));
  CalibrationMethod pct{CalibrationMethod::Kind::kPercentile, 99.9};
  const auto [lo, hi] = calibrated_range(pct, -1.0f, 30.0f, &h);
  EXPECT_EQ(lo, -1.0f);  // the threshold (~3.3) only clips what lies beyond it
  EXPECT_LT(hi, 4.0f);
  EXPECT_GT(hi, 3.0f);
}

TEST(Calibration, EmptyHistogramKeepsTheLimit) {
  AbsHistogram h(2.0);
  EXPECT_DOUBLE_EQ(entropy_threshold(h), 2.0);
  EXPECT_DOUBLE_EQ(percentile_threshold(h, 99.0), 2.0);
}


// Consumer-aware ranges: the flat ends of a lookup table's function need no codes.
TEST(Calibration, LiveIntervalOfSaturatingFunctions) {
  auto sigmoid = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  const float tol = 1.0f / 255 / 4;  // a quarter step of a [0, 1] output
  auto [a, b] = lut_live_interval(sigmoid, -100, 100, tol);
  // sigmoid(x) is within tol of 0 below about -6.9 and of 1 above +6.9.
  EXPECT_NEAR(a, -6.9f, 0.2f);
  EXPECT_NEAR(b, 6.9f, 0.2f);
  // Hard-swish is 0 below -3 and linear above: only the lower end is flat.
  auto hswish = [](float x) { return x * std::clamp(x + 3.0f, 0.0f, 6.0f) / 6.0f; };
  std::tie(a, b) = lut_live_interval(hswish, -250, 200, 0.1f);
  EXPECT_NEAR(a, -3.0f, 0.2f);
  EXPECT_EQ(b, 200.0f);
  // A function that changes everywhere keeps the range; so does one flat everywhere.
  std::tie(a, b) = lut_live_interval([](float x) { return x; }, -5, 5, 0.001f);  // below one sample step
  EXPECT_EQ(a, -5.0f);
  EXPECT_EQ(b, 5.0f);
  std::tie(a, b) = lut_live_interval([](float) { return 2.0f; }, -5, 5, 0.01f);
  EXPECT_EQ(a, -5.0f);
  EXPECT_EQ(b, 5.0f);
}

// x -> Sigmoid -> y: x's range shrinks to where the sigmoid changes, unless something other
// than a lookup table reads x (here: x is also a graph output).
TEST(Calibration, RangesNarrowOnlyForValuesThatOnlyLookupTablesRead) {
  for (const bool x_is_output : {false, true}) {
    Graph g;
    const int x = g.add_value({"x", DType::kF32, {1, 16, 4, 4}});
    const int y = g.add_value({"y", DType::kF32, {1, 16, 4, 4}});
    g.inputs = {x};
    g.outputs = {y};
    if (x_is_output) g.outputs.push_back(x);
    Node n;
    n.name = "sig";
    n.op = "Sigmoid";
    n.inputs = {x};
    n.outputs = {y};
    g.nodes.push_back(n);
    ValueRanges ranges{{x, {-60.0f, 40.0f}}, {y, {0.0f, 1.0f}}};
    const auto steps = partition(g, 16, &ranges);
    ASSERT_EQ(steps.size(), 1u);
    ASSERT_TRUE(steps[0].on_npu);
    EXPECT_EQ(narrow_ranges_for_lut_readers(g, steps, ranges).size(), x_is_output ? 0u : 1u);
    if (x_is_output) {
      EXPECT_EQ(ranges[x], std::make_pair(-60.0f, 40.0f));
    } else {
      EXPECT_NEAR(ranges[x].first, -6.9f, 0.3f);
      EXPECT_NEAR(ranges[x].second, 6.9f, 0.3f);
    }
    EXPECT_EQ(ranges[y], std::make_pair(0.0f, 1.0f));
  }
}

}  // namespace npu::compiler
