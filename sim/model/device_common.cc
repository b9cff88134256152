// Register-file helpers shared by every Device implementation's callers.
#include "npu/sim/device.h"

namespace npu::sim {

uint64_t read_counter(Device& device, hw::Counter counter) {
  const auto index = static_cast<uint32_t>(counter);
  // LO then HI: both models latch nothing between the two reads, and a counter only moves
  // while run() executes, so the pair is consistent.
  const uint64_t lo = device.read_reg(hw::reg::COUNTER_LO(index));
  const uint64_t hi = device.read_reg(hw::reg::COUNTER_HI(index));
  return (hi << 32) | lo;
}

uint64_t read_fingerprint(Device& device) {
  const uint64_t lo = device.read_reg(hw::reg::FINGERPRINT_LO);
  const uint64_t hi = device.read_reg(hw::reg::FINGERPRINT_HI);
  return (hi << 32) | lo;
}

}  // namespace npu::sim
