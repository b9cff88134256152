/* IMAGE TOTAL IN_FLIGHT: TOTAL async requests with at most IN_FLIGHT outstanding through the C
 * API (one submitting thread, the main thread receiving), as the Python binding's 10k test
 * does; checks that every request completes exactly once and prints requests/s. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "npu/runtime/c_api.h"

struct submitter {
  npu_async_session_t* session;
  const npu_tensor_t* input;
  long total;
  npu_status_t status;
};

static void* submit_all(void* arg) {
  struct submitter* s = (struct submitter*)arg;
  const npu_tensor_t* inputs[1] = {s->input};
  for (long i = 0; i < s->total && s->status == NPU_OK; ++i)
    s->status = npu_async_session_submit(s->session, inputs, 1, (void*)(intptr_t)i,
                                         NPU_WAIT_FOREVER, NULL);
  npu_async_session_close(s->session);
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define TRY(call)                                                                    \
  do {                                                                               \
    npu_status_t st_ = (call);                                                       \
    if (st_ != NPU_OK) {                                                             \
      fprintf(stderr, "%s: %s\n", #call, npu_last_error_message());                 \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s IMAGE TOTAL IN_FLIGHT\n", argv[0]);
    return 2;
  }
  const long total = atol(argv[2]);
  const uint32_t in_flight = (uint32_t)atol(argv[3]);
  npu_runtime_t* rt = NULL;
  npu_model_t* model = NULL;
  TRY(npu_runtime_open("sim", &rt));
  TRY(npu_model_load(argv[1], &model));
  npu_tensor_desc_t desc;
  desc.struct_size = sizeof desc;
  TRY(npu_model_input_desc(model, 0, &desc));
  npu_tensor_t* input = NULL;
  TRY(npu_tensor_create(desc.dtype, desc.shape, desc.rank, NULL, 0, &input));
  float* x = (float*)npu_tensor_mutable_data(input);
  for (size_t i = 0; i < npu_tensor_byte_size(input) / sizeof(float); ++i)
    x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  npu_async_session_t* session = NULL;
  npu_completion_queue_t* queue = NULL;
  TRY(npu_async_session_create(rt, model, in_flight, &session, &queue));

  unsigned char* seen = (unsigned char*)calloc((size_t)total, 1);
  struct submitter s = {session, input, total, NPU_OK};
  const double t0 = now_s();
  pthread_t thread;
  pthread_create(&thread, NULL, submit_all, &s);
  long received = 0, bad = 0;
  for (;;) {
    npu_completion_t* c = NULL;
    npu_status_t st = npu_completion_queue_recv(queue, NPU_WAIT_FOREVER, &c);
    if (st == NPU_UNAVAILABLE) break;
    if (st != NPU_OK) {
      fprintf(stderr, "recv: %s\n", npu_last_error_message());
      return 1;
    }
    intptr_t i = (intptr_t)npu_completion_user_context(c);
    if (npu_completion_status(c) != NPU_OK || i < 0 || i >= total || seen[i]++) ++bad;
    npu_tensor_destroy(npu_completion_take_output(c, 0));
    npu_completion_destroy(c);
    ++received;
  }
  const double elapsed = now_s() - t0;
  pthread_join(thread, NULL);
  if (s.status != NPU_OK || received != total || bad) {
    fprintf(stderr, "submit status %d, received %ld of %ld, %ld bad\n", s.status, received,
            total, bad);
    return 1;
  }
  printf("c_api_async_bench: %ld requests, %u in flight: %.0f requests/s\n", total, in_flight,
         (double)total / elapsed);
  free(seen);
  npu_async_session_destroy(session);
  npu_completion_queue_destroy(queue);
  npu_tensor_destroy(input);
  npu_model_destroy(model);
  npu_runtime_destroy(rt);
  return 0;
}
