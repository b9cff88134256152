#include "engine.h"

#include "npu/runtime/host_ops.h"
#include "npu/runtime/quantize.h"

namespace npu::runtime::internal {
namespace {

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int64_t us_since(const Runtime& rt, Clock::time_point t) {
  return rt.now_us() - std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
}

}  // namespace

Result<std::shared_ptr<hal::ExecutableInstance>> InstancePool::acquire(Deadline deadline) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return !free_.empty() || live_ < capacity_; };
  if (!ready()) {
    if (deadline == Deadline::max()) {
      cv_.wait(lock, ready);
    } else if (!cv_.wait_until(lock, deadline, ready)) {
      return make_error(StatusCode::kResourceExhausted,
                        "all " + std::to_string(capacity_) +
                            " activation buffers of the session are in use until the "
                            "deadline; retry later or raise max_in_flight");
    }
  }
  if (!free_.empty()) {
    auto inst = std::move(free_.back());
    free_.pop_back();
    return inst;
  }
  ++live_;
  lock.unlock();
  Result<std::unique_ptr<hal::ExecutableInstance>> inst = exe_->instantiate();
  if (!inst.is_ok()) {
    lock.lock();
    --live_;
    cv_.notify_one();
    return inst.status();
  }
  return std::shared_ptr<hal::ExecutableInstance>(std::move(inst).value());
}

void InstancePool::release(std::shared_ptr<hal::ExecutableInstance> inst, bool reusable) {
  {
    std::lock_guard lock(mu_);
    if (reusable) {
      free_.push_back(std::move(inst));
    } else {
      --live_;
    }
  }
  cv_.notify_one();
}

uint32_t InstancePool::available() const {
  std::lock_guard lock(mu_);
  return capacity_ - live_ + static_cast<uint32_t>(free_.size());
}

uint64_t Engine::next_request_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

Result<std::shared_ptr<Engine>> Engine::create(std::shared_ptr<Runtime> runtime,
                                               std::shared_ptr<const Model> model,
                                               SessionOptions options) {
  if (!runtime || !model)
    return make_error(StatusCode::kInvalidArgument, "a session needs a runtime and a model");
  if (options.max_in_flight == 0 || options.max_outstanding == 0)
    return make_error(StatusCode::kInvalidArgument, "max_in_flight and max_outstanding must be > 0");
  const auto& steps = *model->image().model().steps();
  for (uint32_t s = 0; s < steps.size(); ++s) {
    const auto* host = steps.Get(s)->segment_as_HostSegment();
    if (!host) continue;
    const std::string op = host->op_type()->str();
    if (!find_host_kernel(op))
      return make_error(StatusCode::kUnsupported,
                        model->origin() + ": step " + std::to_string(s) + " runs operator '" + op +
                            "' (node '" + (host->node_name() ? host->node_name()->str() : "?") +
                            "') on the host, and no host kernel exists for it yet");
  }
  auto engine = std::shared_ptr<Engine>(new Engine());
  engine->runtime_ = runtime;
  engine->model_ = model;
  engine->options_ = options;
  for (uint32_t d = 0; d < runtime->device_count(); ++d) {
    NPU_ASSIGN_OR_RETURN(auto exe, hal::Executable::load(runtime->device(d), model->shared_image()));
    Backend b;
    b.index = d;
    b.pool = std::make_unique<InstancePool>(exe, options.max_in_flight);
    b.exe = std::move(exe);
    engine->backends_.push_back(std::move(b));
  }
  return engine;
}

Result<scheduler::JobHandle> Engine::start(std::span<const Tensor> inputs, uint64_t request_id,
                                           Deadline deadline, DoneFn done) {
  const Clock::time_point t0 = Clock::now();
  const auto& infos = model_->inputs();
  if (inputs.size() != infos.size()) {
    std::string want;
    for (const auto& i : infos)
      want += (want.empty() ? "" : ", ") + i.name + " " + std::string(dtype_name(i.dtype)) +
              shape_to_string(i.shape);
    return make_error(StatusCode::kInvalidArgument,
                      model_->origin() + " takes " + std::to_string(infos.size()) +
                          " input(s) (" + want + "), got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) NPU_RETURN_IF_ERROR(check_input(inputs[i], infos[i], i));

  // The device with the most free activation buffers; ties rotate.
  size_t pick = round_robin_.fetch_add(1) % backends_.size();
  for (size_t k = 0; k < backends_.size(); ++k) {
    const size_t b = (pick + k) % backends_.size();
    if (backends_[b].pool->available() > backends_[pick].pool->available()) pick = b;
  }
  Backend& backend = backends_[pick];
  NPU_ASSIGN_OR_RETURN(std::shared_ptr<hal::ExecutableInstance> inst,
                       backend.pool->acquire(deadline));

  const Clock::time_point t_copy = Clock::now();
  hal::Buffer& act = inst->activations();
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status st = quantize_into(inputs[i], infos[i], act.host());
    if (st.is_ok()) {
      const auto [b, e] = view_extent(infos[i]);
      st = act.sync_to_device(b, e - b);
    }
    if (!st.is_ok()) {
      backend.pool->release(std::move(inst), true);
      return st;
    }
  }
  const Clock::time_point t_copied = Clock::now();

  scheduler::JobSpec spec;
  spec.instance = inst;
  spec.priority = options_.priority;
  spec.request_id = request_id;
  if (model_->host_steps() > 0) {
    spec.host_step = [image = model_->shared_image(), raw = inst.get()](size_t step) -> Status {
      const auto* host = image->model().steps()->Get(static_cast<uint32_t>(step))->segment_as_HostSegment();
      HostKernel kernel = find_host_kernel(host->op_type()->str());
      if (!kernel)
        return make_error(StatusCode::kUnsupported,
                          "no host kernel for operator '" + host->op_type()->str() + "'");
      return kernel(HostStepContext{*image, *host, step, raw->activations()});
    };
  }
  const double copy_in_us = us_between(t_copy, t_copied);
  const uint32_t device_index = backend.index;
  spec.on_complete = [self = shared_from_this(), pool = backend.pool.get(), inst, device_index,
                      request_id, t0, copy_in_us,
                      done = std::move(done)](scheduler::JobOutcome&& o) mutable {
    Runtime& rt = *self->runtime_;
    const Clock::time_point t_out = Clock::now();
    Result<Outputs> result = o.status;
    if (o.status.is_ok()) {
      Outputs out;
      hal::Buffer& a = inst->activations();
      Status st;
      for (const TensorInfo& info : self->model_->outputs()) {
        const auto [b, e] = view_extent(info);
        st = a.sync_from_device(b, e - b);
        if (!st.is_ok()) break;
        Result<Tensor> t = dequantize_from(info, a.host());
        if (!t.is_ok()) {
          st = t.status();
          break;
        }
        out.tensors.push_back(std::move(t).value());
      }
      const Clock::time_point t_done = Clock::now();
      out.stats.request_id = request_id;
      out.stats.device_index = device_index;
      out.stats.device_cycles = o.device_cycles;
      out.stats.queue_us = us_between(o.queued, o.started);
      out.stats.device_us = us_between(o.started, o.finished);
      out.stats.copy_in_us = copy_in_us;
      out.stats.copy_out_us = us_between(t_out, t_done);
      out.stats.total_us = us_between(t0, t_done);
      out.stats.retried = o.retried;
      result = st.is_ok() ? Result<Outputs>(std::move(out)) : Result<Outputs>(st);
    }
    if (rt.profiling()) {
      auto at = [&](Clock::time_point t) { return us_since(rt, t); };
      const auto dur = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
      };
      rt.record({"copy-in", request_id, device_index, at(t0), static_cast<int64_t>(copy_in_us), 0});
      rt.record({"queue", request_id, device_index, at(o.queued), dur(o.queued, o.started), 0});
      rt.record({"device", request_id, device_index, at(o.started), dur(o.started, o.finished),
                 o.device_cycles});
      rt.record({"copy-out", request_id, device_index, at(t_out), dur(t_out, Clock::now()), 0});
    }
    pool->release(std::move(inst), o.instance_reusable);
    done(std::move(result));
  };
  scheduler::Scheduler& sched = runtime_->scheduler(device_index);
  Result<scheduler::JobHandle> handle = sched.submit(std::move(spec), deadline);
  if (!handle.is_ok()) {
    // Not accepted: on_complete (and with it `done`) will never run.
    backend.pool->release(std::move(inst), true);
    return handle.status();
  }
  return handle;
}

}  // namespace npu::runtime::internal
