// Quantisation arithmetic shared by the compiler passes and tests.
#pragma once

#include <cstdint>

namespace npu::compiler {

// Affine int8 parameters: real = scale * (q - zero_point).
struct QParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

// Asymmetric int8 parameters covering [lo, hi] (widened to include 0).
QParams activation_qparams(float lo, float hi);

// m ~= multiplier * 2^-shift with multiplier in [2^30, 2^31) when m is representable,
// shift in [0, 63] (the VEC unit's requantisation parameters).
void quantize_multiplier(double m, int32_t* multiplier, int32_t* shift);

// q = clamp(nearbyint(x / scale) + zero_point, -128, 127): round half to even, like ONNX
// QuantizeLinear.
int8_t quantize_value(float x, const QParams& q);

}  // namespace npu::compiler
