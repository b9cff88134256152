#include "equalize.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace npu::compiler {
namespace {

// Per value: the nodes reading it (once per input slot) and whether it is a graph output.
struct Readers {
  std::map<int, std::vector<int>> nodes;
  std::set<int> outputs;
  explicit Readers(const Graph& g) : outputs(g.outputs.begin(), g.outputs.end()) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (int v : g.nodes[i].inputs)
        if (v >= 0) nodes[v].push_back(static_cast<int>(i));
  }
  // The one node reading v (once), or -1.
  int only_reader(int v) const {
    auto it = nodes.find(v);
    if (it == nodes.end() || it->second.size() != 1 || outputs.count(v)) return -1;
    return it->second[0];
  }
};

// A constant operand that only this node reads (so that rescaling it changes nothing else),
// or an omitted one (a missing bias).
bool private_constant(const Graph& g, const Readers& r, const Node& n, size_t k) {
  if (k >= n.inputs.size() || n.inputs[k] < 0) return true;
  return g.is_constant(n.inputs[k]) && r.only_reader(n.inputs[k]) >= 0;
}

bool equalizable_conv(const Graph& g, const Readers& r, const Node& n) {
  return n.op == "Conv" && n.inputs.size() >= 2 && n.outputs.size() == 1 && n.inputs[1] >= 0 &&
         g.is_constant(n.inputs[1]) && g.value(n.inputs[1]).shape.size() >= 3 && private_constant(g, r, n, 1) &&
         private_constant(g, r, n, 2);
}

// f(x / s) = f(x) / s for every s > 0, channel by channel.
bool positively_homogeneous(const Node& n) {
  if (n.outputs.size() != 1 || n.inputs.empty()) return false;
  return n.op == "Relu" || n.op == "LeakyRelu" || (n.op == "MaxPool" && n.inputs.size() == 1);
}

// Replaces input k of n (a constant) by a copy with every element e multiplied by
// factor(e).
template <typename F>
void rescale_constant(Graph& g, Node& n, size_t k, const F& factor) {
  Tensor t = to_float(*g.value(n.inputs[k]).constant);
  auto v = t.as<float>();
  for (size_t e = 0; e < v.size(); ++e) v[e] *= factor(e);
  Value nv{g.value(n.inputs[k]).name + "_equalized", DType::kF32, t.shape, std::move(t)};
  n.inputs[k] = g.add_value(std::move(nv));
}

}  // namespace

std::vector<EqualizationChain> find_equalization_chains(const Graph& g) {
  const Readers r(g);
  std::vector<EqualizationChain> chains;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& p = g.nodes[i];
    if (!equalizable_conv(g, r, p)) continue;
    EqualizationChain chain;
    chain.producer = static_cast<int>(i);
    chain.channels = g.value(p.inputs[1]).shape[0];
    int v = p.outputs[0];
    while (true) {
      const Value& val = g.value(v);
      if (val.quant || val.io_codes || val.shape.size() < 3 || val.shape[1] != chain.channels) break;
      const int reader = r.only_reader(v);
      if (reader < 0) break;
      const Node& n = g.nodes[static_cast<size_t>(reader)];
      if (n.inputs[0] != v) break;
      chain.values.push_back(v);
      if (positively_homogeneous(n)) {
        v = n.outputs[0];
        continue;
      }
      if (reader == chain.producer || !equalizable_conv(g, r, n)) break;
      const auto& ws = g.value(n.inputs[1]).shape;
      const int64_t group = n.attr_int("group", 1);
      if (group <= 0 || ws[1] * group != chain.channels || ws[0] % group != 0) break;
      chain.consumer = reader;
      chain.depthwise_consumer = group == chain.channels;
      break;
    }
    if (chain.consumer >= 0) chains.push_back(std::move(chain));
  }
  return chains;
}

int equalize_chains(Graph& g, const std::vector<EqualizationChain>& chains, const ChannelRanges& channel_ranges,
                    double regular_alpha, ValueRanges* ranges, std::map<int, std::vector<float>>* factors) {
  int rescaled = 0;
  for (const EqualizationChain& chain : chains) {
    const auto C = static_cast<size_t>(chain.channels);
    std::vector<double> mag(C, 0.0);
    bool complete = true;
    for (int v : chain.values) {
      auto it = channel_ranges.find(v);
      if (it == channel_ranges.end() || it->second.size() != C) {
        complete = false;
        break;
      }
      for (size_t c = 0; c < C; ++c)
        mag[c] = std::max({mag[c], std::fabs(static_cast<double>(it->second[c].first)),
                           std::fabs(static_cast<double>(it->second[c].second))});
    }
    const double R = *std::max_element(mag.begin(), mag.end());
    if (!complete || !(R > 0) || !std::isfinite(R)) continue;
    const double alpha = chain.depthwise_consumer ? 1.0 : regular_alpha;
    constexpr double smin = 1.0 / 1024;
    std::vector<float> s(C, 1.0f);
    for (size_t c = 0; c < C; ++c)
      if (mag[c] > 0) s[c] = static_cast<float>(std::max(std::pow(mag[c] / R, alpha), smin));
    if (*std::min_element(s.begin(), s.end()) > 0.9f) continue;  // already balanced

    // Producer: output channel c (weights [Cout][Cin/group][k...], bias [Cout]) divided by s_c.
    Node& p = g.nodes[static_cast<size_t>(chain.producer)];
    const size_t per_filter = static_cast<size_t>(g.value(p.inputs[1]).constant->element_count()) / C;
    rescale_constant(g, p, 1, [&](size_t e) { return 1.0f / s[e / per_filter]; });
    if (p.inputs.size() > 2 && p.inputs[2] >= 0) rescale_constant(g, p, 2, [&](size_t e) { return 1.0f / s[e]; });

    // Consumer: input channel c = group·(Cin/group) + its index within the group, times s_c.
    Node& q = g.nodes[static_cast<size_t>(chain.consumer)];
    const auto ws = g.value(q.inputs[1]).shape;
    const auto group = static_cast<size_t>(q.attr_int("group", 1));
    size_t spatial = 1;
    for (size_t d = 2; d < ws.size(); ++d) spatial *= static_cast<size_t>(ws[d]);
    const auto cin_g = static_cast<size_t>(ws[1]), cout_g = static_cast<size_t>(ws[0]) / group;
    rescale_constant(g, q, 1, [&](size_t e) {
      const size_t o = e / (cin_g * spatial), ci = (e / spatial) % cin_g;
      return s[(o / cout_g) * cin_g + ci];
    });

    for (int v : chain.values) {
      const auto& per_channel = channel_ranges.at(v);
      float lo = INFINITY, hi = -INFINITY;
      for (size_t c = 0; c < C; ++c) {
        lo = std::min(lo, per_channel[c].first / s[c]);
        hi = std::max(hi, per_channel[c].second / s[c]);
      }
      if (ranges->count(v)) (*ranges)[v] = {lo, hi};
      (*factors)[v] = s;
    }
    ++rescaled;
  }
  return rescaled;
}

}  // namespace npu::compiler
