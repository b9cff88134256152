// The host CPU's instruction-set extensions that the functional model's kernels use, read once
// (CPUID through the compiler's builtins, which also check that the OS saves the vector state),
// and the feature set of each kernel path (npu/sim/kernel_paths.h). The one place in the model
// that asks the CPU what it has. Thread-safe.
#pragma once

#include "npu/sim/kernel_paths.h"

namespace npu::sim {

struct CpuFeatures {
  bool avx2 = false;
  bool avx_vnni = false;     // VEX-encoded vpdpbusd (256-bit)
  bool avx512 = false;       // F, BW, VL and DQ together
  bool avx512_vnni = false;  // EVEX vpdpbusd
  bool avx512_vbmi = false;  // vpermb, vpermt2b, vpermi2b
};

// What this CPU runs.
const CpuFeatures& host_cpu_features();
// The features that define `path` (what a CPU of that class has).
CpuFeatures kernel_path_features(KernelPath path);

}  // namespace npu::sim
