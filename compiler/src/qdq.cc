#include "qdq.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace npu::compiler {
namespace {

// A Q or DQ node's constant parameters, converted to int8 codes (uint8 shifted by -128).
struct NodeQuant {
  DeclaredQuant q;
  DType code_type = DType::kU8;  // ONNX: no zero point means uint8
};

std::optional<NodeQuant> constant_params(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2 || !g.is_constant(n.inputs[1])) return std::nullopt;
  const bool has_zp = n.inputs.size() > 2 && n.inputs[2] >= 0;
  if (has_zp && !g.is_constant(n.inputs[2])) return std::nullopt;
  NodeQuant out;
  const Tensor scale = to_float(*g.value(n.inputs[1]).constant);
  out.q.scale.assign(scale.as<float>().begin(), scale.as<float>().end());
  if (out.q.scale.empty()) return std::nullopt;
  for (float s : out.q.scale)
    if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
  if (has_zp) {
    const Tensor& z = *g.value(n.inputs[2]).constant;
    out.code_type = z.dtype;
    if (z.dtype != DType::kU8 && z.dtype != DType::kI8) return std::nullopt;
    if (z.element_count() != static_cast<int64_t>(out.q.scale.size())) return std::nullopt;
    for (int64_t i = 0; i < z.element_count(); ++i)
      out.q.zero_point.push_back(
          z.dtype == DType::kU8 ? static_cast<int32_t>(z.data[static_cast<size_t>(i)]) - 128
                                : static_cast<int32_t>(z.as<int8_t>()[static_cast<size_t>(i)]));
  } else {
    out.q.zero_point.assign(out.q.scale.size(), -128);  // uint8 zero point 0
  }
  if (out.q.scale.size() > 1) out.q.axis = n.attr_int("axis", 1);
  return out;
}

bool same_quant(const DeclaredQuant& a, const DeclaredQuant& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point;
}

std::vector<int> readers_of(const Graph& g, int value) {
  std::vector<int> out;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (std::count(g.nodes[n].inputs.begin(), g.nodes[n].inputs.end(), value))
      out.push_back(static_cast<int>(n));
  return out;
}

bool is_output(const Graph& g, int v) {
  return std::count(g.outputs.begin(), g.outputs.end(), v) > 0;
}

void replace_reads(Graph& g, int from, int to, const std::set<size_t>& except) {
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!except.count(n))
      for (int& v : g.nodes[n].inputs)
        if (v == from) v = to;
}

}  // namespace

Status fold_qdq(Graph& g, QdqSummary* summary) {
  *summary = QdqSummary{};
  // Weights: DequantizeLinear of constant codes; constant folding turns them into floats.
  for (const Node& n : g.nodes) {
    if (n.op != "DequantizeLinear" || n.inputs.empty() || n.outputs.size() != 1 ||
        !g.is_constant(n.inputs[0]))
      continue;
    const DType codes = g.value(n.inputs[0]).dtype;
    if (codes != DType::kI8 && codes != DType::kU8) continue;  // int32 biases fold as plain floats
    if (auto p = constant_params(g, n)) {
      if (p->q.axis < 0 && p->q.axis != -1)
        p->q.axis += static_cast<int64_t>(g.value(n.inputs[0]).shape.size());
      g.value(n.outputs[0]).quant = p->q;
      ++summary->weights;
    }
  }
  // Activations: QuantizeLinear -> DequantizeLinear pairs.
  std::set<size_t> removed;
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    const Node& q = g.nodes[qi];
    if (q.op != "QuantizeLinear" || q.inputs.empty() || q.inputs[0] < 0 ||
        g.is_constant(q.inputs[0]) || q.outputs.size() != 1)
      continue;
    const int x = q.inputs[0], codes = q.outputs[0];
    auto qp = constant_params(g, q);
    if (!qp || g.value(x).dtype != DType::kF32 || g.value(x).quant) continue;
    if (qp->q.scale.size() != 1) {
      summary->notes.push_back("QuantizeLinear '" + q.name +
                               "' is per-axis: activations are quantised per tensor");
      continue;
    }
    const std::vector<int> dqs = readers_of(g, codes);
    bool foldable = !dqs.empty() && !is_output(g, codes);
    for (int d : dqs) {
      const Node& dq = g.nodes[static_cast<size_t>(d)];
      auto dp = constant_params(g, dq);
      foldable = foldable && dq.op == "DequantizeLinear" && dq.inputs[0] == codes && dp &&
                 same_quant(dp->q, qp->q) && dq.outputs.size() == 1;
    }
    if (!foldable) {
      summary->notes.push_back(
          "QuantizeLinear '" + q.name +
          "' is not followed only by DequantizeLinear nodes of the same parameters");
      continue;
    }
    const int survivor = g.nodes[static_cast<size_t>(dqs[0])].outputs[0];
    // A second DQ output that is a graph output would lose its name.
    bool other_output = false;
    for (size_t k = 1; k < dqs.size(); ++k)
      other_output |= is_output(g, g.nodes[static_cast<size_t>(dqs[k])].outputs[0]);
    auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
      return std::count(n.outputs.begin(), n.outputs.end(), x) > 0;
    });
    const bool graph_input = producer == g.nodes.end();
    if (other_output || (graph_input && is_output(g, survivor)) ||
        (!graph_input && is_output(g, x))) {
      summary->notes.push_back("QuantizeLinear '" + q.name +
                               "': the pair's values are graph outputs");
      continue;
    }
    std::set<size_t> pair = {qi};
    for (int d : dqs) pair.insert(static_cast<size_t>(d));
    for (size_t k = 1; k < dqs.size(); ++k)
      replace_reads(g, g.nodes[static_cast<size_t>(dqs[k])].outputs[0], survivor, {});
    int kept;
    if (graph_input) {
      // The graph input keeps its name; the pair's readers read it directly.
      replace_reads(g, survivor, x, pair);
      kept = x;
    } else {
      // The producer now writes the pair's output (which may be a graph output by name).
      for (int& o : producer->outputs)
        if (o == x) o = survivor;
      replace_reads(g, x, survivor, pair);
      g.value(survivor).shape = g.value(x).shape;
      g.value(survivor).dtype = DType::kF32;
      kept = survivor;
    }
    g.value(kept).quant = qp->q;
    removed.insert(pair.begin(), pair.end());
    ++summary->activation_pairs;
  }
  std::vector<Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!removed.count(n)) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  return Status::ok();
}

std::vector<float> declared_weight_scales(const Graph& g, int weight_value, int64_t channel_axis,
                                          int64_t channels, float gain) {
  const Value& w = g.value(weight_value);
  if (!w.quant) return {};
  const DeclaredQuant& q = *w.quant;
  for (int32_t z : q.zero_point)
    if (z != 0) return {};  // int8 symmetric hardware weights: only zero point 0 maps exactly
  std::vector<float> scales;
  if (q.scale.size() == 1) {
    scales.assign(static_cast<size_t>(channels), q.scale[0] * gain);
  } else {
    if (q.axis != channel_axis || static_cast<int64_t>(q.scale.size()) != channels) return {};
    for (float s : q.scale) scales.push_back(s * gain);
  }
  return scales;
}

}  // namespace npu::compiler
