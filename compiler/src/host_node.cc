// Host steps of a model image: the serialised ONNX node, run on the host-op library.
#include <onnx/onnx_pb.h>

#include "npu/compiler/host_ops.h"
#include "onnx_tensor.h"

namespace npu::compiler {

Result<std::vector<Tensor>> run_host_node(std::span<const uint8_t> node_proto, int64_t opset,
                                          const std::vector<const Tensor*>& inputs) {
  onnx::NodeProto node;
  if (node_proto.empty() || !node.ParseFromArray(node_proto.data(), static_cast<int>(node_proto.size())))
    return make_error(StatusCode::kCorruptData,
                      "a host step's ONNX node does not parse; recompile the model with npu-compile");
  HostOpAttrs attrs;
  for (const auto& a : node.attribute()) attrs[a.name()] = attribute_from_proto(a);
  return run_host_op(node.op_type(), node.name(), opset, attrs, inputs,
                     static_cast<size_t>(node.output_size()));
}

}  // namespace npu::compiler
