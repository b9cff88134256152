// npu-bench model IMAGE_OR_ONNX: a user's own model on a device through the runtime.
//   --iterations N   timed Session::run calls per round (default 100), after --warmup N
//                    untimed ones (default 10)
//   --concurrency N  requests kept in flight through an AsyncSession for the throughput
//                    figure (default 1)
//   --rounds N       latency rounds (default 1; 3 with --compare-ort)
//   --compare-ort    also runs onnxruntime-node (CPU, one thread; scripts/ort/ort_serve.js in a
//                    child process) on the same ONNX model and inputs, alternating rounds with
//                    the NPU, and prints each round's ratio and their median
//   --input-shape NAME=D0,D1,...  fixes a dynamic input dimension of an .onnx model
//   --json           the last stdout line is one JSON object
// Prints latency percentiles, throughput, device cycles, MAC utilisation and the split of
// host time (copy-in, queue, device, host steps, copy-out). Progress goes to stderr every 2 s.
// Exit status 0, 1 (the model, a file or a run failed) or 2 (usage).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npu/tools/cli.h"

namespace npu::tools {

struct ModelBenchArgs {
  std::string model;
  std::string device;
  std::vector<std::string> inputs;
  std::string iterations = "100", warmup = "10", rounds, concurrency = "1";  // parsed by model_main
  std::vector<std::string> input_shapes;
  bool json = false;
  bool compare_ort = false;
  std::string ort_model;
};

// Declares the options of `npu-bench model` on `sub` (a subcommand of `cli`).
void add_model_bench_options(Cli& cli, CLI::App* sub, ModelBenchArgs* args);

// Checks the values (a UsageError names a bad one) and runs the benchmark.
int model_main(const Cli& cli, const ModelBenchArgs& args);

}  // namespace npu::tools
