// Data movement and shape operators: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat,
// Split, Slice, Gather, GatherElements, GatherND, Shape, Size, Constant, ConstantOfShape,
// Expand, Tile, Pad, Identity, Dropout, DepthToSpace, SpaceToDepth. Dtype-agnostic: they
// move bytes.
#include <algorithm>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

Tensor with_shape(const Tensor& x, Shape shape) {
  Tensor t = x;
  t.shape = std::move(shape);
  return t;
}

Result<Outputs> identity(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  return one(Tensor(*x));
}

Result<Outputs> dropout(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const Tensor* training = c.opset >= 12 ? c.in(2) : nullptr;
  const bool train = training && training->element_count() > 0 && element_as_int(*training, 0) != 0;
  const Tensor* ratio_t = c.opset >= 12 ? c.in(1) : nullptr;
  const double ratio = ratio_t && ratio_t->element_count() > 0 ? element_as_double(*ratio_t, 0)
                                                               : c.attr_float("ratio", 0.5f);
  if (train && ratio > 0)
    return c.unsupported("training_mode with a non-zero ratio (random masks)");
  Outputs out;
  out.push_back(*x);
  Tensor mask = Tensor::zeros(DType::kU8, x->shape);
  std::fill(mask.data.begin(), mask.data.end(), uint8_t{1});
  out.push_back(std::move(mask));
  return out;
}

Result<Outputs> reshape(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* st, c.need(1));
  Shape shape = to_int64_vector(*st);
  const bool allowzero = c.attr_int("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= x->shape.size())
        return c.invalid("shape " + shape_to_string(shape) + " copies a dim X lacks");
      shape[i] = x->shape[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return c.invalid("shape " + shape_to_string(shape) + " has more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      return c.invalid("shape " + shape_to_string(shape) + " has a negative dimension");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return c.invalid("shape " + shape_to_string(shape) + " has more elements than int64 counts");
    }
  }
  if (infer >= 0) {
    if (known == 0 || x->element_count() % known != 0)
      return c.invalid("cannot reshape " + shape_to_string(x->shape) + " to " +
                       shape_to_string(shape));
    shape[static_cast<size_t>(infer)] = x->element_count() / known;
  }
  if (numel(shape) != x->element_count())
    return c.invalid("cannot reshape " + shape_to_string(x->shape) + " to " +
                     shape_to_string(shape));
  return one(with_shape(*x, shape));
}

Result<Outputs> flatten(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  int64_t axis = c.attr_int("axis", 1);
  if (axis < -rank || axis > rank)
    return c.invalid("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  const int64_t outer = numel(std::span<const int64_t>(x->shape).first(static_cast<size_t>(axis)));
  return one(with_shape(*x, {outer, outer ? x->element_count() / outer : 0}));
}

Result<Outputs> transpose(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const size_t rank = x->shape.size();
  Shape perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  if (auto p = c.attr_ints("perm")) perm = *p;
  Shape sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted.size() != rank || sorted[i] != static_cast<int64_t>(i))
      return c.invalid("perm " + shape_to_string(perm) + " is not a permutation of rank " +
                       std::to_string(rank));
  const Shape in_strides = strides_of(x->shape);
  Shape out_shape(rank), strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    out_shape[i] = x->shape[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  Tensor out = Tensor::zeros(x->dtype, out_shape);
  gather_strided(*x, strides, 0, out);
  return one(std::move(out));
}

Result<Outputs> squeeze(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given, axes_attr_or_input(c, 13, 1));
  std::vector<int64_t> axes;
  if (given) {
    NPU_ASSIGN_OR_RETURN(axes, normalize_axes(c, *given, rank));
  } else {
    for (int64_t i = 0; i < rank; ++i)
      if (x->shape[static_cast<size_t>(i)] == 1) axes.push_back(i);
  }
  for (int64_t a : axes)
    if (x->shape[static_cast<size_t>(a)] != 1)
      return c.invalid("axis " + std::to_string(a) + " of " + shape_to_string(x->shape) +
                       " is not 1");
  return one(with_shape(*x, reduced_shape(x->shape, axes, false)));
}

Result<Outputs> unsqueeze(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given, axes_attr_or_input(c, 13, 1));
  if (!given) return c.invalid("axes are required");
  const auto rank = static_cast<int64_t>(x->shape.size() + given->size());
  NPU_ASSIGN_OR_RETURN(std::vector<int64_t> axes, normalize_axes(c, *given, rank));
  Shape shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end())
      shape.push_back(1);
    else
      shape.push_back(x->shape[next++]);
  }
  return one(with_shape(*x, shape));
}

Result<Outputs> concat(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* first, c.need(0));
  const auto rank = static_cast<int64_t>(first->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0), rank));
  Shape shape = first->shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(k));
    bool ok = t->dtype == first->dtype && t->shape.size() == first->shape.size();
    for (size_t d = 0; ok && d < t->shape.size(); ++d)
      ok = d == static_cast<size_t>(axis) || t->shape[d] == first->shape[d];
    if (!ok)
      return c.invalid("input " + std::to_string(k) + " " + shape_to_string(t->shape) +
                       " does not match input 0 " + shape_to_string(first->shape) +
                       " outside axis " + std::to_string(axis));
    shape[static_cast<size_t>(axis)] += t->shape[static_cast<size_t>(axis)];
  }
  Tensor out = Tensor::zeros(first->dtype, shape);
  const size_t es = dtype_size(first->dtype);
  const AxisSplit s = split_at(shape, axis);
  size_t at = 0;
  for (int64_t o = 0; o < s.outer; ++o)
    for (const Tensor* t : c.inputs) {
      const auto chunk = static_cast<size_t>(t->shape[static_cast<size_t>(axis)] * s.inner) * es;
      if (chunk)
        std::memcpy(out.data.data() + at, t->data.data() + static_cast<size_t>(o) * chunk, chunk);
      at += chunk;
    }
  return one(std::move(out));
}

Result<Outputs> split(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0), rank));
  const int64_t dim = x->shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (c.opset >= 13) {
    if (const Tensor* s = c.in(1)) sizes = to_int64_vector(*s);
  } else if (auto s = c.attr_ints("split")) {
    sizes = *s;
  }
  if (sizes.empty()) {
    const int64_t n = c.opset >= 18 && c.attr("num_outputs") ? c.attr_int("num_outputs", 0)
                                                             : static_cast<int64_t>(c.num_outputs);
    if (n < 1) return c.invalid("the number of outputs is unknown; give the split sizes");
    const int64_t part = (dim + n - 1) / n;
    for (int64_t i = 0, left = dim; i < n; ++i, left -= part)
      sizes.push_back(std::max<int64_t>(0, std::min(part, left)));
    if (c.opset < 18 && dim % n != 0)
      return c.invalid("axis of size " + std::to_string(dim) + " does not split into " +
                       std::to_string(n) + " equal parts");
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return c.invalid("split sizes " + shape_to_string(sizes) + " are negative");
    total += s;
  }
  if (total != dim)
    return c.invalid("split sizes " + shape_to_string(sizes) + " do not add up to " +
                     std::to_string(dim));
  Outputs out;
  const Shape strides = strides_of(x->shape);
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape shape = x->shape;
    shape[static_cast<size_t>(axis)] = s;
    Tensor t = Tensor::zeros(x->dtype, shape);
    gather_strided(*x, strides, start * strides[static_cast<size_t>(axis)], t);
    out.push_back(std::move(t));
    start += s;
  }
  return out;
}

Result<Outputs> slice(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.attr_ints("starts").value_or(std::vector<int64_t>{});
    ends = c.attr_ints("ends").value_or(std::vector<int64_t>{});
    axes = c.attr_ints("axes").value_or(std::vector<int64_t>{});
  } else {
    NPU_ASSIGN_OR_RETURN(const Tensor* s, c.need(1));
    NPU_ASSIGN_OR_RETURN(const Tensor* e, c.need(2));
    starts = to_int64_vector(*s);
    ends = to_int64_vector(*e);
    if (const Tensor* a = c.in(3)) axes = to_int64_vector(*a);
    if (const Tensor* st = c.in(4)) steps = to_int64_vector(*st);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return c.invalid("starts, ends, axes and steps must have the same length");
  NPU_ASSIGN_OR_RETURN(axes, normalize_axes(c, axes, rank));
  Shape shape = x->shape;
  const Shape in_strides = strides_of(x->shape);
  Shape strides = in_strides;
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i]);
    const int64_t dim = x->shape[a], step = steps[i];
    if (step == 0) return c.invalid("a step is 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e = e < std::numeric_limits<int64_t>::min() + dim ? -1 : e + dim;
    if (step > 0) {
      b = std::clamp<int64_t>(b, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[a] = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = std::clamp<int64_t>(b, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      shape[a] = b > e ? (b - e + (-step) - 1) / (-step) : 0;
    }
    if (shape[a] > 0) base += b * in_strides[a];
    strides[a] = in_strides[a] * step;
  }
  Tensor out = Tensor::zeros(x->dtype, shape);
  gather_strided(*x, strides, base, out);
  return one(std::move(out));
}

// Index with numpy wrap-around of negatives; INVALID_ARGUMENT when out of range.
Result<int64_t> wrap_index(const OpContext& c, int64_t i, int64_t dim) {
  if (i < -dim || i >= dim)
    return c.invalid("index " + std::to_string(i) + " is out of range for a dimension of " +
                     std::to_string(dim));
  return i < 0 ? i + dim : i;
}

Result<Outputs> gather(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0), rank));
  const AxisSplit s = split_at(x->shape, axis);
  Shape shape(x->shape.begin(), x->shape.begin() + axis);
  shape.insert(shape.end(), idx->shape.begin(), idx->shape.end());
  shape.insert(shape.end(), x->shape.begin() + axis + 1, x->shape.end());
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  const size_t chunk = static_cast<size_t>(s.inner) * dtype_size(x->dtype);
  size_t at = 0;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i : ids) {
      NPU_ASSIGN_OR_RETURN(int64_t k, wrap_index(c, i, s.n));
      if (chunk)
        std::memcpy(out.data.data() + at, x->data.data() + static_cast<size_t>(o * s.n + k) * chunk,
                    chunk);
      at += chunk;
    }
  return one(std::move(out));
}

Result<Outputs> gather_elements(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0), rank));
  NPU_RETURN_IF_ERROR(indices_fit(c, idx->shape, x->shape, axis));
  Tensor out = Tensor::zeros(x->dtype, idx->shape);
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  const Shape xs = strides_of(x->shape);
  Shape st = xs;
  st[static_cast<size_t>(axis)] = 0;
  const size_t es = dtype_size(x->dtype);
  const int64_t dim = x->shape[static_cast<size_t>(axis)];
  Status bad = Status::ok();
  for_each_strided<1>(idx->shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    auto k = wrap_index(c, ids[static_cast<size_t>(i)], dim);
    if (!k.is_ok()) {
      bad = k.status();
      return;
    }
    std::memcpy(
        out.data.data() + static_cast<size_t>(i) * es,
        x->data.data() + static_cast<size_t>(o[0] + *k * xs[static_cast<size_t>(axis)]) * es, es);
  });
  NPU_RETURN_IF_ERROR(bad);
  return one(std::move(out));
}

Result<Outputs> gather_nd(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  const auto b = static_cast<size_t>(c.attr_int("batch_dims", 0));
  if (idx->shape.empty() || b >= idx->shape.size() || b >= x->shape.size())
    return c.invalid("indices " + shape_to_string(idx->shape) + " do not fit batch_dims " +
                     std::to_string(b));
  const auto m = static_cast<size_t>(idx->shape.back());
  if (b + m > x->shape.size()) return c.invalid("indices' last dim is larger than data's rank");
  Shape shape(idx->shape.begin(), idx->shape.end() - 1);
  shape.insert(shape.end(), x->shape.begin() + static_cast<int64_t>(b + m), x->shape.end());
  Tensor out = Tensor::zeros(x->dtype, shape);
  const Shape xs = strides_of(x->shape);
  const int64_t batch = numel(std::span<const int64_t>(x->shape).first(b));
  const int64_t tuples = numel(std::span<const int64_t>(idx->shape).first(idx->shape.size() - 1)) /
                         std::max<int64_t>(1, batch);
  const size_t chunk =
      static_cast<size_t>(numel(std::span<const int64_t>(x->shape).subspan(b + m))) *
      dtype_size(x->dtype);
  const int64_t batch_stride = b ? xs[b - 1] : 0;
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  size_t at = 0;
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = bi * batch_stride;
      for (size_t j = 0; j < m; ++j) {
        NPU_ASSIGN_OR_RETURN(
            int64_t k,
            wrap_index(c, ids[static_cast<size_t>((bi * tuples + t)) * m + j], x->shape[b + j]));
        off += k * xs[b + j];
      }
      if (chunk)
        std::memcpy(out.data.data() + at,
                    x->data.data() + static_cast<size_t>(off) * dtype_size(x->dtype), chunk);
      at += chunk;
    }
  return one(std::move(out));
}

Result<Outputs> shape_op(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  int64_t start = c.attr_int("start", 0), end = c.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  const int64_t n = std::max<int64_t>(0, end - start);
  Tensor out = Tensor::zeros(DType::kI64, {n});
  for (int64_t i = 0; i < n; ++i)
    out.as<int64_t>()[static_cast<size_t>(i)] = x->shape[static_cast<size_t>(start + i)];
  return one(std::move(out));
}

Result<Outputs> size_op(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  Tensor out = Tensor::zeros(DType::kI64, {});
  out.as<int64_t>()[0] = x->element_count();
  return one(std::move(out));
}

Result<Outputs> constant(const OpContext& c) {
  if (const Attribute* a = c.attr("value")) return one(Tensor(a->t));
  if (const Attribute* a = c.attr("value_float")) {
    Tensor t = Tensor::zeros(DType::kF32, {});
    t.as<float>()[0] = a->f;
    return one(std::move(t));
  }
  if (const Attribute* a = c.attr("value_int")) {
    Tensor t = Tensor::zeros(DType::kI64, {});
    t.as<int64_t>()[0] = a->i;
    return one(std::move(t));
  }
  if (const Attribute* a = c.attr("value_floats")) {
    Tensor t = Tensor::zeros(DType::kF32, {static_cast<int64_t>(a->floats.size())});
    std::copy(a->floats.begin(), a->floats.end(), t.as<float>().begin());
    return one(std::move(t));
  }
  if (const Attribute* a = c.attr("value_ints")) {
    Tensor t = Tensor::zeros(DType::kI64, {static_cast<int64_t>(a->ints.size())});
    std::copy(a->ints.begin(), a->ints.end(), t.as<int64_t>().begin());
    return one(std::move(t));
  }
  return c.unsupported("a Constant without value, value_float(s) or value_int(s)");
}

Result<Outputs> constant_of_shape(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* s, c.need(0));
  Tensor value = Tensor::zeros(DType::kF32, {1});
  if (const Attribute* a = c.attr("value")) {
    if (a->t.element_count() != 1) return c.invalid("value must hold one element");
    value = a->t;
  }
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, value.dtype, to_int64_vector(*s)));
  const size_t es = dtype_size(value.dtype);
  for (size_t i = 0; i + es <= out.data.size(); i += es)
    std::memcpy(out.data.data() + i, value.data.data(), es);
  return one(std::move(out));
}

Result<Outputs> expand(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* s, c.need(1));
  const Shape target = to_int64_vector(*s);
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&x->shape, &target}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  gather_strided(*x, broadcast_strides(x->shape, shape), 0, out);
  return one(std::move(out));
}

Result<Outputs> tile(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* r, c.need(1));
  const std::vector<int64_t> reps = to_int64_vector(*r);
  if (reps.size() != x->shape.size()) return c.invalid("repeats must have one value per dimension");
  Shape shape = x->shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (reps[i] < 0) return c.invalid("repeats must not be negative");
    shape[i] *= reps[i];
  }
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  const Shape xs = strides_of(x->shape);
  const size_t es = dtype_size(x->dtype), rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < out.element_count(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) off += (idx[d] % x->shape[d]) * xs[d];
    std::memcpy(out.data.data() + static_cast<size_t>(i) * es,
                x->data.data() + static_cast<size_t>(off) * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

Result<Outputs> pad(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const size_t rank = x->shape.size();
  std::vector<int64_t> pads;
  Tensor value = Tensor::zeros(x->dtype, {});
  if (c.opset < 11) {
    pads = c.attr_ints("pads").value_or(std::vector<int64_t>{});
    Tensor v = Tensor::zeros(DType::kF32, {});
    v.as<float>()[0] = c.attr_float("value", 0.0f);
    value = cast_tensor(v, x->dtype);
  } else {
    NPU_ASSIGN_OR_RETURN(const Tensor* p, c.need(1));
    pads = to_int64_vector(*p);
    if (const Tensor* v = c.in(2); v && v->element_count() > 0) value = cast_tensor(*v, x->dtype);
    if (const Tensor* a = c.in(3)) {
      NPU_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                           normalize_axes(c, to_int64_vector(*a), static_cast<int64_t>(rank)));
      if (pads.size() != 2 * axes.size()) return c.invalid("pads must have two values per axis");
      std::vector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        full[static_cast<size_t>(axes[i])] = pads[i];
        full[rank + static_cast<size_t>(axes[i])] = pads[axes.size() + i];
      }
      pads = full;
    }
  }
  if (pads.size() != 2 * rank)
    return c.invalid("pads has " + std::to_string(pads.size()) + " values, expected " +
                     std::to_string(2 * rank));
  const std::string mode = c.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.unsupported("mode '" + mode + "'");
  Shape shape = x->shape;
  for (size_t d = 0; d < rank; ++d) {
    shape[d] += pads[d] + pads[rank + d];
    if (shape[d] < 0) return c.invalid("pads " + shape_to_string(pads) + " crop below zero");
    if (mode != "constant" && x->shape[d] == 0 && shape[d] > 0)
      return c.invalid("cannot " + mode + "-pad an empty axis");
  }
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  const Shape xs = strides_of(x->shape);
  const size_t es = dtype_size(x->dtype);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < out.element_count(); ++i) {
    int64_t off = 0;
    bool outside = false;
    for (size_t d = 0; d < rank; ++d) {
      int64_t k = idx[d] - pads[d];
      const int64_t n = x->shape[d];
      if (k < 0 || k >= n) {
        if (mode == "constant") {
          outside = true;
          break;
        }
        if (mode == "edge") {
          k = std::clamp<int64_t>(k, 0, n - 1);
        } else if (mode == "wrap") {
          k = ((k % n) + n) % n;
        } else {
          const int64_t period = n > 1 ? 2 * (n - 1) : 1;
          k = ((k % period) + period) % period;
          if (k >= n) k = period - k;
        }
      }
      off += k * xs[d];
    }
    std::memcpy(out.data.data() + static_cast<size_t>(i) * es,
                outside ? value.data.data() : x->data.data() + static_cast<size_t>(off) * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return one(std::move(out));
}

// DepthToSpace (DCR or CRD) and SpaceToDepth, as a reshape-transpose-reshape.
template <bool kToSpace>
Result<Outputs> depth_space(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->shape.size() != 4) return c.invalid("input must be [N, C, H, W]");
  const int64_t b = c.attr_int("blocksize", 0);
  if (b < 1) return c.invalid("blocksize must be positive");
  const int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  Shape six, perm, final_shape;
  if (kToSpace) {
    if (C % (b * b) != 0) return c.invalid("channels are not a multiple of blocksize²");
    const bool crd = c.attr_string("mode", "DCR") == "CRD";
    six = crd ? Shape{N, C / (b * b), b, b, H, W} : Shape{N, b, b, C / (b * b), H, W};
    perm = crd ? Shape{0, 1, 4, 2, 5, 3} : Shape{0, 3, 4, 1, 5, 2};
    final_shape = {N, C / (b * b), H * b, W * b};
  } else {
    if (H % b != 0 || W % b != 0) return c.invalid("H and W must be multiples of blocksize");
    six = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    final_shape = {N, C * b * b, H / b, W / b};
  }
  const Shape st6 = strides_of(six);
  Shape shape(6), strides(6);
  for (size_t i = 0; i < 6; ++i) {
    shape[i] = six[static_cast<size_t>(perm[i])];
    strides[i] = st6[static_cast<size_t>(perm[i])];
  }
  Tensor out = Tensor::zeros(x->dtype, shape);
  gather_strided(*x, strides, 0, out);
  out.shape = final_shape;
  return one(std::move(out));
}

}  // namespace

void register_shape_ops(KernelTable& t) {
  t["Identity"] = identity;
  t["Dropout"] = dropout;
  t["Reshape"] = reshape;
  t["Flatten"] = flatten;
  t["Transpose"] = transpose;
  t["Squeeze"] = squeeze;
  t["Unsqueeze"] = unsqueeze;
  t["Concat"] = concat;
  t["Split"] = split;
  t["Slice"] = slice;
  t["Gather"] = gather;
  t["GatherElements"] = gather_elements;
  t["GatherND"] = gather_nd;
  t["Shape"] = shape_op;
  t["Size"] = size_op;
  t["Constant"] = constant;
  t["ConstantOfShape"] = constant_of_shape;
  t["Expand"] = expand;
  t["Tile"] = tile;
  t["Pad"] = pad;
  t["DepthToSpace"] = depth_space<true>;
  t["SpaceToDepth"] = depth_space<false>;
}

}  // namespace npu::host
