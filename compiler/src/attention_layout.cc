#include "attention_layout.h"

#include <cmath>
#include <map>
#include <vector>

namespace npu::compiler {
namespace {

bool is_reshape(const std::string& op) {
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

// A Mul or Div by a positive finite one-element constant that keeps the shape: partition
// makes it a view of x's codes at another scale (the bytes are shared).
bool is_scale_view(const Graph& g, const Node& n) {
  if ((n.op != "Mul" && n.op != "Div") || n.inputs.size() != 2 || n.integer_wrap) return false;
  const int c = n.inputs[1];
  if (!g.is_constant(c) || g.value(c).constant->element_count() != 1) return false;
  const Tensor t = to_float(*g.value(c).constant);
  const float v = t.as<float>()[0];
  return v > 0 && std::isfinite(v) && std::isfinite(1.0f / v) &&
         g.value(n.inputs[0]).shape == g.value(n.outputs[0]).shape;
}

bool is_four_d(const Graph& g, int v) { return v >= 0 && !g.is_constant(v) && g.value(v).shape.size() == 4; }

}  // namespace

bool is_runtime_matmul(const Graph& g, const Node& n) {
  return n.op == "MatMul" && n.inputs.size() == 2 && n.inputs[0] >= 0 && n.inputs[1] >= 0 &&
         !g.is_constant(n.inputs[0]) && !g.is_constant(n.inputs[1]);
}

std::set<int> dense_attention_values(const Graph& g) {
  // Who touches each 4-D value.
  std::map<int, std::vector<size_t>> touch;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    for (int v : n.inputs)
      if (is_four_d(g, v)) touch[v].push_back(ni);
    for (int v : n.outputs)
      if (is_four_d(g, v)) touch[v].push_back(ni);
  }
  std::set<int> dense, seen;
  for (const auto& [start, unused] : touch) {
    if (seen.count(start)) continue;
    // The set of values sharing bytes with `start`, and whether every toucher is agnostic.
    std::vector<int> members{start}, todo{start};
    seen.insert(start);
    bool agnostic = true, wanted = false;
    while (!todo.empty()) {
      const int v = todo.back();
      todo.pop_back();
      for (size_t ni : touch[v]) {
        const Node& n = g.nodes[ni];
        int partner = -1;
        if (is_runtime_matmul(g, n)) {
          wanted = true;
        } else if (n.op == "Transpose" || n.op == "Slice") {
        } else if (n.op == "Softmax") {
          // On the NPU (VEC SOFTMAX) when its axis, the last, is contiguous: dense.
          const int64_t axis = n.attr_int("axis", g.opset >= 13 ? -1 : 1);
          if (axis != -1 && axis != 3) agnostic = false;
          else wanted = true;
        } else if (is_reshape(n.op) && !n.outputs.empty()) {
          const int other = n.inputs[0] == v ? n.outputs[0] : n.inputs[0];
          if (is_four_d(g, other)) partner = other;
        } else if (is_scale_view(g, n)) {
          partner = n.inputs[0] == v ? n.outputs[0] : n.inputs[0];
        } else {
          agnostic = false;
        }
        if (partner >= 0 && !seen.count(partner)) {
          seen.insert(partner);
          members.push_back(partner);
          todo.push_back(partner);
        }
      }
    }
    if (agnostic && wanted) dense.insert(members.begin(), members.end());
  }
  return dense;
}

}  // namespace npu::compiler
