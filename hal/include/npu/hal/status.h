// Status and Result<T>: how every fallible call in the HAL, scheduler, compiler and runtime
// reports errors. Errors are values; exceptions never cross a component boundary.
// The numeric codes are stable and shared with the C API (npu_status_code_t) and the
// bindings: append only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace npu {

enum class StatusCode : int32_t {
  kOk = 0,
  kInvalidArgument = 1,     // bad input: shapes, dtypes, files, flags
  kNotFound = 2,            // a file, device, tensor or handle that does not exist
  kPermissionDenied = 3,    // e.g. EACCES on /dev/accel/accelN
  kResourceExhausted = 4,   // a bounded queue is full, or out of device memory/contexts
  kDeadlineExceeded = 5,    // a wait's deadline passed (the job may still complete)
  kCancelled = 6,           // the request was cancelled or its queue closed
  kDeviceLost = 7,          // device unplugged or its context lost; reopen
  kDeviceTimeout = 8,       // the device hung on this job and was reset
  kDeviceFault = 9,         // the job faulted (page fault, illegal instruction, ...)
  kAborted = 10,            // the job was aborted by a reset caused by another job
  kUnsupported = 11,        // an operator, dtype or capability that is not supported
  kIncompatible = 12,       // image/hardware fingerprint or ISA/driver version mismatch
  kCorruptData = 13,        // a model image or file failed verification
  kInternal = 14,           // a bug: please report it
  kUnavailable = 15,        // the device or queue is closed
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE_NAME: message"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

inline Status make_error(StatusCode code, std::string message) { return {code, std::move(message)}; }

}  // namespace npu

// Propagates a non-OK Status from an expression returning Status.
#define NPU_RETURN_IF_ERROR(expr)            \
  do {                                       \
    ::npu::Status npu_status_ = (expr);      \
    if (!npu_status_.is_ok()) return npu_status_; \
  } while (0)

#define NPU_CONCAT_INNER(a, b) a##b
#define NPU_CONCAT(a, b) NPU_CONCAT_INNER(a, b)
// Assigns the value of a Result<T> expression to `lhs`, or returns its Status.
#define NPU_ASSIGN_OR_RETURN(lhs, expr)                               \
  auto NPU_CONCAT(npu_result_, __LINE__) = (expr);                    \
  if (!NPU_CONCAT(npu_result_, __LINE__).is_ok())                     \
    return NPU_CONCAT(npu_result_, __LINE__).status();                \
  lhs = std::move(NPU_CONCAT(npu_result_, __LINE__)).value()
