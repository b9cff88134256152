// The compiler's side of the accuracy report (npu-compile --accuracy-report): which values an
// image exposes as extra outputs, and what the report says about the layer computing each.
#pragma once

#include <vector>

#include "ir.h"
#include "npu/compiler/compiler.h"
#include "partition.h"

namespace npu::compiler {

// Appends to g.outputs every float value of nonzero rank that a step computes (an NPU layer's
// output, a host operator's outputs) and that is not a graph output already, and describes
// each in *exposed, in execution order. Runs after partitioning, so that the extra outputs
// change neither the layers nor their fusion, only how long the values live. The model's own
// outputs are described in *outputs (in their order). `narrowed`: values whose ranges were
// narrowed for their lookup-table readers (their ExposedValue::live range).
void expose_values(Graph& g, const std::vector<PartitionStep>& steps, const ValueRanges& narrowed,
                   std::vector<ExposedValue>* exposed, std::vector<ExposedValue>* outputs);

// SQNR in dB of the int8 per-output-channel codes the lowering writes for a layer's constant
// weights against the float weights; NaN for a layer without constant weights.
double weight_sqnr_db(const NpuLayer& layer);

}  // namespace npu::compiler
