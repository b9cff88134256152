#include "passes.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <optional>
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

// After a pass renames a node's operator or rewires it: its ONNX proto (which the reference
// interpreter and the host kernels read) says the same, keeping the proto's attributes.
void refresh_proto(const Graph& g, Node& n) {
  onnx::NodeProto p;
  if (!n.proto.empty()) p.ParseFromString(n.proto);
  p.set_op_type(n.op);
  p.set_name(n.name);
  p.clear_input();
  p.clear_output();
  for (int v : n.inputs) p.add_input(g.value(v).name);
  for (int v : n.outputs) p.add_output(g.value(v).name);
  n.proto = p.SerializeAsString();
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

namespace {

// The node producing `value` among those not dropped, or nullptr (a graph input or a constant).
Node* producer_of(Graph& g, int value, const std::vector<bool>& dropped) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!dropped[i] && !g.nodes[i].outputs.empty() && g.nodes[i].outputs[0] == value) return &g.nodes[i];
  return nullptr;
}

// A Conv or ConvTranspose with constant weights (and a constant bias or none) whose output
// only the node reading it consumes: what fold_into_conv may rewrite. Its output channel
// count in *cout.
bool foldable_conv(const Graph& g, const Node* conv, int64_t* cout) {
  if (conv == nullptr || (conv->op != "Conv" && conv->op != "ConvTranspose") || conv->inputs.size() < 2 ||
      conv->outputs.size() != 1 || !g.is_constant(conv->inputs[1]))
    return false;
  if (conv->inputs.size() > 2 && conv->inputs[2] >= 0 && !g.is_constant(conv->inputs[2])) return false;
  const Value& out = g.value(conv->outputs[0]);
  if (readers(g, conv->outputs[0]) != 1 || out.quant || out.io_codes) return false;  // declared rounding point
  const auto& ws = g.value(conv->inputs[1]).shape;
  if (ws.size() < 3) return false;
  const int64_t group = conv->attr_int("group", 1);
  *cout = conv->op == "Conv" ? ws[0] : ws[1] * group;
  return *cout > 0;
}

// Rewrites conv so that it computes y'[c] = scale[c]·y[c] + shift[c] of its old output y,
// into new constants (other readers of the old weights keep them), and makes it produce
// `new_output`. Weight element e belongs to output channel (Conv: e / per-filter; ConvTranspose
// [Cin, Cout/group, k...]: group of its input channel times Cout/group plus its second index).
void fold_into_conv(Graph& g, Node& conv, int64_t cout, const std::vector<float>& scale,
                    const std::vector<float>& shift, int new_output, const std::string& suffix) {
  Tensor w = to_float(*g.value(conv.inputs[1]).constant);
  Tensor b = Tensor::zeros(DType::kF32, {cout});
  if (conv.inputs.size() > 2 && conv.inputs[2] >= 0) b = to_float(*g.value(conv.inputs[2]).constant);
  const auto& ws = w.shape;
  int64_t spatial = 1;
  for (size_t d = 2; d < ws.size(); ++d) spatial *= ws[d];
  const int64_t group = conv.attr_int("group", 1);
  auto channel = [&](int64_t e) -> size_t {
    if (conv.op == "Conv") return static_cast<size_t>(e / (ws[1] * spatial));
    const int64_t ci = e / (ws[1] * spatial), j = (e / spatial) % ws[1];
    return static_cast<size_t>((ci / (ws[0] / group)) * ws[1] + j);
  };
  auto wv = w.as<float>();
  for (int64_t e = 0; e < w.element_count(); ++e) wv[static_cast<size_t>(e)] *= scale[channel(e)];
  auto bv = b.as<float>();
  for (size_t c = 0; c < static_cast<size_t>(cout); ++c) bv[c] = bv[c] * scale[c] + shift[c];
  Value wval{g.value(conv.inputs[1]).name + suffix, DType::kF32, w.shape, std::move(w)};
  Value bval{conv.name + suffix + "_bias", DType::kF32, {cout}, std::move(b)};
  conv.inputs[1] = g.add_value(std::move(wval));
  const int bias = g.add_value(std::move(bval));
  if (conv.inputs.size() > 2) conv.inputs[2] = bias;
  else conv.inputs.push_back(bias);
  conv.outputs[0] = new_output;
}

// A constant of one element, or of one per channel c of a [N, C, ...] value ([C], [C, 1, ..],
// [1, C, 1, ..]), as cout floats; nothing for any other shape.
std::optional<std::vector<float>> per_channel(const Graph& g, int v, int64_t cout, size_t rank) {
  if (!g.is_constant(v)) return std::nullopt;
  const Tensor t = to_float(*g.value(v).constant);
  const auto& s = t.shape;
  const auto vals = t.as<float>();
  if (t.element_count() == 1) return std::vector<float>(static_cast<size_t>(cout), vals[0]);
  if (t.element_count() != cout || s.size() > rank) return std::nullopt;
  // The channel axis of the broadcast is rank - 1 - (position from the right).
  size_t axis = s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] == cout) axis = d;
  if (axis == s.size() || rank - s.size() + axis != 1) return std::nullopt;
  return std::vector<float>(vals.begin(), vals.end());
}

}  // namespace

Status canonicalize_commutative(Graph& g, int* swapped) {
  *swapped = 0;
  for (Node& n : g.nodes) {
    if ((n.op != "Add" && n.op != "Mul") || n.inputs.size() != 2 || n.inputs[0] < 0 || n.inputs[1] < 0) continue;
    // Only where the broadcast result keeps the run-time operand's shape, so nothing else
    // about the node changes.
    if (g.is_constant(n.inputs[0]) && !g.is_constant(n.inputs[1]) &&
        g.value(n.inputs[1]).shape == g.value(n.outputs[0]).shape) {
      std::swap(n.inputs[0], n.inputs[1]);
      ++*swapped;
    }
  }
  return Status::ok();
}

Status residual_gate_as_mul(Graph& g, int* rewritten) {
  *rewritten = 0;
  auto plain = [&](int v) {
    if (v < 0) return false;
    const Value& val = g.value(v);
    return !g.is_constant(v) && val.dtype == DType::kF32 && !val.quant && !val.io_codes &&
           !std::count(g.outputs.begin(), g.outputs.end(), v);
  };
  auto binary = [](const Node& n, const char* op) {
    return n.op == op && n.inputs.size() == 2 && n.outputs.size() == 1 && !n.integer_wrap;
  };
  for (size_t ai = 0; ai < g.nodes.size(); ++ai) {
    const Node& add = g.nodes[ai];
    if (!binary(add, "Add")) continue;
    // The Mul x·s among the Add's operands, the other operand being x.
    size_t mi = g.nodes.size();
    int x = -1, s = -1;
    for (size_t k = 0; k < 2 && mi == g.nodes.size(); ++k) {
      const int m = add.inputs[k], other = add.inputs[1 - k];
      if (!plain(m) || !plain(other) || readers(g, m) != 1) continue;
      for (size_t j = 0; j < ai; ++j) {
        const Node& mul = g.nodes[j];
        if (!binary(mul, "Mul") || mul.outputs[0] != m) continue;
        for (size_t q = 0; q < 2; ++q)
          if (mul.inputs[q] == other && plain(mul.inputs[1 - q]) && mul.inputs[1 - q] != other) {
            mi = j;
            x = other;
            s = mul.inputs[1 - q];
          }
      }
    }
    if (mi == g.nodes.size() || readers(g, s) != 1) continue;
    const auto& xs = g.value(x).shape;
    if (xs.empty() || g.value(add.outputs[0]).shape != xs || g.value(g.nodes[mi].outputs[0]).shape != xs) continue;
    const int y = add.outputs[0];
    Tensor one_t = Tensor::zeros(DType::kF32, {1});
    one_t.as<float>()[0] = 1.0f;
    const int one = g.add_value(Value{add.name + "_one", DType::kF32, {1}, std::move(one_t)});
    const int s1 = g.add_value(Value{g.value(s).name + "_plus_one", DType::kF32, g.value(s).shape});
    Node gate;
    gate.name = add.name + "_gate";
    gate.op = "Add";
    gate.inputs = {s, one};
    gate.outputs = {s1};
    refresh_proto(g, gate);
    Node& mul = g.nodes[mi];
    std::replace(mul.inputs.begin(), mul.inputs.end(), s, s1);
    mul.outputs[0] = y;
    refresh_proto(g, mul);
    // The gate goes just before the Mul (s is computed before it); the Add goes.
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(ai));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(mi), std::move(gate));
    ++*rewritten;
  }
  return Status::ok();
}

Status fold_batchnorm(Graph& g, int* folded) {
  *folded = 0;
  std::vector<bool> drop(g.nodes.size(), false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    const bool bn = n.op == "BatchNormalization" && n.inputs.size() >= 5 && n.outputs.size() == 1;
    const bool affine = (n.op == "Mul" || n.op == "Add" || n.op == "Sub") && n.inputs.size() == 2 &&
                        n.outputs.size() == 1 && n.inputs[0] >= 0 && n.inputs[1] >= 0;
    if (!bn && !affine) continue;
    Node* conv = producer_of(g, n.inputs[0], drop);
    int64_t cout = 0;
    if (!foldable_conv(g, conv, &cout)) continue;
    const size_t rank = g.value(n.inputs[0]).shape.size();
    if (g.value(n.outputs[0]).shape != g.value(n.inputs[0]).shape) continue;  // the op must not broadcast y
    std::vector<float> scale(static_cast<size_t>(cout), 1.0f), shift(static_cast<size_t>(cout), 0.0f);
    if (bn) {
      std::vector<std::vector<float>> p;  // scale, bias, mean, var: [C] each
      for (size_t k = 1; k < 5; ++k) {
        if (!g.is_constant(n.inputs[k]) || g.value(n.inputs[k]).constant->element_count() != cout) break;
        const Tensor t = to_float(*g.value(n.inputs[k]).constant);
        p.emplace_back(t.as<float>().begin(), t.as<float>().end());
      }
      if (p.size() != 4) continue;
      const float eps = n.attr_float("epsilon", 1e-5f);
      for (size_t c = 0; c < scale.size(); ++c) {
        scale[c] = p[0][c] / std::sqrt(p[3][c] + eps);
        shift[c] = p[1][c] - p[2][c] * scale[c];
      }
    } else {
      auto c = per_channel(g, n.inputs[1], cout, rank);
      if (!c) continue;
      if (n.op == "Mul") scale = *c;
      else for (size_t k = 0; k < shift.size(); ++k) shift[k] = n.op == "Add" ? (*c)[k] : -(*c)[k];
    }
    fold_into_conv(g, *conv, cout, scale, shift, n.outputs[0], bn ? "_bn_folded" : "_" + n.op + "_folded");
    drop[i] = true;
    ++*folded;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return Status::ok();
}

namespace {

// Element-wise operators whose output is the broadcast of their inputs, for
// reduce_mean_as_matmul's walk.
bool broadcasting_elementwise(const std::string& op) {
  static const std::set<std::string> kOps = {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Neg",
                                             "Abs", "Exp", "Relu", "Clip", "Sigmoid", "Tanh", "Erf"};
  return kOps.count(op) > 0;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t db = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// The values that widen when `start` takes shape `full`: start itself, then every output of an
// element-wise reader that was narrower than `full` and becomes `full`. Empty when a reader
// is anything else, a widened value is a graph output, or an output would not be `full`.
std::vector<int> widened_values(const Graph& g, int start, const std::vector<int64_t>& full) {
  std::vector<int> widened = {start}, todo = {start};
  std::set<int> seen = {start};
  while (!todo.empty()) {
    const int v = todo.back();
    todo.pop_back();
    if (std::count(g.outputs.begin(), g.outputs.end(), v) || g.value(v).quant) return {};
    for (const Node& n : g.nodes) {
      if (std::find(n.inputs.begin(), n.inputs.end(), v) == n.inputs.end()) continue;
      if (!broadcasting_elementwise(n.op) || n.outputs.size() != 1) return {};
      std::vector<int64_t> shape;
      for (int in : n.inputs)
        if (in >= 0) shape = broadcast_shapes(shape, seen.count(in) ? full : g.value(in).shape);
      if (shape != full) return {};
      const int out = n.outputs[0];
      if (g.value(out).shape == full || seen.count(out)) continue;  // the broadcast already happened here
      seen.insert(out);
      widened.push_back(out);
      todo.push_back(out);
    }
  }
  return widened;
}

// The last-axis ReduceMean (keepdims) of rank 2 or 3, or -1: its input's channel count C.
int64_t last_axis_mean(const Graph& g, const Node& n) {
  if (n.op != "ReduceMean" || n.inputs.empty() || n.inputs[0] < 0 || n.outputs.size() != 1 ||
      g.is_constant(n.inputs[0]) || n.attr_int("keepdims", 1) != 1)
    return -1;
  const auto& xs = g.value(n.inputs[0]).shape;
  if (xs.size() < 2 || xs.size() > 3 || !static_shape(g.value(n.inputs[0])) || g.value(n.inputs[0]).dtype != DType::kF32)
    return -1;
  std::vector<int64_t> axes;
  auto it = n.attrs.find("axes");
  if (it != n.attrs.end()) {
    axes = it->second.ints;
  } else if (n.inputs.size() > 1 && n.inputs[1] >= 0 && g.is_constant(n.inputs[1])) {
    const Tensor& t = *g.value(n.inputs[1]).constant;
    for (int64_t k = 0; k < t.element_count(); ++k) axes.push_back(t.dtype == DType::kI64 ? t.as<int64_t>()[static_cast<size_t>(k)] : t.as<int32_t>()[static_cast<size_t>(k)]);
  }
  const int64_t rank = static_cast<int64_t>(xs.size());
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != rank - 1)) return -1;
  const int64_t C = xs.back();
  return C >= 2 && C <= 1024 ? C : -1;
}

}  // namespace

Status reduce_mean_as_matmul(Graph& g, int* rewritten) {
  *rewritten = 0;
  for (Node& n : g.nodes) {
    const int64_t C = last_axis_mean(g, n);
    if (C < 0) continue;
    const std::vector<int64_t> full = g.value(n.inputs[0]).shape;
    const std::vector<int> widened = widened_values(g, n.outputs[0], full);
    if (widened.empty()) continue;
    Tensor w = Tensor::zeros(DType::kF32, {C, C});
    for (float& x : w.as<float>()) x = 1.0f / static_cast<float>(C);
    const int wv = g.add_value(Value{n.name + "_mean_weights", DType::kF32, {C, C}, std::move(w)});
    n.op = "MatMul";
    n.inputs = {n.inputs[0], wv};
    n.attrs.clear();
    n.proto.clear();  // ReduceMean's attributes do not apply to the MatMul
    refresh_proto(g, n);
    for (int v : widened) g.value(v).shape = full;
    ++*rewritten;
  }
  return Status::ok();
}

}  // namespace npu::compiler
