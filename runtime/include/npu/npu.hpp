// The C++ API of the installed SDK: header-only RAII wrappers over the C API
// (npu/runtime/c_api.h), so a C++ program links only libnpu.so, whose ABI is the C API.
// Errors throw npu::cxx::Error (status code and the library's message). Ownership follows
// the C API: each object owns its handle and releases it in its destructor; objects move,
// never copy. Threading: as the C API (a Session may run from many threads; a Tensor is not
// shared while written).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "npu/runtime/c_api.h"

namespace npu::cxx {

class Error : public std::runtime_error {
 public:
  explicit Error(npu_status_t status)
      : std::runtime_error(std::string(npu_status_name(status)) + ": " + npu_last_error_message()),
        status_(status) {}
  npu_status_t status() const { return status_; }

 private:
  npu_status_t status_;
};

inline void check(npu_status_t status) {
  if (status != NPU_OK) throw Error(status);
}

// A move-only owner of one C handle with its destroy function.
template <typename T, void (*Destroy)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  T* get() const { return h_; }
  void reset() {
    if (h_) Destroy(h_);
    h_ = nullptr;
  }

 private:
  T* h_ = nullptr;
};

// A runtime on one device spec ("sim", "rtl", "accel:0", ...; "" = NPU_DEVICE or sim).
class Runtime {
 public:
  explicit Runtime(const std::string& device = "") {
    npu_runtime_t* r = nullptr;
    check(npu_runtime_open(device.c_str(), &r));
    h_ = Handle<npu_runtime_t, npu_runtime_destroy>(r);
  }
  npu_runtime_t* get() const { return h_.get(); }

 private:
  Handle<npu_runtime_t, npu_runtime_destroy> h_;
};

// A dense, row-major tensor that owns its bytes.
class Tensor {
 public:
  Tensor(npu_dtype_t dtype, const std::vector<int64_t>& shape, const void* data = nullptr,
         size_t bytes = 0) {
    npu_tensor_t* t = nullptr;
    check(npu_tensor_create(dtype, shape.data(), shape.size(), data, bytes, &t));
    h_ = Handle<npu_tensor_t, npu_tensor_destroy>(t);
  }
  explicit Tensor(npu_tensor_t* adopted) : h_(adopted) {}
  npu_tensor_t* get() const { return h_.get(); }
  std::vector<int64_t> shape() const {
    std::vector<int64_t> s(npu_tensor_rank(get()));
    for (size_t i = 0; i < s.size(); ++i) s[i] = npu_tensor_dim(get(), i);
    return s;
  }
  npu_dtype_t dtype() const { return npu_tensor_dtype(get()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(npu_tensor_data(get())); }
  template <typename T>
  T* mutable_data() { return static_cast<T*>(npu_tensor_mutable_data(get())); }
  size_t byte_size() const { return npu_tensor_byte_size(get()); }

 private:
  Handle<npu_tensor_t, npu_tensor_destroy> h_;
};

// A verified model image loaded from a file (npu-compile writes them).
class Model {
 public:
  explicit Model(const std::string& path) {
    npu_model_t* m = nullptr;
    check(npu_model_load(path.c_str(), &m));
    h_ = Handle<npu_model_t, npu_model_destroy>(m);
  }
  npu_model_t* get() const { return h_.get(); }
  size_t input_count() const { return npu_model_input_count(get()); }
  size_t output_count() const { return npu_model_output_count(get()); }
  std::string summary() const { return npu_model_summary(get(), 0); }

 private:
  Handle<npu_model_t, npu_model_destroy> h_;
};

// A blocking session: run() returns when the outputs are ready.
class Session {
 public:
  Session(const Runtime& runtime, const Model& model) : outputs_(model.output_count()) {
    npu_session_t* s = nullptr;
    check(npu_session_create(runtime.get(), model.get(), &s));
    h_ = Handle<npu_session_t, npu_session_destroy>(s);
  }
  std::vector<Tensor> run(const std::vector<const Tensor*>& inputs) {
    std::vector<const npu_tensor_t*> in;
    for (const Tensor* t : inputs) in.push_back(t->get());
    std::vector<npu_tensor_t*> out(outputs_, nullptr);
    check(npu_session_run(h_.get(), in.data(), in.size(), out.data(), out.size()));
    std::vector<Tensor> result;
    for (npu_tensor_t* t : out) result.emplace_back(t);
    return result;
  }

 private:
  size_t outputs_;
  Handle<npu_session_t, npu_session_destroy> h_;
};

}  // namespace npu::cxx
