/* The C API from C: open, load, introspect, run, async submit/recv/cancel/close, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "c_api_identity.npuimg";
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
  for (;;) {
    npu_completion_t* c = NULL;
    npu_status_t st = npu_completion_queue_recv(cq, 10 * 1000 * 1000, &c);
    if (st == NPU_UNAVAILABLE) break;
    CHECK(st == NPU_OK);
    if (st != NPU_OK) break;
    int* tag = (int*)npu_completion_user_context(c);
    CHECK(tag != NULL);
    if (tag) seen[*tag]++;
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
