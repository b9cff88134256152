// The Verilator RTL model of the NPU (sim/rtl) behind the npu::sim::Device interface.
//
// The RTL is bit-exact with the functional model on everything architectural (DRAM contents,
// registers, the architectural counters, error codes and addresses); its cycle counts are the
// timing reference (docs/rtl-timing.md).
//
// Ownership: as for every Device, the caller owns `dram` and keeps it alive and mapped for the
// device's lifetime. The device owns its VerilatedContext (never the global one) and calls the
// model's final() on destruction.
//
// Threading: not thread-safe; one thread at a time, like every Device. Separate devices are
// independent and may run on different threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "npu/sim/device.h"

namespace npu::sim {

struct RtlOptions {
  // Non-empty: dump an FST waveform of the whole run to this path (slow; off by default).
  std::string fst_path;
};

// Array dims compiled into this build (NPU_RTL_ARRAY_DIM, plus 8/16/32 with NPU_RTL_ALL_DIMS).
std::vector<uint32_t> rtl_supported_array_dims();

// Creates the RTL device. Never throws for anything a command stream or register write can do:
// bad programs end in an architectural error. Throws std::invalid_argument (with a message
// naming the built dims) when config.array_dim has no RTL configuration in this build, or when
// config.dma_beat_bytes differs from the bus width the RTL was generated with. `dram` is the
// physical address space 0..size-1 (at most 4 GiB is addressable).
std::unique_ptr<Device> make_rtl_device(const DeviceConfig& config, std::span<std::byte> dram,
                                        const RtlOptions& options = {});

}  // namespace npu::sim
