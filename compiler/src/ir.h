// The compiler's graph IR: values (with static shapes and optional constant data) and
// nodes in topological order. Built by the ONNX frontend, rewritten by passes, consumed by
// calibration, quantisation and lowering. Not thread-safe; one compile owns one Graph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "npu/compiler/attribute.h"
#include "npu/compiler/tensor.h"

namespace npu::compiler {

// Quantisation a model declares for a value through QuantizeLinear/DequantizeLinear
// (compiler/src/qdq.h): int8 codes, real = scale[c] * (q - zero_point[c]) with c the index
// along `axis` (per-tensor: one entry, axis -1). uint8 models are already shifted by -128.
struct DeclaredQuant {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int64_t axis = -1;
};

struct Value {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::optional<Tensor> constant;  // initializers and folded constants
  std::optional<DeclaredQuant> quant;  // from the model's Q/DQ nodes; overrides calibration
  // A graph input/output of integer codes the device holds directly (bind_integer_io): the
  // user-facing dtype (kI8 or kU8); the value itself is float with `quant` declared.
  std::optional<DType> io_codes;
};

struct Node {
  std::string name;
  std::string op;
  std::vector<int> inputs;   // value indices; -1 for an omitted optional input
  std::vector<int> outputs;
  std::map<std::string, Attribute> attrs;
  std::string proto;  // the serialised ONNX NodeProto (host steps carry it into the image)
  // Add/Sub/Mul (uint8 Div) of integer codes bound to device views (bind_integer_io): ONNX
  // integer arithmetic, the result wraps modulo 2^8 (lowered to VEC with the wrap bit); Div
  // truncates (restoring division on the VEC unit, exact).
  bool integer_wrap = false;

  int64_t attr_int(const std::string& key, int64_t fallback) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? fallback : it->second.i;
  }
  float attr_float(const std::string& key, float fallback) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? fallback : it->second.f;
  }
  // "Gemm 'node_name'" for messages.
  std::string label() const { return op + " node '" + name + "'"; }
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs;   // non-constant graph inputs, in model order
  std::vector<int> outputs;
  int64_t opset = 0;
  std::vector<std::string> notes;  // what the frontend changed (an opset upgrade), for the log

  int add_value(Value v) {
    values.push_back(std::move(v));
    return static_cast<int>(values.size()) - 1;
  }
  bool is_constant(int v) const { return v >= 0 && values[static_cast<size_t>(v)].constant.has_value(); }
  const Value& value(int v) const { return values[static_cast<size_t>(v)]; }
  Value& value(int v) { return values[static_cast<size_t>(v)]; }
};

// Loads an ONNX file, checks it, runs shape inference and applies input-shape overrides.
Result<Graph> load_onnx(const std::string& path,
                        const std::map<std::string, std::vector<int64_t>>& input_shapes);

// Float reference interpretation of the graph (calibration and the host fallback).
// Returns every value's float tensor, indexed like graph.values.
Result<std::vector<Tensor>> run_reference(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace npu::compiler
