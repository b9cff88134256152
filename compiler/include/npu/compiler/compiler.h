// npu-compile as a library: ONNX model -> verified int8 model image.
// Thread-compatible: separate compile() calls may run concurrently.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/hw/config.h"

namespace npu::compiler {

// How activation ranges are chosen from the calibration samples (npu-compile --calibration).
// kMinMax (the default): the observed min and max. kPercentile: clipped at the `percentile` % point of
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
  // Bias correction (compiler/src/bias_correction.h): each constant-weight conv's bias
  // absorbs the mean error that rounding its input onto its int8 grid adds per channel,
  // measured on the calibration samples (one more float reference run per sample). Off by
  // default: it pays on PP-OCRv4 det with percentile ranges, not with min/max
  // (docs/architecture.md 3.1).
  bool bias_correction = false;
  // Error-feedback rounding of constant conv weights (compiler/src/weight_rounding.h): each
  // output channel's weights are rounded onto its int8 grid one at a time, the error of each
  // moved onto the weights not yet rounded in proportion to how their inputs correlate on
  // the calibration samples (GPTQ), so that the layer's output error, not each weight's, is
  // small. Same grids and codes format as nearest rounding; one more float reference run per
  // sample. Without calibration samples it changes nothing.
  bool error_feedback_rounding = false;
  // Wide activations (ISA 1.4, docs/architecture.md 1.4.3): conv outputs that only convs
  // read are stored with 16-bit codes, and activation functions fused into convs read
  // 16-bit inputs through interpolated tables. Needs a device of ISA 1.4 or later.
  bool wide_activations = false;
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

// One value of an accuracy-report image (compile_exposing_values): the value's name in the
// graph, the NPU layer or host operator that computes it, the values that layer reads, and,
// for a layer with constant weights, the SQNR of its int8 weights against the float ones
// (NaN otherwise).
struct ExposedValue {
  std::string value;
  std::string layer;  // NPU layer name, or the host operator's node name
  std::string op;     // "Conv+Relu", "Chain(Add,Clip,Div,Mul)", ... or the host operator
  bool on_npu = true;
  std::vector<std::string> inputs;
  double weight_sqnr_db = NAN;
  // A value only lookup tables read has its grid only where their functions change: below
  // live_lo and above live_hi they are flat (-inf/+inf: that side was not narrowed; NaN: not
  // narrowed at all). The device saturates the value there by design, so it is compared
  // with the float value clamped alike.
  float live_lo = NAN, live_hi = NAN;
};

struct ExposedImage {
  std::vector<uint8_t> bytes;
  // The image's outputs are the model's own outputs, then one per entry here, in order.
  std::vector<ExposedValue> values;
  // The layers that compute the model's own outputs (an output a layer computes; the same
  // order as the model's outputs, an entry with an empty `layer` for one no step computes).
  std::vector<ExposedValue> outputs;
};

// Compiles like compile_onnx_file, but every float value an NPU layer or host operator
// computes also becomes an output of the image (after the model's own outputs), so one run
// returns each value dequantised from its int8 grid: what the accuracy report compares with
// the float model. Partitioning, quantisation and the lowering are those of the normal image
// (it differs only in activation-buffer offsets, and its model outputs are bit-identical).
Result<ExposedImage> compile_exposing_values(const std::string& onnx_path, const CompileOptions& options);

// The float model: the compiler's reference interpreter over the ONNX graph as loaded (before
// any pass), on one sample (a tensor per model input, in input order). Returns every named
// float32 value it computes, graph inputs included, in execution order.
Result<std::vector<std::pair<std::string, Tensor>>> run_float_model(
    const std::string& onnx_path, const std::map<std::string, std::vector<int64_t>>& input_shapes,
    const std::vector<Tensor>& inputs);

// Reads calibration samples from `dir` (subfolders sorted by name, input_<k>.npy each).
Result<std::vector<std::vector<Tensor>>> read_calibration_dir(const std::string& dir,
                                                             size_t num_inputs);

}  // namespace npu::compiler
