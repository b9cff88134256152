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

namespace npu_run {

// True when the command line asks for the conformance runner (has --test-data).
bool wants_test_data(int argc, char** argv);

// Parses the runner's options and runs it. Exit codes: 0 pass, 1 fail, 2 usage error,
// 4 unsupported.
int test_data_main(int argc, char** argv);

}  // namespace npu_run
