#include "weight_rounding.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lower.h"

namespace npu::compiler {

namespace {

constexpr int64_t kMaxK = 2304;  // H is K×K doubles: 42 MB at this bound
// Output positions sampled per layer (spread evenly over the samples and their pixels): the
// statistics of H settle long before, and H costs positions·K²/2 multiply-adds.
constexpr int64_t kMaxPositions = 8192;

bool roundable(const Graph& g, const ConvLayer& c) {
  return c.weight_input < 0 && !c.transposed && !c.three_d && !c.one_d && !c.int32_output && c.weight_scales.empty() &&
         !c.weights.empty() && c.float_weights.empty() && g.value(c.input).shape.size() == 4 &&
         (c.depthwise ? c.KH * c.KW : c.C * c.KH * c.KW) <= kMaxK;
}

// E[x xᵀ] of a conv's input patches: one K×K matrix (dense conv, K = C·KH·KW, patch index
// (c·KH + kh)·KW + kw) or one per input channel (depthwise, K = KH·KW). Padding taps read 0.
struct Hessians {
  int64_t K = 0;
  std::vector<std::vector<double>> h;  // per group, K×K row-major (upper triangle filled)
  double positions = 0;
};

void accumulate(Hessians& hs, const ConvLayer& c, const Tensor& t, int64_t quota) {
  const auto x = t.as<float>();
  const int64_t n = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
  const int64_t total = n * c.OH * c.OW;
  const int64_t step = std::max<int64_t>(1, (total + quota - 1) / std::max<int64_t>(quota, 1));
  const int64_t groups = static_cast<int64_t>(hs.h.size()), cin = c.depthwise ? 1 : C, K = hs.K;
  std::vector<double> patch(static_cast<size_t>(K));
  for (int64_t p = 0; p < total; p += step) {
    const int64_t b = p / (c.OH * c.OW), oh = p / c.OW % c.OH, ow = p % c.OW;
    for (int64_t gi = 0; gi < groups; ++gi) {
      for (int64_t ci = 0; ci < cin; ++ci) {
        const int64_t ch = c.depthwise ? gi : ci;
        for (int64_t kh = 0; kh < c.KH; ++kh)
          for (int64_t kw = 0; kw < c.KW; ++kw) {
            const int64_t ih = oh * c.stride_h - c.pad_t + kh * c.dil_h, iw = ow * c.stride_w - c.pad_l + kw * c.dil_w;
            const bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
            patch[static_cast<size_t>((ci * c.KH + kh) * c.KW + kw)] =
                in ? x[static_cast<size_t>(((b * C + ch) * H + ih) * W + iw)] : 0.0;
          }
      }
      double* h = hs.h[static_cast<size_t>(gi)].data();
      for (int64_t i = 0; i < K; ++i) {
        const double xi = patch[static_cast<size_t>(i)];
        if (xi == 0) continue;
        double* row = h + i * K;
        for (int64_t j = i; j < K; ++j) row[j] += xi * patch[static_cast<size_t>(j)];
      }
    }
    hs.positions += 1;
  }
}

// In-place lower Cholesky factor of the K×K matrix a (its lower triangle is read). False
// when a is not positive definite.
bool cholesky(std::vector<double>& a, int64_t K) {
  for (int64_t j = 0; j < K; ++j) {
    double d = a[static_cast<size_t>(j * K + j)];
    for (int64_t k = 0; k < j; ++k) d -= a[static_cast<size_t>(j * K + k)] * a[static_cast<size_t>(j * K + k)];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[static_cast<size_t>(j * K + j)] = l;
    for (int64_t i = j + 1; i < K; ++i) {
      double s = a[static_cast<size_t>(i * K + j)];
      for (int64_t k = 0; k < j; ++k) s -= a[static_cast<size_t>(i * K + k)] * a[static_cast<size_t>(j * K + k)];
      a[static_cast<size_t>(i * K + j)] = s / l;
    }
    for (int64_t k = j + 1; k < K; ++k) a[static_cast<size_t>(j * K + k)] = 0;
  }
  return true;
}

// The upper factor U of H⁻¹ = Uᵀ U (row-major K×K), for H symmetric positive definite
// (full matrix given). Empty when a factorisation fails.
std::vector<double> inverse_upper_factor(std::vector<double> h, int64_t K) {
  if (!cholesky(h, K)) return {};
  // L⁻¹ by forward substitution, then H⁻¹ = L⁻ᵀ L⁻¹.
  std::vector<double> li(static_cast<size_t>(K * K), 0.0);
  for (int64_t j = 0; j < K; ++j) {
    li[static_cast<size_t>(j * K + j)] = 1.0 / h[static_cast<size_t>(j * K + j)];
    for (int64_t i = j + 1; i < K; ++i) {
      double s = 0;
      for (int64_t k = j; k < i; ++k) s += h[static_cast<size_t>(i * K + k)] * li[static_cast<size_t>(k * K + j)];
      li[static_cast<size_t>(i * K + j)] = -s / h[static_cast<size_t>(i * K + i)];
    }
  }
  std::vector<double> inv(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t k = i; k < K; ++k) s += li[static_cast<size_t>(k * K + i)] * li[static_cast<size_t>(k * K + j)];
      inv[static_cast<size_t>(i * K + j)] = s;
      inv[static_cast<size_t>(j * K + i)] = s;
    }
  if (!cholesky(inv, K)) return {};
  std::vector<double> u(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = i; j < K; ++j) u[static_cast<size_t>(i * K + j)] = inv[static_cast<size_t>(j * K + i)];
  return u;
}

// Σ_rows eᵀ H e for the rows' errors e = w − rounded (H's upper triangle, symmetric).
double output_error(const std::vector<double>& h, int64_t K, const std::vector<double>& e, int64_t rows) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* er = e.data() + r * K;
    for (int64_t i = 0; i < K; ++i) {
      double s = h[static_cast<size_t>(i * K + i)] * er[i] * 0.5;
      for (int64_t j = i + 1; j < K; ++j) s += h[static_cast<size_t>(i * K + j)] * er[j];
      total += 2 * er[i] * s;
    }
  }
  return total;
}

// Rounds `rows` rows of K weights (w, row-major) sharing the input statistics `hu` (upper
// triangle of E[x xᵀ]) onto their per-row grids `scales`, with error feedback; a row's
// largest |w| keeps the code ±127. -> the rounded values (code·scale), or empty when H
// cannot be factorised. `*gain` += log ratio of the output error, nearest over this.
std::vector<double> round_rows(const std::vector<double>& w, const std::vector<double>& hu, int64_t K, int64_t rows,
                               const std::vector<float>& scales, double* rtn_err, double* gptq_err) {
  std::vector<double> h(static_cast<size_t>(K * K));
  double mean_diag = 0;
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = i; j < K; ++j) h[static_cast<size_t>(i * K + j)] = h[static_cast<size_t>(j * K + i)] = hu[static_cast<size_t>(i * K + j)];
  for (int64_t i = 0; i < K; ++i) mean_diag += h[static_cast<size_t>(i * K + i)];
  mean_diag /= static_cast<double>(K);
  if (!(mean_diag > 0)) return {};
  // Columns in decreasing order of their input energy (GPTQ's act-order): the weights that
  // matter most are rounded while the most weights are left to compensate.
  std::vector<int64_t> order(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return h[static_cast<size_t>(a * K + a)] > h[static_cast<size_t>(b * K + b)];
  });
  std::vector<double> hp(static_cast<size_t>(K * K));
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < K; ++j)
      hp[static_cast<size_t>(i * K + j)] = h[static_cast<size_t>(order[static_cast<size_t>(i)] * K + order[static_cast<size_t>(j)])];
  std::vector<double> u;
  // A channel that never fires makes H singular: dampen by 1 % of the mean diagonal (GPTQ's
  // choice), more if that is not enough.
  for (double damp = 0.01; u.empty() && damp <= 10; damp *= 10) {
    std::vector<double> hd = hp;
    for (int64_t i = 0; i < K; ++i) {
      double& d = hd[static_cast<size_t>(i * K + i)];
      if (d == 0) d = mean_diag;
      d += damp * mean_diag;
    }
    u = inverse_upper_factor(std::move(hd), K);
  }
  if (u.empty()) return {};
  std::vector<double> out(static_cast<size_t>(rows * K)), e_rtn(static_cast<size_t>(rows * K)), e_q(static_cast<size_t>(rows * K));
  std::vector<double> row(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    const double s = scales[static_cast<size_t>(r)];
    int64_t forced = 0;
    for (int64_t i = 0; i < K; ++i) {
      row[static_cast<size_t>(i)] = w[static_cast<size_t>(r * K + order[static_cast<size_t>(i)])];
      if (std::fabs(row[static_cast<size_t>(i)]) > std::fabs(row[static_cast<size_t>(forced)])) forced = i;
    }
    const double wmax = row[static_cast<size_t>(forced)];
    for (int64_t i = 0; i < K; ++i) {
      const double wi = row[static_cast<size_t>(i)];
      const double code = i == forced && wmax != 0 ? (wmax < 0 ? -127.0 : 127.0) : std::clamp(std::nearbyint(wi / s), -127.0, 127.0);
      const double q = code * s;
      const double e = (wi - q) / u[static_cast<size_t>(i * K + i)];
      for (int64_t j = i + 1; j < K; ++j) row[static_cast<size_t>(j)] -= e * u[static_cast<size_t>(i * K + j)];
      const int64_t col = order[static_cast<size_t>(i)];
      const double w0 = w[static_cast<size_t>(r * K + col)];
      out[static_cast<size_t>(r * K + col)] = q;
      e_q[static_cast<size_t>(r * K + col)] = w0 - q;
      e_rtn[static_cast<size_t>(r * K + col)] = w0 - std::clamp(std::nearbyint(w0 / s), -127.0, 127.0) * s;
    }
  }
  *rtn_err += output_error(hu, K, e_rtn, rows);
  *gptq_err += output_error(hu, K, e_q, rows);
  return out;
}

}  // namespace

Result<WeightRoundingFacts> round_conv_weights(const Graph& g, std::vector<PartitionStep>& steps,
                                               const std::vector<std::vector<Tensor>>& samples) {
  WeightRoundingFacts facts;
  std::vector<ConvLayer*> convs;
  for (PartitionStep& s : steps)
    if (s.on_npu)
      for (NpuLayer& op : s.ops)
        if (auto* c = std::get_if<ConvLayer>(&op); c && roundable(g, *c)) convs.push_back(c);
  if (convs.empty() || samples.empty()) return facts;
  std::map<const ConvLayer*, Hessians> stats;
  for (ConvLayer* c : convs) {
    Hessians& hs = stats[c];
    hs.K = c->depthwise ? c->KH * c->KW : c->C * c->KH * c->KW;
    hs.h.assign(static_cast<size_t>(c->depthwise ? c->C : 1), std::vector<double>(static_cast<size_t>(hs.K * hs.K), 0.0));
  }
  const int64_t quota = kMaxPositions / static_cast<int64_t>(samples.size()) + 1;
  for (const auto& sample : samples) {
    NPU_ASSIGN_OR_RETURN(const std::vector<Tensor> env, run_reference(g, sample));
    for (ConvLayer* c : convs) {
      const Tensor& t = env[static_cast<size_t>(c->input)];
      if (t.dtype != DType::kF32 || t.shape.size() != 4 || t.shape[1] != c->C || t.data.empty()) continue;
      accumulate(stats[c], *c, t, quota);
    }
  }
  double gain = 0;
  for (ConvLayer* c : convs) {
    Hessians& hs = stats[c];
    if (hs.positions == 0) continue;
    const std::vector<float> scales = conv_weight_scales(*c);
    const int64_t K = hs.K, groups = static_cast<int64_t>(hs.h.size());
    const int64_t rows_per_group = c->Cout / groups;
    std::vector<float> rounded(c->weights.size());
    double rtn_err = 0, gptq_err = 0;
    bool ok = true;
    for (int64_t gi = 0; gi < groups && ok; ++gi) {
      const size_t base = static_cast<size_t>(gi * rows_per_group * K);
      std::vector<double> w(c->weights.begin() + static_cast<std::ptrdiff_t>(base),
                            c->weights.begin() + static_cast<std::ptrdiff_t>(base + static_cast<size_t>(rows_per_group * K)));
      std::vector<float> s(scales.begin() + gi * rows_per_group, scales.begin() + (gi + 1) * rows_per_group);
      const std::vector<double> q = round_rows(w, hs.h[static_cast<size_t>(gi)], K, rows_per_group, s, &rtn_err, &gptq_err);
      ok = !q.empty();
      for (size_t i = 0; i < q.size(); ++i) rounded[base + i] = static_cast<float>(q[i]);
    }
    // Keep nearest rounding where error feedback does not lower the calibration output error
    // (it can only lose through the forced ±127 code or the damping).
    if (!ok || !(gptq_err < rtn_err)) continue;
    c->float_weights = std::move(c->weights);
    c->weights = std::move(rounded);
    gain += 10 * std::log10(rtn_err / std::max(gptq_err, 1e-300));
    ++facts.layers;
  }
  if (facts.layers) facts.gain_db = gain / facts.layers;
  return facts;
}

}  // namespace npu::compiler
