// Signal processing (opset 17): DFT, STFT, HannWindow, HammingWindow, BlackmanWindow,
// MelWeightMatrix. Plain O(n²) transforms: these run on small host tensors.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernel.h"

namespace npu::host {
namespace {

Result<int64_t> scalar_int(const OpContext& c, size_t k) {
  NPU_ASSIGN_OR_RETURN(const Tensor* t, c.need(k));
  if (t->element_count() != 1) return c.invalid("input " + std::to_string(k) + " must be a scalar");
  return element_as_int(*t, 0);
}

// One DFT of `n` complex points (in: stride `in_stride` elements of re/im pairs) of length
// `len` (zero-padded or truncated to it), writing `bins` outputs.
void dft_1d(const float* in, int64_t n, int64_t in_stride, bool complex_in, int64_t len,
            bool inverse, int64_t bins, float* out, int64_t out_stride) {
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0, im = 0;
    for (int64_t t = 0; t < std::min(n, len); ++t) {
      const double xr = in[t * in_stride], xi = complex_in ? in[t * in_stride + 1] : 0.0;
      const double a =
          sign * 2 * std::numbers::pi * static_cast<double>(k * t % len) / static_cast<double>(len);
      re += xr * std::cos(a) - xi * std::sin(a);
      im += xr * std::sin(a) + xi * std::cos(a);
    }
    if (inverse) re /= static_cast<double>(len), im /= static_cast<double>(len);
    out[k * out_stride] = static_cast<float>(re);
    out[k * out_stride + 1] = static_cast<float>(im);
  }
}

Result<Outputs> dft(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* xt, c.need(0));
  const auto rank = static_cast<int64_t>(xt->shape.size());
  if (rank < 3 || (xt->shape.back() != 1 && xt->shape.back() != 2))
    return c.invalid("input " + shape_to_string(xt->shape) + " must be [batch, ..., 1 or 2]");
  NPU_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(c, c.attr_int("axis", 1), rank - 1));
  if (axis == 0) return c.invalid("axis 0 is the batch axis");
  const bool inverse = c.attr_int("inverse", 0) != 0, onesided = c.attr_int("onesided", 0) != 0;
  const bool complex_in = xt->shape.back() == 2;
  const int64_t n = xt->shape[static_cast<size_t>(axis)];
  int64_t len = n;
  if (c.in(1) && c.in(1)->element_count() > 0) {
    NPU_ASSIGN_OR_RETURN(len, scalar_int(c, 1));
  }
  if (len < 1) return c.invalid("dft_length must be positive");
  if (onesided && complex_in) return c.invalid("onesided needs a real input");
  const int64_t bins = onesided ? len / 2 + 1 : len;
  Shape shape = xt->shape;
  shape[static_cast<size_t>(axis)] = bins;
  shape.back() = 2;
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kF32, shape));
  const Tensor x = cast_tensor(*xt, DType::kF32);
  const AxisSplit si = split_at(xt->shape, axis), so = split_at(shape, axis);
  for (int64_t o = 0; o < si.outer; ++o)
    for (int64_t i = 0; i < si.inner / xt->shape.back(); ++i)
      dft_1d(x.as<float>().data() + o * si.n * si.inner + i * xt->shape.back(), n, si.inner,
             complex_in, len, inverse, bins, out.as<float>().data() + o * so.n * so.inner + i * 2,
             so.inner);
  return one(std::move(out));
}

Result<Outputs> stft(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* st, c.need(0));
  if (st->shape.size() != 3 || (st->shape[2] != 1 && st->shape[2] != 2))
    return c.invalid("signal must be [batch, length, 1 or 2]");
  NPU_ASSIGN_OR_RETURN(int64_t step, scalar_int(c, 1));
  const Tensor* window = c.in(2);
  if (window && window->element_count() == 0) window = nullptr;
  int64_t frame = window ? window->element_count() : 0;
  if (c.in(3) && c.in(3)->element_count() > 0) {
    NPU_ASSIGN_OR_RETURN(frame, scalar_int(c, 3));
  }
  if (window && window->element_count() != frame)
    return c.invalid("window length differs from frame_length");
  const int64_t B = st->shape[0], L = st->shape[1], comps = st->shape[2];
  if (step < 1 || frame < 1 || frame > L)
    return c.invalid("frame_step and frame_length must fit the signal");
  const bool onesided = c.attr_int("onesided", 1) != 0;
  if (onesided && comps == 2) return c.invalid("onesided needs a real signal");
  const int64_t frames = 1 + (L - frame) / step, bins = onesided ? frame / 2 + 1 : frame;
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kF32, {B, frames, bins, 2}));
  const Tensor x = cast_tensor(*st, DType::kF32);
  const std::vector<float> w =
      window ? to_float_vector(*window) : std::vector<float>(static_cast<size_t>(frame), 1.0f);
  std::vector<float> buf(static_cast<size_t>(frame * comps));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame; ++t)
        for (int64_t k = 0; k < comps; ++k)
          buf[static_cast<size_t>(t * comps + k)] =
              x.as<float>()[static_cast<size_t>((b * L + f * step + t) * comps + k)] *
              w[static_cast<size_t>(t)];
      dft_1d(buf.data(), frame, comps, comps == 2, frame, false, bins,
             out.as<float>().data() + ((b * frames + f) * bins) * 2, 2);
    }
  return one(std::move(out));
}

enum class Window { kHann, kHamming, kBlackman };

template <Window kWindow>
Result<Outputs> window(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(int64_t n, scalar_int(c, 0));
  if (n < 0) return c.invalid("size is negative");
  NPU_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx_type(c, c.attr_int("output_datatype", 1)));
  const bool periodic = c.attr_int("periodic", 1) != 0;
  NPU_ASSIGN_OR_RETURN(Tensor f, new_tensor(c, DType::kF32, {n}));
  const double denom = static_cast<double>(periodic ? n : n - 1);
  for (int64_t i = 0; i < n; ++i) {
    const double a = 2 * std::numbers::pi * static_cast<double>(i) / denom;
    double v;
    if (kWindow == Window::kHann)
      v = 0.5 - 0.5 * std::cos(a);
    else if (kWindow == Window::kHamming)
      v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    f.as<float>()[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return one(cast_tensor(f, dtype));
}

// The ONNX reference's triangular mel filter bank, [dft_length/2 + 1, num_mel_bins].
Result<Outputs> mel_weight_matrix(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(int64_t mels, scalar_int(c, 0));
  NPU_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int(c, 1));
  NPU_ASSIGN_OR_RETURN(int64_t rate, scalar_int(c, 2));
  NPU_ASSIGN_OR_RETURN(const Tensor* lo_t, c.need(3));
  NPU_ASSIGN_OR_RETURN(const Tensor* hi_t, c.need(4));
  if (mels < 1 || dft_length < 1 || rate < 1 || lo_t->element_count() != 1 ||
      hi_t->element_count() != 1)
    return c.invalid(
        "num_mel_bins, dft_length and sample_rate must be positive, the edges scalars");
  NPU_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx_type(c, c.attr_int("output_datatype", 1)));
  const int64_t spec_bins = dft_length / 2 + 1;
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1 + hz / 700.0); };
  const double lo = to_mel(element_as_double(*lo_t, 0)), hi = to_mel(element_as_double(*hi_t, 0));
  const double step = (hi - lo) / static_cast<double>(mels + 2);
  std::vector<int64_t> bin(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + lo) / 2595.0) - 1);
    bin[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
  }
  NPU_ASSIGN_OR_RETURN(Tensor f, new_tensor(c, DType::kF32, {spec_bins, mels}));
  auto at = [&](int64_t j, int64_t i) -> float* {
    return j >= 0 && j < spec_bins ? &f.as<float>()[static_cast<size_t>(j * mels + i)] : nullptr;
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t left = bin[static_cast<size_t>(i)], center = bin[static_cast<size_t>(i + 1)],
                  right = bin[static_cast<size_t>(i + 2)];
    if (center == left) {
      if (float* p = at(center, i)) *p = 1;
    } else {
      for (int64_t j = left; j <= center; ++j)
        if (float* p = at(j, i))
          *p = static_cast<float>(j - left) / static_cast<float>(center - left);
    }
    for (int64_t j = center; j < right; ++j)
      if (float* p = at(j, i))
        *p = static_cast<float>(right - j) / static_cast<float>(right - center);
  }
  return one(cast_tensor(f, dtype));
}

}  // namespace

void register_signal(KernelTable& t) {
  t["DFT"] = dft;
  t["STFT"] = stft;
  t["HannWindow"] = window<Window::kHann>;
  t["HammingWindow"] = window<Window::kHamming>;
  t["BlackmanWindow"] = window<Window::kBlackman>;
  t["MelWeightMatrix"] = mel_weight_matrix;
}

}  // namespace npu::host
