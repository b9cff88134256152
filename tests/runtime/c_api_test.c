/* The C API from C: open, load (file, image bytes, ONNX bytes compiled by the compiler's C
 * API), introspect (descriptors with layout and quantisation), run (with stats), run_async
 * callbacks, async submit/recv/cancel, close that drains and close that cancels (each request
 * exactly once), profiling, errors. argv: [image path] [ONNX model to compile]. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "npu/compiler/c_api.h"
#include "npu/runtime/c_api.h"

int npu_test_write_identity_image(const char* path);

static int failures = 0;
#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__,    \
              __LINE__, #cond, npu_last_error_message());                        \
      ++failures;                                                                \
    }                                                                            \
  } while (0)

static float expected(float x) {
  /* scale 0.05, zero point 3, ties to even */
  float q = nearbyintf(x / 0.05f) + 3;
  if (q > 127) q = 127;
  if (q < -128) q = -128;
  return 0.05f * (q - 3);
}

/* Reads a whole file (malloc'ed; NULL on failure). */
static void* read_file(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* p = malloc(n > 0 ? (size_t)n : 1);
  if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *out_size = (size_t)n;
  return p;
}

static int progress_lines = 0;
static int weight_rounding_lines = 0; /* "weight rounding: ..." progress lines */
static void on_progress(void* user, const char* line) {
  if (user == &progress_lines) ++progress_lines;
  if (strncmp(line, "weight rounding:", 16) == 0) ++weight_rounding_lines;
}

static atomic_int callback_calls[8];
static void on_complete(void* user_context, npu_completion_t* c) {
  int tag = *(int*)user_context;
  atomic_fetch_add(&callback_calls[tag], 1);
  if (!c || npu_completion_status(c) != NPU_OK || npu_completion_user_context(c) != user_context)
    atomic_fetch_add(&callback_calls[7], 1); /* slot 7: wrong completions */
  npu_completion_destroy(c);
}

/* Receives the next completion into *out (the caller destroys it) and counts its int tag in
 * seen[]: 1, or 0 once the queue is closed and drained (or on a failure, which is CHECKed). */
static int next_completion(npu_completion_queue_t* cq, int* seen, npu_completion_t** out) {
  *out = NULL;
  npu_status_t st = npu_completion_queue_recv(cq, 10 * 1000 * 1000, out);
  if (st == NPU_UNAVAILABLE) return 0;
  CHECK(st == NPU_OK);
  if (st != NPU_OK) return 0;
  int* tag = (int*)npu_completion_user_context(*out);
  CHECK(tag != NULL);
  if (tag) seen[*tag]++;
  return 1;
}

/* Submits n requests, closes the queue, and receives them all: each exactly once, OK or
 * CANCELLED, then UNAVAILABLE. Returns the number cancelled. */
static int close_cancel(npu_runtime_t* rt, npu_model_t* model, const npu_tensor_t* const* inputs) {
  enum { n = 24 };
  npu_async_session_t* as = NULL;
  npu_completion_queue_t* cq = NULL;
  CHECK(npu_async_session_create(rt, model, n, &as, &cq) == NPU_OK);
  if (!as) return 0;
  int tags[n], seen[n];
  for (int i = 0; i < n; ++i) {
    tags[i] = i;
    seen[i] = 0;
    CHECK(npu_async_session_submit(as, inputs, 1, &tags[i], NPU_WAIT_FOREVER, NULL) == NPU_OK);
  }
  CHECK(npu_completion_queue_outstanding(cq) == n);
  npu_completion_queue_close(cq);
  /* The queue closed the submit side too. */
  CHECK(npu_async_session_submit(as, inputs, 1, NULL, 0, NULL) == NPU_UNAVAILABLE);
  int cancelled = 0;
  npu_completion_t* c = NULL;
  while (next_completion(cq, seen, &c)) {
    npu_status_t st = npu_completion_status(c);
    CHECK(st == NPU_OK || st == NPU_CANCELLED);
    if (st == NPU_CANCELLED) {
      ++cancelled;
      CHECK(npu_completion_output_count(c) == 0);
    }
    npu_completion_destroy(c);
  }
  for (int i = 0; i < n; ++i) CHECK(seen[i] == 1);
  CHECK(npu_completion_queue_outstanding(cq) == 0);
  npu_async_session_destroy(as);
  npu_completion_queue_destroy(cq);
  return cancelled;
}

/* Logging through the application's sink: counts "device" lines that name sim. */
static int device_lines = 0, fault_notices = 0, other_lines = 0;
static void on_log(void* user, const char* category, const char* message) {
  if (user != &device_lines) return;
  if (strcmp(category, "device") == 0 && strstr(message, "opened sim") != NULL)
    ++device_lines;
  else if (strcmp(category, "fault") == 0 && strstr(message, "ignoring NPU_FAULT") != NULL)
    ++fault_notices;
  else
    ++other_lines;
}

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "c_api_identity.npuimg";
  const char* onnx_path = argc > 2 ? argv[2] : NULL;
  if (npu_test_write_identity_image(path) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }

  /* NULL-safe destroy functions. */
  npu_runtime_destroy(NULL);
  npu_model_destroy(NULL);
  npu_tensor_destroy(NULL);
  npu_session_destroy(NULL);
  npu_async_session_destroy(NULL);
  npu_completion_queue_destroy(NULL);
  npu_completion_destroy(NULL);
  npu_free(NULL);

  /* Quiet by default (ctest also sets NPU_LOG=quiet); categories and the sink are the
   * application's to set. */
  npu_log_set_sink(on_log, &device_lines);
  CHECK(npu_log_set_categories("device") == NPU_OK);
  /* A setting that cannot be honoured reaches the sink whatever the categories: a malformed
   * NPU_FAULT, read once by the kernel-driver model (inside the plugin) as it creates sim. */
  setenv("NPU_FAULT", "no-such-fault", 1);
  npu_runtime_t* logged = NULL;
  CHECK(npu_runtime_open("sim", &logged) == NPU_OK);
  npu_runtime_destroy(logged);
  unsetenv("NPU_FAULT");
  CHECK(device_lines == 1);
  CHECK(fault_notices == 1);
  CHECK(other_lines == 0);
  CHECK(npu_log_set_categories("device,bogus") == NPU_INVALID_ARGUMENT);
  CHECK(strstr(npu_last_error_message(), "unknown category 'bogus'") != NULL);
  CHECK(npu_log_set_categories("quiet") == NPU_OK);
  CHECK(npu_runtime_open("sim", &logged) == NPU_OK);
  npu_runtime_destroy(logged);
  CHECK(device_lines == 1);
  npu_log_set_sink(NULL, NULL);

  /* Errors carry codes and messages. */
  npu_runtime_t* rt = NULL;
  CHECK(npu_runtime_open("no-such-device", &rt) == NPU_NOT_FOUND);
  CHECK(rt == NULL);
  CHECK(strstr(npu_last_error_message(), "no-such-device") != NULL);
  CHECK(strcmp(npu_status_name(NPU_DEVICE_FAULT), "DEVICE_FAULT") == 0);
  npu_model_t* model = NULL;
  CHECK(npu_model_load("/nonexistent.npuimg", &model) == NPU_NOT_FOUND);

  CHECK(npu_runtime_open("sim", &rt) == NPU_OK);
  CHECK(npu_model_load(path, &model) == NPU_OK);
  if (!rt || !model) return 1;

  CHECK(npu_model_input_count(model) == 1);
  CHECK(npu_model_output_count(model) == 1);
  const char* name = NULL;
  npu_dtype_t dtype;
  int64_t shape[4];
  size_t rank = 0;
  CHECK(npu_model_input_info(model, 0, &name, &dtype, shape, 4, &rank) == NPU_OK);
  CHECK(name && strcmp(name, "x") == 0);
  CHECK(dtype == NPU_DTYPE_FLOAT32 && rank == 2 && shape[0] == 4 && shape[1] == 16);
  CHECK(npu_model_input_info(model, 5, NULL, NULL, NULL, 0, NULL) == NPU_INVALID_ARGUMENT);
  CHECK(strstr(npu_model_summary(model, 1), "\"inputs\"") != NULL);

  float data[64];
  for (int i = 0; i < 64; ++i) data[i] = (float)(i - 32) * 0.037f;
  npu_tensor_t* in = NULL;
  CHECK(npu_tensor_create(NPU_DTYPE_FLOAT32, shape, 2, data, sizeof data, &in) == NPU_OK);
  npu_tensor_t* bad = NULL;
  CHECK(npu_tensor_create(NPU_DTYPE_FLOAT32, shape, 2, data, 7, &bad) == NPU_INVALID_ARGUMENT);

  /* Blocking run. */
  npu_session_t* session = NULL;
  CHECK(npu_session_create(rt, model, &session) == NPU_OK);
  npu_tensor_t* out = NULL;
  const npu_tensor_t* inputs[1] = {in};
  CHECK(npu_session_run(session, inputs, 1, &out, 1) == NPU_OK);
  if (out) {
    const float* y = (const float*)npu_tensor_data(out);
    CHECK(npu_tensor_rank(out) == 2 && npu_tensor_dim(out, 1) == 16);
    for (int i = 0; i < 64; ++i) CHECK(y[i] == expected(data[i]));
  }
  npu_tensor_destroy(out);
  /* A wrong shape is refused with a message. */
  int64_t wrong[2] = {4, 15};
  npu_tensor_t* small = NULL;
  CHECK(npu_tensor_create(NPU_DTYPE_FLOAT32, wrong, 2, NULL, 0, &small) == NPU_OK);
  const npu_tensor_t* bad_inputs[1] = {small};
  CHECK(npu_session_run(session, bad_inputs, 1, &out, 1) == NPU_INVALID_ARGUMENT);
  CHECK(strstr(npu_last_error_message(), "[4,15]") != NULL);
  npu_tensor_destroy(small);

  /* Async: submit, cancel one, receive all exactly once, close. */
  npu_async_session_t* as = NULL;
  npu_completion_queue_t* cq = NULL;
  CHECK(npu_async_session_create(rt, model, 8, &as, &cq) == NPU_OK);
  int tags[6] = {0, 1, 2, 3, 4, 5};
  int seen[6] = {0};
  uint64_t ids[6];
  for (int i = 0; i < 6; ++i)
    CHECK(npu_async_session_submit(as, inputs, 1, &tags[i], NPU_WAIT_FOREVER, &ids[i]) == NPU_OK);
  npu_status_t cancel = npu_async_session_cancel(as, ids[5]);
  CHECK(cancel == NPU_OK || cancel == NPU_NOT_FOUND); /* it may have finished already */
  npu_async_session_close(as);
  CHECK(npu_async_session_submit(as, inputs, 1, NULL, 0, NULL) == NPU_UNAVAILABLE);
  npu_completion_t* c = NULL;
  while (next_completion(cq, seen, &c)) {
    const int* tag = (const int*)npu_completion_user_context(c);
    if (npu_completion_status(c) == NPU_OK) {
      CHECK(npu_completion_output_count(c) == 1);
      npu_tensor_t* y = npu_completion_take_output(c, 0);
      CHECK(y != NULL);
      CHECK(npu_completion_take_output(c, 0) == NULL);
      if (y) CHECK(((const float*)npu_tensor_data(y))[3] == expected(data[3]));
      npu_tensor_destroy(y);
    } else {
      CHECK(npu_completion_status(c) == NPU_CANCELLED && tag == &tags[5]);
    }
    npu_completion_destroy(c);
  }
  for (int i = 0; i < 6; ++i) CHECK(seen[i] == 1);
  npu_completion_queue_close(cq);
  npu_completion_queue_close(cq);

  npu_async_session_destroy(as);
  npu_completion_queue_destroy(cq);

  /* Devices. */
  CHECK(npu_runtime_device_count(rt) == 1);
  npu_device_info_t dev;
  dev.struct_size = sizeof dev;
  CHECK(npu_runtime_device_info(rt, 0, &dev) == NPU_OK);
  CHECK(strcmp(dev.spec, "sim") == 0 && strcmp(dev.platform, "functional") == 0);
  CHECK(dev.array_dim == 8 || dev.array_dim == 16 || dev.array_dim == 32);
  CHECK(npu_runtime_device_info(rt, 1, &dev) == NPU_INVALID_ARGUMENT);
  dev.struct_size = 0;
  CHECK(npu_runtime_device_info(rt, 0, &dev) == NPU_INVALID_ARGUMENT);

  /* Descriptors: name, dtype, shape, layout, device quantisation. */
  npu_tensor_desc_t desc;
  memset(&desc, 0, sizeof desc);
  desc.struct_size = sizeof desc;
  CHECK(npu_model_input_desc(model, 0, &desc) == NPU_OK);
  CHECK(desc.name && strcmp(desc.name, "x") == 0 && desc.dtype == NPU_DTYPE_FLOAT32);
  CHECK(desc.rank == 2 && desc.shape[0] == 4 && desc.shape[1] == 16);
  CHECK(desc.layout && strcmp(desc.layout, "NC") == 0);
  CHECK(desc.quantized == 0 && desc.on_device == 1 && desc.device_dtype == NPU_DTYPE_INT8);
  CHECK(desc.device_quant.axis == -1 && desc.device_quant.count == 1);
  CHECK(desc.device_quant.count == 1 && desc.device_quant.scale[0] == 0.05f &&
        desc.device_quant.zero_point[0] == 3);
  CHECK(npu_model_output_desc(model, 0, &desc) == NPU_OK && strcmp(desc.name, "y") == 0);
  CHECK(npu_model_output_desc(model, 1, &desc) == NPU_INVALID_ARGUMENT);
  /* An older caller's shorter struct: nothing beyond its struct_size is written. */
  {
    unsigned char raw[sizeof(npu_tensor_desc_t)];
    memset(raw, 0xAB, sizeof raw);
    npu_tensor_desc_t* d = (npu_tensor_desc_t*)raw;
    const size_t short_size = offsetof(npu_tensor_desc_t, dtype);
    d->struct_size = short_size;
    CHECK(npu_model_input_desc(model, 0, d) == NPU_OK);
    CHECK(d->struct_size == short_size && strcmp(d->name, "x") == 0);
    CHECK(raw[short_size] == 0xAB && raw[sizeof raw - 1] == 0xAB);
  }

  /* Per-request stats. */
  npu_run_stats_t stats;
  stats.struct_size = sizeof stats;
  CHECK(npu_session_run_with_stats(session, inputs, 1, &out, 1, &stats) == NPU_OK);
  npu_tensor_destroy(out);
  CHECK(stats.request_id != 0 && stats.total_us > 0 && stats.device_cycles > 0);
  CHECK(stats.total_us >= stats.copy_in_us && stats.total_us >= stats.copy_out_us);

  /* Profiling: a Chrome trace file with the request's spans. */
  char trace_path[512];
  snprintf(trace_path, sizeof trace_path, "%s.trace.json", path);
  const int64_t clock0 = npu_runtime_clock_us(rt);
  CHECK(clock0 > 0 && npu_runtime_clock_us(NULL) == 0);
  CHECK(npu_runtime_start_profiling(rt) == NPU_OK);
  for (int i = 0; i < 3; ++i) {
    CHECK(npu_session_run(session, inputs, 1, &out, 1) == NPU_OK);
    npu_tensor_destroy(out);
  }
  char* json = NULL;
  CHECK(npu_runtime_end_profiling(rt, trace_path, &json) == NPU_OK);
  size_t trace_size = 0;
  char* trace = (char*)read_file(trace_path, &trace_size);
  CHECK(trace != NULL && json != NULL);
  if (trace && json) {
    CHECK(trace_size == strlen(json) && memcmp(trace, json, trace_size) == 0);
    CHECK(strstr(json, "\"traceEvents\"") && strstr(json, "\"ph\":\"X\""));
    CHECK(strstr(json, "\"name\":\"device\"") && strstr(json, "\"name\":\"copy-in\""));
  }
  free(trace);
  npu_free(json);
  /* Not profiling: an empty trace. */
  CHECK(npu_runtime_end_profiling(rt, NULL, &json) == NPU_OK);
  CHECK(json && strstr(json, "\"ph\":\"X\"") == NULL);
  npu_free(json);
  CHECK(npu_runtime_end_profiling(rt, "/nonexistent-dir/x.json", NULL) == NPU_INVALID_ARGUMENT);

  /* run_async: one callback per request, with its context. */
  int cb_tags[6] = {0, 1, 2, 3, 4, 5};
  for (int i = 0; i < 6; ++i)
    CHECK(npu_session_run_async(session, inputs, 1, on_complete, &cb_tags[i]) == NPU_OK);
  CHECK(npu_session_run_async(session, bad_inputs, 0, on_complete, &cb_tags[0]) ==
        NPU_INVALID_ARGUMENT);
  npu_session_destroy(session); /* waits for the callbacks */
  session = NULL;
  for (int i = 0; i < 6; ++i) CHECK(atomic_load(&callback_calls[i]) == 1);
  CHECK(atomic_load(&callback_calls[7]) == 0);

  /* Close that cancels: every request still completes exactly once. */
  int cancelled = close_cancel(rt, model, inputs);
  printf("c_api_test: closing the queue cancelled %d of 24 requests\n", cancelled);

  /* Completion stats. */
  CHECK(npu_async_session_create(rt, model, 4, &as, &cq) == NPU_OK);
  CHECK(npu_async_session_submit(as, inputs, 1, NULL, NPU_WAIT_FOREVER, &ids[0]) == NPU_OK);
  {
    c = NULL;
    CHECK(npu_completion_queue_recv(cq, 10 * 1000 * 1000, &c) == NPU_OK);
    stats.struct_size = sizeof stats;
    CHECK(npu_completion_stats(c, &stats) == NPU_OK);
    CHECK(stats.request_id == ids[0] && stats.device_cycles > 0);
    npu_completion_destroy(c);
    /* Poll: nothing there. */
    CHECK(npu_completion_queue_recv(cq, 0, &c) == NPU_DEADLINE_EXCEEDED && c == NULL);
    CHECK(npu_completion_stats(NULL, &stats) == NPU_INVALID_ARGUMENT);
  }
  npu_async_session_destroy(as);
  npu_completion_queue_destroy(cq);

  /* Image bytes. */
  size_t image_size = 0;
  void* image = read_file(path, &image_size);
  CHECK(image != NULL);
  npu_model_t* from_bytes = NULL;
  if (image) {
    CHECK(npu_model_bytes_are_image(image, image_size) == 1);
    CHECK(npu_model_load_bytes(image, image_size, "identity", &from_bytes) == NPU_OK);
    CHECK(npu_model_input_count(from_bytes) == 1);
    /* A truncated image is refused by the verifier. */
    npu_model_t* broken = NULL;
    CHECK(npu_model_load_bytes(image, image_size / 2, "half", &broken) == NPU_CORRUPT_DATA);
    CHECK(broken == NULL && strstr(npu_last_error_message(), "half") != NULL);
  }
  CHECK(npu_model_bytes_are_image("not an image", 12) == 0);
  CHECK(npu_model_bytes_are_image(NULL, 0) == 0);
  npu_model_destroy(from_bytes);
  CHECK(npu_model_load_bytes(NULL, 0, NULL, &from_bytes) == NPU_CORRUPT_DATA);
  CHECK(from_bytes == NULL);
  free(image);

  /* ONNX bytes compiled by the compiler's C API, loaded and run. */
  if (onnx_path) {
    size_t onnx_size = 0;
    void* onnx = read_file(onnx_path, &onnx_size);
    CHECK(onnx != NULL);
    npu_compile_options_t copts;
    npu_compile_options_init(&copts);
    CHECK(copts.struct_size == sizeof copts);
    copts.array_dim = dev.array_dim;
    copts.calibration_method = "percentile=99.9";
    copts.progress = on_progress;
    copts.progress_user_data = &progress_lines;
    uint8_t* compiled = NULL;
    size_t compiled_size = 0;
    CHECK(onnx && npu_compile_onnx(onnx, onnx_size, &copts, &compiled, &compiled_size) == NPU_OK);
    CHECK(progress_lines > 0); /* the random-calibration warning at least */
    CHECK(compiled && npu_model_bytes_are_image(compiled, compiled_size) == 1);
    CHECK(npu_model_bytes_are_image(onnx, onnx_size) == 0);
    npu_model_t* m = NULL;
    CHECK(npu_model_load_bytes(compiled, compiled_size, onnx_path, &m) == NPU_OK);
    npu_free(compiled);
    if (m) {
      npu_tensor_desc_t in_desc;
      in_desc.struct_size = sizeof in_desc;
      CHECK(npu_model_input_desc(m, 0, &in_desc) == NPU_OK);
      /* Calibration samples as tensor views: one sample of zeros. */
      int64_t elems = 1;
      for (size_t i = 0; i < in_desc.rank; ++i) elems *= in_desc.shape[i];
      float* zeros = (float*)calloc((size_t)elems, sizeof(float));
      npu_tensor_view_t sample = {NPU_DTYPE_FLOAT32, in_desc.shape, in_desc.rank, zeros,
                                  (size_t)elems * sizeof(float)};
      copts.calibration = &sample;
      copts.calibration_sample_count = 1;
      copts.calibration_input_count = 1;
      copts.progress = NULL;
      CHECK(npu_compile_onnx_file(onnx_path, &copts, &compiled, &compiled_size) == NPU_OK);
      npu_free(compiled);
      /* npu-compile's --bias-correction and --weight-rounding gptq: the passes run and say so. */
      progress_lines = 0;
      weight_rounding_lines = 0;
      copts.progress = on_progress;
      copts.bias_correction = 1;
      copts.weight_rounding = "gptq";
      CHECK(npu_compile_onnx_file(onnx_path, &copts, &compiled, &compiled_size) == NPU_OK);
      CHECK(weight_rounding_lines == 1);
      npu_free(compiled);
      copts.weight_rounding = "best";
      CHECK(npu_compile_onnx_file(onnx_path, &copts, &compiled, &compiled_size) == NPU_INVALID_ARGUMENT);
      CHECK(strstr(npu_last_error_message(), "weight_rounding \"best\"") != NULL);
      copts.weight_rounding = NULL;
      copts.bias_correction = 0;
      copts.progress = NULL;
      sample.data_bytes -= 4;
      CHECK(npu_compile_onnx_file(onnx_path, &copts, &compiled, &compiled_size) ==
            NPU_INVALID_ARGUMENT);
      CHECK(strstr(npu_last_error_message(), "calibration sample 0 input 0") != NULL);

      npu_session_t* s2 = NULL;
      CHECK(npu_session_create(rt, m, &s2) == NPU_OK);
      npu_tensor_t* x = NULL;
      CHECK(npu_tensor_create(NPU_DTYPE_FLOAT32, in_desc.shape, in_desc.rank, zeros,
                              (size_t)elems * sizeof(float), &x) == NPU_OK);
      npu_tensor_t* outs[8] = {NULL};
      const size_t nout = npu_model_output_count(m);
      const npu_tensor_t* xin[1] = {x};
      CHECK(nout >= 1 && nout <= 8 && npu_session_run(s2, xin, 1, outs, nout) == NPU_OK);
      for (size_t i = 0; i < nout && i < 8; ++i) npu_tensor_destroy(outs[i]);
      npu_tensor_destroy(x);
      npu_session_destroy(s2);
      free(zeros);
    }
    npu_model_destroy(m);
    copts.calibration = NULL;
    copts.calibration_sample_count = 0;
    copts.calibration_method = "median";
    CHECK(npu_compile_onnx(onnx, onnx_size, &copts, &compiled, &compiled_size) ==
          NPU_INVALID_ARGUMENT);
    copts.calibration_method = NULL;
    CHECK(npu_compile_onnx("garbage", 7, &copts, &compiled, &compiled_size) != NPU_OK);
    CHECK(compiled == NULL && compiled_size == 0);
    CHECK(npu_compile_onnx(NULL, 0, NULL, &compiled, &compiled_size) == NPU_INVALID_ARGUMENT);
    free(onnx);
  }

  npu_session_destroy(session);
  npu_tensor_destroy(in);
  npu_model_destroy(model);
  npu_runtime_destroy(rt);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
