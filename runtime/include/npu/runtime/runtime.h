// npu::runtime::Runtime: the opened devices and their schedulers, shared by every session
// created on them (many sessions are multiplexed onto a few device contexts per device).
//
// Device selection follows hal::open_devices(): "sim", "rtl", "accel:N", "/dev/accel/accelN",
// a comma-separated list (requests are spread over all of them), or empty for $NPU_DEVICE /
// "sim". Every listed device must open; nothing falls back silently.
//
// Ownership: shared (shared_ptr). Sessions and in-flight requests keep their Runtime alive;
// dropping the last reference shuts the schedulers down (queued jobs complete CANCELLED).
// Threading: thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "npu/hal/api.h"
#include "npu/scheduler/scheduler.h"

namespace npu::runtime {

struct RuntimeOptions {
  std::string device;  // see the file comment
  scheduler::SchedulerOptions scheduler;
};

// Chrome trace-event JSON ("ph":"X" spans) of requests: queue, copy-in, device, copy-out.
struct TraceEvent {
  std::string name;      // "queue", "copy-in", "device", "copy-out", "host-op"
  uint64_t request_id = 0;
  uint32_t device_index = 0;
  int64_t begin_us = 0;  // since the runtime was opened
  int64_t duration_us = 0;
  uint64_t device_cycles = 0;
};

class Runtime final {
 public:
  static Result<std::shared_ptr<Runtime>> open(RuntimeOptions options = {});
  // Over devices opened elsewhere (or test devices); options.device is ignored.
  static Result<std::shared_ptr<Runtime>> create(std::vector<std::shared_ptr<hal::Device>> devices,
                                                 RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  size_t device_count() const { return devices_.size(); }
  const std::shared_ptr<hal::Device>& device(size_t i) const { return devices_.at(i); }
  scheduler::Scheduler& scheduler(size_t i) const { return *schedulers_.at(i); }
  const RuntimeOptions& options() const { return options_; }

  // Profiling: while enabled, every request adds its spans. end_profiling() returns the
  // trace as Chrome trace-event JSON (load it in chrome://tracing or Perfetto) and clears it.
  void start_profiling();
  std::string end_profiling();
  bool profiling() const;
  void record(const TraceEvent& event);
  int64_t now_us() const;

 private:
  Runtime() = default;
  struct Trace;
  RuntimeOptions options_;
  std::vector<std::shared_ptr<hal::Device>> devices_;
  std::vector<std::unique_ptr<scheduler::Scheduler>> schedulers_;
  std::unique_ptr<Trace> trace_;
};

}  // namespace npu::runtime
