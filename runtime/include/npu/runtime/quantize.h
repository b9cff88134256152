// Quantisation at the model boundary: float inputs -> the device view, device outputs ->
// float. Pure functions; thread-safe.
//   int8:  q = clamp(nearbyint(x / scale) + zero_point, -128, 127), ties to even (as ONNX
//          QuantizeLinear); NaN becomes zero_point.
//   out:   real = scale · (q − zero_point)
// A per-axis view (device_quant.axis >= 0) applies to each element the scale and zero point
// of its index along that axis. An empty tensor (a zero dimension) covers no bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "npu/compiler/tensor.h"
#include "npu/hal/status.h"
#include "npu/runtime/model.h"

namespace npu::runtime {

int8_t quantize_int8(float x, float scale, int32_t zero_point);
int32_t quantize_int32(float x, float scale, int32_t zero_point);
inline float dequantize(int32_t q, float scale, int32_t zero_point) {
  return scale * static_cast<float>(static_cast<int64_t>(q) - zero_point);
}

// Checks that `tensor` can feed `info` (shape equal; dtype float32, or the model input's own
// integer dtype). The message names the input and the fix.
Status check_input(const Tensor& tensor, const TensorInfo& info, size_t index);

// Writes `tensor` into its device view inside `activations` (the whole activation buffer).
// Bytes of the view's range that no element covers are zeroed. check_input() must pass.
Status quantize_into(const Tensor& tensor, const TensorInfo& info,
                     std::span<std::byte> activations);

// Reads output `info` out of `activations`: float32 (dequantised) unless the model output is
// integer-typed, then the raw device values in info.dtype (uint8 codes held as int8: +128).
Result<Tensor> dequantize_from(const TensorInfo& info, std::span<const std::byte> activations);

// True when the model value is uint8 codes that the device holds as int8 codes (the exact
// -128 shift): quantize_into subtracts 128, dequantize_from adds it back. int8 codes are
// copied as they are.
bool uint8_codes_on_int8(const TensorInfo& info);

// The byte range [begin, end) of a device view.
std::pair<uint64_t, uint64_t> view_extent(const TensorInfo& info);

}  // namespace npu::runtime
