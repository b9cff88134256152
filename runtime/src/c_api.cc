// The C API over the C++ runtime. Exceptions never cross it (std::bad_alloc becomes
// NPU_RESOURCE_EXHAUSTED).
#include "npu/runtime/c_api.h"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <string>

#include "npu/compiler/image.h"
#include "npu/hal/c_error.h"
#include "npu/runtime/api.h"

struct npu_runtime {
  std::shared_ptr<npu::runtime::Runtime> rt;
};
struct npu_model {
  std::shared_ptr<const npu::runtime::Model> model;
  std::string summary_text, summary_json;
};
struct npu_tensor {
  npu::Tensor tensor;
};
struct npu_session {
  std::unique_ptr<npu::runtime::Session> session;
  // npu_session_run_async callbacks not yet returned: destroy waits for them (the C++
  // Session does not; its in-flight requests outlive it).
  struct Callbacks {
    std::mutex mu;
    std::condition_variable cv;
    size_t pending = 0;
  };
  std::shared_ptr<Callbacks> callbacks = std::make_shared<Callbacks>();
};
struct npu_async_session {
  std::unique_ptr<npu::runtime::AsyncSession> session;
};
struct npu_completion_queue {
  std::unique_ptr<npu::runtime::CompletionQueue> queue;
};
struct npu_completion {
  npu::runtime::Completion completion;
  std::vector<bool> taken;
};

namespace {

using npu::c_api::fail;
using npu::c_api::guarded;

// Writes `full` into the caller's struct `out`, whose leading struct_size says how many bytes
// it has room for (an older caller's struct is shorter); struct_size itself is kept.
template <typename T>
npu_status_t write_sized(const T& full, T* out, const char* what) {
  if (!out) return fail(npu::StatusCode::kInvalidArgument, std::string(what) + " is NULL");
  const size_t size = out->struct_size;
  if (size < sizeof(size_t))
    return fail(npu::StatusCode::kInvalidArgument,
                std::string(what) + "->struct_size is not set (use sizeof)");
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&full) + sizeof(size_t),
              std::min(size, sizeof(T)) - sizeof(size_t));
  return NPU_OK;
}

npu_status_t write_stats(const npu::runtime::RunStats& s, npu_run_stats_t* out) {
  npu_run_stats_t full{};
  full.request_id = s.request_id;
  full.device_index = s.device_index;
  full.retried = s.retried ? 1 : 0;
  full.device_cycles = s.device_cycles;
  full.queue_us = s.queue_us;
  full.device_us = s.device_us;
  full.copy_in_us = s.copy_in_us;
  full.copy_out_us = s.copy_out_us;
  full.total_us = s.total_us;
  return write_sized(full, out, "out_stats");
}

npu_quant_info_t quant_view(const npu::runtime::QuantInfo& q) {
  npu_quant_info_t v{};
  v.axis = q.axis;
  v.count = std::min(q.scale.size(), q.zero_point.size());
  v.scale = q.scale.data();
  v.zero_point = q.zero_point.data();
  return v;
}

npu_status_t tensor_desc(const std::vector<npu::runtime::TensorInfo>& infos, size_t index,
                         npu_tensor_desc_t* out) {
  if (index >= infos.size())
    return fail(
        npu::StatusCode::kInvalidArgument,
        "index " + std::to_string(index) + " out of range (" + std::to_string(infos.size()) + ")");
  const auto& t = infos[index];
  npu_tensor_desc_t full{};
  full.name = t.name.c_str();
  full.dtype = static_cast<npu_dtype_t>(t.dtype);
  full.rank = t.shape.size();
  full.shape = t.shape.data();
  full.layout = t.layout.c_str();
  full.quantized = t.quant ? 1 : 0;
  if (t.quant) full.quant = quant_view(*t.quant);
  full.on_device = t.on_device ? 1 : 0;
  full.device_dtype = static_cast<npu_dtype_t>(t.device_dtype);
  if (t.on_device) full.device_quant = quant_view(t.device_quant);
  return write_sized(full, out, "out_desc");
}

npu_model_t* new_model(std::shared_ptr<const npu::runtime::Model> m) {
  auto* model = new npu_model{std::move(m), "", ""};
  model->summary_text = model->model->summary();
  model->summary_json = model->model->summary_json();
  return model;
}

npu_completion_t* new_completion(npu::runtime::Completion c) {
  auto* out = new npu_completion{std::move(c), {}};
  out->taken.assign(out->completion.outputs.size(), false);
  return out;
}

npu::hal::Deadline deadline_from_us(int64_t timeout_us) {
  if (timeout_us < 0) return npu::hal::kInfiniteDeadline;
  if (timeout_us == 0) return npu::hal::Clock::time_point::min();
  return npu::hal::Clock::now() + std::chrono::microseconds(timeout_us);
}

npu_status_t gather_inputs(const npu_tensor_t* const* inputs, size_t n,
                           std::vector<npu::Tensor>* out) {
  if (n && !inputs) return fail(npu::StatusCode::kInvalidArgument, "inputs is NULL");
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i])
      return fail(npu::StatusCode::kInvalidArgument, "input " + std::to_string(i) + " is NULL");
    out->push_back(inputs[i]->tensor);
  }
  return NPU_OK;
}

npu_status_t tensor_info(const std::vector<npu::runtime::TensorInfo>& infos, size_t index,
                         const char** out_name, npu_dtype_t* out_dtype, int64_t* out_shape,
                         size_t cap, size_t* out_rank) {
  if (index >= infos.size())
    return fail(
        npu::StatusCode::kInvalidArgument,
        "index " + std::to_string(index) + " out of range (" + std::to_string(infos.size()) + ")");
  const auto& t = infos[index];
  if (out_name) *out_name = t.name.c_str();
  if (out_dtype) *out_dtype = static_cast<npu_dtype_t>(t.dtype);
  if (out_shape)
    for (size_t i = 0; i < t.shape.size() && i < cap; ++i) out_shape[i] = t.shape[i];
  if (out_rank) *out_rank = t.shape.size();
  return NPU_OK;
}

}  // namespace

extern "C" {

npu_status_t npu_runtime_open(const char* device_spec, npu_runtime_t** out_runtime) {
  if (!out_runtime) return fail(npu::StatusCode::kInvalidArgument, "out_runtime is NULL");
  *out_runtime = nullptr;
  return guarded([&]() -> npu_status_t {
    npu::runtime::RuntimeOptions opts;
    opts.device = device_spec ? device_spec : "";
    auto rt = npu::runtime::Runtime::open(opts);
    if (!rt.is_ok()) return fail(rt.status());
    *out_runtime = new npu_runtime{std::move(rt).value()};
    return NPU_OK;
  });
}

void npu_runtime_destroy(npu_runtime_t* runtime) { delete runtime; }

size_t npu_runtime_device_count(const npu_runtime_t* runtime) {
  return runtime ? runtime->rt->device_count() : 0;
}

npu_status_t npu_runtime_device_info(const npu_runtime_t* runtime, size_t index,
                                     npu_device_info_t* out_info) {
  if (!runtime) return fail(npu::StatusCode::kInvalidArgument, "runtime is NULL");
  if (index >= runtime->rt->device_count())
    return fail(npu::StatusCode::kInvalidArgument,
                "device " + std::to_string(index) + " out of range (" +
                    std::to_string(runtime->rt->device_count()) + ")");
  const npu::hal::DeviceInfo& d = runtime->rt->device(index)->info();
  npu_device_info_t full{};
  full.spec = d.spec.c_str();
  full.platform = d.platform.c_str();
  full.array_dim = d.array_dim;
  full.clock_mhz = d.clock_mhz;
  full.fingerprint = d.fingerprint;
  return write_sized(full, out_info, "out_info");
}

npu_status_t npu_runtime_start_profiling(npu_runtime_t* runtime) {
  if (!runtime) return fail(npu::StatusCode::kInvalidArgument, "runtime is NULL");
  return guarded([&]() -> npu_status_t {
    runtime->rt->start_profiling();
    return NPU_OK;
  });
}

int64_t npu_runtime_clock_us(const npu_runtime_t* runtime) {
  return runtime ? runtime->rt->now_us() : 0;
}

npu_status_t npu_runtime_end_profiling(npu_runtime_t* runtime, const char* path, char** out_json) {
  if (out_json) *out_json = nullptr;
  if (!runtime) return fail(npu::StatusCode::kInvalidArgument, "runtime is NULL");
  return guarded([&]() -> npu_status_t {
    const std::string json = runtime->rt->end_profiling();
    if (path) {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f << json;
      if (!f.flush())
        return fail(npu::StatusCode::kInvalidArgument, std::string("cannot write the profile to ") +
                                                           path + ": " + std::strerror(errno));
    }
    if (out_json) {
      char* copy = static_cast<char*>(std::malloc(json.size() + 1));
      if (!copy) return fail(npu::StatusCode::kResourceExhausted, "out of host memory");
      std::memcpy(copy, json.c_str(), json.size() + 1);
      *out_json = copy;
    }
    return NPU_OK;
  });
}

npu_status_t npu_model_load(const char* path, npu_model_t** out_model) {
  if (!path || !out_model)
    return fail(npu::StatusCode::kInvalidArgument, "path or out_model is NULL");
  *out_model = nullptr;
  return guarded([&]() -> npu_status_t {
    auto m = npu::runtime::Model::load_file(path);
    if (!m.is_ok()) return fail(m.status());
    *out_model = new_model(std::move(m).value());
    return NPU_OK;
  });
}

npu_status_t npu_model_load_bytes(const void* data, size_t size, const char* origin,
                                  npu_model_t** out_model) {
  if (!out_model) return fail(npu::StatusCode::kInvalidArgument, "out_model is NULL");
  *out_model = nullptr;
  if (!data && size) return fail(npu::StatusCode::kInvalidArgument, "data is NULL");
  return guarded([&]() -> npu_status_t {
    const auto* p = static_cast<const uint8_t*>(data);
    auto m = npu::runtime::Model::from_bytes(std::vector<uint8_t>(p, p + size),
                                             origin ? origin : "<memory>");
    if (!m.is_ok()) return fail(m.status());
    *out_model = new_model(std::move(m).value());
    return NPU_OK;
  });
}

int npu_model_bytes_are_image(const void* data, size_t size) {
  if (!data) return 0;
  return npu::compiler::looks_like_image({static_cast<const uint8_t*>(data), size}) ? 1 : 0;
}

void npu_model_destroy(npu_model_t* model) { delete model; }
size_t npu_model_input_count(const npu_model_t* m) { return m ? m->model->inputs().size() : 0; }
size_t npu_model_output_count(const npu_model_t* m) { return m ? m->model->outputs().size() : 0; }

npu_status_t npu_model_input_info(const npu_model_t* m, size_t index, const char** out_name,
                                  npu_dtype_t* out_dtype, int64_t* out_shape, size_t cap,
                                  size_t* out_rank) {
  if (!m) return fail(npu::StatusCode::kInvalidArgument, "model is NULL");
  return tensor_info(m->model->inputs(), index, out_name, out_dtype, out_shape, cap, out_rank);
}

npu_status_t npu_model_output_info(const npu_model_t* m, size_t index, const char** out_name,
                                   npu_dtype_t* out_dtype, int64_t* out_shape, size_t cap,
                                   size_t* out_rank) {
  if (!m) return fail(npu::StatusCode::kInvalidArgument, "model is NULL");
  return tensor_info(m->model->outputs(), index, out_name, out_dtype, out_shape, cap, out_rank);
}

npu_status_t npu_model_input_desc(const npu_model_t* m, size_t index, npu_tensor_desc_t* out) {
  if (!m) return fail(npu::StatusCode::kInvalidArgument, "model is NULL");
  return tensor_desc(m->model->inputs(), index, out);
}

npu_status_t npu_model_output_desc(const npu_model_t* m, size_t index, npu_tensor_desc_t* out) {
  if (!m) return fail(npu::StatusCode::kInvalidArgument, "model is NULL");
  return tensor_desc(m->model->outputs(), index, out);
}

const char* npu_model_summary(const npu_model_t* m, int json) {
  if (!m) return "";
  return json ? m->summary_json.c_str() : m->summary_text.c_str();
}

npu_status_t npu_tensor_create(npu_dtype_t dtype, const int64_t* shape, size_t rank,
                               const void* data, size_t data_bytes, npu_tensor_t** out_tensor) {
  if (!out_tensor) return fail(npu::StatusCode::kInvalidArgument, "out_tensor is NULL");
  *out_tensor = nullptr;
  if (rank && !shape) return fail(npu::StatusCode::kInvalidArgument, "shape is NULL");
  if (static_cast<int>(dtype) < 0 || static_cast<int>(dtype) > 4)
    return fail(npu::StatusCode::kInvalidArgument, "unknown dtype");
  return guarded([&]() -> npu_status_t {
    std::vector<int64_t> dims(shape, shape + rank);
    for (int64_t d : dims)
      if (d < 0 || d > (int64_t{1} << 32))
        return fail(npu::StatusCode::kInvalidArgument, "bad dimension " + std::to_string(d));
    npu::Tensor t = npu::Tensor::zeros(static_cast<npu::DType>(dtype), dims);
    if (data) {
      if (data_bytes != t.data.size())
        return fail(npu::StatusCode::kInvalidArgument, "data holds " + std::to_string(data_bytes) +
                                                           " bytes, the shape needs " +
                                                           std::to_string(t.data.size()));
      std::memcpy(t.data.data(), data, data_bytes);
    }
    *out_tensor = new npu_tensor{std::move(t)};
    return NPU_OK;
  });
}

void npu_tensor_destroy(npu_tensor_t* t) { delete t; }
npu_dtype_t npu_tensor_dtype(const npu_tensor_t* t) {
  return t ? static_cast<npu_dtype_t>(t->tensor.dtype) : NPU_DTYPE_FLOAT32;
}
size_t npu_tensor_rank(const npu_tensor_t* t) { return t ? t->tensor.shape.size() : 0; }
int64_t npu_tensor_dim(const npu_tensor_t* t, size_t axis) {
  return t && axis < t->tensor.shape.size() ? t->tensor.shape[axis] : 0;
}
const void* npu_tensor_data(const npu_tensor_t* t) { return t ? t->tensor.data.data() : nullptr; }
void* npu_tensor_mutable_data(npu_tensor_t* t) { return t ? t->tensor.data.data() : nullptr; }
size_t npu_tensor_byte_size(const npu_tensor_t* t) { return t ? t->tensor.data.size() : 0; }

npu_status_t npu_session_create(npu_runtime_t* runtime, const npu_model_t* model,
                                npu_session_t** out_session) {
  if (!runtime || !model || !out_session)
    return fail(npu::StatusCode::kInvalidArgument, "runtime, model or out_session is NULL");
  *out_session = nullptr;
  return guarded([&]() -> npu_status_t {
    auto s = npu::runtime::Session::create(runtime->rt, model->model);
    if (!s.is_ok()) return fail(s.status());
    *out_session = new npu_session{std::move(s).value()};
    return NPU_OK;
  });
}

void npu_session_destroy(npu_session_t* session) {
  if (!session) return;
  {
    std::unique_lock lock(session->callbacks->mu);
    session->callbacks->cv.wait(lock, [&] { return session->callbacks->pending == 0; });
  }
  delete session;
}

npu_status_t npu_session_run(npu_session_t* session, const npu_tensor_t* const* inputs,
                             size_t input_count, npu_tensor_t** out_outputs, size_t output_count) {
  return npu_session_run_with_stats(session, inputs, input_count, out_outputs, output_count,
                                    nullptr);
}

npu_status_t npu_session_run_with_stats(npu_session_t* session, const npu_tensor_t* const* inputs,
                                        size_t input_count, npu_tensor_t** out_outputs,
                                        size_t output_count, npu_run_stats_t* out_stats) {
  if (!session || (output_count && !out_outputs))
    return fail(npu::StatusCode::kInvalidArgument, "session or out_outputs is NULL");
  return guarded([&]() -> npu_status_t {
    const size_t want = session->session->model().outputs().size();
    if (output_count != want)
      return fail(npu::StatusCode::kInvalidArgument,
                  "output_count is " + std::to_string(output_count) + ", the model has " +
                      std::to_string(want) + " outputs");
    std::vector<npu::Tensor> in;
    if (npu_status_t st = gather_inputs(inputs, input_count, &in)) return st;
    auto r = session->session->run(in);
    if (!r.is_ok()) return fail(r.status());
    for (size_t i = 0; i < want; ++i) out_outputs[i] = new npu_tensor{std::move(r->tensors[i])};
    return out_stats ? write_stats(r->stats, out_stats) : NPU_OK;
  });
}

npu_status_t npu_session_run_async(npu_session_t* session, const npu_tensor_t* const* inputs,
                                   size_t input_count, npu_completion_callback_t callback,
                                   void* user_context) {
  if (!session || !callback)
    return fail(npu::StatusCode::kInvalidArgument, "session or callback is NULL");
  return guarded([&]() -> npu_status_t {
    std::vector<npu::Tensor> in;
    if (npu_status_t st = gather_inputs(inputs, input_count, &in)) return st;
    std::shared_ptr<npu_session::Callbacks> callbacks = session->callbacks;
    auto done = [callbacks] {
      std::lock_guard lock(callbacks->mu);
      --callbacks->pending;
      callbacks->cv.notify_all();
    };
    {
      std::lock_guard lock(callbacks->mu);
      ++callbacks->pending;
    }
    npu::Status st;
    try {
      st = session->session->run_async(
          std::move(in), [callback, user_context, done](npu::Result<npu::runtime::Outputs> r) {
            npu::runtime::Completion c;
            c.user_context = user_context;
            if (r.is_ok()) {
              c.request_id = r->stats.request_id;
              c.stats = r->stats;
              c.outputs = std::move(r->tensors);
            } else {
              c.status = r.status();
            }
            // Without memory for the completion the callback still runs, with NULL: a binding
            // that counts on exactly one call must get it.
            npu_completion_t* out = nullptr;
            try {
              out = new_completion(std::move(c));
            } catch (const std::bad_alloc&) {
            }
            callback(user_context, out);
            done();
          });
    } catch (...) {
      done();
      throw;
    }
    if (st.is_ok()) return NPU_OK;
    done();
    return fail(st);
  });
}

npu_status_t npu_async_session_create(npu_runtime_t* runtime, const npu_model_t* model,
                                      uint32_t max_outstanding, npu_async_session_t** out_session,
                                      npu_completion_queue_t** out_queue) {
  if (!runtime || !model || !out_session || !out_queue)
    return fail(npu::StatusCode::kInvalidArgument, "a handle or out pointer is NULL");
  *out_session = nullptr;
  *out_queue = nullptr;
  return guarded([&]() -> npu_status_t {
    npu::runtime::SessionOptions opts;
    if (max_outstanding) opts.max_outstanding = max_outstanding;
    auto r = npu::runtime::AsyncSession::create(runtime->rt, model->model, opts);
    if (!r.is_ok()) return fail(r.status());
    *out_session = new npu_async_session{std::move(r->first)};
    *out_queue = new npu_completion_queue{std::move(r->second)};
    return NPU_OK;
  });
}

void npu_async_session_destroy(npu_async_session_t* s) { delete s; }

npu_status_t npu_async_session_submit(npu_async_session_t* s, const npu_tensor_t* const* inputs,
                                      size_t input_count, void* user_context, int64_t timeout_us,
                                      uint64_t* out_request_id) {
  if (!s) return fail(npu::StatusCode::kInvalidArgument, "session is NULL");
  return guarded([&]() -> npu_status_t {
    std::vector<npu::Tensor> in;
    if (npu_status_t st = gather_inputs(inputs, input_count, &in)) return st;
    auto r =
        s->session->submit(std::move(in), std::any(user_context), deadline_from_us(timeout_us));
    if (!r.is_ok()) return fail(r.status());
    if (out_request_id) *out_request_id = *r;
    return NPU_OK;
  });
}

npu_status_t npu_async_session_cancel(npu_async_session_t* s, uint64_t request_id) {
  if (!s) return fail(npu::StatusCode::kInvalidArgument, "session is NULL");
  return guarded([&]() -> npu_status_t {
    npu::Status st = s->session->cancel(request_id);
    return st.is_ok() ? NPU_OK : fail(st);
  });
}

void npu_async_session_close(npu_async_session_t* s) {
  if (s) s->session->close();
}

npu_status_t npu_completion_queue_recv(npu_completion_queue_t* q, int64_t timeout_us,
                                       npu_completion_t** out_completion) {
  if (!q || !out_completion)
    return fail(npu::StatusCode::kInvalidArgument, "queue or out_completion is NULL");
  *out_completion = nullptr;
  return guarded([&]() -> npu_status_t {
    npu::Result<npu::runtime::Completion> r =
        timeout_us < 0 ? q->queue->recv() : q->queue->recv(std::chrono::microseconds(timeout_us));
    if (!r.is_ok()) return fail(r.status());
    *out_completion = new_completion(std::move(r).value());
    return NPU_OK;
  });
}

void npu_completion_queue_close(npu_completion_queue_t* q) {
  if (q) q->queue->close();
}
void npu_completion_queue_destroy(npu_completion_queue_t* q) { delete q; }
size_t npu_completion_queue_outstanding(const npu_completion_queue_t* q) {
  return q ? q->queue->outstanding() : 0;
}

npu_status_t npu_completion_status(const npu_completion_t* c) {
  return c ? static_cast<npu_status_t>(c->completion.status.code()) : NPU_INVALID_ARGUMENT;
}
const char* npu_completion_message(const npu_completion_t* c) {
  return c ? c->completion.status.message().c_str() : "";
}
uint64_t npu_completion_request_id(const npu_completion_t* c) {
  return c ? c->completion.request_id : 0;
}
void* npu_completion_user_context(const npu_completion_t* c) {
  if (!c) return nullptr;
  const auto* p = std::any_cast<void*>(&c->completion.user_context);
  return p ? *p : nullptr;
}
size_t npu_completion_output_count(const npu_completion_t* c) {
  return c ? c->completion.outputs.size() : 0;
}
npu_tensor_t* npu_completion_take_output(npu_completion_t* c, size_t index) {
  if (!c || index >= c->completion.outputs.size() || c->taken[index]) return nullptr;
  c->taken[index] = true;
  return new (std::nothrow) npu_tensor{std::move(c->completion.outputs[index])};
}
npu_status_t npu_completion_stats(const npu_completion_t* c, npu_run_stats_t* out_stats) {
  if (!c) return fail(npu::StatusCode::kInvalidArgument, "completion is NULL");
  return write_stats(c->completion.stats, out_stats);
}
void npu_completion_destroy(npu_completion_t* c) { delete c; }

}  // extern "C"
