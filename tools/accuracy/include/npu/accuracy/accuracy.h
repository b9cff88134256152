// The accuracy report (npu-compile --accuracy-report): runs the float model and the NPU image
// on the same inputs and measures, for every value a layer computes, how far the NPU's value
// is from the float one, so that a user sees where a model's accuracy is lost.
//
// The float side is the compiler's reference interpreter over the ONNX graph as loaded
// (compiler::run_float_model). The NPU side is an image compiled with the same options in
// which every computed value is also an output (compiler::compile_exposing_values), run on a
// device through the runtime: each value is what the NPU holds, dequantised from its int8
// grid. Values are matched by name; a value that the compiler's passes fused away (inside a
// Conv+Relu, a Chain of element-wise operators) has no row of its own.
//
// Threading: accuracy_report() opens its own runtime and may run concurrently with others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "npu/compiler/compiler.h"
#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"

namespace npu::accuracy {

// One value, accumulated over every sample.
struct ValueAccuracy {
  std::string value, layer, op;  // layer/op: the NPU layer or host operator computing it
  bool on_npu = true;
  bool graph_input = false;      // the model's input, as the runtime quantises it
  std::vector<std::string> inputs;
  std::vector<int64_t> shape;
  // The value's grid on the device (real = scale·(q − zero_point), codes code_lo..code_hi:
  // int8, or int16 for a wide value, ISA 1.4); NaN scale when the value has no per-tensor
  // int8 or int16 view (host-only values, int32 accumulators).
  float scale = NAN;
  int32_t zero_point = 0;
  double code_lo = -128, code_hi = 127;
  float lo = 0, hi = 0;          // the float value's range over the samples
  double sqnr_db = NAN;          // NPU against float: 10·log10(Σ ref² / Σ (ref − npu)²)
  // The float value rounded onto its own grid against the float value: what this value could
  // reach with exact inputs and arithmetic (rounding and clipping at its scale only).
  double grid_db = NAN;
  double clipped_percent = 0;    // of the float elements outside the grid's range
  // The smallest SQNR among the values this layer reads, minus this value's: how much this
  // layer lost. NaN when none of its inputs has a row (constants, fused-away values).
  double drop_db = NAN;
  std::string worst_input;       // the input with the smallest SQNR, which drop_db is against; "" if none
  double weight_db = NAN;        // int8 weights against float weights (constant-weight layers)
  // Only lookup tables read this value and their functions are flat outside [live_lo,
  // live_hi] (compiler::ExposedValue): both sides are clamped to it before comparing, as
  // the device saturates it there by design (a host operator's float output is not). NaN: not narrowed.
  float live_lo = NAN, live_hi = NAN;
  // Per channel, for a feature map (rank 4, NCHW, more than one channel): the largest |x| of
  // the widest channel and of the median channel, and the median channel's SQNR on the
  // value's per-tensor grid. A per-tensor grid over channels of very different ranges leaves
  // the narrow ones a few levels, which the report names (channel_spread_note). 0 channels:
  // not measured.
  size_t channels = 0;
  float channel_widest = 0, channel_median = 0;
  double channel_grid_median_db = NAN;
};

struct AccuracyReport {
  size_t samples = 0;
  std::string device;
  std::vector<ValueAccuracy> inputs;   // the model's inputs
  std::vector<ValueAccuracy> values;   // every exposed value, in execution order
  std::vector<ValueAccuracy> outputs;  // the model's outputs
  // Whether the exposing image's model outputs equal those of the image being reported on,
  // bit for bit, on every sample (the exposing image differs only in buffer offsets).
  bool image_outputs_identical = true;
  bool image_compared = false;
};

// Compiles `onnx_path` with `options` exposing every value, runs it and the float model on
// each sample (a tensor per model input, in input order) and measures every value. With
// `image` (the bytes of the normal image for the same options), also runs that image and
// checks that its outputs equal the exposing image's. `device`: as for runtime::Runtime::open
// ("" = $NPU_DEVICE or sim). With `dump_dir`, the first sample's values are also written
// there, each as <row>_<value>.npu.npy and .float.npy (names made file-safe). Errors: the compiler's, a sample of the wrong shape or count,
// the runtime's.
Result<AccuracyReport> accuracy_report(const std::string& onnx_path, const compiler::CompileOptions& options,
                                       const std::vector<std::vector<Tensor>>& samples,
                                       const std::vector<uint8_t>* image = nullptr, const std::string& device = "",
                                       const std::string& dump_dir = "");

// When `v`'s channels span ranges 8x or more apart (widest against median), a note saying so
// with the median channel's SQNR on the per-tensor grid; else "".
std::string channel_spread_note(const ValueAccuracy& v);

// The report as text for a terminal: one row per value (marked "<<" where the drop is at least
// `mark_db`), then the model outputs and the `worst` values with the largest drops, each with
// the likely cause (weights, the value's own grid, or the layer's arithmetic) and, where the
// value or the input it lost against has channels of very different ranges, that note.
std::string format_report(const AccuracyReport& report, size_t worst = 5, double mark_db = 3.0);

// The likely cause of a value's loss, in a few words (used by format_report): the output
// grid (rounding, clipping) or the int8 weights when that noise alone accounts for at least
// half of what the layer added, else the layer's arithmetic or amplified input noise.
std::string likely_cause(const ValueAccuracy& v);

}  // namespace npu::accuracy
