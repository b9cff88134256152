// The simulated NPU as the kernel driver sees it: a register bus, an interrupt line and
// device DRAM. Two implementations exist and are bit-exact on everything architectural
// (docs/architecture.md, "Hardware"):
//   - the functional model (npu_sim_model, make_functional_device), the reference, which also
//     predicts cycles;
//   - the Verilator RTL (npu_sim_rtl, make_rtl_device in npu/sim/rtl_device.h).
//
// Ownership: a Device never owns DRAM. The caller (the kernel-driver model, a test, a replay
// tool) owns the byte range passed at construction and keeps it alive and mapped for the
// Device's lifetime; the device reads and writes it as physical addresses 0..size-1.
//
// Threading: a Device is not thread-safe. One thread at a time calls it; the kernel-driver
// model serialises access under its device lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "npu/hw/config.h"
#include "npu/sim/kernel_paths.h"

namespace npu::sim {

struct DeviceConfig {
  uint32_t array_dim = hw::kDefaultArrayDim;  // 8, 16 or 32
  uint32_t dram_latency_cycles = static_cast<uint32_t>(hw::kDramLatencyCycles);
  uint32_t dma_beat_bytes = static_cast<uint32_t>(hw::kDmaBeatBytes);
  // Functional model only: its cycle predictor reuses the cost of a LOAD or STORE it has
  // costed before (same instruction, same translation cache; exact, see
  // sim/model/cycle_model.h). Off only to check that this changes no prediction.
  bool memoize_dma_costs = true;
  // Functional model only: the host-CPU kernel path (npu/sim/kernel_paths.h); empty takes
  // default_kernel_path() (NPU_SIM_KERNELS, else the best this CPU runs). Every path gives
  // the same bits.
  std::optional<KernelPath> kernels;
};

// One executed instruction, for the instruction trace (off by default). The RTL reports
// instructions as they complete, which with its overlapping engines is not program order
// (several may complete on one cycle); the functional model reports them in program order
// with their predicted completion cycle.
struct TraceEvent {
  uint64_t cycle = 0;       // device cycle at which the instruction completed
  uint32_t queue = 0;       // hardware queue that ran the job
  uint32_t cmd_offset = 0;  // byte offset of the instruction in its command buffer
  uint32_t words[8] = {};   // the raw instruction
};
using TraceSink = std::function<void(const TraceEvent&)>;

enum class StopReason {
  kIdle,        // every ring is empty, or the device is halted on an error or disabled
  kInterrupt,   // the interrupt line is asserted ((IRQ_STATUS & IRQ_MASK) != 0)
  kCycleLimit,  // max_cycles elapsed with work still pending
};

class Device {
 public:
  virtual ~Device() = default;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // "functional" or "rtl".
  virtual std::string_view kind() const = 0;
  virtual const DeviceConfig& config() const = 0;

  // Register bus. `offset` is a byte offset, 4-byte aligned, below
  // hw::reg::REGISTER_SPACE_BYTES; unknown offsets read 0 and ignore writes.
  virtual uint32_t read_reg(uint32_t offset) = 0;
  virtual void write_reg(uint32_t offset, uint32_t value) = 0;

  // Advances the device until it is idle, its interrupt line is asserted, or `max_cycles`
  // device cycles have elapsed. Never sleeps and never blocks on anything but simulation.
  virtual StopReason run(uint64_t max_cycles) = 0;

  // Current device cycle (not reset by CONTROL.RESET; the CYCLES counter is).
  virtual uint64_t cycle() const = 0;

  // Instruction trace; pass an empty function to turn it off (the default).
  virtual void set_trace(TraceSink sink) = 0;
};

// The functional model. `dram` must outlive the device. Returns null for an unsupported
// array_dim; throws std::invalid_argument (one line: the value and the fix) when the kernel
// path, from the config or NPU_SIM_KERNELS, is unknown or not runnable on this CPU.
std::unique_ptr<Device> make_functional_device(const DeviceConfig& config,
                                               std::span<std::byte> dram);
// The kernel path a functional device of `config` runs, and what it runs for each kernel
// family ("avx512-vbmi: gemm=... vec=... dma=..."); throws as make_functional_device does.
std::string describe_functional_kernels(const DeviceConfig& config);

// Convenience reads of the register file shared by every caller.
uint64_t read_counter(Device& device, hw::Counter counter);
uint64_t read_fingerprint(Device& device);

}  // namespace npu::sim
