#include "npu/hal/status.h"

namespace npu {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kDeviceLost: return "DEVICE_LOST";
    case StatusCode::kDeviceTimeout: return "DEVICE_TIMEOUT";
    case StatusCode::kDeviceFault: return "DEVICE_FAULT";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kUnsupported: return "UNSUPPORTED";
    case StatusCode::kIncompatible: return "INCOMPATIBLE";
    case StatusCode::kCorruptData: return "CORRUPT_DATA";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace npu
