// Tap folding (lower_conv_folded) against the regular conv lowering and a float reference,
// on the functional model, for 8/16/32 arrays: strides 1 and 2, symmetric and asymmetric
// padding, zero and non-zero input zero points, several output blocks and a batch of 2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "bare_metal_run.h"
#include "lower.h"

namespace npu::compiler {
namespace {

struct Case {
  int64_t C, K, stride, pad_t, pad_l, pad_b, pad_r;
  int32_t zx;
};

using test::run_on_bare_metal;

class ConvFold : public ::testing::TestWithParam<uint32_t> {};

TEST_P(ConvFold, MatchesRegularLoweringBitForBitAndTheFloatReference) {
  const uint32_t N = GetParam();
  const std::vector<Case> cases = {
      {3, 3, 1, 1, 1, 1, 1, 0},  {3, 3, 2, 1, 1, 1, 1, 0}, {3, 3, 1, 1, 1, 1, 1, 37}, {3, 3, 2, 1, 1, 1, 1, -61},
      {2, 3, 2, 0, 1, 2, 0, 25}, {1, 5, 2, 2, 2, 2, 2, 90}, {2, 4, 1, 0, 2, 1, 1, -7}, {1, 7, 1, 3, 3, 3, 3, 12}, {2, 3, 1, 1, 1, 1, 1, -40}, {1, 3, 2, 1, 1, 1, 1, 5},
  };
  std::mt19937 rng(7);
  int folded_cases = 0;
  for (const Case& c : cases) {
    ConvLayer L;
    L.name = "conv";
    L.batch = 2;
    L.C = c.C;
    L.H = 13;
    L.W = 11;
    L.Cout = 20;  // more than one output block on 8 and 16 lanes, a partial one on 32
    L.KH = L.KW = c.K;
    L.stride_h = L.stride_w = c.stride;
    L.pad_t = c.pad_t, L.pad_l = c.pad_l, L.pad_b = c.pad_b, L.pad_r = c.pad_r;
    L.OH = (L.H + c.pad_t + c.pad_b - c.K) / c.stride + 1;
    L.OW = (L.W + c.pad_l + c.pad_r - c.K) / c.stride + 1;
    L.act_lo = 0.0f;  // a fused Relu: the clamp must survive the folding too
    std::normal_distribution<float> nd(0.0f, 0.3f);
    L.weights.resize(static_cast<size_t>(L.Cout * L.C * c.K * c.K));
    for (float& w : L.weights) w = nd(rng);
    L.bias.resize(static_cast<size_t>(L.Cout));
    for (float& b : L.bias) b = nd(rng);
    SCOPED_TRACE("C=" + std::to_string(c.C) + " K=" + std::to_string(c.K) + " stride=" + std::to_string(c.stride) +
                 " zx=" + std::to_string(c.zx) + " N=" + std::to_string(N));
    if (!conv_folds_taps(L, N)) {
      EXPECT_GT(L.C * L.KW, static_cast<int64_t>(N)) << "a conv that fits one row must fold";
      continue;
    }
    ++folded_cases;
    const QParams qx{0.02f, c.zx}, qy{0.05f, -100};
    const int64_t Cp = padded_channels(L.C, N), Coutp = padded_channels(L.Cout, N);
    const int64_t in_px = L.batch * L.H * L.W, out_px = L.batch * L.OH * L.OW;
    std::uniform_int_distribution<int> code(-128, 127);
    std::vector<int8_t> x(static_cast<size_t>(in_px * L.C));
    for (int8_t& v : x) v = static_cast<int8_t>(code(rng));

    // Folded: dense NHWC input at 0, output after it. Regular: NHWC-Cp input.
    const uint32_t dense_out = static_cast<uint32_t>((in_px * L.C + 63) / 64 * 64);
    const uint32_t padded_out = static_cast<uint32_t>(in_px * Cp);
    std::vector<int8_t> act_f(dense_out + static_cast<size_t>(out_px * Coutp), 0), act_r(padded_out + static_cast<size_t>(out_px * Coutp), 0);
    for (int64_t p = 0; p < in_px; ++p)
      for (int64_t ci = 0; ci < L.C; ++ci) {
        act_f[static_cast<size_t>(p * L.C + ci)] = x[static_cast<size_t>(p * L.C + ci)];
        act_r[static_cast<size_t>(p * Cp + ci)] = x[static_cast<size_t>(p * L.C + ci)];
      }
    std::vector<uint8_t> wf, wr;
    Program pf, pr;
    auto ff = lower_conv_folded(L, qx, qy, N, 0, dense_out, wf, pf);
    ASSERT_TRUE(ff.is_ok()) << ff.status().to_string();
    auto fr = lower_conv_layer(L, qx, qy, N, 0, padded_out, wr, pr);
    ASSERT_TRUE(fr.is_ok()) << fr.status().to_string();
    // Folding issues KH taps of one tile per output block instead of KH·KW.
    EXPECT_EQ(ff->macs, static_cast<uint64_t>(out_px * L.KH * (Coutp / N)) * N * N);
    EXPECT_EQ(fr->macs, ff->macs * static_cast<uint64_t>(L.KW));
    const std::vector<int8_t> yf = run_on_bare_metal(pf, wf, act_f, N), yr = run_on_bare_metal(pr, wr, act_r, N);

    // Bit-exact against the regular lowering (same codes, same biases, same requantisation),
    // and within 1 LSB of the float conv of the dequantised input and real weights
    // (the only differences being weight quantisation and the rounding of the result).
    int64_t mismatches = 0, far = 0;
    double err2 = 0, ref2 = 0;
    for (int64_t b = 0; b < L.batch; ++b)
      for (int64_t oy = 0; oy < L.OH; ++oy)
        for (int64_t ox = 0; ox < L.OW; ++ox)
          for (int64_t co = 0; co < L.Cout; ++co) {
            const size_t at = static_cast<size_t>(((b * L.OH + oy) * L.OW + ox) * Coutp + co);
            mismatches += yf[dense_out + at] != yr[padded_out + at];
            double acc = L.bias[static_cast<size_t>(co)];
            for (int64_t ky = 0; ky < L.KH; ++ky)
              for (int64_t kx = 0; kx < L.KW; ++kx) {
                const int64_t iy = oy * L.stride_h - L.pad_t + ky, ix = ox * L.stride_w - L.pad_l + kx;
                if (iy < 0 || iy >= L.H || ix < 0 || ix >= L.W) continue;  // zero padding: real 0
                for (int64_t ci = 0; ci < L.C; ++ci) {
                  const int8_t q = x[static_cast<size_t>(((b * L.H + iy) * L.W + ix) * L.C + ci)];
                  acc += qx.scale * (q - qx.zero_point) *
                         L.weights[static_cast<size_t>(((co * L.C + ci) * L.KH + ky) * L.KW + kx)];
                }
              }
            const double ref = std::max(acc, 0.0);
            const double got = qy.scale * (yf[dense_out + at] - qy.zero_point);
            err2 += (got - ref) * (got - ref);
            ref2 += ref * ref;
            far += std::fabs(got - ref) > 4 * qy.scale;
          }
    EXPECT_EQ(mismatches, 0) << "folded and regular lowering disagree";
    EXPECT_EQ(far, 0) << "outputs more than 4 LSB from the float reference";
    EXPECT_GT(10 * std::log10(ref2 / std::max(err2, 1e-30)), 30.0);
  }
  EXPECT_GE(folded_cases, 5);
}

INSTANTIATE_TEST_SUITE_P(ArrayDims, ConvFold, ::testing::Values(8u, 16u, 32u));

}  // namespace
}  // namespace npu::compiler
