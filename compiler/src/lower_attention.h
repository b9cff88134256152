// Lowering of Softmax onto VEC SOFTMAX (ISA 1.3, architecture.md 1.4.1).
#pragma once

#include <cstdint>
#include <vector>

#include "lower.h"

namespace npu::compiler {

// The quantisation VEC SOFTMAX writes probabilities in: scale 2^-k (the instruction's shift
// is 62 - k), the finest that holds `hi` (the calibrated maximum, at most 1) with zero point
// -128 — or 0 when the value must be symmetric (a dynamic GEMM operand) — clipping at most
// the last code's width.
QParams softmax_output_qparams(float hi, bool symmetric);

// Softmax over the last axis of `shape` (any rank): each logical row of L = shape.back()
// elements, contiguous in the activation buffer (byte strides `in_strides`/`out_strides`,
// the leading dimensions one row stride apart), is loaded as ceil(L/N) ACT rows and one VEC
// SOFTMAX segment computes it in place with a 256-entry exponential table of qin's grid
// (int32 in ACC), then the rows are stored. qout must come from softmax_output_qparams.
Result<LayerFacts> lower_softmax(const std::vector<int64_t>& shape, uint32_t in_off,
                                 const std::vector<int64_t>& in_strides, uint32_t out_off,
                                 const std::vector<int64_t>& out_strides, const QParams& qin,
                                 const QParams& qout, uint32_t N, std::vector<uint8_t>& weights,
                                 Program& prog);

}  // namespace npu::compiler
