#include "engine.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "npu/runtime/host_ops.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/runtime/quantize.h"

namespace npu::runtime::internal {
namespace {

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

bool is_one_of(uint32_t v, const std::vector<uint32_t>& values) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

int64_t us_since(const Runtime& rt, Clock::time_point t) {
  return rt.now_us() - std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
}


// The host values of one request (images with value maps). A value is either computed by the
// request (owned) or read in place (borrowed): the model's constants, and the caller's inputs
// while a blocking run() holds them; no copy of either per request.
struct ValueEnv {
  std::vector<std::optional<Tensor>> owned;
  std::vector<const Tensor*> borrowed;

  // Lane-side time, measured in the step hooks (written by the lane, read after the job
  // completes): quantising the model's inputs before the NPU steps that read them and
  // dequantising its outputs after the steps that write them are the request's copy-in and
  // copy-out (RunStats); host operators and the conversions of values between steps are its
  // host steps.
  double inputs_us = 0, outputs_us = 0, host_us = 0;
  double& bucket(const Model& model, uint32_t v) {
    if (is_one_of(v, model.input_values())) return inputs_us;
    if (is_one_of(v, model.output_values())) return outputs_us;
    return host_us;
  }

  explicit ValueEnv(size_t n) : owned(n), borrowed(n, nullptr) {}
  const Tensor* get(uint32_t v) const { return owned[v] ? &*owned[v] : borrowed[v]; }
  void set(uint32_t v, Tensor t) {
    owned[v] = std::move(t);
    borrowed[v] = nullptr;
  }
  // The value as an output: moved out when owned, else copied.
  Tensor take(uint32_t v) {
    if (owned[v]) return std::move(*owned[v]);
    return *borrowed[v];
  }
};

std::string value_name(const Model& model, uint32_t v) {
  return v < model.values().size() ? "'" + model.values()[v].name + "'" : std::to_string(v);
}

// Quantises the values an NPU segment reads, dequantises the values it writes, and runs host
// operators, all on the scheduler's lane thread.
scheduler::StepHook make_step_hook(std::shared_ptr<const Model> model, std::shared_ptr<ValueEnv> env,
                                   hal::ExecutableInstance* inst) {
  return [model = std::move(model), env = std::move(env), inst](
             size_t step, scheduler::StepPhase phase) -> Status {
    const image::Step* st = model->image().model().steps()->Get(static_cast<uint32_t>(step));
    hal::Buffer& act = inst->activations();
    if (phase == scheduler::StepPhase::kHost) {
      struct Timed {  // the whole host step, whichever way it returns
        double& to;
        Clock::time_point t0 = Clock::now();
        ~Timed() { to += us_between(t0, Clock::now()); }
      } timed{env->host_us};
      const image::HostSegment* host = st->segment_as_HostSegment();
      // Named only in errors: built on failure, not per step.
      auto what = [host] {
        return "host operator " + host->op_type()->str() + " (node '" +
               (host->node_name() ? host->node_name()->str() : "?") + "')";
      };
      HostKernel kernel = find_host_kernel(host->op_type()->str());
      if (!kernel) return make_error(StatusCode::kUnsupported, what() + " has no host kernel");
      std::vector<Tensor> outputs;
      HostOpContext ctx{model->image(), *host, step, {}, &outputs};
      for (uint32_t v : *host->inputs()) {
        if (v == UINT32_MAX) {
          ctx.inputs.push_back(nullptr);
          continue;
        }
        const Tensor* value = env->get(v);
        if (!value)
          return make_error(StatusCode::kInternal,
                            what() + " reads value " + value_name(*model, v) + " before it is computed");
        ctx.inputs.push_back(value);
      }
      for (uint32_t v : *host->outputs())
        outputs.push_back(Tensor::zeros(model->values()[v].dtype, model->values()[v].shape));
      Status s = kernel(ctx);
      if (!s.is_ok()) return Status(s.code(), what() + ": " + s.message());
      if (outputs.size() != host->outputs()->size())
        return make_error(StatusCode::kInternal, what() + " returned the wrong number of outputs");
      for (uint32_t k = 0; k < host->outputs()->size(); ++k)
        env->set(host->outputs()->Get(k), std::move(outputs[k]));
      return Status::ok();
    }
    const image::NpuSegment* npu = st->segment_as_NpuSegment();
    if (phase == scheduler::StepPhase::kBeforeDevice) {
      if (!npu->inputs()) return Status::ok();
      for (uint32_t v : *npu->inputs()) {
        const TensorInfo& info = model->values()[v];
        const Tensor* value = env->get(v);
        if (!value)
          return make_error(StatusCode::kInternal, "NPU step " + std::to_string(step) +
                                                       " reads value " + value_name(*model, v) +
                                                       " before it is computed");
        // quantize_into checks the value against its view (shape, dtype, size).
        const Clock::time_point t = Clock::now();
        Status s = quantize_into(*value, info, act.host());
        if (s.is_ok()) {
          const auto [b, e] = view_extent(info);
          s = act.sync_to_device(b, e - b);
        }
        env->bucket(*model, v) += us_between(t, Clock::now());
        if (!s.is_ok())
          return Status(s.code(), "before NPU step " + std::to_string(step) + ": " + s.message());
      }
      return Status::ok();
    }
    if (!npu->outputs()) return Status::ok();
    for (uint32_t v : *npu->outputs()) {
      const TensorInfo& info = model->values()[v];
      const auto [b, e] = view_extent(info);
      const Clock::time_point t0 = Clock::now();
      NPU_RETURN_IF_ERROR(act.sync_from_device(b, e - b));
      NPU_ASSIGN_OR_RETURN(Tensor t, dequantize_from(info, act.host()));
      env->set(v, std::move(t));
      env->bucket(*model, v) += us_between(t0, Clock::now());
    }
    return Status::ok();
  };
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
  if (model->mapped()) {
    // A segment that reads no host value needs no quantisation before it, one that writes
    // none no dequantisation after it.
    auto mask = std::make_shared<std::vector<uint8_t>>(steps.size(), 0);
    for (uint32_t s = 0; s < steps.size(); ++s) {
      const auto* npu = steps.Get(s)->segment_as_NpuSegment();
      if (!npu) continue;
      if (npu->inputs() && npu->inputs()->size() > 0) (*mask)[s] |= scheduler::kHookBefore;
      if (npu->outputs() && npu->outputs()->size() > 0) (*mask)[s] |= scheduler::kHookAfter;
    }
    engine->hook_mask_ = std::move(mask);
  }
  engine->runtime_ = runtime;
  engine->model_ = model;
  engine->options_ = options;
  for (uint32_t d = 0; d < runtime->device_count(); ++d) {
    NPU_ASSIGN_OR_RETURN(auto exe, load_executable(runtime->device(d), model->shared_image()));
    Backend b;
    b.index = d;
    b.pool = std::make_unique<InstancePool>(exe, options.max_in_flight);
    b.exe = std::move(exe);
    engine->backends_.push_back(std::move(b));
  }
  return engine;
}

struct Engine::Request {
  Backend* backend = nullptr;
  std::shared_ptr<hal::ExecutableInstance> inst;
  std::shared_ptr<ValueEnv> env;
  uint64_t request_id = 0;
  Clock::time_point t0;
  double copy_in_us = 0;
  scheduler::JobSpec spec;  // without on_complete
};

Result<Engine::Request> Engine::prepare(std::span<const Tensor> inputs,
                                        std::vector<Tensor>* owned_inputs, uint64_t request_id,
                                        Deadline deadline) {
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
  for (const auto& [i, value] : model_->specialized_inputs())
    if (inputs[i].data != value.data) {
      const Tensor want = to_float(value);
      std::string text;
      for (float v : want.as<float>()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
        text += (text.empty() ? "" : ", ") + std::string(buf);
      }
      return make_error(StatusCode::kInvalidArgument,
                        "input " + std::to_string(i) + " ('" + infos[i].name + "') must be [" + text +
                            "]: the model was compiled for that value of this input (a shape operand or a "
                            "quantisation parameter); recompile it with npu-compile and calibration samples "
                            "holding the new value");
    }

  // The device with the most free activation buffers; ties rotate.
  size_t pick = backends_.size() == 1 ? 0 : round_robin_.fetch_add(1) % backends_.size();
  for (size_t k = 1; k < backends_.size(); ++k) {
    const size_t b = (pick + k) % backends_.size();
    if (backends_[b].pool->available() > backends_[pick].pool->available()) pick = b;
  }
  Backend& backend = backends_[pick];
  NPU_ASSIGN_OR_RETURN(std::shared_ptr<hal::ExecutableInstance> inst,
                       backend.pool->acquire(deadline));

  const Clock::time_point t_copy = Clock::now();
  hal::Buffer& act = inst->activations();
  std::shared_ptr<ValueEnv> env;
  if (model_->mapped()) {
    // Values move through a per-request environment; segments quantise what they read.
    env = std::make_shared<ValueEnv>(model_->values().size());
    // The model outlives the request (the hook holds it); the inputs are the caller's while
    // run() blocks, and moved in for an asynchronous request.
    for (const auto& [v, t] : model_->constants()) env->borrowed[v] = &t;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const uint32_t v = model_->input_values()[i];
      if (owned_inputs) {
        env->set(v, std::move((*owned_inputs)[i]));
      } else {
        env->borrowed[v] = &inputs[i];
      }
    }
  } else {
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
  }
  Request r;
  r.backend = &backend;
  r.request_id = request_id;
  r.t0 = t0;
  r.copy_in_us = us_between(t_copy, Clock::now());
  r.spec.instance = inst;
  r.spec.priority = options_.priority;
  r.spec.request_id = request_id;
  if (env) {
    r.spec.step_hook = make_step_hook(model_, env, inst.get());
    r.spec.hook_mask = hook_mask_;
  }
  r.inst = std::move(inst);
  r.env = std::move(env);
  return r;
}

// Dequantises the outputs, fills the stats and the trace, and returns the instance.
Result<Outputs> Engine::finish(Request& req, scheduler::JobOutcome&& o) {
  Runtime& rt = *runtime_;
  const Clock::time_point t_out = Clock::now();
  const uint32_t device_index = req.backend->index;
  Result<Outputs> result = o.status;
  if (o.status.is_ok()) {
    Outputs out;
    out.tensors.reserve(model_->outputs().size());
    hal::Buffer& a = req.inst->activations();
    Status st;
    if (req.env) {
      for (size_t k = 0; k < model_->outputs().size() && st.is_ok(); ++k) {
        const uint32_t v = model_->output_values()[k];
        if (!req.env->get(v)) {
          st = make_error(StatusCode::kInternal,
                          "output '" + model_->outputs()[k].name + "' was never computed");
        } else {
          out.tensors.push_back(req.env->take(v));
        }
      }
    } else {
      for (const TensorInfo& info : model_->outputs()) {
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
    }
    const Clock::time_point t_done = Clock::now();
    out.stats.request_id = req.request_id;
    out.stats.device_index = device_index;
    out.stats.device_cycles = o.device_cycles;
    out.stats.device_waits = o.device_waits;
    // With value maps the lane quantises the model's inputs and dequantises its outputs inside
    // the step hooks: that is copy-in and copy-out, not host steps or device time.
    const double lane_in = req.env ? req.env->inputs_us : 0, lane_out = req.env ? req.env->outputs_us : 0;
    out.stats.host_steps_us = req.env ? req.env->host_us : o.host_us;
    out.stats.queue_us = us_between(o.queued, o.started);
    out.stats.device_us = std::max(0.0, us_between(o.started, o.finished) - lane_in - lane_out);
    out.stats.copy_in_us = req.copy_in_us + lane_in;
    out.stats.copy_out_us = us_between(t_out, t_done) + lane_out;
    out.stats.total_us = us_between(req.t0, t_done);
    out.stats.retried = o.retried;
    result = st.is_ok() ? Result<Outputs>(std::move(out)) : Result<Outputs>(st);
  }
  if (rt.profiling()) {
    auto at = [&](Clock::time_point t) { return us_since(rt, t); };
    const auto dur = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
    };
    const uint64_t id = req.request_id;
    rt.record({"copy-in", id, device_index, at(req.t0), static_cast<int64_t>(req.copy_in_us), 0});
    rt.record({"queue", id, device_index, at(o.queued), dur(o.queued, o.started), 0});
    rt.record({"device", id, device_index, at(o.started), dur(o.started, o.finished),
               o.device_cycles});
    rt.record({"copy-out", id, device_index, at(t_out), dur(t_out, Clock::now()), 0});
  }
  req.env.reset();
  req.backend->pool->release(std::move(req.inst), o.instance_reusable);
  return result;
}

Result<scheduler::JobHandle> Engine::start(std::vector<Tensor> inputs, uint64_t request_id,
                                           Deadline deadline, DoneFn done, bool done_on_lane) {
  NPU_ASSIGN_OR_RETURN(Request req, prepare(inputs, &inputs, request_id, deadline));
  scheduler::JobSpec spec = std::move(req.spec);
  spec.complete_on_lane = done_on_lane;
  InstancePool* pool = req.backend->pool.get();
  std::shared_ptr<hal::ExecutableInstance> inst = req.inst;
  const uint32_t device_index = req.backend->index;
  spec.on_complete = [self = shared_from_this(), req = std::move(req),
                      done = std::move(done)](scheduler::JobOutcome&& o) mutable {
    Result<Outputs> result = self->finish(req, std::move(o));
    // Drop our references before the caller can observe the result, so that the caller,
    // not this completion thread or lane, releases the session and runtime last.
    DoneFn deliver = std::move(done);
    self.reset();
    deliver(std::move(result));
  };
  scheduler::Scheduler& sched = runtime_->scheduler(device_index);
  Result<scheduler::JobHandle> handle = sched.submit(std::move(spec), deadline);
  if (!handle.is_ok()) {
    // Not accepted: on_complete (and with it `done`) will never run.
    pool->release(std::move(inst), true);
    return handle.status();
  }
  return handle;
}

Result<Outputs> Engine::run(std::span<const Tensor> inputs, uint64_t request_id,
                            Deadline deadline) {
  NPU_ASSIGN_OR_RETURN(Request req, prepare(inputs, nullptr, request_id, deadline));
  scheduler::Scheduler& sched = runtime_->scheduler(req.backend->index);
  Result<scheduler::JobOutcome> outcome = sched.run(std::move(req.spec), deadline);
  if (!outcome.is_ok()) {
    req.env.reset();
    req.backend->pool->release(std::move(req.inst), true);  // not accepted: never ran
    return outcome.status();
  }
  return finish(req, std::move(outcome).value());
}

}  // namespace npu::runtime::internal
