/* The runtime's C API: opaque handles, npu_<object>_<verb> names, NULL-safe destroy
 * functions, results through out-parameters, and status codes equal to npu::StatusCode.
 * Status codes, dtypes, npu_last_error_message() and npu_free() are in npu/c_common.h, shared
 * with the compiler's C API (npu/compiler/c_api.h, ONNX -> model image).
 *
 * Errors: every fallible function returns an npu_status_t (NPU_OK = 0). The message of the
 * last failing call on the calling thread is available from npu_last_error_message(); it
 * stays valid until the next failing call on that thread.
 * Ownership: every object returned through an out-parameter belongs to the caller, who
 * releases it with the matching npu_<object>_destroy (NULL is accepted and ignored).
 * Objects keep what they need alive: destroying a runtime or model while sessions use them is
 * safe; the memory is released with the last user.
 * Threading: all functions are thread-safe. npu_session_run(_with_stats) and
 * npu_completion_queue_recv block, npu_async_session_submit up to its timeout (as documented);
 * nothing else blocks beyond a driver call.
 * Structs filled by the library start with struct_size, which the caller sets: the library
 * writes only the fields that fit, so fields can be appended without breaking the ABI.
 */
#ifndef NPU_RUNTIME_C_API_H_
#define NPU_RUNTIME_C_API_H_

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

/* Timeouts in microseconds; NPU_WAIT_FOREVER waits without limit, 0 never waits. */
#define NPU_WAIT_FOREVER INT64_C(-1)

typedef struct npu_runtime npu_runtime_t;
typedef struct npu_model npu_model_t;
typedef struct npu_tensor npu_tensor_t;
typedef struct npu_session npu_session_t;
typedef struct npu_async_session npu_async_session_t;
typedef struct npu_completion_queue npu_completion_queue_t;
typedef struct npu_completion npu_completion_t;

/* A device of a runtime (npu_runtime_device_info). Strings point into the runtime. */
typedef struct npu_device_info {
  size_t struct_size;   /* set by the caller: sizeof(npu_device_info_t) */
  const char* spec;     /* the name it was opened by: "sim", "accel:0", ... */
  const char* platform; /* "silicon", "rtl" or "functional" */
  uint32_t array_dim;   /* the MAC array is array_dim x array_dim (compile for this) */
  uint32_t clock_mhz;
  uint64_t fingerprint; /* hardware fingerprint an image must carry */
} npu_device_info_t;

/* Quantisation of a tensor: real = scale * (q - zero_point); per tensor when axis < 0 (one
 * scale and zero point), else one per index of dimension `axis`. */
typedef struct npu_quant_info {
  int32_t axis;
  size_t count;              /* number of scales and zero points */
  const float* scale;        /* count entries */
  const int32_t* zero_point; /* count entries */
} npu_quant_info_t;

/* Describes a model input or output (npu_model_input_desc). Every pointer points into the
 * model and stays valid while the model lives. The user-facing tensor is dense and row-major:
 * element stride of dimension i = the product of the dimensions after i. */
typedef struct npu_tensor_desc {
  size_t struct_size; /* set by the caller: sizeof(npu_tensor_desc_t) */
  const char* name;
  npu_dtype_t dtype; /* what the caller passes or receives */
  size_t rank;
  const int64_t* shape; /* rank entries */
  const char* layout;   /* "NCHW", "NC", ... ("" when the model does not say) */
  /* The quantisation the image records for the user-facing tensor (quantized 0: none). For
   * an integer-typed tensor it gives the meaning of its codes; for a float tensor it is the
   * compiler's calibrated range, and the runtime does the conversion. */
  int32_t quantized;
  npu_quant_info_t quant;
  /* The device view the runtime converts to and from (on_device 0: only the host touches
   * this value). */
  int32_t on_device;
  npu_dtype_t device_dtype;
  npu_quant_info_t device_quant;
} npu_tensor_desc_t;

/* Per-request measurements (npu_session_run_with_stats, npu_completion_stats). */
typedef struct npu_run_stats {
  size_t struct_size; /* set by the caller: sizeof(npu_run_stats_t) */
  uint64_t request_id;
  uint32_t device_index;
  int32_t retried;        /* an ABORTED job was resubmitted */
  uint64_t device_cycles; /* sum over the request's NPU jobs (device clock) */
  double queue_us;        /* accepted -> started on a device context */
  double device_us;       /* started -> device finished (includes host steps) */
  double copy_in_us;      /* quantising the inputs */
  double copy_out_us;     /* dequantising the outputs */
  double total_us;        /* run/submit call -> outputs ready */
} npu_run_stats_t;

/* Opens the devices named by `device_spec` ("sim", "rtl", "accel:0", a comma-separated list;
 * NULL or "" = $NPU_DEVICE, else "sim"). No silent fallback. */
npu_status_t npu_runtime_open(const char* device_spec, npu_runtime_t** out_runtime);
void npu_runtime_destroy(npu_runtime_t* runtime);
size_t npu_runtime_device_count(const npu_runtime_t* runtime);
/* Describes device `index` (INVALID_ARGUMENT when out of range). */
npu_status_t npu_runtime_device_info(const npu_runtime_t* runtime, size_t index,
                                     npu_device_info_t* out_info);
/* Profiling: between start and end every request of every session on this runtime records
 * its spans (queue, copy-in, device, copy-out; per-request thread rows, per-device process
 * rows). end stops it and writes the Chrome trace-event JSON to `path` (NULL: no file; the
 * file is replaced); when out_json is not NULL it also receives the JSON (release with
 * npu_free). Never blocks beyond writing the file. */
npu_status_t npu_runtime_start_profiling(npu_runtime_t* runtime);
/* The trace clock: microseconds since the runtime was opened, as the trace's "ts" values
 * (to align the traces of several runtimes). */
int64_t npu_runtime_clock_us(const npu_runtime_t* runtime);
npu_status_t npu_runtime_end_profiling(npu_runtime_t* runtime, const char* path,
                                       char** out_json);

/* Loads and verifies a model image file. */
npu_status_t npu_model_load(const char* path, npu_model_t** out_model);
/* Loads and verifies a model image held in memory (`data` is copied). `origin` (may be NULL)
 * names it in messages. An ONNX model is compiled to image bytes first with
 * npu_compile_onnx (npu/compiler/c_api.h). */
npu_status_t npu_model_load_bytes(const void* data, size_t size, const char* origin,
                                  npu_model_t** out_model);
/* 1 when `data` starts like a model image (its FlatBuffers file identifier), else 0: how a
 * binding tells image bytes from ONNX bytes. Does not verify. */
int npu_model_bytes_are_image(const void* data, size_t size);
void npu_model_destroy(npu_model_t* model);
size_t npu_model_input_count(const npu_model_t* model);
size_t npu_model_output_count(const npu_model_t* model);
/* Describes input/output `index`. out_name points into the model (valid while it lives);
 * up to `shape_capacity` dimensions go to out_shape, the rank to out_rank. Any out pointer
 * may be NULL. */
npu_status_t npu_model_input_info(const npu_model_t* model, size_t index, const char** out_name,
                                  npu_dtype_t* out_dtype, int64_t* out_shape,
                                  size_t shape_capacity, size_t* out_rank);
npu_status_t npu_model_output_info(const npu_model_t* model, size_t index,
                                   const char** out_name, npu_dtype_t* out_dtype,
                                   int64_t* out_shape, size_t shape_capacity, size_t* out_rank);
/* Full descriptors of input/output `index` (INVALID_ARGUMENT when out of range). */
npu_status_t npu_model_input_desc(const npu_model_t* model, size_t index,
                                  npu_tensor_desc_t* out_desc);
npu_status_t npu_model_output_desc(const npu_model_t* model, size_t index,
                                   npu_tensor_desc_t* out_desc);
/* Model summary as text (json = 0) or JSON (json != 0). The string is owned by the model. */
const char* npu_model_summary(const npu_model_t* model, int json);

/* Tensors: dense, row-major, owning their bytes. `data` (may be NULL: zeros) is copied. */
npu_status_t npu_tensor_create(npu_dtype_t dtype, const int64_t* shape, size_t rank,
                               const void* data, size_t data_bytes, npu_tensor_t** out_tensor);
void npu_tensor_destroy(npu_tensor_t* tensor);
npu_dtype_t npu_tensor_dtype(const npu_tensor_t* tensor);
size_t npu_tensor_rank(const npu_tensor_t* tensor);
int64_t npu_tensor_dim(const npu_tensor_t* tensor, size_t axis);
/* The bytes; owned by the tensor. */
const void* npu_tensor_data(const npu_tensor_t* tensor);
/* The same bytes, writable: a tensor the caller owns (an output) may be used in place. */
void* npu_tensor_mutable_data(npu_tensor_t* tensor);
size_t npu_tensor_byte_size(const npu_tensor_t* tensor);

/* Blocking sessions. npu_session_run blocks until the outputs are ready; safe from many
 * threads. out_outputs receives output_count new tensors (the caller destroys each);
 * output_count must equal npu_model_output_count. */
npu_status_t npu_session_create(npu_runtime_t* runtime, const npu_model_t* model,
                                npu_session_t** out_session);
void npu_session_destroy(npu_session_t* session);
npu_status_t npu_session_run(npu_session_t* session, const npu_tensor_t* const* inputs,
                             size_t input_count, npu_tensor_t** out_outputs,
                             size_t output_count);
/* As npu_session_run; out_stats (may be NULL) receives the request's measurements. */
npu_status_t npu_session_run_with_stats(npu_session_t* session,
                                        const npu_tensor_t* const* inputs, size_t input_count,
                                        npu_tensor_t** out_outputs, size_t output_count,
                                        npu_run_stats_t* out_stats);
/* Runs without blocking: `callback` is called exactly once, on the runtime's completion
 * thread with no runtime lock held, with `user_context` and a completion it owns (release with
 * npu_completion_destroy; NULL only when the host ran out of memory for it). The callback
 * may call into the runtime but must not destroy this session. Returns the error, and never
 * calls back, when the request is not accepted. Destroying the session waits for the
 * callbacks of its requests. */
typedef void (*npu_completion_callback_t)(void* user_context, npu_completion_t* completion);
npu_status_t npu_session_run_async(npu_session_t* session, const npu_tensor_t* const* inputs,
                                   size_t input_count, npu_completion_callback_t callback,
                                   void* user_context);

/* Async sessions: submit never blocks longer than timeout_us waiting for room
 * (NPU_RESOURCE_EXHAUSTED after it; 0 = try once). user_context is handed back in the
 * completion, never dereferenced; every accepted request completes exactly once, so a binding
 * may release what the context stands for when its completion is received.
 * max_outstanding (0 = 64) bounds the requests submitted and not yet received.
 * Closing or destroying the async session closes the submit side and drains: pending requests
 * still complete, then recv returns NPU_UNAVAILABLE. Closing or destroying the queue closes
 * the submit side too and cancels pending requests: each still completes, CANCELLED, and can
 * be received from a closed (not destroyed) queue until NPU_UNAVAILABLE. Destroying the queue
 * drops the completions nobody received: receive them first when their contexts own memory.
 * npu_async_session_cancel cancels that request only (NPU_NOT_FOUND when it is no longer
 * pending); it completes CANCELLED. */
npu_status_t npu_async_session_create(npu_runtime_t* runtime, const npu_model_t* model,
                                      uint32_t max_outstanding,
                                      npu_async_session_t** out_session,
                                      npu_completion_queue_t** out_queue);
void npu_async_session_destroy(npu_async_session_t* session);
npu_status_t npu_async_session_submit(npu_async_session_t* session,
                                      const npu_tensor_t* const* inputs, size_t input_count,
                                      void* user_context, int64_t timeout_us,
                                      uint64_t* out_request_id);
npu_status_t npu_async_session_cancel(npu_async_session_t* session, uint64_t request_id);
void npu_async_session_close(npu_async_session_t* session);

/* Waits up to timeout_us for a completion: NPU_DEADLINE_EXCEEDED when none arrived,
 * NPU_UNAVAILABLE when closed and drained. */
npu_status_t npu_completion_queue_recv(npu_completion_queue_t* queue, int64_t timeout_us,
                                       npu_completion_t** out_completion);
void npu_completion_queue_close(npu_completion_queue_t* queue);
/* Requests submitted and not yet received. */
size_t npu_completion_queue_outstanding(const npu_completion_queue_t* queue);
void npu_completion_queue_destroy(npu_completion_queue_t* queue);

/* A received completion: the request's status (its message via npu_completion_message),
 * its user context and its outputs (owned by the completion; take ownership with
 * npu_completion_take_output). */
npu_status_t npu_completion_status(const npu_completion_t* completion);
const char* npu_completion_message(const npu_completion_t* completion);
uint64_t npu_completion_request_id(const npu_completion_t* completion);
void* npu_completion_user_context(const npu_completion_t* completion);
size_t npu_completion_output_count(const npu_completion_t* completion);
/* Moves output `index` out (the caller destroys it); NULL if absent or already taken. */
npu_tensor_t* npu_completion_take_output(npu_completion_t* completion, size_t index);
/* The request's measurements (zeros for a request that never ran). */
npu_status_t npu_completion_stats(const npu_completion_t* completion,
                                  npu_run_stats_t* out_stats);
void npu_completion_destroy(npu_completion_t* completion);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* NPU_RUNTIME_C_API_H_ */
