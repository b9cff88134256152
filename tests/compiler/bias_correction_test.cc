// Bias correction (compiler/src/bias_correction.h) on layers built by hand: the bias change
// is the weights times the mean rounding error of the input per channel, padding taps
// excluded, and inputs whose quantisation the model declares are left alone.
#include "bias_correction.h"

#include <gtest/gtest.h>

#include <cmath>

namespace npu::compiler {
namespace {

// A depthwise 3x3 conv (all weights 1) reading x [1, 2, 6, 6] without padding.
ConvLayer depthwise_over(int x, int y) {
  ConvLayer c;
  c.name = "dw";
  c.input = x;
  c.output = y;
  c.C = c.Cout = 2;
  c.H = c.W = 6;
  c.KH = c.KW = 3;
  c.OH = c.OW = 4;
  c.depthwise = true;
  c.weights.assign(2 * 9, 1.0f);
  c.bias = {0.5f, -0.5f};
  return c;
}

// Channel 0 holds 0.2 everywhere (grid 0.5: rounds to 0, error -0.2), channel 1 holds 0.9
// (rounds to 1.0, error +0.1).
Tensor flat_sample() {
  Tensor t = Tensor::zeros(DType::kF32, {1, 2, 6, 6});
  for (size_t i = 0; i < 36; ++i) {
    t.as<float>()[i] = 0.2f;
    t.as<float>()[36 + i] = 0.9f;
  }
  return t;
}

// A graph x -> y ([1, 2, out, out]) whose one NPU step is the conv make(x, y).
struct OneConv {
  Graph g;
  int x = -1, y = -1;
  std::vector<PartitionStep> steps;
};
template <class Make>
OneConv one_conv(const Value& x_value, int64_t out, Make make) {
  OneConv t;
  t.x = t.g.add_value(x_value);
  t.y = t.g.add_value({"y", DType::kF32, {1, 2, out, out}});
  t.g.inputs = {t.x};
  t.g.outputs = {t.x};
  t.steps.resize(1);
  t.steps[0].on_npu = true;
  t.steps[0].ops.push_back(make(t.x, t.y));
  return t;
}

TEST(BiasCorrection, SubtractsTheKernelTimesTheInputsMeanRoundingError) {
  OneConv t = one_conv({"x", DType::kF32, {1, 2, 6, 6}}, 4, depthwise_over);
  const std::map<int, QParams> qp{{t.x, {0.5f, 0}}, {t.y, {0.1f, 0}}};
  auto facts = correct_conv_biases(t.g, t.steps, qp, {{flat_sample()}});
  ASSERT_TRUE(facts.is_ok()) << facts.status().message();
  EXPECT_EQ(facts->layers, 1);
  const auto& c = std::get<ConvLayer>(t.steps[0].ops[0]);
  EXPECT_NEAR(c.bias[0], 0.5f + 9 * 0.2f, 1e-5);   // the NPU sees 0 where the model has 0.2
  EXPECT_NEAR(c.bias[1], -0.5f - 9 * 0.1f, 1e-5);  // and 1.0 where it has 0.9
  EXPECT_NEAR(facts->max_shift, 1.8 / 0.1, 1e-3);
}

TEST(BiasCorrection, PaddingTapsCarryNoError) {
  OneConv t = one_conv({"x", DType::kF32, {1, 2, 6, 6}}, 6, [](int x, int y) {
    ConvLayer c = depthwise_over(x, y);
    c.pad_t = c.pad_l = c.pad_b = c.pad_r = 1;
    c.OH = c.OW = 6;
    return c;
  });
  ASSERT_TRUE(correct_conv_biases(t.g, t.steps, {{t.x, {0.5f, 0}}, {t.y, {0.1f, 0}}}, {{flat_sample()}}).is_ok());
  // Each axis: the outer taps read inside at 5 of 6 output positions, the centre at all 6,
  // so the mean number of taps inside is (16/6)^2 of 9.
  const double inside = (16.0 / 6) * (16.0 / 6);
  EXPECT_NEAR(std::get<ConvLayer>(t.steps[0].ops[0]).bias[0], 0.5 + inside * 0.2, 1e-5);
}

TEST(BiasCorrection, LeavesDeclaredInputsAlone) {
  Value xv{"x", DType::kF32, {1, 2, 6, 6}};
  xv.quant = DeclaredQuant{{0.5f}, {0}, 1};
  OneConv t = one_conv(xv, 4, depthwise_over);
  auto facts = correct_conv_biases(t.g, t.steps, {{t.x, {0.5f, 0}}, {t.y, {0.1f, 0}}}, {{flat_sample()}});
  ASSERT_TRUE(facts.is_ok());
  EXPECT_EQ(facts->layers, 0);
  EXPECT_EQ(std::get<ConvLayer>(t.steps[0].ops[0]).bias, (std::vector<float>{0.5f, -0.5f}));
}

}  // namespace
}  // namespace npu::compiler
