// ONNX -> IR, through the ONNX library: parse, check, infer shapes.
#include <fstream>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <set>

#include "ir.h"

namespace npu::compiler {
namespace {

Result<DType> dtype_from_onnx(int32_t type, const std::string& what) {
  switch (type) {
    case onnx::TensorProto::FLOAT: return DType::kF32;
    case onnx::TensorProto::DOUBLE: return DType::kF32;  // converted on load
    case onnx::TensorProto::INT8: return DType::kI8;
    case onnx::TensorProto::UINT8: return DType::kU8;
    case onnx::TensorProto::INT32: return DType::kI32;
    case onnx::TensorProto::INT64: return DType::kI64;
    default:
      return make_error(StatusCode::kUnsupported,
                        what + " has ONNX element type " + std::to_string(type) +
                            ", which this compiler does not support (float, double, int8, uint8, int32, int64 are)");
  }
}

template <typename T, typename Src>
void copy_elements(const Src& src, Tensor* t) {
  auto dst = t->as<T>();
  for (size_t i = 0; i < dst.size() && i < static_cast<size_t>(src.size()); ++i)
    dst[i] = static_cast<T>(src.Get(static_cast<int>(i)));
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p) {
  const std::string what = "tensor '" + p.name() + "'";
  NPU_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(p.data_type(), what));
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return make_error(StatusCode::kUnsupported,
                      what + " uses external data; save the model with all tensors embedded");
  std::vector<int64_t> shape(p.dims().begin(), p.dims().end());
  Tensor t = Tensor::zeros(dtype, shape);
  const size_t count = static_cast<size_t>(t.element_count());
  if (!p.raw_data().empty()) {
    const std::string& raw = p.raw_data();
    if (p.data_type() == onnx::TensorProto::DOUBLE) {
      if (raw.size() != count * 8) return make_error(StatusCode::kCorruptData, what + ": raw data size mismatch");
      auto dst = t.as<float>();
      for (size_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, raw.data() + i * 8, 8);
        dst[i] = static_cast<float>(v);
      }
    } else {
      if (raw.size() != t.data.size()) return make_error(StatusCode::kCorruptData, what + ": raw data size mismatch");
      std::memcpy(t.data.data(), raw.data(), raw.size());
    }
    return t;
  }
  switch (p.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (static_cast<size_t>(p.float_data_size()) != count) break;
      copy_elements<float>(p.float_data(), &t);
      return t;
    case onnx::TensorProto::DOUBLE:
      if (static_cast<size_t>(p.double_data_size()) != count) break;
      copy_elements<float>(p.double_data(), &t);
      return t;
    case onnx::TensorProto::INT64:
      if (static_cast<size_t>(p.int64_data_size()) != count) break;
      copy_elements<int64_t>(p.int64_data(), &t);
      return t;
    case onnx::TensorProto::INT8:
      if (static_cast<size_t>(p.int32_data_size()) != count) break;
      copy_elements<int8_t>(p.int32_data(), &t);
      return t;
    case onnx::TensorProto::UINT8:
      if (static_cast<size_t>(p.int32_data_size()) != count) break;
      copy_elements<uint8_t>(p.int32_data(), &t);
      return t;
    case onnx::TensorProto::INT32:
      if (static_cast<size_t>(p.int32_data_size()) != count) break;
      copy_elements<int32_t>(p.int32_data(), &t);
      return t;
    default: break;
  }
  return make_error(StatusCode::kCorruptData, what + ": element count does not match its shape");
}

Status value_from_info(const onnx::ValueInfoProto& info, Value* v, bool require_shape) {
  v->name = info.name();
  if (!info.type().has_tensor_type())
    return make_error(StatusCode::kUnsupported, "value '" + info.name() + "' is not a tensor");
  const auto& tt = info.type().tensor_type();
  NPU_ASSIGN_OR_RETURN(v->dtype, dtype_from_onnx(tt.elem_type(), "value '" + info.name() + "'"));
  v->shape.clear();
  if (!tt.has_shape()) {
    if (require_shape)
      return make_error(StatusCode::kInvalidArgument,
                        "input '" + info.name() + "' has no shape; give one with --input-shape " +
                            info.name() + "=D0,D1,...");
    return Status::ok();
  }
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() > 0) {
      v->shape.push_back(d.dim_value());
    } else {
      v->shape.push_back(-1);  // dynamic: must be overridden or inferred
    }
  }
  return Status::ok();
}

Attribute attribute_from_proto(const onnx::AttributeProto& a) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::INT: out.kind = Attribute::Kind::kInt; out.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: out.kind = Attribute::Kind::kFloat; out.f = a.f(); break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRING: out.kind = Attribute::Kind::kString; out.s = a.s(); break;
    case onnx::AttributeProto::TENSOR: {
      out.kind = Attribute::Kind::kTensor;
      auto t = tensor_from_proto(a.t());
      if (t) out.t = std::move(t.value());
      break;
    }
    default: break;
  }
  return out;
}

}  // namespace

Result<Graph> load_onnx(const std::string& path,
                        const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(StatusCode::kNotFound, path + ": cannot open ONNX model (does it exist?)");
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in))
    return make_error(StatusCode::kInvalidArgument,
                      path + ": not an ONNX model (protobuf parse failed); export it with torch.onnx.export or onnx.save");
  int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 7 || opset > 18)
    return make_error(StatusCode::kUnsupported,
                      path + ": default-domain opset " + std::to_string(opset) +
                          " is outside the supported range 7..18; convert it with onnx.version_converter");

  // Apply --input-shape overrides before shape inference so that they propagate.
  auto* graph_proto = model.mutable_graph();
  std::set<std::string> initializer_names;
  for (const auto& init : graph_proto->initializer()) initializer_names.insert(init.name());
  std::set<std::string> overridden;
  for (auto& input : *graph_proto->mutable_input()) {
    auto it = input_shapes.find(input.name());
    if (it == input_shapes.end()) continue;
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
    overridden.insert(input.name());
  }
  for (const auto& [name, dims] : input_shapes)
    if (!overridden.count(name))
      return make_error(StatusCode::kInvalidArgument,
                        "--input-shape names '" + name + "', which is not an input of " + path);

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInvalidArgument, path + ": ONNX checker: " + e.what());
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInvalidArgument, path + ": ONNX shape inference: " + e.what());
  }

  Graph g;
  g.opset = opset;
  std::map<std::string, int> by_name;
  for (const auto& init : graph_proto->initializer()) {
    NPU_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(init));
    Value v;
    v.name = init.name();
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.constant = std::move(t);
    const std::string name = v.name;
    by_name[name] = g.add_value(std::move(v));
  }
  for (const auto& input : graph_proto->input()) {
    if (initializer_names.count(input.name())) continue;
    Value v;
    NPU_RETURN_IF_ERROR(value_from_info(input, &v, true));
    for (int64_t d : v.shape)
      if (d < 0)
        return make_error(StatusCode::kInvalidArgument,
                          "input '" + v.name + "' has a dynamic shape " + shape_to_string(v.shape) +
                              "; fix it with --input-shape " + v.name + "=D0,D1,...");
    const int id = g.add_value(std::move(v));
    by_name[input.name()] = id;
    g.inputs.push_back(id);
  }
  std::map<std::string, const onnx::ValueInfoProto*> infos;
  for (const auto& vi : graph_proto->value_info()) infos[vi.name()] = &vi;
  for (const auto& vi : graph_proto->output()) infos[vi.name()] = &vi;

  for (int n = 0; n < graph_proto->node_size(); ++n) {
    const auto& np = graph_proto->node(n);
    Node node;
    node.op = np.op_type();
    node.name = np.name().empty() ? node.op + "_" + std::to_string(n) : np.name();
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      return make_error(StatusCode::kUnsupported,
                        "operator " + np.domain() + "::" + node.op + " (node '" + node.name +
                            "') is from a custom domain that neither the NPU nor the host fallback supports");
    for (const auto& a : np.attribute()) node.attrs[a.name()] = attribute_from_proto(a);
    for (const auto& in_name : np.input()) {
      if (in_name.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      auto it = by_name.find(in_name);
      if (it == by_name.end())
        return make_error(StatusCode::kInvalidArgument,
                          node.label() + " reads '" + in_name + "', which nothing produces (graph not topologically sorted?)");
      node.inputs.push_back(it->second);
    }
    for (const auto& out_name : np.output()) {
      Value v;
      v.name = out_name;
      if (auto it = infos.find(out_name); it != infos.end())
        NPU_RETURN_IF_ERROR(value_from_info(*it->second, &v, false));
      const int id = g.add_value(std::move(v));
      by_name[out_name] = id;
      node.outputs.push_back(id);
    }
    g.nodes.push_back(std::move(node));
  }
  for (const auto& out : graph_proto->output()) {
    auto it = by_name.find(out.name());
    if (it == by_name.end())
      return make_error(StatusCode::kInvalidArgument, "graph output '" + out.name() + "' is never produced");
    g.outputs.push_back(it->second);
  }
  return g;
}

}  // namespace npu::compiler
