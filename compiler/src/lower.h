// Lowering of NPU layers to command streams and weight blobs.
#pragma once

#include <cstdint>
#include <vector>

#include "partition.h"
#include "program.h"
#include "quantize.h"

namespace npu::compiler {

struct LayerFacts {
  uint64_t macs = 0;              // N×N MACs issued
  uint64_t scratchpad_bytes = 0;  // peak scratchpad use
};

// The per-output-channel weight scales the lowering uses: the model's declared ones (QDQ)
// or max|w|/127. Shared with --export-qdq so that the exported model carries the same codes.
std::vector<float> fc_weight_scales(const FcLayer& L);
std::vector<float> conv_weight_scales(const ConvLayer& L);
// One weight code: nearbyint(w / scale), clamped to -127..127 (chosen scales) or -128..127
// (declared scales reproduce the model's codes).
int8_t quantize_weight(float w, float scale, bool declared);

// Quantises one FC layer (per-channel symmetric int8 weights, int32 bias with the input
// zero point folded in, per-channel requantisation) into `weights`, and appends its
// instructions to `prog`: input rows at `in_off` and output rows at `out_off` of the
// activation buffer, dense [M][K] and [M][N] int8.
Result<LayerFacts> lower_fc_layer(const FcLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                  uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                  Program& prog);

// Channels padded to the array dim: the NHWC device layout of 4-D activations.
inline int64_t padded_channels(int64_t c, uint32_t n) { return (c + n - 1) / n * n; }

// Quantises one convolution and appends its instructions. Input and output live in the
// activation buffer as NHWC with channels padded to N (see padded_channels). Zero padding
// is exact only when qx.zero_point == 0; the caller guarantees that for padded convs.
Result<LayerFacts> lower_conv_layer(const ConvLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                    uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                    Program& prog);

// Tap folding for convolutions with few input channels (lower_conv_folded.cc): when
// C·KW <= N, one scratchpad row holds the KW horizontal taps of all C channels, so the conv
// runs KH GEMM taps instead of KH·KW. It needs the input as dense NHWC (C bytes per pixel,
// no padding lanes); the compiler gives that layout to values that no NPU layer writes and
// only folding convs read. Padding is exact for any input zero point (border biases).
bool conv_folds_taps(const ConvLayer& L, uint32_t N);
Result<LayerFacts> lower_conv_folded(const ConvLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                     uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                     Program& prog);

// Bytes a value of `shape` occupies in the activation buffer (NHWC with padded channels
// for 4-D values, dense otherwise).
uint64_t device_bytes(const std::vector<int64_t>& shape, uint32_t n);

// Lowers an element-wise or pooling layer onto the VEC unit. `in_shapes`/`qin`/`in_off`
// describe the layer's inputs in order; the output has `out_shape`, `qy`, `out_off`.
// MaxPool requires qy == qin[0] (the caller guarantees it).
Result<LayerFacts> lower_elt_layer(const EltLayer& L, const std::vector<std::vector<int64_t>>& in_shapes,
                                   const std::vector<int64_t>& out_shape, const std::vector<QParams>& qin,
                                   const QParams& qy, const std::vector<uint32_t>& in_off, uint32_t out_off,
                                   uint32_t N, std::vector<uint8_t>& weights, Program& prog);

}  // namespace npu::compiler
