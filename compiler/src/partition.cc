#include "partition.h"

#include <algorithm>
#include <optional>
#include <set>

namespace npu::compiler {
namespace {

std::vector<int> consumers(const Graph& g, int value) {
  std::vector<int> out;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int in : g.nodes[n].inputs)
      if (in == value) out.push_back(static_cast<int>(n));
  return out;
}

bool is_graph_output(const Graph& g, int value) {
  return std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end();
}

// Gemm/MatMul with a constant 2-D weight and a per-channel constant bias, plus a following
// bias Add and Relu when nothing else reads the intermediate values.
std::optional<FcLayer> match_fc(const Graph& g, size_t ni, std::set<size_t>& used) {
  const Node& n = g.nodes[ni];
  if (n.op != "Gemm" && n.op != "MatMul") return std::nullopt;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || !g.is_constant(n.inputs[1]) || g.is_constant(n.inputs[0]))
    return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  const Tensor B = to_float(*g.value(n.inputs[1]).constant);
  if (B.shape.size() != 2 || x.shape.size() < 2) return std::nullopt;
  if (n.op == "Gemm" && (n.attr_int("transA", 0) != 0 || x.shape.size() != 2)) return std::nullopt;
  FcLayer L;
  L.name = n.name;
  L.op = n.op;
  L.input = n.inputs[0];
  const bool tb = n.op == "Gemm" && n.attr_int("transB", 0) != 0;
  const float alpha = n.op == "Gemm" ? n.attr_float("alpha", 1.0f) : 1.0f;
  L.K = tb ? B.shape[1] : B.shape[0];
  L.N = tb ? B.shape[0] : B.shape[1];
  if (x.shape.back() != L.K) return std::nullopt;
  L.M = 1;
  for (size_t d = 0; d + 1 < x.shape.size(); ++d) L.M *= x.shape[d];
  if (L.M <= 0) return std::nullopt;
  L.weights.resize(static_cast<size_t>(L.K * L.N));
  auto b = B.as<float>();
  for (int64_t k = 0; k < L.K; ++k)
    for (int64_t j = 0; j < L.N; ++j)
      L.weights[static_cast<size_t>(k * L.N + j)] = alpha * b[static_cast<size_t>(tb ? j * L.K + k : k * L.N + j)];
  L.bias.assign(static_cast<size_t>(L.N), 0.0f);
  auto add_bias = [&](const Tensor& c, float scale) {
    if (c.element_count() != 1 && c.element_count() != L.N) return false;
    for (int64_t j = 0; j < L.N; ++j)
      L.bias[static_cast<size_t>(j)] += scale * c.as<float>()[static_cast<size_t>(c.element_count() == 1 ? 0 : j)];
    return true;
  };
  if (n.op == "Gemm" && n.inputs.size() > 2 && n.inputs[2] >= 0) {
    if (!g.is_constant(n.inputs[2]) || !add_bias(to_float(*g.value(n.inputs[2]).constant), n.attr_float("beta", 1.0f)))
      return std::nullopt;
  }
  int out = n.outputs[0];
  auto next_consumer = [&](const std::string& op) -> std::optional<size_t> {
    if (is_graph_output(g, out)) return std::nullopt;
    auto c = consumers(g, out);
    if (c.size() != 1 || g.nodes[static_cast<size_t>(c[0])].op != op) return std::nullopt;
    return static_cast<size_t>(c[0]);
  };
  if (auto add = next_consumer("Add")) {
    const Node& a = g.nodes[*add];
    const int other = a.inputs[0] == out ? a.inputs[1] : a.inputs[0];
    if (g.is_constant(other) && add_bias(to_float(*g.value(other).constant), 1.0f)) {
      used.insert(*add);
      L.fused.push_back(a.name);
      out = a.outputs[0];
    }
  }
  if (auto relu = next_consumer("Relu")) {
    used.insert(*relu);
    L.relu = true;
    L.fused.push_back(g.nodes[*relu].name);
    out = g.nodes[*relu].outputs[0];
  }
  L.output = out;
  return L;
}

std::vector<int64_t> ints_attr(const Node& n, const std::string& key, std::vector<int64_t> fallback) {
  auto it = n.attrs.find(key);
  return it == n.attrs.end() ? fallback : it->second.ints;
}

std::optional<ConvLayer> match_conv(const Graph& g, size_t ni, std::set<size_t>& used) {
  const Node& n = g.nodes[ni];
  if (n.op != "Conv" || n.inputs.size() < 2 || n.inputs[0] < 0 || !g.is_constant(n.inputs[1]) ||
      g.is_constant(n.inputs[0]))
    return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  const Tensor Wt = to_float(*g.value(n.inputs[1]).constant);
  if (x.shape.size() != 4 || Wt.shape.size() != 4) return std::nullopt;
  auto it = n.attrs.find("auto_pad");
  if (it != n.attrs.end() && it->second.s != "NOTSET" && !it->second.s.empty()) return std::nullopt;
  for (int64_t d : ints_attr(n, "dilations", {1, 1}))
    if (d != 1) return std::nullopt;
  ConvLayer L;
  L.name = n.name;
  L.input = n.inputs[0];
  L.batch = x.shape[0];
  L.C = x.shape[1];
  L.H = x.shape[2];
  L.W = x.shape[3];
  L.Cout = Wt.shape[0];
  L.KH = Wt.shape[2];
  L.KW = Wt.shape[3];
  const int64_t group = n.attr_int("group", 1);
  if (group == 1 && Wt.shape[1] == L.C) {
    L.depthwise = false;
  } else if (group == L.C && L.Cout == L.C && Wt.shape[1] == 1) {
    L.depthwise = true;
  } else {
    return std::nullopt;
  }
  const auto strides = ints_attr(n, "strides", {1, 1});
  const auto pads = ints_attr(n, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || pads.size() != 4) return std::nullopt;
  L.stride_h = strides[0];
  L.stride_w = strides[1];
  L.pad_t = pads[0];
  L.pad_l = pads[1];
  L.pad_b = pads[2];
  L.pad_r = pads[3];
  if (L.KH > 15 || L.KW > 15 || L.pad_t > 15 || L.pad_l > 15 || L.pad_b > 15 || L.pad_r > 15 ||
      L.stride_h < 1 || L.stride_w < 1)
    return std::nullopt;
  L.OH = (L.H + L.pad_t + L.pad_b - L.KH) / L.stride_h + 1;
  L.OW = (L.W + L.pad_l + L.pad_r - L.KW) / L.stride_w + 1;
  if (L.OH <= 0 || L.OW <= 0) return std::nullopt;
  L.weights.assign(Wt.as<float>().begin(), Wt.as<float>().end());
  L.bias.assign(static_cast<size_t>(L.Cout), 0.0f);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    if (!g.is_constant(n.inputs[2])) return std::nullopt;
    const Tensor b = to_float(*g.value(n.inputs[2]).constant);
    if (b.element_count() != L.Cout) return std::nullopt;
    L.bias.assign(b.as<float>().begin(), b.as<float>().end());
  }
  int out = n.outputs[0];
  if (!is_graph_output(g, out)) {
    auto c = consumers(g, out);
    if (c.size() == 1) {
      const Node& a = g.nodes[static_cast<size_t>(c[0])];
      bool fused = false;
      if (a.op == "Relu") {
        L.act_lo = 0;
        fused = true;
      } else if (a.op == "Clip") {
        float lo = a.attr_float("min", -INFINITY), hi = a.attr_float("max", INFINITY);
        bool ok = true;
        for (size_t k = 1; k < a.inputs.size() && k < 3; ++k) {
          if (a.inputs[k] < 0) continue;
          if (!g.is_constant(a.inputs[k])) ok = false;
          else (k == 1 ? lo : hi) = to_float(*g.value(a.inputs[k]).constant).as<float>()[0];
        }
        if (ok) {
          L.act_lo = lo;
          L.act_hi = hi;
          fused = true;
        }
      }
      if (fused) {
        used.insert(static_cast<size_t>(c[0]));
        L.fused.push_back(a.name);
        out = a.outputs[0];
      }
    }
  }
  L.output = out;
  return L;
}

}  // namespace

std::vector<PartitionStep> partition(const Graph& g) {
  std::vector<PartitionStep> steps;
  std::set<size_t> used;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (used.count(ni)) continue;
    if (auto layer = match_fc(g, ni, used)) {
      if (steps.empty() || !steps.back().on_npu || !steps.back().convs.empty())
        steps.push_back(PartitionStep{true, {}, {}, -1});
      steps.back().layers.push_back(std::move(*layer));
      continue;
    }
    if (auto conv = match_conv(g, ni, used)) {
      if (steps.empty() || !steps.back().on_npu || !steps.back().layers.empty())
        steps.push_back(PartitionStep{true, {}, {}, -1});
      steps.back().convs.push_back(std::move(*conv));
      continue;
    }
    steps.push_back(PartitionStep{false, {}, {}, static_cast<int>(ni)});
  }
  return steps;
}

}  // namespace npu::compiler
