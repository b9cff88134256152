#include "onnx_tensor.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "npu/hal/file.h"

namespace npu::compiler {
namespace {

// Larger tensors than this are refused as corrupt rather than allocated.
constexpr int64_t kMaxElements = int64_t{1} << 32;

template <typename T, typename Src>
void copy_elements(const Src& src, Tensor* t) {
  auto dst = t->as<T>();
  for (size_t i = 0; i < dst.size() && i < static_cast<size_t>(src.size()); ++i)
    dst[i] = static_cast<T>(src.Get(static_cast<int>(i)));
}

}  // namespace

Result<DType> dtype_from_onnx(int32_t type, const std::string& what) {
  switch (type) {
    case onnx::TensorProto::FLOAT:
      return DType::kF32;
    case onnx::TensorProto::DOUBLE:
      return DType::kF32;  // converted on load
    case onnx::TensorProto::INT8:
      return DType::kI8;
    case onnx::TensorProto::UINT8:
      return DType::kU8;
    case onnx::TensorProto::BOOL:
      return DType::kU8;  // 0 or 1
    case onnx::TensorProto::INT32:
      return DType::kI32;
    case onnx::TensorProto::INT64:
      return DType::kI64;
    default:
      return make_error(StatusCode::kUnsupported,
                        what + " has ONNX element type " + std::to_string(type) +
                            ", which this compiler does not support (float, double, bool, int8, "
                            "uint8, int32, int64 are)");
  }
}

Result<Tensor> tensor_from_proto(const onnx::TensorProto& p) {
  const std::string what = "tensor '" + p.name() + "'";
  if (p.data_type() == onnx::TensorProto::UNDEFINED)
    return make_error(StatusCode::kCorruptData,
                      what + " has no element type (empty, or not a TensorProto)");
  NPU_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx(p.data_type(), what));
  if (p.data_location() == onnx::TensorProto::EXTERNAL)
    return make_error(StatusCode::kUnsupported,
                      what + " uses external data; save the model with all tensors embedded");
  std::vector<int64_t> shape(p.dims().begin(), p.dims().end());
  int64_t count64 = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count64 > kMaxElements / d))
      return make_error(StatusCode::kCorruptData,
                        what + ": shape " + shape_to_string(shape) + " is negative or too large");
    count64 *= d;
  }
  const size_t count = static_cast<size_t>(count64);
  const bool is_double = p.data_type() == onnx::TensorProto::DOUBLE;
  const bool is_bool = p.data_type() == onnx::TensorProto::BOOL;
  if (!p.raw_data().empty()) {
    const std::string& raw = p.raw_data();
    const size_t width = is_double ? 8 : dtype_size(dtype);
    if (raw.size() != count * width)
      return make_error(StatusCode::kCorruptData,
                        what + ": raw data has " + std::to_string(raw.size()) + " bytes, shape " +
                            shape_to_string(shape) + " needs " + std::to_string(count * width));
    Tensor t = Tensor::zeros(dtype, shape);
    if (is_double) {
      auto dst = t.as<float>();
      for (size_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, raw.data() + i * 8, 8);
        dst[i] = static_cast<float>(v);
      }
    } else {
      std::memcpy(t.data.data(), raw.data(), raw.size());
      if (is_bool)
        for (auto& b : t.data) b = b != 0;
    }
    return t;
  }
  auto typed_count = [&]() -> size_t {
    switch (p.data_type()) {
      case onnx::TensorProto::FLOAT:
        return static_cast<size_t>(p.float_data_size());
      case onnx::TensorProto::DOUBLE:
        return static_cast<size_t>(p.double_data_size());
      case onnx::TensorProto::INT64:
        return static_cast<size_t>(p.int64_data_size());
      default:
        return static_cast<size_t>(p.int32_data_size());
    }
  };
  if (typed_count() != count)
    return make_error(StatusCode::kCorruptData, what + ": " + std::to_string(typed_count()) +
                                                    " elements do not match its shape " +
                                                    shape_to_string(shape));
  Tensor t = Tensor::zeros(dtype, shape);
  switch (p.data_type()) {
    case onnx::TensorProto::FLOAT:
      copy_elements<float>(p.float_data(), &t);
      break;
    case onnx::TensorProto::DOUBLE:
      copy_elements<float>(p.double_data(), &t);
      break;
    case onnx::TensorProto::INT64:
      copy_elements<int64_t>(p.int64_data(), &t);
      break;
    case onnx::TensorProto::INT8:
      copy_elements<int8_t>(p.int32_data(), &t);
      break;
    case onnx::TensorProto::UINT8:
      copy_elements<uint8_t>(p.int32_data(), &t);
      break;
    case onnx::TensorProto::INT32:
      copy_elements<int32_t>(p.int32_data(), &t);
      break;
    case onnx::TensorProto::BOOL:
      for (size_t i = 0; i < count; ++i) t.data[i] = p.int32_data(static_cast<int>(i)) != 0;
      break;
    default:
      break;
  }
  return t;
}

Attribute attribute_from_proto(const onnx::AttributeProto& a) {
  Attribute out;
  switch (a.type()) {
    case onnx::AttributeProto::INT:
      out.kind = Attribute::Kind::kInt;
      out.i = a.i();
      break;
    case onnx::AttributeProto::FLOAT:
      out.kind = Attribute::Kind::kFloat;
      out.f = a.f();
      break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::kInts;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::kFloats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::STRING:
      out.kind = Attribute::Kind::kString;
      out.s = a.s();
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = Attribute::Kind::kStrings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSOR: {
      auto t = tensor_from_proto(a.t());
      if (t.is_ok()) {
        out.kind = Attribute::Kind::kTensor;
        out.t = std::move(t.value());
      } else {
        out.kind = Attribute::Kind::kOther;
        out.s = t.status().message();
      }
      break;
    }
    default:
      out.kind = Attribute::Kind::kOther;
      out.s = "attribute '" + a.name() + "' has ONNX attribute type " +
              std::to_string(static_cast<int>(a.type())) + ", which the IR does not carry";
      break;
  }
  return out;
}

Result<Tensor> read_tensor_proto_file(const std::string& path) {
  NPU_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                       read_file(path, kMaxTensorFileBytes, "serialised TensorProto (.pb)"));
  onnx::TensorProto proto;
  try {
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return make_error(StatusCode::kCorruptData,
                        path + ": not a serialised ONNX TensorProto (protobuf parse failed)");
  } catch (const std::exception& e) {
    return make_error(StatusCode::kCorruptData, path + ": " + e.what());
  }
  auto t = tensor_from_proto(proto);
  if (!t.is_ok()) return Status(t.status().code(), path + ": " + t.status().message());
  return t;
}

}  // namespace npu::compiler
