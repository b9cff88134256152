/* An SDK consumer in C: built out of tree against the installed prefix only (find_package(npu)
 * or pkg-config npu), it loads a model image and runs it on a device with the C API.
 *   consumer_c IMAGE [DEVICE]
 * Input k element i is (float)(sin(i) * 0.5) (float32 inputs only). Prints one line per output,
 * "output K: D0xD1... v0 v1 ...", every value with %.9g so that a checker can compare it
 * exactly. Exit 0 on success, 1 with the library's message otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "npu/runtime/c_api.h"

static int fail(const char* what, npu_status_t s) {
  fprintf(stderr, "consumer_c: %s: %s: %s\n", what, npu_status_name(s), npu_last_error_message());
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: consumer_c IMAGE [DEVICE]\n");
    return 2;
  }
  npu_runtime_t* rt = NULL;
  npu_model_t* model = NULL;
  npu_session_t* session = NULL;
  npu_status_t s = npu_runtime_open(argc > 2 ? argv[2] : "sim", &rt);
  if (s != NPU_OK) return fail("npu_runtime_open", s);
  if ((s = npu_model_load(argv[1], &model)) != NPU_OK) return fail("npu_model_load", s);
  if ((s = npu_session_create(rt, model, &session)) != NPU_OK) return fail("npu_session_create", s);
  const size_t n_in = npu_model_input_count(model), n_out = npu_model_output_count(model);
  npu_tensor_t** in = calloc(n_in, sizeof *in);
  npu_tensor_t** out = calloc(n_out, sizeof *out);
  for (size_t k = 0; k < n_in; ++k) {
    npu_dtype_t dtype;
    int64_t shape[8];
    size_t rank = 0;
    if ((s = npu_model_input_info(model, k, NULL, &dtype, shape, 8, &rank)) != NPU_OK)
      return fail("npu_model_input_info", s);
    if (dtype != NPU_DTYPE_FLOAT32 || rank > 8) {
      fprintf(stderr, "consumer_c: input %zu is not float32 of rank <= 8\n", k);
      return 1;
    }
    if ((s = npu_tensor_create(dtype, shape, rank, NULL, 0, &in[k])) != NPU_OK)
      return fail("npu_tensor_create", s);
    float* x = npu_tensor_mutable_data(in[k]);
    for (size_t i = 0; i < npu_tensor_byte_size(in[k]) / sizeof(float); ++i)
      x[i] = (float)(sin((double)i) * 0.5);
  }
  if ((s = npu_session_run(session, (const npu_tensor_t* const*)in, n_in, out, n_out)) != NPU_OK)
    return fail("npu_session_run", s);
  for (size_t k = 0; k < n_out; ++k) {
    printf("output %zu: ", k);
    for (size_t d = 0; d < npu_tensor_rank(out[k]); ++d)
      printf("%s%lld", d ? "x" : "", (long long)npu_tensor_dim(out[k], d));
    const float* y = npu_tensor_data(out[k]);
    for (size_t i = 0; i < npu_tensor_byte_size(out[k]) / sizeof(float); ++i) printf(" %.9g", y[i]);
    printf("\n");
    npu_tensor_destroy(out[k]);
  }
  for (size_t k = 0; k < n_in; ++k) npu_tensor_destroy(in[k]);
  free(in);
  free(out);
  npu_session_destroy(session);
  npu_model_destroy(model);
  npu_runtime_destroy(rt);
  return 0;
}
