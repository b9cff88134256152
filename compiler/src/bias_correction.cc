#include "bias_correction.h"

#include <algorithm>
#include <cmath>

namespace npu::compiler {

namespace {

// x rounded onto q's int8 grid and back, as the NPU stores it (saturating).
float on_grid(float x, const QParams& q) {
  return q.scale * static_cast<float>(quantize_value(x, q) - q.zero_point);
}

// The convs whose bias this pass may change: constant 2-D weights (Conv or ConvTranspose),
// float output, an input whose rounding is the compiler's own choice.
bool correctable(const Graph& g, const ConvLayer& c) {
  return c.weight_input < 0 && c.bias_input < 0 && !c.three_d && !c.one_d && !c.int32_output &&
         c.weight_scales.empty() && !g.value(c.input).quant && !g.value(c.input).io_codes &&
         g.value(c.input).shape.size() == 4 && !c.weights.empty();
}

// Fraction of the output positions along one axis at which kernel tap k reads inside the
// input (padding taps read the zero point: exact, no rounding error).
std::vector<double> tap_validity(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, int64_t dil) {
  std::vector<double> frac(static_cast<size_t>(kernel), 0.0);
  for (int64_t k = 0; k < kernel; ++k) {
    int64_t valid = 0;
    for (int64_t o = 0; o < out; ++o) {
      const int64_t i = o * stride - pad + k * dil;
      valid += i >= 0 && i < in;
    }
    frac[static_cast<size_t>(k)] = out > 0 ? static_cast<double>(valid) / static_cast<double>(out) : 0.0;
  }
  return frac;
}

}  // namespace

Result<BiasCorrectionFacts> correct_conv_biases(const Graph& g, std::vector<PartitionStep>& steps,
                                                const std::map<int, QParams>& qp,
                                                const std::vector<std::vector<Tensor>>& samples) {
  BiasCorrectionFacts facts;
  // Per corrected input value: its channels' summed error and element count per channel.
  struct Error {
    std::vector<double> sum;
    double count = 0;
  };
  std::map<int, Error> errors;
  std::map<int, const ConvLayer*> fused_producer;  // value -> the conv whose fused table writes it
  for (const PartitionStep& s : steps) {
    if (!s.on_npu) continue;
    for (const NpuLayer& op : s.ops) {
      const auto* c = std::get_if<ConvLayer>(&op);
      if (!c) continue;
      if (c->lut_input >= 0 && c->lut_fn) fused_producer[c->output] = c;
      if (correctable(g, *c) && qp.count(c->input))
        errors[c->input].sum.assign(static_cast<size_t>(g.value(c->input).shape[1]), 0.0);
    }
  }
  if (errors.empty() || samples.empty()) return facts;
  for (const auto& sample : samples) {
    NPU_ASSIGN_OR_RETURN(auto env, run_reference(g, sample));
    for (auto& [v, err] : errors) {
      const Tensor& t = env[static_cast<size_t>(v)];
      if (t.dtype != DType::kF32 || t.shape.size() != 4 || t.data.empty()) continue;
      const QParams& qx = qp.at(v);
      // The producer's fused table: the float conv output requantised onto the table's
      // input grid, looked up, then rounded onto x's grid (the table's entries).
      const ConvLayer* fused = nullptr;
      const Tensor* pre = nullptr;
      if (auto f = fused_producer.find(v); f != fused_producer.end() && qp.count(f->second->lut_input)) {
        const Tensor& y = env[static_cast<size_t>(f->second->lut_input)];
        if (y.dtype == DType::kF32 && y.shape == t.shape) fused = f->second, pre = &y;
      }
      const auto x = t.as<float>();
      const int64_t n = t.shape[0], ch = t.shape[1], hw = t.shape[2] * t.shape[3];
      if (static_cast<int64_t>(err.sum.size()) != ch) continue;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t c = 0; c < ch; ++c) {
          double sum = 0;
          const size_t base = static_cast<size_t>((b * ch + c) * hw);
          for (int64_t i = 0; i < hw; ++i) {
            const float xf = x[base + static_cast<size_t>(i)];
            float xq;
            if (fused) {
              const float y = std::clamp(pre->as<float>()[base + static_cast<size_t>(i)], fused->act_lo, fused->act_hi);
              xq = on_grid(fused->lut_fn(on_grid(y, qp.at(fused->lut_input))), qx);
            } else {
              xq = on_grid(xf, qx);
            }
            sum += static_cast<double>(xq) - static_cast<double>(xf);
          }
          err.sum[static_cast<size_t>(c)] += sum;
        }
      err.count += static_cast<double>(n * hw);
    }
  }
  for (PartitionStep& s : steps) {
    if (!s.on_npu) continue;
    for (NpuLayer& op : s.ops) {
      auto* c = std::get_if<ConvLayer>(&op);
      if (!c || !correctable(g, *c)) continue;
      auto e = errors.find(c->input);
      if (e == errors.end() || e->second.count == 0) continue;
      // A ConvTranspose output pixel takes KH·KW / (stride_h·stride_w) taps per input channel
      // on average; a Conv's taps count where they read inside the input.
      const std::vector<double> fy = c->transposed ? std::vector<double>(static_cast<size_t>(c->KH), 1.0 / static_cast<double>(c->stride_h))
                                                   : tap_validity(c->H, c->OH, c->KH, c->stride_h, c->pad_t, c->dil_h);
      const std::vector<double> fx = c->transposed ? std::vector<double>(static_cast<size_t>(c->KW), 1.0 / static_cast<double>(c->stride_w))
                                                   : tap_validity(c->W, c->OW, c->KW, c->stride_w, c->pad_l, c->dil_w);
      const int64_t cin = c->depthwise ? 1 : c->C, taps = c->KH * c->KW;
      const int64_t per_group = c->depthwise ? std::max<int64_t>(c->Cout / std::max<int64_t>(c->C, 1), 1) : 1;
      if (c->bias.empty()) c->bias.assign(static_cast<size_t>(c->Cout), 0.0f);
      const auto out_q = qp.find(c->lut_input >= 0 ? c->lut_input : c->output);
      bool changed = false;
      for (int64_t co = 0; co < c->Cout; ++co) {
        double shift = 0;
        for (int64_t ci = 0; ci < cin; ++ci) {
          const int64_t channel = c->depthwise ? co / per_group : ci;
          const double mean = e->second.sum[static_cast<size_t>(channel)] / e->second.count;
          if (mean == 0) continue;
          double w = 0;
          for (int64_t t = 0; t < taps; ++t)
            w += c->weights[static_cast<size_t>(c->transposed ? (ci * c->Cout + co) * taps + t : (co * cin + ci) * taps + t)] * fy[static_cast<size_t>(t / c->KW)] *
                 fx[static_cast<size_t>(t % c->KW)];
          shift += w * mean;
        }
        if (shift == 0) continue;
        c->bias[static_cast<size_t>(co)] -= static_cast<float>(shift);
        changed = true;
        if (out_q != qp.end()) facts.max_shift = std::max(facts.max_shift, std::fabs(shift) / out_q->second.scale);
      }
      facts.layers += changed;
    }
  }
  return facts;
}

}  // namespace npu::compiler
