// Error-feedback weight rounding (compiler/src/weight_rounding.h) on layers built by hand:
// the weights land on the grids nearest rounding uses (same scales, codes within ±127, each
// channel's largest weight at ±127), the layer's output error on the samples is below nearest
// rounding's, and layers it must not touch are left alone.
#include "weight_rounding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lower.h"

namespace npu::compiler {
namespace {

constexpr int64_t kC = 16, kCout = 8, kHW = 12;

// x [1, 16, 12, 12] whose channels share one smooth signal (noise averaged over 3x3 pixels)
// plus a little noise of their own: inputs correlated across channels and neighbouring
// pixels, where the errors of nearest rounding add up.
Tensor correlated_input(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Tensor t = Tensor::zeros(DType::kF32, {1, kC, kHW, kHW});
  std::vector<float> noise(kHW * kHW), base(kHW * kHW, 0.0f);
  for (float& v : noise) v = n(rng);
  for (int64_t i = 0; i < kHW; ++i)
    for (int64_t j = 0; j < kHW; ++j)
      for (int64_t di = -1; di <= 1; ++di)
        for (int64_t dj = -1; dj <= 1; ++dj)
          if (i + di >= 0 && i + di < kHW && j + dj >= 0 && j + dj < kHW)
            base[static_cast<size_t>(i * kHW + j)] += noise[static_cast<size_t>((i + di) * kHW + j + dj)] / 3;
  for (int64_t c = 0; c < kC; ++c)
    for (int64_t i = 0; i < kHW * kHW; ++i)
      t.as<float>()[static_cast<size_t>(c * kHW * kHW + i)] = base[static_cast<size_t>(i)] * (1.0f + 0.1f * c) + 0.2f * n(rng);
  return t;
}

ConvLayer conv_over(int x, int y, bool depthwise) {
  ConvLayer c;
  c.name = depthwise ? "dw" : "pw";
  c.input = x;
  c.output = y;
  c.C = kC;
  c.Cout = depthwise ? kC : kCout;
  c.H = c.W = kHW;
  c.KH = c.KW = depthwise ? 3 : 1;
  c.pad_t = c.pad_l = c.pad_b = c.pad_r = depthwise ? 1 : 0;
  c.OH = c.OW = kHW;
  c.depthwise = depthwise;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  c.weights.resize(static_cast<size_t>(c.Cout * (depthwise ? 9 : kC)));
  for (float& w : c.weights) w = u(rng);
  c.bias.assign(static_cast<size_t>(c.Cout), 0.0f);
  return c;
}

struct OneConv {
  Graph g;
  int x = -1;
  std::vector<PartitionStep> steps;
  ConvLayer& conv() { return std::get<ConvLayer>(steps[0].ops[0]); }
};
OneConv one_conv(bool depthwise) {
  OneConv t;
  t.x = t.g.add_value({"x", DType::kF32, {1, kC, kHW, kHW}});
  const int y = t.g.add_value({"y", DType::kF32, {1, depthwise ? kC : kCout, kHW, kHW}});
  t.g.inputs = {t.x};
  t.g.outputs = {t.x};
  t.steps.resize(1);
  t.steps[0].on_npu = true;
  t.steps[0].ops.push_back(conv_over(t.x, y, depthwise));
  return t;
}

// Σ over the output of (conv with w − conv with the float weights)² on input x (stride 1).
double output_error(const ConvLayer& c, const std::vector<float>& w, const Tensor& x) {
  const std::vector<float>& f = c.float_weights.empty() ? c.weights : c.float_weights;
  const int64_t cin = c.depthwise ? 1 : c.C, taps = c.KH * c.KW;
  double total = 0;
  for (int64_t co = 0; co < c.Cout; ++co)
    for (int64_t oh = 0; oh < c.OH; ++oh)
      for (int64_t ow = 0; ow < c.OW; ++ow) {
        double e = 0;
        for (int64_t ci = 0; ci < cin; ++ci)
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t ih = oh - c.pad_t + t / c.KW, iw = ow - c.pad_l + t % c.KW;
            if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
            const int64_t ch = c.depthwise ? co : ci;
            const size_t k = static_cast<size_t>((co * cin + ci) * taps + t);
            e += (static_cast<double>(w[k]) - f[k]) * x.as<float>()[static_cast<size_t>((ch * c.H + ih) * c.W + iw)];
          }
        total += e * e;
      }
  return total;
}

std::vector<float> nearest(const ConvLayer& c, const std::vector<float>& scales) {
  std::vector<float> q(c.weights.size());
  const size_t per = q.size() / scales.size();
  for (size_t i = 0; i < q.size(); ++i) q[i] = scales[i / per] * quantize_weight(c.weights[i], scales[i / per], false);
  return q;
}

void expect_rounded_onto_the_same_grids(bool depthwise) {
  OneConv t = one_conv(depthwise);
  const std::vector<float> scales = conv_weight_scales(t.conv());
  const std::vector<float> rtn = nearest(t.conv(), scales);
  std::vector<std::vector<Tensor>> samples;
  for (uint32_t s = 0; s < 4; ++s) samples.push_back({correlated_input(s)});
  auto facts = round_conv_weights(t.g, t.steps, samples);
  ASSERT_TRUE(facts.is_ok()) << facts.status().message();
  EXPECT_EQ(facts->layers, 1);
  EXPECT_GT(facts->gain_db, 0);
  const ConvLayer& c = t.conv();
  ASSERT_EQ(c.float_weights.size(), c.weights.size());
  EXPECT_EQ(conv_weight_scales(c), scales);  // the lowering chooses the same scales again
  const size_t per = c.weights.size() / scales.size();
  for (size_t r = 0; r < scales.size(); ++r) {
    float largest = 0;
    for (size_t k = r * per; k < (r + 1) * per; ++k) {
      const float code = c.weights[k] / scales[r];
      EXPECT_NEAR(code, std::nearbyint(code), 1e-3) << "weight " << k << " is off its grid";
      EXPECT_LE(std::fabs(code), 127.001f);
      EXPECT_EQ(quantize_weight(c.weights[k], scales[r], false), static_cast<int8_t>(std::nearbyint(code)));
      largest = std::max(largest, std::fabs(code));
    }
    EXPECT_NEAR(largest, 127.0f, 1e-3) << "channel " << r;
  }
  // Lower output error than nearest rounding, also on an input it was not calibrated on.
  for (uint32_t s : {1u, 99u}) {
    const Tensor x = correlated_input(s);
    EXPECT_LT(output_error(c, c.weights, x), 0.8 * output_error(c, rtn, x)) << "input seed " << s;
  }
}

TEST(WeightRounding, DenseConvLandsOnTheSameGridsWithLessOutputError) { expect_rounded_onto_the_same_grids(false); }

TEST(WeightRounding, DepthwiseConvLandsOnTheSameGridsWithLessOutputError) { expect_rounded_onto_the_same_grids(true); }

TEST(WeightRounding, LeavesDeclaredScalesAndLayersWithoutSamplesAlone) {
  OneConv declared = one_conv(false);
  declared.conv().weight_scales.assign(kCout, 0.01f);
  const std::vector<float> before = declared.conv().weights;
  auto facts = round_conv_weights(declared.g, declared.steps, {{correlated_input(0)}});
  ASSERT_TRUE(facts.is_ok());
  EXPECT_EQ(facts->layers, 0);
  EXPECT_EQ(declared.conv().weights, before);
  EXPECT_TRUE(declared.conv().float_weights.empty());

  OneConv none = one_conv(false);
  facts = round_conv_weights(none.g, none.steps, {});
  ASSERT_TRUE(facts.is_ok());
  EXPECT_EQ(facts->layers, 0);
  EXPECT_EQ(none.conv().weights, before);
}

}  // namespace
}  // namespace npu::compiler
