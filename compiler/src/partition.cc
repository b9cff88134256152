#include "partition.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "attention_layout.h"
#include "npu/compiler/host_ops.h"
#include "qdq.h"

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
// A value consumed only by node `ni` and produced by nobody: a graph input, whose device
// layout the compiler may choose (the runtime's input binding writes any strided layout).
bool sole_graph_input(const Graph& g, int v, size_t ni) {
  if (std::find(g.inputs.begin(), g.inputs.end(), v) == g.inputs.end() || is_graph_output(g, v)) return false;
  auto c = consumers(g, v);
  return c.size() == 1 && static_cast<size_t>(c[0]) == ni &&
         std::count(g.nodes[ni].inputs.begin(), g.nodes[ni].inputs.end(), v) == 1;
}

// Gemm/MatMul whose B is a graph value (weights as an input, or attention's product of two
// activations). Layout rules: 2-D/3-D values are dense; a transposed operand or a 4-D one
// (whose default device layout is NHWC) must be a graph input of this node alone, and a
// 4-D result must be a graph output nobody else reads, unless the 4-D value is one that
// dense_attention_values (`dense4`) stores dense.
std::optional<FcLayer> match_fc_dynamic(const Graph& g, size_t ni, const std::set<int>& dense4) {
  const Node& n = g.nodes[ni];
  const int a = n.inputs[0], b = n.inputs[1];
  const auto& xs = g.value(a).shape;
  const auto& bs = g.value(b).shape;
  FcLayer L;
  L.name = n.name;
  L.op = n.op;
  L.input = a;
  L.weight_input = b;
  L.output = n.outputs[0];
  if (n.op == "Gemm") {
    if (xs.size() != 2 || bs.size() != 2) return std::nullopt;
    L.input_transposed = n.attr_int("transA", 0) != 0;
    L.weight_transposed = n.attr_int("transB", 0) != 0;
    L.alpha = n.attr_float("alpha", 1.0f);
    L.beta = n.attr_float("beta", 1.0f);
    // Negative or zero factors would need negative quantisation scales.
    if (!(L.alpha > 0) || !(L.beta > 0)) return std::nullopt;
    L.M = L.input_transposed ? xs[1] : xs[0];
    L.K = L.input_transposed ? xs[0] : xs[1];
    L.N = L.weight_transposed ? bs[0] : bs[1];
    if ((L.weight_transposed ? bs[1] : bs[0]) != L.K) return std::nullopt;
  } else if (bs.size() == 2 && xs.size() >= 2) {
    // One B for every row of x [..., M, K]: the rows of all batches are one M.
    L.K = xs.back();
    L.N = bs.back();
    if (bs[0] != L.K) return std::nullopt;
    L.M = 1;
    for (size_t d = 0; d + 1 < xs.size(); ++d) L.M *= xs[d];
  } else {
    if (xs.size() < 2 || bs.size() < 2 || xs.size() != bs.size()) return std::nullopt;
    if (!std::equal(xs.begin(), xs.end() - 2, bs.begin())) return std::nullopt;  // no other batch broadcasting
    L.M = xs[xs.size() - 2];
    L.K = xs.back();
    L.N = bs.back();
    if (bs[bs.size() - 2] != L.K) return std::nullopt;
    for (size_t d = 0; d + 2 < xs.size(); ++d) L.batches *= xs[d];
  }
  if (L.M <= 0 || L.K <= 0 || L.N <= 0 || L.batches <= 0) return std::nullopt;
  if ((L.input_transposed || (xs.size() == 4 && !dense4.count(a))) && !sole_graph_input(g, a, ni)) return std::nullopt;
  if ((L.weight_transposed || (bs.size() == 4 && !dense4.count(b))) && !sole_graph_input(g, b, ni))
    return std::nullopt;
  if (g.value(L.output).shape.size() == 4 && !dense4.count(L.output) &&
      (!is_graph_output(g, L.output) || !consumers(g, L.output).empty()))
    return std::nullopt;
  L.bias.assign(static_cast<size_t>(L.N), 0.0f);
  if (n.op == "Gemm" && n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const int c = n.inputs[2];
    const auto& cs = g.value(c).shape;
    if (g.is_constant(c)) {
      const Tensor t = to_float(*g.value(c).constant);
      if (t.element_count() != 1 && t.element_count() != L.N) return std::nullopt;
      for (int64_t j = 0; j < L.N; ++j)
        L.bias[static_cast<size_t>(j)] = L.beta * t.as<float>()[static_cast<size_t>(t.element_count() == 1 ? 0 : j)];
    } else {
      // [N], [1, N] and [M, N] are rows of the accumulator; one element ([] or [1]) is spread
      // over the lanes by a GEMM.
      const bool row = (cs.size() == 1 && cs[0] == L.N) || (cs.size() == 2 && cs[0] == 1 && cs[1] == L.N);
      const bool matrix = cs.size() == 2 && cs[0] == L.M && cs[1] == L.N;
      const bool scalar = cs.empty() || cs == std::vector<int64_t>{1};
      if (!(row || matrix || scalar) || !sole_graph_input(g, c, ni)) return std::nullopt;
      L.bias_input = c;
      L.bias_scalar = scalar && !matrix;
    }
  }
  return L;
}

std::optional<FcLayer> match_fc(const Graph& g, size_t ni, std::set<size_t>& used, const std::set<int>& dense4) {
  const Node& n = g.nodes[ni];
  if (n.op != "Gemm" && n.op != "MatMul") return std::nullopt;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || g.is_constant(n.inputs[0])) return std::nullopt;
  if (!g.is_constant(n.inputs[1])) return match_fc_dynamic(g, ni, dense4);
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
  L.weight_scales = declared_weight_scales(g, n.inputs[1], tb ? 0 : 1, L.N, alpha);
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
  // A value the model quantises itself (QDQ) is a rounding point: an activation after it is
  // a separate (exact) table lookup, not a clamp fused into the requantisation.
  if (auto relu = g.value(out).quant ? std::nullopt : next_consumer("Relu")) {
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

std::optional<EltLayer> match_chain(const Graph& g, size_t ni, const std::set<size_t>& used,
                                    std::vector<size_t>* members);
std::optional<EltLayer> match_elementwise(const Graph& g, size_t ni, uint32_t array_dim, const ValueRanges* ranges,
                                          const std::set<int>* dense4 = nullptr);

// A lookup-table layer (an element-wise chain, or one table function) that alone reads the
// conv's output becomes the conv's fused LUT (ConvLayer::lut_input): its nodes join `used`.
// Only where nothing else is fused (a clamp after the table would be a second rounding).
void fuse_lut_activation(const Graph& g, ConvLayer& L, std::set<size_t>& used) {
  const int out = L.output;
  if (!L.fused.empty() || L.int32_output || is_graph_output(g, out) || g.value(out).quant || g.value(out).io_codes)
    return;
  // A chain may read x more than once (hard-swish's x·Clip(x + 3, 0, 6)): every reader of the
  // conv's output must be in it. Consumers come in node order, so the first one starts it.
  auto c = consumers(g, out);
  if (c.empty() || used.count(static_cast<size_t>(c[0]))) return;
  const size_t ni = static_cast<size_t>(*std::min_element(c.begin(), c.end()));
  std::vector<size_t> members;
  std::optional<EltLayer> e = match_chain(g, ni, used, &members);
  if (!e && c.size() == 1) {
    e = match_elementwise(g, ni, 16, nullptr);
    members = {ni};
  }
  if (!e || e->kind != EltLayer::Kind::kLut || !e->fn || e->inputs != std::vector<int>{out}) return;
  for (int r : c)
    if (std::find(members.begin(), members.end(), static_cast<size_t>(r)) == members.end()) return;
  for (size_t m : members) {
    used.insert(m);
    L.fused.push_back(g.nodes[m].name);
  }
  L.lut_input = out;
  L.lut_fn = e->fn;
  L.output = e->output;
}

// A Relu, or a Clip with constant bounds, that alone reads the conv's output `out` becomes
// the conv's requantisation clamp (L.act_lo/act_hi); it joins `used` and L.fused, and
// L.output is what the layer then writes.
void fuse_clamp_activation(const Graph& g, int out, ConvLayer& L, std::set<size_t>& used) {
  if (!is_graph_output(g, out) && !g.value(out).quant) {  // see match_fc on declared values
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
}

std::optional<ConvLayer> match_conv(const Graph& g, size_t ni, std::set<size_t>& used) {
  const Node& n = g.nodes[ni];
  if (n.op != "Conv" || n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || g.is_constant(n.inputs[0]))
    return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  // A dynamic W (a graph input of this node alone) is stored [KH][KW][C][Cout] by the input
  // binding; only its shape is known here.
  const bool dynamic = !g.is_constant(n.inputs[1]);
  if (dynamic && !sole_graph_input(g, n.inputs[1], ni)) return std::nullopt;
  const Tensor Wt = dynamic ? Tensor::zeros(DType::kF32, g.value(n.inputs[1]).shape)
                            : to_float(*g.value(n.inputs[1]).constant);
  if (x.shape.size() != 4 || Wt.shape.size() != 4) return std::nullopt;
  for (int64_t d : ints_attr(n, "dilations", {1, 1}))
    if (d != 1) return std::nullopt;
  ConvLayer L;
  if (dynamic) L.weight_input = n.inputs[1];
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
  auto pads = ints_attr(n, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || pads.size() != 4 || strides[0] < 1 || strides[1] < 1) return std::nullopt;
  L.stride_h = strides[0];
  L.stride_w = strides[1];
  auto it = n.attrs.find("auto_pad");
  const std::string auto_pad = it == n.attrs.end() || it->second.s.empty() ? "NOTSET" : it->second.s;
  if (auto_pad == "VALID") {
    pads = {0, 0, 0, 0};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // Output size ceil(in / stride); the odd padding element goes last (UPPER) or first.
    const int64_t in[2] = {L.H, L.W}, k[2] = {L.KH, L.KW};
    for (int d = 0; d < 2; ++d) {
      const int64_t out = (in[d] + strides[d] - 1) / strides[d];
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + k[d] - in[d]);
      const int64_t small = total / 2, large = total - small;
      pads[static_cast<size_t>(d)] = auto_pad == "SAME_UPPER" ? small : large;
      pads[static_cast<size_t>(d + 2)] = auto_pad == "SAME_UPPER" ? large : small;
    }
  } else if (auto_pad != "NOTSET") {
    return std::nullopt;
  }
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
  if (dynamic && L.depthwise) return std::nullopt;  // DWCONV weights are per-lane rows, not tiles
  if (!dynamic) {
    L.weights.assign(Wt.as<float>().begin(), Wt.as<float>().end());
    L.weight_scales = declared_weight_scales(g, n.inputs[1], 0, L.Cout, 1.0f);
  }
  L.bias.assign(static_cast<size_t>(L.Cout), 0.0f);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !g.is_constant(n.inputs[2])) {
    // A dynamic bias is quantised with the scale s_x·s_w, known only per tensor.
    if (!dynamic || g.value(n.inputs[2]).shape != std::vector<int64_t>{L.Cout} || !sole_graph_input(g, n.inputs[2], ni))
      return std::nullopt;
    L.bias_input = n.inputs[2];
  } else if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor b = to_float(*g.value(n.inputs[2]).constant);
    if (b.element_count() != L.Cout) return std::nullopt;
    L.bias.assign(b.as<float>().begin(), b.as<float>().end());
  }
  fuse_clamp_activation(g, n.outputs[0], L, used);
  fuse_lut_activation(g, L, used);
  return L;
}

// The rest of a layer lower_tap_gemm_conv lowers (ConvTranspose, 3-D Conv): the scratchpad
// bounds for the smallest array (N = 8 channels per row, 32 KiB ACC rows: the input volume
// and one output slice's accumulators must fit, and the 16-bit row strides of the GEMMs),
// then W (constant, or a graph input of this node alone: dynamic) and the bias (constant,
// or with a dynamic W a graph input of this node alone: int32 at the scale s_x·s_w, which
// needs the per-tensor s_w of a dynamic W). False when the NPU cannot take it.
bool take_tap_gemm_operands(const Graph& g, size_t ni, ConvLayer& L) {
  const Node& n = g.nodes[ni];
  // A 2-D layer is cut into bands of output rows (lower_tap_gemm_conv), so one output row
  // and the input rows it reads must fit; a 3-D one is lowered whole.
  const int64_t span = (L.KH - 1) * L.dil_h;
  const int64_t rows_per_output_row = L.transposed ? (span + L.stride_h - 1) / L.stride_h + 1 : span + 1;
  const bool fits = L.three_d ? L.OH * L.OW <= 1024 && L.D * L.H * L.W * ((L.C + 7) / 8) + L.OH * L.OW <= 4096
                              : L.OW <= 1024 && rows_per_output_row * L.W * ((L.C + 7) / 8) + L.OW <= 4096;
  if (!fits || L.stride_h * (L.transposed ? L.OW : L.W) > 65535) return false;
  if (!g.is_constant(n.inputs[1])) {
    L.weight_input = n.inputs[1];
  } else {
    const Tensor wt = to_float(*g.value(n.inputs[1]).constant);
    L.weights.assign(wt.as<float>().begin(), wt.as<float>().end());
  }
  L.bias.assign(static_cast<size_t>(L.Cout), 0.0f);
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const int b = n.inputs[2];
    if (g.value(b).shape != std::vector<int64_t>{L.Cout}) return false;
    if (g.is_constant(b)) {
      const Tensor t = to_float(*g.value(b).constant);
      L.bias.assign(t.as<float>().begin(), t.as<float>().end());
    } else if (L.weight_input >= 0 && sole_graph_input(g, b, ni)) {
      L.bias_input = b;
    } else {
      return false;
    }
  }
  return true;
}

// A 3-D Conv ([N,C,D,H,W], group 1) with constant or dynamic W [Cout][C][KD][KH][KW] and
// bias, strides, dilations, explicit or SAME/VALID pads: the sum over kernel depth of 2-D
// ones, lowered like ConvTranspose (lower.h): one GEMM per tap over the output pixels its
// input pixels reach, padding taps skipped, so the input is symmetric. Like the 3-D
// ConvTranspose its input must be a graph input of this node alone and its output a graph
// output nobody else reads (both stored [N][D][H][W][C padded]).
std::optional<ConvLayer> match_conv_3d(const Graph& g, size_t ni) {
  const Node& n = g.nodes[ni];
  if (n.op != "Conv" || n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 || n.outputs.size() != 1 ||
      n.attr_int("group", 1) != 1)
    return std::nullopt;
  const auto& x = g.value(n.inputs[0]).shape;
  const auto& w = g.value(n.inputs[1]).shape;
  const auto& y = g.value(n.outputs[0]).shape;
  if (x.size() != 5 || w.size() != 5 || y.size() != 5 || w[1] != x[1] || y[0] != x[0] || y[1] != w[0]) return std::nullopt;
  if (!sole_graph_input(g, n.inputs[0], ni) || !is_graph_output(g, n.outputs[0]) || !consumers(g, n.outputs[0]).empty())
    return std::nullopt;
  const bool dynamic = !g.is_constant(n.inputs[1]);
  if (dynamic && !sole_graph_input(g, n.inputs[1], ni)) return std::nullopt;
  const auto k = ints_attr(n, "kernel_shape", {w[2], w[3], w[4]});
  const auto st = ints_attr(n, "strides", {1, 1, 1});
  const auto dil = ints_attr(n, "dilations", {1, 1, 1});
  auto pads = ints_attr(n, "pads", {0, 0, 0, 0, 0, 0});
  if (k != std::vector<int64_t>{w[2], w[3], w[4]} || st.size() != 3 || dil.size() != 3 || pads.size() != 6) return std::nullopt;
  auto ap = n.attrs.find("auto_pad");
  const std::string auto_pad = ap == n.attrs.end() || ap->second.s.empty() ? "NOTSET" : ap->second.s;
  for (size_t d = 0; d < 3; ++d) {
    if (st[d] < 1 || dil[d] < 1) return std::nullopt;
    // The output size says how much padding SAME_* added in total (the odd one last for
    // UPPER, first for LOWER).
    const int64_t total = std::max<int64_t>(0, (y[2 + d] - 1) * st[d] + (k[d] - 1) * dil[d] + 1 - x[2 + d]);
    if (auto_pad == "VALID") {
      pads[d] = pads[d + 3] = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + 3] = total - pads[d];
    } else if (auto_pad != "NOTSET") {
      return std::nullopt;
    }
    if ((x[2 + d] + pads[d] + pads[d + 3] - (k[d] - 1) * dil[d] - 1) / st[d] + 1 != y[2 + d]) return std::nullopt;
  }
  ConvLayer L;
  L.name = n.name;
  L.three_d = true;
  L.input = n.inputs[0];
  L.output = n.outputs[0];
  L.batch = x[0];
  L.C = x[1];
  L.D = x[2];
  L.H = x[3];
  L.W = x[4];
  L.Cout = w[0];
  L.KD = w[2];
  L.KH = w[3];
  L.KW = w[4];
  L.OD = y[2];
  L.OH = y[3];
  L.OW = y[4];
  L.stride_d = st[0];
  L.stride_h = st[1];
  L.stride_w = st[2];
  L.dil_d = dil[0];
  L.dil_h = dil[1];
  L.dil_w = dil[2];
  L.pad_f = pads[0];
  L.pad_t = pads[1];
  L.pad_l = pads[2];
  L.pad_k = pads[3];
  L.pad_b = pads[4];
  L.pad_r = pads[5];
  if (!take_tap_gemm_operands(g, ni, L)) return std::nullopt;
  return L;
}

// ConvTranspose (2-D, group 1) with constant or dynamic W [C][Cout][KH][KW] and bias.
std::optional<ConvLayer> match_conv_transpose(const Graph& g, size_t ni, std::set<size_t>& used) {
  const Node& n = g.nodes[ni];
  if (n.op != "ConvTranspose" || n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0 ||
      g.is_constant(n.inputs[0]) || n.attr_int("group", 1) != 1)
    return std::nullopt;
  // A 1-D ConvTranspose ([N,C,L]) is the 2-D one with H = 1 when its input is a graph input of
  // this node alone and its output a graph output nobody else reads: the compiler then stores
  // both channels-last ([N][L][C padded]), the NHWC layout with H = 1. A 3-D one
  // ([N,C,D,H,W]) under the same condition is stored [N][D][H][W][C padded] and lowered as a
  // sum over kernel depth of 2-D ones (lower_tap_gemm_conv); its depth attributes are split
  // off here and the rest is the 2-D case.
  const size_t rank = g.value(n.inputs[0]).shape.size();
  const bool one_d = rank == 3, three_d = rank == 5;
  auto as_2d = [&](std::vector<int64_t> s) {
    if (one_d && s.size() == 3) s.insert(s.begin() + 2, 1);
    if (three_d && s.size() == 5) s.erase(s.begin() + 2);
    return s;
  };
  const auto x = as_2d(g.value(n.inputs[0]).shape);
  const auto w = as_2d(g.value(n.inputs[1]).shape);
  const auto y = as_2d(g.value(n.outputs[0]).shape);
  if (x.size() != 4 || w.size() != 4 || y.size() != 4 || w[0] != x[1] || y[0] != x[0] || y[1] != w[1]) return std::nullopt;
  if ((one_d || three_d) && (!sole_graph_input(g, n.inputs[0], ni) || !is_graph_output(g, n.outputs[0]) ||
                             !consumers(g, n.outputs[0]).empty()))
    return std::nullopt;
  const bool dynamic = !g.is_constant(n.inputs[1]);
  if (dynamic && !sole_graph_input(g, n.inputs[1], ni)) return std::nullopt;
  ConvLayer L;
  L.one_d = one_d;
  L.name = n.name;
  L.transposed = true;
  L.input = n.inputs[0];
  L.output = n.outputs[0];
  L.batch = x[0];
  L.C = x[1];
  L.H = x[2];
  L.W = x[3];
  L.Cout = w[1];
  L.KH = w[2];
  L.KW = w[3];
  L.OH = y[2];
  L.OW = y[3];
  // Attributes of a 1-D node gain the H entry (kernel 1, stride 1, no padding).
  // Attributes of a 3-D node lose their depth entry (kept in `depth`: for pads the begin
  // pad, then the end pad).
  std::map<std::string, std::vector<int64_t>> depth;
  auto attr_2d = [&](const std::string& key, std::vector<int64_t> fallback, int64_t h_value) {
    auto it = n.attrs.find(key);
    if (it == n.attrs.end()) return fallback;
    std::vector<int64_t> v = it->second.ints;
    if (three_d) {
      if (key == "output_shape" && v.size() == 5) v.erase(v.begin(), v.begin() + 2);
      if (key == "pads" && v.size() == 6) {
        depth[key] = {v[0], v[3]};
        return std::vector<int64_t>{v[1], v[2], v[4], v[5]};
      }
      if (key != "pads" && v.size() == 3) {
        depth[key] = {v[0]};
        return std::vector<int64_t>{v[1], v[2]};
      }
      return std::vector<int64_t>{};  // rejected below
    }
    if (!one_d) return v;
    if (v.size() == 1) return std::vector<int64_t>{h_value, v[0]};
    if (v.size() == 2 && key == "pads") return std::vector<int64_t>{0, v[0], 0, v[1]};
    return std::vector<int64_t>{};  // rejected below
  };
  const auto k = attr_2d("kernel_shape", {L.KH, L.KW}, 1);
  const auto st = attr_2d("strides", {1, 1}, 1);
  const auto dil = attr_2d("dilations", {1, 1}, 1);
  const auto pads = attr_2d("pads", {0, 0, 0, 0}, 0);
  const auto out_pad = attr_2d("output_padding", {0, 0}, 0);
  auto out_shape = attr_2d("output_shape", {}, 1);
  if (out_shape.size() == 4) out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
  auto ap = n.attrs.find("auto_pad");
  const std::string auto_pad = ap == n.attrs.end() || ap->second.s.empty() ? "NOTSET" : ap->second.s;
  if (k != std::vector<int64_t>{L.KH, L.KW} || st.size() != 2 || dil.size() != 2 || pads.size() != 4 ||
      out_pad.size() != 2 || (!out_shape.empty() && out_shape.size() != 2))
    return std::nullopt;
  // The begin pads by the host kernel's rule (host_ops/spatial.cc conv_transpose): explicit
  // pads, or split from the total when output_shape or SAME_* fixes the output size.
  int64_t begin[2];
  const int64_t in[2] = {L.H, L.W}, ker[2] = {L.KH, L.KW}, out[2] = {L.OH, L.OW};
  for (int d = 0; d < 2; ++d) {
    if (st[static_cast<size_t>(d)] < 1 || dil[static_cast<size_t>(d)] < 1) return std::nullopt;
    const int64_t full = st[static_cast<size_t>(d)] * (in[d] - 1) + out_pad[static_cast<size_t>(d)] +
                         (ker[d] - 1) * dil[static_cast<size_t>(d)] + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, full - out[d]);
      begin[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID") {
      begin[d] = 0;
    } else if (auto_pad == "NOTSET") {
      begin[d] = pads[static_cast<size_t>(d)];
    } else {
      return std::nullopt;
    }
  }
  if (three_d) {
    // The depth axis by the same rules as H and W.
    const auto& xs = g.value(n.inputs[0]).shape;
    const auto& ws = g.value(n.inputs[1]).shape;
    const auto& ys = g.value(n.outputs[0]).shape;
    auto depth_attr = [&](const std::string& key, std::vector<int64_t> fallback) {
      auto it = depth.find(key);
      return it == depth.end() ? fallback : it->second;
    };
    L.three_d = true;
    L.D = xs[2];
    L.KD = ws[2];
    L.OD = ys[2];
    if (depth_attr("kernel_shape", {L.KD})[0] != L.KD) return std::nullopt;
    L.stride_d = depth_attr("strides", {1})[0];
    L.dil_d = depth_attr("dilations", {1})[0];
    if (L.stride_d < 1 || L.dil_d < 1) return std::nullopt;
    const int64_t full = L.stride_d * (L.D - 1) + depth_attr("output_padding", {0})[0] + (L.KD - 1) * L.dil_d + 1;
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, full - L.OD);
      L.pad_f = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "NOTSET") {
      L.pad_f = depth_attr("pads", {0, 0})[0];
    }
  }
  L.stride_h = st[0];
  L.stride_w = st[1];
  L.dil_h = dil[0];
  L.dil_w = dil[1];
  L.pad_t = begin[0];
  L.pad_l = begin[1];
  if (!take_tap_gemm_operands(g, ni, L)) return std::nullopt;
  if (!one_d && !three_d) {
    fuse_clamp_activation(g, n.outputs[0], L, used);
    fuse_lut_activation(g, L, used);
  }
  return L;
}

float scalar_constant(const Graph& g, int v, bool* ok) {
  if (v < 0 || !g.is_constant(v) || g.value(v).constant->element_count() != 1) {
    *ok = false;
    return 0;
  }
  *ok = true;
  return to_float(*g.value(v).constant).as<float>()[0];
}

// --- element-wise chains ------------------------------------------------------------------
// Exporters spell activations out as chains of primitive operators on one tensor: hard-swish
// as x·Clip(x + 3, 0, 6)/6, SiLU as x·Sigmoid(x), GELU as x·(1 + Erf(x/√2))/2, and PP-LCNet's
// learnable affine a·x + b around them. Every such chain is a function of its one run-time
// input alone, so it is one table lookup on the VEC unit: one pass and one rounding instead of
// one per operator.

// Whether n is an element-wise operator whose run-time operands all lie in `known` and whose
// other operands are one-element constants, with the shape of its output that of `shape`.
bool chain_operator(const Graph& g, const Node& n, const std::set<int>& known, const std::vector<int64_t>& shape) {
  static const std::set<std::string> kOps = {"Relu", "Clip", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish",
                                             "LeakyRelu", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Exp",
                                             "Erf", "Sqrt", "Reciprocal", "Pow", "Softplus"};
  if (!kOps.count(n.op) || n.integer_wrap || n.outputs.size() != 1 || n.inputs.empty()) return false;
  if (g.value(n.outputs[0]).shape != shape || g.value(n.outputs[0]).dtype != DType::kF32) return false;
  bool reads_known = false;
  for (int v : n.inputs) {
    if (v < 0) continue;
    if (known.count(v)) {
      reads_known = true;
    } else if (!g.is_constant(v) || g.value(v).constant->element_count() != 1) {
      return false;
    }
  }
  return reads_known;
}

// The real-valued function of a chain's nodes (in order) of its input x.
std::function<float(float)> chain_function(const Graph& g, const std::vector<size_t>& nodes, int x) {
  struct Step {
    std::string op;
    std::vector<int> in;         // value index, or -1 with the constant in `c`
    std::vector<float> c;
    float alpha, beta, lo, hi;
    int out;
  };
  std::vector<Step> steps;
  for (size_t ni : nodes) {
    const Node& n = g.nodes[ni];
    Step st{n.op, {}, {}, n.attr_float("alpha", n.op == "LeakyRelu" ? 0.01f : 0.2f), n.attr_float("beta", 0.5f),
            n.attr_float("min", -INFINITY), n.attr_float("max", INFINITY), n.outputs[0]};
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      const bool constant = v >= 0 && g.is_constant(v);
      const float c = constant ? to_float(*g.value(v).constant).as<float>()[0] : 0.0f;
      if (n.op == "Clip" && k > 0) {
        if (constant) (k == 1 ? st.lo : st.hi) = c;
        continue;
      }
      st.in.push_back(constant ? -1 : v);
      st.c.push_back(c);
    }
    steps.push_back(std::move(st));
  }
  return [steps = std::move(steps), x](float xv) {
    std::vector<std::pair<int, float>> env = {{x, xv}};
    auto get = [&](const Step& s, size_t k) {
      if (s.in[k] < 0) return s.c[k];
      for (const auto& [v, f] : env)
        if (v == s.in[k]) return f;
      return 0.0f;  // unreachable: chain_operator checked every operand
    };
    float y = 0;
    for (const Step& s : steps) {
      const float a = get(s, 0), b = s.in.size() > 1 ? get(s, 1) : 0.0f;
      const std::string& op = s.op;
      if (op == "Relu") y = std::max(a, 0.0f);
      else if (op == "Clip") y = std::clamp(a, s.lo, s.hi);
      else if (op == "Sigmoid") y = 1.0f / (1.0f + std::exp(-a));
      else if (op == "Tanh") y = std::tanh(a);
      else if (op == "HardSigmoid") y = std::clamp(s.alpha * a + s.beta, 0.0f, 1.0f);
      else if (op == "HardSwish") y = a * std::clamp(a / 6.0f + 0.5f, 0.0f, 1.0f);
      else if (op == "LeakyRelu") y = a >= 0 ? a : s.alpha * a;
      else if (op == "Add") y = a + b;
      else if (op == "Sub") y = a - b;
      else if (op == "Mul") y = a * b;
      else if (op == "Div") y = a / b;
      else if (op == "Neg") y = -a;
      else if (op == "Abs") y = std::fabs(a);
      else if (op == "Exp") y = std::exp(a);
      else if (op == "Erf") y = std::erf(a);
      else if (op == "Sqrt") y = std::sqrt(a);
      else if (op == "Reciprocal") y = 1.0f / a;
      else if (op == "Pow") y = std::pow(a, b);
      else if (op == "Softplus") y = std::log1p(std::exp(a));
      env.emplace_back(s.out, y);
    }
    return y;
  };
}

// The longest chain of two or more element-wise operators from node ni on that reads one
// run-time value x, whose values only the chain reads except its last (the layer's output),
// and whose intermediate values declare no quantisation (a QDQ model's rounding points stay).
std::optional<EltLayer> match_chain(const Graph& g, size_t ni, const std::set<size_t>& used,
                                    std::vector<size_t>* members) {
  const Node& first = g.nodes[ni];
  int x = -1;
  for (int v : first.inputs)
    if (v >= 0 && !g.is_constant(v)) {
      if (x >= 0 && v != x) return std::nullopt;
      x = v;
    }
  if (x < 0 || g.value(x).dtype != DType::kF32 || g.value(x).shape.empty()) return std::nullopt;
  const std::vector<int64_t>& shape = g.value(x).shape;
  std::set<int> known = {x};
  if (!chain_operator(g, first, known, shape)) return std::nullopt;
  std::vector<size_t> chain = {ni};
  known.insert(first.outputs[0]);
  // Later nodes join when they read a chain value besides x (one that reads only x is a branch).
  for (size_t j = ni + 1; j < g.nodes.size(); ++j) {
    if (used.count(j) || !chain_operator(g, g.nodes[j], known, shape)) continue;
    if (std::any_of(g.nodes[j].inputs.begin(), g.nodes[j].inputs.end(),
                    [&](int v) { return v != x && known.count(v); })) {
      chain.push_back(j);
      known.insert(g.nodes[j].outputs[0]);
    }
  }
  // Shrink to the longest prefix with one exit: every value but the last read only inside.
  while (chain.size() >= 2) {
    const std::set<size_t> in_chain(chain.begin(), chain.end());
    bool closed = true;
    for (size_t k = 0; k + 1 < chain.size() && closed; ++k) {
      const int v = g.nodes[chain[k]].outputs[0];
      if (is_graph_output(g, v) || g.value(v).quant || g.value(v).io_codes) closed = false;
      for (int c : consumers(g, v))
        if (!in_chain.count(static_cast<size_t>(c))) closed = false;
    }
    if (closed) break;
    chain.pop_back();
  }
  if (chain.size() < 2) return std::nullopt;
  EltLayer L;
  L.name = first.name;
  L.op = "Chain(";
  for (size_t k = 0; k < chain.size(); ++k) L.op += (k ? "," : "") + g.nodes[chain[k]].op;
  L.op += ")";
  L.inputs = {x};
  L.output = g.nodes[chain.back()].outputs[0];
  L.fn = chain_function(g, chain, x);
  *members = std::move(chain);
  return L;
}

// A Slice with constant operands as a strided copy (EltLayer kTranspose with slice_begin):
// the host kernel itself slices a tensor of element indices, so the compiler copies exactly
// the elements the host would (clamping, negative indices and axes by its rules); the
// result must be an affine walk with positive steps.
std::optional<EltLayer> match_slice(const Graph& g, const Node& n) {
  const auto& in = g.value(n.inputs[0]).shape;
  const auto& out = g.value(n.outputs[0]).shape;
  if (in.empty() || out.size() != in.size() || n.outputs.size() != 1) return std::nullopt;
  int64_t count = 1, out_count = 1;
  for (int64_t d : in) count *= d;
  for (int64_t d : out) out_count *= d;
  if (count <= 0 || count > (1 << 24) || out_count <= 0) return std::nullopt;
  Tensor index = Tensor::zeros(DType::kF32, in);
  for (int64_t i = 0; i < count; ++i) index.as<float>()[static_cast<size_t>(i)] = static_cast<float>(i);
  std::vector<const Tensor*> args = {&index};
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    if (n.inputs[k] >= 0 && !g.is_constant(n.inputs[k])) return std::nullopt;
    args.push_back(n.inputs[k] >= 0 ? &*g.value(n.inputs[k]).constant : nullptr);
  }
  auto sliced = run_host_op("Slice", n.name, g.opset, n.attrs, args);
  if (!sliced.is_ok() || sliced->empty() || (*sliced)[0].shape != out) return std::nullopt;
  const auto src = (*sliced)[0].as<float>();
  const size_t rank = in.size();
  std::vector<int64_t> in_stride(rank, 1), out_stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    in_stride[d] = in_stride[d + 1] * in[d + 1];
    out_stride[d] = out_stride[d + 1] * out[d + 1];
  }
  EltLayer L;
  L.slice_begin.resize(rank);
  L.slice_step.assign(rank, 1);
  const auto first = static_cast<int64_t>(src[0]);
  for (size_t d = 0; d < rank; ++d) {
    L.slice_begin[d] = first / in_stride[d] % in[d];
    if (out[d] > 1) {
      const int64_t delta = static_cast<int64_t>(src[static_cast<size_t>(out_stride[d])]) - first;
      if (delta <= 0 || delta % in_stride[d] != 0) return std::nullopt;
      L.slice_step[d] = delta / in_stride[d];
    }
  }
  for (int64_t o = 0; o < out_count; ++o) {  // the whole walk must be that affine map
    int64_t expect = 0;
    for (size_t d = 0; d < rank; ++d)
      expect += (L.slice_begin[d] + (o / out_stride[d] % out[d]) * L.slice_step[d]) * in_stride[d];
    if (static_cast<int64_t>(src[static_cast<size_t>(o)]) != expect) return std::nullopt;
  }
  L.name = n.name;
  L.op = n.op;
  L.inputs = {n.inputs[0]};
  L.output = n.outputs[0];
  L.kind = EltLayer::Kind::kTranspose;
  for (size_t d = 0; d < rank; ++d) L.perm.push_back(static_cast<int64_t>(d));
  return L;
}

// Unary operators the VEC unit's lookup table computes exactly (any int8 -> int8 function).
std::optional<EltLayer> match_elementwise(const Graph& g, size_t ni, uint32_t array_dim, const ValueRanges* ranges,
                                          const std::set<int>* dense4) {
  const Node& n = g.nodes[ni];
  EltLayer L;
  L.name = n.name;
  L.op = n.op;
  if (n.inputs.empty() || n.inputs[0] < 0 || g.is_constant(n.inputs[0]) || n.outputs.size() != 1) return std::nullopt;
  L.output = n.outputs[0];
  L.inputs = {n.inputs[0]};
  const std::string& op = n.op;
  // Functions of x alone that element-wise chains already compute (Sqrt, Pow by a constant,
  // Exp, ...) are one lookup on their own too.
  static const std::set<std::string> kChainOnly = {"Sqrt", "Pow", "Exp", "Erf", "Reciprocal", "Neg", "Abs", "Softplus"};
  if (kChainOnly.count(op)) {
    if (!chain_operator(g, n, {n.inputs[0]}, g.value(n.inputs[0]).shape)) return std::nullopt;
    L.fn = chain_function(g, {ni}, n.inputs[0]);
    // The device has no NaN or infinity: the calibrated range of x must lie inside the
    // function's domain (Sqrt of negatives, Reciprocal of 0 stay on the host).
    auto r = ranges ? ranges->find(n.inputs[0]) : decltype(ranges->end()){};
    if (!ranges || r == ranges->end()) return std::nullopt;
    for (int k = 0; k <= 256; ++k) {
      const float x = r->second.first + (r->second.second - r->second.first) * static_cast<float>(k) / 256.0f;
      if (!std::isfinite(L.fn(x))) return std::nullopt;
    }
    return L;
  }
  if (op == "Relu") {
    L.fn = [](float x) { return std::max(x, 0.0f); };
  } else if (op == "Sigmoid") {
    L.fn = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  } else if (op == "Tanh") {
    L.fn = [](float x) { return std::tanh(x); };
  } else if (op == "HardSigmoid") {
    const float a = n.attr_float("alpha", 0.2f), b = n.attr_float("beta", 0.5f);
    L.fn = [a, b](float x) { return std::clamp(a * x + b, 0.0f, 1.0f); };
  } else if (op == "HardSwish") {
    L.fn = [](float x) { return x * std::clamp(x / 6.0f + 0.5f, 0.0f, 1.0f); };
  } else if (op == "LeakyRelu") {
    const float a = n.attr_float("alpha", 0.01f);
    L.fn = [a](float x) { return x >= 0 ? x : a * x; };
  } else if (op == "PRelu") {
    bool ok;
    const int slope = n.inputs.size() > 1 ? n.inputs[1] : -1;
    const float a = scalar_constant(g, slope, &ok);
    if (ok) {
      L.fn = [a](float x) { return x >= 0 ? x : a * x; };
      return L;
    }
    if (slope < 0) return std::nullopt;
    // Slopes broadcast like ONNX (unidirectionally, from the right): the same shape, one row
    // along the last axis of a dense x, or [C,1,1] / [1,C,1,1] per channel of a 4-D x.
    const auto& xs = g.value(n.inputs[0]).shape;
    const auto& ss = g.value(slope).shape;
    const bool per_channel = xs.size() == 4 && ((ss.size() == 3 && ss[0] == xs[1] && ss[1] == 1 && ss[2] == 1) ||
                                                (ss.size() == 4 && ss[0] == 1 && ss[1] == xs[1] && ss[2] == 1 && ss[3] == 1));
    const bool last = xs.size() != 4 && !ss.empty() && ss.size() <= xs.size() && ss.back() == xs.back() &&
                      std::all_of(ss.begin(), ss.end() - 1, [](int64_t d) { return d == 1; });
    L.kind = EltLayer::Kind::kPRelu;
    if (ranges) {
      if (auto r = ranges->find(n.inputs[0]); r != ranges->end()) L.x_range = r->second;
      if (auto r = ranges->find(slope); r != ranges->end() && !g.is_constant(slope)) L.b_range = r->second;
    }
    if (g.is_constant(slope)) {
      if (!per_channel && !last) return std::nullopt;
      const Tensor t = to_float(*g.value(slope).constant);
      L.const_b.assign(t.as<float>().begin(), t.as<float>().end());
    } else {
      L.inputs.push_back(slope);
      if (ss == xs) return L;
      if (!per_channel && !last) return std::nullopt;
    }
    L.broadcast_channels = per_channel;
    L.broadcast_last = !per_channel;
    L.b_per_image = false;
  } else if (op == "Clip") {
    float lo = n.attr_float("min", -INFINITY), hi = n.attr_float("max", INFINITY);
    bool dynamic = false;
    for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
      const int v = n.inputs[k];
      if (v < 0) continue;
      bool ok;
      (k == 1 ? lo : hi) = scalar_constant(g, v, &ok);
      if (ok) continue;
      // A bound fed at run time: a float scalar input of this node alone.
      if (!g.value(v).shape.empty() || g.value(v).dtype != DType::kF32 || !sole_graph_input(g, v, ni))
        return std::nullopt;
      (k == 1 ? L.lo_input : L.hi_input) = v;
      L.inputs.push_back(v);
      dynamic = true;
    }
    if (dynamic) {
      L.kind = EltLayer::Kind::kClip;
      L.clip_lo = L.lo_input >= 0 ? -INFINITY : lo;
      L.clip_hi = L.hi_input >= 0 ? INFINITY : hi;
      return L;
    }
    L.fn = [lo, hi](float x) { return std::clamp(x, lo, hi); };
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (n.inputs.size() != 2 || n.inputs[1] < 0) return std::nullopt;
    bool scalar;
    const float c = scalar_constant(g, n.inputs[1], &scalar);
    if (scalar && !n.integer_wrap && (op == "Mul" || op == "Div") && c > 0 && std::isfinite(c) &&
        std::isfinite(1.0f / c) && g.value(n.inputs[0]).shape == g.value(n.outputs[0]).shape) {
      // x·c with c > 0 is x's own codes at c times its scale: a view, exact.
      L.kind = EltLayer::Kind::kView;
      L.view_scale = op == "Mul" ? c : 1.0f / c;
      return L;
    }
    if (scalar) {  // x op constant is a table lookup
      if (op == "Add") L.fn = [c](float x) { return x + c; };
      else if (op == "Sub") L.fn = [c](float x) { return x - c; };
      else if (op == "Mul") L.fn = [c](float x) { return x * c; };
      else if (c != 0) L.fn = [c](float x) { return x / c; };
      else return std::nullopt;
      return L;
    }
    if (g.is_constant(n.inputs[1])) {
      // A constant row along the last axis of a dense x (LayerNorm's gamma and beta), or one
      // value per channel of a 4-D x: symmetric int8 rows of the weights, broadcast like a
      // run-time b.
      if (op == "Div" || n.integer_wrap) return std::nullopt;
      const auto& xs = g.value(n.inputs[0]).shape;
      const auto& bs = g.value(n.inputs[1]).shape;
      const bool per_channel = xs.size() == 4 && ((bs.size() == 3 && bs[0] == xs[1] && bs[1] == 1 && bs[2] == 1) ||
                                                  (bs.size() == 4 && bs[0] == 1 && bs[1] == xs[1] && bs[2] == 1 && bs[3] == 1));
      const bool last = xs.size() != 4 && !xs.empty() && !bs.empty() && bs.size() <= xs.size() && bs.back() == xs.back() &&
                        std::all_of(bs.begin(), bs.end() - 1, [](int64_t d) { return d == 1; });
      if (!per_channel && !last) return std::nullopt;
      const Tensor t = to_float(*g.value(n.inputs[1]).constant);
      L.const_b.assign(t.as<float>().begin(), t.as<float>().end());
      L.kind = op == "Mul" ? EltLayer::Kind::kMul : EltLayer::Kind::kAdd;
      L.b_sign = op == "Sub" ? -1.0f : 1.0f;
      L.broadcast_channels = per_channel;
      L.broadcast_last = !per_channel;
      L.b_per_image = false;
      return L;
    }
    if (op == "Div" && !n.integer_wrap) {
      // x / y = x · (1/y) with a reciprocal table over y's codes: y's calibrated range must
      // keep away from 0 (one sign), else 1/y has no bounded range to quantise.
      auto r = ranges ? ranges->find(n.inputs[1]) : decltype(ranges->end()){};
      if (!ranges || r == ranges->end()) return std::nullopt;
      const auto [lo, hi] = r->second;
      if (!(lo > 0 || hi < 0) || !std::isfinite(lo) || !std::isfinite(hi)) return std::nullopt;
      L.divisor_lo = lo;
      L.divisor_hi = hi;
    }
    const auto& a = g.value(n.inputs[0]).shape;
    const auto& b = g.value(n.inputs[1]).shape;
    if (a.empty() || b.empty()) return std::nullopt;
    L.inputs = {n.inputs[0], n.inputs[1]};
    L.kind = op == "Mul" ? EltLayer::Kind::kMul : op == "Div" ? EltLayer::Kind::kDiv : EltLayer::Kind::kAdd;
    L.b_sign = op == "Sub" ? -1.0f : 1.0f;
    L.wrap = n.integer_wrap;
    if (a == b) return L;
    if (a.size() == 4 && b.size() == 4 && b[0] == a[0] && b[1] == a[1] && b[2] == 1 && b[3] == 1) {
      L.broadcast_channels = true;
      return L;
    }
    // b is one row repeated along a's last dim (dense layouts: a is not 4-D NHWC).
    if (a.size() != 4 && b.size() != 4 && b.size() <= a.size() && b.back() == a.back() &&
        std::all_of(b.begin(), b.end() - 1, [](int64_t d) { return d == 1; })) {
      L.broadcast_last = true;
      return L;
    }
    return std::nullopt;
  } else if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    // A view when both sides have the same device bytes: dense ranks, or NHWC [N,C,1,1]
    // against dense [N,C] with C a multiple of the array dim is decided by the compiler,
    // which knows N; here: the shapes must be known and the element counts equal.
    for (size_t k = 1; k < n.inputs.size(); ++k)
      if (n.inputs[k] >= 0 && !g.is_constant(n.inputs[k])) return std::nullopt;
    const auto& in = g.value(n.inputs[0]).shape;
    const auto& out = g.value(n.outputs[0]).shape;
    if (in.empty() || out.empty()) return std::nullopt;
    int64_t ein = 1, eout = 1;
    for (int64_t d : in) ein *= d;
    for (int64_t d : out) eout *= d;
    if (ein != eout || ein < 0) return std::nullopt;
    const bool in4 = in.size() == 4, out4 = out.size() == 4;
    L.kind = EltLayer::Kind::kView;
    // An empty tensor (a zero dimension) has no bytes in any layout: the reshape moves
    // nothing and is a view whatever the ranks.
    if (ein == 0) return L;
    // A 4-D side stored dense (dense_attention_values): the reshape keeps the bytes.
    const bool dense_in = in4 && dense4 && dense4->count(n.inputs[0]);
    const bool dense_out = out4 && dense4 && dense4->count(n.outputs[0]);
    if ((in4 || out4) && (!in4 || dense_in) && (!out4 || dense_out)) {
      if (in4 != out4) L.dense_4d = in4 ? n.inputs[0] : n.outputs[0];
      return L;
    }
    if (in4 || out4) {
      const auto& four = in4 ? in : out;
      const auto& other = in4 ? out : in;
      if (!(in4 && out4) && four[2] == 1 && four[3] == 1 && other.size() == 2 && other[0] == four[0] &&
          other[1] == four[1]) {
        // The [N,C,1,1] <-> [N,C] family keeps the bytes when C is a multiple of the array dim,
        // else its rows are copied (padded lanes).
        if (four[1] % array_dim != 0) L.kind = EltLayer::Kind::kRepack;
        return L;
      }
      if (in4 && out4) return std::nullopt;  // NHWC to NHWC is no affine walk of either side
      // A 4-D graph input of this node alone, or a 4-D graph output nobody reads, can be
      // stored dense instead of NHWC: then the reshape is free again.
      if (in4 && sole_graph_input(g, n.inputs[0], ni)) {
        L.dense_4d = n.inputs[0];
        return L;
      }
      if (out4 && is_graph_output(g, n.outputs[0]) && consumers(g, n.outputs[0]).empty()) {
        L.dense_4d = n.outputs[0];
        return L;
      }
      L.kind = EltLayer::Kind::kReshapeCopy;  // NHWC <-> dense by the DMA
    }
    return L;
  } else if (op == "Resize") {
    // Nearest only, H and W only, every operand but X constant (a specialised input counts).
    auto mode = n.attrs.find("mode");
    auto coord = n.attrs.find("coordinate_transformation_mode");
    if ((mode != n.attrs.end() && mode->second.s != "nearest") || n.attrs.count("axes") ||
        (coord != n.attrs.end() && coord->second.s == "tf_crop_and_resize"))
      return std::nullopt;
    const auto& in = g.value(n.inputs[0]).shape;
    const auto& out = g.value(n.outputs[0]).shape;
    if (in.size() != 4 || out.size() != 4 || in[0] != out[0] || in[1] != out[1] || in[2] * in[3] > (1 << 24) ||
        in[3] > 4096 || out[2] <= 0 || out[3] <= 0)
      return std::nullopt;
    // The host kernel itself says which input pixel each output pixel takes: it resizes one
    // [1,1,H,W] plane of pixel indices (exact in float), with the N and C entries of
    // scales/sizes set to 1. So the NPU gathers exactly what the host would compute.
    Tensor plane = Tensor::zeros(DType::kF32, {1, 1, in[2], in[3]});
    for (int64_t i = 0; i < in[2] * in[3]; ++i) plane.as<float>()[static_cast<size_t>(i)] = static_cast<float>(i);
    std::vector<Tensor> operands;
    operands.reserve(n.inputs.size());
    std::vector<const Tensor*> args = {&plane};
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      if (n.inputs[k] < 0) {
        args.push_back(nullptr);
        continue;
      }
      if (!g.is_constant(n.inputs[k])) return std::nullopt;
      Tensor t = *g.value(n.inputs[k]).constant;
      if ((k == 2 || k == 3) && t.element_count() == 4) {  // scales / sizes: N and C stay
        if (t.dtype == DType::kF32) t.as<float>()[0] = t.as<float>()[1] = 1.0f;
        else if (t.dtype == DType::kI64) t.as<int64_t>()[0] = t.as<int64_t>()[1] = 1;
        else return std::nullopt;
      }
      operands.push_back(std::move(t));
      args.push_back(&operands.back());
    }
    auto gathered = run_host_op("Resize", n.name, g.opset, n.attrs, args);
    if (!gathered.is_ok() || gathered->empty() ||
        (*gathered)[0].shape != std::vector<int64_t>{1, 1, out[2], out[3]})
      return std::nullopt;
    const auto idx = (*gathered)[0].as<float>();
    for (int64_t oy = 0; oy < out[2]; ++oy) L.src_rows.push_back(static_cast<int64_t>(idx[static_cast<size_t>(oy * out[3])]) / in[3]);
    for (int64_t ox = 0; ox < out[3]; ++ox) L.src_cols.push_back(static_cast<int64_t>(idx[static_cast<size_t>(ox)]) % in[3]);
    for (int64_t oy = 0; oy < out[2]; ++oy)  // nearest is separable; check it anyway
      for (int64_t ox = 0; ox < out[3]; ++ox)
        if (static_cast<int64_t>(idx[static_cast<size_t>(oy * out[3] + ox)]) !=
            L.src_rows[static_cast<size_t>(oy)] * in[3] + L.src_cols[static_cast<size_t>(ox)])
          return std::nullopt;
    L.kind = EltLayer::Kind::kResize;
    return L;
  } else if (op == "Identity" && (g.value(n.inputs[0]).io_codes || g.value(n.outputs[0]).io_codes)) {
    // A lone QuantizeLinear/DequantizeLinear between graph input and output (bind_integer_io):
    // the runtime's boundary (de)quantisation is the operator, the NPU copies the codes.
    const auto& in = g.value(n.inputs[0]).shape;
    if (in.empty()) return std::nullopt;
    L.kind = EltLayer::Kind::kTranspose;
    for (size_t d = 0; d < in.size(); ++d) L.perm.push_back(static_cast<int64_t>(d));
    return L;
  } else if (op == "Softmax") {
    // The last axis (before opset 13 the axis flattens what follows it, the same thing only
    // for the last one) of a dense value: 4-D ones only where dense_attention_values stores
    // them dense (NHWC would put the axis across rows).
    const auto& in = g.value(n.inputs[0]).shape;
    const auto rank = static_cast<int64_t>(in.size());
    int64_t axis = n.attr_int("axis", g.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (rank == 0 || axis != rank - 1) return std::nullopt;
    if (rank == 4 && (!dense4 || !dense4->count(n.inputs[0]) || !dense4->count(n.outputs[0]))) return std::nullopt;
    // An int8 grid coarser than 1 per code (a code step multiplies a probability by more than
    // e) cannot resolve a softmax (ONNX's test_softmax_large_number: [1, 10003] is 39 per
    // code); the host computes it in float then.
    if (ranges)
      if (auto r = ranges->find(n.inputs[0]); r != ranges->end() && !((r->second.second - r->second.first) / 255.0f <= 1.0f))
        return std::nullopt;
    L.kind = EltLayer::Kind::kSoftmax;
    return L;
  } else if (op == "Slice") {
    if (auto sliced = match_slice(g, n)) return sliced;
    return std::nullopt;
  } else if (op == "Transpose") {
    const auto& in = g.value(n.inputs[0]).shape;
    std::vector<int64_t> perm = ints_attr(n, "perm", {});
    if (perm.empty())
      for (size_t d = in.size(); d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    if (perm.size() != in.size() || in.empty()) return std::nullopt;
    L.kind = EltLayer::Kind::kTranspose;
    L.perm = perm;
    return L;
  } else if (op == "Concat") {
    const auto& out = g.value(n.outputs[0]).shape;
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    if (axis < 0 || axis >= static_cast<int64_t>(out.size())) return std::nullopt;
    L.inputs.clear();
    for (int v : n.inputs) {
      // Constant pieces would need their own quantised copy in the weights: host for now.
      if (v < 0 || g.is_constant(v) || g.value(v).shape.size() != out.size()) return std::nullopt;
      L.inputs.push_back(v);
    }
    L.kind = EltLayer::Kind::kConcat;
    L.axis = axis;
    return L;
  } else if (op == "GlobalAveragePool") {
    if (g.value(n.inputs[0]).shape.size() != 4) return std::nullopt;
    const auto& sh = g.value(n.inputs[0]).shape;
    if (sh[2] > 255 || sh[3] > 255) return std::nullopt;
    L.kind = EltLayer::Kind::kGlobalAvgPool;
    L.kh = sh[2];
    L.kw = sh[3];
    return L;
  } else if (op == "MaxPool" || op == "AveragePool") {
    // 2-D pools of NHWC values, 1-D pools of dense [N, C, L] and 3-D pools of dense
    // [N, C, D, H, W] values; pads, SAME/VALID auto_pad and ceil_mode (the output shape says
    // which windows exist).
    const auto& x = g.value(n.inputs[0]).shape;
    const auto& y = g.value(n.outputs[0]).shape;
    if (x.size() < 3 || x.size() > 5 || y.size() != x.size() || n.outputs.size() != 1) return std::nullopt;
    const size_t rank = x.size() - 2;
    const auto k = ints_attr(n, "kernel_shape", {});
    const auto st = ints_attr(n, "strides", std::vector<int64_t>(rank, 1));
    auto pads = ints_attr(n, "pads", std::vector<int64_t>(2 * rank, 0));
    if (k.size() != rank || st.size() != rank || pads.size() != 2 * rank) return std::nullopt;
    const auto dil = ints_attr(n, "dilations", std::vector<int64_t>(rank, 1));
    if (dil.size() != rank) return std::nullopt;
    for (int64_t d : dil)  // AveragePool has dilations only from opset 19
      if (d < 1 || d > 255 || (d != 1 && op != "MaxPool")) return std::nullopt;
    auto ap = n.attrs.find("auto_pad");
    const std::string auto_pad = ap == n.attrs.end() || ap->second.s.empty() ? "NOTSET" : ap->second.s;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t in = x[2 + d], out = y[2 + d];
      if (k[d] < 1 || k[d] > 255 || st[d] < 1 || out < 1) return std::nullopt;
      if (auto_pad == "VALID") {
        pads[d] = pads[d + rank] = 0;
      } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const int64_t total = std::max<int64_t>(0, (out - 1) * st[d] + (k[d] - 1) * dil[d] + 1 - in);
        pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[d + rank] = total - pads[d];
      } else if (auto_pad != "NOTSET") {
        return std::nullopt;
      }
      // Every window must hold an input pixel (ceil_mode may not start one in the padding).
      for (int64_t o = 0; o < out; ++o) {
        const int64_t start = o * st[d] - pads[d];
        const int64_t lo = start < 0 ? (-start + dil[d] - 1) / dil[d] : 0;
        if (lo >= k[d] || start + lo * dil[d] >= in) return std::nullopt;
      }
    }
    // One plane and its output must fit the ACT scratchpad (N = 32: 8192 rows). A 3-D pool
    // holds the window's depth slices of one input plane interleaved (lower_elt_layer), plus
    // for MaxPool their depth maximum; an AveragePool's window over (depth, rows) is one VEC
    // window of at most 255 rows.
    const int64_t depth_taps = rank == 3 ? std::min(k[0], x[2]) : 1;
    const int64_t plane_rows = x.size() == 3 ? x[1] * x[2] + y[1] * y[2]
                                             : x[x.size() - 2] * x.back() * (depth_taps + (rank == 3 ? 1 : 0)) +
                                                   y[y.size() - 2] * y.back();
    if (plane_rows > (1 << 13)) return std::nullopt;
    if (rank == 3 && op == "AveragePool" && k[1] * depth_taps > 255) return std::nullopt;
    L.kind = op == "MaxPool" ? EltLayer::Kind::kMaxPool : EltLayer::Kind::kAvgPool;
    L.count_include_pad = op == "AveragePool" && n.attr_int("count_include_pad", 0) != 0;
    if (rank == 3) {
      L.kd = k[0];
      L.sd = st[0];
      L.pad_f = pads[0];
      L.pad_k = pads[3];
      L.dd = dil[0];
      L.kh = k[1];
      L.kw = k[2];
      L.sh = st[1];
      L.sw = st[2];
      L.pad_t = pads[1];
      L.pad_l = pads[2];
      L.pad_b = pads[4];
      L.pad_r = pads[5];
      L.dh = dil[1];
      L.dw = dil[2];
    } else if (rank == 2) {
      L.kh = k[0];
      L.kw = k[1];
      L.sh = st[0];
      L.sw = st[1];
      L.pad_t = pads[0];
      L.pad_l = pads[1];
      L.pad_b = pads[2];
      L.pad_r = pads[3];
      L.dh = dil[0];
      L.dw = dil[1];
    } else {
      L.kw = k[0];
      L.sw = st[0];
      L.pad_l = pads[0];
      L.pad_r = pads[1];
      L.dw = dil[0];
    }
    return L;
  } else {
    return std::nullopt;
  }
  return L;
}

}  // namespace

int npu_layer_output(const NpuLayer& layer) {
  return std::visit([](const auto& l) { return l.output; }, layer);
}
std::vector<int> npu_layer_inputs(const NpuLayer& layer) {
  if (const auto* e = std::get_if<EltLayer>(&layer)) return e->inputs;
  std::vector<int> in;
  if (const auto* f = std::get_if<FcLayer>(&layer)) {
    in = {f->input};
    if (f->weight_input >= 0) in.push_back(f->weight_input);
    if (f->bias_input >= 0) in.push_back(f->bias_input);
    return in;
  }
  const auto& c = std::get<ConvLayer>(layer);
  in = {c.input};
  if (c.weight_input >= 0) in.push_back(c.weight_input);
  if (c.bias_input >= 0) in.push_back(c.bias_input);
  return in;
}
std::string npu_layer_name(const NpuLayer& layer) {
  return std::visit([](const auto& l) { return l.name; }, layer);
}
std::string npu_layer_op(const NpuLayer& layer) {
  // int32 outputs come only from the integer operators' rewrite (qdq.h: expand_integer_ops).
  if (const auto* f = std::get_if<FcLayer>(&layer)) return f->int32_output ? "MatMulInteger" : f->op;
  if (const auto* c = std::get_if<ConvLayer>(&layer))
    return c->int32_output ? "ConvInteger" : c->transposed ? "ConvTranspose" : c->depthwise ? "DepthwiseConv" : "Conv";
  return std::get<EltLayer>(layer).op;
}

// The NPU computes on quantised reals: every value an NPU layer reads or writes must be a
// float tensor (integer tensors stay exact on the host) of rank >= 1 (scalars are not worth
// a job, and shape arithmetic on them must stay exact).
bool all_float(const Graph& g, const NpuLayer& layer) {
  auto ok = [&](int v) { return v >= 0 && g.value(v).dtype == DType::kF32 && !g.value(v).shape.empty(); };
  const auto* e = std::get_if<EltLayer>(&layer);
  for (int v : npu_layer_inputs(layer)) {
    // Clip's run-time bounds and a Gemm's one-element bias are float scalars on purpose.
    const auto* f = std::get_if<FcLayer>(&layer);
    const bool scalar_bound = (e && e->kind == EltLayer::Kind::kClip && (v == e->lo_input || v == e->hi_input)) ||
                              (f && f->bias_scalar && v == f->bias_input);
    if (!(scalar_bound ? v >= 0 && g.value(v).dtype == DType::kF32 : ok(v))) return false;
  }
  return ok(npu_layer_output(layer));
}

std::vector<PartitionStep> partition(const Graph& g, uint32_t array_dim, const ValueRanges* ranges) {
  std::vector<PartitionStep> steps;
  std::set<size_t> used;
  const std::set<int> dense4 = dense_attention_values(g);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    if (used.count(ni)) continue;
    const std::set<size_t> used_before = used;
    std::optional<NpuLayer> layer;
    if (auto fc = match_fc(g, ni, used, dense4)) layer = std::move(*fc);
    else if (auto conv3 = match_conv_3d(g, ni)) layer = std::move(*conv3);
    else if (auto conv = match_conv(g, ni, used)) layer = std::move(*conv);
    else if (auto deconv = match_conv_transpose(g, ni, used)) layer = std::move(*deconv);
    else if (std::vector<size_t> members; auto chain = match_chain(g, ni, used, &members)) {
      layer = std::move(*chain);
      used.insert(members.begin(), members.end());
    } else if (auto elt = match_elementwise(g, ni, array_dim, ranges, &dense4)) layer = std::move(*elt);
    if (layer && g.value(npu_layer_output(*layer)).io_codes == DType::kI32) {
      // An int32 graph output (ConvInteger/MatMulInteger, qdq.h) leaves the device as the
      // layer's accumulators: regular convolutions and GEMMs without fused activations or a
      // run-time bias only (DWCONV and ConvTranspose accumulate elsewhere).
      auto* fc = std::get_if<FcLayer>(&*layer);
      auto* conv = std::get_if<ConvLayer>(&*layer);
      if (fc && !fc->relu && fc->bias_input < 0 && fc->fused.empty()) fc->int32_output = true;
      else if (conv && !conv->depthwise && !conv->transposed && conv->weight_input < 0 && conv->bias_input < 0 &&
               conv->fused.empty())
        conv->int32_output = true;
      else layer.reset();
      if (!layer) used = used_before;
    }
    if (layer && !all_float(g, *layer)) {
      // A fused match consumed following nodes; they must stay as host steps.
      used = used_before;
      layer.reset();
    }
    if (layer) {
      if (steps.empty() || !steps.back().on_npu) steps.push_back(PartitionStep{true, {}, -1});
      steps.back().ops.push_back(std::move(*layer));
      continue;
    }
    steps.push_back(PartitionStep{false, {}, static_cast<int>(ni)});
  }
  return steps;
}

}  // namespace npu::compiler
