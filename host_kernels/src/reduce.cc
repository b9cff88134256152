// Reductions (Reduce*: axes as an attribute, or an input from opset 13 for ReduceSum and
// opset 18 for the others) and ArgMax/ArgMin.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

enum class R { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

template <R kR>
Result<Outputs> reduce(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  const int64_t input_from = kR == R::kSum ? 13 : 18;
  NPU_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> given,
                       axes_attr_or_input(c, input_from, 1));
  std::vector<int64_t> axes = given.value_or(std::vector<int64_t>{});
  if (axes.empty()) {
    if (c.opset >= input_from && c.attr_int("noop_with_empty_axes", 0) != 0) return one(Tensor(*x));
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  NPU_ASSIGN_OR_RETURN(axes, normalize_axes(c, axes, rank));
  const bool keepdims = c.attr_int("keepdims", 1) != 0;
  const Shape st = reduce_strides(x->shape, axes);
  const auto groups = static_cast<size_t>(numel(reduced_shape(x->shape, axes, true)));
  const double count =
      static_cast<double>(x->element_count()) / static_cast<double>(std::max<size_t>(groups, 1));
  double init = 0;
  if (kR == R::kMax || kR == R::kLogSumExp) init = -std::numeric_limits<double>::infinity();
  if (kR == R::kMin) init = std::numeric_limits<double>::infinity();
  if (kR == R::kProd) init = 1;
  std::vector<double> acc(groups, init), shift(groups, 0.0);
  auto pass = [&](auto&& f) {
    visit_dtype(x->dtype, [&](auto tag) {
      auto px = x->as<decltype(tag)>();
      for_each_strided<1>(x->shape, {&st}, [&](int64_t i, const std::array<int64_t, 1>& o) {
        double& a = acc[static_cast<size_t>(o[0])];
        a = f(a, static_cast<double>(px[static_cast<size_t>(i)]), shift[static_cast<size_t>(o[0])]);
      });
    });
  };
  if constexpr (kR == R::kLogSumExp) {
    pass([](double a, double v, double) { return std::max(a, v); });
    shift = acc;
    for (double& s : shift)
      if (!std::isfinite(s)) s = 0;
    std::fill(acc.begin(), acc.end(), 0.0);
  }
  pass([](double a, double v, double s) {
    switch (kR) {
      case R::kMax:
        return std::max(a, v);
      case R::kMin:
        return std::min(a, v);
      case R::kProd:
        return a * v;
      case R::kL1:
        return a + std::fabs(v);
      case R::kL2:
      case R::kSumSquare:
        return a + v * v;
      case R::kLogSumExp:
        return a + std::exp(v - s);
      default:
        return a + v;
    }
  });
  for (size_t g = 0; g < groups; ++g) {
    if (kR == R::kMean) acc[g] /= count;
    if (kR == R::kL2) acc[g] = std::sqrt(acc[g]);
    if (kR == R::kLogSum) acc[g] = std::log(acc[g]);
    if (kR == R::kLogSumExp) acc[g] = std::log(acc[g]) + shift[g];
  }
  Tensor out = Tensor::zeros(x->dtype, reduced_shape(x->shape, axes, keepdims));
  visit_dtype(x->dtype, [&](auto tag) {
    auto po = out.as<decltype(tag)>();
    for (size_t g = 0; g < groups; ++g) po[g] = convert<decltype(tag)>(acc[g]);
  });
  return one(std::move(out));
}

template <bool kMax>
Result<Outputs> arg_reduce(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 0), rank));
  const bool keepdims = c.attr_int("keepdims", 1) != 0,
             last = c.attr_int("select_last_index", 0) != 0;
  const AxisSplit s = split_at(x->shape, axis);
  if (s.n == 0) return c.invalid("cannot take the arg-extreme of an empty axis");
  Tensor out = Tensor::zeros(DType::kI64, reduced_shape(x->shape, {axis}, keepdims));
  auto po = out.as<int64_t>();
  visit_dtype(x->dtype, [&](auto tag) {
    auto px = x->as<decltype(tag)>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t best = 0;
        for (int64_t k = 1; k < s.n; ++k) {
          const auto v = px[static_cast<size_t>((o * s.n + k) * s.inner + i)];
          const auto b = px[static_cast<size_t>((o * s.n + best) * s.inner + i)];
          const bool better = kMax ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
          if (better) best = k;
        }
        po[static_cast<size_t>(o * s.inner + i)] = best;
      }
  });
  return one(std::move(out));
}

}  // namespace

void register_reduce(KernelTable& t) {
  t["ReduceSum"] = reduce<R::kSum>;
  t["ReduceMean"] = reduce<R::kMean>;
  t["ReduceMax"] = reduce<R::kMax>;
  t["ReduceMin"] = reduce<R::kMin>;
  t["ReduceProd"] = reduce<R::kProd>;
  t["ReduceL1"] = reduce<R::kL1>;
  t["ReduceL2"] = reduce<R::kL2>;
  t["ReduceLogSum"] = reduce<R::kLogSum>;
  t["ReduceLogSumExp"] = reduce<R::kLogSumExp>;
  t["ReduceSumSquare"] = reduce<R::kSumSquare>;
  t["ArgMax"] = arg_reduce<true>;
  t["ArgMin"] = arg_reduce<false>;
}

}  // namespace npu::host
