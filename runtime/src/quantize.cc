// Quantising inputs into, and dequantising outputs out of, strided device views.
#include "npu/runtime/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "quantize_kernels.h"

namespace npu::runtime {
namespace {

size_t scale_index(const QuantInfo& q, std::span<const int64_t> coord) {
  if (q.axis < 0 || q.scale.size() <= 1) return 0;
  const auto axis = static_cast<size_t>(q.axis);
  if (axis >= coord.size()) return 0;
  return std::min(static_cast<size_t>(coord[axis]), q.scale.size() - 1);
}

float scale_at(const QuantInfo& q, size_t i) { return q.scale.empty() ? 1.0f : q.scale[i]; }
int32_t zp_at(const QuantInfo& q, size_t i) {
  if (q.zero_point.empty()) return 0;
  return q.zero_point[std::min(i, q.zero_point.size() - 1)];
}

// An element coordinate, zeroed: inline up to rank 8 (no allocation per request).
class Coord {
 public:
  explicit Coord(size_t rank) : rank_(rank) {
    if (rank > kInline) heap_.assign(rank, 0);
  }
  std::span<int64_t> span() { return {rank_ > kInline ? heap_.data() : inline_, rank_}; }

 private:
  static constexpr size_t kInline = 8;
  size_t rank_;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;
};

// Calls fn(linear_index, byte_offset, coord) for every element in row-major order.
template <typename Fn>
void walk(const TensorInfo& info, Fn&& fn) {
  const size_t rank = info.shape.size();
  Coord storage(rank);
  const std::span<int64_t> coord = storage.span();
  const int64_t n = info.element_count();
  uint64_t offset = info.device_offset;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, offset, coord);
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < info.shape[d]) {
        offset += static_cast<uint64_t>(info.device_strides[d]);
        break;
      }
      offset -= static_cast<uint64_t>(info.device_strides[d]) *
                static_cast<uint64_t>(info.shape[d] - 1);
      coord[d] = 0;
    }
  }
}

// Calls fn(linear_index, byte_offset, coord, count, stride) for every innermost row in
// row-major order: `count` elements from linear_index on, at byte_offset + k·stride; coord is
// the row's first element.
template <typename Fn>
void walk_rows(const TensorInfo& info, Fn&& fn) {
  const size_t rank = info.shape.size();
  const int64_t n = info.element_count();
  if (n == 0) return;
  Coord storage(rank);
  const std::span<int64_t> coord = storage.span();
  if (rank == 0) {
    fn(0, info.device_offset, coord, 1, 0);
    return;
  }
  const int64_t inner = info.shape[rank - 1];
  const int64_t inner_stride = info.device_strides[rank - 1];
  uint64_t offset = info.device_offset;
  for (int64_t i = 0; i < n; i += inner) {
    fn(i, offset, coord, inner, inner_stride);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++coord[d] < info.shape[d]) {
        offset += static_cast<uint64_t>(info.device_strides[d]);
        break;
      }
      offset -= static_cast<uint64_t>(info.device_strides[d]) * static_cast<uint64_t>(info.shape[d] - 1);
      coord[d] = 0;
    }
  }
}

// nearbyint in the default rounding mode (ties to even; the runtime never changes the mode)
// without a libm call, so that quantisation loops vectorise: adding and subtracting 1.5·2^23
// rounds a float of magnitude below 2^23 to an integer; larger floats are integers already.
float round_ties_even(float v) {
  constexpr float kMagic = 12582912.0f;
  return std::fabs(v) < 8388608.0f ? (v + kMagic) - kMagic : v;
}

bool is_float(DType d) { return d == DType::kF32; }

// quantize_int8 over a contiguous run with one scale and zero point, into contiguous int8: the
// Highway kernel (quantize_kernels.h) for |zero_point| <= 2^20, where it clamps in float.
void quantize_int8_run(const float* __restrict x, int64_t count, float scale, int32_t zero_point,
                       int8_t* __restrict out) {
  if (zero_point < -(1 << 20) || zero_point > (1 << 20)) {
    for (int64_t k = 0; k < count; ++k) out[k] = quantize_int8(x[k], scale, zero_point);
    return;
  }
  quantize_int8_run_simd(x, count, scale, zero_point, out);
}

// quantize_int8, inlined into the quantisation loops.
inline int8_t quantize_int8_inline(float x, float scale, int32_t zero_point) {
  if (std::isnan(x)) return static_cast<int8_t>(std::clamp(zero_point, -128, 127));
  // Ties to even under the default rounding mode, as ONNX QuantizeLinear.
  const double q = static_cast<double>(round_ties_even(x / scale)) + zero_point;
  return static_cast<int8_t>(std::clamp(q, -128.0, 127.0));
}

}  // namespace

int8_t quantize_int8(float x, float scale, int32_t zero_point) { return quantize_int8_inline(x, scale, zero_point); }

int32_t quantize_int32(float x, float scale, int32_t zero_point) {
  if (std::isnan(x)) return zero_point;
  const double q = static_cast<double>(std::nearbyint(x / scale)) + zero_point;
  return static_cast<int32_t>(std::clamp(q, -2147483648.0, 2147483647.0));
}

bool uint8_codes_on_int8(const TensorInfo& info) {
  return info.on_device && info.dtype == DType::kU8 && info.device_dtype == DType::kI8;
}

std::pair<uint64_t, uint64_t> view_extent(const TensorInfo& info) {
  if (info.element_count() == 0) return {info.device_offset, info.device_offset};  // an empty tensor
  uint64_t last = info.device_offset;
  for (size_t d = 0; d < info.shape.size(); ++d)
    last += static_cast<uint64_t>(info.shape[d] - 1) * static_cast<uint64_t>(info.device_strides[d]);
  return {info.device_offset, last + dtype_size(info.device_dtype)};
}

Status check_input(const Tensor& t, const TensorInfo& info, size_t index) {
  // The messages are built only on failure: this runs on every request's hot path.
  auto who = [&] { return "input " + std::to_string(index) + " ('" + info.name + "')"; };
  auto want = [&] { return std::string(dtype_name(info.dtype)) + shape_to_string(info.shape); };
  if (t.shape != info.shape)
    return make_error(StatusCode::kInvalidArgument,
                      who() + " has shape " + shape_to_string(t.shape) + " but the model expects " +
                          want() + "; reshape the array or recompile with --input-shape");
  const bool ok_dtype = is_float(info.dtype)
                            ? t.dtype == DType::kF32
                            : (t.dtype == info.dtype && (!info.on_device || t.dtype == info.device_dtype ||
                                                         uint8_codes_on_int8(info)));
  if (!ok_dtype)
    return make_error(StatusCode::kInvalidArgument,
                      who() + " has dtype " + std::string(dtype_name(t.dtype)) +
                          " but the model expects " + want() + "; convert it (e.g. numpy astype(" +
                          std::string(dtype_name(info.dtype)) + "))");
  if (t.data.size() != static_cast<size_t>(t.element_count()) * dtype_size(t.dtype))
    return make_error(StatusCode::kInvalidArgument,
                      who() + " holds " + std::to_string(t.data.size()) + " bytes, not the " +
                          std::to_string(static_cast<size_t>(t.element_count()) *
                                         dtype_size(t.dtype)) +
                          " its shape and dtype need");
  return Status::ok();
}

Status quantize_into(const Tensor& t, const TensorInfo& info, std::span<std::byte> act) {
  if (!info.on_device)
    return make_error(StatusCode::kInternal, "value '" + info.name + "' has no device view");
  NPU_RETURN_IF_ERROR(check_input(t, info, 0));
  const auto [begin, end] = view_extent(info);
  if (end > act.size())
    return make_error(StatusCode::kInternal, "input view of '" + info.name +
                                                 "' reaches past the activation buffer");
  // An empty view may sit in an empty buffer, whose data() is null (memset's pointer must not be).
  if (end > begin) std::memset(act.data() + begin, 0, end - begin);
  const QuantInfo& q = info.device_quant;
  std::byte* base = act.data();
  if (info.dtype == DType::kF32) {
    const float* src = reinterpret_cast<const float*>(t.data.data());
    if (info.device_dtype == DType::kI8) {
      // Row by row: the scale changes along the rows only when the axis is the innermost one.
      const bool per_element_scale = q.axis >= 0 && q.scale.size() > 1 &&
                                     static_cast<size_t>(q.axis) + 1 == info.shape.size();
      walk_rows(info, [&](int64_t i, uint64_t off, std::span<const int64_t> c, int64_t count, int64_t stride) {
        const float* x = src + i;
        std::byte* y = base + off;
        if (per_element_scale) {
          for (int64_t k = 0; k < count; ++k) {
            const size_t si = std::min(static_cast<size_t>(k), q.scale.size() - 1);
            y[k * stride] = static_cast<std::byte>(quantize_int8_inline(x[k], scale_at(q, si), zp_at(q, si)));
          }
          return;
        }
        const size_t si = scale_index(q, c);
        if (stride == 1) {
          quantize_int8_run(x, count, scale_at(q, si), zp_at(q, si), reinterpret_cast<int8_t*>(y));
          return;
        }
        // Quantise contiguously, then scatter with the device stride.
        int8_t chunk[256];
        for (int64_t k0 = 0; k0 < count; k0 += 256) {
          const int64_t len = std::min<int64_t>(256, count - k0);
          quantize_int8_run(x + k0, len, scale_at(q, si), zp_at(q, si), chunk);
          scatter_bytes_simd(chunk, len, stride, y + k0 * stride);
        }
      });
    } else if (info.device_dtype == DType::kI32) {
      walk(info, [&](int64_t i, uint64_t off, std::span<const int64_t> c) {
        const size_t si = scale_index(q, c);
        const int32_t v = quantize_int32(src[i], scale_at(q, si), zp_at(q, si));
        std::memcpy(base + off, &v, 4);
      });
    } else {
      return make_error(StatusCode::kUnsupported, "input '" + info.name + "': device dtype " +
                                                      std::string(dtype_name(info.device_dtype)) +
                                                      " is not supported");
    }
  } else if (uint8_codes_on_int8(info)) {
    walk(info, [&](int64_t i, uint64_t off, std::span<const int64_t>) {
      base[off] = static_cast<std::byte>(static_cast<int8_t>(static_cast<int32_t>(t.data[static_cast<size_t>(i)]) - 128));
    });
  } else {
    const size_t es = dtype_size(info.device_dtype);
    walk(info, [&](int64_t i, uint64_t off, std::span<const int64_t>) {
      std::memcpy(base + off, t.data.data() + static_cast<size_t>(i) * es, es);
    });
  }
  return Status::ok();
}

Result<Tensor> dequantize_from(const TensorInfo& info, std::span<const std::byte> act) {
  if (!info.on_device)
    return make_error(StatusCode::kInternal, "value '" + info.name + "' has no device view");
  const auto [begin, end] = view_extent(info);
  if (end > act.size())
    return make_error(StatusCode::kInternal, "output view of '" + info.name +
                                                 "' reaches past the activation buffer");
  (void)begin;
  const QuantInfo& q = info.device_quant;
  const std::byte* base = act.data();
  auto read = [&](uint64_t off) -> int32_t {
    switch (info.device_dtype) {
      case DType::kI8: return static_cast<int8_t>(base[off]);
      case DType::kU8: return static_cast<uint8_t>(base[off]);
      case DType::kI16: {  // a wide value's codes (ISA 1.4)
        int16_t v;
        std::memcpy(&v, base + off, 2);
        return v;
      }
      default: {
        int32_t v;
        std::memcpy(&v, base + off, 4);
        return v;
      }
    }
  };
  if (info.device_dtype != DType::kI8 && info.device_dtype != DType::kU8 &&
      info.device_dtype != DType::kI16 && info.device_dtype != DType::kI32)
    return make_error(StatusCode::kUnsupported, "output '" + info.name + "': device dtype " +
                                                    std::string(dtype_name(info.device_dtype)) +
                                                    " is not supported");
  if (info.dtype == DType::kF32) {
    Tensor out = Tensor::zeros(DType::kF32, info.shape);
    float* dst = out.as<float>().data();
    const bool per_tensor = q.axis < 0 || q.scale.size() <= 1;
    const int32_t zp0 = zp_at(q, 0);
    if (info.device_dtype == DType::kI8 && per_tensor && zp0 >= -(1 << 20) && zp0 <= (1 << 20)) {
      // One scale and zero point: each contiguous innermost row is one run of the Highway kernel.
      walk_rows(info, [&](int64_t i, uint64_t off, std::span<const int64_t>, int64_t count, int64_t stride) {
        const auto* src = reinterpret_cast<const int8_t*>(base + off);
        if (stride == 1) return dequantize_int8_run_simd(src, count, scale_at(q, 0), zp0, dst + i);
        for (int64_t k = 0; k < count; ++k) dst[i + k] = dequantize(src[k * stride], scale_at(q, 0), zp0);
      });
      return out;
    }
    walk(info, [&](int64_t i, uint64_t off, std::span<const int64_t> c) {
      const size_t si = scale_index(q, c);
      dst[i] = dequantize(read(off), scale_at(q, si), zp_at(q, si));
    });
    return out;
  }
  Tensor out = Tensor::zeros(info.dtype, info.shape);
  const int64_t shift = uint8_codes_on_int8(info) ? 128 : 0;
  walk(info, [&](int64_t i, uint64_t off, std::span<const int64_t>) {
    const int64_t v = read(off) + shift;
    switch (info.dtype) {
      case DType::kI8: out.as<int8_t>()[static_cast<size_t>(i)] = static_cast<int8_t>(v); break;
      case DType::kU8: out.as<uint8_t>()[static_cast<size_t>(i)] = static_cast<uint8_t>(v); break;
      case DType::kI32: out.as<int32_t>()[static_cast<size_t>(i)] = static_cast<int32_t>(v); break;
      case DType::kI64: out.as<int64_t>()[static_cast<size_t>(i)] = v; break;
      default: break;
    }
  });
  return out;
}

}  // namespace npu::runtime
