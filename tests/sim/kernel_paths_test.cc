// The functional model's kernel paths (npu/sim/kernel_paths.h): names, NPU_SIM_KERNELS, the
// refusal of a path the CPU lacks, and the paths against each other on constrained-random
// programs (npu/sim/program_generator.h) at every array size: every path this CPU runs must
// give the portable path's DRAM, registers and counters (the predicted cycles included), bit
// for bit. The run prints which paths it covered and which it could not run here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "npu/sim/bare_metal.h"
#include "npu/sim/device.h"
#include "npu/sim/kernel_paths.h"
#include "npu/sim/program_generator.h"

namespace npu::sim {
namespace {

// Sets NPU_SIM_KERNELS for one scope and restores what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (const char* old = std::getenv("NPU_SIM_KERNELS")) old_ = old;
    had_ = std::getenv("NPU_SIM_KERNELS") != nullptr;
    if (value) setenv("NPU_SIM_KERNELS", value, 1);
    else unsetenv("NPU_SIM_KERNELS");
  }
  ~ScopedEnv() {
    if (had_) setenv("NPU_SIM_KERNELS", old_.c_str(), 1);
    else unsetenv("NPU_SIM_KERNELS");
  }

 private:
  std::string old_;
  bool had_ = false;
};

std::string name(KernelPath p) { return std::string(kernel_path_name(p)); }

TEST(KernelPaths, NamesRoundTripAndUnknownNamesAreRefused) {
  for (KernelPath p : kAllKernelPaths) EXPECT_EQ(parse_kernel_path(kernel_path_name(p)), p) << name(p);
  EXPECT_FALSE(parse_kernel_path("AVX2"));
  EXPECT_FALSE(parse_kernel_path("best"));  // the environment's word for best_kernel_path(), not a path
  EXPECT_FALSE(parse_kernel_path(""));
  EXPECT_TRUE(kernel_path_supported(KernelPath::kPortable));
  EXPECT_TRUE(kernel_path_supported(best_kernel_path()));
}

TEST(KernelPaths, EnvironmentSelectsThePathOrExplainsTheRefusal) {
  {
    ScopedEnv env(nullptr);
    EXPECT_EQ(default_kernel_path(), best_kernel_path());
  }
  {
    ScopedEnv env("best");
    EXPECT_EQ(default_kernel_path(), best_kernel_path());
  }
  {
    ScopedEnv env("portable");
    EXPECT_EQ(default_kernel_path(), KernelPath::kPortable);
    DeviceConfig dc;
    EXPECT_EQ(describe_functional_kernels(dc), "portable: gemm=portable vec=portable dma=portable");
  }
  {
    ScopedEnv env("sse9");
    try {
      (void)default_kernel_path();
      ADD_FAILURE() << "NPU_SIM_KERNELS=sse9 was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("NPU_SIM_KERNELS=sse9 is not a kernel path; use portable"),
                std::string::npos) << e.what();
    }
    std::vector<std::byte> dram(1 << 20);
    EXPECT_THROW(make_functional_device(DeviceConfig{}, dram), std::invalid_argument);
  }
}

TEST(KernelPaths, APathThisCpuLacksIsRefusedNamingTheMissingFeatures) {
  int refused = 0;
  for (KernelPath p : kAllKernelPaths) {
    const std::string missing = kernel_path_missing_features(p);
    EXPECT_EQ(missing.empty(), kernel_path_supported(p)) << name(p);
    if (missing.empty()) continue;
    ++refused;
    ScopedEnv env(name(p).c_str());
    try {
      (void)default_kernel_path();
      ADD_FAILURE() << name(p) << " was accepted on a CPU that lacks " << missing;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("this CPU lacks " + missing), std::string::npos) << e.what();
    }
    DeviceConfig dc;
    dc.kernels = p;
    std::vector<std::byte> dram(1 << 20);
    EXPECT_THROW(make_functional_device(dc, dram), std::invalid_argument) << name(p);
  }
  if (refused == 0) std::printf("[ SKIPPED  ] this CPU runs every kernel path: no refusal to check\n");
}

struct Outcome {
  BareMetalResult result;
  std::vector<std::byte> dram;
  std::vector<uint64_t> state;  // architectural registers, then every counter
};

Outcome run_program(KernelPath path, uint32_t dim, uint64_t seed) {
  DeviceConfig dc;
  dc.array_dim = dim;
  dc.kernels = path;
  BareMetal bm(2u << 20);
  const ProgramMemory mem = ProgramMemory::create(bm, seed);
  const GeneratedProgram prog = generate_program(seed, dim, mem);
  auto cmd = bm.view(mem.cmd_va, ProgramMemory::kCmdBytes);
  std::memset(cmd.data(), 0, cmd.size());
  std::memcpy(cmd.data(), prog.instructions.data(), prog.instructions.size() * 32);
  auto dev = make_functional_device(dc, bm.dram());
  Outcome o;
  o.result = bm.run(*dev, mem.cmd_va + (prog.misaligned_exec ? 16 : 0),
                    static_cast<uint32_t>(std::max<size_t>(prog.instructions.size(), 1) * 32), 50'000'000);
  o.dram.assign(bm.dram().begin(), bm.dram().end());
  namespace r = hw::reg;
  for (uint32_t off : {r::STATUS, r::IRQ_STATUS, r::ERROR_CODE, r::ERROR_ADDR, r::ERROR_QUEUE, r::ERROR_INSTR,
                       r::RING_HEAD(0), r::RING_TAIL(0), r::COMPLETED_SEQ(0)})
    o.state.push_back(dev->read_reg(off));
  for (uint32_t c = 0; c < hw::kNumCounters; ++c) o.state.push_back(read_counter(*dev, static_cast<hw::Counter>(c)));
  return o;
}

// Every path this CPU runs against the portable path, on the same random programs.
TEST(KernelPaths, EveryRunnablePathMatchesThePortablePathOnRandomPrograms) {
  constexpr uint64_t kPrograms = 150;
  std::string covered, skipped;
  for (KernelPath p : kAllKernelPaths) {
    if (p == KernelPath::kPortable) continue;
    if (!kernel_path_supported(p)) {
      skipped += "  " + name(p) + ": this CPU lacks " + kernel_path_missing_features(p) + "\n";
      continue;
    }
    for (uint32_t dim : {8u, 16u, 32u}) {
      uint64_t errors = 0;
      for (uint64_t k = 0; k < kPrograms; ++k) {
        const uint64_t seed = 7'000'003ull * dim + k;
        SCOPED_TRACE(name(p) + " at " + std::to_string(dim) + ", program seed " + std::to_string(seed));
        const Outcome want = run_program(KernelPath::kPortable, dim, seed);
        const Outcome got = run_program(p, dim, seed);
        ASSERT_EQ(got.state, want.state);
        ASSERT_EQ(got.result.completed, want.result.completed);
        ASSERT_TRUE(got.dram == want.dram) << "DRAM differs";
        errors += want.result.error_code != 0;
      }
      covered += "  " + name(p) + " at " + std::to_string(dim) + "x" + std::to_string(dim) + " (" +
                 describe_kernel_path(p, dim) + "): " + std::to_string(kPrograms) + " programs match portable (" +
                 std::to_string(errors) + " ended in an error)\n";
    }
  }
  std::printf("kernel paths compared with portable:\n%s", covered.c_str());
  if (!skipped.empty()) std::printf("[ SKIPPED  ] kernel paths this CPU cannot run:\n%s", skipped.c_str());
}

}  // namespace
}  // namespace npu::sim
