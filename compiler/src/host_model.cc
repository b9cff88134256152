// Whole ONNX models on the host kernels, for npu-run --test-data and tools.
#include <onnx/onnx_pb.h>

#include <set>

#include "ir.h"
#include "npu/compiler/host_ops.h"
#include "npu/hal/file.h"
#include "onnx_tensor.h"

namespace npu::compiler {

Result<OnnxModelInfo> inspect_onnx(const std::string& onnx_path) {
  NPU_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                       read_file(onnx_path, kMaxModelFileBytes, "ONNX model (.onnx)"));
  onnx::ModelProto model;
  try {
    if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return make_error(StatusCode::kInvalidArgument,
                        onnx_path + ": not an ONNX model (protobuf parse failed)");
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInvalidArgument, onnx_path + ": " + e.what());
  }
  OnnxModelInfo info;
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  auto check_tensor = [&](const onnx::ValueInfoProto& v, const char* what) -> Status {
    if (v.type().has_tensor_type()) return Status::ok();
    return make_error(StatusCode::kUnsupported,
                      onnx_path + ": " + what + " '" + v.name() +
                          "' is not a tensor (a sequence, map or optional), "
                          "which neither the NPU nor the host fallback supports");
  };
  for (const auto& i : model.graph().input()) {
    if (initializers.count(i.name())) continue;
    NPU_RETURN_IF_ERROR(check_tensor(i, "input"));
    const auto& tt = i.type().tensor_type();
    NPU_ASSIGN_OR_RETURN(DType dtype,
                         dtype_from_onnx(tt.elem_type(), onnx_path + ": input '" + i.name() + "'"));
    std::optional<std::vector<int64_t>> shape;
    if (tt.has_shape()) {
      shape.emplace();
      for (const auto& d : tt.shape().dim())
        shape->push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
    }
    info.inputs.push_back(i.name());
    info.input_dtypes.push_back(dtype);
    info.input_shapes.push_back(std::move(shape));
  }
  for (const auto& o : model.graph().output()) {
    NPU_RETURN_IF_ERROR(check_tensor(o, "output"));
    info.outputs.push_back(o.name());
  }
  info.nodes = static_cast<size_t>(model.graph().node_size());
  return info;
}

Result<std::map<std::string, std::vector<int64_t>>> match_inputs(
    const OnnxModelInfo& info, const std::vector<Tensor>& inputs) {
  if (info.inputs.size() != inputs.size())
    return make_error(StatusCode::kInvalidArgument,
                      "the model has " + std::to_string(info.inputs.size()) + " input(s), got " +
                          std::to_string(inputs.size()) + " tensor(s)");
  std::map<std::string, std::vector<int64_t>> overrides;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const auto& declared = info.input_shapes[i];
    bool ok = t.dtype == info.input_dtypes[i] && (!declared || declared->size() == t.shape.size());
    bool dynamic = !declared;
    for (size_t d = 0; ok && declared && d < t.shape.size(); ++d) {
      if ((*declared)[d] < 0)
        dynamic = true;
      else
        ok = (*declared)[d] == t.shape[d];
    }
    if (!ok)
      return make_error(StatusCode::kInvalidArgument,
                        "input " + std::to_string(i) + " '" + info.inputs[i] + "' is declared " +
                            std::string(dtype_name(info.input_dtypes[i])) +
                            (declared ? shape_to_string(*declared) : std::string("[?]")) +
                            ", got " + std::string(dtype_name(t.dtype)) + shape_to_string(t.shape));
    if (dynamic) overrides[info.inputs[i]] = t.shape;
  }
  return overrides;
}

Result<HostRun> run_onnx_on_host(const std::string& onnx_path, const std::vector<Tensor>& inputs) {
  NPU_ASSIGN_OR_RETURN(OnnxModelInfo info, inspect_onnx(onnx_path));
  NPU_ASSIGN_OR_RETURN(auto shapes, match_inputs(info, inputs));
  NPU_ASSIGN_OR_RETURN(Graph g, load_onnx(onnx_path, shapes));
  NPU_ASSIGN_OR_RETURN(std::vector<Tensor> env, run_reference(g, inputs));
  HostRun run;
  run.ops = g.nodes.size();
  for (int o : g.outputs) run.outputs.push_back(std::move(env[static_cast<size_t>(o)]));
  return run;
}

Result<Tensor> read_tensor_pb(const std::string& path) { return read_tensor_proto_file(path); }

}  // namespace npu::compiler
