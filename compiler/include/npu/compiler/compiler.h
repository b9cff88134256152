// npu-compile as a library: ONNX model -> verified int8 model image.
// Thread-compatible: separate compile() calls may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/hw/config.h"

namespace npu::compiler {

struct CompileOptions {
  uint32_t array_dim = hw::kDefaultArrayDim;
  // Calibration samples: each sample holds one tensor per model input, in input order.
  std::vector<std::vector<Tensor>> calibration;
  // When `calibration` is empty: a directory with one subfolder per sample, each holding
  // input_<k>.npy. When both are empty the compiler calibrates on deterministic random
  // samples and says so on the progress stream.
  std::string calibration_dir;
  // Overrides of dynamic (or any) input dimensions, by input name.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Progress and warnings for a person at a terminal; empty = silent.
  std::function<void(const std::string&)> progress;
};

// Compiles `onnx_path` into model-image bytes.
Result<std::vector<uint8_t>> compile_onnx_file(const std::string& onnx_path,
                                               const CompileOptions& options);

// Reads calibration samples from `dir` (subfolders sorted by name, input_<k>.npy each).
Result<std::vector<std::vector<Tensor>>> read_calibration_dir(const std::string& dir,
                                                             size_t num_inputs);

}  // namespace npu::compiler
