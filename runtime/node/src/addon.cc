// The onnxruntime-npu Node-API addon: sessions over the runtime's C API only
// (npu/runtime/c_api.h, and npu/compiler/c_api.h for ONNX models compiled on the fly).
//
// Threading. Everything here runs on the JS thread of one environment (the main thread or a
// Worker), except OnCompletion, which the runtime calls on its completion thread. Each
// environment has its own State (instance data): one thread-safe function that carries every
// completion back to the JS thread, the sessions it created and the count of requests in
// flight. The thread-safe function is referenced only while requests are in flight, so an idle
// addon never keeps the process alive. No JS value is held in static storage.
//
// Lifetime. A request holds its session's Core, never a JS object. dispose() (or the wrapper's
// garbage collection) marks the Core closed; the Core's C session is destroyed when its last
// request settles, on the JS thread, so dispose never blocks the event loop and every request
// settles exactly once. At environment teardown (process exit, Worker terminated) a cleanup hook
// destroys every C session, which waits for the completion callbacks; a callback that finds the
// thread-safe function closing drops its request without touching JS.
#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "npu/compiler/c_api.h"
#include "npu/runtime/c_api.h"

namespace {

std::string LastError(npu_status_t status) {
  std::string msg = npu_status_name(status);
  const char* detail = npu_last_error_message();
  if (detail != nullptr && *detail != '\0') msg += std::string(": ") + detail;
  return msg;
}

struct State;
struct Request;

// One C session (with its own runtime, so that profiling is per session) and its submitter
// thread: npu_session_run_async may wait for a free device instance when many requests are in
// flight, so the JS thread only queues a request and this thread submits it.
struct Core {
  State* state = nullptr;
  npu_runtime_t* runtime = nullptr;
  npu_model_t* model = nullptr;
  npu_session_t* session = nullptr;
  size_t inflight = 0;  // JS thread only: queued or submitted, not yet settled
  bool closed = false;  // JS thread only

  std::mutex mu;
  std::condition_variable cv;
  std::deque<Request*> queue;
  bool stop = false;  // submit what is queued, then exit
  bool drop = false;  // teardown: free what is queued without submitting it
  std::thread submitter;

  void Start() { submitter = std::thread([this] { Submit(); }); }
  void Enqueue(Request* request) {
    {
      std::lock_guard lock(mu);
      queue.push_back(request);
    }
    cv.notify_one();
  }
  void Submit();
  void Destroy(bool teardown);
};

struct Request {
  Core* core = nullptr;
  napi_deferred deferred = nullptr;
  std::vector<npu_tensor_t*> inputs;
  npu_completion_t* completion = nullptr;
  npu_status_t submit_status = NPU_OK;  // not accepted: why
  std::string submit_error;
  ~Request() {
    for (npu_tensor_t* t : inputs) npu_tensor_destroy(t);
    npu_completion_destroy(completion);
  }
};

void CallJs(Napi::Env env, Napi::Function, State* state, Request* request);
using Tsfn = Napi::TypedThreadSafeFunction<State, Request, CallJs>;

struct State {
  Tsfn tsfn;
  std::unordered_set<Core*> cores;
  size_t inflight = 0;  // JS thread only: the tsfn is referenced while > 0
  std::atomic<bool> tearing_down{false};
  Napi::FunctionReference* session_ctor = nullptr;  // the NativeSession class, per environment
  ~State() { delete session_ctor; }

  void Retire(Core* core) {
    core->Destroy(false);
    cores.erase(core);
    delete core;
  }
};

// On the runtime's completion thread or the submitter thread: hands the request to the JS
// thread.
void Deliver(Request* request) {
  State* state = request->core->state;
  if (state->tearing_down.load() || state->tsfn.NonBlockingCall(request) != napi_ok) {
    // The environment is going away: nothing in JS to settle; the C objects are ours to free.
    delete request;
  }
}

void OnCompletion(void* user_context, npu_completion_t* completion) {
  auto* request = static_cast<Request*>(user_context);
  request->completion = completion;
  Deliver(request);
}

void Core::Submit() {
  for (;;) {
    Request* request = nullptr;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (drop) {
        for (Request* r : queue) delete r;
        queue.clear();
      }
      if (queue.empty()) return;  // stop
      request = queue.front();
      queue.pop_front();
    }
    npu_status_t st = npu_session_run_async(session, request->inputs.data(),
                                            request->inputs.size(), OnCompletion, request);
    if (st != NPU_OK) {
      request->submit_status = st;
      request->submit_error = LastError(st);
      Deliver(request);
    }
  }
}

void Core::Destroy(bool teardown) {
  if (submitter.joinable()) {
    {
      std::lock_guard lock(mu);
      stop = true;
      drop = teardown;
    }
    cv.notify_one();
    submitter.join();
  }
  npu_session_destroy(session);  // waits for the callbacks of its requests
  npu_model_destroy(model);
  npu_runtime_destroy(runtime);
  session = nullptr;
  model = nullptr;
  runtime = nullptr;
}

Napi::Object OutputsToJs(Napi::Env env, Request* request) {
  npu_completion_t* completion = request->completion;
  size_t n = npu_completion_output_count(completion);
  Napi::Array outputs = Napi::Array::New(env, n);
  for (size_t i = 0; i < n; ++i) {
    npu_tensor_t* tensor = npu_completion_take_output(completion, i);
    Napi::Object out = Napi::Object::New(env);
    if (tensor != nullptr) {
      size_t rank = npu_tensor_rank(tensor);
      Napi::Array dims = Napi::Array::New(env, rank);
      for (size_t d = 0; d < rank; ++d)
        dims.Set(d, Napi::Number::New(env, static_cast<double>(npu_tensor_dim(tensor, d))));
      size_t bytes = npu_tensor_byte_size(tensor);
      Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(env, bytes);
      if (bytes > 0) std::memcpy(buffer.Data(), npu_tensor_data(tensor), bytes);
      out.Set("dtype", Napi::Number::New(env, static_cast<int>(npu_tensor_dtype(tensor))));
      out.Set("dims", dims);
      out.Set("data", buffer);
      npu_tensor_destroy(tensor);
    }
    outputs.Set(i, out);
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("outputs", outputs);
  npu_run_stats_t stats{};
  stats.struct_size = sizeof(stats);
  if (npu_completion_stats(completion, &stats) == NPU_OK) {
    Napi::Object s = Napi::Object::New(env);
    s.Set("requestId", Napi::Number::New(env, static_cast<double>(stats.request_id)));
    s.Set("deviceCycles", Napi::Number::New(env, static_cast<double>(stats.device_cycles)));
    s.Set("queueUs", Napi::Number::New(env, stats.queue_us));
    s.Set("deviceUs", Napi::Number::New(env, stats.device_us));
    s.Set("totalUs", Napi::Number::New(env, stats.total_us));
    result.Set("stats", s);
  }
  return result;
}

// On the JS thread (env set), or at teardown (env null) for requests still queued.
void CallJs(Napi::Env env, Napi::Function, State* state, Request* request) {
  if (request == nullptr) return;
  if (env == nullptr || state == nullptr) {
    delete request;
    return;
  }
  Core* core = request->core;
  napi_deferred deferred = request->deferred;
  try {
    Napi::HandleScope scope(env);
    npu_status_t status = request->submit_status;
    std::string msg;
    if (status != NPU_OK) {
      msg = "npu: run not accepted: " + request->submit_error;
    } else if (request->completion == nullptr) {
      status = NPU_RESOURCE_EXHAUSTED;
      msg = "npu: run failed: out of host memory for its completion";
    } else if ((status = npu_completion_status(request->completion)) != NPU_OK) {
      msg = std::string("npu: run failed: ") + npu_status_name(status);
      const char* detail = npu_completion_message(request->completion);
      if (detail != nullptr && *detail != '\0') msg += std::string(": ") + detail;
    }
    if (status == NPU_OK) {
      Napi::Object result = OutputsToJs(env, request);
      napi_resolve_deferred(env, deferred, result);
    } else {
      Napi::Error error = Napi::Error::New(env, msg);
      error.Set("code", Napi::String::New(env, npu_status_name(status)));
      napi_reject_deferred(env, deferred, error.Value());
    }
  } catch (...) {
    // A terminating environment (Worker.terminate) fails every call: nothing left to settle.
  }
  delete request;
  --core->inflight;
  if (core->closed && core->inflight == 0) state->Retire(core);
  if (--state->inflight == 0) napi_unref_threadsafe_function(env, state->tsfn);
}

// Opens the device, compiles an ONNX model for its array (model images load as they are) and
// creates the C session: C API calls only, on a libuv worker thread.
struct CalibrationTensor {
  npu_dtype_t dtype;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};
// Samples of calibration_inputs tensors each, in model input order.
struct Calibration {
  std::vector<CalibrationTensor> tensors;
  size_t inputs = 0;
};

Core* OpenCore(const std::vector<uint8_t>& bytes, const std::string& device,
               const std::string& origin, const Calibration& calibration, std::string* error) {
  auto core = std::make_unique<Core>();
  npu_status_t st = npu_runtime_open(device.c_str(), &core->runtime);
  if (st != NPU_OK) {
    *error = "npu: cannot open device '" + device + "': " + LastError(st);
    return nullptr;
  }
  const uint8_t* data = bytes.data();
  size_t size = bytes.size();
  uint8_t* image = nullptr;
  size_t image_size = 0;
  if (!npu_model_bytes_are_image(data, size)) {
    npu_device_info_t dev{};
    dev.struct_size = sizeof(dev);
    npu_compile_options_t options;
    npu_compile_options_init(&options);
    if (npu_runtime_device_info(core->runtime, 0, &dev) == NPU_OK) options.array_dim = dev.array_dim;
    std::vector<npu_tensor_view_t> views;
    for (const CalibrationTensor& t : calibration.tensors)
      views.push_back({t.dtype, t.dims.data(), t.dims.size(), t.data.data(), t.data.size()});
    if (calibration.inputs > 0 && !views.empty()) {
      options.calibration = views.data();
      options.calibration_input_count = calibration.inputs;
      options.calibration_sample_count = views.size() / calibration.inputs;
    }
    st = npu_compile_onnx(data, size, &options, &image, &image_size);
    if (st != NPU_OK) {
      *error = "npu: cannot compile ONNX model " + origin + ": " + LastError(st);
      core->Destroy(false);
      return nullptr;
    }
    data = image;
    size = image_size;
  }
  st = npu_model_load_bytes(data, size, origin.c_str(), &core->model);
  npu_free(image);
  if (st == NPU_OK) st = npu_session_create(core->runtime, core->model, &core->session);
  if (st != NPU_OK) {
    *error = "npu: cannot load model " + origin + ": " + LastError(st);
    core->Destroy(false);
    return nullptr;
  }
  return core.release();
}

// createSession(bytes, device, origin) -> Promise<NativeSession>: compiling may take seconds,
// so it runs off the JS thread.
class CreateWorker : public Napi::AsyncWorker {
 public:
  CreateWorker(Napi::Env env, std::vector<uint8_t> bytes, std::string device, std::string origin,
               Calibration calibration)
      : Napi::AsyncWorker(env, "npu create session"),
        deferred_(Napi::Promise::Deferred::New(env)),
        bytes_(std::move(bytes)),
        device_(std::move(device)),
        origin_(std::move(origin)),
        calibration_(std::move(calibration)) {}
  ~CreateWorker() override {
    if (core_ != nullptr) {  // never handed to a NativeSession (environment torn down)
      core_->Destroy(false);
      delete core_;
    }
  }
  Napi::Promise Promise() { return deferred_.Promise(); }

 protected:
  void Execute() override {
    std::string error;
    core_ = OpenCore(bytes_, device_, origin_, calibration_, &error);
    if (core_ == nullptr) SetError(error);
  }
  // Both may run while a Worker is being terminated, when every N-API call fails: an exception
  // escaping here would end the process (node-addon-api rethrows when it cannot throw to JS).
  void OnOK() override {
    try {
      Napi::Env env = Env();
      Napi::FunctionReference* ctor = env.GetInstanceData<State>()->session_ctor;
      Napi::Object session = ctor->New({Napi::External<Core>::New(env, core_)});
      core_ = nullptr;  // the NativeSession owns it from here
      deferred_.Resolve(session);
    } catch (...) {
      if (core_ != nullptr && core_->state != nullptr) core_ = nullptr;  // owned (state->cores)
    }
  }
  void OnError(const Napi::Error& e) override {
    try {
      deferred_.Reject(e.Value());
    } catch (...) {
    }
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<uint8_t> bytes_;
  std::string device_;
  std::string origin_;
  Calibration calibration_;
  Core* core_ = nullptr;
};

Napi::Value CreateSession(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsString()) {
    throw Napi::TypeError::New(env, "createSession(bytes: Uint8Array, device: string, origin?: string)");
  }
  Napi::Uint8Array b = info[0].As<Napi::Uint8Array>();
  std::string origin = info.Length() > 2 && info[2].IsString() ? info[2].As<Napi::String>().Utf8Value()
                                                               : std::string("<bytes>");
  // calibration: [[{dtype, dims, data}, ...one per input], ...one per sample]
  Calibration calibration;
  if (info.Length() > 3 && info[3].IsArray()) {
    Napi::Array samples = info[3].As<Napi::Array>();
    for (uint32_t i = 0; i < samples.Length(); ++i) {
      Napi::Array sample = samples.Get(i).As<Napi::Array>();
      if (i == 0) calibration.inputs = sample.Length();
      if (sample.Length() != calibration.inputs) {
        throw Napi::Error::New(env, "npu: calibration sample " + std::to_string(i) + " has " +
                                        std::to_string(sample.Length()) + " tensors, sample 0 has " +
                                        std::to_string(calibration.inputs));
      }
      for (uint32_t k = 0; k < sample.Length(); ++k) {
        Napi::Object t = sample.Get(k).As<Napi::Object>();
        CalibrationTensor c;
        c.dtype = static_cast<npu_dtype_t>(t.Get("dtype").As<Napi::Number>().Int32Value());
        Napi::Array dims = t.Get("dims").As<Napi::Array>();
        for (uint32_t d = 0; d < dims.Length(); ++d) c.dims.push_back(dims.Get(d).As<Napi::Number>().Int64Value());
        Napi::TypedArray data = t.Get("data").As<Napi::TypedArray>();
        const auto* p = static_cast<const uint8_t*>(data.ArrayBuffer().Data()) + data.ByteOffset();
        c.data.assign(p, p + data.ByteLength());
        calibration.tensors.push_back(std::move(c));
      }
    }
  }
  auto* worker = new CreateWorker(env, std::vector<uint8_t>(b.Data(), b.Data() + b.ByteLength()),
                                  info[1].As<Napi::String>().Utf8Value(), origin,
                                  std::move(calibration));
  Napi::Promise promise = worker->Promise();
  worker->Queue();  // deletes itself when done
  return promise;
}

// JS class NativeSession: new NativeSession(bytes: Uint8Array, device: string, options: {})
class NativeSession : public Napi::ObjectWrap<NativeSession> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "NativeSession",
                       {InstanceMethod<&NativeSession::Run>("run"),
                        InstanceMethod<&NativeSession::Inputs>("inputs"),
                        InstanceMethod<&NativeSession::Outputs>("outputs"),
                        InstanceMethod<&NativeSession::Summary>("summary"),
                        InstanceMethod<&NativeSession::Device>("device"),
                        InstanceMethod<&NativeSession::StartProfiling>("startProfiling"),
                        InstanceMethod<&NativeSession::EndProfiling>("endProfiling"),
                        InstanceMethod<&NativeSession::Dispose>("dispose"),
                        InstanceMethod<&NativeSession::Inflight>("inflight")});
  }

  // new NativeSession(External<Core>): only from CreateSession, which opened the Core.
  explicit NativeSession(const Napi::CallbackInfo& info) : Napi::ObjectWrap<NativeSession>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsExternal()) {
      throw Napi::TypeError::New(env, "NativeSession: use createSession(bytes, device, origin)");
    }
    State* state = env.GetInstanceData<State>();
    core_ = info[0].As<Napi::External<Core>>().Data();
    core_->state = state;
    state_ = state;
    state->cores.insert(core_);
    core_->Start();
  }

  ~NativeSession() override {
    // Garbage collected without dispose(): the Core goes with its last request. At teardown
    // the cleanup hook has destroyed every Core already.
    if (core_ != nullptr && !state_->tearing_down.load()) Close();
  }

 private:
  void Close() {
    State* state = core_->state;
    core_->closed = true;
    if (core_->inflight == 0 && state->cores.count(core_) != 0) state->Retire(core_);
    core_ = nullptr;
  }

  Core* Live(const Napi::Env& env, const char* what) {
    if (core_ == nullptr || core_->session == nullptr) {
      throw Napi::Error::New(env, std::string("npu: ") + what + " on a disposed session");
    }
    return core_;
  }

  static Napi::Array Describe(Napi::Env env, const npu_model_t* model, bool inputs) {
    size_t n = inputs ? npu_model_input_count(model) : npu_model_output_count(model);
    Napi::Array list = Napi::Array::New(env, n);
    for (size_t i = 0; i < n; ++i) {
      npu_tensor_desc_t desc{};
      desc.struct_size = sizeof(desc);
      npu_status_t st = inputs ? npu_model_input_desc(model, i, &desc)
                               : npu_model_output_desc(model, i, &desc);
      if (st != NPU_OK) throw Napi::Error::New(env, "npu: " + LastError(st));
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", Napi::String::New(env, desc.name));
      o.Set("dtype", Napi::Number::New(env, static_cast<int>(desc.dtype)));
      Napi::Array shape = Napi::Array::New(env, desc.rank);
      for (size_t d = 0; d < desc.rank; ++d)
        shape.Set(d, Napi::Number::New(env, static_cast<double>(desc.shape[d])));
      o.Set("shape", shape);
      o.Set("layout", Napi::String::New(env, desc.layout != nullptr ? desc.layout : ""));
      list.Set(i, o);
    }
    return list;
  }

  Napi::Value Inputs(const Napi::CallbackInfo& info) {
    return Describe(info.Env(), Live(info.Env(), "inputs")->model, true);
  }
  Napi::Value Outputs(const Napi::CallbackInfo& info) {
    return Describe(info.Env(), Live(info.Env(), "outputs")->model, false);
  }
  Napi::Value Summary(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), npu_model_summary(Live(info.Env(), "summary")->model, 0));
  }
  Napi::Value Device(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    npu_device_info_t dev{};
    dev.struct_size = sizeof(dev);
    npu_status_t st = npu_runtime_device_info(Live(env, "device")->runtime, 0, &dev);
    if (st != NPU_OK) throw Napi::Error::New(env, "npu: " + LastError(st));
    Napi::Object o = Napi::Object::New(env);
    o.Set("spec", Napi::String::New(env, dev.spec));
    o.Set("platform", Napi::String::New(env, dev.platform));
    o.Set("arrayDim", Napi::Number::New(env, dev.array_dim));
    return o;
  }
  Napi::Value Inflight(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), core_ != nullptr ? static_cast<double>(core_->inflight) : 0);
  }

  // run([{dtype, dims, data: TypedArray}], ...) -> Promise<{outputs: [{dtype, dims, data}]}>.
  // The JS side has checked names, dtypes and dims against the model; the C API checks again.
  Napi::Value Run(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    napi_deferred deferred = nullptr;
    napi_value promise = nullptr;
    NAPI_THROW_IF_FAILED(env, napi_create_promise(env, &deferred, &promise), Napi::Value());
    auto reject = [&](const std::string& msg) {
      napi_reject_deferred(env, deferred, Napi::Error::New(env, msg).Value());
      return Napi::Value(env, promise);
    };
    if (core_ == nullptr || core_->session == nullptr) return reject("npu: run on a disposed session");
    if (info.Length() < 1 || !info[0].IsArray()) return reject("npu: run(inputs: array)");
    Napi::Array list = info[0].As<Napi::Array>();
    auto request = std::make_unique<Request>();
    request->core = core_;
    for (uint32_t i = 0; i < list.Length(); ++i) {
      Napi::Object in = list.Get(i).As<Napi::Object>();
      auto dtype = static_cast<npu_dtype_t>(in.Get("dtype").As<Napi::Number>().Int32Value());
      Napi::Array dims_js = in.Get("dims").As<Napi::Array>();
      std::vector<int64_t> dims(dims_js.Length());
      for (uint32_t d = 0; d < dims_js.Length(); ++d)
        dims[d] = dims_js.Get(d).As<Napi::Number>().Int64Value();
      Napi::TypedArray data = in.Get("data").As<Napi::TypedArray>();
      const auto* bytes =
          static_cast<const uint8_t*>(data.ArrayBuffer().Data()) + data.ByteOffset();
      npu_tensor_t* tensor = nullptr;
      npu_status_t st =
          npu_tensor_create(dtype, dims.data(), dims.size(), bytes, data.ByteLength(), &tensor);
      if (st != NPU_OK) return reject("npu: input " + std::to_string(i) + ": " + LastError(st));
      request->inputs.push_back(tensor);
    }
    request->deferred = deferred;
    State* state = core_->state;
    // Referenced while requests are in flight: a pending run keeps the process alive.
    if (state->inflight++ == 0) napi_ref_threadsafe_function(env, state->tsfn);
    ++core_->inflight;
    core_->Enqueue(request.release());  // settled exactly once, by CallJs
    return Napi::Value(env, promise);
  }

  Napi::Value StartProfiling(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    npu_status_t st = npu_runtime_start_profiling(Live(env, "startProfiling")->runtime);
    if (st != NPU_OK) throw Napi::Error::New(env, "npu: startProfiling: " + LastError(st));
    return env.Undefined();
  }

  // endProfiling(path: string|null) -> the trace JSON text.
  Napi::Value EndProfiling(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::string path;
    bool has_path = info.Length() > 0 && info[0].IsString();
    if (has_path) path = info[0].As<Napi::String>().Utf8Value();
    char* json = nullptr;
    npu_status_t st = npu_runtime_end_profiling(Live(env, "endProfiling")->runtime,
                                                has_path ? path.c_str() : nullptr, &json);
    if (st != NPU_OK) throw Napi::Error::New(env, "npu: endProfiling: " + LastError(st));
    Napi::String text = Napi::String::New(env, json != nullptr ? json : "");
    npu_free(json);
    return text;
  }

  Napi::Value Dispose(const Napi::CallbackInfo& info) {
    if (core_ != nullptr && !state_->tearing_down.load()) Close();
    return info.Env().Undefined();
  }

  Core* core_ = nullptr;
  State* state_ = nullptr;
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* state = new State();
  env.SetInstanceData<State>(state);  // deleted by the default finalizer at teardown
  state->tsfn = Tsfn::New(env, "npu completions", 0, 1, state);
  state->tsfn.Unref(env);
  // Registered after the tsfn, so it runs before the tsfn's own teardown: waits for every
  // completion callback, then nothing can call the tsfn any more.
  env.AddCleanupHook([state]() {
    state->tearing_down.store(true);
    for (Core* core : state->cores) {
      core->Destroy(true);
      delete core;
    }
    state->cores.clear();
  });
  Napi::Function ctor = NativeSession::Define(env);
  state->session_ctor = new Napi::FunctionReference(Napi::Persistent(ctor));
  exports.Set("createSession", Napi::Function::New(env, CreateSession));
  exports.Set("NativeSession", ctor);
  Napi::Object dtypes = Napi::Object::New(env);
  dtypes.Set("float32", static_cast<int>(NPU_DTYPE_FLOAT32));
  dtypes.Set("int8", static_cast<int>(NPU_DTYPE_INT8));
  dtypes.Set("uint8", static_cast<int>(NPU_DTYPE_UINT8));
  dtypes.Set("int32", static_cast<int>(NPU_DTYPE_INT32));
  dtypes.Set("int64", static_cast<int>(NPU_DTYPE_INT64));
  exports.Set("dtypes", dtypes);
  exports.Set("isImage", Napi::Function::New(env, [](const Napi::CallbackInfo& info) {
                Napi::Uint8Array b = info[0].As<Napi::Uint8Array>();
                return Napi::Boolean::New(info.Env(), npu_model_bytes_are_image(b.Data(), b.ByteLength()) != 0);
              }));
  return exports;
}

}  // namespace

NODE_API_MODULE(npu_node, Init)
