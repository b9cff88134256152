// npu-compile --export-qdq: the quantised graph as a QDQ ONNX model, so that another
// runtime (onnxruntime) can check the compiler's quantisation.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir.h"
#include "partition.h"
#include "quantize.h"

namespace npu::compiler {

// Writes `g` (after the compiler's passes: folded constants and BatchNorms) as an ONNX model
// to `path`: every value in `quantised` (the activations NPU layers read or write) is
// followed by QuantizeLinear/DequantizeLinear with its parameters from `qp` as uint8 (the
// NPU's int8 codes + 128, the same grid; onnxruntime then fuses the pairs into its integer
// kernels, as it does for the models onnxruntime.quantization writes), and every
// NPU Conv/Gemm/MatMul weight becomes int8 codes (the lowering's per-channel scales, zero
// point 0) read through a per-axis DequantizeLinear; Conv biases become the int32 codes the
// NPU adds (scale x_scale·w_scale). Other biases (Gemm C, fused Adds) and everything the host
// runs stay float. Graph input and output names are kept. Needs default-domain opset >= 13
// (per-axis DequantizeLinear).
Status write_qdq_model(const Graph& g, const std::vector<PartitionStep>& steps,
                       const std::map<int, QParams>& qp, const std::set<int>& quantised,
                       const std::string& path);

}  // namespace npu::compiler
