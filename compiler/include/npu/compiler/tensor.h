// Host tensors and .npy files. A Tensor owns its bytes (dense, row-major). Not
// thread-safe for mutation; const access from many threads is fine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "npu/hal/status.h"

namespace npu {

// kI16 (appended): the device view of a wide value (ISA 1.4); never a model's tensor type.
enum class DType : uint8_t { kF32 = 0, kI8 = 1, kU8 = 2, kI32 = 3, kI64 = 4, kI16 = 5 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "float32", "int8", ...

struct Tensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // element_count() * dtype_size(dtype) bytes

  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  int64_t element_count() const;
  template <typename T>
  std::span<T> as() { return {reinterpret_cast<T*>(data.data()), data.size() / sizeof(T)}; }
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data.data()), data.size() / sizeof(T)};
  }
};

std::string shape_to_string(std::span<const int64_t> shape);  // "[4,64]"

// Reads a .npy file (format 1.0-3.0, little-endian, C order; float32/float64/int8/uint8/
// int32/int64; float64 is converted to float32). Errors name the file and the problem.
Result<Tensor> read_npy(const std::string& path);
Status write_npy(const std::string& path, const Tensor& tensor);

// Returns a float32 copy of any tensor.
Tensor to_float(const Tensor& tensor);

// Signal-to-quantisation-noise ratio in dB of `actual` against `reference` (float32 views):
// 10·log10(Σ ref² / Σ (ref − actual)²); +inf when identical.
double sqnr_db(std::span<const float> reference, std::span<const float> actual);

}  // namespace npu
