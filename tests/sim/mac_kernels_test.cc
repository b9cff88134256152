// Every int8 GEMM kernel of the functional model against a naive scalar GEMM, on random
// tiles and rows (strided, aliasing accumulator rows, accumulate and overwrite, extreme
// values), including int32 wrap-around of the accumulators.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mac_kernels.h"
#include "simd_kernels.h"

namespace npu::sim {
namespace {

// Element k of an activation row: an int8, or with `wide` (ISA 1.4) the int16 in bytes 2k
// (low) and 2k + 1 (high).
int32_t act_element(const int8_t* a, uint32_t k, bool wide) {
  if (!wide) return a[k];
  return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(a[2 * k]) | static_cast<uint8_t>(a[2 * k + 1]) << 8));
}

// The ISA's GEMM on one tile, written independently of the kernels (no packing).
void naive(const std::vector<int8_t>& w, const int8_t* act, ptrdiff_t act_stride, int32_t* acc,
           ptrdiff_t acc_stride, uint32_t rows, uint32_t n, bool overwrite, bool wide = false) {
  for (uint32_t r = 0; r < rows; ++r) {
    int32_t* row = acc + r * acc_stride;
    for (uint32_t c = 0; c < n; ++c) {
      uint32_t p = 0;
      for (uint32_t k = 0; k < n; ++k)
        p += static_cast<uint32_t>(act_element(act + r * act_stride, k, wide) * w[k * n + c]);
      row[c] = static_cast<int32_t>(overwrite ? p : static_cast<uint32_t>(row[c]) + p);
    }
  }
}

// Runs mac_rows_2d of `kernel` on the O×R walk (act and acc as given) and compares the
// accumulators with the naive GEMM once per o, in order.
void expect_walk_matches_naive(MacKernel kernel, uint32_t n, const std::vector<int8_t>& w,
                               const std::vector<int8_t>& act, ptrdiff_t act_so, ptrdiff_t act_sr,
                               std::vector<int32_t> acc, ptrdiff_t acc_so, ptrdiff_t acc_sr, uint32_t o_count,
                               uint32_t r_count, bool overwrite) {
  std::vector<int32_t> want = acc;
  for (uint32_t o = 0; o < o_count; ++o)
    naive(w, act.data() + o * act_so, act_sr, want.data() + o * acc_so, acc_sr, r_count, n, overwrite);
  PackedTile tile;
  pack_tile(w.data(), n, kernel, &tile);
  mac_rows_2d(tile, act.data(), act_so, act_sr, acc.data(), acc_so, acc_sr, o_count, r_count, overwrite);
  ASSERT_EQ(acc, want) << o_count << "x" << r_count << " act so/sr " << act_so << "/" << act_sr << " acc so/sr "
                       << acc_so << "/" << acc_sr << (overwrite ? " overwrite" : " accumulate");
}

std::string describe(MacKernel k, uint32_t n) { return mac_kernel_name(k) + " n=" + std::to_string(n); }

TEST(MacKernels, PortableIsAlwaysUsableAndBestIsUsable) {
  for (uint32_t n : {8u, 16u, 32u}) {
    EXPECT_TRUE(mac_kernel_usable(MacKernel{}, n));
    EXPECT_TRUE(mac_kernel_usable(best_mac_kernel(n), n)) << describe(best_mac_kernel(n), n);
  }
  EXPECT_FALSE(mac_kernel_usable(MacKernel{}, 12));
}

TEST(MacKernels, EveryUsableKernelMatchesTheNaiveGemm) {
  std::mt19937 rng(1234);
  int tested = 0;
  for (MacKernel kernel : all_mac_kernels()) {
    for (uint32_t n : {8u, 16u, 32u}) {
      if (!mac_kernel_usable(kernel, n)) {
        std::printf("[ SKIPPED  ] %s: not supported by this CPU\n", describe(kernel, n).c_str());
        continue;
      }
      ++tested;
      for (int trial = 0; trial < 300; ++trial) {
        SCOPED_TRACE(describe(kernel, n) + " trial " + std::to_string(trial));
        // Extreme tiles (all -128 / all 127) stress the +128 offset correction.
        const int style = trial % 5;
        auto value = [&](std::uniform_int_distribution<int>& d) {
          return static_cast<int8_t>(style == 0 ? -128 : style == 1 ? 127 : d(rng));
        };
        std::uniform_int_distribution<int> byte(-128, 127);
        std::vector<int8_t> w(n * n);
        for (auto& x : w) x = value(byte);
        const uint32_t rows = std::uniform_int_distribution<uint32_t>(1, 37)(rng);
        // Strides in rows of n: 0 (every row reads/writes the same row), 1, or more.
        const ptrdiff_t act_stride = static_cast<ptrdiff_t>(n) * std::uniform_int_distribution<int>(0, 3)(rng);
        const ptrdiff_t acc_stride = static_cast<ptrdiff_t>(n) * std::uniform_int_distribution<int>(0, 2)(rng);
        std::vector<int8_t> act(static_cast<size_t>(rows) * 3 * n + n);
        for (auto& x : act) x = value(byte);
        std::vector<int32_t> acc(static_cast<size_t>(rows) * 2 * n + n);
        // Accumulators near the int32 limits so that the sums wrap.
        std::uniform_int_distribution<int32_t> word(INT32_MIN, INT32_MAX);
        std::uniform_int_distribution<int32_t> edge(-600000, 600000);
        // Near INT32_MAX or INT32_MIN: the offset is subtracted modulo 2^32 (int32 subtraction
        // past INT32_MIN would be undefined), so both sides of each limit are covered.
        for (auto& x : acc)
          x = trial % 2 ? word(rng)
                        : static_cast<int32_t>(
                              static_cast<uint32_t>(trial % 4 ? INT32_MAX : INT32_MIN) -
                              static_cast<uint32_t>(edge(rng)));
        const bool overwrite = trial % 3 == 0;
        std::vector<int32_t> want = acc;
        naive(w, act.data(), act_stride, want.data(), acc_stride, rows, n, overwrite);
        PackedTile tile;
        pack_tile(w.data(), n, kernel, &tile);
        mac_rows(tile, act.data(), act_stride, acc.data(), acc_stride, rows, overwrite);
        ASSERT_EQ(acc, want) << "rows " << rows << " act_stride " << act_stride << " acc_stride " << acc_stride
                             << (overwrite ? " overwrite" : " accumulate");
      }
    }
  }
  EXPECT_GT(tested, 0);
}

// Tiles whose last k rows are zero (padded input channels; kMadd kernels stop at the last
// non-zero k-pair), from none to all of them, on every kernel and on 1- and 2-D walks.
TEST(MacKernels, TilesWithTrailingZeroRowsMatchTheNaiveGemm) {
  std::mt19937 rng(777);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (MacKernel kernel : all_mac_kernels()) {
    for (uint32_t n : {8u, 16u, 32u}) {
      if (!mac_kernel_usable(kernel, n)) continue;
      for (uint32_t zero_rows = 0; zero_rows <= n; ++zero_rows) {
        for (int trial = 0; trial < 6; ++trial) {
          SCOPED_TRACE(describe(kernel, n) + " zero rows " + std::to_string(zero_rows) + " trial " + std::to_string(trial));
          std::vector<int8_t> w(n * n);
          for (uint32_t k = 0; k < n; ++k)
            for (uint32_t c = 0; c < n; ++c) w[k * n + c] = k < n - zero_rows ? static_cast<int8_t>(byte(rng)) : 0;
          // An odd count of live rows leaves a k-pair half zero; a single non-zero weight
          // in the last live row (trial 1) must keep that row's pair.
          if (trial == 1 && zero_rows < n)
            for (uint32_t c = 0; c < n; ++c) w[(n - zero_rows - 1) * n + c] = c == n - 1 ? int8_t{-128} : int8_t{0};
          const uint32_t o_count = 1 + static_cast<uint32_t>(trial % 3), r_count = 1 + 5 * static_cast<uint32_t>(trial);
          const ptrdiff_t act_sr = n, act_so = ptrdiff_t{n} * r_count, acc_sr = n, acc_so = ptrdiff_t{n} * r_count;
          std::vector<int8_t> act(static_cast<size_t>(o_count * r_count * n));
          for (auto& x : act) x = static_cast<int8_t>(byte(rng));
          std::vector<int32_t> acc(act.size());
          for (auto& x : acc) x = std::uniform_int_distribution<int32_t>(INT32_MIN, INT32_MAX)(rng);
          expect_walk_matches_naive(kernel, n, w, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count,
                                    trial % 2 == 0);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// mac_rows_2d is the naive GEMM once per o, in order, for every kernel: walks whose o blocks
// are disjoint, overlap, or alias completely (so_ = 0), and whose batches straddle o.
TEST(MacKernels, TwoDimensionalWalkIsOneNaiveGemmPerO) {
  std::mt19937 rng(4321);
  std::uniform_int_distribution<int> byte(-128, 127);
  for (MacKernel kernel : all_mac_kernels()) {
    for (uint32_t n : {8u, 16u, 32u}) {
      if (!mac_kernel_usable(kernel, n)) continue;
      for (int trial = 0; trial < 200; ++trial) {
        SCOPED_TRACE(describe(kernel, n) + " trial " + std::to_string(trial));
        std::vector<int8_t> w(n * n);
        for (auto& x : w) x = static_cast<int8_t>(byte(rng));
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
        const uint32_t o_count = static_cast<uint32_t>(pick(1, 5)), r_count = static_cast<uint32_t>(pick(1, 11));
        const ptrdiff_t act_sr = ptrdiff_t{n} * pick(0, 2), act_so = ptrdiff_t{n} * pick(0, 25);
        const ptrdiff_t acc_sr = ptrdiff_t{n} * pick(0, 2), acc_so = ptrdiff_t{n} * pick(0, 25);
        std::vector<int8_t> act(static_cast<size_t>(o_count * act_so + r_count * act_sr + n));
        for (auto& x : act) x = static_cast<int8_t>(byte(rng));
        std::vector<int32_t> acc(static_cast<size_t>(o_count * acc_so + r_count * acc_sr + n));
        for (auto& x : acc) x = std::uniform_int_distribution<int32_t>(INT32_MIN, INT32_MAX)(rng);
        expect_walk_matches_naive(kernel, n, w, act, act_so, act_sr, acc, acc_so, acc_sr, o_count, r_count,
                                  trial % 3 == 0);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Random summed-tile walks of `count` tiles for `kernel`'s packing, run by mac_rows_2d_tiles,
// or with `wide_target` by mac_rows_2d_tiles_wide on wide activation rows, against the naive
// GEMM once per tile in order (overwrite only for the first). Returns the trials run.
int summed_tile_trials(MacKernel kernel, uint32_t n, std::optional<int64_t> wide_target, int trials,
                       std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(-128, 127);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const bool wide = wide_target.has_value();
  const ptrdiff_t row_bytes = ptrdiff_t{n} * (wide ? 2 : 1);
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE(describe(kernel, n) + (wide ? " wide, target " + std::to_string(*wide_target) : "") + " trial " +
                 std::to_string(trial));
    const auto count = static_cast<uint32_t>(pick(1, 9));
    std::vector<std::vector<int8_t>> w(count, std::vector<int8_t>(n * n));
    for (auto& tile : w) {
      const auto live_rows = static_cast<uint32_t>(pick(0, static_cast<int>(n)));
      for (uint32_t k = 0; k < n; ++k)
        for (uint32_t c = 0; c < n; ++c) tile[k * n + c] = k < live_rows ? static_cast<int8_t>(byte(rng)) : 0;
    }
    const bool overwrite = trial % 2 == 0;
    const auto o_count = static_cast<uint32_t>(pick(1, 4)), r_count = static_cast<uint32_t>(pick(1, 11));
    // Overwrite needs distinct rows (acc_sr >= 1 row, o blocks past the r walk); accumulate
    // may alias them. Activation rows may overlap (a wide row's second half is the next row).
    const ptrdiff_t acc_sr = ptrdiff_t{n} * (overwrite ? pick(1, 2) : pick(0, 2));
    const ptrdiff_t acc_so = overwrite ? acc_sr * r_count + ptrdiff_t{n} * pick(0, 3) : ptrdiff_t{n} * pick(0, 25);
    const ptrdiff_t act_sr = ptrdiff_t{n} * pick(0, 2), act_so = ptrdiff_t{n} * pick(0, 25);
    const ptrdiff_t act_st = ptrdiff_t{n} * pick(0, 30);
    std::vector<int8_t> act(static_cast<size_t>(count * act_st + o_count * act_so + r_count * act_sr + row_bytes));
    for (auto& x : act) x = static_cast<int8_t>(byte(rng));
    std::vector<int32_t> acc(static_cast<size_t>(o_count * acc_so + r_count * acc_sr + n));
    for (auto& x : acc) x = std::uniform_int_distribution<int32_t>(INT32_MIN, INT32_MAX)(rng);
    // The ISA's order: for o, for i, for r.
    std::vector<int32_t> want = acc;
    for (uint32_t o = 0; o < o_count; ++o)
      for (uint32_t t = 0; t < count; ++t)
        naive(w[t], act.data() + t * act_st + o * act_so, act_sr, want.data() + o * acc_so, acc_sr, r_count, n,
              overwrite && t == 0, wide);
    std::vector<PackedTile> packed(count);
    std::vector<const PackedTile*> tiles;
    for (uint32_t t = 0; t < count; ++t) {
      pack_tile(w[t].data(), n, kernel, &packed[t]);
      if (wide) ensure_pairs(w[t].data(), n, &packed[t]);
      tiles.push_back(&packed[t]);
    }
    if (wide)
      mac_rows_2d_tiles_wide(*wide_target, tiles.data(), count, act_st, act.data(), act_so, act_sr, acc.data(),
                             acc_so, acc_sr, o_count, r_count, overwrite);
    else
      mac_rows_2d_tiles(tiles.data(), count, act_st, act.data(), act_so, act_sr, acc.data(), acc_so, acc_sr, o_count,
                        r_count, overwrite);
    EXPECT_EQ(acc, want) << count << " tiles, " << o_count << "x" << r_count << " act st/so/sr " << act_st << "/"
                         << act_so << "/" << act_sr << " acc so/sr " << acc_so << "/" << acc_sr
                         << (overwrite ? " overwrite" : " accumulate");
    if (acc != want) return trial + 1;
  }
  return trials;
}

// mac_rows_2d_tiles (a GEMM whose I tiles all add into the same accumulator rows) is the naive
// GEMM once per tile in order, with overwrite only for the first, for every kernel: tiles with
// trailing zero rows and live k-pairs that differ from tile to tile, accumulate walks whose
// rows alias, and overwrite walks whose rows are distinct (its contract).
TEST(MacKernels, SummedTilesAreOneNaiveGemmPerTileInOrder) {
  std::mt19937 rng(9090);
  int tested = 0;
  for (MacKernel kernel : all_mac_kernels())
    for (uint32_t n : {8u, 16u, 32u})
      if (mac_kernel_usable(kernel, n)) tested += summed_tile_trials(kernel, n, std::nullopt, 150, rng);
  EXPECT_GT(tested, 0);
}

// Wide activations (ISA 1.4): the same walks with int16 activation rows, on tiles of every
// packing, by the portable reference and every Highway target this CPU runs.
TEST(MacKernels, WideActivationWalksAreTheNaiveInt16Gemm) {
  std::mt19937 rng(4242);
  std::vector<int64_t> targets = runnable_simd_targets();
  targets.push_back(0);
  int tested = 0;
  for (MacKernel kernel : all_mac_kernels())
    for (uint32_t n : {8u, 16u, 32u})
      if (mac_kernel_usable(kernel, n))
        for (int64_t target : targets) tested += summed_tile_trials(kernel, n, target, 40, rng);
  EXPECT_GT(tested, 0);
}

}  // namespace
}  // namespace npu::sim
