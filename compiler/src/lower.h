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

// Quantises one FC layer (per-channel symmetric int8 weights, int32 bias with the input
// zero point folded in, per-channel requantisation) into `weights`, and appends its
// instructions to `prog`: input rows at `in_off` and output rows at `out_off` of the
// activation buffer, dense [M][K] and [M][N] int8.
Result<LayerFacts> lower_fc_layer(const FcLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                  uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                  Program& prog);

}  // namespace npu::compiler
