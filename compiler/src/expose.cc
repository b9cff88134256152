#include "expose.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "lower.h"

namespace npu::compiler {
namespace {

// Σ w² / Σ (w − scale·q(w))² over weights laid out with `per_channel` consecutive entries
// per channel (stride 1) or one entry per channel in each row of `channels` (transposed).
// With `rounded` (error-feedback rounding), the error is w − rounded[i] instead.
double weights_db(const std::vector<float>& w, const std::vector<float>& scales, bool declared, bool channel_last,
                  const std::vector<float>* rounded = nullptr) {
  const size_t channels = scales.size();
  if (w.empty() || channels == 0) return NAN;
  const size_t per_channel = w.size() / channels;
  double signal = 0, noise = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t c = channel_last ? i % channels : i / per_channel;
    const float s = scales[std::min(c, channels - 1)];
    const double e = static_cast<double>(w[i]) - (rounded ? static_cast<double>((*rounded)[i])
                                                          : static_cast<double>(s) * quantize_weight(w[i], s, declared));
    signal += static_cast<double>(w[i]) * w[i];
    noise += e * e;
  }
  return noise == 0 ? INFINITY : 10 * std::log10(signal / noise);
}

}  // namespace

double weight_sqnr_db(const NpuLayer& layer) {
  if (const auto* f = std::get_if<FcLayer>(&layer); f && f->weight_input < 0)
    return weights_db(f->weights, fc_weight_scales(*f), !f->weight_scales.empty(), true);  // [K][N]
  if (const auto* c = std::get_if<ConvLayer>(&layer); c && c->weight_input < 0 && !c->float_weights.empty())
    return weights_db(c->float_weights, conv_weight_scales(*c), false, false, &c->weights);
  if (const auto* c = std::get_if<ConvLayer>(&layer); c && c->weight_input < 0 && !c->transposed)
    return weights_db(c->weights, conv_weight_scales(*c), !c->weight_scales.empty(), false);
  if (const auto* c = std::get_if<ConvLayer>(&layer); c && c->weight_input < 0) {
    // ConvTranspose weights are [C][Cout][KH][KW]: the channel is the second index.
    const std::vector<float> scales = conv_weight_scales(*c);
    const size_t taps = c->weights.size() / static_cast<size_t>(std::max<int64_t>(c->C * c->Cout, 1));
    std::vector<float> by_channel(c->weights.size());
    for (size_t i = 0; i < c->weights.size(); ++i) {
      const size_t ci = i / (static_cast<size_t>(c->Cout) * taps), co = i / taps % static_cast<size_t>(c->Cout);
      by_channel[(co * static_cast<size_t>(c->C) + ci) * taps + i % taps] = c->weights[i];
    }
    return weights_db(by_channel, scales, !c->weight_scales.empty(), false);
  }
  return NAN;
}

void expose_values(Graph& g, const std::vector<PartitionStep>& steps, const ValueRanges& narrowed,
                   std::vector<ExposedValue>* exposed, std::vector<ExposedValue>* outputs) {
  const std::vector<int> model_outputs = g.outputs;
  outputs->assign(model_outputs.size(), ExposedValue{});
  for (size_t k = 0; k < model_outputs.size(); ++k) (*outputs)[k].value = g.value(model_outputs[k]).name;
  std::set<int> taken(g.outputs.begin(), g.outputs.end());
  auto names = [&](const std::vector<int>& vs) {
    std::vector<std::string> out;
    for (int v : vs)
      if (v >= 0 && !g.is_constant(v)) out.push_back(g.value(v).name);
    return out;
  };
  auto add = [&](int v, ExposedValue e) {
    if (v < 0) return;
    for (size_t k = 0; k < model_outputs.size(); ++k)
      if (model_outputs[k] == v && (*outputs)[k].layer.empty()) {
        e.value = g.value(v).name;
        (*outputs)[k] = e;
      }
    const Value& val = g.value(v);
    int64_t elements = 1;
    for (int64_t d : val.shape) elements *= d;
    if (taken.count(v) || g.is_constant(v) || val.dtype != DType::kF32 || val.io_codes ||
        val.shape.empty() || elements == 0)
      return;
    taken.insert(v);
    g.outputs.push_back(v);
    if (auto it = narrowed.find(v); it != narrowed.end()) {
      e.live_lo = it->second.first;
      e.live_hi = it->second.second;
    }
    e.value = val.name;
    exposed->push_back(std::move(e));
  };
  for (const PartitionStep& s : steps) {
    if (s.on_npu) {
      for (const NpuLayer& op : s.ops) {
        ExposedValue e;
        e.layer = npu_layer_name(op);
        e.op = npu_layer_op(op);
        e.inputs = names(npu_layer_inputs(op));
        e.weight_sqnr_db = weight_sqnr_db(op);
        add(npu_layer_output(op), std::move(e));
      }
      continue;
    }
    const Node& n = g.nodes[static_cast<size_t>(s.node)];
    for (int v : n.outputs) {
      ExposedValue e;
      e.layer = n.name;
      e.op = n.op;
      e.on_npu = false;
      e.inputs = names(n.inputs);
      if (v >= 0) add(v, std::move(e));
    }
  }
}

}  // namespace npu::compiler
