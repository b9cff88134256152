// The device the device tests run on: NPU_TEST_DEVICE (sim by default; rtl; accel:N), and a
// runtime on it with one context (results in submission order, one device state).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "npu/runtime/api.h"

namespace npu::test {

inline std::string test_device() {
  const char* d = std::getenv("NPU_TEST_DEVICE");
  return d && *d ? d : "sim";
}

inline Result<std::shared_ptr<runtime::Runtime>> open_test_runtime() {
  runtime::RuntimeOptions o;
  o.device = test_device();
  o.scheduler.num_contexts = 1;
  return runtime::Runtime::open(o);
}

}  // namespace npu::test
