// The integer GEMM lowerings (int32 outputs, zero-point corrections, integer weight sets) on
// the functional model at every array dim, against a plain int32 reference: a dynamic-B FC
// with zero points on x and B (0 included: the two-half corrections), K and N with partial
// blocks, batches; a convolution with padding (border biases), stride, weights up to ±255
// (several int8 weight sets), an input zero point and a batch of 2.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "bare_metal_run.h"
#include "lower.h"

namespace npu::compiler {
namespace {

using test::run_on_bare_metal;

int32_t read_i32(const std::vector<int8_t>& act, uint64_t at) {
  int32_t v;
  std::memcpy(&v, act.data() + at, 4);
  return v;
}

class IntegerGemmLowering : public ::testing::TestWithParam<uint32_t> {};

TEST_P(IntegerGemmLowering, DynamicBWithZeroPointsStoresExactInt32Accumulators) {
  const uint32_t N = GetParam();
  struct Case {
    int64_t batches, M, K, Ncols;
    int32_t zx, zw;
  };
  // zero points as int8 codes: -128 is uint8 zero point 0 (corrections of 128).
  for (const Case& c : {Case{1, 70, 50, 30, -128, -128}, Case{2, 9, 37, 20, 5, -7},
                        Case{1, 33, 8, 3, 0, 100}, Case{1, 4, 65, 40, -100, 0}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " M=" + std::to_string(c.M) +
                 " K=" + std::to_string(c.K) + " zx=" + std::to_string(c.zx) +
                 " zw=" + std::to_string(c.zw));
    std::mt19937 rng(static_cast<uint32_t>(c.M * 7 + c.K));
    std::uniform_int_distribution<int> code(-128, 127);
    FcLayer L;
    L.name = "mm";
    L.op = "MatMul";
    L.M = c.M;
    L.K = c.K;
    L.N = c.Ncols;
    L.batches = c.batches;
    L.weight_input = 1;
    L.bias.assign(static_cast<size_t>(c.Ncols), 0.0f);
    L.int32_output = true;
    const uint64_t x_bytes = static_cast<uint64_t>(c.batches * c.M * c.K);
    const uint64_t b_off = (x_bytes + 63) / 64 * 64,
                   b_bytes = static_cast<uint64_t>(c.batches * c.K * c.Ncols);
    const uint64_t y_off = (b_off + b_bytes + N + 63) / 64 * 64;
    std::vector<int8_t> act(y_off + static_cast<uint64_t>(c.batches * c.M * c.Ncols) * 4, 0);
    for (uint64_t i = 0; i < x_bytes; ++i) act[i] = static_cast<int8_t>(code(rng));
    for (uint64_t i = 0; i < b_bytes; ++i) act[b_off + i] = static_cast<int8_t>(code(rng));
    // Stale bytes after B: the tail rows of the last tile must not matter.
    for (uint64_t i = b_off + b_bytes; i < y_off; ++i) act[i] = 0x5A;
    DynamicOperands dyn;
    dyn.qw = QParams{1.0f, c.zw};
    dyn.w_off = static_cast<uint32_t>(b_off);
    dyn.w_k_stride = static_cast<uint32_t>(c.Ncols);
    dyn.w_batch_stride = static_cast<uint32_t>(c.K * c.Ncols);
    std::vector<uint8_t> weights;
    Program prog;
    auto facts = lower_fc_layer(L, QParams{1.0f, c.zx}, QParams{1.0f, 0}, N, 0,
                                static_cast<uint32_t>(y_off), weights, prog, dyn);
    ASSERT_TRUE(facts.is_ok()) << facts.status().to_string();
    const std::vector<int8_t> out = run_on_bare_metal(prog, weights, act, N);
    int64_t bad = 0;
    for (int64_t b = 0; b < c.batches; ++b)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.Ncols; ++n) {
          int64_t acc = 0;
          for (int64_t k = 0; k < c.K; ++k)
            acc += static_cast<int64_t>(act[static_cast<size_t>((b * c.M + m) * c.K + k)] - c.zx) *
                   (act[static_cast<size_t>(b_off +
                                            static_cast<uint64_t>((b * c.K + k) * c.Ncols + n))] -
                    c.zw);
          const int32_t got =
              read_i32(out, y_off + static_cast<uint64_t>((b * c.M + m) * c.Ncols + n) * 4);
          if (got != acc && bad++ < 3)
            ADD_FAILURE() << "y[" << b << "][" << m << "][" << n << "] = " << got << ", expected "
                          << acc;
        }
    EXPECT_EQ(bad, 0);
  }
}

TEST_P(IntegerGemmLowering, ConvWithPaddingAndWideIntegerWeightsStoresExactInt32Accumulators) {
  const uint32_t N = GetParam();
  struct Case {
    int64_t batch, C, Cout, H, W, K, stride, pt, pl, pb, pr;
    int32_t zx;
    int wmax;  // weights in [-wmax, wmax]: beyond 127 several int8 weight sets
  };
  for (const Case& c : {Case{1, 20, 12, 9, 11, 3, 1, 1, 1, 1, 1, 77, 255},
                        Case{2, 3, 40, 8, 7, 3, 2, 2, 0, 1, 2, -128, 127},
                        Case{2, 9, 5, 6, 6, 2, 1, 0, 0, 0, 0, 3, 200}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(c.C) +
                 " Cout=" + std::to_string(c.Cout) + " zx=" + std::to_string(c.zx) +
                 " wmax=" + std::to_string(c.wmax));
    std::mt19937 rng(static_cast<uint32_t>(c.C * 11 + c.Cout));
    std::uniform_int_distribution<int> code(-128, 127), wcode(-c.wmax, c.wmax);
    ConvLayer L;
    L.name = "conv";
    L.batch = c.batch;
    L.C = c.C;
    L.H = c.H;
    L.W = c.W;
    L.Cout = c.Cout;
    L.KH = L.KW = c.K;
    L.stride_h = L.stride_w = c.stride;
    L.pad_t = c.pt, L.pad_l = c.pl, L.pad_b = c.pb, L.pad_r = c.pr;
    L.OH = (c.H + c.pt + c.pb - c.K) / c.stride + 1;
    L.OW = (c.W + c.pl + c.pr - c.K) / c.stride + 1;
    L.weights.resize(static_cast<size_t>(c.Cout * c.C * c.K * c.K));
    for (float& w : L.weights) w = static_cast<float>(wcode(rng));
    L.weights[0] = static_cast<float>(c.wmax);  // the widest value is there
    L.weight_scales.assign(static_cast<size_t>(c.Cout), 1.0f);
    L.bias.assign(static_cast<size_t>(c.Cout), 0.0f);
    L.int32_output = true;
    const int64_t Cp = padded_channels(c.C, N), Coutp = padded_channels(c.Cout, N);
    const uint64_t in_bytes = static_cast<uint64_t>(c.batch * c.H * c.W * Cp),
                   y_off = (in_bytes + 63) / 64 * 64;
    std::vector<int8_t> act(y_off + static_cast<uint64_t>(c.batch * L.OH * L.OW * Coutp) * 4, 0);
    for (int64_t p = 0; p < c.batch * c.H * c.W; ++p)
      for (int64_t ci = 0; ci < c.C; ++ci)
        act[static_cast<size_t>(p * Cp + ci)] = static_cast<int8_t>(code(rng));
    std::vector<uint8_t> weights;
    Program prog;
    auto facts = lower_conv_layer(L, QParams{1.0f, c.zx}, QParams{1.0f, 0}, N, 0,
                                  static_cast<uint32_t>(y_off), weights, prog);
    ASSERT_TRUE(facts.is_ok()) << facts.status().to_string();
    if (c.wmax > 127) {
      EXPECT_NE(facts->note.find("int8 weight sets"), std::string::npos) << facts->note;
    }
    const std::vector<int8_t> out = run_on_bare_metal(prog, weights, act, N);
    int64_t bad = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t oy = 0; oy < L.OH; ++oy)
        for (int64_t ox = 0; ox < L.OW; ++ox)
          for (int64_t co = 0; co < c.Cout; ++co) {
            int64_t acc = 0;  // padding is the input zero point: it contributes nothing
            for (int64_t ky = 0; ky < c.K; ++ky)
              for (int64_t kx = 0; kx < c.K; ++kx) {
                const int64_t iy = oy * c.stride - c.pt + ky, ix = ox * c.stride - c.pl + kx;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                for (int64_t ci = 0; ci < c.C; ++ci)
                  acc +=
                      static_cast<int64_t>(
                          act[static_cast<size_t>(((b * c.H + iy) * c.W + ix) * Cp + ci)] - c.zx) *
                      static_cast<int64_t>(
                          L.weights[static_cast<size_t>(((co * c.C + ci) * c.K + ky) * c.K + kx)]);
              }
            const int32_t got = read_i32(
                out, y_off + static_cast<uint64_t>(((b * L.OH + oy) * L.OW + ox) * Coutp + co) * 4);
            if (got != acc && bad++ < 3)
              ADD_FAILURE() << "y[" << b << "][" << oy << "][" << ox << "][" << co << "] = " << got
                            << ", expected " << acc;
          }
    EXPECT_EQ(bad, 0);
  }
}

TEST(IntegerGemmLoweringErrors, AnInt32ConvWithNonIntegerWeightsIsRefusedNotRounded) {
  ConvLayer L;
  L.name = "conv";
  L.C = 2, L.H = 4, L.W = 4, L.Cout = 3, L.KH = L.KW = 1, L.OH = 4, L.OW = 4;
  L.weights.assign(6, 1.0f);
  L.weights[4] = 0.5f;
  L.weight_scales.assign(3, 1.0f);
  L.bias.assign(3, 0.0f);
  L.int32_output = true;
  std::vector<uint8_t> weights;
  Program prog;
  auto facts = lower_conv_layer(L, QParams{1.0f, 0}, QParams{1.0f, 0}, 16, 0, 4096, weights, prog);
  ASSERT_FALSE(facts.is_ok());
  EXPECT_NE(facts.status().message().find("not an integer code"), std::string::npos)
      << facts.status().message();
}

INSTANTIATE_TEST_SUITE_P(ArrayDims, IntegerGemmLowering, ::testing::Values(8u, 16u, 32u));

}  // namespace
}  // namespace npu::compiler
