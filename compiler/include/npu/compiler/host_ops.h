// The compiler's view of the host kernels: the kernels themselves are npu_host_kernels
// (npu/host_kernels/host_ops.h: one implementation for the runtime's host steps, constant
// folding and calibration); this header re-exports them into npu::compiler and adds what
// needs ONNX: whole models on the host (npu-run --test-data) and backend-test .pb tensors.
// Thread-safe: no state; concurrent calls are fine.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "npu/compiler/attribute.h"
#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/host_kernels/host_ops.h"

namespace npu::compiler {

using host::HostOpAttrs;
using host::host_op_supported;
using host::host_op_types;
using host::run_host_op;

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
