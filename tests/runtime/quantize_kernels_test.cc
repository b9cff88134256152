// The runtime's Highway boundary kernels (runtime/src/quantize_kernels.h) on every Highway
// target this CPU runs, against the scalar definitions of npu/runtime/quantize.h: random float
// bit patterns (NaN, infinities, every magnitude), exact halves, runs of every length 0..80 (the
// vector tails), zero points at ±2^20, and byte scatters at strides 1..40.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "npu/runtime/quantize.h"
#include "quantize_kernels.h"

namespace npu::runtime {
namespace {

// Runs fn once per Highway target this CPU supports, with Highway's dispatch limited to it (a
// target the library did not compile dispatches to its fallback); restores the dispatch.
template <typename Fn>
int for_each_target(Fn&& fn) {
  int runs = 0;
  for (int64_t t = hwy::SupportedTargets(); t != 0; t &= t - 1) {
    const int64_t target = t & -t;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    fn();
    ++runs;
  }
  hwy::SetSupportedTargetsForTest(0);
  return runs;
}

class Bits {
 public:
  uint32_t next() { return state_ = state_ * 1664525u + 1013904223u; }
  float any_float() {
    const uint32_t b = next();
    float x;
    std::memcpy(&x, &b, 4);
    return x;
  }

 private:
  uint32_t state_ = 777;
};

TEST(QuantizeKernels, QuantizeRunMatchesQuantizeInt8OnEveryTarget) {
  Bits bits;
  const int runs = for_each_target([&] {
    for (int trial = 0; trial < 400; ++trial) {
      const int64_t count = trial % 81;
      std::vector<float> x(static_cast<size_t>(count));
      for (auto& v : x) {
        switch (bits.next() % 4) {
          case 0: v = bits.any_float(); break;
          case 1: v = static_cast<float>(static_cast<int32_t>(bits.next() % 400) - 200) + 0.5f; break;
          case 2: v = 8388608.0f + static_cast<float>(static_cast<int32_t>(bits.next() % 64) - 32) * 0.5f; break;
          default: v = static_cast<float>(static_cast<int32_t>(bits.next() % 2000) - 1000) / 7.0f; break;
        }
      }
      const float scale = trial % 3 == 0 ? 1.0f : 0.01f + static_cast<float>(bits.next() % 1000) / 100.0f;
      const int32_t zp = trial % 7 == 0 ? (trial % 2 ? (1 << 20) : -(1 << 20))
                                        : static_cast<int32_t>(bits.next() % 300) - 150;
      std::vector<int8_t> got(static_cast<size_t>(count) + 1, 99);
      quantize_int8_run_simd(x.data(), count, scale, zp, got.data());
      for (int64_t k = 0; k < count; ++k)
        ASSERT_EQ(got[static_cast<size_t>(k)], quantize_int8(x[static_cast<size_t>(k)], scale, zp))
            << x[static_cast<size_t>(k)] << " / " << scale << " + " << zp << " (element " << k << " of " << count << ")";
      ASSERT_EQ(got.back(), 99) << "wrote past the run of " << count;
    }
  });
  EXPECT_GT(runs, 0);
}

TEST(QuantizeKernels, DequantizeRunMatchesDequantizeOnEveryTarget) {
  Bits bits;
  for_each_target([&] {
    for (int trial = 0; trial < 300; ++trial) {
      const int64_t count = trial % 81;
      std::vector<int8_t> q(static_cast<size_t>(count));
      for (auto& v : q) v = static_cast<int8_t>(bits.next());
      const float scale = 0.001f + static_cast<float>(bits.next() % 100000) / 997.0f;
      const int32_t zp = trial % 5 == 0 ? (trial % 2 ? (1 << 20) : -(1 << 20))
                                        : static_cast<int32_t>(bits.next() % 300) - 150;
      std::vector<float> got(static_cast<size_t>(count) + 1, -7.0f);
      dequantize_int8_run_simd(q.data(), count, scale, zp, got.data());
      for (int64_t k = 0; k < count; ++k)
        ASSERT_EQ(got[static_cast<size_t>(k)], dequantize(q[static_cast<size_t>(k)], scale, zp)) << "element " << k;
      ASSERT_EQ(got.back(), -7.0f) << "wrote past the run of " << count;
    }
  });
}

TEST(QuantizeKernels, ScatterWritesEveryStrideThByteAndNothingElseOnEveryTarget) {
  Bits bits;
  for_each_target([&] {
    for (int64_t stride = 1; stride <= 40; ++stride)
      for (int64_t count : {0, 1, 5, 21, 22, 64, 65, 200}) {
        std::vector<int8_t> chunk(static_cast<size_t>(count));
        for (auto& v : chunk) v = static_cast<int8_t>(bits.next());
        std::vector<std::byte> want(static_cast<size_t>(count * stride + 64), std::byte{0x5A}), got = want;
        for (int64_t k = 0; k < count; ++k) want[static_cast<size_t>(k * stride)] = static_cast<std::byte>(chunk[static_cast<size_t>(k)]);
        scatter_bytes_simd(chunk.data(), count, stride, got.data());
        ASSERT_EQ(got, want) << "stride " << stride << ", " << count << " bytes";
      }
  });
}

}  // namespace
}  // namespace npu::runtime
