// npu._native: the Python package's extension module, a thin layer over the C API only
// (npu/runtime/c_api.h, npu/compiler/c_api.h), so that it keeps working against an installed
// libnpu that exports nothing else. The Pythonic API is in npu/runtime/*.py.
//
// GIL: released around every call that may block (run, submit, recv, compile, close drains);
// long waits are cut into slices between which the GIL is taken back to run signal handlers
// (PyErr_CheckSignals), so Ctrl-C interrupts recv and submit.
// Contexts: no Python object ever goes into the C API. A request carries an integer token;
// the Python layer maps tokens to context objects under the GIL (npu/runtime/session.py).
// Outputs: numpy arrays over the output tensor's own bytes, kept alive by a capsule base that
// destroys the tensor: no copy beyond the runtime's dequantisation.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "npu/compiler/c_api.h"
#include "npu/runtime/c_api.h"

namespace py = pybind11;

namespace {

// Longest stretch spent in one blocking C call before signals are checked.
constexpr int64_t kSliceUs = 50 * 1000;

// Raises the npu.runtime.errors exception for `status` (the message of the failing call).
// `unavailable` names the class for NPU_UNAVAILABLE, whose meaning depends on the call.
[[noreturn]] void raise_status(npu_status_t status, const char* unavailable = "SessionClosed") {
  const std::string message = npu_last_error_message();
  py::object errors = py::module_::import("npu.runtime.errors");
  py::object exc =
      errors.attr("from_status")(status, npu_status_name(status), message, unavailable);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

// Raises npu.runtime.errors.<cls>(message, status_name).
[[noreturn]] void raise_error(const char* cls, const std::string& message,
                              const char* status_name) {
  py::object errors = py::module_::import("npu.runtime.errors");
  py::object exc = errors.attr(cls)(message, status_name);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
  throw py::error_already_set();
}

void check(npu_status_t status, const char* unavailable = "SessionClosed") {
  if (status != NPU_OK) raise_status(status, unavailable);
}

// Calls `attempt(wait_us)` until it returns something other than `busy`, or timeout_us (< 0:
// forever) has passed: first without waiting and with the GIL held (the common case is
// ready at once), then in slices of at most kSliceUs with the GIL released, checking signals
// between slices (Ctrl-C raises KeyboardInterrupt). `attempt` must not touch Python objects.
// Returns the last status.
template <typename Attempt>
npu_status_t sliced_wait(int64_t timeout_us, npu_status_t busy, Attempt&& attempt) {
  npu_status_t st = attempt(0);
  if (st != busy || timeout_us == 0) return st;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int64_t slice = kSliceUs;
    if (timeout_us >= 0) {
      const int64_t spent = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      if (spent >= timeout_us) return st;
      slice = std::min(timeout_us - spent, kSliceUs);
    }
    {
      py::gil_scoped_release nogil;
      st = attempt(slice);
    }
    if (st != busy) return st;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

// Shared handles: a blocking call holds its own reference, so close() from another thread
// never destroys what a call is using.
template <typename T, void (*Destroy)(T*)>
std::shared_ptr<T> own(T* p) {
  return std::shared_ptr<T>(p, [](T* q) { Destroy(q); });
}
using RuntimePtr = std::shared_ptr<npu_runtime_t>;
using ModelPtr = std::shared_ptr<npu_model_t>;

struct TensorDeleter {
  void operator()(npu_tensor_t* t) const { npu_tensor_destroy(t); }
};
using TensorPtr = std::unique_ptr<npu_tensor_t, TensorDeleter>;

std::optional<npu_dtype_t> dtype_of(const py::dtype& dt) {
  if (dt.is(py::dtype::of<float>())) return NPU_DTYPE_FLOAT32;
  if (dt.is(py::dtype::of<int8_t>())) return NPU_DTYPE_INT8;
  if (dt.is(py::dtype::of<uint8_t>())) return NPU_DTYPE_UINT8;
  if (dt.is(py::dtype::of<int32_t>())) return NPU_DTYPE_INT32;
  if (dt.is(py::dtype::of<int64_t>())) return NPU_DTYPE_INT64;
  // Equal but not identical descriptors (byte order spelled out, subclasses).
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (dt.byteorder() == '>') return std::nullopt;
  if (kind == 'f' && size == 4) return NPU_DTYPE_FLOAT32;
  if (kind == 'i' && size == 1) return NPU_DTYPE_INT8;
  if (kind == 'u' && size == 1) return NPU_DTYPE_UINT8;
  if (kind == 'i' && size == 4) return NPU_DTYPE_INT32;
  if (kind == 'i' && size == 8) return NPU_DTYPE_INT64;
  return std::nullopt;
}

py::dtype numpy_dtype(npu_dtype_t dtype) {
  switch (dtype) {
    case NPU_DTYPE_FLOAT32:
      return py::dtype::of<float>();
    case NPU_DTYPE_INT8:
      return py::dtype::of<int8_t>();
    case NPU_DTYPE_UINT8:
      return py::dtype::of<uint8_t>();
    case NPU_DTYPE_INT32:
      return py::dtype::of<int32_t>();
    case NPU_DTYPE_INT64:
      return py::dtype::of<int64_t>();
  }
  return py::dtype::of<float>();
}

// Copies an ndarray (any strides, the exact dtype; never converted) into a new C tensor.
TensorPtr to_tensor(const py::handle& value, size_t index) {
  if (!py::isinstance<py::array>(value))
    raise_error("InvalidInput", "input " + std::to_string(index) + " is not a numpy array",
                "INVALID_ARGUMENT");
  py::array a = py::reinterpret_borrow<py::array>(value);
  const auto dt = dtype_of(a.dtype());
  if (!dt)
    raise_error("InvalidInput",
                "input " + std::to_string(index) + " has dtype " + std::string(py::str(a.dtype())) +
                    ", which the runtime does not take (float32, int8, uint8, int32, int64)",
                "INVALID_ARGUMENT");
  // A copy only when the array is not C-contiguous; the dtype stays.
  py::array c = py::array::ensure(a, py::array::c_style);
  if (!c) throw py::error_already_set();
  std::vector<int64_t> shape(c.shape(), c.shape() + c.ndim());
  npu_tensor_t* t = nullptr;
  check(npu_tensor_create(*dt, shape.data(), shape.size(), c.data(),
                          static_cast<size_t>(c.nbytes()), &t));
  return TensorPtr(t);
}

std::vector<TensorPtr> to_tensors(const py::list& values) {
  std::vector<TensorPtr> out;
  out.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) out.push_back(to_tensor(values[i], i));
  return out;
}

std::vector<const npu_tensor_t*> raw(const std::vector<TensorPtr>& ts) {
  std::vector<const npu_tensor_t*> out;
  for (const auto& t : ts) out.push_back(t.get());
  return out;
}

// An ndarray over the tensor's bytes that owns the tensor.
py::array to_array(npu_tensor_t* t) {
  py::capsule base(t, [](void* p) { npu_tensor_destroy(static_cast<npu_tensor_t*>(p)); });
  std::vector<py::ssize_t> shape;
  for (size_t i = 0; i < npu_tensor_rank(t); ++i) shape.push_back(npu_tensor_dim(t, i));
  return py::array(numpy_dtype(npu_tensor_dtype(t)), shape, npu_tensor_mutable_data(t), base);
}

py::dict stats_dict(const npu_run_stats_t& s) {
  py::dict d;
  d["request_id"] = s.request_id;
  d["device_index"] = s.device_index;
  d["device_cycles"] = s.device_cycles;
  d["queue_us"] = s.queue_us;
  d["device_us"] = s.device_us;
  d["copy_in_us"] = s.copy_in_us;
  d["copy_out_us"] = s.copy_out_us;
  d["total_us"] = s.total_us;
  d["retried"] = s.retried != 0;
  return d;
}

py::object quant_tuple(const npu_quant_info_t& q) {
  std::vector<float> scale(q.scale, q.scale + q.count);
  std::vector<int32_t> zp(q.zero_point, q.zero_point + q.count);
  return py::make_tuple(q.axis, scale, zp);
}

py::dict desc_dict(const npu_tensor_desc_t& d) {
  py::dict out;
  out["name"] = d.name;
  out["dtype"] = static_cast<int>(d.dtype);
  out["shape"] = py::tuple(py::cast(std::vector<int64_t>(d.shape, d.shape + d.rank)));
  out["layout"] = d.layout;
  out["quant"] = d.quantized ? quant_tuple(d.quant) : py::none();
  out["on_device"] = d.on_device != 0;
  out["device_dtype"] = static_cast<int>(d.device_dtype);
  out["device_quant"] = d.on_device ? quant_tuple(d.device_quant) : py::none();
  return out;
}

class Runtime {
 public:
  explicit Runtime(std::optional<std::string> device) {
    npu_runtime_t* rt = nullptr;
    npu_status_t st;
    {
      py::gil_scoped_release nogil;
      st = npu_runtime_open(device ? device->c_str() : nullptr, &rt);
    }
    check(st);
    rt_ = own<npu_runtime_t, npu_runtime_destroy>(rt);
  }
  size_t device_count() const { return npu_runtime_device_count(rt_.get()); }
  py::dict device_info(size_t index) const {
    npu_device_info_t info{};
    info.struct_size = sizeof info;
    check(npu_runtime_device_info(rt_.get(), index, &info));
    py::dict d;
    d["spec"] = info.spec;
    d["platform"] = info.platform;
    d["array_dim"] = info.array_dim;
    d["clock_mhz"] = info.clock_mhz;
    d["fingerprint"] = info.fingerprint;
    return d;
  }
  int64_t clock_us() const { return npu_runtime_clock_us(rt_.get()); }
  void start_profiling() { check(npu_runtime_start_profiling(rt_.get())); }
  std::string end_profiling(std::optional<std::string> path) {
    char* json = nullptr;
    check(npu_runtime_end_profiling(rt_.get(), path ? path->c_str() : nullptr, &json));
    std::string out(json ? json : "");
    npu_free(json);
    return out;
  }
  const RuntimePtr& ptr() const { return rt_; }

 private:
  RuntimePtr rt_;
};

class Model {
 public:
  static Model from_file(const std::string& path) {
    npu_model_t* m = nullptr;
    check(npu_model_load(path.c_str(), &m));
    return Model(m);
  }
  static Model from_bytes(const py::bytes& data, const std::string& origin) {
    const std::string_view v = data;
    npu_model_t* m = nullptr;
    check(npu_model_load_bytes(v.data(), v.size(), origin.c_str(), &m));
    return Model(m);
  }
  py::list descs(bool outputs) const {
    py::list out;
    const size_t n = outputs ? npu_model_output_count(m_.get()) : npu_model_input_count(m_.get());
    for (size_t i = 0; i < n; ++i) {
      npu_tensor_desc_t d{};
      d.struct_size = sizeof d;
      check(outputs ? npu_model_output_desc(m_.get(), i, &d)
                    : npu_model_input_desc(m_.get(), i, &d));
      out.append(desc_dict(d));
    }
    return out;
  }
  std::string summary(bool json) const { return npu_model_summary(m_.get(), json ? 1 : 0); }
  const ModelPtr& ptr() const { return m_; }

 private:
  explicit Model(npu_model_t* m) : m_(own<npu_model_t, npu_model_destroy>(m)) {}
  ModelPtr m_;
};

class Session {
 public:
  Session(const Runtime& rt, const Model& model) : model_(model.ptr()) {
    npu_session_t* s = nullptr;
    npu_status_t st;
    {
      py::gil_scoped_release nogil;
      st = npu_session_create(rt.ptr().get(), model_.get(), &s);
    }
    check(st);
    s_ = own<npu_session_t, npu_session_destroy>(s);
  }
  // -> (list of ndarrays, stats dict)
  py::tuple run(const py::list& values) {
    std::shared_ptr<npu_session_t> s = s_;
    if (!s) raise_closed();
    std::vector<TensorPtr> in = to_tensors(values);
    std::vector<const npu_tensor_t*> in_raw = raw(in);
    const size_t n_out = npu_model_output_count(model_.get());
    std::vector<npu_tensor_t*> out(n_out, nullptr);
    npu_run_stats_t stats{};
    stats.struct_size = sizeof stats;
    npu_status_t st;
    {
      py::gil_scoped_release nogil;
      st = npu_session_run_with_stats(s.get(), in_raw.data(), in_raw.size(), out.data(), n_out,
                                      &stats);
    }
    check(st);
    py::list arrays;
    for (npu_tensor_t* t : out) arrays.append(to_array(t));
    return py::make_tuple(arrays, stats_dict(stats));
  }
  // Drops this handle; a run in flight on another thread finishes first with its own.
  void close() {
    std::shared_ptr<npu_session_t> s = std::move(s_);
    py::gil_scoped_release nogil;
    s.reset();
  }
  bool closed() const { return !s_; }

 private:
  [[noreturn]] static void raise_closed() {
    raise_error("SessionClosed", "the session is closed", "UNAVAILABLE");
  }
  ModelPtr model_;
  std::shared_ptr<npu_session_t> s_;
};

class CompletionQueue {
 public:
  explicit CompletionQueue(npu_completion_queue_t* q)
      : q_(own<npu_completion_queue_t, npu_completion_queue_destroy>(q)) {}
  // Waits up to timeout_us (< 0: forever) for a completion (sliced_wait).
  // -> (token, request id, status, status name, message, [ndarray], stats dict); raises
  // QueueWaitTimeout when none came, `unavailable` when the queue is closed and drained.
  py::tuple recv(int64_t timeout_us, const std::string& unavailable) {
    std::shared_ptr<npu_completion_queue_t> q = q_;
    if (!q) raise_status(NPU_UNAVAILABLE, unavailable.c_str());
    npu_completion_t* c = nullptr;
    check(sliced_wait(timeout_us, NPU_DEADLINE_EXCEEDED,
                      [&](int64_t us) { return npu_completion_queue_recv(q.get(), us, &c); }),
          unavailable.c_str());
    std::unique_ptr<npu_completion_t, void (*)(npu_completion_t*)> owned(c, npu_completion_destroy);
    const npu_status_t status = npu_completion_status(c);
    py::list arrays;
    if (status == NPU_OK)
      for (size_t i = 0; i < npu_completion_output_count(c); ++i)
        arrays.append(to_array(npu_completion_take_output(c, i)));
    npu_run_stats_t stats{};
    stats.struct_size = sizeof stats;
    check(npu_completion_stats(c, &stats));
    const auto token = reinterpret_cast<uintptr_t>(npu_completion_user_context(c));
    return py::make_tuple(static_cast<uint64_t>(token), npu_completion_request_id(c), status,
                          npu_status_name(status), std::string(npu_completion_message(c)), arrays,
                          stats_dict(stats));
  }
  // Closes the queue: pending requests complete CANCELLED (receive them to release their
  // contexts). Never blocks.
  void close() {
    if (q_) npu_completion_queue_close(q_.get());
  }
  // Destroys the handle (completions not received are dropped).
  void destroy() {
    std::shared_ptr<npu_completion_queue_t> q = std::move(q_);
    py::gil_scoped_release nogil;
    q.reset();
  }
  size_t outstanding() const { return q_ ? npu_completion_queue_outstanding(q_.get()) : 0; }

 private:
  std::shared_ptr<npu_completion_queue_t> q_;
};

class AsyncSession {
 public:
  static py::tuple create(const Runtime& rt, const Model& model, uint32_t max_outstanding) {
    npu_async_session_t* s = nullptr;
    npu_completion_queue_t* q = nullptr;
    npu_status_t st;
    {
      py::gil_scoped_release nogil;
      st = npu_async_session_create(rt.ptr().get(), model.ptr().get(), max_outstanding, &s, &q);
    }
    check(st);
    return py::make_tuple(AsyncSession(s), CompletionQueue(q));
  }
  // Queues one request carrying `token`; waits for room up to timeout_us (< 0: forever;
  // sliced_wait). -> request id.
  uint64_t submit(const py::list& values, uint64_t token, int64_t timeout_us) {
    std::shared_ptr<npu_async_session_t> s = s_;
    if (!s) raise_status(NPU_UNAVAILABLE);
    std::vector<TensorPtr> in = to_tensors(values);
    std::vector<const npu_tensor_t*> in_raw = raw(in);
    void* ctx = reinterpret_cast<void*>(static_cast<uintptr_t>(token));
    uint64_t id = 0;
    check(sliced_wait(timeout_us, NPU_RESOURCE_EXHAUSTED, [&](int64_t us) {
      return npu_async_session_submit(s.get(), in_raw.data(), in_raw.size(), ctx, us, &id);
    }));
    return id;
  }
  bool cancel(uint64_t request_id) {
    if (!s_) raise_status(NPU_UNAVAILABLE);
    const npu_status_t st = npu_async_session_cancel(s_.get(), request_id);
    if (st == NPU_NOT_FOUND) return false;
    check(st);
    return true;
  }
  // Closes the submit side; pending requests still complete. Never blocks.
  void close() {
    std::shared_ptr<npu_async_session_t> s = std::move(s_);
    if (s) npu_async_session_close(s.get());
    py::gil_scoped_release nogil;
    s.reset();
  }

 private:
  explicit AsyncSession(npu_async_session_t* s)
      : s_(own<npu_async_session_t, npu_async_session_destroy>(s)) {}
  std::shared_ptr<npu_async_session_t> s_;
};

struct ProgressSink {
  py::object fn;
};

void on_progress(void* user, const char* line) {
  py::gil_scoped_acquire gil;
  auto* sink = static_cast<ProgressSink*>(user);
  try {
    sink->fn(line);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("npu compile progress callback");
  }
}

// ONNX bytes (or the file `path` when given) -> image bytes (npu_compile_onnx[_file]).
// calibration: list of samples, each a list of ndarrays (one per model input); input_shapes:
// {name: [dims]}.
py::bytes compile_onnx(const py::bytes& onnx, std::optional<std::string> path, uint32_t array_dim,
                       std::optional<std::string> calibration_method, const py::list& calibration,
                       std::optional<std::string> calibration_dir,
                       const std::map<std::string, std::vector<int64_t>>& input_shapes,
                       const py::object& progress, bool bias_correction,
                       std::optional<std::string> weight_rounding) {
  const std::string_view model = onnx;
  npu_compile_options_t opts;
  npu_compile_options_init(&opts);
  opts.array_dim = array_dim;
  if (calibration_method) opts.calibration_method = calibration_method->c_str();
  if (calibration_dir) opts.calibration_dir = calibration_dir->c_str();
  opts.bias_correction = bias_correction ? 1 : 0;
  if (weight_rounding) opts.weight_rounding = weight_rounding->c_str();
  // Calibration samples as views over C-contiguous copies held here.
  std::vector<py::array> keep;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<npu_tensor_view_t> views;
  size_t per_sample = 0;
  for (size_t s = 0; s < calibration.size(); ++s) {
    py::list sample = calibration[s].cast<py::list>();
    if (s == 0) per_sample = sample.size();
    if (sample.size() != per_sample)
      raise_error("InvalidInput",
                  "calibration sample " + std::to_string(s) + " has " +
                      std::to_string(sample.size()) + " inputs, sample 0 has " +
                      std::to_string(per_sample),
                  "INVALID_ARGUMENT");
    for (size_t k = 0; k < sample.size(); ++k) {
      py::array a = py::array::ensure(sample[k], py::array::c_style);
      if (!a) throw py::error_already_set();
      const auto dt = dtype_of(a.dtype());
      if (!dt)
        raise_error("InvalidInput",
                    "calibration sample " + std::to_string(s) + " input " + std::to_string(k) +
                        " has dtype " + std::string(py::str(a.dtype())) + ", not supported",
                    "INVALID_ARGUMENT");
      shapes.emplace_back(a.shape(), a.shape() + a.ndim());
      keep.push_back(a);
      views.push_back(
          {*dt, nullptr, static_cast<size_t>(a.ndim()), a.data(), static_cast<size_t>(a.nbytes())});
    }
  }
  for (size_t i = 0; i < views.size(); ++i) views[i].shape = shapes[i].data();
  opts.calibration = views.data();
  opts.calibration_sample_count = calibration.size();
  opts.calibration_input_count = per_sample;
  std::vector<npu_input_shape_t> shape_list;
  for (const auto& [name, dims] : input_shapes)
    shape_list.push_back({name.c_str(), dims.data(), dims.size()});
  opts.input_shapes = shape_list.data();
  opts.input_shape_count = shape_list.size();
  ProgressSink sink{progress};
  if (!progress.is_none()) {
    opts.progress = on_progress;
    opts.progress_user_data = &sink;
  }
  uint8_t* image = nullptr;
  size_t size = 0;
  npu_status_t st;
  {
    py::gil_scoped_release nogil;
    st = path ? npu_compile_onnx_file(path->c_str(), &opts, &image, &size)
              : npu_compile_onnx(model.data(), model.size(), &opts, &image, &size);
  }
  check(st);
  py::bytes out(reinterpret_cast<const char*>(image), size);
  npu_free(image);
  return out;
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "npu runtime C API binding (internal; use npu.runtime)";
  m.def("status_name", [](int status) { return std::string(npu_status_name(status)); });
  m.def("is_image", [](const py::bytes& data) {
    const std::string_view v = data;
    return npu_model_bytes_are_image(v.data(), v.size()) != 0;
  });
  m.def("compile_onnx", &compile_onnx, py::arg("onnx"), py::arg("path") = py::none(),
        py::arg("array_dim") = 0, py::arg("calibration_method") = py::none(),
        py::arg("calibration") = py::list(), py::arg("calibration_dir") = py::none(),
        py::arg("input_shapes") = std::map<std::string, std::vector<int64_t>>(),
        py::arg("progress") = py::none(), py::arg("bias_correction") = false,
        py::arg("weight_rounding") = py::none());

  py::class_<Runtime>(m, "Runtime")
      .def(py::init<std::optional<std::string>>(), py::arg("device") = py::none())
      .def("device_count", &Runtime::device_count)
      .def("device_info", &Runtime::device_info)
      .def("clock_us", &Runtime::clock_us)
      .def("start_profiling", &Runtime::start_profiling)
      .def("end_profiling", &Runtime::end_profiling, py::arg("path") = py::none());

  py::class_<Model>(m, "Model")
      .def_static("from_file", &Model::from_file)
      .def_static("from_bytes", &Model::from_bytes)
      .def("inputs", [](const Model& self) { return self.descs(false); })
      .def("outputs", [](const Model& self) { return self.descs(true); })
      .def("summary", &Model::summary, py::arg("json") = false);

  py::class_<Session>(m, "Session")
      .def(py::init<const Runtime&, const Model&>())
      .def("run", &Session::run)
      .def("close", &Session::close)
      .def_property_readonly("closed", &Session::closed);

  py::class_<AsyncSession>(m, "AsyncSession")
      .def_static("create", &AsyncSession::create)
      .def("submit", &AsyncSession::submit)
      .def("cancel", &AsyncSession::cancel)
      .def("close", &AsyncSession::close);

  py::class_<CompletionQueue>(m, "CompletionQueue")
      .def("recv", &CompletionQueue::recv)
      .def("close", &CompletionQueue::close)
      .def("destroy", &CompletionQueue::destroy)
      .def("outstanding", &CompletionQueue::outstanding);
}
