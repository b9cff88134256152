// npu/c_common.h: the state every C API shares (the calling thread's last error).
#include <cstdlib>
#include <string>

#include "npu/hal/c_error.h"

namespace npu::c_api {

namespace {
thread_local std::string g_last_error;
}  // namespace

npu_status_t fail(const Status& status) {
  g_last_error = status.to_string();
  return static_cast<npu_status_t>(status.code());
}

}  // namespace npu::c_api

extern "C" {

const char* npu_status_name(npu_status_t status) {
  // status_code_name returns views of string literals.
  return npu::status_code_name(static_cast<npu::StatusCode>(status)).data();
}

const char* npu_last_error_message(void) { return npu::c_api::g_last_error.c_str(); }

void npu_free(void* memory) { std::free(memory); }

}  // extern "C"
