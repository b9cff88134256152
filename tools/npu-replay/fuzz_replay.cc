// libFuzzer target for the trace replayer (replay.h): the input is a trace's text, replayed on
// the functional device through the user-mode driver and the in-process kernel-driver model,
// with file access off and every wait bounded. Register writes, buffer objects, loads and
// submits of random command streams all reach the driver model and the device.
//
// Findings: any crash, sanitizer report, hang (-timeout) or runaway allocation; a failure
// message that is not one line naming "fuzz.trace:LINE"; and a device that no longer answers
// after a reset (the ID register must read back as it did at start-up).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "npu/driver/umd.h"
#include "npu/hw/config.h"
#include "replay.h"

namespace {

struct Harness {
  std::unique_ptr<npu::driver::UmdDevice> dev;
  uint32_t id = 0;
  Harness() {
    std::string err;
    dev = npu::driver::UmdDevice::open("sim", &err);
    if (!dev || dev->reg_read(npu::hw::reg::ID, &id) != 0) {
      std::fprintf(stderr, "fuzz_replay: cannot open the sim device with the register path: %s\n", err.c_str());
      __builtin_trap();
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness h;
  // Every input starts from a reset device, so that a finding reproduces from its input alone.
  if (h.dev->reset() != 0) __builtin_trap();
  npu::replay::Options o;
  o.out = nullptr;
  o.allow_files = false;
  o.max_wait_cycles = 200'000;
  o.wall_clock_cap = std::chrono::seconds(2);
  const auto outcome = npu::replay::run_trace(
      *h.dev, std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.trace", o);
  if (!outcome.passed() &&
      (outcome.failure.rfind("fuzz.trace:", 0) != 0 || outcome.failure.find('\n') != std::string::npos))
    __builtin_trap();
  uint32_t id = 0;
  if (h.dev->reset() != 0 || h.dev->reg_read(npu::hw::reg::ID, &id) != 0 || id != h.id) __builtin_trap();
  return 0;
}
