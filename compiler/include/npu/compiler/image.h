// The model image (compiler/schema/model_image.fbs): loading and verification.
// Images are untrusted input. from_bytes() runs the FlatBuffers verifier, then checks every
// range the runtime will rely on (I/O views inside the activation buffer, relocations inside
// the command stream and pointing inside their buffers, command-stream sizes multiple of 32,
// schema version) and only then returns an image.
// A ModelImage is immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npu/hal/status.h"
#include "model_image_generated.h"

namespace npu::compiler {

inline constexpr uint32_t kImageSchemaVersion = 1;

class ModelImage final {
 public:
  static Result<std::shared_ptr<const ModelImage>> from_bytes(std::vector<uint8_t> bytes,
                                                              std::string origin);
  static Result<std::shared_ptr<const ModelImage>> from_file(const std::string& path);

  const npu::image::Model& model() const { return *model_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  const std::string& origin() const { return origin_; }

  ModelImage(const ModelImage&) = delete;
  ModelImage& operator=(const ModelImage&) = delete;

 private:
  ModelImage() = default;
  std::vector<uint8_t> bytes_;
  std::string origin_;
  const npu::image::Model* model_ = nullptr;
};

// True when the bytes start like a model image (identifier "NPUI"); used to tell images
// from ONNX files.
bool looks_like_image(std::span<const uint8_t> bytes);

}  // namespace npu::compiler
