#include "passes.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "npu/compiler/host_ops.h"

namespace npu::compiler {
namespace {

// Shape inference leaves a node's shape unknown when it depends on values; a dynamic input
// makes the whole model dynamic, so only nodes of known inputs are folded.
bool all_inputs_constant(const Graph& g, const Node& n) {
  for (int v : n.inputs)
    if (v >= 0 && !g.is_constant(v)) return false;
  return true;
}

bool static_shape(const Value& v) {
  if (v.shape.empty()) return false;  // unknown (a true scalar has no Shape worth folding)
  int64_t elements = 1;
  for (int64_t d : v.shape) {
    if (d < 0) return false;
    elements *= d;
  }
  return elements <= (1 << 26);
}

int readers(const Graph& g, int value) {
  int count = 0;
  for (const Node& n : g.nodes)
    for (int v : n.inputs) count += v == value;
  return count + static_cast<int>(std::count(g.outputs.begin(), g.outputs.end(), value));
}

}  // namespace

Status fold_constants(Graph& g, int* folded) {
  *folded = 0;
  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    // Random generators and the like are not constant even with constant inputs.
    static const std::set<std::string> kNondeterministic = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                             "RandomUniformLike", "Multinomial", "Bernoulli"};
    // Shape and Size only need the (static) shape of their input.
    const bool shape_only = (n.op == "Shape" || n.op == "Size") && !n.inputs.empty() && n.inputs[0] >= 0 &&
                            !g.is_constant(n.inputs[0]) && static_shape(g.value(n.inputs[0]));
    if ((!shape_only && !all_inputs_constant(g, n)) || kNondeterministic.count(n.op) || !host_op_supported(n.op)) {
      kept.push_back(std::move(n));
      continue;
    }
    std::vector<const Tensor*> inputs;
    Tensor placeholder;
    if (shape_only) {
      placeholder = Tensor::zeros(g.value(n.inputs[0]).dtype, g.value(n.inputs[0]).shape);
      inputs.push_back(&placeholder);
    } else {
      for (int v : n.inputs) inputs.push_back(v >= 0 ? &*g.value(v).constant : nullptr);
    }
    auto outputs = run_host_op(n.op, n.name, g.opset, n.attrs, inputs, n.outputs.size());
    if (!outputs.is_ok()) return outputs.status();
    for (size_t k = 0; k < n.outputs.size() && k < outputs->size(); ++k) {
      Value& out = g.value(n.outputs[k]);
      out.constant = std::move((*outputs)[k]);
      out.shape = out.constant->shape;
      out.dtype = out.constant->dtype;
    }
    ++*folded;
  }
  g.nodes = std::move(kept);
  return Status::ok();
}

Status fold_batchnorm(Graph& g, int* folded) {
  *folded = 0;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.op != "BatchNormalization" || bn.inputs.size() < 5 || bn.outputs.size() != 1) continue;
    bool constant = true;
    for (size_t k = 1; k < 5; ++k) constant = constant && g.is_constant(bn.inputs[k]);
    if (!constant) continue;
    // The producer must be a Conv whose output only this BatchNormalization reads.
    auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
      return !n.outputs.empty() && n.outputs[0] == bn.inputs[0];
    });
    if (producer == g.nodes.end() || producer->op != "Conv" || producer->inputs.size() < 2 ||
        !g.is_constant(producer->inputs[1]) || readers(g, bn.inputs[0]) != 1)
      continue;
    Node& conv = *producer;
    const Tensor w = to_float(*g.value(conv.inputs[1]).constant);
    const int64_t cout = w.shape.empty() ? 0 : w.shape[0];
    auto vec = [&](size_t k) { return to_float(*g.value(bn.inputs[k]).constant); };
    const Tensor scale = vec(1), bias = vec(2), mean = vec(3), var = vec(4);
    if (scale.element_count() != cout || bias.element_count() != cout || mean.element_count() != cout ||
        var.element_count() != cout)
      continue;
    const float eps = bn.attr_float("epsilon", 1e-5f);
    Tensor new_w = w;
    Tensor new_b = Tensor::zeros(DType::kF32, {cout});
    if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) {
      if (!g.is_constant(conv.inputs[2])) continue;
      new_b = to_float(*g.value(conv.inputs[2]).constant);
    }
    const int64_t per = w.element_count() / std::max<int64_t>(cout, 1);
    for (int64_t c = 0; c < cout; ++c) {
      const float k = scale.as<float>()[static_cast<size_t>(c)] / std::sqrt(var.as<float>()[static_cast<size_t>(c)] + eps);
      for (int64_t e = 0; e < per; ++e) new_w.as<float>()[static_cast<size_t>(c * per + e)] *= k;
      float& b = new_b.as<float>()[static_cast<size_t>(c)];
      b = (b - mean.as<float>()[static_cast<size_t>(c)]) * k + bias.as<float>()[static_cast<size_t>(c)];
    }
    // New constant values, so that other readers of the original weights are untouched.
    Value wv{g.value(conv.inputs[1]).name + "_bn_folded", DType::kF32, new_w.shape, std::move(new_w)};
    Value bv{conv.name + "_bn_bias", DType::kF32, {cout}, std::move(new_b)};
    conv.inputs[1] = g.add_value(std::move(wv));
    const int bias_value = g.add_value(std::move(bv));
    if (conv.inputs.size() > 2) conv.inputs[2] = bias_value;
    else conv.inputs.push_back(bias_value);
    conv.outputs[0] = bn.outputs[0];  // the Conv now produces what the BatchNorm did
    drop[i] = true;
    ++*folded;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return Status::ok();
}

}  // namespace npu::compiler
