// Resize (opsets 10, 11, 13, 18) and Upsample (7, 9): nearest, linear and cubic over any
// number of axes. Each axis gets, per output coordinate, a list of (input index, weight)
// taps; the output is the sum over the product of the axes' taps.
#include <algorithm>
#include <cmath>

#include "kernel.h"

namespace npu::host {
namespace {

struct Tap {
  int64_t index;
  double weight;
};

struct AxisTaps {
  std::vector<std::vector<Tap>> taps;  // per output coordinate; empty = extrapolate
};

struct ResizeMode {
  std::string mode = "nearest";      // nearest | linear | cubic
  std::string coord = "half_pixel";  // coordinate_transformation_mode
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The input coordinate of output coordinate x. As in the ONNX reference, the resized length
// is in·scale (not rounded), which matters for align_corners and downsampling.
Result<double> source_coordinate(const OpContext& c, const ResizeMode& m, int64_t x, int64_t in,
                                 double scale, double roi_start, double roi_end) {
  const double xd = static_cast<double>(x), out = static_cast<double>(in) * scale,
               last = static_cast<double>(in - 1);
  if (m.coord == "half_pixel") return (xd + 0.5) / scale - 0.5;
  if (m.coord == "pytorch_half_pixel") return out > 1 ? (xd + 0.5) / scale - 0.5 : -0.5;
  if (m.coord == "align_corners") return out == 1 ? 0.0 : xd * last / (out - 1);
  if (m.coord == "asymmetric") return xd / scale;
  if (m.coord == "tf_half_pixel_for_nearest" || m.coord == "tf_half_pixel_for_nn")
    return (xd + 0.5) / scale;
  if (m.coord == "tf_crop_and_resize")
    return out > 1 ? roi_start * last + xd * (roi_end - roi_start) * last / (out - 1)
                   : 0.5 * (roi_start + roi_end) * last;
  return c.unsupported("coordinate_transformation_mode '" + m.coord + "'");
}

Result<AxisTaps> axis_taps(const OpContext& c, const ResizeMode& m, int64_t in, int64_t out,
                           double scale, double roi_start, double roi_end) {
  AxisTaps a;
  a.taps.resize(static_cast<size_t>(out));
  auto clampi = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
  for (int64_t x = 0; x < out; ++x) {
    NPU_ASSIGN_OR_RETURN(double s, source_coordinate(c, m, x, in, scale, roi_start, roi_end));
    auto& taps = a.taps[static_cast<size_t>(x)];
    if (m.coord == "tf_crop_and_resize" && (s < 0 || s > static_cast<double>(in - 1))) continue;
    if (m.mode == "nearest") {
      double r;
      const double fl = std::floor(s), frac = s - fl;
      if (m.nearest == "round_prefer_floor")
        r = frac == 0.5 ? fl : std::round(s);
      else if (m.nearest == "round_prefer_ceil")
        r = frac == 0.5 ? fl + 1 : std::round(s);
      else if (m.nearest == "floor")
        r = fl;
      else if (m.nearest == "ceil")
        r = std::ceil(s);
      else
        return c.unsupported("nearest_mode '" + m.nearest + "'");
      taps.push_back({clampi(static_cast<int64_t>(r)), 1.0});
    } else if (m.mode == "linear") {
      const double fl = std::floor(s), w = s - fl;
      const auto i0 = static_cast<int64_t>(fl);
      taps.push_back({clampi(i0), 1 - w});
      taps.push_back({clampi(i0 + 1), w});
    } else if (m.mode == "cubic") {
      const double fl = std::floor(s), r = s - fl, A = m.cubic_a;
      const auto i0 = static_cast<int64_t>(fl);
      auto far = [&](double t) {
        return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
      };                                                                          // 1 < |t| < 2
      auto near = [&](double t) { return ((A + 2) * t - (A + 3)) * t * t + 1; };  // |t| <= 1
      const double w[4] = {far(r + 1), near(r), near(1 - r), far(2 - r)};
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = i0 - 1 + k;
        const double wk = m.exclude_outside && (i < 0 || i >= in) ? 0.0 : w[k];
        taps.push_back({clampi(i), wk});
        sum += wk;
      }
      if (m.exclude_outside && sum != 0)
        for (Tap& t : taps) t.weight /= sum;
    } else {
      return c.unsupported("mode '" + m.mode + "'");
    }
  }
  return a;
}

// floor(length), or INVALID_ARGUMENT when it is not a sensible dimension.
Result<int64_t> output_length(const OpContext& c, double length) {
  if (!(length >= 0 && length < 1e12))
    return c.invalid("the output length " + std::to_string(length) + " is out of range");
  return static_cast<int64_t>(std::floor(length));
}

// The interpolation itself, given output sizes, scales and roi per axis.
Result<Outputs> interpolate(const OpContext& c, const Tensor& x, const ResizeMode& m,
                            const Shape& out_shape, const std::vector<double>& scales,
                            const std::vector<double>& roi) {
  if (x.dtype != DType::kF32 && m.mode != "nearest")
    return c.unsupported("non-float input for mode " + m.mode);
  const size_t rank = x.shape.size();
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x.dtype, out_shape));
  std::vector<AxisTaps> axes;
  for (size_t d = 0; d < rank; ++d) {
    if (x.shape[d] == 0) return c.invalid("cannot resize an empty axis");
    const double start = roi.empty() ? 0.0 : roi[d], end = roi.empty() ? 1.0 : roi[rank + d];
    NPU_ASSIGN_OR_RETURN(AxisTaps t,
                         axis_taps(c, m, x.shape[d], out_shape[d], scales[d], start, end));
    axes.push_back(std::move(t));
  }
  const double extrapolation = c.attr_float("extrapolation_value", 0.0f);
  const Shape xs = strides_of(x.shape);
  visit_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto px = x.as<T>();
    auto po = out.as<T>();
    std::vector<int64_t> idx(rank, 0);
    std::vector<const std::vector<Tap>*> taps(rank);
    for (size_t i = 0; i < po.size(); ++i) {
      bool extrapolate = false;
      int64_t combos = 1;
      for (size_t d = 0; d < rank; ++d) {
        taps[d] = &axes[d].taps[static_cast<size_t>(idx[d])];
        extrapolate |= taps[d]->empty();
        combos *= static_cast<int64_t>(taps[d]->size());
      }
      double acc = extrapolate ? extrapolation : 0.0;
      for (int64_t combo = 0; !extrapolate && combo < combos; ++combo) {
        double w = 1;
        int64_t off = 0;
        for (size_t d = 0, rest = static_cast<size_t>(combo); d < rank; ++d) {
          const Tap& t = (*taps[d])[rest % taps[d]->size()];
          rest /= taps[d]->size();
          w *= t.weight;
          off += t.index * xs[d];
        }
        if (w != 0) acc += w * static_cast<double>(px[static_cast<size_t>(off)]);
      }
      po[i] = convert<T>(acc);
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < out_shape[d]) break;
        idx[d] = 0;
      }
    }
  });
  return one(std::move(out));
}

Result<Outputs> resize(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  const size_t rank = x->shape.size();
  if (c.attr_int("antialias", 0) != 0) return c.unsupported("antialias=1");
  ResizeMode m;
  m.mode = c.attr_string("mode", "nearest");
  if (c.opset >= 11) {
    m.coord = c.attr_string("coordinate_transformation_mode", "half_pixel");
    m.nearest = c.attr_string("nearest_mode", "round_prefer_floor");
    m.cubic_a = c.attr_float("cubic_coeff_a", -0.75f);
    m.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  } else {
    m.coord = "asymmetric";
    m.nearest = "floor";
  }
  const Tensor* roi_t = c.opset >= 11 ? c.in(1) : nullptr;
  const Tensor* scales_t = c.in(c.opset >= 11 ? 2 : 1);
  const Tensor* sizes_t = c.opset >= 11 ? c.in(3) : nullptr;
  if (scales_t && scales_t->element_count() == 0) scales_t = nullptr;
  if (sizes_t && sizes_t->element_count() == 0) sizes_t = nullptr;
  if (!scales_t == !sizes_t) return c.invalid("exactly one of scales and sizes must be given");
  // Axes (opset 18): scales/sizes/roi name only these axes.
  std::vector<int64_t> axes;
  if (auto a = c.attr_ints("axes")) {
    NPU_ASSIGN_OR_RETURN(axes, normalize_axes(c, *a, static_cast<int64_t>(rank)));
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  }
  std::vector<double> scales(rank, 1.0), roi;
  Shape out_shape = x->shape;
  if (scales_t) {
    const std::vector<float> s = to_float_vector(*scales_t);
    if (s.size() != axes.size())
      return c.invalid("scales has " + std::to_string(s.size()) + " values for " +
                       std::to_string(axes.size()) + " axes");
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto d = static_cast<size_t>(axes[i]);
      if (!(s[i] > 0)) return c.invalid("scales must be positive");
      scales[d] = s[i];
      NPU_ASSIGN_OR_RETURN(out_shape[d], output_length(c, static_cast<double>(x->shape[d]) * s[i]));
    }
  } else {
    const std::vector<int64_t> s = to_int64_vector(*sizes_t);
    if (s.size() != axes.size())
      return c.invalid("sizes has " + std::to_string(s.size()) + " values for " +
                       std::to_string(axes.size()) + " axes");
    const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    double common = policy == "not_larger" ? 1e300 : 0.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      const double r =
          static_cast<double>(s[i]) / static_cast<double>(x->shape[static_cast<size_t>(axes[i])]);
      common = policy == "not_larger" ? std::min(common, r) : std::max(common, r);
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto d = static_cast<size_t>(axes[i]);
      if (s[i] < 0) return c.invalid("sizes must not be negative");
      if (policy == "stretch") {
        out_shape[d] = s[i];
        scales[d] = static_cast<double>(s[i]) / static_cast<double>(x->shape[d]);
      } else if (policy == "not_larger" || policy == "not_smaller") {
        scales[d] = common;
        NPU_ASSIGN_OR_RETURN(
            out_shape[d], output_length(c, std::round(static_cast<double>(x->shape[d]) * common)));
      } else {
        return c.unsupported("keep_aspect_ratio_policy '" + policy + "'");
      }
    }
  }
  if (roi_t && roi_t->element_count() > 0 && m.coord == "tf_crop_and_resize") {
    const std::vector<float> r = to_float_vector(*roi_t);
    if (r.size() != 2 * axes.size()) return c.invalid("roi must have two values per axis");
    roi.assign(2 * rank, 0.0);
    for (size_t d = 0; d < rank; ++d) roi[rank + d] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[static_cast<size_t>(axes[i])] = r[i];
      roi[rank + static_cast<size_t>(axes[i])] = r[axes.size() + i];
    }
  }
  return interpolate(c, *x, m, out_shape, scales, roi);
}

Result<Outputs> upsample(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  ResizeMode m;
  m.mode = c.attr_string("mode", "nearest");
  m.coord = "asymmetric";
  m.nearest = "floor";
  std::vector<float> s;
  if (c.opset >= 9) {
    NPU_ASSIGN_OR_RETURN(const Tensor* st, c.need(1));
    s = to_float_vector(*st);
  } else if (const Attribute* a = c.attr("scales")) {
    s = a->floats;
  }
  if (s.size() != x->shape.size()) return c.invalid("scales must have one value per dimension");
  std::vector<double> scales(s.begin(), s.end());
  Shape out_shape = x->shape;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!(s[d] > 0)) return c.invalid("scales must be positive");
    NPU_ASSIGN_OR_RETURN(out_shape[d],
                         output_length(c, static_cast<double>(x->shape[d]) * scales[d]));
  }
  return interpolate(c, *x, m, out_shape, scales, {});
}

}  // namespace

void register_resize(KernelTable& t) {
  t["Resize"] = resize;
  t["Upsample"] = upsample;
}

}  // namespace npu::host
