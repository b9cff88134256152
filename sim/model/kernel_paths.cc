#include "npu/sim/kernel_paths.h"

#include <cpuid.h>

#include <cstdlib>
#include <stdexcept>

#include "cpu_features.h"
#include "hwy/targets.h"
#include "mac_kernels.h"
#include "simd_kernels.h"
#include "vec_kernels.h"

namespace npu::sim {
namespace {

struct PathName {
  KernelPath path;
  std::string_view name;
};
constexpr PathName kPathNames[] = {{KernelPath::kPortable, "portable"},      {KernelPath::kAvx2, "avx2"},
                                   {KernelPath::kAvxVnni, "avx-vnni"},       {KernelPath::kAvx512, "avx512"},
                                   {KernelPath::kAvx512Vnni, "avx512-vnni"}, {KernelPath::kAvx512Vbmi, "avx512-vbmi"}};

CpuFeatures read_cpu_features() {
  // AVX2 and AVX-512 F/BW/VL/DQ are Highway's targets AVX2 and AVX3 (which also check that the
  // OS saves the ymm/zmm state): the kernels of those targets then run. Highway 1.0.3 reports
  // VNNI and VBMI only bundled into AVX3_DL (with VBMI2, VAES, ...), so the three extensions the
  // intrinsic kernels use alone are read here, under Highway's check of the state they need.
  const int64_t targets = hwy::SupportedTargets();
  CpuFeatures f;
  f.avx2 = (targets & HWY_AVX2) != 0;
  f.avx512 = (targets & HWY_AVX3) != 0;
  // AVX-VNNI is CPUID.(EAX=7, ECX=1):EAX bit 4, read directly: clang 14's
  // __builtin_cpu_supports does not know "avxvnni".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  f.avx_vnni = f.avx2 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 4) & 1u);
  f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
  f.avx512_vbmi = f.avx512 && __builtin_cpu_supports("avx512vbmi");
  return f;
}

std::string known_paths() {
  std::string s;
  for (const auto& p : kPathNames) s += std::string(s.empty() ? "" : ", ") + std::string(p.name);
  return s + " or best";
}

}  // namespace

const CpuFeatures& host_cpu_features() {
  static const CpuFeatures features = read_cpu_features();
  return features;
}

CpuFeatures kernel_path_features(KernelPath path) {
  CpuFeatures f;
  switch (path) {
    case KernelPath::kPortable: break;
    case KernelPath::kAvxVnni: f.avx_vnni = true; [[fallthrough]];
    case KernelPath::kAvx2: f.avx2 = true; break;
    case KernelPath::kAvx512Vbmi: f.avx512_vbmi = true; [[fallthrough]];
    case KernelPath::kAvx512Vnni: f.avx512_vnni = true; [[fallthrough]];
    case KernelPath::kAvx512: f.avx512 = f.avx2 = true; break;
  }
  return f;
}

std::string_view kernel_path_name(KernelPath path) {
  for (const auto& p : kPathNames)
    if (p.path == path) return p.name;
  return "?";
}

std::optional<KernelPath> parse_kernel_path(std::string_view name) {
  for (const auto& p : kPathNames)
    if (p.name == name) return p.path;
  return std::nullopt;
}

std::string kernel_path_missing_features(KernelPath path) {
  const CpuFeatures need = kernel_path_features(path), have = host_cpu_features();
  std::string missing;
  auto check = [&](bool needed, bool present, const char* name) {
    if (needed && !present) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  check(need.avx2, have.avx2, "AVX2");
  check(need.avx_vnni, have.avx_vnni, "AVX-VNNI");
  check(need.avx512, have.avx512, "AVX-512 F/BW/VL/DQ");
  check(need.avx512_vnni, have.avx512_vnni, "AVX-512 VNNI");
  check(need.avx512_vbmi, have.avx512_vbmi, "AVX-512 VBMI");
  // The path's Highway kernels must also be in this build (x86 builds compile AVX2 and AVX3).
  if (const int64_t target = vec_kernel_for(path).target; target != 0 && simd_kernels(target) == nullptr)
    check(true, false, ("Highway target " + std::string(simd_target_name(target)) + " (not compiled in)").c_str());
  return missing;
}

std::string host_cpu_feature_names() {
  const CpuFeatures& f = host_cpu_features();
  std::string names;
  for (auto [has, name] : {std::pair{f.avx2, "AVX2"}, {f.avx_vnni, "AVX-VNNI"}, {f.avx512, "AVX-512"},
                           {f.avx512_vnni, "AVX-512-VNNI"}, {f.avx512_vbmi, "AVX-512-VBMI"}})
    if (has) names += std::string(names.empty() ? "" : " ") + name;
  return names.empty() ? "none" : names;
}

bool kernel_path_supported(KernelPath path) { return kernel_path_missing_features(path).empty(); }

KernelPath best_kernel_path() {
  for (KernelPath p : {KernelPath::kAvx512Vbmi, KernelPath::kAvx512Vnni, KernelPath::kAvx512, KernelPath::kAvxVnni,
                       KernelPath::kAvx2})
    if (kernel_path_supported(p)) return p;
  return KernelPath::kPortable;
}

KernelPath default_kernel_path() {
  const char* env = std::getenv("NPU_SIM_KERNELS");
  if (env == nullptr || *env == '\0' || std::string_view(env) == "best") return best_kernel_path();
  const std::optional<KernelPath> path = parse_kernel_path(env);
  if (!path)
    throw std::invalid_argument("NPU_SIM_KERNELS=" + std::string(env) + " is not a kernel path; use " + known_paths());
  if (const std::string missing = kernel_path_missing_features(*path); !missing.empty())
    throw std::invalid_argument("NPU_SIM_KERNELS=" + std::string(env) + ": this CPU lacks " + missing +
                                "; use " + std::string(kernel_path_name(best_kernel_path())) +
                                " or a lower path (portable runs anywhere), or unset it");
  return *path;
}

std::string describe_kernel_path(KernelPath path, uint32_t n) {
  const VecKernel vec = vec_kernel_for(path);
  return "gemm=" + mac_kernel_name(mac_kernel_for(path, n)) + " vec=" + vec_kernel_name(vec) +
         " dma=" + (vec.target == 0 ? "portable" : "hwy:" + std::string(simd_target_name(vec.target)));
}

}  // namespace npu::sim
