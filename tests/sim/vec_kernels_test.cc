// The VEC row kernels of the functional model: every usable kernel against the portable one
// on random rows, with extreme operands (int32 limits, every shift 0..63, lo > hi bounds,
// 64-bit wrap-around in ADD/MUL), and the portable one against hand-computed values.
#include <gtest/gtest.h>

#include <climits>
#include <random>
#include <string>
#include <vector>

#include "vec_kernels.h"

namespace npu::sim {
namespace {

TEST(VecKernels, ScalarArithmeticByHand) {
  EXPECT_EQ(vec_round_shift(5, 1), 3);    // 2.5 rounds up
  EXPECT_EQ(vec_round_shift(-5, 1), -2);  // -2.5 rounds towards +inf
  EXPECT_EQ(vec_round_shift(7, 0), 7);
  EXPECT_EQ(vec_requantize(1000, 3, 4, 10, -128, 127), 127);  // 3000/16 = 187.5 -> 188, + 10, clamped
  EXPECT_EQ(vec_requantize(1000, 3, 4, -70, -128, 127), -70 + 188);
  EXPECT_EQ(vec_requantize(0, 1, 0, 0, 5, -5), 5);   // lo > hi: below lo yields lo
  EXPECT_EQ(vec_requantize(9, 1, 0, 0, 5, -5), -5);  // and at or above lo yields hi
  // 2^62 plus the rounding 2^62 wraps to -2^63; >> 63 is -1.
  EXPECT_EQ(vec_requantize(INT32_MIN, INT32_MIN, 63, 0, -128, 127), -1);
}

std::string name(VecKernel k, uint32_t n) { return std::string(vec_kernel_name(k)) + " n=" + std::to_string(n); }

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  int32_t word() {
    switch (std::uniform_int_distribution<int>(0, 5)(rng_)) {
      case 0: return INT32_MIN;
      case 1: return INT32_MAX;
      case 2: return std::uniform_int_distribution<int32_t>(-300, 300)(rng_);
      default: return std::uniform_int_distribution<int32_t>(INT32_MIN, INT32_MAX)(rng_);
    }
  }
  int8_t byte() { return static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng_)); }
  uint32_t below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }

 private:
  std::mt19937 rng_;
};

TEST(VecKernels, EveryUsableKernelMatchesThePortableOne) {
  Random rnd(99);
  int compared = 0;
  for (VecKernel kernel : kAllVecKernels) {
    if (kernel == VecKernel::kPortable) continue;
    if (!vec_kernel_usable(kernel)) {
      std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", std::string(vec_kernel_name(kernel)).c_str());
      continue;
    }
    for (uint32_t n : {8u, 16u, 32u}) {
      for (int trial = 0; trial < 2000; ++trial) {
        SCOPED_TRACE(name(kernel, n) + " trial " + std::to_string(trial));
        ++compared;
        std::vector<int32_t> x(n), bias(n), mult(n), shift(n);
        for (uint32_t c = 0; c < n; ++c) {
          x[c] = rnd.word();
          bias[c] = rnd.word();
          mult[c] = rnd.word();
          // Every shift, and garbage in the high bits (only the low 6 count).
          shift[c] = static_cast<int32_t>(rnd.below(64) | (trial % 2 ? rnd.below(1 << 20) << 6 : 0));
        }
        const RequantParams rq{mult.data(), shift.data(), rnd.byte(), rnd.byte(), rnd.byte()};
        std::vector<int8_t> want(n), got(n);
        const int32_t* b = trial % 3 ? bias.data() : nullptr;
        requantize_row(VecKernel::kPortable, x.data(), b, rq, want.data(), n);
        requantize_row(kernel, x.data(), b, rq, got.data(), n);
        ASSERT_EQ(got, want) << "requantize_row";

        std::vector<int8_t> a(n), bb(n);
        for (uint32_t c = 0; c < n; ++c) {
          a[c] = rnd.byte();
          bb[c] = rnd.byte();
        }
        const BinaryParams bin{trial % 2 == 1, rnd.word(), rnd.word(), rnd.word(), rnd.word(), rnd.below(64),
                               rnd.byte(), rnd.byte(), rnd.byte()};
        binary_row(VecKernel::kPortable, a.data(), bb.data(), bin, want.data(), n);
        binary_row(kernel, a.data(), bb.data(), bin, got.data(), n);
        ASSERT_EQ(got, want) << (bin.mul ? "MUL" : "ADD");

        std::vector<int8_t> table(256), xl(n);
        for (auto& v : table) v = rnd.byte();
        for (auto& v : xl) v = rnd.byte();
        const int8_t lo = rnd.byte(), hi = rnd.byte();
        lut_row(VecKernel::kPortable, table.data(), xl.data(), lo, hi, want.data(), n);
        lut_row(kernel, table.data(), xl.data(), lo, hi, got.data(), n);
        ASSERT_EQ(got, want) << "LUT";

        const uint32_t kw = 1 + rnd.below(5), kh = 1 + rnd.below(5);
        const ptrdiff_t row_stride = static_cast<ptrdiff_t>(n) * (kw + rnd.below(4));
        std::vector<int8_t> xs(static_cast<size_t>(row_stride) * kh + n), ws(static_cast<size_t>(kw) * kh * n);
        for (auto& v : xs) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
        for (auto& v : ws) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
        for (WindowOp op : {WindowOp::kMax, WindowOp::kAdd, WindowOp::kMac}) {
          std::vector<int32_t> sw(n), sg(n);
          window_reduce(VecKernel::kPortable, op, xs.data(), row_stride, kw, kh, ws.data(), n, sw.data());
          window_reduce(kernel, op, xs.data(), row_stride, kw, kh, ws.data(), n, sg.data());
          ASSERT_EQ(sg, sw) << "window op " << static_cast<int>(op) << " " << kw << "x" << kh;
        }
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "only the portable kernel runs on this CPU";
}

}  // namespace
}  // namespace npu::sim
