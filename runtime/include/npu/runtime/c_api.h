/* The runtime's C API: opaque handles, npu_<object>_<verb> names, NULL-safe destroy
 * functions, results through out-parameters, and status codes equal to npu::StatusCode.
 *
 * Errors: every fallible function returns an npu_status_t (NPU_OK = 0). The message of the
 * last failing call on the calling thread is available from npu_last_error_message(); it
 * stays valid until the next failing call on that thread.
 * Ownership: every object returned through an out-parameter belongs to the caller, who
 * releases it with the matching npu_<object>_destroy (NULL is accepted and ignored).
 * Objects keep what they need alive: destroying a runtime or model while sessions use them is
 * safe; the memory is released with the last user.
 * Threading: all functions are thread-safe. npu_session_run and npu_completion_queue_recv
 * block (as documented); nothing else blocks beyond a driver call.
 */
#ifndef NPU_RUNTIME_C_API_H_
#define NPU_RUNTIME_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t npu_status_t;
enum {
  NPU_OK = 0,
  NPU_INVALID_ARGUMENT = 1,
  NPU_NOT_FOUND = 2,
  NPU_PERMISSION_DENIED = 3,
  NPU_RESOURCE_EXHAUSTED = 4,
  NPU_DEADLINE_EXCEEDED = 5,
  NPU_CANCELLED = 6,
  NPU_DEVICE_LOST = 7,
  NPU_DEVICE_TIMEOUT = 8,
  NPU_DEVICE_FAULT = 9,
  NPU_ABORTED = 10,
  NPU_UNSUPPORTED = 11,
  NPU_INCOMPATIBLE = 12,
  NPU_CORRUPT_DATA = 13,
  NPU_INTERNAL = 14,
  NPU_UNAVAILABLE = 15
};

/* Element types; values equal npu::DType. */
typedef enum {
  NPU_DTYPE_FLOAT32 = 0,
  NPU_DTYPE_INT8 = 1,
  NPU_DTYPE_UINT8 = 2,
  NPU_DTYPE_INT32 = 3,
  NPU_DTYPE_INT64 = 4
} npu_dtype_t;

/* Timeouts in microseconds; NPU_WAIT_FOREVER waits without limit, 0 never waits. */
#define NPU_WAIT_FOREVER INT64_C(-1)

typedef struct npu_runtime npu_runtime_t;
typedef struct npu_model npu_model_t;
typedef struct npu_tensor npu_tensor_t;
typedef struct npu_session npu_session_t;
typedef struct npu_async_session npu_async_session_t;
typedef struct npu_completion_queue npu_completion_queue_t;
typedef struct npu_completion npu_completion_t;

/* Name of a status code ("DEVICE_FAULT"); static storage. */
const char* npu_status_name(npu_status_t status);
/* Message of the calling thread's last failing call ("" if none); thread-local storage. */
const char* npu_last_error_message(void);

/* Opens the devices named by `device_spec` ("sim", "rtl", "accel:0", a comma-separated list;
 * NULL or "" = $NPU_DEVICE, else "sim"). No silent fallback. */
npu_status_t npu_runtime_open(const char* device_spec, npu_runtime_t** out_runtime);
void npu_runtime_destroy(npu_runtime_t* runtime);

/* Loads and verifies a model image file. */
npu_status_t npu_model_load(const char* path, npu_model_t** out_model);
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

/* Async sessions: submit never blocks longer than timeout_us waiting for room
 * (NPU_RESOURCE_EXHAUSTED after it). user_context is handed back in the completion.
 * Destroying the async session closes the submit side (pending requests still complete);
 * destroying or closing the queue cancels pending requests (each completes CANCELLED). */
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
void npu_completion_destroy(npu_completion_t* completion);

#ifdef __cplusplus
}
#endif

#endif /* NPU_RUNTIME_C_API_H_ */
