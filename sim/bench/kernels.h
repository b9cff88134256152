// Benchmark kernels for npu-bench: command-stream generators for a fixed set of layers, with
// their inputs and a scalar C++ reference of the same integer math.
//
//   conv3x3   3x3 convolution 64->64 on 56x56, stride 1, pad 1, int8 (implicit GEMM on the MAC
//             array), per-channel bias + requantisation to int8
//   matmul    256x256x256 int8 matmul, per-tensor requantisation to int8
//   depthwise 3x3 depthwise convolution on 112x112x32, stride 1, pad 1 (VEC mode DWCONV)
//
// Every kernel tiles its layer to fit the scratchpads, double-buffers its input and output
// buffers and orders them with dependency tokens (LOAD(t+1) is issued before COMPUTE(t), VTA
// style), so an implementation that overlaps engines can run LOAD/STORE under COMPUTE.
// DRAM tensors are NHWC / row-major int8; weights are pre-packed in the tile layout the program
// reads (as a compiler packs them offline).
//
// Pure functions; thread-safe. Deterministic in (array_dim, seed).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "npu/hw/isa.h"

namespace npu::sim::bench {

struct Kernel {
  std::string name;         // "conv3x3_64x64_56x56", "matmul_256x256x256", "depthwise3x3_112x112x32"
  std::string description;  // one line for people
  uint32_t array_dim = 0;
  uint64_t macs = 0;        // nominal multiply-accumulates of the layer (padding taps included)
  bool uses_vec_dwconv = false;
  std::vector<std::vector<int8_t>> inputs;  // DRAM images, one read-only buffer each, in order
  uint64_t output_bytes = 0;                // the one writable output buffer
  std::vector<int8_t> expected;             // the output computed by the scalar reference
  // Emits the command stream for the given placement of the inputs and of the output.
  std::function<std::vector<isa::Words>(const std::vector<uint32_t>& input_vas, uint32_t output_va)>
      emit;
};

// Short names accepted by make_kernel: "conv", "matmul", "depthwise".
std::vector<std::string> kernel_short_names();

// Builds a kernel for an array dim of 8, 16 or 32. Throws std::invalid_argument for an
// unknown name or array dim (the message names the accepted values).
Kernel make_kernel(std::string_view short_name, uint32_t array_dim, uint64_t seed = 1);
Kernel make_conv3x3(uint32_t array_dim, uint64_t seed = 1);
Kernel make_matmul(uint32_t array_dim, uint64_t seed = 1);
Kernel make_depthwise3x3(uint32_t array_dim, uint64_t seed = 1);

// Where place() put a kernel in a BareMetal image.
struct Placement {
  std::vector<uint32_t> input_vas;
  uint32_t output_va = 0;
  uint32_t cmd_va = 0;
  uint32_t cmd_bytes = 0;
  size_t instructions = 0;
};

// DRAM a BareMetal needs to hold the kernel (page-rounded buffers, ring and page table).
uint64_t dram_bytes_needed(const Kernel& kernel);
// Allocates the inputs (read-only), the output (zeroed) and the command buffer in `bm`, copies
// the inputs and emits the program. Identical calls on identical BareMetals give identical
// images, so two devices can be compared byte for byte.
Placement place(const Kernel& kernel, BareMetal& bm);
// The output buffer of a placed kernel.
std::span<const int8_t> output_of(BareMetal& bm, const Placement& placement, const Kernel& kernel);
// Index of the first differing byte, or -1 when equal (sizes must match).
int64_t first_difference(std::span<const int8_t> a, std::span<const int8_t> b);

// The VEC encoding of every mode (isa.h has REQUANT only): fields of architecture.md 1.4.
struct VecOp {
  hw::VecMode mode = hw::VecMode::kRequant;
  bool bias = false;
  uint16_t src = 0, dst = 0, param = 0;
  uint16_t r = 1, o = 1;
  int8_t zero_point = 0;
  uint16_t src_so = 0, src_sr = 0, dst_so = 0, dst_sr = 0;
  int8_t clamp_lo = -128, clamp_hi = 127;
  uint16_t aux = 0;
  uint8_t kw = 0, kh = 0;  // window modes only; 0 elsewhere
  uint16_t wys = 0;
  isa::Tokens tokens;
};
isa::Words encode_vec(const VecOp& op);

}  // namespace npu::sim::bench
