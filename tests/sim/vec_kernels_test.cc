// The VEC row kernels of the functional model: every usable kernel against the portable one
// on random rows, with extreme operands (int32 limits, every shift 0..63, lo > hi bounds,
// 64-bit wrap-around in ADD/MUL), and the portable one against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "npu/hw/isa.h"
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
  // wrap: the low byte of round_shift(v·m) + zp as two's complement, bounds ignored.
  EXPECT_EQ(vec_requantize(200, 1, 0, 0, 0, 0, true), -56);        // 200 - 256
  EXPECT_EQ(vec_requantize(1000, 3, 4, -70, 0, 0, true), 118);     // 188 - 70
  EXPECT_EQ(vec_requantize(-129, 1, 0, 0, 0, 0, true), 127);       // -129 + 256
  EXPECT_EQ(vec_requantize(INT32_MAX, 4, 0, 5, 0, 0, true), -4 + 5); // 0x1_FFFF_FFFC: low byte 0xFC
  EXPECT_EQ(vec_finish(int64_t{1} << 40 | 0x80, 0, 0, true), -128);
  EXPECT_EQ(vec_finish(300, -128, 127, false), 127);
}

std::string name(VecKernel k, uint32_t n) { return vec_kernel_name(k) + " n=" + std::to_string(n); }

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
  // A shift: any of 0..63, or in every other trial of a pair 33..63 in every lane (the
  // Highway kernels' 32-bit path, taken only when all lanes shift by more than 32), 63 often.
  uint32_t shift(int trial) {
    if (trial % 2 == 0) return below(64);
    return below(4) == 0 ? 63 : 33 + below(31);
  }

 private:
  std::mt19937 rng_;
};

// A random walk of up to 3×4 rows with row strides 0..2 (0: rows repeat or overwrite).
RowWalk random_walk(Random& rnd, uint32_t n) {
  auto stride = [&] { return static_cast<ptrdiff_t>(n) * rnd.below(3); };
  return RowWalk{1 + rnd.below(3), 1 + rnd.below(4), stride(), stride(), stride(), stride()};
}
size_t src_extent(const RowWalk& w, uint32_t n) {
  return static_cast<size_t>((w.o_count - 1) * w.src_so + (w.r_count - 1) * w.src_sr + n);
}
size_t dst_extent(const RowWalk& w, uint32_t n) {
  return static_cast<size_t>((w.o_count - 1) * w.dst_so + (w.r_count - 1) * w.dst_sr + n);
}

// Runs body(kernel, n, trial) for `trials` trials of every usable non-portable kernel at
// every n, each under a trace naming them; returns how many ran.
template <class Body>
int for_each_kernel_trial(int trials, Body body) {
  int compared = 0;
  for (VecKernel kernel : all_vec_kernels()) {
    if (kernel == kPortableVecKernel || !vec_kernel_usable(kernel)) continue;
    for (uint32_t n : {8u, 16u, 32u})
      for (int trial = 0; trial < trials; ++trial) {
        SCOPED_TRACE(name(kernel, n) + " trial " + std::to_string(trial));
        ++compared;
        body(kernel, n, trial);
        if (::testing::Test::HasFatalFailure()) return compared;
      }
  }
  return compared;
}

TEST(VecKernels, EveryUsableKernelMatchesThePortableOne) {
  Random rnd(99);
  int compared = 0;
  for (VecKernel kernel : all_vec_kernels()) {
    if (kernel == kPortableVecKernel) continue;
    if (!vec_kernel_usable(kernel)) {
      std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", vec_kernel_name(kernel).c_str());
      continue;
    }
    for (uint32_t n : {8u, 16u, 32u}) {
      for (int trial = 0; trial < 2000; ++trial) {
        SCOPED_TRACE(name(kernel, n) + " trial " + std::to_string(trial));
        ++compared;
        const RowWalk walk = random_walk(rnd, n);
        std::vector<int32_t> x(src_extent(walk, n)), bias(n), mult(n), shift(n);
        for (auto& v : x) v = rnd.word();
        for (uint32_t c = 0; c < n; ++c) {
          bias[c] = rnd.word();
          mult[c] = rnd.word();
          // Every shift, and garbage in the high bits (only the low 6 count).
          shift[c] = static_cast<int32_t>(rnd.shift(trial) | (trial % 2 ? rnd.below(1 << 20) << 6 : 0));
        }
        // Every third trial with the wrap bit (REQUANT, ADD, MUL; DWCONV never wraps), every 8th
        // with equal clamp bounds (the AVX-512 kernel writes the bound directly unless it wraps).
        const bool wrap = trial % 3 == 0;
        const int8_t rq_zp = rnd.byte(), rq_lo = rnd.byte();
        const RequantParams rq{mult.data(), shift.data(), rq_zp, rq_lo, trial % 8 == 5 ? rq_lo : rnd.byte(), false};
        RequantParams rq_wrap = rq;
        rq_wrap.wrap = wrap;
        std::vector<int8_t> want(dst_extent(walk, n), 7), got = want;
        const int32_t* b = trial % 3 ? bias.data() : nullptr;
        requantize_rows(kPortableVecKernel, x.data(), b, rq_wrap, want.data(), walk, n);
        requantize_rows(kernel, x.data(), b, rq_wrap, got.data(), walk, n);
        ASSERT_EQ(got, want) << "REQUANT" << (wrap ? " wrap" : "");

        // ADD/MUL and LUT also in place (output rows over the source rows, in row order).
        const bool in_place = trial % 4 == 0;
        const size_t extent = std::max(src_extent(walk, n), dst_extent(walk, n));
        std::vector<int8_t> a(extent), bb(extent);
        for (auto& v : a) v = rnd.byte();
        for (auto& v : bb) v = rnd.byte();
        // Half the trials with the operands of compiled models (zero points within ±2^15,
        // int32 multipliers: the Highway kernels' exact narrow products, at both limits), the
        // others with any 64-bit operands (the portable kernel's general wrapping products).
        const bool narrow = trial % 4 < 2;
        auto zero_point = [&] {
          const uint32_t k = rnd.below(4);
          return k == 0 ? -(int64_t{1} << 15) : k == 1 ? (int64_t{1} << 15) : int64_t{rnd.byte()};
        };
        auto multiplier = [&] { return narrow ? int64_t{rnd.word()} : int64_t{rnd.word()} * rnd.word(); };
        const BinaryParams bin{trial % 2 == 1, narrow ? zero_point() : rnd.word(), narrow ? zero_point() : rnd.word(),
                               multiplier(), multiplier(), rnd.below(64), rnd.byte(), rnd.byte(), rnd.byte(), wrap};
        std::vector<int8_t> a_want = a, a_got = a;
        want.assign(extent, 7);
        got = want;
        binary_rows(kPortableVecKernel, a_want.data(), bb.data(), bin, in_place ? a_want.data() : want.data(), walk, n);
        binary_rows(kernel, a_got.data(), bb.data(), bin, in_place ? a_got.data() : got.data(), walk, n);
        ASSERT_EQ(got, want) << (bin.mul ? "MUL" : "ADD");
        ASSERT_EQ(a_got, a_want) << (bin.mul ? "MUL" : "ADD") << " in place";

        std::vector<int8_t> table(256);
        for (auto& v : table) v = rnd.byte();
        const int8_t lo = rnd.byte(), hi = rnd.byte();
        a_want = a;
        a_got = a;
        lut_rows(kPortableVecKernel, table.data(), a_want.data(), lo, hi, in_place ? a_want.data() : want.data(), walk, n);
        lut_rows(kernel, table.data(), a_got.data(), lo, hi, in_place ? a_got.data() : got.data(), walk, n);
        ASSERT_EQ(got, want) << "LUT";
        ASSERT_EQ(a_got, a_want) << "LUT in place";

        // Up to 7×7: windows of more than 32 taps take the AVX-512 DWCONV path without held weights.
        const uint32_t kw = 1 + rnd.below(7), kh = 1 + rnd.below(7);
        const ptrdiff_t row_stride = static_cast<ptrdiff_t>(n) * (kw + rnd.below(4));
        std::vector<int8_t> xs(src_extent(walk, n) + static_cast<size_t>(row_stride) * kh + size_t{kw} * n);
        std::vector<int8_t> ws(static_cast<size_t>(kw) * kh * n);
        for (auto& v : xs) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
        for (auto& v : ws) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
        for (WindowOp op : {WindowOp::kMax, WindowOp::kAdd, WindowOp::kMac}) {
          std::vector<int32_t> sw(n), sg(n);
          window_reduce(kPortableVecKernel, op, xs.data(), row_stride, kw, kh, ws.data(), n, sw.data());
          window_reduce(kernel, op, xs.data(), row_stride, kw, kh, ws.data(), n, sg.data());
          ASSERT_EQ(sg, sw) << "window op " << static_cast<int>(op) << " " << kw << "x" << kh;
        }
        // DWCONV: the kMac window of each row, then its requantisation.
        for (uint32_t c = 0; c < n; ++c) shift[c] = static_cast<int32_t>(rnd.shift(trial + 1));
        const Window window{row_stride, kw, kh, ws.data()};
        want.assign(dst_extent(walk, n), 7);
        got = want;
        dwconv_rows(kPortableVecKernel, xs.data(), window, b, rq, want.data(), walk, n);
        dwconv_rows(kernel, xs.data(), window, b, rq, got.data(), walk, n);
        ASSERT_EQ(got, want) << "DWCONV " << kw << "x" << kh;
        // The same window with an identity requantisation and a bias that cancels the sum up
        // to a small remainder: the output is that remainder, so a sum off by a little shows
        // (random multipliers and shifts mostly saturate the int8 output).
        std::vector<int32_t> sum(n), unit_mult(n, 1), no_shift(n, 0), cancel(n);
        window_reduce(kPortableVecKernel, WindowOp::kMac, xs.data(), row_stride, kw, kh, ws.data(), n, sum.data());
        for (uint32_t c = 0; c < n; ++c) cancel[c] = static_cast<int32_t>(rnd.below(201)) - 100 - sum[c];
        const RequantParams identity{unit_mult.data(), no_shift.data(), 0, -128, 127, false};
        std::vector<int8_t> exact_want(n), exact_got(n);
        dwconv_rows(kPortableVecKernel, xs.data(), window, cancel.data(), identity, exact_want.data(), RowWalk{}, n);
        dwconv_rows(kernel, xs.data(), window, cancel.data(), identity, exact_got.data(), RowWalk{}, n);
        ASSERT_EQ(exact_got, exact_want) << "DWCONV " << kw << "x" << kh << ", cancelled sum";
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "only the portable kernel runs on this CPU";
}

// Wide rows (ISA 1.4): REQUANT into wide rows, DWCONV over wide taps into int8 or wide rows
// (and over int8 taps into wide rows), and LUT from wide rows through the interpolated table,
// also in place (the destination over its own source rows), by every kernel against the
// portable one.
TEST(VecKernels, WideRowKernelsMatchThePortableOnes) {
  Random rnd(2024);
  const int compared = for_each_kernel_trial(1500, [&](VecKernel kernel, uint32_t n, int trial) {
    const RowWalk walk = random_walk(rnd, n);
    std::vector<int32_t> x(src_extent(walk, n)), bias(n), mult(n), shift(n);
    for (auto& v : x) v = rnd.word();
    for (uint32_t c = 0; c < n; ++c) {
      bias[c] = rnd.word();
      // Small multipliers half the time, so that results land inside the int16 grid.
      mult[c] = trial % 2 ? static_cast<int32_t>(rnd.below(1 << 16)) : rnd.word();
      shift[c] = static_cast<int32_t>(rnd.shift(trial));
    }
    const int8_t lo = rnd.byte();
    const RequantParams rq{mult.data(), shift.data(), rnd.byte(), lo, trial % 8 == 5 ? lo : rnd.byte(), false,
                           true};
    const int32_t* b = trial % 3 ? bias.data() : nullptr;
    std::vector<int8_t> want(dst_extent(walk, n) + n, 7), got = want;  // + n: a wide row's second half
    requantize_rows(kPortableVecKernel, x.data(), b, rq, want.data(), walk, n);
    requantize_rows(kernel, x.data(), b, rq, got.data(), walk, n);
    ASSERT_EQ(got, want) << "REQUANT wide";

    const uint32_t kw = 1 + rnd.below(trial % 5 == 0 ? 9 : 4), kh = 1 + rnd.below(trial % 5 == 0 ? 9 : 4);
    const ptrdiff_t row_stride = static_cast<ptrdiff_t>(n) * (2 * kw + rnd.below(4));
    std::vector<int8_t> xs(src_extent(walk, n) + static_cast<size_t>(row_stride) * kh + size_t{kw} * 2 * n);
    std::vector<int8_t> ws(static_cast<size_t>(kw) * kh * n);
    for (auto& v : xs) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
    for (auto& v : ws) v = trial % 7 == 0 ? int8_t{-128} : rnd.byte();
    for (const auto& [wide_src, wide_dst] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
      RequantParams dw = rq;
      dw.wide = wide_dst;
      for (uint32_t c = 0; c < n; ++c) shift[c] = static_cast<int32_t>(rnd.shift(trial + 1));
      const Window window{row_stride, kw, kh, ws.data(), wide_src};
      want.assign(dst_extent(walk, n) + n, 7);
      got = want;
      dwconv_rows(kPortableVecKernel, xs.data(), window, b, dw, want.data(), walk, n);
      dwconv_rows(kernel, xs.data(), window, b, dw, got.data(), walk, n);
      ASSERT_EQ(got, want) << "DWCONV " << kw << "x" << kh << (wide_src ? " wide src" : "")
                           << (wide_dst ? " wide dst" : "");
    }

    // LUT: 257 entries, any int16 (the extremes too), sources anywhere in int16.
    std::vector<int16_t> table(isa::kWideLutEntries);
    for (auto& v : table) v = trial % 11 == 0 ? int16_t{-32768} : static_cast<int16_t>(rnd.word());
    const bool wide_dst = trial % 2 == 0, in_place = trial % 4 < 2;
    const size_t extent = std::max(src_extent(walk, n), dst_extent(walk, n)) + n;
    std::vector<int8_t> a(extent);
    for (auto& v : a) v = rnd.byte();
    std::vector<int8_t> a_want = a, a_got = a;
    want.assign(extent, 7);
    got = want;
    const int8_t lut_lo = rnd.byte(), lut_hi = rnd.byte();
    lut_rows_wide(kPortableVecKernel, table.data(), a_want.data(), lut_lo, lut_hi, wide_dst,
                  in_place ? a_want.data() : want.data(), walk, n);
    lut_rows_wide(kernel, table.data(), a_got.data(), lut_lo, lut_hi, wide_dst, in_place ? a_got.data() : got.data(),
                  walk, n);
    ASSERT_EQ(got, want) << "LUT wide" << (wide_dst ? " to wide" : " to int8");
    ASSERT_EQ(a_got, a_want) << "LUT wide in place" << (wide_dst ? " to wide" : " to int8");
  });
  if (compared == 0) GTEST_SKIP() << "only the portable kernel runs on this CPU";
}

// The interpolated table by hand (architecture.md 1.4.3): entries i = (x >> 8) + 128 and
// i + 1, weighted by the low 8 bits of x, rounded to the destination's grid.
TEST(VecKernels, WideLutInterpolatesByHand) {
  std::vector<int16_t> table(isa::kWideLutEntries);
  for (uint32_t e = 0; e < table.size(); ++e) table[e] = static_cast<int16_t>(100 * (static_cast<int32_t>(e) - 128));
  // x = 0x0140 (320): i = 1 + 128, f = 64: 256·100 + (200 - 100)·64 = 32000 -> wide (32000 + 128) >> 8 = 125.
  EXPECT_EQ(vec_lut_interpolate(table.data(), 320, true), 125);
  // int8 destination: (32000 + 32768) >> 16 = 0.
  EXPECT_EQ(vec_lut_interpolate(table.data(), 320, false), 0);
  // x = -32768: i = 0, f = 0 -> T[0] = -12800, wide -12800.
  EXPECT_EQ(vec_lut_interpolate(table.data(), -32768, true), -12800);
  // x = 32767: i = 255, f = 255: 256·12700 + 100·255 = 3276700 -> (3276700 + 128) >> 8 = 12800.
  EXPECT_EQ(vec_lut_interpolate(table.data(), 32767, true), 12800);
}

// Whole-tensor walks (rows one contiguous run on both sides, as an elementwise layer issues
// them), long enough for the AVX-512 LUT's 64-byte blocks and their partial last block, with
// the output from 3 rows before to 3 rows after the input in the same buffer (rows equal or
// disjoint, as the kernels require): the row order decides the result where they overlap.
TEST(VecKernels, ContiguousWalksMatchThePortableKernelAtEveryOverlap) {
  Random rnd(7);
  const int compared = for_each_kernel_trial(600, [&](VecKernel kernel, uint32_t n, int trial) {
    const uint32_t r_count = 1 + rnd.below(12), o_count = 1 + rnd.below(4);
    const ptrdiff_t row = n, run = ptrdiff_t{r_count} * n;
    const RowWalk walk{o_count, r_count, run, row, run, row};
    const ptrdiff_t total = run * o_count;
    const ptrdiff_t offset = (static_cast<ptrdiff_t>(rnd.below(7)) - 3) * row;
    const ptrdiff_t margin = 3 * row;
    std::vector<int8_t> buffer(static_cast<size_t>(total + 2 * margin));
    for (auto& v : buffer) v = rnd.byte();
    std::vector<int8_t> table(256);
    for (auto& v : table) v = rnd.byte();
    const int8_t lo = rnd.byte(), hi = rnd.byte();
    std::vector<int8_t> want = buffer, got = buffer;
    lut_rows(kPortableVecKernel, table.data(), want.data() + margin, lo, hi, want.data() + margin + offset, walk, n);
    lut_rows(kernel, table.data(), got.data() + margin, lo, hi, got.data() + margin + offset, walk, n);
    ASSERT_EQ(got, want) << "LUT, output at " << offset << " bytes from the input, " << o_count << "x" << r_count
                         << " rows";

    // REQUANT with every parameter of the walk held: a long walk into a separate output.
    std::vector<int32_t> x(static_cast<size_t>(total)), bias(n), mult(n), shift(n);
    for (auto& v : x) v = rnd.word();
    for (uint32_t c = 0; c < n; ++c) {
      bias[c] = rnd.word();
      mult[c] = rnd.word();
      shift[c] = static_cast<int32_t>(rnd.shift(trial) | rnd.below(1 << 20) << 6);
    }
    const RequantParams rq{mult.data(), shift.data(), rnd.byte(), rnd.byte(), rnd.byte(), trial % 3 == 0};
    std::vector<int8_t> rq_want(static_cast<size_t>(total), 7), rq_got = rq_want;
    const int32_t* b = trial % 2 ? bias.data() : nullptr;
    requantize_rows(kPortableVecKernel, x.data(), b, rq, rq_want.data(), walk, n);
    requantize_rows(kernel, x.data(), b, rq, rq_got.data(), walk, n);
    ASSERT_EQ(rq_got, rq_want) << "REQUANT";
  });
  if (compared == 0) GTEST_SKIP() << "only the portable kernel runs on this CPU";
}

}  // namespace
}  // namespace npu::sim
