#include <gtest/gtest.h>

#include <cmath>

#include "quantize.h"

namespace npu::compiler {

TEST(Quantize, MultiplierReproducesScale) {
  for (double m : {1e-6, 0.000123, 0.0137, 0.5, 0.99999, 1.0, 3.75, 1000.0}) {
    int32_t mult = 0, shift = 0;
    quantize_multiplier(m, &mult, &shift);
    ASSERT_GE(shift, 0);
    ASSERT_LE(shift, 63);
    const double back = mult / std::ldexp(1.0, shift);
    EXPECT_NEAR(back / m, 1.0, 1e-6) << "m=" << m << " mult=" << mult << " shift=" << shift;
  }
}

TEST(Quantize, ActivationRangeIncludesZeroAndEnds) {
  const QParams q = activation_qparams(-1.0f, 3.0f);
  EXPECT_EQ(quantize_value(0.0f, q), q.zero_point);
  EXPECT_EQ(quantize_value(-1.0f, q), -128);
  EXPECT_EQ(quantize_value(3.0f, q), 127);
  const QParams pos = activation_qparams(0.5f, 2.0f);  // widened to include 0
  EXPECT_EQ(pos.zero_point, -128);
}

TEST(Quantize, RoundsHalfToEven) {
  QParams q{1.0f, 0};
  EXPECT_EQ(quantize_value(2.5f, q), 2);
  EXPECT_EQ(quantize_value(3.5f, q), 4);
  EXPECT_EQ(quantize_value(-2.5f, q), -2);
  EXPECT_EQ(quantize_value(1000.0f, q), 127);
}

}  // namespace npu::compiler
