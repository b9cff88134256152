// Quantisation at the model boundary: rounding, clamping, strides, round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "npu/runtime/quantize.h"

namespace npu::runtime {
namespace {

TensorInfo info_2d(int64_t rows, int64_t cols, int64_t row_stride, float scale, int32_t zp,
                   uint64_t offset = 0, DType device = DType::kI8) {
  TensorInfo t;
  t.name = "x";
  t.dtype = DType::kF32;
  t.shape = {rows, cols};
  t.device_dtype = device;
  t.device_offset = offset;
  t.device_strides = {row_stride, static_cast<int64_t>(dtype_size(device))};
  t.device_quant.scale = {scale};
  t.device_quant.zero_point = {zp};
  return t;
}

TEST(Quantize, RoundsHalfToEvenLikeOnnxQuantizeLinear) {
  EXPECT_EQ(quantize_int8(0.5f, 1.0f, 0), 0);
  EXPECT_EQ(quantize_int8(1.5f, 1.0f, 0), 2);
  EXPECT_EQ(quantize_int8(2.5f, 1.0f, 0), 2);
  EXPECT_EQ(quantize_int8(-0.5f, 1.0f, 0), 0);
  EXPECT_EQ(quantize_int8(-1.5f, 1.0f, 0), -2);
  EXPECT_EQ(quantize_int8(-2.5f, 1.0f, 0), -2);
  EXPECT_EQ(quantize_int8(0.3f, 0.1f, 0), 3);
  EXPECT_EQ(quantize_int8(1.0f, 0.5f, 10), 12);
}

// The rounding is exact against libm's nearbyint on every kind of float: random bit
// patterns (all magnitudes, infinities), exact halves, and values near 2^23.
TEST(Quantize, MatchesNearbyintOnRandomFloats) {
  auto reference = [](float x, float scale, int32_t zp) {
    if (std::isnan(x)) return static_cast<int8_t>(std::clamp(zp, -128, 127));
    const double q = static_cast<double>(std::nearbyint(x / scale)) + zp;
    return static_cast<int8_t>(std::clamp(q, -128.0, 127.0));
  };
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = next();
    float x;
    std::memcpy(&x, &bits, 4);
    if (i % 4 == 1) x = static_cast<float>(static_cast<int32_t>(next() % 2000) - 1000) + 0.5f;
    if (i % 4 == 2) x = 8388608.0f + static_cast<float>(static_cast<int32_t>(next() % 64) - 32) * 0.5f;
    const float scale = i % 3 == 0 ? 1.0f : 0.01f + static_cast<float>(next() % 1000) / 100.0f;
    const int32_t zp = static_cast<int32_t>(next() % 40) - 20;
    ASSERT_EQ(quantize_int8(x, scale, zp), reference(x, scale, zp)) << x << " / " << scale << " + " << zp;
    ASSERT_EQ(quantize_int8(-x / 300.0f, 1.0f, 0), reference(-x / 300.0f, 1.0f, 0)) << -x / 300.0f;
  }
}

TEST(Quantize, ClampsToInt8AfterAddingTheZeroPoint) {
  EXPECT_EQ(quantize_int8(1000.0f, 1.0f, 0), 127);
  EXPECT_EQ(quantize_int8(-1000.0f, 1.0f, 0), -128);
  EXPECT_EQ(quantize_int8(120.0f, 1.0f, 10), 127);
  EXPECT_EQ(quantize_int8(-120.0f, 1.0f, -10), -128);
  EXPECT_EQ(quantize_int8(std::numeric_limits<float>::infinity(), 1.0f, 0), 127);
  EXPECT_EQ(quantize_int8(-std::numeric_limits<float>::infinity(), 1.0f, 0), -128);
  EXPECT_EQ(quantize_int8(std::nanf(""), 1.0f, 5), 5);
}

TEST(Quantize, DequantizeIsScaleTimesQMinusZeroPoint) {
  EXPECT_FLOAT_EQ(dequantize(10, 0.5f, 4), 3.0f);
  EXPECT_FLOAT_EQ(dequantize(-128, 0.25f, -128), 0.0f);
  EXPECT_FLOAT_EQ(dequantize(127, 0.25f, -128), 63.75f);
}

// uint8 codes the device holds as int8 (a bound integer graph input/output): the exact
// -128 shift on the way in, +128 on the way out, through a strided view; int8 codes as is.
TEST(Quantize, Uint8CodesMoveByTheExactShiftAndInt8CodesAsTheyAre) {
  for (DType user : {DType::kU8, DType::kI8}) {
    TensorInfo info = info_2d(2, 128, 160, 1.0f, user == DType::kU8 ? -128 : 0, /*offset=*/8);
    info.dtype = user;
    EXPECT_EQ(uint8_codes_on_int8(info), user == DType::kU8);
    Tensor x = Tensor::zeros(user, {2, 128});
    for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<uint8_t>(i);  // every code
    ASSERT_TRUE(check_input(x, info, 0).is_ok());
    std::vector<std::byte> act(512, std::byte{0x55});
    ASSERT_TRUE(quantize_into(x, info, act).is_ok());
    for (size_t i = 0; i < x.data.size(); ++i) {
      const size_t off = 8 + (i / 128) * 160 + i % 128;
      const int expected = user == DType::kU8 ? static_cast<int>(i % 256) - 128 : static_cast<int8_t>(i % 256);
      ASSERT_EQ(static_cast<int8_t>(act[off]), expected) << "element " << i;
    }
    auto back = dequantize_from(info, act);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->dtype, user);
    EXPECT_EQ(back->data, x.data);
  }
  // A float tensor cannot feed integer codes.
  TensorInfo info = info_2d(1, 4, 4, 1.0f, -128);
  info.dtype = DType::kU8;
  EXPECT_FALSE(check_input(Tensor::zeros(DType::kF32, {1, 4}), info, 0).is_ok());
}

TEST(Quantize, WalksStridesAndZeroesUncoveredBytes) {
  const TensorInfo info = info_2d(3, 4, 8, 0.5f, 1, /*offset=*/16);
  Tensor x = Tensor::zeros(DType::kF32, {3, 4});
  auto v = x.as<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;  // q = i + 1
  std::vector<std::byte> act(64, std::byte{0xAA});
  ASSERT_TRUE(quantize_into(x, info, act).is_ok());
  for (size_t b = 0; b < act.size(); ++b) {
    const auto byte = static_cast<int8_t>(act[b]);
    if (b < 16 || b >= 16 + 2 * 8 + 4) {
      EXPECT_EQ(static_cast<uint8_t>(act[b]), 0xAA) << "byte " << b << " outside the view changed";
    } else {
      const size_t rel = b - 16, row = rel / 8, col = rel % 8;
      if (col < 4) {
        EXPECT_EQ(byte, static_cast<int8_t>(row * 4 + col + 1)) << "byte " << b;
      } else {
        EXPECT_EQ(byte, 0) << "gap byte " << b << " not zeroed";
      }
    }
  }
}

// quantize_into's row loops (contiguous and strided innermost dimension, rows longer than
// its 256-element chunks; the vectorised run kernels and the constant-stride scatters) give
// quantize_int8 of every element, for NaN, infinities, exact halves (scale 0.5), and zero
// points inside and outside the float fast path.
TEST(Quantize, IntoMatchesQuantizeInt8ElementByElement) {
  uint32_t state = 777;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (const int32_t zp : {0, -7, 100, -300, 5000000, -2000000000}) {
    for (const float scale : {0.37f, 0.5f}) {
      for (const int64_t col_stride : {1, 2, 3, 4, 5}) {
        const int64_t rows = 3, cols = 300;
        TensorInfo info = info_2d(rows, cols, cols * col_stride, scale, zp);
        info.device_strides[1] = col_stride;
        Tensor x = Tensor::zeros(DType::kF32, {rows, cols});
        auto v = x.as<float>();
        for (size_t i = 0; i < v.size(); ++i) {
          const uint32_t r = next();
          v[i] = i % 50 == 0 ? std::numeric_limits<float>::quiet_NaN()
                 : i % 50 == 1 ? std::numeric_limits<float>::infinity()
                 : i % 50 == 2 ? -std::numeric_limits<float>::infinity()
                               : static_cast<float>(static_cast<int32_t>(r % 20000) - 10000) * 0.0625f;
        }
        std::vector<std::byte> act(static_cast<size_t>(rows * cols * col_stride), std::byte{0});
        ASSERT_TRUE(quantize_into(x, info, act).is_ok());
        for (int64_t i = 0; i < rows * cols; ++i)
          ASSERT_EQ(static_cast<int8_t>(act[static_cast<size_t>(i * col_stride)]), quantize_int8(v[static_cast<size_t>(i)], scale, zp))
              << "element " << i << " = " << v[static_cast<size_t>(i)] << ", zp " << zp << ", scale " << scale
              << ", stride " << col_stride;
        for (size_t j = 0; j < act.size(); ++j) {  // the bytes between the elements stay cleared
          if (j % static_cast<size_t>(col_stride) != 0) {
            ASSERT_EQ(act[j], std::byte{0}) << "byte " << j << ", stride " << col_stride;
          }
        }
      }
    }
  }
}

TEST(Quantize, RoundTripIsWithinHalfAStep) {
  const float scale = 0.03f;
  const TensorInfo info = info_2d(8, 16, 16, scale, -7);
  Tensor x = Tensor::zeros(DType::kF32, {8, 16});
  auto v = x.as<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i)) * 3.5f;
  std::vector<std::byte> act(8 * 16);
  ASSERT_TRUE(quantize_into(x, info, act).is_ok());
  auto y = dequantize_from(info, act);
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  ASSERT_EQ(y->shape, x.shape);
  ASSERT_EQ(y->dtype, DType::kF32);
  auto w = y->as<float>();
  for (size_t i = 0; i < v.size(); ++i) {
    const float lo = scale * (-128 + 7), hi = scale * (127 + 7);
    const float expect = std::clamp(v[i], lo, hi);
    EXPECT_NEAR(w[i], expect, scale / 2 + 1e-6f) << "element " << i;
  }
  // Quantising the dequantised values gives the same bytes back (a fixed point).
  std::vector<std::byte> act2(8 * 16);
  ASSERT_TRUE(quantize_into(*y, info, act2).is_ok());
  EXPECT_EQ(std::memcmp(act.data(), act2.data(), act.size()), 0);
}

TEST(Quantize, Int32DeviceViewsRoundTrip) {
  const TensorInfo info = info_2d(2, 3, 12, 0.001f, 0, 0, DType::kI32);
  Tensor x = Tensor::zeros(DType::kF32, {2, 3});
  auto v = x.as<float>();
  v[0] = 1.2f, v[1] = -100.0f, v[2] = 0.0f, v[3] = 1e9f, v[4] = -1e9f, v[5] = 0.0005f;
  std::vector<std::byte> act(24);
  ASSERT_TRUE(quantize_into(x, info, act).is_ok());
  int32_t q[6];
  std::memcpy(q, act.data(), 24);
  EXPECT_EQ(q[0], 1200);
  EXPECT_EQ(q[1], -100000);
  EXPECT_EQ(q[3], 2147483647);
  EXPECT_EQ(q[4], -2147483648);
  EXPECT_EQ(q[5], 0);  // 0.5 ties to even
  auto y = dequantize_from(info, act);
  ASSERT_TRUE(y.is_ok());
  EXPECT_NEAR(y->as<float>()[1], -100.0f, 1e-3f);
}

TEST(Quantize, PerAxisScales) {
  TensorInfo info = info_2d(2, 2, 2, 1.0f, 0);
  info.device_quant.axis = 1;
  info.device_quant.scale = {1.0f, 0.5f};
  info.device_quant.zero_point = {0, 10};
  Tensor x = Tensor::zeros(DType::kF32, {2, 2});
  auto v = x.as<float>();
  v[0] = 3, v[1] = 3, v[2] = -2, v[3] = -2;
  std::vector<std::byte> act(4);
  ASSERT_TRUE(quantize_into(x, info, act).is_ok());
  EXPECT_EQ(static_cast<int8_t>(act[0]), 3);
  EXPECT_EQ(static_cast<int8_t>(act[1]), 16);
  EXPECT_EQ(static_cast<int8_t>(act[2]), -2);
  EXPECT_EQ(static_cast<int8_t>(act[3]), 6);
}

// Per-axis along a non-innermost axis of a strided (NHWC, channels padded) view: every
// element quantises with its channel's scale and zero point (ties to even, saturating, as
// ONNX QuantizeLinear), and dequantising gives back scale[c]·(q − zp[c]).
TEST(Quantize, PerAxisRoundTripAlongTheChannelsOfAnNhwcView) {
  TensorInfo info;
  info.name = "x";
  info.dtype = DType::kF32;
  info.shape = {2, 3, 2, 4};  // N, C, H, W stored NHWC with C padded to 16
  info.device_dtype = DType::kI8;
  info.device_strides = {2 * 4 * 16, 1, 4 * 16, 16};
  info.device_quant.axis = 1;
  info.device_quant.scale = {0.5f, 0.25f, 2.0f};
  info.device_quant.zero_point = {0, -100, 7};
  Tensor x = Tensor::zeros(DType::kF32, info.shape);
  auto v = x.as<float>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<float>(i) - 20.0f) * 0.375f;
  v[0] = 0.25f;    // channel 0: 0.5 steps -> ties to even 0
  v[1] = 0.75f;    // 1.5 steps -> 2
  v[8] = 1000.0f;  // channel 1: saturates at 127
  v[9] = -1000.0f; // saturates at -128
  std::vector<std::byte> act(2 * 2 * 4 * 16);
  ASSERT_TRUE(quantize_into(x, info, act).is_ok());
  auto y = dequantize_from(info, act);
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  for (size_t i = 0; i < v.size(); ++i) {
    const size_t n = i / 24, c = i / 8 % 3, h = i / 4 % 2, w = i % 4;
    const float s = info.device_quant.scale[c];
    const int32_t zp = info.device_quant.zero_point[c];
    const int8_t q = static_cast<int8_t>(act[((n * 2 + h) * 4 + w) * 16 + c]);
    const double expect = std::clamp(std::nearbyint(static_cast<double>(v[i]) / s) + zp, -128.0, 127.0);
    EXPECT_EQ(q, static_cast<int8_t>(expect)) << "element " << i << " (channel " << c << ")";
    EXPECT_EQ(y->as<float>()[i], s * static_cast<float>(q - zp)) << "element " << i;
  }
  EXPECT_EQ(static_cast<int8_t>(act[0]), 0);
  EXPECT_EQ(static_cast<int8_t>(act[16]), 2);
  EXPECT_EQ(static_cast<int8_t>(act[1]), 127);
  EXPECT_EQ(static_cast<int8_t>(act[16 + 1]), -128);
}

// An empty tensor (a zero dimension) covers no bytes: quantising and dequantising it touch
// nothing and succeed, even with a zero-byte activation buffer.
TEST(Quantize, EmptyTensorsCoverNoBytes) {
  TensorInfo info = info_2d(0, 4, 4, 0.5f, 1);
  EXPECT_EQ(view_extent(info), (std::pair<uint64_t, uint64_t>{0, 0}));
  std::vector<std::byte> act;
  ASSERT_TRUE(quantize_into(Tensor::zeros(DType::kF32, {0, 4}), info, act).is_ok());
  auto y = dequantize_from(info, act);
  ASSERT_TRUE(y.is_ok()) << y.status().to_string();
  EXPECT_EQ(y->shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(y->element_count(), 0);
}

TEST(Quantize, CheckInputNamesShapeAndDtypeProblems) {
  const TensorInfo info = info_2d(4, 64, 64, 0.1f, 0);
  Tensor wrong_shape = Tensor::zeros(DType::kF32, {4, 63});
  Status st = check_input(wrong_shape, info, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("[4,63]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[4,64]"), std::string::npos) << st.message();
  Tensor wrong_dtype = Tensor::zeros(DType::kI32, {4, 64});
  st = check_input(wrong_dtype, info, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("int32"), std::string::npos) << st.message();
  EXPECT_TRUE(check_input(Tensor::zeros(DType::kF32, {4, 64}), info, 0).is_ok());
}

TEST(Quantize, IntegerModelOutputsAreRawValues) {
  TensorInfo info = info_2d(1, 3, 3, 0.5f, 2);
  info.dtype = DType::kI8;
  std::vector<std::byte> act{std::byte{5}, std::byte{0xFF}, std::byte{0x80}};
  auto y = dequantize_from(info, act);
  ASSERT_TRUE(y.is_ok());
  ASSERT_EQ(y->dtype, DType::kI8);
  EXPECT_EQ(y->as<int8_t>()[0], 5);
  EXPECT_EQ(y->as<int8_t>()[1], -1);
  EXPECT_EQ(y->as<int8_t>()[2], -128);
}

}  // namespace
}  // namespace npu::runtime
