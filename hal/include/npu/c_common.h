/* What every C API of the stack shares (the runtime's npu/runtime/c_api.h and the compiler's
 * npu/compiler/c_api.h): status codes, the calling thread's last error message, element types,
 * non-owning tensor views and the release of memory a C function hands out.
 *
 * Status codes equal npu::StatusCode. The message of the last failing call on the calling
 * thread is available from npu_last_error_message(); it stays valid until the next failing
 * call on that thread. Structs that callers fill carry their own size first (struct_size), so
 * that fields can be appended without breaking the ABI: a library reads or writes only the
 * fields that fit in struct_size.
 */
#ifndef NPU_C_COMMON_H_
#define NPU_C_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The C API is what the shared libraries export (they build with -fvisibility=hidden). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
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

/* A dense row-major tensor the caller owns; functions taking one copy what they keep. */
typedef struct npu_tensor_view {
  npu_dtype_t dtype;
  const int64_t* shape;
  size_t rank;
  const void* data;
  size_t data_bytes; /* must equal the shape's element count times the element size */
} npu_tensor_view_t;

/* Name of a status code ("DEVICE_FAULT"; "UNKNOWN" for other values); static storage. */
const char* npu_status_name(npu_status_t status);
/* Message of the calling thread's last failing call ("" if none); thread-local storage. */
const char* npu_last_error_message(void);
/* Releases memory a C API function returned through an out-parameter and documented as
 * "release with npu_free" (image bytes, JSON strings). NULL is accepted and ignored. */
void npu_free(void* memory);

/* Logging. The libraries write nothing unless asked: categories are switched on by the
 * environment variable NPU_LOG (read once: "ioctl,job,sched,device,...", "all", "quiet") or by
 * npu_log_set_categories, and enabled messages go to the sink, by default one line on stderr.
 * A sink is called from whichever thread logs (device, scheduler and caller threads), one
 * message at a time; `category` and `message` are valid during the call. */
typedef void (*npu_log_sink_fn)(void* user, const char* category, const char* message);
/* Replaces the sink; NULL restores the stderr sink. */
void npu_log_set_sink(npu_log_sink_fn sink, void* user);
/* Sets the enabled categories (NPU_LOG syntax; "" or "quiet": none). NPU_INVALID_ARGUMENT
 * naming an unknown word (the known words are then still set). */
npu_status_t npu_log_set_categories(const char* categories);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* NPU_C_COMMON_H_ */
