#include "qdq.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "onnx_tensor.h"

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

// A node built by a rewrite, with its NodeProto (host steps and --export-qdq carry it).
Node make_node(const Graph& g, const std::string& op, const std::string& name,
               std::vector<int> inputs, std::vector<int> outputs,
               const onnx::NodeProto* attributes_from, int64_t axis = INT64_MIN) {
  onnx::NodeProto p;
  p.set_op_type(op);
  p.set_name(name);
  for (int v : inputs) p.add_input(v < 0 ? "" : g.value(v).name);
  for (int v : outputs) p.add_output(g.value(v).name);
  if (attributes_from)
    for (const auto& a : attributes_from->attribute()) *p.add_attribute() = a;
  if (axis != INT64_MIN) {
    auto* a = p.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  Node n;
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  for (const auto& a : p.attribute()) n.attrs[a.name()] = attribute_from_proto(a);
  n.proto = p.SerializeAsString();
  return n;
}

int new_value(Graph& g, const std::string& name, DType dtype, std::vector<int64_t> shape,
              std::optional<Tensor> constant = std::nullopt) {
  Value v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.constant = std::move(constant);
  return g.add_value(std::move(v));
}

bool all_constant(const Graph& g, const Node& n, std::initializer_list<size_t> inputs) {
  for (size_t k : inputs)
    if (k < n.inputs.size() && n.inputs[k] >= 0 && !g.is_constant(n.inputs[k])) return false;
  return true;
}

// A QLinearMatMul B that the NPU can take at run time: int8/uint8 codes of a graph input that
// only this node reads, with per-tensor constant parameters (bind_integer_io binds it).
bool runtime_codes_operand(const Graph& g, const Node& n, size_t k) {
  const int b = n.inputs[k];
  const Value& v = g.value(b);
  if (g.is_constant(b) || (v.dtype != DType::kI8 && v.dtype != DType::kU8) ||
      std::count(g.inputs.begin(), g.inputs.end(), b) == 0 || is_output(g, b) || readers_of(g, b).size() != 1 ||
      std::count(n.inputs.begin(), n.inputs.end(), b) != 1)
    return false;
  for (size_t p = k + 1; p <= k + 2; ++p)
    if (p >= n.inputs.size() || n.inputs[p] < 0 || g.value(n.inputs[p]).constant->element_count() != 1) return false;
  return true;
}

}  // namespace

Status expand_qlinear(Graph& g, int* expanded, bool runtime_b) {
  *expanded = 0;
  std::vector<Node> out;
  for (Node& n : g.nodes) {
    const bool conv = n.op == "QLinearConv", matmul = n.op == "QLinearMatMul";
    // The parameters and the weights must be constants (then the NPU can take them), or B a
    // run-time operand the NPU binds and corrects (runtime_b).
    const bool params_constant = n.inputs.size() >= 8 && all_constant(g, n, {1, 2, 4, 5, 6, 7, 8});
    const bool b_ok = n.inputs.size() >= 8 && n.inputs[3] >= 0 &&
                      (g.is_constant(n.inputs[3]) || (matmul && runtime_b && params_constant &&
                                                      runtime_codes_operand(g, n, 3)));
    if ((!conv && !matmul) || n.inputs.size() < 8 || n.outputs.size() != 1 || n.inputs[0] < 0 || !params_constant ||
        !b_ok) {
      out.push_back(std::move(n));
      continue;
    }
    onnx::NodeProto original;
    if (!original.ParseFromString(n.proto)) {
      out.push_back(std::move(n));
      continue;
    }
    const int x = n.inputs[0], w = n.inputs[3], y = n.outputs[0];
    const std::string base = n.name;
    const int x_f = new_value(g, base + "_x_dequantized", DType::kF32, g.value(x).shape);
    const int w_f = new_value(g, base + "_w_dequantized", DType::kF32, g.value(w).shape);
    const int y_f = new_value(g, base + "_y_float", DType::kF32, g.value(y).shape);
    out.push_back(make_node(g, "DequantizeLinear", base + "_x_dequantize",
                            {x, n.inputs[1], n.inputs[2]}, {x_f}, nullptr));
    // Per-channel weight scales lie along the output channels: axis 0 of Conv W [M, C, kh, kw],
    // the last axis of MatMul B [..., K, N].
    const int64_t w_axis = conv ? 0 : static_cast<int64_t>(g.value(w).shape.size()) - 1;
    out.push_back(make_node(g, "DequantizeLinear", base + "_w_dequantize",
                            {w, n.inputs[4], n.inputs[5]}, {w_f}, nullptr, w_axis));
    std::vector<int> op_inputs = {x_f, w_f};
    if (conv && n.inputs.size() > 8 && n.inputs[8] >= 0) {
      // B is int32 at scale x_scale·w_scale (per output channel), zero point 0.
      const Tensor xs = to_float(*g.value(n.inputs[1]).constant),
                   ws = to_float(*g.value(n.inputs[4]).constant);
      const Tensor& b = *g.value(n.inputs[8]).constant;
      Tensor bs = Tensor::zeros(DType::kF32, {static_cast<int64_t>(ws.element_count())});
      for (int64_t c = 0; c < ws.element_count(); ++c)
        bs.as<float>()[static_cast<size_t>(c)] =
            xs.as<float>()[0] * ws.as<float>()[static_cast<size_t>(c)];
      Tensor bz = Tensor::zeros(DType::kI32, {ws.element_count()});
      if (ws.element_count() == 1) {
        bs.shape = {};
        bz.shape = {};
      }
      const int bs_v = new_value(g, base + "_b_scale", DType::kF32, bs.shape, bs);
      const int bz_v = new_value(g, base + "_b_zero_point", DType::kI32, bz.shape, bz);
      const int b_f = new_value(g, base + "_b_dequantized", DType::kF32, b.shape);
      out.push_back(make_node(g, "DequantizeLinear", base + "_b_dequantize",
                              {n.inputs[8], bs_v, bz_v}, {b_f}, nullptr, 0));
      op_inputs.push_back(b_f);
    }
    out.push_back(
        make_node(g, conv ? "Conv" : "MatMul", base, op_inputs, {y_f}, conv ? &original : nullptr));
    out.push_back(make_node(g, "QuantizeLinear", base + "_y_quantize",
                            {y_f, n.inputs[6], n.inputs[7]}, {y}, nullptr));
    ++*expanded;
  }
  g.nodes = std::move(out);
  return Status::ok();
}

Status expand_integer_ops(Graph& g, int* expanded, std::vector<std::string>* notes) {
  *expanded = 0;
  auto codes = [](DType t) { return t == DType::kI8 || t == DType::kU8; };
  std::vector<Node> out;
  for (Node& n : g.nodes) {
    const bool conv = n.op == "ConvInteger", matmul = n.op == "MatMulInteger";
    if (!conv && !matmul) {
      out.push_back(std::move(n));
      continue;
    }
    auto keep = [&](const std::string& why) {
      notes->push_back(n.label() + " stays on the host: " + why);
      out.push_back(std::move(n));
    };
    auto input = [&](size_t k) { return k < n.inputs.size() ? n.inputs[k] : -1; };
    const int x = input(0), w = input(1), xzp = input(2), wzp = input(3);
    if (x < 0 || w < 0 || n.outputs.size() != 1 || !codes(g.value(x).dtype) || !codes(g.value(w).dtype)) {
      keep("operands other than int8/uint8 codes");
      continue;
    }
    const int y = n.outputs[0];
    if (g.is_constant(x)) {
      keep("a constant first operand (constant folding computes it)");
      continue;
    }
    if (!is_output(g, y) || !readers_of(g, y).empty() || g.value(y).dtype != DType::kI32) {
      keep("its int32 result is read by other operators (the NPU hands int32 results only to the user)");
      continue;
    }
    if ((xzp >= 0 && !g.is_constant(xzp)) || (wzp >= 0 && !g.is_constant(wzp))) {
      keep("zero points that vary at run time");
      continue;
    }
    if ((xzp >= 0 && g.value(xzp).dtype != g.value(x).dtype) || (wzp >= 0 && g.value(wzp).dtype != g.value(w).dtype)) {
      keep("a zero point whose dtype differs from its operand's");
      continue;
    }
    if (xzp >= 0 && g.value(xzp).constant->element_count() != 1) {
      keep("a per-row zero point of the first operand (device views carry one zero point)");
      continue;
    }
    // Constant w/B: the float weights w - zero point (per output channel), which the NPU
    // layer takes with the declared scale 1 as exact integer codes (beyond int8, -255..255,
    // as several int8 weight sets: lower.cc).
    const bool w_constant = g.is_constant(w);
    const auto& ws = g.value(w).shape;
    const int64_t channels = conv ? (ws.empty() ? 0 : ws[0]) : (ws.empty() ? 0 : ws.back());
    const int64_t wzp_count = wzp >= 0 ? g.value(wzp).constant->element_count() : 1;
    if (wzp_count != 1 && (!w_constant || wzp_count != channels)) {
      keep(w_constant ? "a w_zero_point that is neither per tensor nor per output channel"
                      : "a per-column zero point of a run-time B (device views carry one zero point)");
      continue;
    }
    if (conv && !w_constant) {
      keep("a run-time w (its zero-point correction would need the unknown weights' sums per tap)");
      continue;
    }
    const std::string base = n.name.empty() ? n.op : n.name;
    int w_f = -1;
    std::vector<Node> added;
    if (w_constant) {
      const Tensor wv = to_float(*g.value(w).constant);
      const Tensor zv = wzp >= 0 ? to_float(*g.value(wzp).constant) : Tensor::zeros(DType::kF32, {1});
      Tensor shifted = Tensor::zeros(DType::kF32, ws);
      const int64_t count = wv.element_count(), per_channel = conv ? count / std::max<int64_t>(channels, 1) : 1;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t c = zv.element_count() == 1 ? 0 : conv ? i / per_channel : i % channels;
        shifted.as<float>()[static_cast<size_t>(i)] =
            wv.as<float>()[static_cast<size_t>(i)] - zv.as<float>()[static_cast<size_t>(c)];
      }
      w_f = new_value(g, base + "_w_minus_zero_point", DType::kF32, ws, std::move(shifted));
      g.value(w_f).quant = DeclaredQuant{{1.0f}, {0}, -1};
    }
    // The dequantised view real = 1·(q - zero point) of a run-time operand; bind_integer_io
    // turns it into a binding of the graph input when that is all that reads the input.
    Tensor one = Tensor::zeros(DType::kF32, {});
    one.as<float>()[0] = 1.0f;
    const int unit = new_value(g, base + "_unit_scale", DType::kF32, {}, one);
    auto dequantize = [&](int v, int zp, const std::string& tag) {
      Tensor z = Tensor::zeros(g.value(v).dtype, {});
      if (zp >= 0) z.data = g.value(zp).constant->data;
      const int zv = new_value(g, base + "_" + tag + "_zero_point", g.value(v).dtype, {}, std::move(z));
      const int f = new_value(g, base + "_" + tag + "_dequantized", DType::kF32, g.value(v).shape);
      added.push_back(make_node(g, "DequantizeLinear", base + "_" + tag + "_dequantize", {v, unit, zv}, {f}, nullptr));
      return f;
    };
    const int x_f = dequantize(x, xzp, conv ? "x" : "a");
    if (!w_constant) w_f = dequantize(w, wzp, "b");
    onnx::NodeProto original;
    if (!original.ParseFromString(n.proto)) original.Clear();
    added.push_back(make_node(g, conv ? "Conv" : "MatMul", n.name, {x_f, w_f}, {y}, conv ? &original : nullptr));
    Value& yv = g.value(y);
    yv.io_codes = DType::kI32;
    yv.dtype = DType::kF32;
    yv.quant = DeclaredQuant{{1.0f}, {0}, -1};
    for (Node& a : added) out.push_back(std::move(a));
    ++*expanded;
  }
  g.nodes = std::move(out);
  return Status::ok();
}

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

Status bind_integer_io(Graph& g, int* bound) {
  *bound = 0;
  std::set<size_t> removed;
  auto is_input = [&](int v) { return std::count(g.inputs.begin(), g.inputs.end(), v) > 0; };
  auto codes = [](DType t) { return t == DType::kI8 || t == DType::kU8; };
  auto bind = [&](int v, const DeclaredQuant& q) {
    Value& val = g.value(v);
    val.io_codes = val.dtype;
    val.dtype = DType::kF32;
    val.quant = q;
    ++*bound;
  };
  for (int x : g.inputs) {
    if (g.is_constant(x) || !codes(g.value(x).dtype)) continue;
    const std::vector<int> readers = readers_of(g, x);
    if (readers.empty()) continue;
    // DequantizeLinear readers with one set of constant per-tensor parameters.
    std::optional<DeclaredQuant> dq_quant;
    bool all_dq = true;
    for (int r : readers) {
      const Node& n = g.nodes[static_cast<size_t>(r)];
      const auto p = n.op == "DequantizeLinear" && n.inputs[0] == x && n.outputs.size() == 1 &&
                             std::count(n.inputs.begin(), n.inputs.end(), x) == 1 && !is_output(g, n.outputs[0])
                         ? constant_params(g, n)
                         : std::nullopt;
      if (!p || p->q.scale.size() != 1 || p->code_type != g.value(x).dtype ||
          (dq_quant && !same_quant(*dq_quant, p->q))) {
        all_dq = false;
        break;
      }
      dq_quant = p->q;
    }
    if (all_dq) {
      for (int r : readers) {
        replace_reads(g, g.nodes[static_cast<size_t>(r)].outputs[0], x, {});
        removed.insert(static_cast<size_t>(r));
      }
      bind(x, *dq_quant);
      continue;
    }
    // Operators that are exact on the codes themselves, each writing a graph output nobody reads.
    std::vector<int> bound_operands;  // run-time Clip bounds and Add/Sub/Mul second operands
    bool exact_on_codes = true;
    for (int r : readers) {
      const Node& n = g.nodes[static_cast<size_t>(r)];
      // Integer Div truncates: exact on the VEC unit for uint8 (unsigned restoring division);
      // int8 Div, with its signs, stays on the host.
      const bool arithmetic = (n.op == "Add" || n.op == "Sub" || n.op == "Mul" ||
                               (n.op == "Div" && g.value(x).dtype == DType::kU8)) &&
                              n.inputs.size() == 2;
      const bool op_ok = (n.op == "MaxPool" && n.outputs.size() == 1) || n.op == "Relu" || n.op == "Clip" || arithmetic;
      const bool reads_x = arithmetic ? std::count(n.inputs.begin(), n.inputs.end(), x) > 0 : n.inputs[0] == x;
      exact_on_codes = exact_on_codes && op_ok && reads_x && n.outputs.size() == 1 &&
                       g.value(n.outputs[0]).dtype == g.value(x).dtype && is_output(g, n.outputs[0]) &&
                       readers_of(g, n.outputs[0]).empty();
      if (exact_on_codes && arithmetic) {
        // Integer Add/Sub/Mul (wrapping modulo 2^8, exact on codes with the VEC wrap bit): the
        // other operand must be run-time codes of the same dtype that only this node reads.
        const int b = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
        if (b != x) {
          exact_on_codes = b >= 0 && is_input(b) && !g.is_constant(b) && g.value(b).dtype == g.value(x).dtype &&
                           readers_of(g, b).size() == 1;
          bound_operands.push_back(b);
        }
        if (!exact_on_codes) break;
        continue;
      }
      for (size_t k = 1; exact_on_codes && k < n.inputs.size(); ++k) {
        const int b = n.inputs[k];
        if (b < 0 || g.is_constant(b)) continue;
        // A run-time Clip bound: quantised like x (the partitioner's rule), so it must be
        // codes of x's dtype that only this node reads.
        exact_on_codes = is_input(b) && g.value(b).dtype == g.value(x).dtype && readers_of(g, b).size() == 1;
        bound_operands.push_back(b);
      }
      if (!exact_on_codes) break;
    }
    if (!exact_on_codes) continue;
    DeclaredQuant unit;
    unit.scale = {1.0f};
    unit.zero_point = {g.value(x).dtype == DType::kU8 ? -128 : 0};
    for (int r : readers) {
      Node& n = g.nodes[static_cast<size_t>(r)];
      n.integer_wrap = n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div";
      for (size_t k = 1; k < n.inputs.size(); ++k)
        if (n.inputs[k] >= 0 && g.is_constant(n.inputs[k])) {
          // Constant bounds as floats: the partitioner reads float scalars.
          const int f = new_value(g, n.name + "_bound_" + std::to_string(k), DType::kF32,
                                  g.value(n.inputs[k]).shape, to_float(*g.value(n.inputs[k]).constant));
          n.inputs[k] = f;
        }
      bind(n.outputs[0], unit);
    }
    for (int b : bound_operands) bind(b, unit);
    bind(x, unit);
  }
  // A lone QuantizeLinear (float graph input -> codes graph output) or DequantizeLinear
  // (codes graph input -> float graph output) becomes an Identity between the two with one
  // quantisation: the runtime's boundary conversion is then exactly the operator (ties to
  // even, saturating; real = scale·(q - zero_point)) and the NPU copies the codes.
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    Node& q = g.nodes[qi];
    if (removed.count(qi) || (q.op != "QuantizeLinear" && q.op != "DequantizeLinear") || q.outputs.size() != 1 ||
        q.inputs.empty() || q.inputs[0] < 0)
      continue;
    const int in = q.inputs[0], out = q.outputs[0];
    const bool quantize = q.op == "QuantizeLinear";
    const int code_side = quantize ? out : in, real_side = quantize ? in : out;
    if (!is_input(in) || g.is_constant(in) || !is_output(g, out) || is_output(g, in) || readers_of(g, in).size() != 1 ||
        !readers_of(g, out).empty() || !codes(g.value(code_side).dtype) || g.value(real_side).dtype != DType::kF32 ||
        g.value(real_side).quant)
      continue;
    auto p = constant_params(g, q);
    if (!p || p->code_type != g.value(code_side).dtype) continue;
    if (p->q.scale.size() > 1) {
      // Per-axis parameters (one scale and zero point per index of `axis`) become a per-axis
      // quantisation of both device views: the runtime's boundary conversion applies them
      // element by element, and the NPU still only copies codes.
      const auto rank = static_cast<int64_t>(g.value(in).shape.size());
      if (p->q.axis < 0) p->q.axis += rank;
      if (p->q.axis < 0 || p->q.axis >= rank ||
          g.value(in).shape[static_cast<size_t>(p->q.axis)] != static_cast<int64_t>(p->q.scale.size()))
        continue;
    }
    q = make_node(g, "Identity", q.name, {in}, {out}, nullptr);
    bind(code_side, p->q);
    g.value(real_side).quant = p->q;
  }
  for (size_t qi = 0; qi < g.nodes.size(); ++qi) {
    const Node& q = g.nodes[qi];
    if (removed.count(qi) || q.op != "QuantizeLinear" || q.outputs.size() != 1 || q.inputs.empty() ||
        q.inputs[0] < 0)
      continue;
    const int y = q.outputs[0], xf = q.inputs[0];
    if (!is_output(g, y) || !codes(g.value(y).dtype) || !readers_of(g, y).empty()) continue;
    if (g.value(xf).dtype != DType::kF32 || is_input(xf) || is_output(g, xf) || g.is_constant(xf) ||
        readers_of(g, xf).size() != 1 || std::count(q.inputs.begin(), q.inputs.end(), xf) != 1)
      continue;
    const auto p = constant_params(g, q);
    if (!p || p->q.scale.size() != 1 || p->code_type != g.value(y).dtype) continue;
    auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
      return std::count(n.outputs.begin(), n.outputs.end(), xf) > 0;
    });
    if (producer == g.nodes.end()) continue;
    for (int& o : producer->outputs)
      if (o == xf) o = y;
    g.value(y).shape = g.value(xf).shape;
    bind(y, p->q);
    removed.insert(qi);
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
