// make_rtl_device: picks the Verilated configuration that matches DeviceConfig::array_dim.
#include "npu/sim/rtl_device.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "rtl_dims.h"

namespace npu::sim {

std::vector<uint32_t> rtl_supported_array_dims() { return rtl::built_dims(); }

std::unique_ptr<Device> make_rtl_device(const DeviceConfig& config, std::span<std::byte> dram,
                                        const RtlOptions& options) {
  if (config.dma_beat_bytes != static_cast<uint32_t>(hw::kDmaBeatBytes)) {
    throw std::invalid_argument("make_rtl_device: dma_beat_bytes " +
                                std::to_string(config.dma_beat_bytes) +
                                " differs from the RTL bus width of " +
                                std::to_string(hw::kDmaBeatBytes) + " bytes");
  }
  auto device = rtl::make_for_dim(config, dram, options);
  if (!device) {
    throw std::invalid_argument("make_rtl_device: no RTL configuration for array_dim " +
                                std::to_string(config.array_dim) + " in this build (built: " +
                                rtl::kBuiltDims +
                                "; configure with -DNPU_RTL_ALL_DIMS=ON for 8, 16 and 32)");
  }
  return device;
}

}  // namespace npu::sim
