// npu-run --test-data DIR [--json] [--device D]: runs one ONNX backend test directory
// (model.onnx plus test_data_set_*/input_<k>.pb and output_<k>.pb) and reports PASS, FAIL or
// UNSUPPORTED with the metric used:
//   integer outputs: bit-exact;
//   float outputs computed on the NPU path: SQNR >= 30 dB;
//   float outputs computed by the host fallback: |actual - expected| <= 1e-5 + 1e-3·|expected|.
// The compiler calibrates on the test's own inputs. While the compiler cannot partition a
// graph, a model it rejects as UNSUPPORTED runs entirely on the host-op interpreter (and the
// report says so); a model neither side supports is UNSUPPORTED, naming the operator and node.
// With --json the last stdout line is one JSON object: result, metric, placement {npu_ops,
// host_ops}, path ("npu", "host" or "none"), message. host_ops counts the image's host steps;
// npu_ops the model's other operators (on the NPU, or folded away by the compiler).
// --host skips the compiler and runs every operator on the host fallback.
#pragma once

#include <string>

namespace npu_run {

// The runner's options (npu-run parses them with the rest of its command line).
struct TestDataOptions {
  std::string dir;     // --test-data DIR
  std::string device;  // --device ("" = $NPU_DEVICE, else sim)
  bool json = false;   // --json
  bool host = false;   // --host: skip the NPU path
};

// Runs the test. Exit codes: 0 pass, 1 fail, 4 unsupported (usage errors, 2, are npu-run's).
int test_data_main(const TestDataOptions& options);

}  // namespace npu_run
