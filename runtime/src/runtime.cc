#include "npu/runtime/runtime.h"

#include <atomic>
#include <mutex>

#include <nlohmann/json.hpp>

namespace npu::runtime {

using hal::Clock;

struct Runtime::Trace {
  std::atomic<bool> enabled{false};
  std::mutex mu;
  std::vector<TraceEvent> events;
  Clock::time_point epoch = Clock::now();
};

Result<std::shared_ptr<Runtime>> Runtime::open(RuntimeOptions options) {
  NPU_ASSIGN_OR_RETURN(auto devices, hal::open_devices(options.device));
  return create(std::move(devices), std::move(options));
}

Result<std::shared_ptr<Runtime>> Runtime::create(std::vector<std::shared_ptr<hal::Device>> devices,
                                                 RuntimeOptions options) {
  if (devices.empty()) return make_error(StatusCode::kInvalidArgument, "a runtime needs a device");
  for (const auto& d : devices)
    if (!d) return make_error(StatusCode::kInvalidArgument, "null device");
  auto rt = std::shared_ptr<Runtime>(new Runtime());
  rt->trace_ = std::make_unique<Trace>();
  rt->devices_ = std::move(devices);
  for (const auto& d : rt->devices_) {
    NPU_ASSIGN_OR_RETURN(auto sched, scheduler::Scheduler::create(d, options.scheduler));
    rt->schedulers_.push_back(std::move(sched));
  }
  rt->options_ = std::move(options);
  return rt;
}

Runtime::~Runtime() {
  for (auto& s : schedulers_) s->shutdown(scheduler::Scheduler::ShutdownMode::kCancelPending);
}

void Runtime::start_profiling() {
  std::lock_guard lock(trace_->mu);
  trace_->events.clear();
  trace_->enabled.store(true);
}

bool Runtime::profiling() const { return trace_->enabled.load(std::memory_order_relaxed); }

void Runtime::record(const TraceEvent& event) {
  if (!profiling()) return;
  std::lock_guard lock(trace_->mu);
  trace_->events.push_back(event);
}

int64_t Runtime::now_us() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - trace_->epoch)
      .count();
}

std::string Runtime::end_profiling() {
  std::vector<TraceEvent> events;
  {
    std::lock_guard lock(trace_->mu);
    trace_->enabled.store(false);
    events.swap(trace_->events);
  }
  // Chrome trace-event format: one process per device, one complete ("X") event per request.
  nlohmann::json trace_events = nlohmann::json::array();
  for (size_t d = 0; d < devices_.size(); ++d) {
    trace_events.push_back({{"name", "process_name"},
                            {"ph", "M"},
                            {"pid", d},
                            {"args", {{"name", "npu " + devices_[d]->info().spec}}}});
  }
  for (const TraceEvent& e : events) {
    nlohmann::json args = {{"request", e.request_id}};
    if (e.device_cycles) args["device_cycles"] = e.device_cycles;
    trace_events.push_back({{"name", e.name},
                            {"cat", "request"},
                            {"ph", "X"},
                            {"ts", e.begin_us},
                            {"dur", e.duration_us},
                            {"pid", e.device_index},
                            {"tid", e.request_id},
                            {"args", std::move(args)}});
  }
  return nlohmann::json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(trace_events)}}.dump();
}

}  // namespace npu::runtime
