// npu/compiler/c_api.h over compile_onnx_file. Exceptions never cross it.
#include "npu/compiler/c_api.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "npu/compiler/compiler.h"
#include "npu/hal/c_error.h"

namespace {

using npu::StatusCode;
using npu::c_api::fail;
using npu::c_api::guarded;

npu_status_t to_options(const npu_compile_options_t* in, npu::compiler::CompileOptions* out) {
  npu_compile_options_t o;
  npu_compile_options_init(&o);
  if (in) {
    if (in->struct_size < sizeof(size_t))
      return fail(StatusCode::kInvalidArgument,
                  "options->struct_size is not set (use npu_compile_options_init)");
    // An older caller's struct is shorter: the fields it lacks keep their defaults.
    std::memcpy(&o, in, std::min(in->struct_size, sizeof o));
  }
  if (o.array_dim) out->array_dim = o.array_dim;
  if (o.calibration_method) {
    auto m = npu::compiler::parse_calibration_method(o.calibration_method);
    if (!m.is_ok()) return fail(m.status());
    out->calibration_method = *m;
  }
  out->bias_correction = o.bias_correction != 0;
  if (o.weight_rounding) {
    const std::string wr = o.weight_rounding;
    if (wr != "nearest" && wr != "gptq")
      return fail(StatusCode::kInvalidArgument, "weight_rounding \"" + wr + "\": unknown; use \"nearest\" or \"gptq\"");
    out->error_feedback_rounding = wr == "gptq";
  }
  if (o.calibration_sample_count) {
    if (!o.calibration || !o.calibration_input_count)
      return fail(StatusCode::kInvalidArgument,
                  "calibration samples given without tensors or an input count");
    for (size_t s = 0; s < o.calibration_sample_count; ++s) {
      std::vector<npu::Tensor> sample;
      for (size_t k = 0; k < o.calibration_input_count; ++k) {
        const npu_tensor_view_t& v = o.calibration[s * o.calibration_input_count + k];
        const std::string where =
            "calibration sample " + std::to_string(s) + " input " + std::to_string(k);
        if (static_cast<int>(v.dtype) < 0 || static_cast<int>(v.dtype) > 4)
          return fail(StatusCode::kInvalidArgument, where + ": unknown dtype");
        if (v.rank && !v.shape)
          return fail(StatusCode::kInvalidArgument, where + ": shape is NULL");
        std::vector<int64_t> dims(v.shape, v.shape + v.rank);
        for (int64_t d : dims)
          if (d < 0 || d > (int64_t{1} << 32))
            return fail(StatusCode::kInvalidArgument,
                        where + ": bad dimension " + std::to_string(d));
        npu::Tensor t = npu::Tensor::zeros(static_cast<npu::DType>(v.dtype), dims);
        if (v.data_bytes != t.data.size() || (!v.data && v.data_bytes))
          return fail(StatusCode::kInvalidArgument,
                      where + ": data holds " + std::to_string(v.data_bytes) +
                          " bytes, the shape needs " + std::to_string(t.data.size()));
        if (v.data_bytes) std::memcpy(t.data.data(), v.data, v.data_bytes);
        sample.push_back(std::move(t));
      }
      out->calibration.push_back(std::move(sample));
    }
  }
  if (o.calibration_dir) out->calibration_dir = o.calibration_dir;
  for (size_t i = 0; i < o.input_shape_count; ++i) {
    const npu_input_shape_t& s = o.input_shapes[i];
    if (!s.name || (s.rank && !s.dims))
      return fail(StatusCode::kInvalidArgument,
                  "input shape " + std::to_string(i) + ": name or dims is NULL");
    out->input_shapes[s.name] = std::vector<int64_t>(s.dims, s.dims + s.rank);
  }
  if (o.export_qdq_path) out->export_qdq_path = o.export_qdq_path;
  if (o.progress) {
    auto fn = o.progress;
    void* user = o.progress_user_data;
    out->progress = [fn, user](const std::string& line) { fn(user, line.c_str()); };
  }
  return NPU_OK;
}

npu_status_t compile(const std::string& path, const npu_compile_options_t* options,
                     uint8_t** out_image, size_t* out_size) {
  npu::compiler::CompileOptions opts;
  if (npu_status_t st = to_options(options, &opts)) return st;
  auto image = npu::compiler::compile_onnx_file(path, opts);
  if (!image.is_ok()) return fail(image.status());
  auto* copy = static_cast<uint8_t*>(std::malloc(std::max<size_t>(image->size(), 1)));
  if (!copy) return fail(StatusCode::kResourceExhausted, "out of host memory");
  std::memcpy(copy, image->data(), image->size());
  *out_image = copy;
  *out_size = image->size();
  return NPU_OK;
}

// The ONNX frontend reads files; bytes go through a private temporary file.
class TempFile {
 public:
  TempFile() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/npu-compile-XXXXXX.onnx";
    fd_ = mkstemps(path_.data(), 5);
  }
  ~TempFile() {
    if (fd_ >= 0) {
      close(fd_);
      unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  bool write_all(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size) {
      ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      size -= static_cast<size_t>(n);
    }
    return true;
  }
  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

extern "C" {

void npu_compile_options_init(npu_compile_options_t* options) {
  if (!options) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
}

npu_status_t npu_compile_onnx_file(const char* path, const npu_compile_options_t* options,
                                   uint8_t** out_image, size_t* out_size) {
  if (!path || !out_image || !out_size)
    return fail(StatusCode::kInvalidArgument, "path, out_image or out_size is NULL");
  *out_image = nullptr;
  *out_size = 0;
  return guarded([&] { return compile(path, options, out_image, out_size); });
}

npu_status_t npu_compile_onnx(const void* onnx, size_t onnx_size,
                              const npu_compile_options_t* options, uint8_t** out_image,
                              size_t* out_size) {
  if (!onnx || !onnx_size || !out_image || !out_size)
    return fail(StatusCode::kInvalidArgument, "onnx, onnx_size, out_image or out_size is empty");
  *out_image = nullptr;
  *out_size = 0;
  return guarded([&]() -> npu_status_t {
    TempFile file;
    if (!file.ok() || !file.write_all(onnx, onnx_size))
      return fail(StatusCode::kInternal, "cannot write a temporary file for the ONNX bytes in " +
                                             file.path() + ": " + std::strerror(errno));
    return compile(file.path(), options, out_image, out_size);
  });
}

}  // extern "C"
