// Sliding-window operators over N-D spatial dims (input [N, C, D1, ...]): Conv, ConvInteger,
// ConvTranspose, MaxPool, AveragePool, LpPool and the global pools. One geometry helper
// (auto_pad, pads, strides, dilations, ceil_mode) and one window table serve them all.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

// Bound on kernel sizes, strides, pads and dilations: keeps the geometry in int64.
constexpr int64_t kMaxSpatial = int64_t{1} << 31;

struct Geometry {
  Shape in, kernel, strides, dilations, pads_begin, pads_end, out;  // spatial dims only
};

// Reads an ints attribute of `rank` values, or `fallback` for each when absent.
Result<Shape> spatial_attr(const OpContext& c, const std::string& key, size_t rank,
                           int64_t fallback, int64_t min_value) {
  Shape v(rank, fallback);
  if (auto a = c.attr_ints(key)) {
    if (a->size() != rank)
      return c.invalid(key + " has " + std::to_string(a->size()) + " values, expected " +
                       std::to_string(rank));
    v = *a;
  }
  for (int64_t x : v)
    if (x < min_value || x > kMaxSpatial)
      return c.invalid(key + " " + shape_to_string(v) + " has a value outside [" +
                       std::to_string(min_value) + ", 2^31]");
  return v;
}

// Output geometry of a convolution or pooling window over `in` (spatial dims).
Result<Geometry> window_geometry(const OpContext& c, const Shape& in, const Shape& kernel) {
  const size_t rank = in.size();
  Geometry g;
  g.in = in;
  g.kernel = kernel;
  NPU_ASSIGN_OR_RETURN(g.strides, spatial_attr(c, "strides", rank, 1, 1));
  NPU_ASSIGN_OR_RETURN(g.dilations, spatial_attr(c, "dilations", rank, 1, 1));
  NPU_ASSIGN_OR_RETURN(Shape pads, spatial_attr(c, "pads", 2 * rank, 0, 0));
  g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  g.pads_end.assign(pads.begin() + static_cast<int64_t>(rank), pads.end());
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  g.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (kernel[i] < 1 || kernel[i] > kMaxSpatial)
      return c.invalid("kernel_shape " + shape_to_string(kernel) + " must be positive");
    const int64_t span = (kernel[i] - 1) * g.dilations[i] + 1, s = g.strides[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = (in[i] + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (g.out[i] - 1) * s + span - in[i]);
      const int64_t small = total / 2, big = total - small;
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
      g.pads_end[i] = auto_pad == "SAME_UPPER" ? big : small;
    } else if (auto_pad == "VALID") {
      g.pads_begin[i] = g.pads_end[i] = 0;
      g.out[i] = in[i] >= span ? (in[i] - span) / s + 1 : 0;
    } else if (auto_pad == "NOTSET") {
      const int64_t padded = in[i] + g.pads_begin[i] + g.pads_end[i] - span;
      if (padded < 0) return c.invalid("the window is larger than the padded input");
      g.out[i] = (ceil_mode ? (padded + s - 1) / s : padded / s) + 1;
      // A window may not start in the end padding (the rule of PyTorch and onnxruntime).
      if (ceil_mode && (g.out[i] - 1) * s >= in[i] + g.pads_begin[i]) --g.out[i];
    } else {
      return c.invalid("auto_pad '" + auto_pad +
                       "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
    }
  }
  // The window table holds one entry per output position and kernel offset.
  if (static_cast<double>(numel(g.out)) * static_cast<double>(numel(kernel)) > 1 << 28)
    return c.invalid("output " + shape_to_string(g.out) + " with kernel " +
                     shape_to_string(kernel) + " is too large for the host");
  return g;
}

constexpr int64_t kPad = -1;     // inside the explicit padding
constexpr int64_t kBeyond = -2;  // past the end padding (ceil_mode windows)

// For every position p of `from` and kernel offset k: the flat index into `to` of
// p·stride + k·dilation − pad_begin, or kPad / kBeyond. Convolution and pooling map output
// positions to the input; ConvTranspose maps input positions to the output.
std::vector<int64_t> window_table(const Shape& from, const Shape& to, const Geometry& g) {
  const size_t rank = from.size();
  const int64_t nf = numel(from), nk = numel(g.kernel);
  std::vector<int64_t> table(static_cast<size_t>(nf * nk));
  const Shape to_strides = strides_of(to);
  std::vector<int64_t> p(rank, 0);
  for (int64_t fp = 0; fp < nf; ++fp) {
    std::vector<int64_t> k(rank, 0);
    for (int64_t kk = 0; kk < nk; ++kk) {
      int64_t idx = 0, state = 0;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t coord = p[d] * g.strides[d] + k[d] * g.dilations[d] - g.pads_begin[d];
        if (coord < 0 || coord >= to[d])
          state = std::min(state, coord < to[d] + g.pads_end[d] ? kPad : kBeyond);
        idx += coord * to_strides[d];
      }
      table[static_cast<size_t>(fp * nk + kk)] = state < 0 ? state : idx;
      for (size_t d = rank; d-- > 0;) {
        if (++k[d] < g.kernel[d]) break;
        k[d] = 0;
      }
    }
    for (size_t d = rank; d-- > 0;) {
      if (++p[d] < from[d]) break;
      p[d] = 0;
    }
  }
  return table;
}

Result<Shape> spatial_of(const OpContext& c, const Tensor& x) {
  if (x.shape.size() < 3)
    return c.invalid("input " + shape_to_string(x.shape) + " must be [N, C, D1, ...]");
  return Shape(x.shape.begin() + 2, x.shape.end());
}

// Kernel shape from the attribute, else from the weight's trailing dims.
Result<Shape> kernel_shape(const OpContext& c, const Tensor& w, size_t rank) {
  if (auto k = c.attr_ints("kernel_shape")) {
    if (k->size() != rank) return c.invalid("kernel_shape has the wrong rank");
    if (w.shape.size() == rank + 2 && !std::equal(k->begin(), k->end(), w.shape.begin() + 2))
      return c.invalid("kernel_shape " + shape_to_string(*k) + " disagrees with W " +
                       shape_to_string(w.shape));
    return *k;
  }
  return Shape(w.shape.begin() + 2, w.shape.end());
}

// Per image and group: im2col (padding reads as zero), then W[Mg, Cg·K] · col[Cg·K, out].
template <typename T>
void conv_kernel(const Tensor& x, const Tensor& w, const Tensor* b, const Geometry& g,
                 int64_t group, Tensor& y) {
  const std::vector<int64_t> table = window_table(g.out, g.in, g);
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], Cg = C / group, Mg = M / group;
  const int64_t in_size = numel(g.in), out_size = numel(g.out), K = numel(g.kernel);
  const T* px = x.as<T>().data();
  const T* pw = w.as<T>().data();
  T* py = y.as<T>().data();
  std::vector<T> col(static_cast<size_t>(Cg * K * out_size));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < group; ++gi) {
      for (int64_t ic = 0; ic < Cg; ++ic) {
        const T* xc = px + (n * C + gi * Cg + ic) * in_size;
        for (int64_t k = 0; k < K; ++k) {
          T* dst = col.data() + (ic * K + k) * out_size;
          for (int64_t p = 0; p < out_size; ++p) {
            const int64_t idx = table[static_cast<size_t>(p * K + k)];
            dst[p] = idx >= 0 ? xc[idx] : T{0};
          }
        }
      }
      T* out = py + (n * M + gi * Mg) * out_size;
      for (int64_t m = 0; m < Mg; ++m)
        std::fill_n(out + m * out_size, out_size,
                    b ? b->as<T>()[static_cast<size_t>(gi * Mg + m)] : T{0});
      matmul_2d<T>(pw + gi * Mg * Cg * K, Cg * K, 1, col.data(), out_size, 1, out, Mg, Cg * K,
                   out_size);
    }
}

Result<Outputs> conv(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* w, c.need(1));
  if (x->dtype != DType::kF32 || w->dtype != DType::kF32)
    return c.unsupported("non-float operands");
  NPU_ASSIGN_OR_RETURN(Tensor y, conv_tensors(c, *x, *w, c.in(2)));
  return one(std::move(y));
}

Result<Outputs> conv_integer(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* w, c.need(1));
  const Tensor* xzp = c.in(2);
  if (xzp && xzp->element_count() > 1) return c.unsupported("a per-channel x_zero_point");
  NPU_ASSIGN_OR_RETURN(Tensor x32, minus_zero_point(c, *x, xzp, 1));
  NPU_ASSIGN_OR_RETURN(Tensor w32, minus_zero_point(c, *w, c.in(3), 0));
  NPU_ASSIGN_OR_RETURN(Tensor y, conv_tensors(c, x32, w32, nullptr));
  return one(std::move(y));
}

Result<Outputs> conv_transpose(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* w, c.need(1));
  const Tensor* b = c.in(2);
  if (x->dtype != DType::kF32 || w->dtype != DType::kF32)
    return c.unsupported("non-float operands");
  NPU_ASSIGN_OR_RETURN(Shape in, spatial_of(c, *x));
  const size_t rank = in.size();
  const int64_t group = c.attr_int("group", 1), C = x->shape[1];
  if (w->shape.size() != x->shape.size() || group < 1 || w->shape[0] != C || C % group != 0)
    return c.invalid("X " + shape_to_string(x->shape) + ", W " + shape_to_string(w->shape) +
                     " and group " + std::to_string(group) + " do not agree");
  const int64_t Mg = w->shape[1], M = Mg * group, Cg = C / group;
  if (b && b->element_count() != M)
    return c.invalid("B must have " + std::to_string(M) + " values");
  NPU_ASSIGN_OR_RETURN(Shape kernel, kernel_shape(c, *w, rank));
  Geometry g;
  g.kernel = kernel;
  NPU_ASSIGN_OR_RETURN(g.strides, spatial_attr(c, "strides", rank, 1, 1));
  NPU_ASSIGN_OR_RETURN(g.dilations, spatial_attr(c, "dilations", rank, 1, 1));
  NPU_ASSIGN_OR_RETURN(Shape pads, spatial_attr(c, "pads", 2 * rank, 0, 0));
  NPU_ASSIGN_OR_RETURN(Shape out_pad, spatial_attr(c, "output_padding", rank, 0, 0));
  const std::string auto_pad = c.attr_string("auto_pad", "NOTSET");
  std::optional<Shape> out_shape_attr = c.attr_ints("output_shape");
  if (out_shape_attr && out_shape_attr->size() == rank + 2)
    out_shape_attr = Shape(out_shape_attr->begin() + 2, out_shape_attr->end());
  if (out_shape_attr && out_shape_attr->size() != rank)
    return c.invalid("output_shape has the wrong rank");
  g.in = in;
  g.pads_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  g.pads_end.assign(pads.begin() + static_cast<int64_t>(rank), pads.end());
  g.out.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t full =
        g.strides[i] * (in[i] - 1) + out_pad[i] + (kernel[i] - 1) * g.dilations[i] + 1;
    if (out_shape_attr || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = out_shape_attr ? (*out_shape_attr)[i] : in[i] * g.strides[i];
      const int64_t total = std::max<int64_t>(0, full - g.out[i]);
      const bool upper = auto_pad == "SAME_UPPER";
      g.pads_begin[i] = upper ? total / 2 : total - total / 2;
      g.pads_end[i] = total - g.pads_begin[i];
    } else {
      if (auto_pad == "VALID") g.pads_begin[i] = g.pads_end[i] = 0;
      g.out[i] = full - g.pads_begin[i] - g.pads_end[i];
    }
    if (g.out[i] < 0) return c.invalid("the output would have a negative size");
  }
  Shape out_shape{x->shape[0], M};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  NPU_ASSIGN_OR_RETURN(Tensor y, new_tensor(c, DType::kF32, out_shape));
  // Scatter: input position p with kernel offset k lands on p·s + k·d − pad_begin.
  const std::vector<int64_t> table = window_table(g.in, g.out, g);
  const int64_t N = x->shape[0], in_size = numel(g.in), out_size = numel(g.out), K = numel(kernel);
  const float* px = x->as<float>().data();
  const float* pw = w->as<float>().data();
  float* py = y.as<float>().data();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < group; ++gi)
      for (int64_t ic = 0; ic < Cg; ++ic) {
        const float* xc = px + (n * C + gi * Cg + ic) * in_size;
        for (int64_t om = 0; om < Mg; ++om) {
          const float* wc = pw + ((gi * Cg + ic) * Mg + om) * K;
          float* yc = py + (n * M + gi * Mg + om) * out_size;
          for (int64_t p = 0; p < in_size; ++p) {
            const int64_t* row = table.data() + p * K;
            for (int64_t k = 0; k < K; ++k)
              if (row[k] >= 0) yc[row[k]] += xc[p] * wc[k];
          }
        }
      }
  if (b) {
    const std::vector<float> bias = to_float_vector(*b);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t p = 0; p < out_size; ++p)
          py[(n * M + m) * out_size + p] += bias[static_cast<size_t>(m)];
  }
  return one(std::move(y));
}

enum class PoolKind { kMax, kAverage, kLp };

// Flat index of a spatial index in column-major order (MaxPool storage_order = 1).
int64_t column_major(int64_t idx, const Shape& dims) {
  const Shape st = strides_of(dims);
  int64_t out = 0, mul = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    out += (idx / st[d] % dims[d]) * mul;
    mul *= dims[d];
  }
  return out;
}

template <PoolKind kKind>
Result<Outputs> pool(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* xp, c.need(0));
  NPU_ASSIGN_OR_RETURN(Shape in, spatial_of(c, *xp));
  auto k = c.attr_ints("kernel_shape");
  if (!k) return c.invalid("kernel_shape is required");
  if (k->size() != in.size()) return c.invalid("kernel_shape has the wrong rank");
  NPU_ASSIGN_OR_RETURN(Geometry g, window_geometry(c, in, *k));
  if (kKind != PoolKind::kMax && xp->dtype != DType::kF32) return c.unsupported("non-float input");
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  const int64_t storage_order = c.attr_int("storage_order", 0);
  const float p_norm = static_cast<float>(c.attr_int("p", 2));
  const std::vector<int64_t> table = window_table(g.out, g.in, g);
  Shape out_shape{xp->shape[0], xp->shape[1]};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  NPU_ASSIGN_OR_RETURN(Tensor y, new_tensor(c, xp->dtype, out_shape));
  Tensor indices = Tensor::zeros(DType::kI64, kKind == PoolKind::kMax ? out_shape : Shape{0});
  const int64_t planes = xp->shape[0] * xp->shape[1], in_size = numel(in), out_size = numel(g.out),
                K = numel(g.kernel);
  visit_dtype(xp->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = xp->as<T>().data();
    T* py = y.as<T>().data();
    auto pi = indices.as<int64_t>();
    for (int64_t pl = 0; pl < planes; ++pl)
      for (int64_t p = 0; p < out_size; ++p) {
        const int64_t* row = table.data() + p * K;
        const T* xc = px + pl * in_size;
        const size_t o = static_cast<size_t>(pl * out_size + p);
        if constexpr (kKind == PoolKind::kMax) {
          T best = std::numeric_limits<T>::lowest();
          int64_t arg = -1;
          for (int64_t kk = 0; kk < K; ++kk)
            if (row[kk] >= 0 && (arg < 0 || xc[row[kk]] > best)) best = xc[row[kk]], arg = row[kk];
          py[o] = best;
          if (arg >= 0) pi[o] = pl * in_size + (storage_order ? column_major(arg, in) : arg);
        } else {
          double sum = 0;
          int64_t count = 0;
          for (int64_t kk = 0; kk < K; ++kk) {
            if (row[kk] >= 0) {
              const double v = static_cast<double>(xc[row[kk]]);
              sum +=
                  kKind == PoolKind::kLp ? std::pow(std::fabs(v), static_cast<double>(p_norm)) : v;
              ++count;
            } else if (row[kk] == kPad && include_pad) {
              ++count;
            }
          }
          if constexpr (kKind == PoolKind::kLp)
            py[o] = static_cast<T>(std::pow(sum, 1.0 / static_cast<double>(p_norm)));
          else
            py[o] = static_cast<T>(count ? sum / static_cast<double>(count) : 0.0);
        }
      }
  });
  Outputs out;
  out.push_back(std::move(y));
  if (kKind == PoolKind::kMax) out.push_back(std::move(indices));
  return out;
}

template <PoolKind kKind>
Result<Outputs> global_pool(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(Shape in, spatial_of(c, *x));
  if (x->dtype != DType::kF32) return c.unsupported("non-float input");
  Shape out_shape{x->shape[0], x->shape[1]};
  out_shape.resize(x->shape.size(), 1);
  Tensor y = Tensor::zeros(DType::kF32, out_shape);
  const int64_t n = numel(in);
  const double p = static_cast<double>(c.attr_int("p", 2));
  auto px = x->as<float>();
  auto py = y.as<float>();
  for (size_t pl = 0; pl < py.size(); ++pl) {
    const float* xc = px.data() + static_cast<int64_t>(pl) * n;
    double acc = kKind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = xc[i];
      if constexpr (kKind == PoolKind::kMax)
        acc = std::max(acc, v);
      else if constexpr (kKind == PoolKind::kLp)
        acc += std::pow(std::fabs(v), p);
      else
        acc += v;
    }
    if constexpr (kKind == PoolKind::kAverage) acc /= static_cast<double>(std::max<int64_t>(1, n));
    if constexpr (kKind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p);
    py[pl] = static_cast<float>(acc);
  }
  return one(std::move(y));
}

}  // namespace

Result<Tensor> conv_tensors(const OpContext& c, const Tensor& x, const Tensor& w, const Tensor* b) {
  NPU_ASSIGN_OR_RETURN(Shape in, spatial_of(c, x));
  if (w.shape.size() != x.shape.size())
    return c.invalid("W " + shape_to_string(w.shape) + " must have the rank of X " +
                     shape_to_string(x.shape));
  const int64_t group = c.attr_int("group", 1);
  const int64_t C = x.shape[1], M = w.shape[0];
  if (group < 1 || C % group != 0 || M % group != 0 || w.shape[1] * group != C)
    return c.invalid("X has " + std::to_string(C) + " channels, W " + shape_to_string(w.shape) +
                     ", group " + std::to_string(group) + ": they do not agree");
  if (b && (b->element_count() != M || b->dtype != x.dtype))
    return c.invalid("B must have " + std::to_string(M) + " values of X's type");
  NPU_ASSIGN_OR_RETURN(Shape kernel, kernel_shape(c, w, in.size()));
  NPU_ASSIGN_OR_RETURN(Geometry g, window_geometry(c, in, kernel));
  Shape out_shape{x.shape[0], M};
  out_shape.insert(out_shape.end(), g.out.begin(), g.out.end());
  NPU_ASSIGN_OR_RETURN(Tensor y, new_tensor(c, x.dtype, out_shape));
  if (x.dtype == DType::kF32)
    conv_kernel<float>(x, w, b, g, group, y);
  else
    conv_kernel<int32_t>(x, w, b, g, group, y);
  return y;
}

void register_spatial(KernelTable& t) {
  t["Conv"] = conv;
  t["ConvInteger"] = conv_integer;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = pool<PoolKind::kMax>;
  t["AveragePool"] = pool<PoolKind::kAverage>;
  t["LpPool"] = pool<PoolKind::kLp>;
  t["GlobalMaxPool"] = global_pool<PoolKind::kMax>;
  t["GlobalAveragePool"] = global_pool<PoolKind::kAverage>;
  t["GlobalLpPool"] = global_pool<PoolKind::kLp>;
}

}  // namespace npu::host
