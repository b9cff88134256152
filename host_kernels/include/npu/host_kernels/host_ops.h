// The host kernels (library npu_host_kernels): ONNX operators on host tensors (float32, plus
// the integer and bool-as-uint8 types ONNX uses for shapes, indices and masks). One
// implementation, used by the runtime's host steps, the compiler's constant folding and its
// calibration interpreter. No ONNX or protobuf code: attributes come as host::Attribute,
// decoded by the caller (the compiler from ONNX, the runtime from the model image,
// npu/host_kernels/host_step.h).
// Thread-safe: kernels keep no state; concurrent calls are fine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/host_kernels/attribute.h"

namespace npu::host {

// Runs one ONNX operator (default domain, `opset` 7..18) on host tensors. `inputs` holds one
// pointer per node input, nullptr for an omitted optional input; the caller keeps them alive
// for the call. Returns the node's outputs in order (an operator may return optional outputs
// the node does not use, e.g. MaxPool's Indices). UNSUPPORTED names the operator and the node
// when the operator, or this attribute / dtype combination, is not implemented;
// INVALID_ARGUMENT names them when the inputs are inconsistent. `num_outputs` is the node's
// output count (0 = unknown); only Split without sizes needs it.
Result<std::vector<Tensor>> run_host_op(const std::string& op_type, const std::string& node_name,
                                        int64_t opset, const HostOpAttrs& attrs,
                                        const std::vector<const Tensor*>& inputs,
                                        size_t num_outputs = 0);

// Whether the library has a kernel for `op_type` (some attribute combinations may still be
// UNSUPPORTED at run time).
bool host_op_supported(const std::string& op_type);

// Every operator type with a kernel, sorted.
std::vector<std::string> host_op_types();

}  // namespace npu::host
