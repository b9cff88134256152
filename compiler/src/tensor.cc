#include "npu/compiler/tensor.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace npu {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kI16: return 2;
  }
  return 1;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kI8: return "int8";
    case DType::kU8: return "uint8";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
    case DType::kI16: return "int16";
  }
  return "unknown";
}

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(t.element_count()) * dtype_size(dtype), 0);
  return t;
}

int64_t Tensor::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Tensor to_float(const Tensor& t) {
  if (t.dtype == DType::kF32) return t;
  Tensor out = Tensor::zeros(DType::kF32, t.shape);
  auto dst = out.as<float>();
  for (size_t i = 0; i < dst.size(); ++i) {
    switch (t.dtype) {
      case DType::kI8: dst[i] = t.as<int8_t>()[i]; break;
      case DType::kU8: dst[i] = t.as<uint8_t>()[i]; break;
      case DType::kI32: dst[i] = static_cast<float>(t.as<int32_t>()[i]); break;
      case DType::kI64: dst[i] = static_cast<float>(t.as<int64_t>()[i]); break;
      case DType::kI16: dst[i] = t.as<int16_t>()[i]; break;
      case DType::kF32: break;
    }
  }
  return out;
}

double sqnr_db(std::span<const float> reference, std::span<const float> actual) {
  double signal = 0, noise = 0;
  const size_t n = std::min(reference.size(), actual.size());
  for (size_t i = 0; i < n; ++i) {
    signal += static_cast<double>(reference[i]) * reference[i];
    const double d = static_cast<double>(reference[i]) - actual[i];
    noise += d * d;
  }
  if (noise == 0) return std::numeric_limits<double>::infinity();
  if (signal == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace npu
