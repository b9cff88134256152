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

namespace npu::tools {

int model_main(int argc, char** argv);

}  // namespace npu::tools
