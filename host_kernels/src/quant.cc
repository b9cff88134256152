// Quantisation operators: QuantizeLinear, DequantizeLinear (per tensor, or per axis from
// opset 13), DynamicQuantizeLinear, QLinearMatMul, QLinearConv; and the zero-point helper the
// integer operators share. Rounding is half to even, as ONNX specifies.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {

Result<Tensor> minus_zero_point(const OpContext& c, const Tensor& x, const Tensor* zp,
                                int64_t axis) {
  Tensor out = cast_tensor(x, DType::kI32);
  if (!zp || zp->element_count() == 0) return out;
  const std::vector<int64_t> z = to_int64_vector(*zp);
  AxisSplit s{x.element_count(), 1, 1};
  if (z.size() != 1) {
    NPU_ASSIGN_OR_RETURN(int64_t a, normalize_axis(c, axis, static_cast<int64_t>(x.shape.size())));
    s = split_at(x.shape, a);
    if (static_cast<int64_t>(z.size()) != s.n)
      return c.invalid("zero point has " + std::to_string(z.size()) + " values for an axis of " +
                       std::to_string(s.n));
  }
  auto v = out.as<int32_t>();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t k = 0; k < s.n; ++k)
      for (int64_t i = 0; i < s.inner; ++i)
      {
        int32_t& e = v[static_cast<size_t>((o * s.n + k) * s.inner + i)];
        e = wrapping_sub(e, static_cast<int32_t>(z[static_cast<size_t>(k)]));
      }
  return out;
}

namespace {

// Scale and zero point, per tensor or per position of one axis of x.
struct QuantParams {
  std::vector<float> scale;  // float32 arithmetic, as ONNX: ties round the same way
  std::vector<int64_t> zero;
  AxisSplit split;
  int64_t channel(size_t at) const { return static_cast<int64_t>(at) / split.inner % split.n; }
};

Result<QuantParams> quant_params(const OpContext& c, const Tensor& x, const Tensor& scale,
                                 const Tensor* zp, int64_t axis) {
  QuantParams q;
  q.scale = to_float_vector(scale);
  q.zero = zp && zp->element_count() > 0 ? to_int64_vector(*zp)
                                         : std::vector<int64_t>(q.scale.size(), 0);
  if (q.zero.size() != q.scale.size() || q.scale.empty())
    return c.invalid("scale and zero point must be non-empty and of one size");
  if (q.scale.size() == 1) {
    q.split = {1, 1, std::max<int64_t>(1, x.element_count())};
    return q;
  }
  NPU_ASSIGN_OR_RETURN(int64_t a, normalize_axis(c, axis, static_cast<int64_t>(x.shape.size())));
  q.split = split_at(x.shape, a);
  if (static_cast<int64_t>(q.scale.size()) != q.split.n)
    return c.invalid("per-axis scale has " + std::to_string(q.scale.size()) +
                     " values for an axis of " + std::to_string(q.split.n));
  return q;
}

// A uint8/int8 tensor of `shape` with element at = saturate(value(at)); value() is already
// rounded and offset by the zero point.
template <typename F>
Result<Tensor> saturate_to(const OpContext& c, DType dtype, const Shape& shape, F&& value) {
  if (dtype != DType::kU8 && dtype != DType::kI8)
    return c.unsupported("a quantised type " + std::string(dtype_name(dtype)));
  Tensor out = Tensor::zeros(dtype, shape);
  const double lo = dtype == DType::kU8 ? 0 : -128, hi = dtype == DType::kU8 ? 255 : 127;
  for (size_t at = 0; at < out.data.size(); ++at) {
    const double v = std::clamp(value(at), lo, hi);
    if (dtype == DType::kU8)
      out.data[at] = static_cast<uint8_t>(v);
    else
      out.as<int8_t>()[at] = static_cast<int8_t>(v);
  }
  return out;
}

Result<Outputs> quantize_linear(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* scale, c.need(1));
  const Tensor* zp = c.in(2);
  NPU_ASSIGN_OR_RETURN(QuantParams q, quant_params(c, *x, *scale, zp, c.attr_int("axis", 1)));
  const std::vector<float> xv = to_float_vector(*x);
  NPU_ASSIGN_OR_RETURN(
      Tensor out, saturate_to(c, zp ? zp->dtype : DType::kU8, x->shape, [&](size_t at) {
        const auto k = static_cast<size_t>(q.channel(at));
        return std::nearbyint(xv[at] / q.scale[k]) + static_cast<double>(q.zero[k]);
      }));
  return one(std::move(out));
}

Result<Outputs> dequantize_linear(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* scale, c.need(1));
  NPU_ASSIGN_OR_RETURN(QuantParams q, quant_params(c, *x, *scale, c.in(2), c.attr_int("axis", 1)));
  Tensor out = Tensor::zeros(DType::kF32, x->shape);
  auto po = out.as<float>();
  for (size_t at = 0; at < po.size(); ++at) {
    const auto k = static_cast<size_t>(q.channel(at));
    po[at] =
        static_cast<float>((static_cast<double>(element_as_int(*x, at)) -
                            static_cast<double>(q.zero[k])) * q.scale[k]);
  }
  return one(std::move(out));
}

Result<Outputs> dynamic_quantize_linear(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  // float32 arithmetic throughout, as the ONNX reference: ties round the same way.
  const std::vector<float> xv = to_float_vector(*x);
  float lo = 0, hi = 0;
  for (float v : xv) lo = std::min(lo, v), hi = std::max(hi, v);
  const float scale = (hi - lo) / 255.0f;
  const float zp = scale == 0 ? 0 : std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  Outputs out;
  NPU_ASSIGN_OR_RETURN(
      Tensor y, saturate_to(c, DType::kU8, x->shape, [&](size_t at) {
        return static_cast<double>(scale == 0 ? zp : std::nearbyint(xv[at] / scale) + zp);
      }));
  out.push_back(std::move(y));
  Tensor s = Tensor::zeros(DType::kF32, {}), z = Tensor::zeros(DType::kU8, {});
  s.as<float>()[0] = scale;
  z.data[0] = static_cast<uint8_t>(zp);
  out.push_back(std::move(s));
  out.push_back(std::move(z));
  return out;
}

// Requantises an int32 accumulator to the output's scale and zero point; `in_scale(at)` is
// the accumulator's real scale at element at.
template <typename F>
Result<Tensor> requantize(const OpContext& c, const Tensor& acc, const Tensor& y_scale,
                          const Tensor& y_zp, F&& in_scale) {
  if (y_scale.element_count() != 1 || y_zp.element_count() != 1)
    return c.unsupported("a per-channel output scale");
  const double ys = element_as_double(y_scale, 0), yz = element_as_double(y_zp, 0);
  auto pa = acc.as<int32_t>();
  return saturate_to(c, y_zp.dtype, acc.shape, [&](size_t at) {
    return std::nearbyint(static_cast<double>(pa[at]) * in_scale(at) / ys) + yz;
  });
}

Result<Outputs> qlinear_matmul(const OpContext& c) {
  std::vector<const Tensor*> in(8);
  for (size_t k = 0; k < 8; ++k) {
    NPU_ASSIGN_OR_RETURN(in[k], c.need(k));
  }
  NPU_ASSIGN_OR_RETURN(Tensor a32, minus_zero_point(c, *in[0], in[2], -2));
  NPU_ASSIGN_OR_RETURN(Tensor b32, minus_zero_point(c, *in[3], in[5], -1));
  NPU_ASSIGN_OR_RETURN(Tensor acc, matmul_tensors(c, a32, b32));
  const std::vector<float> as = to_float_vector(*in[1]), bs = to_float_vector(*in[4]);
  const int64_t N = in[3]->shape.size() >= 2 ? in[3]->shape.back() : 1;
  const int64_t M = in[0]->shape.size() >= 2 ? in[0]->shape[in[0]->shape.size() - 2] : 1;
  if ((as.size() != 1 && static_cast<int64_t>(as.size()) != M) ||
      (bs.size() != 1 && static_cast<int64_t>(bs.size()) != N))
    return c.unsupported(
        "a_scale/b_scale shapes other than per tensor, per row (a) or per column (b)");
  NPU_ASSIGN_OR_RETURN(Tensor y, requantize(c, acc, *in[6], *in[7], [&](size_t at) {
                         const auto col = static_cast<size_t>(static_cast<int64_t>(at) % N),
                                    row = static_cast<size_t>(static_cast<int64_t>(at) / N % M);
                         return static_cast<double>(as[as.size() == 1 ? 0 : row]) *
                                bs[bs.size() == 1 ? 0 : col];
                       }));
  return one(std::move(y));
}

Result<Outputs> qlinear_conv(const OpContext& c) {
  std::vector<const Tensor*> in(8);
  for (size_t k = 0; k < 8; ++k) {
    NPU_ASSIGN_OR_RETURN(in[k], c.need(k));
  }
  if (in[2]->element_count() != 1) return c.unsupported("a per-channel x_zero_point");
  NPU_ASSIGN_OR_RETURN(Tensor x32, minus_zero_point(c, *in[0], in[2], 1));
  NPU_ASSIGN_OR_RETURN(Tensor w32, minus_zero_point(c, *in[3], in[5], 0));
  const Tensor* bias = c.in(8);
  Tensor b32;
  if (bias) b32 = cast_tensor(*bias, DType::kI32);
  NPU_ASSIGN_OR_RETURN(Tensor acc, conv_tensors(c, x32, w32, bias ? &b32 : nullptr));
  const double xs = element_as_double(*in[1], 0);
  const std::vector<float> ws = to_float_vector(*in[4]);
  const int64_t M = acc.shape[1], plane = numel(std::span<const int64_t>(acc.shape).subspan(2));
  if (ws.size() != 1 && static_cast<int64_t>(ws.size()) != M)
    return c.invalid("w_scale must have 1 or M values");
  NPU_ASSIGN_OR_RETURN(Tensor y, requantize(c, acc, *in[6], *in[7], [&](size_t at) {
                         const auto m = static_cast<size_t>(static_cast<int64_t>(at) /
                                                            std::max<int64_t>(1, plane) % M);
                         return xs * ws[ws.size() == 1 ? 0 : m];
                       }));
  return one(std::move(y));
}

}  // namespace

void register_quant(KernelTable& t) {
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = dequantize_linear;
  t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  t["QLinearMatMul"] = qlinear_matmul;
  t["QLinearConv"] = qlinear_conv;
}

}  // namespace npu::host
