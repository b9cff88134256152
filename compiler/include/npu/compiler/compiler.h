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

// How activation ranges are chosen from the calibration samples (npu-compile --calibration).
// kMinMax: the observed min and max. kPercentile: clipped at the `percentile` % point of
// |x|. kEntropy: clipped at the threshold minimising the KL divergence between the |x|
// histogram (2048 bins) and its 128-level quantisation (TensorRT's method). Values whose
// quantisation the model declares (QDQ) are not calibrated.
struct CalibrationMethod {
  enum class Kind { kMinMax, kPercentile, kEntropy, kMse };
  Kind kind = Kind::kMinMax;
  double percentile = 99.99;
};

// Parses "minmax", "percentile", "percentile=P" (0 < P <= 100), "entropy" or "mse".
Result<CalibrationMethod> parse_calibration_method(const std::string& text);

struct CompileOptions {
  uint32_t array_dim = hw::kDefaultArrayDim;
  // Calibration samples: each sample holds one tensor per model input, in input order.
  std::vector<std::vector<Tensor>> calibration;
  // When `calibration` is empty: a directory with one subfolder per sample, each holding
  // input_<k>.npy. When both are empty the compiler calibrates on deterministic random
  // samples and says so on the progress stream.
  std::string calibration_dir;
  CalibrationMethod calibration_method;
  // When not empty: also write the quantised graph as a QDQ ONNX model to this path
  // (QuantizeLinear/DequantizeLinear pairs with the compiler's activation parameters and
  // per-channel weight codes), so that another runtime can check the quantisation.
  std::string export_qdq_path;
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
