// The functional model's host-CPU kernel paths. The model computes every instruction bit for
// bit the same on every path; a path only decides which instruction-set extensions of the host
// CPU its kernels (GEMM, VEC unit, DMA row copies) may use, and so how fast it runs. A path is
// a class of x86-64 CPU, and the model uses exactly that class's features:
//   portable     plain C++ (SSE2, part of x86-64): runs anywhere
//   avx2         AVX2 (Haswell, Zen 1-3): the vpmaddwd GEMM kernel
//   avx-vnni     AVX2 + AVX-VNNI (Alder Lake): the 256-bit vpdpbusd GEMM kernel
//   avx512       AVX-512 F/BW/VL/DQ (Skylake-SP): AVX-512 VEC kernels and masked DMA rows
//   avx512-vnni  + AVX-512 VNNI (Cascade Lake): the 512-bit vpdpbusd GEMM kernel
//   avx512-vbmi  + AVX-512 VBMI (Ice Lake, Zen 4, Sapphire Rapids): byte-permute LUT, packing
//                and narrowing
// By default a device takes the best path this CPU runs. The environment variable
// NPU_SIM_KERNELS=<path> (or "best") makes every functional device of the process use another
// one, so that a test run on one machine can cover the paths of others; DeviceConfig::kernels
// does the same for one device. Asking for a path this CPU cannot run is an error, never a
// silent fallback. Thread-safe: CPU features are read once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npu::sim {

enum class KernelPath : uint8_t { kPortable, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAvx512Vbmi };
inline constexpr KernelPath kAllKernelPaths[] = {KernelPath::kPortable,   KernelPath::kAvx2,
                                                 KernelPath::kAvxVnni,    KernelPath::kAvx512,
                                                 KernelPath::kAvx512Vnni, KernelPath::kAvx512Vbmi};

// "portable", "avx2", "avx-vnni", "avx512", "avx512-vnni", "avx512-vbmi".
std::string_view kernel_path_name(KernelPath path);
// The path named `name` (as kernel_path_name writes it); nothing for any other word.
std::optional<KernelPath> parse_kernel_path(std::string_view name);
// Whether this CPU (and OS) runs every feature of `path`.
bool kernel_path_supported(KernelPath path);
// The instruction-set extensions `path` needs that this CPU lacks ("AVX-512 VNNI, AVX-512
// VBMI"); empty when it runs the path.
std::string kernel_path_missing_features(KernelPath path);
// The extensions of this CPU the paths use, by name: "AVX2 AVX-VNNI AVX-512 AVX-512-VNNI
// AVX-512-VBMI" ("none" when it has none of them).
std::string host_cpu_feature_names();
// The path with the most features this CPU runs.
KernelPath best_kernel_path();

// The path of a functional device whose DeviceConfig names none: NPU_SIM_KERNELS when set
// (a path name or "best"), else best_kernel_path(). Throws std::invalid_argument with a
// one-line message naming the value and the fix when the value is not a path name or names a
// path this CPU cannot run. Read on every call (tests set it per process).
KernelPath default_kernel_path();

// What the functional model's kernel families run on `path` at array dim n (8, 16 or 32), as
// one line: "gemm=avx512-vnni-vbmi vec=hwy:AVX3+vbmi dma=hwy:AVX3".
std::string describe_kernel_path(KernelPath path, uint32_t n);

}  // namespace npu::sim
