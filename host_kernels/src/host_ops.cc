// The kernel table, run_host_op, and the helpers shared by the kernel families.
#include <algorithm>
#include <cmath>

#include "kernel.h"

namespace npu::host {

Result<const Tensor*> OpContext::need(size_t k) const {
  const Tensor* t = in(k);
  if (!t) return invalid("input " + std::to_string(k) + " is required but missing");
  return t;
}

int64_t OpContext::attr_int(const std::string& key, int64_t fallback) const {
  const Attribute* a = attr(key);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::kFloat) return static_cast<int64_t>(a->f);
  return a->kind == Attribute::Kind::kInt ? a->i : fallback;
}

float OpContext::attr_float(const std::string& key, float fallback) const {
  const Attribute* a = attr(key);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  return a->kind == Attribute::Kind::kFloat ? a->f : fallback;
}

std::string OpContext::attr_string(const std::string& key, const std::string& fallback) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::kString ? a->s : fallback;
}

std::optional<std::vector<int64_t>> OpContext::attr_ints(const std::string& key) const {
  const Attribute* a = attr(key);
  if (!a) return std::nullopt;
  if (a->kind == Attribute::Kind::kInt) return std::vector<int64_t>{a->i};
  return a->ints;
}

Result<DType> dtype_from_onnx_type(const OpContext& c, int64_t onnx_type) {
  switch (onnx_type) {
    case 1:
    case 11:
      return DType::kF32;  // FLOAT, DOUBLE
    case 2:
    case 9:
      return DType::kU8;  // UINT8, BOOL
    case 3:
      return DType::kI8;
    case 6:
      return DType::kI32;
    case 7:
      return DType::kI64;
    default:
      return c.unsupported("ONNX element type " + std::to_string(onnx_type));
  }
}

Tensor cast_tensor(const Tensor& t, DType dtype) {
  if (t.dtype == dtype) return t;
  Tensor out = Tensor::zeros(dtype, t.shape);
  visit_dtype(t.dtype, [&](auto s) {
    using S = decltype(s);
    visit_dtype(dtype, [&](auto d) {
      using D = decltype(d);
      auto src = t.as<S>();
      auto dst = out.as<D>();
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = convert<D>(src[i]);
    });
  });
  return out;
}

double element_as_double(const Tensor& t, size_t i) {
  return visit_dtype(t.dtype, [&](auto s) { return static_cast<double>(t.as<decltype(s)>()[i]); });
}

int64_t element_as_int(const Tensor& t, size_t i) {
  return visit_dtype(t.dtype, [&](auto s) { return convert<int64_t>(t.as<decltype(s)>()[i]); });
}

std::vector<int64_t> to_int64_vector(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.element_count()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = element_as_int(t, i);
  return v;
}

std::vector<float> to_float_vector(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.element_count()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(element_as_double(t, i));
  return v;
}

int64_t numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape strides_of(std::span<const int64_t> shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

Result<Tensor> new_tensor(const OpContext& c, DType dtype, const Shape& shape) {
  constexpr int64_t kMax = int64_t{1} << 28;  // elements: 1 GiB of float32
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return c.invalid("output shape " + shape_to_string(shape) + " has a negative dimension");
    if (d > 0 && n > kMax / d)
      return c.invalid("output shape " + shape_to_string(shape) + " is too large for the host");
    n *= d;
  }
  return Tensor::zeros(dtype, shape);
}

Result<int64_t> normalize_axis(const OpContext& c, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return c.invalid("axis " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Result<std::vector<int64_t>> normalize_axes(const OpContext& c, std::vector<int64_t> axes,
                                            int64_t rank) {
  for (int64_t& a : axes) {
    NPU_ASSIGN_OR_RETURN(a, normalize_axis(c, a, rank));
  }
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return c.invalid("axes " + shape_to_string(axes) + " repeat an axis");
  return axes;
}

Status indices_fit(const OpContext& c, const Shape& indices, const Shape& data, int64_t axis) {
  bool fits = indices.size() == data.size();
  for (size_t d = 0; fits && d < data.size(); ++d)
    fits = static_cast<int64_t>(d) == axis || indices[d] <= data[d];
  if (fits) return Status::ok();
  return c.invalid("indices " + shape_to_string(indices) + " must have the rank of data " +
                   shape_to_string(data) + " and fit in it outside axis " + std::to_string(axis));
}

Result<Shape> broadcast_shapes(const OpContext& c, const std::vector<const Shape*>& shapes) {
  size_t rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (const Shape* s : shapes) {
    const size_t off = rank - s->size();
    for (size_t i = 0; i < s->size(); ++i) {
      const int64_t d = (*s)[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::string list;
        for (const Shape* t : shapes) list += (list.empty() ? "" : " and ") + shape_to_string(*t);
        return c.invalid("shapes " + list + " do not broadcast");
      }
      o = d;
    }
  }
  return out;
}

Shape broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out) {
  Shape s(out.size(), 0);
  const Shape own = strides_of(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : own[i];
  return s;
}

void gather_strided(const Tensor& in, const Shape& in_strides, int64_t base, Tensor& out) {
  const size_t es = dtype_size(in.dtype);
  const uint8_t* src = in.data.data();
  uint8_t* dst = out.data.data();
  for_each_strided<1>(out.shape, {&in_strides},
                      [&](int64_t i, const std::array<int64_t, 1>& o) {
                        std::memcpy(dst + static_cast<size_t>(i) * es,
                                    src + static_cast<size_t>(o[0]) * es, es);
                      },
                      {base});
}

Shape reduced_shape(std::span<const int64_t> shape, const std::vector<int64_t>& axes,
                    bool keepdims) {
  Shape out;
  for (size_t i = 0; i < shape.size(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
    if (!reduced)
      out.push_back(shape[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Shape reduce_strides(std::span<const int64_t> shape, const std::vector<int64_t>& axes) {
  const Shape kept = reduced_shape(shape, axes, true);
  Shape st = strides_of(kept);
  for (int64_t a : axes) st[static_cast<size_t>(a)] = 0;
  return st;
}

AxisSplit split_at(std::span<const int64_t> shape, int64_t axis) {
  AxisSplit s;
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto a = static_cast<size_t>(axis);
    if (i < a)
      s.outer *= shape[i];
    else if (i == a)
      s.n = shape[i];
    else
      s.inner *= shape[i];
  }
  return s;
}

Result<std::optional<std::vector<int64_t>>> axes_attr_or_input(const OpContext& c,
                                                               int64_t input_from_opset,
                                                               size_t input_index) {
  if (c.opset >= input_from_opset) {
    if (c.attr("axes"))
      return c.invalid("from opset " + std::to_string(input_from_opset) +
                       " the axes are an input, not an attribute");
    const Tensor* t = c.in(input_index);
    if (!t) return std::optional<std::vector<int64_t>>{};
    return std::optional<std::vector<int64_t>>{to_int64_vector(*t)};
  }
  return c.attr_ints("axes");
}

namespace {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable k;
    register_elementwise(k);
    register_linalg(k);
    register_spatial(k);
    register_normalization(k);
    register_reduce(k);
    register_shape_ops(k);
    register_resize(k);
    register_misc(k);
    register_quant(k);
    register_loss(k);
    register_rnn(k);
    register_signal(k);
    register_vision(k);
    return k;
  }();
  return t;
}

}  // namespace

Result<std::vector<Tensor>> run_host_op(const std::string& op_type, const std::string& node_name,
                                        int64_t opset, const HostOpAttrs& attrs,
                                        const std::vector<const Tensor*>& inputs,
                                        size_t num_outputs) {
  auto it = table().find(op_type);
  if (it == table().end())
    return make_error(StatusCode::kUnsupported,
                      "operator " + op_type + " (node '" + node_name +
                          "') is supported neither on the NPU nor by the host fallback");
  const OpContext c{op_type, node_name, opset, attrs, inputs, num_outputs};
  for (const auto& [key, a] : attrs)
    if (a.kind == Attribute::Kind::kOther)
      return c.unsupported("attribute '" + key + "' (" + a.s + ")");
  try {
    return it->second(c);
  } catch (const std::bad_alloc&) {
    return make_error(StatusCode::kResourceExhausted, c.label() + ": out of host memory");
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInternal, c.label() + ": " + e.what() + " (please report it)");
  }
}

bool host_op_supported(const std::string& op_type) { return table().count(op_type) > 0; }

std::vector<std::string> host_op_types() {
  std::vector<std::string> v;
  for (const auto& [name, k] : table()) v.push_back(name);
  return v;
}

}  // namespace npu::host
