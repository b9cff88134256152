/* The compiler's C API: an ONNX model -> a verified model image, as npu-compile does, for
 * programs and bindings that compile at run time (load the image with npu_model_load_bytes,
 * npu/runtime/c_api.h). Conventions as in npu/c_common.h: status codes, the calling thread's
 * last error message, struct_size first in caller-filled structs.
 * Threading: separate calls may run concurrently. Blocking: a call compiles the whole model
 * (seconds for a large one) on the calling thread.
 */
#ifndef NPU_COMPILER_C_API_H_
#define NPU_COMPILER_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "npu/c_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The C API is what the shared libraries export (they build with -fvisibility=hidden). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Fixes the shape of input `name` (dynamic dimensions), as npu-compile --input-shape. */
typedef struct npu_input_shape {
  const char* name;
  const int64_t* dims;
  size_t rank;
} npu_input_shape_t;

/* Compile options; start from npu_compile_options_init. Every pointer is borrowed for the
 * call only. */
typedef struct npu_compile_options {
  size_t struct_size; /* sizeof(npu_compile_options_t); fields beyond it take defaults */
  uint32_t array_dim; /* 0: the default array (npu_runtime_device_info gives a device's) */
  /* "minmax" (NULL), "percentile", "percentile=P" or "entropy" (npu-compile --calibration). */
  const char* calibration_method;
  /* Calibration samples: calibration_sample_count samples of calibration_input_count tensors
   * each (one per model input, in input order), sample s input k at
   * calibration[s * calibration_input_count + k]. */
  const npu_tensor_view_t* calibration;
  size_t calibration_sample_count;
  size_t calibration_input_count;
  /* Without samples: a directory DIR/<sample>/input_<k>.npy (NULL: none). With neither, the
   * compiler calibrates on deterministic random samples and says so through `progress`. */
  const char* calibration_dir;
  const npu_input_shape_t* input_shapes;
  size_t input_shape_count;
  /* When not NULL: also writes the quantised graph as a QDQ ONNX model to this path. */
  const char* export_qdq_path;
  /* Progress and warnings, one line per call, on the calling thread (NULL: silent). */
  void (*progress)(void* user_data, const char* line);
  void* progress_user_data;
  /* Nonzero: npu-compile --bias-correction (each constant-weight conv's bias absorbs its
   * input grid's mean rounding error on the calibration samples). */
  int bias_correction;
  /* npu-compile --weight-rounding: "nearest" (NULL) or "gptq" (error feedback over the
   * calibration samples). */
  const char* weight_rounding;
} npu_compile_options_t;

/* Zeroes `options` and sets struct_size. */
void npu_compile_options_init(npu_compile_options_t* options);

/* Compiles the ONNX model in `onnx` (onnx_size bytes; external data files are not
 * supported from memory: use npu_compile_onnx_file) to model-image bytes. options may be NULL
 * (defaults). *out_image (release with npu_free) and *out_size receive the image. */
npu_status_t npu_compile_onnx(const void* onnx, size_t onnx_size,
                              const npu_compile_options_t* options, uint8_t** out_image,
                              size_t* out_size);
/* As npu_compile_onnx, from a file. */
npu_status_t npu_compile_onnx_file(const char* path, const npu_compile_options_t* options,
                                   uint8_t** out_image, size_t* out_size);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* NPU_COMPILER_C_API_H_ */
