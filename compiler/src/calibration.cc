#include "calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>

namespace npu::compiler {

Result<CalibrationMethod> parse_calibration_method(const std::string& text) {
  CalibrationMethod m;
  if (text == "minmax") return m;
  if (text == "entropy" || text == "mse") {
    m.kind = text == "mse" ? CalibrationMethod::Kind::kMse : CalibrationMethod::Kind::kEntropy;
    return m;
  }
  if (text == "percentile" || text.rfind("percentile=", 0) == 0) {
    m.kind = CalibrationMethod::Kind::kPercentile;
    if (text != "percentile") {
      const std::string p = text.substr(11);
      char* end = nullptr;
      m.percentile = std::strtod(p.c_str(), &end);
      if (p.empty() || *end != '\0' || !(m.percentile > 0 && m.percentile <= 100))
        return make_error(
            StatusCode::kInvalidArgument,
            "--calibration " + text +
                ": the percentile must be a number in (0, 100], e.g. percentile=99.99");
    }
    return m;
  }
  return make_error(StatusCode::kInvalidArgument,
                    "--calibration " + text + ": expected minmax, percentile[=P], entropy or mse");
}

void AbsHistogram::add(std::span<const float> values) {
  const double scale = limit_ > 0 ? static_cast<double>(counts_.size()) / limit_ : 0.0;
  const size_t last = counts_.size() - 1;
  for (float v : values) {
    if (!std::isfinite(v)) continue;
    const double at = std::fabs(static_cast<double>(v)) * scale;
    counts_[at >= static_cast<double>(last) ? last : static_cast<size_t>(at)] += 1;
  }
}

double percentile_threshold(const AbsHistogram& h, double percent) {
  const auto& c = h.counts();
  double total = 0;
  for (double x : c) total += x;
  if (total == 0) return h.limit();
  const double want = total * percent / 100.0;
  double seen = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    seen += c[i];
    // Relative slack: a sum of counts must not miss 100% by a rounding error.
    if (seen >= want * (1 - 1e-12)) return static_cast<double>(i + 1) * h.bin_width();
  }
  return h.limit();
}

double entropy_threshold(const AbsHistogram& h, int quant_bins) {
  const auto& hist = h.counts();
  const int bins = static_cast<int>(hist.size());
  if (quant_bins < 1 || bins < quant_bins) return h.limit();
  double total = 0;
  for (double x : hist) total += x;
  if (total == 0) return h.limit();
  std::vector<double> suffix(static_cast<size_t>(bins) + 1, 0.0);  // mass at bins >= i
  for (int i = bins; i-- > 0;)
    suffix[static_cast<size_t>(i)] =
        suffix[static_cast<size_t>(i) + 1] + hist[static_cast<size_t>(i)];
  double best_kl = std::numeric_limits<double>::infinity();
  int best = bins;
  std::vector<double> p, q;
  for (int i = quant_bins; i <= bins; ++i) {
    // Only tails are clipped: when most of the mass lies beyond a candidate, P collapses into
    // its last bin, Q into the same spike, and the divergence is a meaningless 0 (a sigmoid's
    // output, away from 0, would be clipped at its minimum).
    if (suffix[static_cast<size_t>(i)] > kMaxClippedFraction * total) continue;
    // P: the first i bins, the clipped tail folded into the last one.
    p.assign(hist.begin(), hist.begin() + i);
    p.back() += suffix[static_cast<size_t>(i)];
    // Q: the first i bins merged into quant_bins levels (the last level takes the remainder),
    // each level spread evenly over the bins that were non-empty.
    q.assign(static_cast<size_t>(i), 0.0);
    const int merged = i / quant_bins;
    for (int j = 0; j < quant_bins; ++j) {
      const int start = j * merged, stop = j == quant_bins - 1 ? i : start + merged;
      double mass = 0;
      int nonzero = 0;
      for (int k = start; k < stop; ++k) {
        mass += hist[static_cast<size_t>(k)];
        nonzero += hist[static_cast<size_t>(k)] != 0;
      }
      if (nonzero == 0) continue;
      for (int k = start; k < stop; ++k)
        if (hist[static_cast<size_t>(k)] != 0) q[static_cast<size_t>(k)] = mass / nonzero;
    }
    double psum = 0, qsum = 0;
    for (int k = 0; k < i; ++k) {
      psum += p[static_cast<size_t>(k)];
      qsum += q[static_cast<size_t>(k)];
    }
    if (psum == 0 || qsum == 0) continue;
    // KL(P||Q); a bin P has and Q lacks (the folded tail) gets a small floor, as TensorRT's
    // smoothing does, so the divergence stays finite and grows with the tail's mass.
    constexpr double kFloor = 1e-4;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      const double pk = p[static_cast<size_t>(k)] / psum;
      if (pk == 0) continue;
      const double qk = std::max(q[static_cast<size_t>(k)] / qsum, kFloor / i);
      kl += pk * std::log(pk / qk);
    }
    if (kl < best_kl) {
      best_kl = kl;
      best = i;
    }
  }
  return static_cast<double>(best) * h.bin_width();
}

double mse_threshold(const AbsHistogram& h, double lo, double hi) {
  const auto& c = h.counts();
  const size_t n = c.size();
  const double w = h.bin_width();
  // Suffix sums over bins i >= k of the counts, count·centre and count·centre²: the clipping
  // error at threshold t = k·w is Σ c_i (centre_i − t)² = S2 − 2t·S1 + t²·S0.
  std::vector<double> s0(n + 1, 0.0), s1(n + 1, 0.0), s2(n + 1, 0.0);
  for (size_t i = n; i-- > 0;) {
    const double centre = (static_cast<double>(i) + 0.5) * w;
    s0[i] = s0[i + 1] + c[i];
    s1[i] = s1[i + 1] + c[i] * centre;
    s2[i] = s2[i + 1] + c[i] * centre * centre;
  }
  if (s0[0] == 0) return h.limit();
  double best_t = h.limit(), best = std::numeric_limits<double>::infinity();
  for (size_t k = 1; k <= n; ++k) {
    const double t = static_cast<double>(k) * w;
    const double step = (std::min(hi, t) - std::max(lo, -t)) / 255.0;
    const double clip = k < n ? s2[k] - 2 * t * s1[k] + t * t * s0[k] : 0.0;
    const double err = (s0[0] - s0[k]) * step * step / 12.0 + std::max(clip, 0.0);
    if (err < best) {
      best = err;
      best_t = t;
    }
  }
  return best_t;
}

std::string calibration_method_name(const CalibrationMethod& m) {
  switch (m.kind) {
    case CalibrationMethod::Kind::kMinMax: return "min/max";
    case CalibrationMethod::Kind::kEntropy: return "entropy";
    case CalibrationMethod::Kind::kMse: return "mse";
    case CalibrationMethod::Kind::kPercentile: return "percentile " + std::to_string(m.percentile);
  }
  return "?";
}

std::pair<float, float> calibrated_range(const CalibrationMethod& method, float lo, float hi,
                                         const AbsHistogram* histogram) {
  if (method.kind == CalibrationMethod::Kind::kMinMax || !histogram) return {lo, hi};
  const double t = method.kind == CalibrationMethod::Kind::kPercentile ? percentile_threshold(*histogram, method.percentile)
                   : method.kind == CalibrationMethod::Kind::kMse      ? mse_threshold(*histogram, lo, hi)
                                                                       : entropy_threshold(*histogram);
  const float tf = static_cast<float>(t);
  return {std::max(lo, -tf), std::min(hi, tf)};
}

namespace {

// Per candidate k (grid 2^-k, kSoftmaxGridCodes codes above 0, clip c_k = that · 2^-k): the
// squared error of rounding a softmax output onto it, clipping what lies above c_k.
struct SoftmaxGridErrors {
  std::array<double, kSoftmaxMaxK + 1> err{};
  void add(std::span<const float> p) {
    for (int k = 0; k <= kSoftmaxMaxK; ++k) {
      const double step = std::ldexp(1.0, -k), clip = step * kSoftmaxGridCodes;
      double e = 0;
      for (float x : p) {
        if (std::isnan(x)) continue;
        const double d = x > clip ? x - clip : x - step * std::floor(x / step + 0.5);
        e += d * d;
      }
      err[static_cast<size_t>(k)] += e;
    }
  }
};

}  // namespace

int softmax_output_grid(const std::array<double, kSoftmaxMaxK + 1>& err, float hi) {
  const double top = std::isfinite(hi) && hi > 0 ? std::min<double>(hi, 1.0) : 1.0;
  int best = std::clamp(static_cast<int>(std::floor(std::log2(kSoftmaxGridCodes / top))), 0, kSoftmaxMaxK);
  for (int k = best + 1; k <= kSoftmaxMaxK; ++k)
    if (err[static_cast<size_t>(k)] < err[static_cast<size_t>(best)]) best = k;
  return best;
}

Result<ValueRanges> calibrate(Graph& g, const std::vector<std::vector<Tensor>>& samples,
                              const CalibrationMethod& method) {
  ValueRanges ranges;
  // Softmax outputs: the squared error of each power-of-two grid (softmax_output_grid).
  std::map<int, SoftmaxGridErrors> softmax_outputs;
  for (const Node& n : g.nodes)
    if (n.op == "Softmax" && !n.outputs.empty() && n.outputs[0] >= 0 && !g.value(n.outputs[0]).quant)
      softmax_outputs[n.outputs[0]];
  auto apply_softmax_ranges = [&] {
    for (const auto& [v, grid] : softmax_outputs)
      if (auto r = ranges.find(v); r != ranges.end()) {
        const int k = softmax_output_grid(grid.err, r->second.second);
        r->second.second = std::min(r->second.second, static_cast<float>(std::ldexp(kSoftmaxGridCodes, -k)));
      }
  };
  for (size_t s = 0; s < samples.size(); ++s) {
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (samples[s].size() != g.inputs.size() || samples[s][i].shape != g.value(g.inputs[i]).shape)
        return make_error(StatusCode::kInvalidArgument,
                          "calibration: sample " + std::to_string(s) + ": input " + std::to_string(i) + " ('" +
                              g.value(g.inputs[i]).name + "') must have shape " +
                              shape_to_string(g.value(g.inputs[i]).shape));
    NPU_ASSIGN_OR_RETURN(auto env, run_reference(g, samples[s]));
    for (size_t v = 0; v < env.size(); ++v) {
      if (env[v].data.empty() || env[v].dtype != DType::kF32) continue;
      // NaN (sqrt of a negative, computed on the host) has no place in a range.
      float mn = INFINITY, mx = -INFINITY;
      for (float x : env[v].as<float>())
        if (!std::isnan(x)) {
          mn = std::min(mn, x);
          mx = std::max(mx, x);
        }
      if (mn > mx) continue;  // all NaN
      if (auto so = softmax_outputs.find(static_cast<int>(v)); so != softmax_outputs.end())
        so->second.add(env[v].as<float>());
      auto it = ranges.find(static_cast<int>(v));
      if (it == ranges.end())
        ranges[static_cast<int>(v)] = {mn, mx};
      else
        it->second = {std::min(it->second.first, mn), std::max(it->second.second, mx)};
    }
    // Values the reference computed give host-only values their shapes and dtypes.
    for (size_t v = 0; v < env.size(); ++v)
      if (!env[v].data.empty() || env[v].element_count() == 0) {
        g.values[v].shape = env[v].shape;
        g.values[v].dtype = env[v].dtype;
      }
  }
  if (method.kind == CalibrationMethod::Kind::kMinMax) {
    apply_softmax_ranges();
    return ranges;
  }
  // Second pass: |x| histograms up to each value's absolute maximum, then the method's
  // threshold clips the min/max range. Values with a declared quantisation keep theirs;
  // weights have their own per-channel scales.
  std::map<int, AbsHistogram> histograms;
  for (const auto& [v, range] : ranges)
    if (!g.value(v).quant && !g.is_constant(v))
      histograms.emplace(v, AbsHistogram(std::max(std::fabs(range.first), std::fabs(range.second))));
  for (const auto& sample : samples) {
    NPU_ASSIGN_OR_RETURN(auto env, run_reference(g, sample));
    for (auto& [v, h] : histograms) h.add(env[static_cast<size_t>(v)].as<float>());
  }
  for (auto& [v, h] : histograms) ranges[v] = calibrated_range(method, ranges[v].first, ranges[v].second, &h);
  apply_softmax_ranges();
  return ranges;
}

std::pair<float, float> lut_live_interval(const std::function<float(float)>& f, float lo, float hi, float tolerance) {
  // Sampled finer than any int8 grid over the range, so a step of the grid never hides a
  // change of f.
  constexpr int kSamples = 4096;
  if (!(hi > lo)) return {lo, hi};
  std::vector<double> y(kSamples + 1);
  auto x_at = [&](int i) { return lo + (hi - lo) * static_cast<double>(i) / kSamples; };
  for (int i = 0; i <= kSamples; ++i) y[static_cast<size_t>(i)] = f(static_cast<float>(x_at(i)));
  // Largest i with every y[j <= i] within tolerance of y[i]: track the prefix min/max.
  int a = 0;
  double mn = y[0], mx = y[0];
  for (int i = 1; i <= kSamples; ++i) {
    mn = std::min(mn, y[static_cast<size_t>(i)]);
    mx = std::max(mx, y[static_cast<size_t>(i)]);
    if (mx - y[static_cast<size_t>(i)] > tolerance || y[static_cast<size_t>(i)] - mn > tolerance) break;
    a = i;
  }
  int b = kSamples;
  mn = mx = y[static_cast<size_t>(kSamples)];
  for (int i = kSamples - 1; i >= 0; --i) {
    mn = std::min(mn, y[static_cast<size_t>(i)]);
    mx = std::max(mx, y[static_cast<size_t>(i)]);
    if (mx - y[static_cast<size_t>(i)] > tolerance || y[static_cast<size_t>(i)] - mn > tolerance) break;
    b = i;
  }
  if (a >= b) return {lo, hi};  // f is flat over the whole range: keep it
  return {static_cast<float>(x_at(a)), static_cast<float>(x_at(b))};
}

ValueRanges narrow_ranges_for_lut_readers(const Graph& g, const std::vector<PartitionStep>& steps, ValueRanges& ranges) {
  // Per value: the functions of the tables that read it, with the value each writes.
  struct LutReader {
    const std::function<float(float)>* fn;
    int output;
  };
  std::map<int, std::vector<LutReader>> lut_readers;
  std::set<int> other_readers(g.outputs.begin(), g.outputs.end());
  for (const PartitionStep& s : steps) {
    if (!s.on_npu) {
      for (int v : g.nodes[static_cast<size_t>(s.node)].inputs) other_readers.insert(v);
      continue;
    }
    for (const NpuLayer& op : s.ops) {
      const auto* e = std::get_if<EltLayer>(&op);
      const bool lut = e && e->kind == EltLayer::Kind::kLut && e->inputs.size() == 1 && e->fn;
      for (int v : npu_layer_inputs(op))
        if (lut) lut_readers[v].push_back({&e->fn, e->output});
        else other_readers.insert(v);
      // A table fused into a conv reads the conv's own output (never stored, read by nothing
      // else): its grid is the conv's requantisation target, narrowed the same way.
      if (const auto* c = std::get_if<ConvLayer>(&op); c && c->lut_input >= 0 && c->lut_fn)
        lut_readers[c->lut_input].push_back({&c->lut_fn, c->output});
    }
  }
  ValueRanges narrowed;
  for (const auto& [v, readers] : lut_readers) {
    auto r = ranges.find(v);
    if (other_readers.count(v) || r == ranges.end() || g.value(v).quant || g.value(v).io_codes || g.is_constant(v)) continue;
    const auto [lo, hi] = r->second;
    float a = hi, b = lo;
    for (const LutReader& e : readers) {
      auto out = ranges.find(e.output);
      if (out == ranges.end() || g.value(e.output).quant) {
        a = lo, b = hi;  // a declared output grid: keep the input's range
        break;
      }
      const float step = (std::max(out->second.second, 0.0f) - std::min(out->second.first, 0.0f)) / 255.0f;
      const auto [ra, rb] = lut_live_interval(*e.fn, lo, hi, step / 4);
      a = std::min(a, ra);
      b = std::max(b, rb);
    }
    if (a > lo || b < hi) {
      r->second = {a, b};
      narrowed[v] = {a > lo ? a : -INFINITY, b < hi ? b : INFINITY};
    }
  }
  return narrowed;
}

}  // namespace npu::compiler
