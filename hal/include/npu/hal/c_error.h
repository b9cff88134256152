// For the implementations of the C APIs (not a public header): recording the calling
// thread's last error and keeping exceptions from crossing the C boundary.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "npu/c_common.h"
#include "npu/hal/status.h"

namespace npu::c_api {

// Records `status` as the calling thread's last error and returns its code. Exported by
// libnpu.so (version node NPU_PRIVATE) so that libnpu-compiler.so records its errors in the
// same thread-local state that npu_last_error_message reads.
__attribute__((visibility("default"))) npu_status_t fail(const Status& status);
inline npu_status_t fail(StatusCode code, const std::string& message) {
  return fail(Status(code, message));
}

// Runs `fn` (returning npu_status_t); std::bad_alloc becomes NPU_RESOURCE_EXHAUSTED, any other
// exception NPU_INTERNAL.
template <typename Fn>
npu_status_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(StatusCode::kResourceExhausted, "out of host memory");
  } catch (const std::exception& e) {
    return fail(StatusCode::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(StatusCode::kInternal, "internal error");
  }
}

}  // namespace npu::c_api
