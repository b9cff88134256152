// Private to the host-op library: the kernel context, the kernel table, and the helpers
// every kernel family shares (dtype dispatch, shapes, broadcasting, strided iteration).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "npu/host_kernels/host_ops.h"

namespace npu::host {

using Shape = std::vector<int64_t>;
using Outputs = std::vector<Tensor>;

// One node's view for its kernel: attributes, inputs and message helpers.
struct OpContext {
  const std::string& op;
  const std::string& node;
  int64_t opset;
  const HostOpAttrs& attrs;
  const std::vector<const Tensor*>& inputs;
  size_t num_outputs;  // the node's output count; 0 when the caller does not know

  std::string label() const { return op + " node '" + node + "'"; }
  Status invalid(const std::string& msg) const {
    return make_error(StatusCode::kInvalidArgument, label() + ": " + msg);
  }
  Status unsupported(const std::string& msg) const {
    return make_error(StatusCode::kUnsupported,
                      label() + ": " + msg + " is not supported by the host fallback");
  }

  // Input k, or nullptr when absent (omitted or beyond the node's inputs).
  const Tensor* in(size_t k) const { return k < inputs.size() ? inputs[k] : nullptr; }
  // Input k, or INVALID_ARGUMENT when the node does not provide it.
  Result<const Tensor*> need(size_t k) const;

  const Attribute* attr(const std::string& key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  // The ints attribute `key`, or nullopt when absent.
  std::optional<std::vector<int64_t>> attr_ints(const std::string& key) const;
};

using Kernel = Result<Outputs> (*)(const OpContext&);
using KernelTable = std::map<std::string, Kernel, std::less<>>;

// Each kernel family adds its operators to the table (host_ops.cc calls them once).
void register_elementwise(KernelTable& table);
void register_linalg(KernelTable& table);
void register_spatial(KernelTable& table);
void register_normalization(KernelTable& table);
void register_reduce(KernelTable& table);
void register_shape_ops(KernelTable& table);
void register_resize(KernelTable& table);
void register_misc(KernelTable& table);
void register_quant(KernelTable& table);
void register_loss(KernelTable& table);
void register_rnn(KernelTable& table);
void register_signal(KernelTable& table);
void register_vision(KernelTable& table);

// ---- dtypes ----

// Calls f(T{}) with T the element type of `dtype`.
template <typename F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kI8:
      return f(int8_t{});
    case DType::kU8:
      return f(uint8_t{});
    case DType::kI32:
      return f(int32_t{});
    case DType::kI64:
      return f(int64_t{});
    case DType::kI16:
      return f(int16_t{});
    case DType::kF32:
      break;
  }
  return f(float{});
}

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  return DType::kI64;
}

// ONNX TensorProto element type -> host dtype (bool -> uint8, double -> float32).
Result<DType> dtype_from_onnx_type(const OpContext& c, int64_t onnx_type);

// Converts any value to T; float -> integer truncates toward zero and saturates (NaN -> 0).
template <typename T, typename S>
T convert(S v) {
  if constexpr (std::is_floating_point_v<S> && !std::is_floating_point_v<T>) {
    if (!(v == v)) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    const double d = static_cast<double>(v);
    if (d <= lo) return std::numeric_limits<T>::lowest();
    if (d >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(d);
  } else {
    return static_cast<T>(v);
  }
}

// Copies `t` converted to `dtype`.
Tensor cast_tensor(const Tensor& t, DType dtype);
// Reads element i of any tensor as double / int64.
double element_as_double(const Tensor& t, size_t i);
int64_t element_as_int(const Tensor& t, size_t i);
// All elements of an integer (or float) tensor as int64 (shape inputs, axes, indices).
std::vector<int64_t> to_int64_vector(const Tensor& t);
std::vector<float> to_float_vector(const Tensor& t);

// ---- shapes ----

int64_t numel(std::span<const int64_t> shape);
Shape strides_of(std::span<const int64_t> shape);  // row-major element strides
// A new zero tensor; INVALID_ARGUMENT when a dimension is negative or it would be huge.
Result<Tensor> new_tensor(const OpContext& c, DType dtype, const Shape& shape);
// Axis in [-rank, rank) -> [0, rank).
Result<int64_t> normalize_axis(const OpContext& c, int64_t axis, int64_t rank);
// Normalises a list of axes; duplicates are an error.
Result<std::vector<int64_t>> normalize_axes(const OpContext& c, std::vector<int64_t> axes,
                                            int64_t rank);

// GatherElements/ScatterElements: indices have data's rank and fit in it outside `axis`.
Status indices_fit(const OpContext& c, const Shape& indices, const Shape& data, int64_t axis);

// Numpy broadcasting of several shapes.
Result<Shape> broadcast_shapes(const OpContext& c, const std::vector<const Shape*>& shapes);
// Element strides of `in` viewed with the (broadcast) `out` shape: 0 on broadcast dims.
Shape broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out);

// Calls f(i, offsets) for every element i of `shape` in row-major order, where offsets[k] is
// the sum over dims of coordinate * strides[k][dim] (plus base[k]).
template <size_t N, typename F>
void for_each_strided(std::span<const int64_t> shape, const std::array<const Shape*, N>& strides,
                      F&& f, std::array<int64_t, N> offsets = {}) {
  const int64_t total = numel(shape);
  if (total == 0) return;
  const size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < total; ++i) {
    f(i, offsets);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) offsets[k] += (*strides[k])[d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= (*strides[k])[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// out[i] = in[offset(i)] for a strided view of `in` (transpose, slice, expand, ...). `out`
// must already have its dtype and shape.
void gather_strided(const Tensor& in, const Shape& in_strides, int64_t base, Tensor& out);

// Reductions: the output shape with `axes` reduced (kept as 1 or dropped), and the strides that
// map an input coordinate to its flat index in the keepdims output (0 on reduced axes).
Shape reduced_shape(std::span<const int64_t> shape, const std::vector<int64_t>& axes,
                    bool keepdims);
Shape reduce_strides(std::span<const int64_t> shape, const std::vector<int64_t>& axes);

// (outer, axis, inner) sizes of `shape` around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(std::span<const int64_t> shape, int64_t axis);

// The axes of a reduction-like operator: the `axes` attribute before `input_from_opset`, the
// optional input `input_index` from it on. nullopt when absent.
Result<std::optional<std::vector<int64_t>>> axes_attr_or_input(const OpContext& c,
                                                               int64_t input_from_opset,
                                                               size_t input_index);

// Integer + - * and negation wrap modulo 2^bits, as in ONNX (numpy); signed overflow would be
// undefined behaviour in C++. Computed in an unsigned type of at least int's width (narrower
// ones would promote to int and overflow there). Floats and bool use the plain operator.
template <typename T>
constexpr bool kWrapsAsUnsigned = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <typename T>
using WrapUnsigned = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                        std::make_unsigned_t<T>>;
template <typename T>
T wrapping_add(T a, T b) {
  if constexpr (kWrapsAsUnsigned<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) + static_cast<WrapUnsigned<T>>(b));
  else
    return static_cast<T>(a + b);
}
template <typename T>
T wrapping_sub(T a, T b) {
  if constexpr (kWrapsAsUnsigned<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) - static_cast<WrapUnsigned<T>>(b));
  else
    return static_cast<T>(a - b);
}
template <typename T>
T wrapping_mul(T a, T b) {
  if constexpr (kWrapsAsUnsigned<T>)
    return static_cast<T>(static_cast<WrapUnsigned<T>>(a) * static_cast<WrapUnsigned<T>>(b));
  else
    return static_cast<T>(a * b);
}
template <typename T>
T wrapping_neg(T x) {
  if constexpr (kWrapsAsUnsigned<T>)
    return static_cast<T>(WrapUnsigned<T>{0} - static_cast<WrapUnsigned<T>>(x));
  else
    return static_cast<T>(-x);
}

// Shared between kernel families.
// C[M,N] (+)= A·B with A(m,k) = a[m*am + k*ak] and B(k,n) = b[k*bk + n*bn].
template <typename T>
inline void matmul_2d(const T* a, int64_t am, int64_t ak, const T* b, int64_t bk, int64_t bn, T* c,
                      int64_t M, int64_t K, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    T* row = c + m * N;
    for (int64_t k = 0; k < K; ++k) {
      const T av = a[m * am + k * ak];
      const T* brow = b + k * bk;
      if (bn == 1) {  // the common, vectorisable case
        for (int64_t n = 0; n < N; ++n) row[n] = wrapping_add(row[n], wrapping_mul(av, brow[n]));
      } else {
        for (int64_t n = 0; n < N; ++n)
          row[n] = wrapping_add(row[n], wrapping_mul(av, brow[n * bn]));
      }
    }
  }
}

// Numpy matmul of same-typed tensors (linalg.cc).
Result<Tensor> matmul_tensors(const OpContext& c, const Tensor& a, const Tensor& b);
// Convolution of same-typed (float or int32) X [N,C,...] and W [M,C/group,...], optional B [M],
// with the node's strides/pads/dilations/group (spatial.cc).
Result<Tensor> conv_tensors(const OpContext& c, const Tensor& x, const Tensor& w, const Tensor* b);
// (x − zero_point) as int32; the zero point is a scalar or holds one value per position of
// `axis` (negative counts from the end) (quant.cc).
Result<Tensor> minus_zero_point(const OpContext& c, const Tensor& x, const Tensor* zp,
                                int64_t axis);

template <typename T>
Outputs one(T&& t) {
  Outputs out;
  out.push_back(std::forward<T>(t));
  return out;
}

}  // namespace npu::host
