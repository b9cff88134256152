// The host-fallback kernel library: ONNX operators on host tensors (float32, plus the
// integer and bool-as-uint8 types ONNX uses for shapes, indices and masks). Written once,
// used by the compiler's calibration interpreter and by the runtime's host steps.
// Thread-safe: kernels keep no state; concurrent calls are fine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "npu/compiler/attribute.h"
#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"

namespace npu::compiler {

using HostOpAttrs = std::map<std::string, Attribute>;

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

// Runs a host step of a model image: `node_proto` is the serialised ONNX NodeProto the
// compiler stored in the HostSegment (its op type, name and attributes). CORRUPT_DATA when
// it does not parse; otherwise as run_host_op.
Result<std::vector<Tensor>> run_host_node(std::span<const uint8_t> node_proto, int64_t opset,
                                          const std::vector<const Tensor*>& inputs);

// Whether the library has a kernel for `op_type` (some attribute combinations may still be
// UNSUPPORTED at run time).
bool host_op_supported(const std::string& op_type);

// Every operator type with a kernel, sorted.
std::vector<std::string> host_op_types();

// ---- Whole ONNX models on the host (npu-run --test-data, tools) ----

struct OnnxModelInfo {
  std::vector<std::string> inputs;  // graph inputs that are not initializers, in order
  std::vector<DType> input_dtypes;
  // Declared input shapes, -1 for a dynamic dimension; nullopt when none is declared.
  std::vector<std::optional<std::vector<int64_t>>> input_shapes;
  std::vector<std::string> outputs;  // graph outputs, in order
  size_t nodes = 0;
};

// Parses `onnx_path` (no checker, no shape inference) and lists its interface. UNSUPPORTED
// when an input or output is not a tensor, or has an element type the host does not support.
Result<OnnxModelInfo> inspect_onnx(const std::string& onnx_path);

// Checks `inputs` (one per model input, in order) against the declared dtypes and shapes and
// returns the input-shape overrides their dynamic dimensions need (for load_onnx /
// CompileOptions::input_shapes). INVALID_ARGUMENT names the input that does not match.
Result<std::map<std::string, std::vector<int64_t>>> match_inputs(const OnnxModelInfo& info,
                                                                 const std::vector<Tensor>& inputs);

struct HostRun {
  std::vector<Tensor> outputs;  // one per graph output, in order
  size_t ops = 0;               // nodes run on the host
};

// Loads `onnx_path` (dynamic input dimensions taken from `inputs`, one per graph input, in
// order; see match_inputs) and runs every node on the host kernels.
Result<HostRun> run_onnx_on_host(const std::string& onnx_path, const std::vector<Tensor>& inputs);

// Reads one serialised ONNX TensorProto file (an ONNX backend test's input_<k>.pb or
// output_<k>.pb). double becomes float32, bool uint8. Errors name the file.
Result<Tensor> read_tensor_pb(const std::string& path);

}  // namespace npu::compiler
