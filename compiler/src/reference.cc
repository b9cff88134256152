// The graph interpreter over the host-op kernels (compiler/src/host_ops): calibration, and the
// whole-model host fallback.
#include "ir.h"
#include "npu/compiler/host_ops.h"

namespace npu::compiler {

Result<std::vector<Tensor>> run_reference(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (inputs.size() != graph.inputs.size())
    return make_error(StatusCode::kInvalidArgument,
                      "model has " + std::to_string(graph.inputs.size()) + " input(s), got " +
                          std::to_string(inputs.size()));
  std::vector<Tensor> env(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (graph.values[v].constant) env[v] = *graph.values[v].constant;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph.value(graph.inputs[i]);
    if (inputs[i].shape != v.shape)
      return make_error(StatusCode::kInvalidArgument, "input '" + v.name + "' expects shape " +
                                                          shape_to_string(v.shape) + ", got " +
                                                          shape_to_string(inputs[i].shape));
    if (inputs[i].dtype != v.dtype)
      return make_error(StatusCode::kInvalidArgument,
                        "input '" + v.name + "' expects " + std::string(dtype_name(v.dtype)) +
                            ", got " + std::string(dtype_name(inputs[i].dtype)));
    env[static_cast<size_t>(graph.inputs[i])] = inputs[i];
  }
  std::vector<const Tensor*> args;
  for (const Node& n : graph.nodes) {
    args.clear();
    for (int in : n.inputs) args.push_back(in < 0 ? nullptr : &env[static_cast<size_t>(in)]);
    NPU_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                         run_host_op(n.op, n.name, graph.opset, n.attrs, args, n.outputs.size()));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const auto v = static_cast<size_t>(n.outputs[k]);
      if (k < outs.size()) {
        env[v] = std::move(outs[k]);
      } else if (!graph.values[v].name.empty()) {
        return make_error(StatusCode::kUnsupported, n.label() + ": output " + std::to_string(k) +
                                                        " ('" + graph.values[v].name +
                                                        "') is not produced by the host fallback");
      }
    }
  }
  return env;
}

}  // namespace npu::compiler
