// Session (blocking, callbacks, futures), AsyncSession and CompletionQueue.
#include "npu/runtime/session.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "engine.h"

namespace npu::runtime {

// ---------------------------------------------------------------------------------------------
// Session

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<Runtime> runtime,
                                                 std::shared_ptr<const Model> model,
                                                 SessionOptions options) {
  NPU_ASSIGN_OR_RETURN(auto engine,
                       internal::Engine::create(std::move(runtime), std::move(model), options));
  return std::unique_ptr<Session>(new Session(std::move(engine)));
}

// In-flight run_async/run_future requests hold the engine; they complete after we are gone.
Session::~Session() = default;

const Model& Session::model() const { return engine_->model(); }

Result<Outputs> Session::run(std::span<const Tensor> inputs, Deadline deadline) {
  return engine_->run(inputs, internal::Engine::next_request_id(), deadline);
}

Status Session::run_async(std::vector<Tensor> inputs,
                          std::function<void(Result<Outputs>)> callback, Deadline deadline) {
  if (!callback) return make_error(StatusCode::kInvalidArgument, "run_async needs a callback");
  Result<scheduler::JobHandle> accepted = engine_->start(
      std::move(inputs), internal::Engine::next_request_id(), deadline, std::move(callback));
  return accepted.is_ok() ? Status::ok() : accepted.status();
}

std::future<Result<Outputs>> Session::run_future(std::vector<Tensor> inputs, Deadline deadline) {
  auto promise = std::make_shared<std::promise<Result<Outputs>>>();
  std::future<Result<Outputs>> future = promise->get_future();
  // Filling the promise is a hand-over: the lane does it, with no completion-thread hop.
  Result<scheduler::JobHandle> accepted = engine_->start(
      std::move(inputs), internal::Engine::next_request_id(), deadline,
      [promise](Result<Outputs> r) { promise->set_value(std::move(r)); }, /*done_on_lane=*/true);
  if (!accepted.is_ok()) promise->set_value(accepted.status());
  return future;
}

// ---------------------------------------------------------------------------------------------
// AsyncSession / CompletionQueue

namespace internal {

struct AsyncState {
  struct Pending {
    std::optional<scheduler::JobHandle> handle;
    bool cancel_requested = false;
  };
  uint32_t max_outstanding = 0;
  std::mutex mu;
  std::condition_variable ready_cv;  // a completion arrived, or closed
  std::condition_variable room_cv;   // outstanding dropped, or closed
  std::deque<Completion> ready;
  std::unordered_map<uint64_t, Pending> pending;
  bool submit_closed = false;
  bool queue_closed = false;

  size_t outstanding_locked() const { return pending.size() + ready.size(); }
  bool finished_locked() const {
    return (submit_closed || queue_closed) && pending.empty() && ready.empty();
  }
};

}  // namespace internal

using internal::AsyncState;

Result<std::pair<std::unique_ptr<AsyncSession>, std::unique_ptr<CompletionQueue>>>
AsyncSession::create(std::shared_ptr<Runtime> runtime, std::shared_ptr<const Model> model,
                     SessionOptions options) {
  NPU_ASSIGN_OR_RETURN(auto engine,
                       internal::Engine::create(std::move(runtime), std::move(model), options));
  auto state = std::make_shared<AsyncState>();
  state->max_outstanding = options.max_outstanding;
  std::unique_ptr<AsyncSession> session(new AsyncSession(std::move(engine), state));
  std::unique_ptr<CompletionQueue> queue(new CompletionQueue(std::move(state)));
  return std::make_pair(std::move(session), std::move(queue));
}

AsyncSession::~AsyncSession() { close(); }

const Model& AsyncSession::model() const { return engine_->model(); }

Result<uint64_t> AsyncSession::try_submit(std::vector<Tensor> inputs, std::any user_context) {
  return submit(std::move(inputs), std::move(user_context), Clock::time_point::min());
}

Result<uint64_t> AsyncSession::submit(std::vector<Tensor> inputs, std::any user_context,
                                      Deadline deadline) {
  const uint64_t id = internal::Engine::next_request_id();
  {
    std::unique_lock lock(state_->mu);
    auto room = [&] {
      return state_->submit_closed || state_->queue_closed ||
             state_->outstanding_locked() < state_->max_outstanding;
    };
    if (!room()) {
      if (deadline == Deadline::max()) {
        state_->room_cv.wait(lock, room);
      } else if (!state_->room_cv.wait_until(lock, deadline, room)) {
        return make_error(StatusCode::kResourceExhausted,
                          std::to_string(state_->max_outstanding) +
                              " requests are submitted and not yet received; call recv() or "
                              "raise max_outstanding");
      }
    }
    if (state_->submit_closed || state_->queue_closed)
      return make_error(StatusCode::kUnavailable, "the async session is closed");
    state_->pending.emplace(id, AsyncState::Pending{});
  }
  auto done = [state = state_, id, ctx = std::move(user_context)](Result<Outputs> r) mutable {
    Completion c;
    c.request_id = id;
    c.user_context = std::move(ctx);
    if (r.is_ok()) {
      c.outputs = std::move(r.value().tensors);
      c.stats = r.value().stats;
    } else {
      c.status = r.status();
    }
    {
      std::lock_guard lock(state->mu);
      state->pending.erase(id);
      state->ready.push_back(std::move(c));
    }
    // After the unlock: a receiver woken under the lock would only sleep again on the mutex
    // (a second wake-up per completion). All receivers: the last completion may also end the
    // queue for the others (finished_locked).
    state->ready_cv.notify_all();
  };
  // `done` only queues the completion: the lane runs it, with no completion-thread hop.
  Result<scheduler::JobHandle> handle =
      engine_->start(std::move(inputs), id, deadline, std::move(done), /*done_on_lane=*/true);
  bool cancel_now = false;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->pending.find(id);
    if (!handle.is_ok()) {
      state_->pending.erase(id);
      state_->room_cv.notify_one();
      state_->ready_cv.notify_all();
      return handle.status();
    }
    if (it != state_->pending.end()) {
      it->second.handle = *handle;
      cancel_now = it->second.cancel_requested;
    }
  }
  if (cancel_now) handle->cancel();
  return id;
}

Status AsyncSession::cancel(uint64_t request_id) {
  std::optional<scheduler::JobHandle> handle;
  {
    std::lock_guard lock(state_->mu);
    auto it = state_->pending.find(request_id);
    if (it == state_->pending.end())
      return make_error(StatusCode::kNotFound,
                        "request " + std::to_string(request_id) + " is not pending");
    it->second.cancel_requested = true;
    handle = it->second.handle;
  }
  if (handle) handle->cancel();
  return Status::ok();
}

void AsyncSession::close() {
  std::lock_guard lock(state_->mu);
  state_->submit_closed = true;
  state_->ready_cv.notify_all();
  state_->room_cv.notify_all();
}

CompletionQueue::~CompletionQueue() { close(); }

void CompletionQueue::close() {
  std::vector<scheduler::JobHandle> handles;
  {
    std::lock_guard lock(state_->mu);
    state_->queue_closed = true;
    for (auto& [id, p] : state_->pending) {
      p.cancel_requested = true;
      if (p.handle) handles.push_back(*p.handle);
    }
    state_->ready_cv.notify_all();
    state_->room_cv.notify_all();
  }
  for (const auto& h : handles) h.cancel();
}

size_t CompletionQueue::outstanding() const {
  std::lock_guard lock(state_->mu);
  return state_->outstanding_locked();
}

Result<Completion> CompletionQueue::recv(Clock::duration timeout) {
  std::unique_lock lock(state_->mu);
  auto pred = [&] { return !state_->ready.empty() || state_->finished_locked(); };
  if (timeout == Clock::duration::max()) {
    state_->ready_cv.wait(lock, pred);
  } else if (!state_->ready_cv.wait_for(lock, timeout, pred)) {
    return make_error(StatusCode::kDeadlineExceeded,
                      "no completion within " +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()) +
                          " ms (" + std::to_string(state_->pending.size()) + " pending)");
  }
  if (state_->ready.empty())
    return make_error(StatusCode::kUnavailable,
                      "the completion queue is closed and every request has been received");
  Completion c = std::move(state_->ready.front());
  state_->ready.pop_front();
  state_->room_cv.notify_one();
  return c;
}

Result<std::optional<Completion>> CompletionQueue::try_recv() {
  std::lock_guard lock(state_->mu);
  if (state_->ready.empty()) {
    if (state_->finished_locked())
      return make_error(StatusCode::kUnavailable,
                        "the completion queue is closed and every request has been received");
    return std::optional<Completion>();
  }
  Completion c = std::move(state_->ready.front());
  state_->ready.pop_front();
  state_->room_cv.notify_one();
  return std::optional<Completion>(std::move(c));
}

CompletionQueue::iterator& CompletionQueue::iterator::operator++() {
  Result<Completion> r = q_->recv();
  if (r.is_ok()) {
    current_.emplace(std::move(r).value());
  } else {
    q_ = nullptr;
    current_.reset();
  }
  return *this;
}

}  // namespace npu::runtime
