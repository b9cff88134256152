// Training losses as ONNX defines them for inference graphs: NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss (reduction none/sum/mean, class weights, ignore_index).
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

// NLL of log-probabilities x [N, C, d...] at integer targets [N, d...].
Result<Tensor> nll(const OpContext& c, const Tensor& x, const Tensor& target,
                   const Tensor* weight) {
  if (x.shape.size() < 2 || target.shape.size() != x.shape.size() - 1)
    return c.invalid("input " + shape_to_string(x.shape) + " and target " +
                     shape_to_string(target.shape) + " must be [N, C, d...] and [N, d...]");
  const int64_t N = x.shape[0], C = x.shape[1],
                D = numel(std::span<const int64_t>(x.shape).subspan(2));
  if (target.element_count() != N * D)
    return c.invalid("target does not match the input's N and d dims");
  if (weight && weight->element_count() != C) return c.invalid("weight must have C values");
  const std::string reduction = c.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return c.invalid("reduction '" + reduction + "' is not none, sum or mean");
  const bool has_ignore = c.attr("ignore_index") != nullptr;
  const int64_t ignore = c.attr_int("ignore_index", 0);
  const std::vector<float> xv = to_float_vector(x);
  const std::vector<float> w =
      weight ? to_float_vector(*weight) : std::vector<float>(static_cast<size_t>(C), 1.0f);
  const std::vector<int64_t> t = to_int64_vector(target);
  Tensor loss = Tensor::zeros(DType::kF32, target.shape);
  auto pl = loss.as<float>();
  double sum = 0, wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const auto i = static_cast<size_t>(n * D + d);
      const int64_t k = t[i];
      if (has_ignore && k == ignore) continue;
      if (k < 0 || k >= C)
        return c.invalid("target " + std::to_string(k) + " is not a class in [0, " +
                         std::to_string(C) + ")");
      const double wk = w[static_cast<size_t>(k)];
      const double l = -static_cast<double>(xv[static_cast<size_t>((n * C + k) * D + d)]) * wk;
      pl[i] = static_cast<float>(l);
      sum += l;
      wsum += wk;
    }
  if (reduction == "none") return loss;
  Tensor r = Tensor::zeros(DType::kF32, {});
  r.as<float>()[0] = static_cast<float>(reduction == "sum" ? sum : sum / wsum);
  return r;
}

Result<Outputs> nll_loss(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(1));
  NPU_ASSIGN_OR_RETURN(Tensor loss, nll(c, *x, *t, c.in(2)));
  return one(std::move(loss));
}

Result<Outputs> softmax_cross_entropy(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(1));
  if (x->shape.size() < 2) return c.invalid("scores must be [N, C, d...]");
  Tensor logp = cast_tensor(*x, DType::kF32);
  const AxisSplit s = split_at(x->shape, 1);
  auto p = logp.as<float>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * s.n + k) * s.inner + i); };
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t k = 0; k < s.n; ++k) mx = std::max(mx, static_cast<double>(p[at(k)]));
      for (int64_t k = 0; k < s.n; ++k) sum += std::exp(p[at(k)] - mx);
      const double lse = mx + std::log(sum);
      for (int64_t k = 0; k < s.n; ++k) p[at(k)] = static_cast<float>(p[at(k)] - lse);
    }
  NPU_ASSIGN_OR_RETURN(Tensor loss, nll(c, logp, *t, c.in(2)));
  Outputs out;
  out.push_back(std::move(loss));
  out.push_back(std::move(logp));
  return out;
}

}  // namespace

void register_loss(KernelTable& t) {
  t["NegativeLogLikelihoodLoss"] = nll_loss;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
}

}  // namespace npu::host
