// Reading an input file whole, with the checks every tool and loader needs before it trusts
// a path: it exists, it is a regular file (not a directory, device, pipe or socket), it is
// not empty, and it is no larger than the caller's limit (so /dev/zero or a runaway file
// cannot exhaust memory). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "npu/hal/status.h"

namespace npu {

// Limits for the files the stack reads. Protobuf and FlatBuffers both cap a message below
// 2 GiB (a signed 32-bit size).
inline constexpr uint64_t kMaxModelFileBytes = (2ull << 30) - 1;   // ONNX models, model images
inline constexpr uint64_t kMaxTensorFileBytes = (2ull << 30) - 1;  // .npy, TensorProto .pb
inline constexpr uint64_t kMaxTextFileBytes = 64ull << 20;         // replay traces and their data

// Reads `path` whole. `what` names the expected content in errors ("ONNX model", ".npy
// file"). NOT_FOUND when it does not exist; INVALID_ARGUMENT when it is a directory, not a
// regular file, empty, or larger than `max_bytes`; PERMISSION_DENIED when it cannot be read.
Result<std::vector<uint8_t>> read_file(const std::string& path, uint64_t max_bytes,
                                       std::string_view what);

// The same checks without reading: for callers that hand the path to a library.
Status check_input_file(const std::string& path, uint64_t max_bytes, std::string_view what);

}  // namespace npu
