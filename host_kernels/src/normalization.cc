// Normalisation and softmax-like operators: BatchNormalization (inference and training mode),
// InstanceNormalization, LayerNormalization, MeanVarianceNormalization, LRN, Softmax,
// LogSoftmax, Hardmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

Result<const Tensor*> float_input(const OpContext& c, size_t k) {
  NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(k));
  if (t->dtype != DType::kF32)
    return c.unsupported("input " + std::to_string(k) + " of type " +
                         std::string(dtype_name(t->dtype)));
  return t;
}

// Per-channel parameter vectors (scale, bias, mean, var) of `count` values.
Result<std::vector<float>> channel_param(const OpContext& c, size_t k, int64_t count) {
  NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(k));
  if (t->element_count() != count)
    return c.invalid("input " + std::to_string(k) + " has shape " + shape_to_string(t->shape) +
                     ", expected " + std::to_string(count) + " values (one per channel)");
  return to_float_vector(*t);
}

// Mean and (population) variance of x over `axes`, in keepdims layout.
void moments(const Tensor& x, const std::vector<int64_t>& axes, std::vector<double>& mean,
             std::vector<double>& var) {
  const Shape st = reduce_strides(x.shape, axes);
  const size_t groups = static_cast<size_t>(numel(reduced_shape(x.shape, axes, true)));
  const double n =
      static_cast<double>(x.element_count()) / static_cast<double>(std::max<size_t>(1, groups));
  mean.assign(groups, 0.0);
  var.assign(groups, 0.0);
  auto px = x.as<float>();
  for_each_strided<1>(x.shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    mean[static_cast<size_t>(o[0])] += px[static_cast<size_t>(i)];
  });
  for (double& m : mean) m /= n;
  for_each_strided<1>(x.shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    const double d = px[static_cast<size_t>(i)] - mean[static_cast<size_t>(o[0])];
    var[static_cast<size_t>(o[0])] += d * d;
  });
  for (double& v : var) v /= n;
}

std::vector<int64_t> all_but_channel(size_t rank) {
  std::vector<int64_t> axes{0};
  for (size_t i = 2; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  return axes;
}

Result<Outputs> batch_norm(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  if (x->shape.size() < 2)
    return c.invalid("X " + shape_to_string(x->shape) + " must be [N, C, ...]");
  if (c.opset < 9 && c.attr_int("spatial", 1) == 0) return c.unsupported("spatial=0");
  const int64_t C = x->shape[1];
  const AxisSplit s = split_at(x->shape, 1);
  NPU_ASSIGN_OR_RETURN(std::vector<float> scale, channel_param(c, 1, C));
  NPU_ASSIGN_OR_RETURN(std::vector<float> bias, channel_param(c, 2, C));
  NPU_ASSIGN_OR_RETURN(std::vector<float> mean, channel_param(c, 3, C));
  NPU_ASSIGN_OR_RETURN(std::vector<float> var, channel_param(c, 4, C));
  const double eps = c.attr_float("epsilon", 1e-5f);
  const bool training = c.opset >= 14 && c.attr_int("training_mode", 0) != 0;
  std::vector<double> use_mean(mean.begin(), mean.end()), use_var(var.begin(), var.end());
  Outputs out(1);
  if (training) {
    moments(*x, all_but_channel(x->shape.size()), use_mean, use_var);
    const float momentum = c.attr_float("momentum", 0.9f);
    Tensor rm = Tensor::zeros(DType::kF32, {C}), rv = Tensor::zeros(DType::kF32, {C});
    for (size_t i = 0; i < static_cast<size_t>(C); ++i) {
      rm.as<float>()[i] = static_cast<float>(mean[i] * momentum + use_mean[i] * (1 - momentum));
      rv.as<float>()[i] = static_cast<float>(var[i] * momentum + use_var[i] * (1 - momentum));
    }
    out.push_back(std::move(rm));
    out.push_back(std::move(rv));
  }
  out[0] = *x;
  auto py = out[0].as<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t ch = 0; ch < C; ++ch) {
      const auto k = static_cast<size_t>(ch);
      const double mul = scale[k] / std::sqrt(use_var[k] + eps), add = bias[k] - use_mean[k] * mul;
      float* p = py.data() + (o * C + ch) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) p[i] = static_cast<float>(p[i] * mul + add);
    }
  return out;
}

Result<Outputs> instance_norm(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  if (x->shape.size() < 3)
    return c.invalid("X " + shape_to_string(x->shape) + " must be [N, C, D1, ...]");
  const int64_t C = x->shape[1];
  NPU_ASSIGN_OR_RETURN(std::vector<float> scale, channel_param(c, 1, C));
  NPU_ASSIGN_OR_RETURN(std::vector<float> bias, channel_param(c, 2, C));
  const double eps = c.attr_float("epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (size_t i = 2; i < x->shape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  std::vector<double> mean, var;
  moments(*x, axes, mean, var);
  Tensor y = *x;
  auto py = y.as<float>();
  const int64_t inner = numel(std::span<const int64_t>(x->shape).subspan(2));
  for (size_t pl = 0; pl < mean.size(); ++pl) {
    const size_t ch = pl % static_cast<size_t>(C);
    const double mul = scale[ch] / std::sqrt(var[pl] + eps);
    float* p = py.data() + static_cast<int64_t>(pl) * inner;
    for (int64_t i = 0; i < inner; ++i)
      p[i] = static_cast<float>((p[i] - mean[pl]) * mul + bias[ch]);
  }
  return one(std::move(y));
}

Result<Outputs> layer_norm(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  NPU_ASSIGN_OR_RETURN(const Tensor* scale, float_input(c, 1));
  const Tensor* bias = c.in(2);
  if (bias && bias->dtype != DType::kF32) return c.unsupported("a non-float B");
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", -1), rank));
  const double eps = c.attr_float("epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
  for (const Tensor* t : {scale, bias}) {
    if (!t) continue;
    const std::vector<const Shape*> shapes{&t->shape, &x->shape};
    NPU_ASSIGN_OR_RETURN(Shape b, broadcast_shapes(c, shapes));
    if (b != x->shape)
      return c.invalid("Scale/B " + shape_to_string(t->shape) + " do not broadcast to X");
  }
  std::vector<double> mean, var;
  moments(*x, axes, mean, var);
  const Shape stat_shape = reduced_shape(x->shape, axes, true);
  Tensor y = *x, m = Tensor::zeros(DType::kF32, stat_shape),
         inv = Tensor::zeros(DType::kF32, stat_shape);
  for (size_t i = 0; i < mean.size(); ++i) {
    m.as<float>()[i] = static_cast<float>(mean[i]);
    inv.as<float>()[i] = static_cast<float>(1.0 / std::sqrt(var[i] + eps));
  }
  const Shape ss = broadcast_strides(scale->shape, x->shape);
  const Shape bs = bias ? broadcast_strides(bias->shape, x->shape) : Shape(x->shape.size(), 0);
  const Shape st = reduce_strides(x->shape, axes);
  auto py = y.as<float>();
  auto psc = scale->as<float>();
  const float zero = 0;
  const float* pb = bias ? bias->as<float>().data() : &zero;
  for_each_strided<3>(x->shape, {&st, &ss, &bs}, [&](int64_t i, const std::array<int64_t, 3>& o) {
    const auto g = static_cast<size_t>(o[0]);
    float& v = py[static_cast<size_t>(i)];
    v = static_cast<float>((v - mean[g]) * inv.as<float>()[g] * psc[static_cast<size_t>(o[1])] +
                           pb[o[2]]);
  });
  Outputs out;
  out.push_back(std::move(y));
  out.push_back(std::move(m));
  out.push_back(std::move(inv));
  return out;
}

Result<Outputs> mean_variance_norm(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  NPU_ASSIGN_OR_RETURN(
      std::vector<int64_t> axes,
      normalize_axes(c, c.attr_ints("axes").value_or(std::vector<int64_t>{0, 2, 3}),
                     static_cast<int64_t>(x->shape.size())));
  std::vector<double> mean, var;
  moments(*x, axes, mean, var);
  Tensor y = *x;
  const Shape st = reduce_strides(x->shape, axes);
  auto py = y.as<float>();
  for_each_strided<1>(x->shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
    const auto g = static_cast<size_t>(o[0]);
    float& v = py[static_cast<size_t>(i)];
    v = static_cast<float>((v - mean[g]) / (std::sqrt(var[g]) + 1e-9));
  });
  return one(std::move(y));
}

Result<Outputs> lrn(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  if (x->shape.size() < 3) return c.invalid("X must be [N, C, D1, ...]");
  const int64_t size = c.attr_int("size", 0);
  if (size < 1) return c.invalid("size must be positive");
  const double alpha = c.attr_float("alpha", 1e-4f), beta = c.attr_float("beta", 0.75f),
               bias = c.attr_float("bias", 1.0f);
  const AxisSplit s = split_at(x->shape, 1);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Tensor y = *x;
  auto px = x->as<float>();
  auto py = y.as<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t ch = 0; ch < s.n; ++ch)
      for (int64_t i = 0; i < s.inner; ++i) {
        double sq = 0;
        for (int64_t k = std::max<int64_t>(0, ch - lo); k <= std::min(s.n - 1, ch + hi); ++k) {
          const double v = px[static_cast<size_t>((o * s.n + k) * s.inner + i)];
          sq += v * v;
        }
        const auto idx = static_cast<size_t>((o * s.n + ch) * s.inner + i);
        py[idx] = static_cast<float>(px[idx] /
                                     std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
  return one(std::move(y));
}

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 the operator
// works along one axis (default -1).
template <SoftmaxKind kKind>
Result<Outputs> softmax(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, float_input(c, 0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  const bool legacy = c.opset < 13;
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", legacy ? 1 : -1),
                                                    std::max<int64_t>(rank, 1)));
  AxisSplit s = split_at(x->shape, axis);
  if (legacy) s = {s.outer, s.n * s.inner, 1};
  Tensor y = *x;
  auto px = x->as<float>();
  auto py = y.as<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * s.n + k) * s.inner + i); };
      float mx = -std::numeric_limits<float>::infinity();
      int64_t arg = 0;
      for (int64_t k = 0; k < s.n; ++k)
        if (px[at(k)] > mx) mx = px[at(k)], arg = k;
      if constexpr (kKind == SoftmaxKind::kHardmax) {
        for (int64_t k = 0; k < s.n; ++k) py[at(k)] = k == arg ? 1.0f : 0.0f;
      } else {
        double sum = 0;
        for (int64_t k = 0; k < s.n; ++k) sum += std::exp(static_cast<double>(px[at(k)] - mx));
        for (int64_t k = 0; k < s.n; ++k) {
          const double d = px[at(k)] - mx;
          py[at(k)] = static_cast<float>(kKind == SoftmaxKind::kSoftmax ? std::exp(d) / sum
                                                                        : d - std::log(sum));
        }
      }
    }
  return one(std::move(y));
}

}  // namespace

void register_normalization(KernelTable& t) {
  t["BatchNormalization"] = batch_norm;
  t["InstanceNormalization"] = instance_norm;
  t["LayerNormalization"] = layer_norm;
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["LRN"] = lrn;
  t["Softmax"] = softmax<SoftmaxKind::kSoftmax>;
  t["LogSoftmax"] = softmax<SoftmaxKind::kLogSoftmax>;
  t["Hardmax"] = softmax<SoftmaxKind::kHardmax>;
}

}  // namespace npu::host
