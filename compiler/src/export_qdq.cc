#include "export_qdq.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>

#include "lower.h"

namespace npu::compiler {
namespace {

int32_t onnx_type(DType d) {
  switch (d) {
    case DType::kF32:
      return onnx::TensorProto::FLOAT;
    case DType::kI8:
      return onnx::TensorProto::INT8;
    case DType::kU8:
      return onnx::TensorProto::UINT8;
    case DType::kI32:
      return onnx::TensorProto::INT32;
    case DType::kI64:
      return onnx::TensorProto::INT64;
    case DType::kI16:
      return onnx::TensorProto::INT16;
  }
  return onnx::TensorProto::UNDEFINED;
}

void set_tensor(onnx::TensorProto* p, const std::string& name, const Tensor& t) {
  p->set_name(name);
  p->set_data_type(onnx_type(t.dtype));
  for (int64_t d : t.shape) p->add_dims(d);
  p->set_raw_data(std::string(t.data.begin(), t.data.end()));
}

void set_value_info(onnx::ValueInfoProto* info, const Value& v) {
  info->set_name(v.name);
  auto* tt = info->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_type(v.dtype));
  auto* shape = tt->mutable_shape();
  for (int64_t d : v.shape) shape->add_dim()->set_dim_value(d);
}

Tensor scalar_f32(float v) {
  Tensor t = Tensor::zeros(DType::kF32, {});
  t.as<float>()[0] = v;
  return t;
}

Tensor scalar_u8(int32_t v) {
  Tensor t = Tensor::zeros(DType::kU8, {});
  t.data[0] = static_cast<uint8_t>(v);
  return t;
}

}  // namespace

Status write_qdq_model(const Graph& g, const std::vector<PartitionStep>& steps,
                       const std::map<int, QParams>& qp, const std::set<int>& quantised,
                       const std::string& path) {
  if (g.opset < 13)
    return make_error(StatusCode::kUnsupported,
                      "--export-qdq needs default-domain opset >= 13 (per-axis "
                      "DequantizeLinear); the model has opset " +
                          std::to_string(g.opset) + ": convert it with onnx.version_converter");
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("npu-compile --export-qdq");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(g.opset);
  onnx::GraphProto* graph = model.mutable_graph();
  graph->set_name("npu_qdq");

  // Per-node replacement of a weight or bias input by its DequantizeLinear output.
  std::map<std::pair<const Node*, size_t>, std::string> replaced;  // (node, input slot) -> name
  std::vector<onnx::NodeProto> weight_nodes;
  auto add_weight = [&](const Node& n, size_t slot, const Tensor& codes,
                        const std::vector<float>& scales, int64_t axis) {
    // Unique even when node names repeat: the index of the weight-DQ node.
    const std::string base =
        g.value(n.inputs[slot]).name + "_q_" + n.name + "_" + std::to_string(weight_nodes.size());
    set_tensor(graph->add_initializer(), base, codes);
    Tensor s = Tensor::zeros(DType::kF32, {static_cast<int64_t>(scales.size())});
    std::copy(scales.begin(), scales.end(), s.as<float>().begin());
    set_tensor(graph->add_initializer(), base + "_scale", s);
    set_tensor(graph->add_initializer(), base + "_zero_point",
               Tensor::zeros(codes.dtype, {static_cast<int64_t>(scales.size())}));
    onnx::NodeProto dq;
    dq.set_op_type("DequantizeLinear");
    dq.set_name(base + "_dequantize");
    dq.add_input(base);
    dq.add_input(base + "_scale");
    dq.add_input(base + "_zero_point");
    dq.add_output(base + "_dequantized");
    auto* a = dq.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
    weight_nodes.push_back(dq);
    replaced[{&n, slot}] = base + "_dequantized";
  };
  // A layer's node: its name and input (ONNX does not require unique node names).
  auto node_of = [&](const std::string& name, int input) -> const Node* {
    for (const Node& n : g.nodes)
      if (n.name == name && !n.inputs.empty() && n.inputs[0] == input) return &n;
    return nullptr;
  };
  for (const auto& step : steps)
    for (const NpuLayer& layer : step.ops) {
      if (const auto* c = std::get_if<ConvLayer>(&layer)) {
        const Node* node = node_of(c->name, c->input);
        if (!node)
          return make_error(StatusCode::kInternal, "--export-qdq: conv '" + c->name +
                                                       "' has no node; please report this bug");
        const Node& n = *node;
        // One scale per output channel: axis 0 of Conv W [M, C, ...], axis 1 of ConvTranspose
        // W [C, M, ...], as the lowering quantises them.
        const std::vector<float> scales = conv_weight_scales(*c);
        Tensor codes = Tensor::zeros(DType::kI8, g.value(n.inputs[1]).shape);
        const size_t per = c->weights.size() / scales.size();
        const size_t taps = c->transposed ? per / static_cast<size_t>(std::max<int64_t>(c->C, 1)) : per;
        auto channel = [&](size_t i) { return c->transposed ? i / taps % scales.size() : i / per; };
        for (size_t i = 0; i < c->weights.size(); ++i)
          codes.as<int8_t>()[i] =
              quantize_weight(c->weights[i], scales[channel(i)], !c->weight_scales.empty());
        add_weight(n, 1, codes, scales, c->transposed ? 1 : 0);
        // The bias as the int32 codes the NPU adds: round(b / (x_scale · w_scale)).
        if (n.inputs.size() > 2 && n.inputs[2] >= 0 && g.is_constant(n.inputs[2]) &&
            g.value(n.inputs[2]).constant->element_count() == c->Cout) {
          Tensor bias = Tensor::zeros(DType::kI32, {c->Cout});
          std::vector<float> bias_scales(scales.size());
          for (size_t k = 0; k < scales.size(); ++k) {
            const double in_scale = static_cast<double>(qp.at(c->input).scale) * scales[k];
            bias_scales[k] = static_cast<float>(in_scale);
            bias.as<int32_t>()[k] = static_cast<int32_t>(
                std::clamp<int64_t>(std::llround(c->bias[k] / in_scale), INT32_MIN, INT32_MAX));
          }
          add_weight(n, 2, bias, bias_scales, 0);
        }
      } else if (const auto* f = std::get_if<FcLayer>(&layer)) {
        const Node* node = node_of(f->name, f->input);
        if (!node)
          return make_error(StatusCode::kInternal, "--export-qdq: layer '" + f->name +
                                                       "' has no node; please report this bug");
        const Node& n = *node;
        const bool tb = n.op == "Gemm" && n.attr_int("transB", 0) != 0;
        const float alpha = n.op == "Gemm" ? n.attr_float("alpha", 1.0f) : 1.0f;
        const std::vector<float> scales = fc_weight_scales(*f);  // of alpha·B
        Tensor codes = Tensor::zeros(DType::kI8, g.value(n.inputs[1]).shape);
        for (int64_t k = 0; k < f->K; ++k)
          for (int64_t j = 0; j < f->N; ++j)
            codes.as<int8_t>()[static_cast<size_t>(tb ? j * f->K + k : k * f->N + j)] =
                quantize_weight(f->weights[static_cast<size_t>(k * f->N + j)],
                                scales[static_cast<size_t>(j)], !f->weight_scales.empty());
        std::vector<float> b_scales = scales;  // the codes dequantise to B; Gemm applies alpha
        for (float& s : b_scales) s /= alpha;
        add_weight(n, 1, codes, b_scales, tb ? 0 : 1);
      }
    }

  for (int v : g.inputs) set_value_info(graph->add_input(), g.value(v));
  for (int v : g.outputs) set_value_info(graph->add_output(), g.value(v));
  std::set<int> outputs(g.outputs.begin(), g.outputs.end()),
      inputs(g.inputs.begin(), g.inputs.end());
  // Names: a quantised value read by nodes is read through its DequantizeLinear output; a
  // quantised graph output keeps its name on the DequantizeLinear, its producer writes
  // "<name>_float" instead.
  auto produced_name = [&](int v) {
    const std::string& name = g.value(v).name;
    return quantised.count(v) && outputs.count(v) && !inputs.count(v) ? name + "_float" : name;
  };
  auto read_name = [&](int v) {
    const std::string& name = g.value(v).name;
    if (!quantised.count(v)) return name;
    return outputs.count(v) && !inputs.count(v) ? name : name + "_dequantized";
  };
  auto emit_qdq = [&](int v) {
    if (!quantised.count(v) || g.is_constant(v)) return;
    const QParams& q = qp.at(v);
    const std::string base = g.value(v).name;
    set_tensor(graph->add_initializer(), base + "_act_scale", scalar_f32(q.scale));
    set_tensor(graph->add_initializer(), base + "_act_zero_point", scalar_u8(q.zero_point + 128));
    auto* qn = graph->add_node();
    qn->set_op_type("QuantizeLinear");
    qn->set_name(base + "_quantize");
    qn->add_input(produced_name(v));
    qn->add_input(base + "_act_scale");
    qn->add_input(base + "_act_zero_point");
    qn->add_output(base + "_quantized");
    auto* dq = graph->add_node();
    dq->set_op_type("DequantizeLinear");
    dq->set_name(base + "_dequantize");
    dq->add_input(base + "_quantized");
    dq->add_input(base + "_act_scale");
    dq->add_input(base + "_act_zero_point");
    dq->add_output(read_name(v));
  };
  std::set<int> constants_read;  // float weights the int8 codes replace are left out
  for (const Node& n : g.nodes)
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (g.is_constant(n.inputs[k]) && !replaced.count({&n, k}))
        constants_read.insert(n.inputs[k]);
  for (int v : constants_read)
    set_tensor(graph->add_initializer(), g.value(v).name, *g.value(v).constant);
  for (const auto& dq : weight_nodes) *graph->add_node() = dq;
  for (int v : g.inputs) emit_qdq(v);
  for (const Node& n : g.nodes) {
    onnx::NodeProto* np = graph->add_node();
    if (!np->ParseFromString(n.proto))
      return make_error(StatusCode::kInternal,
                        n.label() + ": cannot re-read its NodeProto; please report this bug");
    np->clear_input();
    np->clear_output();
    np->set_name(n.name);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int v = n.inputs[k];
      auto w = replaced.find({&n, k});
      if (w != replaced.end())
        np->add_input(w->second);
      else
        np->add_input(v < 0 ? "" : read_name(v));
    }
    for (int v : n.outputs) np->add_output(produced_name(v));
    for (int v : n.outputs) emit_qdq(v);
  }
  std::ofstream out(path, std::ios::binary);
  if (!out || !model.SerializeToOstream(&out))
    return make_error(StatusCode::kInvalidArgument,
                      "--export-qdq " + path +
                          ": cannot write the file (does the directory exist and is it writable?)");
  return Status::ok();
}

}  // namespace npu::compiler
