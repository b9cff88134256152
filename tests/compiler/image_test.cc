// The loader treats images as untrusted: every corruption must end in a clear error.
#include "npu/compiler/image.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "npu/compiler/compiler.h"

namespace npu::compiler {
namespace {

std::vector<uint8_t> compiled_gemm() {
  CompileOptions options;
  auto calib = read_calibration_dir(std::string(NPU_TEST_DATA) + "/calib", 1);
  EXPECT_TRUE(calib.is_ok());
  options.calibration = calib.value();
  auto bytes = compile_onnx_file(std::string(NPU_TEST_DATA) + "/gemm_relu.onnx", options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  return bytes.value();
}

}  // namespace

TEST(Image, CompiledImageVerifiesAndDescribesIo) {
  auto image = ModelImage::from_bytes(compiled_gemm(), "gemm");
  ASSERT_TRUE(image.is_ok()) << image.status().to_string();
  const auto& m = (*image)->model();
  EXPECT_EQ(m.array_dim(), hw::kDefaultArrayDim);
  EXPECT_EQ(m.hw_fingerprint(), hw::fingerprint_for_dim(hw::kDefaultArrayDim));
  ASSERT_EQ(m.inputs()->size(), 1u);
  EXPECT_EQ(m.inputs()->Get(0)->desc()->name()->str(), "x");
  EXPECT_EQ(m.outputs()->Get(0)->desc()->shape()->Get(1), 32);
}

TEST(Image, RejectsTruncationAtEveryLength) {
  const auto bytes = compiled_gemm();
  for (size_t len = 0; len < bytes.size(); len += 7) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
    auto image = ModelImage::from_bytes(cut, "cut");
    EXPECT_FALSE(image.is_ok()) << "accepted a " << len << "-byte prefix";
  }
}

// Three flipped bits anywhere: the checksum refuses every such image (CRC-32 detects every
// error of up to three bits in files far longer than these).
TEST(Image, RandomCorruptionIsAlwaysRefused) {
  const auto bytes = compiled_gemm();
  std::mt19937 rng(7);
  int rejected = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto copy = bytes;
    for (int flips = 0; flips < 3; ++flips)
      copy[rng() % copy.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (copy == bytes) continue;  // two flips of the same bit cancelled
    auto image = ModelImage::from_bytes(copy, "fuzz");
    ASSERT_FALSE(image.is_ok()) << "trial " << trial << " accepted";
    EXPECT_EQ(image.status().code(), StatusCode::kCorruptData) << image.status().to_string();
    ++rejected;
  }
  EXPECT_GT(rejected, 1900);
}

// Every byte of the image, flipped (xor 0xff) and changed to a random other value, is refused
// as CORRUPT_DATA naming the file: the header, the FlatBuffer, weights, commands, trailer.
TEST(Image, EverySingleByteChangeIsRefused) {
  const auto bytes = compiled_gemm();
  std::mt19937 rng(11);
  size_t refused = 0;
  for (size_t k = 0; k < bytes.size(); ++k) {
    for (uint8_t x : {uint8_t{0xff}, static_cast<uint8_t>(1 + rng() % 255)}) {
      auto copy = bytes;
      copy[k] ^= x;
      auto image = ModelImage::from_bytes(copy, "m.npuimg");
      ASSERT_FALSE(image.is_ok()) << "byte " << k << " ^ " << int{x} << " accepted";
      ASSERT_EQ(image.status().code(), StatusCode::kCorruptData) << image.status().to_string();
      ASSERT_EQ(image.status().message().rfind("m.npuimg: ", 0), 0u) << image.status().message();
      ++refused;
    }
  }
  std::printf("%zu single-byte changes of a %zu-byte image: %zu refused with CORRUPT_DATA\n",
              2 * bytes.size(), bytes.size(), refused);
}

TEST(Image, RejectsOnnxBytesWithAHint) {
  std::vector<uint8_t> onnx_like{0x08, 0x07, 0x12, 0x04, 'n', 'p', 'u', 0};
  auto image = ModelImage::from_bytes(onnx_like, "model.onnx");
  ASSERT_FALSE(image.is_ok());
  EXPECT_NE(image.status().message().find("ONNX"), std::string::npos);
}

}  // namespace npu::compiler
