// The C API over the C++ runtime. Exceptions never cross it (std::bad_alloc becomes
// NPU_RESOURCE_EXHAUSTED).
#include "npu/runtime/c_api.h"

#include <cstring>
#include <new>
#include <string>

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

thread_local std::string g_last_error;

npu_status_t fail(const npu::Status& st) {
  g_last_error = st.to_string();
  return static_cast<npu_status_t>(st.code());
}
npu_status_t fail(npu::StatusCode code, const std::string& msg) {
  return fail(npu::Status(code, msg));
}

template <typename Fn>
npu_status_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(npu::StatusCode::kResourceExhausted, "out of host memory");
  } catch (const std::exception& e) {
    return fail(npu::StatusCode::kInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(npu::StatusCode::kInternal, "internal error");
  }
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
    return fail(npu::StatusCode::kInvalidArgument, "index " + std::to_string(index) +
                                                       " out of range (" +
                                                       std::to_string(infos.size()) + ")");
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

const char* npu_status_name(npu_status_t status) {
  static thread_local std::string name;
  name = std::string(npu::status_code_name(static_cast<npu::StatusCode>(status)));
  return name.c_str();
}

const char* npu_last_error_message(void) { return g_last_error.c_str(); }

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

npu_status_t npu_model_load(const char* path, npu_model_t** out_model) {
  if (!path || !out_model) return fail(npu::StatusCode::kInvalidArgument, "path or out_model is NULL");
  *out_model = nullptr;
  return guarded([&]() -> npu_status_t {
    auto m = npu::runtime::Model::load_file(path);
    if (!m.is_ok()) return fail(m.status());
    auto* model = new npu_model{std::move(m).value(), "", ""};
    model->summary_text = model->model->summary();
    model->summary_json = model->model->summary_json();
    *out_model = model;
    return NPU_OK;
  });
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
        return fail(npu::StatusCode::kInvalidArgument,
                    "data holds " + std::to_string(data_bytes) + " bytes, the shape needs " +
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

void npu_session_destroy(npu_session_t* session) { delete session; }

npu_status_t npu_session_run(npu_session_t* session, const npu_tensor_t* const* inputs,
                             size_t input_count, npu_tensor_t** out_outputs,
                             size_t output_count) {
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
    return NPU_OK;
  });
}

npu_status_t npu_async_session_create(npu_runtime_t* runtime, const npu_model_t* model,
                                      uint32_t max_outstanding,
                                      npu_async_session_t** out_session,
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
    auto r = s->session->submit(std::move(in), std::any(user_context), deadline_from_us(timeout_us));
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
        timeout_us < 0 ? q->queue->recv()
                       : q->queue->recv(std::chrono::microseconds(timeout_us));
    if (!r.is_ok()) return fail(r.status());
    auto* c = new npu_completion{std::move(r).value(), {}};
    c->taken.assign(c->completion.outputs.size(), false);
    *out_completion = c;
    return NPU_OK;
  });
}

void npu_completion_queue_close(npu_completion_queue_t* q) {
  if (q) q->queue->close();
}
void npu_completion_queue_destroy(npu_completion_queue_t* q) { delete q; }

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
void npu_completion_destroy(npu_completion_t* c) { delete c; }

}  // extern "C"
