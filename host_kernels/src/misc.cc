// Generators, index operators and quantisation: Range, EyeLike, Trilu, OneHot, CumSum,
// NonZero, Compress, TopK, ScatterElements, ScatterND, Unique, Det, ReverseSequence,
// TfIdfVectorizer (integer pools).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "kernel.h"

namespace npu::host {
namespace {

Result<Outputs> range(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* start, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* limit, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* delta, c.need(2));
  if (start->element_count() != 1 || limit->element_count() != 1 || delta->element_count() != 1 ||
      start->dtype != limit->dtype || start->dtype != delta->dtype)
    return c.invalid("start, limit and delta must be scalars of one type");
  const double s = element_as_double(*start, 0), l = element_as_double(*limit, 0),
               d = element_as_double(*delta, 0);
  if (d == 0) return c.invalid("delta is 0");
  const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((l - s) / d)));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, start->dtype, {n}));
  visit_dtype(start->dtype, [&](auto tag) {
    using T = decltype(tag);
    auto po = out.as<T>();
    const T st = start->as<T>()[0], dl = delta->as<T>()[0];
    T v = st;
    for (auto& o : po) {
      o = v;
      v = static_cast<T>(v + dl);
    }
  });
  return one(std::move(out));
}

Result<Outputs> eye_like(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->shape.size() != 2) return c.invalid("input must be 2-D");
  DType dtype = x->dtype;
  if (c.attr("dtype")) {
    NPU_ASSIGN_OR_RETURN(dtype, dtype_from_onnx_type(c, c.attr_int("dtype", 1)));
  }
  const int64_t k = c.attr_int("k", 0);
  Tensor out = Tensor::zeros(dtype, x->shape);
  visit_dtype(dtype, [&](auto tag) {
    auto po = out.as<decltype(tag)>();
    for (int64_t i = 0; i < x->shape[0]; ++i)
      if (i + k >= 0 && i + k < x->shape[1]) po[static_cast<size_t>(i * x->shape[1] + i + k)] = 1;
  });
  return one(std::move(out));
}

Result<Outputs> trilu(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->shape.size() < 2) return c.invalid("input must have rank >= 2");
  const int64_t k = c.in(1) && c.in(1)->element_count() > 0 ? element_as_int(*c.in(1), 0) : 0;
  const bool upper = c.attr_int("upper", 1) != 0;
  const int64_t R = x->shape[x->shape.size() - 2], C = x->shape.back();
  Tensor out = *x;
  const size_t es = dtype_size(x->dtype);
  const int64_t mats = R * C != 0 ? x->element_count() / (R * C) : 0;
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep)
          std::memset(out.data.data() + static_cast<size_t>((m * R + i) * C + j) * es, 0, es);
      }
  return one(std::move(out));
}

Result<Outputs> one_hot(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* depth_t, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* values, c.need(2));
  if (depth_t->element_count() != 1 || values->element_count() != 2)
    return c.invalid("depth must be a scalar and values hold [off, on]");
  const auto depth = static_cast<int64_t>(element_as_double(*depth_t, 0));
  if (depth < 0) return c.invalid("depth is negative");
  const auto rank = static_cast<int64_t>(idx->shape.size()) + 1;
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", -1), rank));
  Shape shape = idx->shape;
  shape.insert(shape.begin() + axis, depth);
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, values->dtype, shape));
  const AxisSplit s = split_at(shape, axis);
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  const size_t es = dtype_size(values->dtype);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < depth; ++k)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t id = ids[static_cast<size_t>(o * s.inner + i)];
        if (id < 0) id += depth;
        std::memcpy(out.data.data() + static_cast<size_t>((o * depth + k) * s.inner + i) * es,
                    values->data.data() + (id == k ? es : 0), es);
      }
  return one(std::move(out));
}

Result<Outputs> cumsum(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* axis_t, c.need(1));
  if (axis_t->element_count() != 1) return c.invalid("axis must be a scalar");
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, element_as_int(*axis_t, 0),
                                                    static_cast<int64_t>(x->shape.size())));
  const bool exclusive = c.attr_int("exclusive", 0) != 0, reverse = c.attr_int("reverse", 0) != 0;
  const AxisSplit s = split_at(x->shape, axis);
  Tensor out = Tensor::zeros(x->dtype, x->shape);
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    auto px = x->as<T>();
    auto po = out.as<T>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        T acc{};
        for (int64_t j = 0; j < s.n; ++j) {
          const int64_t k = reverse ? s.n - 1 - j : j;
          const auto at = static_cast<size_t>((o * s.n + k) * s.inner + i);
          if (exclusive) {
            po[at] = acc;
            acc = wrapping_add(acc, px[at]);
          } else {
            acc = wrapping_add(acc, px[at]);
            po[at] = acc;
          }
        }
      }
  });
  return one(std::move(out));
}

Result<Outputs> non_zero(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const size_t rank = x->shape.size();
  std::vector<int64_t> hits;
  for (size_t i = 0; i < static_cast<size_t>(x->element_count()); ++i)
    if (element_as_double(*x, i) != 0) hits.push_back(static_cast<int64_t>(i));
  const auto n = static_cast<int64_t>(hits.size());
  Tensor out = Tensor::zeros(DType::kI64, {static_cast<int64_t>(rank), n});
  const Shape st = strides_of(x->shape);
  auto po = out.as<int64_t>();
  for (int64_t j = 0; j < n; ++j)
    for (size_t d = 0; d < rank; ++d)
      po[static_cast<size_t>(static_cast<int64_t>(d) * n + j)] =
          hits[static_cast<size_t>(j)] / st[d] % x->shape[d];
  return one(std::move(out));
}

Result<Outputs> compress(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* cond, c.need(1));
  Tensor flat = *x;
  int64_t axis = 0;
  if (c.attr("axis")) {
    NPU_ASSIGN_OR_RETURN(
        axis, normalize_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(x->shape.size())));
  } else {
    flat.shape = {x->element_count()};
  }
  const AxisSplit s = split_at(flat.shape, axis);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < std::min(s.n, cond->element_count()); ++i)
    if (element_as_int(*cond, static_cast<size_t>(i)) != 0) keep.push_back(i);
  Shape shape = flat.shape;
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor out = Tensor::zeros(x->dtype, shape);
  const size_t chunk = static_cast<size_t>(s.inner) * dtype_size(x->dtype);
  size_t at = 0;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k : keep) {
      std::memcpy(out.data.data() + at, flat.data.data() + static_cast<size_t>(o * s.n + k) * chunk,
                  chunk);
      at += chunk;
    }
  return one(std::move(out));
}

Result<Outputs> top_k(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  int64_t k = c.attr_int("k", -1);
  if (c.opset >= 10) {
    NPU_ASSIGN_OR_RETURN(const Tensor* kt, c.need(1));
    if (kt->element_count() != 1) return c.invalid("K must hold one value");
    k = element_as_int(*kt, 0);
  }
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", -1),
                                                    static_cast<int64_t>(x->shape.size())));
  const bool largest = c.attr_int("largest", 1) != 0;
  const AxisSplit s = split_at(x->shape, axis);
  if (k < 0 || k > s.n)
    return c.invalid("K " + std::to_string(k) + " is out of range for an axis of " +
                     std::to_string(s.n));
  Shape shape = x->shape;
  shape[static_cast<size_t>(axis)] = k;
  Tensor values = Tensor::zeros(x->dtype, shape), indices = Tensor::zeros(DType::kI64, shape);
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    auto px = x->as<T>();
    auto pv = values.as<T>();
    auto pi = indices.as<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        auto at = [&](int64_t j) { return px[static_cast<size_t>((o * s.n + j) * s.inner + i)]; };
        std::iota(order.begin(), order.end(), 0);
        // Ties keep the lower index first, as ONNX specifies.
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? at(a) > at(b) : at(a) < at(b);
        });
        for (int64_t j = 0; j < k; ++j) {
          const auto dst = static_cast<size_t>((o * k + j) * s.inner + i);
          pv[dst] = at(order[static_cast<size_t>(j)]);
          pi[dst] = order[static_cast<size_t>(j)];
        }
      }
  });
  Outputs out;
  out.push_back(std::move(values));
  out.push_back(std::move(indices));
  return out;
}

// Combines an updated element with the existing one (the `reduction` attribute, opset 16).
template <typename T>
T combine(const std::string& reduction, T old, T upd) {
  if (reduction == "add") return wrapping_add(old, upd);
  if (reduction == "mul") return wrapping_mul(old, upd);
  if (reduction == "max") return std::max(old, upd);
  if (reduction == "min") return std::min(old, upd);
  return upd;
}

Status check_reduction(const OpContext& c, const std::string& r) {
  if (r == "none" || r == "add" || r == "mul" || r == "max" || r == "min") return Status::ok();
  return c.unsupported("reduction '" + r + "'");
}

Result<Outputs> scatter_elements(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* upd, c.need(2));
  if (idx->shape != upd->shape || idx->shape.size() != x->shape.size() || upd->dtype != x->dtype)
    return c.invalid("indices and updates must have one shape and data's rank and type");
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0),
                                                    static_cast<int64_t>(x->shape.size())));
  NPU_RETURN_IF_ERROR(indices_fit(c, idx->shape, x->shape, axis));
  const std::string reduction = c.attr_string("reduction", "none");
  NPU_RETURN_IF_ERROR(check_reduction(c, reduction));
  Tensor out = *x;
  const Shape xs = strides_of(x->shape);
  Shape st = xs;
  st[static_cast<size_t>(axis)] = 0;
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  const int64_t dim = x->shape[static_cast<size_t>(axis)];
  Status bad = Status::ok();
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    auto po = out.as<T>();
    auto pu = upd->as<T>();
    for_each_strided<1>(idx->shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
      int64_t k = ids[static_cast<size_t>(i)];
      if (k < -dim || k >= dim) {
        bad = c.invalid("index " + std::to_string(k) + " is out of range");
        return;
      }
      if (k < 0) k += dim;
      T& dst = po[static_cast<size_t>(o[0] + k * xs[static_cast<size_t>(axis)])];
      dst = combine(reduction, dst, pu[static_cast<size_t>(i)]);
    });
  });
  NPU_RETURN_IF_ERROR(bad);
  return one(std::move(out));
}

Result<Outputs> scatter_nd(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* upd, c.need(2));
  if (idx->shape.empty() || upd->dtype != x->dtype) return c.invalid("bad indices or updates");
  const auto m = static_cast<size_t>(idx->shape.back());
  if (m > x->shape.size()) return c.invalid("indices' last dim exceeds data's rank");
  const std::string reduction = c.attr_string("reduction", "none");
  NPU_RETURN_IF_ERROR(check_reduction(c, reduction));
  const int64_t tuples = numel(std::span<const int64_t>(idx->shape).first(idx->shape.size() - 1));
  const int64_t slice = numel(std::span<const int64_t>(x->shape).subspan(m));
  if (upd->element_count() != tuples * slice) return c.invalid("updates have the wrong shape");
  Tensor out = *x;
  const Shape xs = strides_of(x->shape);
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  Status bad = Status::ok();
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    auto po = out.as<T>();
    auto pu = upd->as<T>();
    for (int64_t t = 0; t < tuples && bad.is_ok(); ++t) {
      int64_t off = 0;
      for (size_t j = 0; j < m; ++j) {
        int64_t k = ids[static_cast<size_t>(t) * m + j];
        const int64_t dim = x->shape[j];
        if (k < -dim || k >= dim)
          bad = c.invalid("index " + std::to_string(k) + " is out of range");
        if (k < 0) k += dim;
        off += k * xs[j];
      }
      if (!bad.is_ok()) break;
      for (int64_t e = 0; e < slice; ++e) {
        T& dst = po[static_cast<size_t>(off + e)];
        dst = combine(reduction, dst, pu[static_cast<size_t>(t * slice + e)]);
      }
    }
  });
  NPU_RETURN_IF_ERROR(bad);
  return one(std::move(out));
}

Result<Outputs> unique(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const bool sorted = c.attr_int("sorted", 1) != 0;
  Shape shape = x->shape;
  int64_t axis = 0;
  if (c.attr("axis")) {
    NPU_ASSIGN_OR_RETURN(
        axis, normalize_axis(c, c.attr_int("axis", 0), static_cast<int64_t>(shape.size())));
  } else {
    shape = {x->element_count()};
  }
  // Slices along `axis`, as vectors of doubles for comparison.
  const AxisSplit s = split_at(shape, axis);
  std::vector<std::vector<double>> slices(static_cast<size_t>(s.n));
  for (int64_t k = 0; k < s.n; ++k)
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i)
        slices[static_cast<size_t>(k)].push_back(
            element_as_double(*x, static_cast<size_t>((o * s.n + k) * s.inner + i)));
  std::vector<int64_t> firsts;  // first occurrence of each distinct slice, in order of appearance
  std::vector<int64_t> which(static_cast<size_t>(s.n));
  for (int64_t k = 0; k < s.n; ++k) {
    int64_t found = -1;
    for (size_t u = 0; u < firsts.size() && found < 0; ++u)
      if (slices[static_cast<size_t>(firsts[u])] == slices[static_cast<size_t>(k)])
        found = static_cast<int64_t>(u);
    if (found < 0) {
      found = static_cast<int64_t>(firsts.size());
      firsts.push_back(k);
    }
    which[static_cast<size_t>(k)] = found;
  }
  std::vector<int64_t> order(firsts.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted)
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return slices[static_cast<size_t>(firsts[static_cast<size_t>(a)])] <
             slices[static_cast<size_t>(firsts[static_cast<size_t>(b)])];
    });
  std::vector<int64_t> rank_of(order.size());
  for (size_t r = 0; r < order.size(); ++r)
    rank_of[static_cast<size_t>(order[r])] = static_cast<int64_t>(r);
  const auto u = static_cast<int64_t>(order.size());
  Shape yshape = shape;
  yshape[static_cast<size_t>(axis)] = u;
  Tensor y = Tensor::zeros(x->dtype, yshape), first = Tensor::zeros(DType::kI64, {u}),
         inverse = Tensor::zeros(DType::kI64, {s.n}), counts = Tensor::zeros(DType::kI64, {u});
  const size_t es = dtype_size(x->dtype);
  for (int64_t r = 0; r < u; ++r) {
    const int64_t k = firsts[static_cast<size_t>(order[static_cast<size_t>(r)])];
    first.as<int64_t>()[static_cast<size_t>(r)] = k;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(y.data.data() + static_cast<size_t>((o * u + r) * s.inner) * es,
                  x->data.data() + static_cast<size_t>((o * s.n + k) * s.inner) * es,
                  static_cast<size_t>(s.inner) * es);
  }
  for (int64_t k = 0; k < s.n; ++k) {
    const int64_t r = rank_of[static_cast<size_t>(which[static_cast<size_t>(k)])];
    inverse.as<int64_t>()[static_cast<size_t>(k)] = r;
    ++counts.as<int64_t>()[static_cast<size_t>(r)];
  }
  Outputs out;
  out.push_back(std::move(y));
  out.push_back(std::move(first));
  out.push_back(std::move(inverse));
  out.push_back(std::move(counts));
  return out;
}

// Determinant of [..., M, M] by LU decomposition with partial pivoting.
Result<Outputs> det(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->dtype != DType::kF32) return c.unsupported("non-float input");
  const size_t rank = x->shape.size();
  if (rank < 2 || x->shape[rank - 1] != x->shape[rank - 2])
    return c.invalid("input must be [..., M, M]");
  const int64_t M = x->shape.back();
  Tensor out = Tensor::zeros(DType::kF32, Shape(x->shape.begin(), x->shape.end() - 2));
  std::vector<double> a(static_cast<size_t>(M * M));
  for (size_t m = 0; m < out.as<float>().size(); ++m) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = x->as<float>()[m * a.size() + i];
    double d = 1;
    for (int64_t col = 0; col < M && d != 0; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < M; ++r)
        if (std::fabs(a[static_cast<size_t>(r * M + col)]) >
            std::fabs(a[static_cast<size_t>(piv * M + col)]))
          piv = r;
      if (a[static_cast<size_t>(piv * M + col)] == 0) {
        d = 0;
        break;
      }
      if (piv != col) {
        for (int64_t k = 0; k < M; ++k)
          std::swap(a[static_cast<size_t>(piv * M + k)], a[static_cast<size_t>(col * M + k)]);
        d = -d;
      }
      const double p = a[static_cast<size_t>(col * M + col)];
      d *= p;
      for (int64_t r = col + 1; r < M; ++r) {
        const double f = a[static_cast<size_t>(r * M + col)] / p;
        for (int64_t k = col; k < M; ++k)
          a[static_cast<size_t>(r * M + k)] -= f * a[static_cast<size_t>(col * M + k)];
      }
    }
    out.as<float>()[m] = static_cast<float>(d);
  }
  return one(std::move(out));
}

Result<Outputs> reverse_sequence(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* lens_t, c.need(1));
  const int64_t batch_axis = c.attr_int("batch_axis", 1), time_axis = c.attr_int("time_axis", 0);
  if (x->shape.size() < 2 ||
      !((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return c.invalid("batch_axis and time_axis must be 0 and 1 (either way) of a rank >= 2 input");
  const int64_t B = x->shape[static_cast<size_t>(batch_axis)],
                T = x->shape[static_cast<size_t>(time_axis)];
  const std::vector<int64_t> lens = to_int64_vector(*lens_t);
  if (static_cast<int64_t>(lens.size()) != B)
    return c.invalid("sequence_lens must have one value per batch");
  Tensor out = *x;
  const Shape st = strides_of(x->shape);
  const size_t es = dtype_size(x->dtype), inner = static_cast<size_t>(st[1]) * es;
  if (inner == 0) return one(std::move(out));  // empty rows: nothing to move (data() may be null)
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = std::clamp<int64_t>(lens[static_cast<size_t>(b)], 0, T);
    for (int64_t t = 0; t < len; ++t) {
      auto at = [&](int64_t tt) {
        return static_cast<size_t>(batch_axis == 0 ? b * st[0] + tt * st[1]
                                                   : tt * st[0] + b * st[1]) *
               es;
      };
      std::memcpy(out.data.data() + at(t), x->data.data() + at(len - 1 - t), inner);
    }
  }
  return one(std::move(out));
}

Result<Outputs> tfidf_vectorizer(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->dtype != DType::kI64 && x->dtype != DType::kI32)
    return c.unsupported("non-integer (string) input");
  if (x->shape.empty() || x->shape.size() > 2) return c.invalid("input must be [N] or [B, N]");
  const int64_t min_n = c.attr_int("min_gram_length", 1), max_n = c.attr_int("max_gram_length", 1),
                max_skip = c.attr_int("max_skip_count", 0);
  const std::string mode = c.attr_string("mode", "TF");
  const std::vector<int64_t> counts = c.attr_ints("ngram_counts").value_or(Shape{});
  const std::vector<int64_t> indexes = c.attr_ints("ngram_indexes").value_or(Shape{});
  const std::vector<int64_t> pool = c.attr_ints("pool_int64s").value_or(Shape{});
  const Attribute* weights = c.attr("weights");
  if (min_n < 1 || max_n < min_n || max_skip < 0 || static_cast<int64_t>(counts.size()) < max_n)
    return c.invalid("gram lengths, max_skip_count and ngram_counts do not agree");
  // Pool position p of each gram, per length.
  std::map<std::vector<int64_t>, int64_t> grams;
  int64_t p = 0;
  for (size_t n = 1; n <= counts.size(); ++n) {
    const int64_t begin = counts[n - 1],
                  end = n < counts.size() ? counts[n] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end > static_cast<int64_t>(pool.size()) || begin > end)
      return c.invalid("ngram_counts is out of range");
    for (int64_t i = begin; i + static_cast<int64_t>(n) <= end; i += static_cast<int64_t>(n), ++p)
      grams[std::vector<int64_t>(pool.begin() + i, pool.begin() + i + static_cast<int64_t>(n))] = p;
  }
  if (static_cast<int64_t>(indexes.size()) < p)
    return c.invalid("ngram_indexes is shorter than the pool");
  int64_t width = 0;
  for (int64_t v : indexes) {
    if (v < 0) return c.invalid("ngram_indexes holds a negative index");
    width = std::max(width, v + 1);
  }
  const bool batched = x->shape.size() == 2;
  const int64_t rows = batched ? x->shape[0] : 1, len = x->shape.back();
  NPU_ASSIGN_OR_RETURN(Tensor out,
                       new_tensor(c, DType::kF32, batched ? Shape{rows, width} : Shape{width}));
  const std::vector<int64_t> v = to_int64_vector(*x);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> tf(static_cast<size_t>(width), 0.0);
    const int64_t* row = v.data() + r * len;
    for (int64_t n = min_n; n <= max_n; ++n)
      for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip) && (n - 1) * skip < len; ++skip)
        for (int64_t i = 0; i + (n - 1) * (skip + 1) < len; ++i) {
          std::vector<int64_t> g;
          for (int64_t k = 0; k < n; ++k) g.push_back(row[i + k * (skip + 1)]);
          auto it = grams.find(g);
          if (it != grams.end())
            tf[static_cast<size_t>(indexes[static_cast<size_t>(it->second)])] += 1;
        }
    for (auto [gram, pos] : grams) {
      const auto col = static_cast<size_t>(indexes[static_cast<size_t>(pos)]);
      const double w = weights && static_cast<size_t>(pos) < weights->floats.size()
                           ? weights->floats[static_cast<size_t>(pos)]
                           : 1.0;
      double value = tf[col];
      if (mode == "IDF")
        value = value > 0 ? w : 0;
      else if (mode == "TFIDF")
        value *= w;
      out.as<float>()[static_cast<size_t>(r * width) + col] = static_cast<float>(value);
    }
  }
  return one(std::move(out));
}

}  // namespace

void register_misc(KernelTable& t) {
  t["Range"] = range;
  t["EyeLike"] = eye_like;
  t["Trilu"] = trilu;
  t["OneHot"] = one_hot;
  t["CumSum"] = cumsum;
  t["NonZero"] = non_zero;
  t["Compress"] = compress;
  t["TopK"] = top_k;
  t["ScatterElements"] = scatter_elements;
  t["Scatter"] = scatter_elements;
  t["ScatterND"] = scatter_nd;
  t["Unique"] = unique;
  t["Det"] = det;
  t["ReverseSequence"] = reverse_sequence;
  t["TfIdfVectorizer"] = tfidf_vectorizer;
}

}  // namespace npu::host
