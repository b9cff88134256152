// npu/c_common.h: the state every C API shares (the calling thread's last error).
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

#include "npu/driver/log.h"
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

namespace {
struct CSink {
  npu_log_sink_fn fn;
  void* user;
};
void c_sink(void* user, npu::log::Category category, const char* message) {
  const auto* s = static_cast<const CSink*>(user);
  s->fn(s->user, std::string(npu::log::category_name(category)).c_str(), message);
}
}  // namespace

void npu_log_set_sink(npu_log_sink_fn sink, void* user) {
  if (sink == nullptr) return npu::log::set_sink(nullptr, nullptr);
  // Never freed, since a thread may be inside the previous sink while it is replaced, but kept
  // reachable (LeakSanitizer reported each one once the sink was reset): a deque keeps the
  // addresses stable, and the process-lifetime pointer to it is never destroyed at exit, when
  // another thread may still log.
  static std::mutex mu;
  static auto* sinks = new std::deque<CSink>;
  std::lock_guard<std::mutex> lk(mu);
  sinks->push_back(CSink{sink, user});
  npu::log::set_sink(&c_sink, &sinks->back());
}

npu_status_t npu_log_set_categories(const char* categories) {
  uint32_t mask = 0;
  std::string error;
  const bool ok = npu::log::parse_categories(categories ? categories : "", &mask, &error);
  npu::log::set_mask(mask);
  if (!ok) return npu::c_api::fail(npu::StatusCode::kInvalidArgument, "NPU_LOG: " + error);
  return NPU_OK;
}

}  // extern "C"
