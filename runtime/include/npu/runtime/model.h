// npu::runtime::Model: an immutable, introspectable model (a verified model image).
// Tensor descriptors give the user-facing side (name, dtype, shape, layout, quantisation) and
// the device side the runtime converts to and from (int8/int32 view in the activation buffer).
// Threading: immutable; share it freely (shared_ptr<const Model>) between sessions and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "npu/compiler/image.h"
#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"

namespace npu::runtime {

// Affine quantisation: real = scale · (q − zero_point); per-tensor when axis < 0, else one
// scale/zero point per index of `axis`.
struct QuantInfo {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int32_t axis = -1;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;    // what the user passes or receives
  std::vector<int64_t> shape;
  std::string layout;           // "NC", "NHWC", ...
  std::optional<QuantInfo> quant;  // for user-facing quantised tensors
  // Device side: `device_dtype` elements at `device_offset` bytes into the activation buffer,
  // walked with byte `device_strides` in the order of `shape`. Absent (on_device false) for a
  // value only the host touches.
  bool on_device = true;
  DType device_dtype = DType::kI8;
  uint64_t device_offset = 0;
  std::vector<int64_t> device_strides;
  QuantInfo device_quant;

  int64_t element_count() const;
  std::string to_string() const;  // "x: float32[4,64] NC (device int8 scale 0.02 zp 0)"
};

class Model final {
 public:
  // Loads and verifies a model image file (CORRUPT_DATA, NOT_FOUND, INCOMPATIBLE, ...).
  static Result<std::shared_ptr<const Model>> load_file(const std::string& path);
  static Result<std::shared_ptr<const Model>> from_bytes(std::vector<uint8_t> bytes,
                                                         std::string origin);
  static Result<std::shared_ptr<const Model>> from_image(
      std::shared_ptr<const compiler::ModelImage> image);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  const compiler::ModelImage& image() const { return *image_; }
  const std::shared_ptr<const compiler::ModelImage>& shared_image() const { return image_; }
  const std::string& origin() const { return image_->origin(); }
  uint32_t array_dim() const;
  uint64_t hw_fingerprint() const;
  uint64_t macs() const { return macs_; }  // per inference, Σ over NPU steps
  uint64_t predicted_cycles() const { return predicted_cycles_; }
  size_t npu_steps() const { return npu_steps_; }
  size_t host_steps() const { return host_steps_; }

  // Value maps (images with host steps): every value a step exchanges with the host, with
  // its device view when it has one; the value index of each model input and output; and
  // the constants host operators read. mapped() is false for images without value maps,
  // whose inputs and outputs all live in the activation buffer.
  bool mapped() const { return mapped_; }
  const std::vector<TensorInfo>& values() const { return values_; }
  const std::vector<uint32_t>& input_values() const { return input_values_; }
  const std::vector<uint32_t>& output_values() const { return output_values_; }
  const std::vector<std::pair<uint32_t, Tensor>>& constants() const { return constants_; }
  // Inputs the image was specialised to (input index, the only value it accepts): shape
  // operands such as Reshape's shape. Session::run rejects any other value.
  const std::vector<std::pair<size_t, Tensor>>& specialized_inputs() const { return specialized_; }

  // Human-readable description (several lines) and the same as one JSON object.
  std::string summary() const;
  std::string summary_json() const;

 private:
  Model() = default;
  std::shared_ptr<const compiler::ModelImage> image_;
  std::vector<TensorInfo> inputs_, outputs_;
  bool mapped_ = false;
  std::vector<TensorInfo> values_;
  std::vector<uint32_t> input_values_, output_values_;
  std::vector<std::pair<uint32_t, Tensor>> constants_;
  std::vector<std::pair<size_t, Tensor>> specialized_;
  uint64_t macs_ = 0, predicted_cycles_ = 0;
  size_t npu_steps_ = 0, host_steps_ = 0;
};

}  // namespace npu::runtime
