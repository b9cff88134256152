// Recurrent operators: RNN, GRU, LSTM (forward, reverse, bidirectional; layout 0 and 1;
// sequence_lens; initial states; LSTM peepholes and input_forget; clip; the ONNX activation
// functions with activation_alpha/beta).
#include <algorithm>
#include <cmath>

#include "kernel.h"

namespace npu::host {
namespace {

enum class Cell { kRnn, kGru, kLstm };

struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
  float operator()(float x) const {
    if (name == "Sigmoid") return 1.0f / (1.0f + std::exp(-x));
    if (name == "Tanh") return std::tanh(x);
    if (name == "Relu") return std::max(0.0f, x);
    if (name == "Affine") return alpha * x + beta;
    if (name == "LeakyRelu") return x < 0 ? alpha * x : x;
    if (name == "ThresholdedRelu") return x > alpha ? x : 0.0f;
    if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
    if (name == "HardSigmoid") return std::clamp(alpha * x + beta, 0.0f, 1.0f);
    if (name == "Elu") return x < 0 ? alpha * std::expm1(x) : x;
    if (name == "Softsign") return x / (1 + std::fabs(x));
    return std::log1p(std::exp(x));  // Softplus
  }
};

// `per_dir` activations per direction, from the attributes or the defaults.
Result<std::vector<Activation>> activations(const OpContext& c,
                                            const std::vector<std::string>& defaults,
                                            size_t directions) {
  std::vector<std::string> names;
  if (const Attribute* a = c.attr("activations")) names = a->strings;
  if (names.empty())
    for (size_t d = 0; d < directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != defaults.size() * directions)
    return c.invalid("activations lists " + std::to_string(names.size()) + " functions, expected " +
                     std::to_string(defaults.size() * directions));
  const Attribute* al = c.attr("activation_alpha");
  const Attribute* be = c.attr("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const std::string& n : names) {
    Activation a{n};
    const bool has_alpha = n == "Affine" || n == "LeakyRelu" || n == "ThresholdedRelu" ||
                           n == "ScaledTanh" || n == "HardSigmoid" || n == "Elu";
    const bool has_beta = n == "Affine" || n == "ScaledTanh" || n == "HardSigmoid";
    static const char* const kKnown[] = {
        "Sigmoid",    "Tanh",        "Relu", "Affine",   "LeakyRelu", "ThresholdedRelu",
        "ScaledTanh", "HardSigmoid", "Elu",  "Softsign", "Softplus"};
    if (std::find(std::begin(kKnown), std::end(kKnown), n) == std::end(kKnown))
      return c.unsupported("activation '" + n + "'");
    const float default_alpha = n == "LeakyRelu" ? 0.01f : n == "HardSigmoid" ? 0.2f : 1.0f;
    const float default_beta = n == "HardSigmoid" ? 0.5f : n == "Affine" ? 0.0f : 1.0f;
    a.alpha = has_alpha && al && ai < al->floats.size() ? al->floats[ai++] : default_alpha;
    a.beta = has_beta && be && bi < be->floats.size() ? be->floats[bi++] : default_beta;
    out.push_back(a);
  }
  return out;
}

// Checks that an optional float input has `shape`; returns its values or `fill`.
Result<std::vector<float>> param(const OpContext& c, size_t k, const Shape& shape, float fill) {
  const Tensor* t = c.in(k);
  if (!t || t->element_count() == 0)
    return std::vector<float>(static_cast<size_t>(numel(shape)), fill);
  if (t->shape != shape)
    return c.invalid("input " + std::to_string(k) + " has shape " + shape_to_string(t->shape) +
                     ", expected " + shape_to_string(shape));
  return to_float_vector(*t);
}

template <Cell kCell>
Result<Outputs> recurrent(const OpContext& c) {
  constexpr int64_t G = kCell == Cell::kRnn ? 1 : kCell == Cell::kGru ? 3 : 4;
  NPU_ASSIGN_OR_RETURN(const Tensor* xt, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* wt, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* rt, c.need(2));
  if (xt->dtype != DType::kF32 || wt->dtype != DType::kF32 || rt->dtype != DType::kF32)
    return c.unsupported("non-float X, W or R");
  const bool batch_major = c.attr_int("layout", 0) != 0;
  const std::string direction = c.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return c.invalid("direction '" + direction + "' is not forward, reverse or bidirectional");
  const int64_t D = direction == "bidirectional" ? 2 : 1;
  if (xt->shape.size() != 3) return c.invalid("X must be 3-D");
  const int64_t S = xt->shape[batch_major ? 1 : 0], Bt = xt->shape[batch_major ? 0 : 1],
                I = xt->shape[2];
  const int64_t H = c.attr_int("hidden_size", wt->shape.size() == 3 ? wt->shape[1] / G : 0);
  if (H < 1 || wt->shape != Shape{D, G * H, I} || rt->shape != Shape{D, G * H, H})
    return c.invalid("W " + shape_to_string(wt->shape) + " and R " + shape_to_string(rt->shape) +
                     " do not match X " + shape_to_string(xt->shape) + ", hidden_size " +
                     std::to_string(H) + " and " + std::to_string(D) + " direction(s)");
  const Shape state_shape = batch_major ? Shape{Bt, D, H} : Shape{D, Bt, H};
  NPU_ASSIGN_OR_RETURN(std::vector<float> b, param(c, 3, {D, 2 * G * H}, 0.0f));
  std::vector<int64_t> lens(static_cast<size_t>(Bt), S);
  if (const Tensor* sl = c.in(4); sl && sl->element_count() > 0) {
    if (sl->element_count() != Bt) return c.invalid("sequence_lens must have one value per batch");
    lens = to_int64_vector(*sl);
    for (auto& l : lens) l = std::clamp<int64_t>(l, 0, S);
  }
  NPU_ASSIGN_OR_RETURN(std::vector<float> h0, param(c, 5, state_shape, 0.0f));
  std::vector<float> c0, peep;
  if (kCell == Cell::kLstm) {
    NPU_ASSIGN_OR_RETURN(c0, param(c, 6, state_shape, 0.0f));
    NPU_ASSIGN_OR_RETURN(peep, param(c, 7, {D, 3 * H}, 0.0f));
  }
  const std::vector<std::string> defaults =
      kCell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
      : kCell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  NPU_ASSIGN_OR_RETURN(std::vector<Activation> acts,
                       activations(c, defaults, static_cast<size_t>(D)));
  const Attribute* clip_attr = c.attr("clip");
  const float clip = clip_attr ? c.attr_float("clip", 0) : std::numeric_limits<float>::infinity();
  const bool linear_before_reset = c.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = c.attr_int("input_forget", 0) != 0;

  const auto x = xt->as<float>();
  const auto w = wt->as<float>();
  const auto r = rt->as<float>();
  Tensor y = Tensor::zeros(DType::kF32, batch_major ? Shape{Bt, S, D, H} : Shape{S, D, Bt, H});
  Tensor yh = Tensor::zeros(DType::kF32, state_shape), yc = Tensor::zeros(DType::kF32, state_shape);
  auto state_at = [&](int64_t d, int64_t bi) {
    return static_cast<size_t>(batch_major ? (bi * D + d) * H : (d * Bt + bi) * H);
  };
  std::vector<float> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H)),
      h(static_cast<size_t>(H)), cs(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
  // gates[g] = M[d][g*H + j] · v + bias[j]
  auto affine = [&](std::span<const float> m, int64_t cols, const float* v, const float* bias,
                    std::vector<float>& out, int64_t d, int64_t first_row, int64_t rows) {
    for (int64_t j = first_row; j < first_row + rows; ++j) {
      double acc = bias[j];
      const float* row = m.data() + (d * G * H + j) * cols;
      for (int64_t k = 0; k < cols; ++k) acc += static_cast<double>(row[k]) * v[k];
      out[static_cast<size_t>(j)] = static_cast<float>(acc);
    }
  };
  auto clipped = [&](float v) { return std::clamp(v, -clip, clip); };
  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const Activation* f = &acts[static_cast<size_t>(d) * defaults.size()];
    const float* wb = b.data() + d * 2 * G * H;
    const float* rb = wb + G * H;
    for (int64_t bi = 0; bi < Bt; ++bi) {
      std::copy_n(h0.begin() + static_cast<int64_t>(state_at(d, bi)), H, h.begin());
      if (kCell == Cell::kLstm)
        std::copy_n(c0.begin() + static_cast<int64_t>(state_at(d, bi)), H, cs.begin());
      const int64_t len = lens[static_cast<size_t>(bi)];
      for (int64_t step = 0; step < len; ++step) {
        const int64_t t = reverse ? len - 1 - step : step;
        const float* xv = x.data() + (batch_major ? (bi * S + t) : (t * Bt + bi)) * I;
        affine(w, I, xv, wb, xw, d, 0, G * H);
        affine(r, H, h.data(), rb, hr, d, 0, G * H);
        if constexpr (kCell == Cell::kRnn) {
          for (int64_t j = 0; j < H; ++j)
            h[static_cast<size_t>(j)] =
                f[0](clipped(xw[static_cast<size_t>(j)] + hr[static_cast<size_t>(j)]));
        } else if constexpr (kCell == Cell::kGru) {
          std::vector<float> z(static_cast<size_t>(H)), rr(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) {
            const auto k = static_cast<size_t>(j);
            z[k] = f[0](clipped(xw[k] + hr[k]));
            rr[k] = f[0](clipped(xw[k + static_cast<size_t>(H)] + hr[k + static_cast<size_t>(H)]));
          }
          if (!linear_before_reset) {
            for (int64_t j = 0; j < H; ++j)
              rh[static_cast<size_t>(j)] = rr[static_cast<size_t>(j)] * h[static_cast<size_t>(j)];
            affine(r, H, rh.data(), rb, hr, d, 2 * H, H);
          }
          for (int64_t j = 0; j < H; ++j) {
            const auto k = static_cast<size_t>(j), kh = static_cast<size_t>(2 * H + j);
            const float pre = linear_before_reset ? xw[kh] + rr[k] * hr[kh] : xw[kh] + hr[kh];
            const float ht = f[1](clipped(pre));
            h[k] = (1 - z[k]) * ht + z[k] * h[k];
          }
        } else {
          const float* p = peep.data() + d * 3 * H;
          for (int64_t j = 0; j < H; ++j) {
            const auto k = static_cast<size_t>(j), uh = static_cast<size_t>(H);
            const float i = f[0](clipped(xw[k] + hr[k] + p[j] * cs[k]));
            float fg = f[0](clipped(xw[k + 2 * uh] + hr[k + 2 * uh] + p[2 * H + j] * cs[k]));
            if (input_forget) fg = 1 - i;
            const float cand = f[1](clipped(xw[k + 3 * uh] + hr[k + 3 * uh]));
            cs[k] = fg * cs[k] + i * cand;
            const float o = f[0](clipped(xw[k + uh] + hr[k + uh] + p[H + j] * cs[k]));
            h[k] = o * f[2](cs[k]);
          }
        }
        float* yo = y.as<float>().data() +
                    (batch_major ? ((bi * S + t) * D + d) * H : ((t * D + d) * Bt + bi) * H);
        std::copy(h.begin(), h.end(), yo);
      }
      std::copy(h.begin(), h.end(), yh.as<float>().begin() + static_cast<int64_t>(state_at(d, bi)));
      if (kCell == Cell::kLstm)
        std::copy(cs.begin(), cs.end(),
                  yc.as<float>().begin() + static_cast<int64_t>(state_at(d, bi)));
    }
  }
  Outputs out;
  out.push_back(std::move(y));
  out.push_back(std::move(yh));
  if (kCell == Cell::kLstm) out.push_back(std::move(yc));
  return out;
}

}  // namespace

void register_rnn(KernelTable& t) {
  t["RNN"] = recurrent<Cell::kRnn>;
  t["GRU"] = recurrent<Cell::kGru>;
  t["LSTM"] = recurrent<Cell::kLstm>;
}

}  // namespace npu::host
