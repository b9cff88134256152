// The model image (compiler/schema/model_image.fbs): loading and verification.
// Images are untrusted input. from_bytes() first checks the integrity trailer (a CRC-32 over
// the whole file, see seal_image) and refuses any damaged byte, then runs the FlatBuffers
// verifier, then checks every
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

// 2: images end in the integrity trailer. 3: host steps carry their attributes as
// HostAttribute tables instead of a serialised ONNX NodeProto (no protobuf to run them).
// Images of another version are refused with "recompile".
inline constexpr uint32_t kImageSchemaVersion = 3;

// The integrity trailer, the last 12 bytes of every image: "NPUC", the little-endian uint32
// length of the FlatBuffer before it, and the little-endian uint32 CRC-32 (zlib, ISO-HDLC
// polynomial) of everything before the CRC (FlatBuffer, "NPUC", length). CRC-32 rather than
// a wider hash: it detects every error burst of up to 32 bits with certainty, so every
// single flipped byte anywhere in the file, where a 64-bit hash only makes a miss unlikely;
// zlib is a maintained implementation and runs at several GB/s. It guards against damage,
// not against forgery.
inline constexpr size_t kImageTrailerBytes = 12;

// FlatBuffer bytes (image::FinishModelBuffer) + the integrity trailer: an image as
// npu-compile writes it.
std::vector<uint8_t> seal_image(std::span<const uint8_t> flatbuffer);

class ModelImage final {
 public:
  static Result<std::shared_ptr<const ModelImage>> from_bytes(std::vector<uint8_t> bytes,
                                                              std::string origin);
  static Result<std::shared_ptr<const ModelImage>> from_file(const std::string& path);

  const npu::image::Model& model() const { return *model_; }
  std::span<const uint8_t> bytes() const { return bytes_; }  // the whole file, trailer included
  const std::string& origin() const { return origin_; }

  ModelImage(const ModelImage&) = delete;
  ModelImage& operator=(const ModelImage&) = delete;

 private:
  ModelImage() = default;
  std::vector<uint8_t> bytes_;
  std::string origin_;
  const npu::image::Model* model_ = nullptr;
};

// True when the bytes start like a model image (identifier "NPUI") or end in its integrity
// trailer; used to tell images (also damaged ones) from ONNX files.
bool looks_like_image(std::span<const uint8_t> bytes);

}  // namespace npu::compiler
