#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "npu/compiler/tensor.h"

namespace npu {

TEST(Npy, RoundTripsEveryDtype) {
  const auto dir = std::filesystem::temp_directory_path();
  for (DType dt : {DType::kF32, DType::kI8, DType::kU8, DType::kI32, DType::kI64}) {
    Tensor t = Tensor::zeros(dt, {2, 3, 5});
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<uint8_t>(i * 7 + 1);
    const std::string path = (dir / ("npu_npy_" + std::string(dtype_name(dt)) + ".npy")).string();
    ASSERT_TRUE(write_npy(path, t).is_ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.is_ok()) << back.status().to_string();
    EXPECT_EQ(back->dtype, dt);
    EXPECT_EQ(back->shape, t.shape);
    EXPECT_EQ(back->data, t.data);
  }
}

TEST(Npy, RejectsBadFilesWithReasons) {
  const auto dir = std::filesystem::temp_directory_path();
  auto missing = read_npy((dir / "npu_does_not_exist.npy").string());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  const std::string junk = (dir / "npu_junk.npy").string();
  std::ofstream(junk) << "not numpy at all";
  auto bad = read_npy(junk);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("magic"), std::string::npos);
  // A valid header whose data is truncated.
  Tensor t = Tensor::zeros(DType::kF32, {4, 4});
  const std::string trunc = (dir / "npu_trunc.npy").string();
  ASSERT_TRUE(write_npy(trunc, t).is_ok());
  std::filesystem::resize_file(trunc, std::filesystem::file_size(trunc) - 5);
  auto short_read = read_npy(trunc);
  EXPECT_EQ(short_read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_read.status().message().find("does not match shape"), std::string::npos);
}

TEST(Sqnr, MatchesDefinition) {
  std::vector<float> ref{1, 2, 3, 4};
  std::vector<float> act{1.1f, 2, 3, 4};
  EXPECT_NEAR(sqnr_db(ref, act), 10 * std::log10(30.0 / 0.01), 1e-3);
  EXPECT_TRUE(std::isinf(sqnr_db(ref, ref)));
}

}  // namespace npu
