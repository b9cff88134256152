// The engine behind Session and AsyncSession: per-device executables, activation-buffer
// pools, quantisation at the boundary, and submission to the runtime's schedulers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "npu/hal/api.h"
#include "npu/runtime/model.h"
#include "npu/runtime/runtime.h"
#include "npu/runtime/session.h"
#include "npu/scheduler/scheduler.h"

namespace npu::runtime::internal {

// A bounded pool of executable instances (one activation buffer + patched commands each).
class InstancePool final {
 public:
  InstancePool(std::shared_ptr<hal::Executable> exe, uint32_t capacity)
      : exe_(std::move(exe)), capacity_(capacity) {}
  // Waits until `deadline` for a free instance; RESOURCE_EXHAUSTED after it.
  Result<std::shared_ptr<hal::ExecutableInstance>> acquire(Deadline deadline);
  // Returns an instance; a non-reusable one (the device may still write it) is dropped.
  void release(std::shared_ptr<hal::ExecutableInstance> inst, bool reusable);
  uint32_t available() const;
  const hal::Executable& executable() const { return *exe_; }

 private:
  std::shared_ptr<hal::Executable> exe_;
  const uint32_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<hal::ExecutableInstance>> free_;
  uint32_t live_ = 0;
};

using DoneFn = std::function<void(Result<Outputs>)>;

class Engine final : public std::enable_shared_from_this<Engine> {
 public:
  static Result<std::shared_ptr<Engine>> create(std::shared_ptr<Runtime> runtime,
                                                std::shared_ptr<const Model> model,
                                                SessionOptions options);
  // Validates and queues one request (its inputs are moved into it). When accepted, `done`
  // runs exactly once, on the scheduler's completion thread, or with `done_on_lane` on the
  // thread that ends the request (its lane: no thread hop; see JobSpec::complete_on_lane),
  // for a `done` that only hands the result over; when not, the error is returned and `done`
  // is never called.
  Result<scheduler::JobHandle> start(std::vector<Tensor> inputs, uint64_t request_id,
                                     Deadline deadline, DoneFn done, bool done_on_lane = false);
  // Runs one request to its end on the calling thread's behalf (Scheduler::run: on this
  // thread when a lane is idle) and returns its outputs; no completion-thread hop.
  Result<Outputs> run(std::span<const Tensor> inputs, uint64_t request_id, Deadline deadline);
  static uint64_t next_request_id();
  const Model& model() const { return *model_; }
  const SessionOptions& options() const { return options_; }

 private:
  struct Backend {
    uint32_t index = 0;
    std::shared_ptr<hal::Executable> exe;
    std::unique_ptr<InstancePool> pool;
  };
  struct Request;  // one request between prepare() and finish()
  // Validates `inputs` and readies a request. With `owned_inputs` (the same tensors, which the
  // request may move from) the request keeps the inputs it needs; without, it reads `inputs`
  // in place, which must then outlive the request (a blocking run()).
  Result<Request> prepare(std::span<const Tensor> inputs, std::vector<Tensor>* owned_inputs,
                          uint64_t request_id, Deadline deadline);
  Result<Outputs> finish(Request& request, scheduler::JobOutcome&& outcome);
  Engine() = default;
  // Per step, which hooks an NPU step needs (scheduler::kHookBefore/kHookAfter): mapped
  // images only; the steps that need none chain on the device.
  std::shared_ptr<const std::vector<uint8_t>> hook_mask_;
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::vector<Backend> backends_;
  std::atomic<uint32_t> round_robin_{0};
};

}  // namespace npu::runtime::internal
