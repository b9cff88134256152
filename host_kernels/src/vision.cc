// Detection and sampling operators: NonMaxSuppression, RoiAlign, GridSample, MaxUnpool.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernel.h"

namespace npu::host {
namespace {

Result<Outputs> non_max_suppression(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* boxes_t, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* scores_t, c.need(1));
  if (boxes_t->shape.size() != 3 || boxes_t->shape[2] != 4 || scores_t->shape.size() != 3 ||
      scores_t->shape[0] != boxes_t->shape[0] || scores_t->shape[2] != boxes_t->shape[1])
    return c.invalid("boxes " + shape_to_string(boxes_t->shape) + " and scores " +
                     shape_to_string(scores_t->shape) +
                     " must be [batches, boxes, 4] and [batches, classes, boxes]");
  auto scalar = [&](size_t k, double fallback) {
    const Tensor* t = c.in(k);
    return t && t->element_count() > 0 ? element_as_double(*t, 0) : fallback;
  };
  const auto max_out = static_cast<int64_t>(scalar(2, 0));
  const double iou_threshold = scalar(3, 0);
  const Tensor* st = c.in(4);
  const bool has_score_threshold = st && st->element_count() > 0;
  const double score_threshold = scalar(4, 0);
  const bool center = c.attr_int("center_point_box", 0) != 0;
  const std::vector<float> boxes = to_float_vector(*boxes_t), scores = to_float_vector(*scores_t);
  const int64_t B = boxes_t->shape[0], N = boxes_t->shape[1], C = scores_t->shape[1];
  // Corners (y1, x1, y2, x2) ordered min-max.
  auto corners = [&](int64_t b, int64_t i) {
    const float* p = boxes.data() + (b * N + i) * 4;
    std::array<double, 4> q;
    if (center) {
      q = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0};
    } else {
      q = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
    }
    return q;
  };
  auto iou = [&](int64_t b, int64_t i, int64_t j) {
    const auto p = corners(b, i), q = corners(b, j);
    const double ih = std::max(0.0, std::min(p[2], q[2]) - std::max(p[0], q[0]));
    const double iw = std::max(0.0, std::min(p[3], q[3]) - std::max(p[1], q[1]));
    const double inter = ih * iw;
    const double uni = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C; ++k) {
      const float* s = scores.data() + (b * C + k) * N;
      std::vector<int64_t> order;
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool keep = true;
        for (int64_t j : kept) keep = keep && iou(b, i, j) <= iou_threshold;
        if (keep) kept.push_back(i);
      }
      for (int64_t i : kept) selected.insert(selected.end(), {b, k, i});
    }
  Tensor out = Tensor::zeros(DType::kI64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.as<int64_t>().begin());
  return one(std::move(out));
}

// Bilinear sample of plane p [H, W] at (y, x), as RoiAlign defines it (0 outside [-1, H]).
double roi_sample(const float* p, int64_t H, int64_t W, double y, double x) {
  if (y < -1.0 || y > static_cast<double>(H) || x < -1.0 || x > static_cast<double>(W)) return 0;
  y = std::max(y, 0.0), x = std::max(x, 0.0);
  auto y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= H - 1) y0 = y1 = H - 1, y = static_cast<double>(y0);
  if (x0 >= W - 1) x0 = x1 = W - 1, x = static_cast<double>(x0);
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0), hy = 1 - ly,
               hx = 1 - lx;
  return hy * hx * p[y0 * W + x0] + hy * lx * p[y0 * W + x1] + ly * hx * p[y1 * W + x0] +
         ly * lx * p[y1 * W + x1];
}

Result<Outputs> roi_align(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* xt, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* rois_t, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx_t, c.need(2));
  if (xt->shape.size() != 4 || rois_t->shape.size() != 2 || rois_t->shape[1] != 4 ||
      idx_t->element_count() != rois_t->shape[0])
    return c.invalid("X, rois and batch_indices must be [N,C,H,W], [R,4] and [R]");
  const int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3],
                R = rois_t->shape[0];
  if (H < 1 || W < 1) return c.invalid("X " + shape_to_string(xt->shape) + " has an empty plane");
  const int64_t oh = c.attr_int("output_height", 1), ow = c.attr_int("output_width", 1);
  const int64_t ratio = c.attr_int("sampling_ratio", 0);
  const double scale = c.attr_float("spatial_scale", 1.0f);
  const bool half_pixel =
      c.attr_string("coordinate_transformation_mode",
                    c.opset >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel";
  const bool max_mode = c.attr_string("mode", "avg") == "max";
  if (oh < 1 || ow < 1 || ratio < 0)
    return c.invalid("output sizes must be positive, sampling_ratio >= 0");
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kF32, {R, C, oh, ow}));
  const Tensor x = cast_tensor(*xt, DType::kF32);
  const std::vector<float> rois = to_float_vector(*rois_t);
  const std::vector<int64_t> batch = to_int64_vector(*idx_t);
  const double offset = half_pixel ? 0.5 : 0.0;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = batch[static_cast<size_t>(r)];
    if (n < 0 || n >= N) return c.invalid("batch index " + std::to_string(n) + " is out of range");
    const float* q = rois.data() + r * 4;
    const double x0 = q[0] * scale - offset, y0 = q[1] * scale - offset;
    double rw = q[2] * scale - offset - x0, rh = q[3] * scale - offset - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
    // Adaptive sampling grows with the roi: bound the work (rois far outside any image).
    const double gh_d =
        ratio > 0 ? static_cast<double>(ratio) : std::ceil(rh / static_cast<double>(oh));
    const double gw_d =
        ratio > 0 ? static_cast<double>(ratio) : std::ceil(rw / static_cast<double>(ow));
    if (!std::isfinite(x0) || !std::isfinite(y0) ||
        !(std::max(gh_d, 0.0) * std::max(gw_d, 0.0) * static_cast<double>(oh * ow * C) < 1e9))
      return c.invalid("roi " + std::to_string(r) + " is not finite or needs too many samples");
    const int64_t gh = std::max<int64_t>(0, static_cast<int64_t>(gh_d));
    const int64_t gw = std::max<int64_t>(0, static_cast<int64_t>(gw_d));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < C; ++ch) {
      const float* plane = x.as<float>().data() + (n * C + ch) * H * W;
      for (int64_t py = 0; py < oh; ++py)
        for (int64_t px = 0; px < ow; ++px) {
          double acc = max_mode ? -std::numeric_limits<double>::infinity() : 0.0;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              const double yy = y0 + static_cast<double>(py) * bh +
                                (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
              const double xx = x0 + static_cast<double>(px) * bw +
                                (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
              const double v = roi_sample(plane, H, W, yy, xx);
              acc = max_mode ? std::max(acc, v) : acc + v;
            }
          if (!max_mode) acc /= count;
          if (gh * gw == 0) acc = 0;
          out.as<float>()[static_cast<size_t>(((r * C + ch) * oh + py) * ow + px)] =
              static_cast<float>(acc);
        }
    }
  }
  return one(std::move(out));
}

// Reflects coordinate v into [lo, hi] (GridSample's reflection padding).
double reflect(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (v < lo) {
    const double d = lo - v;
    const auto flips = static_cast<int64_t>(d / range);
    const double extra = d - static_cast<double>(flips) * range;
    return flips % 2 == 0 ? lo + extra : hi - extra;
  }
  if (v > hi) {
    const double d = v - hi;
    const auto flips = static_cast<int64_t>(d / range);
    const double extra = d - static_cast<double>(flips) * range;
    return flips % 2 == 0 ? hi - extra : lo + extra;
  }
  return v;
}

Result<Outputs> grid_sample(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* xt, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* gt, c.need(1));
  if (xt->shape.size() != 4 || gt->shape.size() != 4 || gt->shape[3] != 2 ||
      gt->shape[0] != xt->shape[0])
    return c.invalid("X and grid must be [N,C,H,W] and [N,Ho,Wo,2]");
  const std::string mode = c.attr_string("mode", "bilinear"),
                    padding = c.attr_string("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return c.unsupported("mode '" + mode + "'");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    return c.unsupported("padding_mode '" + padding + "'");
  const bool align = c.attr_int("align_corners", 0) != 0;
  const int64_t N = xt->shape[0], C = xt->shape[1], H = xt->shape[2], W = xt->shape[3],
                Ho = gt->shape[1], Wo = gt->shape[2];
  if (H < 1 || W < 1) return c.invalid("X " + shape_to_string(xt->shape) + " has an empty plane");
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kF32, {N, C, Ho, Wo}));
  const Tensor x = cast_tensor(*xt, DType::kF32);
  const std::vector<float> grid = to_float_vector(*gt);
  auto denorm = [&](double g, int64_t len) {
    return align ? (g + 1) / 2 * static_cast<double>(len - 1)
                 : ((g + 1) * static_cast<double>(len) - 1) / 2;
  };
  const double xlo = align ? 0 : -0.5,
               xhi = align ? static_cast<double>(W - 1) : static_cast<double>(W) - 0.5;
  const double ylo = align ? 0 : -0.5,
               yhi = align ? static_cast<double>(H - 1) : static_cast<double>(H) - 0.5;
  auto pixel = [&](const float* plane, int64_t yi, int64_t xi) -> double {
    if (padding == "zeros")
      return yi < 0 || yi >= H || xi < 0 || xi >= W ? 0.0 : plane[yi * W + xi];
    if (padding == "reflection") {
      xi = static_cast<int64_t>(reflect(static_cast<double>(xi), xlo, xhi));
      yi = static_cast<int64_t>(reflect(static_cast<double>(yi), ylo, yhi));
    }
    return plane[std::clamp<int64_t>(yi, 0, H - 1) * W + std::clamp<int64_t>(xi, 0, W - 1)];
  };
  auto cubic = [](double t) {
    const double A = -0.75, a = std::fabs(t);
    return a <= 1  ? ((A + 2) * a - (A + 3)) * a * a + 1
           : a < 2 ? ((A * a - 5 * A) * a + 8 * A) * a - 4 * A
                   : 0.0;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oy = 0; oy < Ho; ++oy)
      for (int64_t ox = 0; ox < Wo; ++ox) {
        const float* g = grid.data() + ((n * Ho + oy) * Wo + ox) * 2;
        double xx = denorm(g[0], W), yy = denorm(g[1], H);
        if (mode != "bicubic") {
          if (padding == "border")
            xx = std::clamp(xx, 0.0, static_cast<double>(W - 1)),
            yy = std::clamp(yy, 0.0, static_cast<double>(H - 1));
          if (padding == "reflection") xx = reflect(xx, xlo, xhi), yy = reflect(yy, ylo, yhi);
        }
        for (int64_t ch = 0; ch < C; ++ch) {
          const float* plane = x.as<float>().data() + (n * C + ch) * H * W;
          double v = 0;
          if (mode == "nearest") {
            v = pixel(plane, static_cast<int64_t>(std::nearbyint(yy)),
                      static_cast<int64_t>(std::nearbyint(xx)));
          } else if (mode == "bilinear") {
            const double fx = std::floor(xx), fy = std::floor(yy), lx = xx - fx, ly = yy - fy;
            const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
            v = (1 - ly) * ((1 - lx) * pixel(plane, y0, x0) + lx * pixel(plane, y0, x0 + 1)) +
                ly * ((1 - lx) * pixel(plane, y0 + 1, x0) + lx * pixel(plane, y0 + 1, x0 + 1));
          } else {
            const double fx = std::floor(xx), fy = std::floor(yy), tx = xx - fx, ty = yy - fy;
            const auto x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
            for (int64_t i = 0; i < 4; ++i)
              for (int64_t j = 0; j < 4; ++j)
                v += cubic(ty + 1 - static_cast<double>(i)) *
                     cubic(tx + 1 - static_cast<double>(j)) * pixel(plane, y0 + i, x0 + j);
          }
          out.as<float>()[static_cast<size_t>(((n * C + ch) * Ho + oy) * Wo + ox)] =
              static_cast<float>(v);
        }
      }
  return one(std::move(out));
}

Result<Outputs> max_unpool(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* idx, c.need(1));
  if (x->shape.size() < 3 || idx->shape != x->shape)
    return c.invalid("X and I must be [N, C, D...] of one shape");
  const size_t rank = x->shape.size() - 2;
  auto k = c.attr_ints("kernel_shape");
  if (!k || k->size() != rank) return c.invalid("kernel_shape must have one value per spatial dim");
  const Shape strides = c.attr_ints("strides").value_or(Shape(rank, 1));
  const Shape pads = c.attr_ints("pads").value_or(Shape(2 * rank, 0));
  if (strides.size() != rank || pads.size() != 2 * rank)
    return c.invalid("strides or pads have the wrong length");
  Shape natural{x->shape[0], x->shape[1]};
  for (size_t d = 0; d < rank; ++d)
    natural.push_back((x->shape[d + 2] - 1) * strides[d] + (*k)[d] - pads[d] - pads[rank + d]);
  // Indices address the natural (unpadded) output; output_shape may only enlarge it, and the
  // values keep their coordinates (the ONNX reference).
  Shape shape = natural;
  if (const Tensor* os = c.in(2); os && os->element_count() > 0) {
    shape = to_int64_vector(*os);
    if (shape.size() != x->shape.size()) return c.invalid("output_shape has the wrong rank");
  }
  for (size_t d = 0; d < shape.size(); ++d)
    if (natural[d] < 0 || shape[d] < natural[d])
      return c.invalid("output shape " + shape_to_string(shape) + " is smaller than " +
                       shape_to_string(natural));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  const std::vector<int64_t> ids = to_int64_vector(*idx);
  const Shape from = strides_of(natural), to = strides_of(shape);
  const int64_t n_total = numel(natural);
  const size_t es = dtype_size(x->dtype);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n_total)
      return c.invalid("index " + std::to_string(ids[i]) + " is outside the output");
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d) at += ids[i] / from[d] % natural[d] * to[d];
    std::memcpy(out.data.data() + static_cast<size_t>(at) * es, x->data.data() + i * es, es);
  }
  return one(std::move(out));
}

}  // namespace

void register_vision(KernelTable& t) {
  t["NonMaxSuppression"] = non_max_suppression;
  t["RoiAlign"] = roi_align;
  t["GridSample"] = grid_sample;
  t["MaxUnpool"] = max_unpool;
}

}  // namespace npu::host
