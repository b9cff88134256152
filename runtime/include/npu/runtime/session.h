// Sessions: running a Model on a Runtime.
//
//   Session        blocking run(inputs) -> outputs; safe to call from many threads at once.
//                  Also run_async(inputs, callback) and run_future(inputs).
//   AsyncSession + CompletionQueue
//                  submit(inputs, user_context) -> request id; recv(timeout) / try_recv /
//                  range-for on the queue -> Completion {user_context, status, outputs}.
//
// Every request gets its own activation buffer from a bounded pool (max_in_flight per
// device). Inputs are quantised into it before submission (the caller's tensors are copied:
// they may be reused or freed as soon as submit/run returns); outputs are dequantised out
// of it on completion.
//
// Close semantics (AsyncSession / CompletionQueue):
//  - Every accepted request completes exactly once: one Completion in the queue, or one
//    callback call. A request that is not accepted (submit returned an error) never completes.
//  - AsyncSession::close() (also its destructor) closes the submit side and drains: requests
//    in flight still complete into the queue; once they are all received, recv() returns
//    UNAVAILABLE.
//  - CompletionQueue::close() (also its destructor) closes the submit side too and cancels
//    every pending request: each completes CANCELLED (a request already on the device
//    completes CANCELLED when the device is done with it). Completions already in the queue
//    and those still arriving can be received; then recv() returns UNAVAILABLE.
//  - close() is idempotent and safe from any thread, including a callback.
// Backpressure: at most `max_outstanding` requests may be submitted and not yet received, and
// at most `max_in_flight` per device hold an activation buffer (from submission until their
// outputs are copied out); submit(…, deadline) waits for both until its deadline,
// try_submit() reports RESOURCE_EXHAUSTED at once.
// Cancellation: cancel(request id) touches only that request.
// Timeouts are std::chrono durations / steady_clock deadlines everywhere.
#pragma once

#include <any>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/runtime/model.h"
#include "npu/runtime/runtime.h"

namespace npu::runtime {

using hal::Clock;
using hal::Deadline;

struct SessionOptions {
  hal::Priority priority = hal::Priority::kNormal;
  uint32_t max_in_flight = 4;     // activation buffers per device (requests on the device)
  uint32_t max_outstanding = 64;  // AsyncSession: submitted and not yet received
};

// Per-request measurements.
struct RunStats {
  uint64_t request_id = 0;
  uint32_t device_index = 0;
  uint64_t device_cycles = 0;  // Σ over the request's NPU jobs (device clock)
  double queue_us = 0;         // accepted -> started on a device context
  double device_us = 0;        // started -> device finished (includes host steps), less the
                               // copy-in/out that images with value maps do on the lane
  double host_steps_us = 0;    // of device_us: host operators and the boundary conversions
                               // between NPU steps (images with value maps)
  uint32_t device_waits = 0;   // times the host slept on the device: one per chain of NPU steps
  double copy_in_us = 0;       // quantising the model's inputs (before the request, or on the
                               // lane before the NPU step that reads them)
  double copy_out_us = 0;      // dequantising the model's outputs (likewise)
  double total_us = 0;         // run()/submit() call -> outputs ready
  bool retried = false;        // an ABORTED job was resubmitted
};

struct Outputs {
  std::vector<Tensor> tensors;  // in the model's output order
  RunStats stats;
};

namespace internal {
class Engine;
struct AsyncState;
}  // namespace internal

class Session final {
 public:
  // Loads `model` onto every device of `runtime`. INCOMPATIBLE for an image built for other
  // hardware, UNSUPPORTED for a host operator without a kernel.
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<Runtime> runtime,
                                                 std::shared_ptr<const Model> model,
                                                 SessionOptions options = {});
  // Does not wait: in-flight run_async/run_future requests keep what they need alive and
  // still complete (their callbacks may run after the destructor returned).
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const;

  // Blocks until the outputs are ready. The request runs on the calling thread when one of
  // the scheduler's lanes is idle (no hop to another thread but the device's), else it waits
  // for a lane like any other. `deadline` bounds the wait for an activation buffer
  // and a queue slot (RESOURCE_EXHAUSTED); once accepted the request runs to its end (a hung
  // device becomes DEVICE_TIMEOUT through the driver and the scheduler).
  Result<Outputs> run(std::span<const Tensor> inputs, Deadline deadline = hal::kInfiniteDeadline);

  // Non-blocking variants. `callback` runs exactly once on the runtime's completion thread,
  // with no runtime lock held; it may call into the runtime. Returns the error (and does not
  // call back) when the request is not accepted. run_future's result is set by the thread
  // that ends the request (the scheduler lane that ran it: no completion-thread hop), as are
  // AsyncSession's completions.
  Status run_async(std::vector<Tensor> inputs, std::function<void(Result<Outputs>)> callback,
                   Deadline deadline = hal::kInfiniteDeadline);
  std::future<Result<Outputs>> run_future(std::vector<Tensor> inputs,
                                          Deadline deadline = hal::kInfiniteDeadline);

 private:
  explicit Session(std::shared_ptr<internal::Engine> engine) : engine_(std::move(engine)) {}
  std::shared_ptr<internal::Engine> engine_;
};

// One finished request, as received from a CompletionQueue.
struct Completion {
  uint64_t request_id = 0;
  std::any user_context;
  Status status;  // OK, CANCELLED or the error; outputs are empty unless OK
  std::vector<Tensor> outputs;
  RunStats stats;
};

class CompletionQueue final {
 public:
  ~CompletionQueue();  // close()
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Waits up to `timeout` for a completion. DEADLINE_EXCEEDED when none arrived in time;
  // UNAVAILABLE when the queue is closed (either side) and every request has been received.
  Result<Completion> recv(Clock::duration timeout);
  Result<Completion> recv() { return recv(Clock::duration::max()); }
  // Never blocks: a completion, nullopt when none is ready, UNAVAILABLE as for recv().
  Result<std::optional<Completion>> try_recv();
  // See the file comment. Never blocks.
  void close();
  // Requests submitted and not yet received.
  size_t outstanding() const;

  // for (Completion& c : queue) ... — receives until UNAVAILABLE.
  class iterator {
   public:
    using value_type = Completion;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    explicit iterator(CompletionQueue* q) : q_(q) { ++*this; }
    Completion& operator*() { return *current_; }
    iterator& operator++();
    bool operator==(const iterator& o) const { return q_ == o.q_; }

   private:
    CompletionQueue* q_ = nullptr;
    std::optional<Completion> current_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  friend class AsyncSession;
  explicit CompletionQueue(std::shared_ptr<internal::AsyncState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::AsyncState> state_;
};

class AsyncSession final {
 public:
  // As Session::create, returning the submit side and its completion queue.
  static Result<std::pair<std::unique_ptr<AsyncSession>, std::unique_ptr<CompletionQueue>>>
  create(std::shared_ptr<Runtime> runtime, std::shared_ptr<const Model> model,
         SessionOptions options = {});
  ~AsyncSession();  // close()
  AsyncSession(const AsyncSession&) = delete;
  AsyncSession& operator=(const AsyncSession&) = delete;

  const Model& model() const;

  // Queues one request. Waits for room until `deadline` (RESOURCE_EXHAUSTED after it);
  // UNAVAILABLE after close; INVALID_ARGUMENT for bad inputs. Returns the request id.
  Result<uint64_t> submit(std::vector<Tensor> inputs, std::any user_context = {},
                          Deadline deadline = hal::kInfiniteDeadline);
  Result<uint64_t> try_submit(std::vector<Tensor> inputs, std::any user_context = {});
  // Cancels request `request_id` only: it completes CANCELLED (unless it had already
  // finished). NOT_FOUND when no such request is pending.
  Status cancel(uint64_t request_id);
  // Closes the submit side (see the file comment). Never blocks.
  void close();

 private:
  AsyncSession(std::shared_ptr<internal::Engine> engine,
               std::shared_ptr<internal::AsyncState> state)
      : engine_(std::move(engine)), state_(std::move(state)) {}
  std::shared_ptr<internal::Engine> engine_;
  std::shared_ptr<internal::AsyncState> state_;
};

}  // namespace npu::runtime
