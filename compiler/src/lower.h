// Lowering of NPU layers to command streams and weight blobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "partition.h"
#include "program.h"
#include "quantize.h"

namespace npu::compiler {

struct LayerFacts {
  uint64_t macs = 0;              // N×N MACs issued
  uint64_t scratchpad_bytes = 0;  // peak scratchpad use
  std::string note;               // a cost worth telling the user (npu-compile prints it)
};

// The per-output-channel weight scales the lowering uses: the model's declared ones (QDQ)
// or max|w|/127. Shared with --export-qdq so that the exported model carries the same codes.
std::vector<float> fc_weight_scales(const FcLayer& L);
std::vector<float> conv_weight_scales(const ConvLayer& L);
// One weight code: nearbyint(w / scale), clamped to -127..127 (chosen scales) or -128..127
// (declared scales reproduce the model's codes).
int8_t quantize_weight(float w, float scale, bool declared);

// Where the dynamic operands of a layer live in the activation buffer (byte offsets and
// strides; unused when the layer has constant operands).
struct DynamicOperands {
  QParams qw;                 // B / W: symmetric per-tensor (zero point 0)
  uint32_t w_off = 0;
  uint32_t w_k_stride = 0;    // FC: bytes between rows k of B (its n index is contiguous)
  uint32_t w_batch_stride = 0;
  uint32_t bias_off = 0;      // int32 elements, accumulator units
  uint32_t bias_m_stride = 0; // FC: bytes between bias rows m (0: one row for every m)
  int32_t bias_spread = 1;    // FC one-element bias: its int8 code times this is its value in
                              // accumulator units (<= 127, or 127·I: I repetitions of the tile)
};

// Quantises one FC layer (per-channel symmetric int8 weights, int32 bias with the input
// zero point folded in, per-channel requantisation) into `weights`, and appends its
// instructions to `prog`: input rows at `in_off` and output rows at `out_off` of the
// activation buffer, dense [M][K] and [M][N] int8 (per batch for a batched MatMul).
// With L.weight_input >= 0 the weights come from the activation buffer (`dyn`): x and B are
// symmetric, one multiplier alpha·s_x·s_w / s_y serves every channel, and a dynamic bias is
// loaded into the accumulators before the GEMM accumulates onto it. A one-element bias is an
// int8 code c at scale alpha·s_x·s_w·k / beta: a GEMM of the row [c, 0, ...] (act stride r = 0)
// against a tile whose row 0 is k in every lane writes c·k into every accumulator lane (for
// k = 127·I, the GEMM's i loop adds c·127 I times).
Result<LayerFacts> lower_fc_layer(const FcLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                  uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                  Program& prog, const DynamicOperands& dyn = {});

// Channels padded to the array dim: the NHWC device layout of 4-D activations.
inline int64_t padded_channels(int64_t c, uint32_t n) { return (c + n - 1) / n * n; }

// Quantises one convolution and appends its instructions. Input and output live in the
// activation buffer as NHWC with channels padded to N (see padded_channels). Zero padding
// is exact only when qx.zero_point == 0; the caller guarantees that for padded convs.
// With L.weight_input >= 0 the weights come from the activation buffer (`dyn`, layout
// [KH][KW][C][Cout]); x must then be symmetric.
// With a fused lookup table (L.lut_input >= 0), `q_lut_input` is the quantisation of the
// conv's own output, which the requantisation targets, and `qy` that of L.output: one VEC
// LUT maps the requantised rows in the scratchpad before the STORE (the table sits in the
// top fused_lut_rows ACT rows for the whole layer).
// Which of a conv's values are wide (ISA 1.4, docs/architecture.md 1.4.3): int16 codes on the
// 8.8 refinement of the value's int8 grid (scale/256, zero point·256), two ACT rows and two
// DRAM bytes per element. `in`: the input as stored; `out`: the output as stored; `lut_input`:
// a fused table's input, which then lives in the scratchpad only (REQUANT writes it wide and
// the table is the interpolated one).
struct ConvWidths {
  bool in = false, out = false, lut_input = false;
};

Result<LayerFacts> lower_conv_layer(const ConvLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                    uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                    Program& prog, const DynamicOperands& dyn = {},
                                    std::optional<QParams> q_lut_input = std::nullopt, ConvWidths widths = {});

// Whether one output row of L still fits the ACT scratchpad with every value of it wide (the
// smallest tile lower_conv_layer takes): the quantisation plan keeps int8 inputs elsewhere.
bool conv_fits_wide(const ConvLayer& L, uint32_t N);

// The ACT rows a conv's fused lookup table occupies at the top of the scratchpad (0 without):
// 256/N, or ⌈514/N⌉ for the interpolated table of a wide input.
uint32_t fused_lut_rows(const ConvLayer& L, uint32_t N, bool wide_input = false);
// Writes the fused table of L (q_lut_input codes -> qy codes) into the weights and LOADs it
// into its ACT rows; returns the requantisation target (q_lut_input, or qy without a table).
// With `wide_input` the table is the 257-entry interpolated one (entries on the 8.8 grid of
// qy at the codes of q_lut_input's int8 grid).
Result<QParams> load_fused_lut(const ConvLayer& L, const QParams& qy, const std::optional<QParams>& q_lut_input,
                               uint32_t N, std::vector<uint8_t>& weights, Program& prog, bool wide_input = false);
// The fused table over `rows` ACT rows from `base` on, in place (nothing without a table);
// wide rows in and/or out as the flags say.
void apply_fused_lut(const ConvLayer& L, uint32_t N, uint32_t base, int64_t rows, Program& prog,
                     bool wide_input = false, bool wide_output = false);

// Loads `rows` int32 rows (N lanes each: the VEC parameter rows, bias/multiplier/shift per
// output block) from the weight buffer at byte `offset` into ACC rows from `acc_row` on.
void load_acc_rows(Program& prog, uint32_t acc_row, int64_t rows, uint32_t N, uint32_t offset);

// Loads one int32 row (a bias row, or zeros) from the weight buffer at byte `offset` into
// `rows` consecutive ACC rows from `acc_row` on (X stride 0 repeats it): accumulators that a
// GEMM without `clear` then accumulates onto.
void repeat_acc_row(Program& prog, uint32_t acc_row, int64_t rows, uint32_t offset);

// Stores `rows` output rows of OW pixels, each a scratchpad row from `sp_base` on, into an
// NHWC activation with `cp` (padded) channels per pixel: `row_elems` channels per pixel, the
// first at activation-buffer byte `offset`.
void store_pixel_rows(Program& prog, uint32_t sp_base, int64_t row_elems, int64_t OW, int64_t rows,
                      int64_t cp, uint32_t offset, bool wide = false);

// Tap folding for convolutions with few input channels (lower_conv_folded.cc): when
// C·KW <= N, one scratchpad row holds the KW horizontal taps of all C channels, so the conv
// runs KH GEMM taps instead of KH·KW. It needs the input as dense NHWC (C bytes per pixel,
// no padding lanes); the compiler gives that layout to values that no NPU layer writes and
// only folding convs read. Padding is exact for any input zero point (border biases).
bool conv_folds_taps(const ConvLayer& L, uint32_t N);
// `widths`: a wide output or fused table input (ISA 1.4); its input is dense int8 always.
Result<LayerFacts> lower_conv_folded(const ConvLayer& L, const QParams& qx, const QParams& qy, uint32_t N,
                                     uint32_t in_off, uint32_t out_off, std::vector<uint8_t>& weights,
                                     Program& prog, std::optional<QParams> q_lut_input = std::nullopt,
                                     ConvWidths widths = {});

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

// Moves int8 elements between two strided device views of one shape: for every index i,
// dst[dst_off + Σ i_d·dst_strides_d] = table(src[src_off + Σ i_d·src_strides_d]) (byte
// strides). LOADs gather into the ACT scratchpad and STOREs scatter from it; dimensions
// that are contiguous on both sides travel as rows of up to N elements, otherwise every
// element is its own DMA row (row_elems = 1: one 16-byte beat per element instead of one per
// 16 elements, plus the per-row issue cost; the predicted cycles in the image show it, and
// LayerFacts::note says so). When `qin` and `qout` differ, a VEC LUT re-quantises the rows on
// the way.
Result<LayerFacts> lower_copy(const std::vector<int64_t>& shape, uint32_t src_off, std::vector<int64_t> src_strides,
                              uint32_t dst_off, std::vector<int64_t> dst_strides, const QParams& qin,
                              const QParams& qout, uint32_t N, std::vector<uint8_t>& weights, Program& prog);

}  // namespace npu::compiler
