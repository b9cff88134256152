// ONNX protobuf <-> host tensors and attributes, shared by the frontend (initializers,
// Constant attributes) and the test-data reader (backend-test .pb files). Never throws.
#pragma once

#include <string>

#include "npu/compiler/attribute.h"
#include "npu/compiler/tensor.h"

namespace onnx {
class TensorProto;
class AttributeProto;
}  // namespace onnx

namespace npu::compiler {

// The host dtype of an ONNX element type. float and double map to float32 (double is
// converted on load), bool to uint8 (0 or 1); other types are UNSUPPORTED naming `what`.
Result<DType> dtype_from_onnx(int32_t type, const std::string& what);

// Converts a TensorProto (raw or typed data; no external data).
Result<Tensor> tensor_from_proto(const onnx::TensorProto& p);

// Converts an attribute; types the IR does not carry become Kind::kOther with a reason.
Attribute attribute_from_proto(const onnx::AttributeProto& a);

// Reads one serialised TensorProto file (the backend tests' input_<k>.pb / output_<k>.pb).
Result<Tensor> read_tensor_proto_file(const std::string& path);

}  // namespace npu::compiler
