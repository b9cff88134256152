#include "npu/sim/bare_metal.h"

#include <cstring>
#include <stdexcept>

#include "npu/hw/isa.h"

namespace npu::sim {
namespace {
constexpr uint64_t kPage = hw::kPageBytes;
uint64_t round_up(uint64_t v) { return (v + kPage - 1) / kPage * kPage; }
}  // namespace

BareMetal::BareMetal(uint64_t dram_bytes)
    : storage_(round_up(std::max<uint64_t>(dram_bytes, kRingBase + kRingBytes + kPage))),
      dram_(storage_),
      next_free_(kRingBase + kRingBytes) {}

uint32_t BareMetal::allocate(uint64_t bytes, bool writable) {
  const uint64_t size = round_up(std::max<uint64_t>(bytes, 1));
  if (next_free_ + size > dram_.size()) throw std::length_error("BareMetal: out of DRAM");
  const auto va = static_cast<uint32_t>(next_free_);
  for (uint64_t off = 0; off < size; off += kPage) {
    const uint32_t page = static_cast<uint32_t>(next_free_ + off);
    const uint32_t entry = isa::pte(page, writable);
    std::memcpy(dram_.data() + kPageTableBase + 4 * (page >> 16), &entry, 4);
  }
  next_free_ += size;
  return va;
}

void BareMetal::unmap(uint32_t va, uint64_t bytes) {
  for (uint64_t off = 0; off < bytes; off += kPage) {
    const uint32_t zero = 0;
    std::memcpy(dram_.data() + kPageTableBase + 4 * ((va + off) >> 16), &zero, 4);
  }
}

std::span<std::byte> BareMetal::view(uint32_t va, uint64_t bytes) { return dram_.subspan(va, bytes); }

BareMetalResult BareMetal::run(Device& device, uint32_t cmd_va, uint32_t cmd_bytes,
                               uint64_t max_cycles) {
  device.write_reg(hw::reg::CONTROL, hw::bits::CONTROL_RESET);
  seq_ = 0;
  return run_no_reset(device, cmd_va, cmd_bytes, max_cycles);
}

BareMetalResult BareMetal::run_no_reset(Device& device, uint32_t cmd_va, uint32_t cmd_bytes,
                                        uint64_t max_cycles) {
  namespace r = hw::reg;
  if (device.read_reg(r::RING_SIZE(0)) != kRingBytes) {
    device.write_reg(r::RING_BASE(0), kRingBase);
    device.write_reg(r::RING_SIZE(0), kRingBytes);
    device.write_reg(r::IRQ_MASK, hw::bits::IRQ_ERROR | 1u);
    device.write_reg(r::CONTROL, hw::bits::CONTROL_ENABLE);
  }
  uint32_t tail = device.read_reg(r::RING_TAIL(0));
  const uint32_t seq = ++seq_;
  for (const isa::Words& entry : {isa::ring_exec(cmd_va, cmd_bytes, kPageTableBase, 0), isa::ring_fence(seq)}) {
    std::memcpy(dram_.data() + kRingBase + tail, entry.data(), sizeof(entry));
    tail = (tail + hw::kRingEntryBytes) % kRingBytes;
  }
  const uint64_t start = device.cycle();
  device.write_reg(r::RING_TAIL(0), tail);
  BareMetalResult result;
  for (;;) {
    const uint64_t spent = device.cycle() - start;
    const StopReason why = device.run(max_cycles > spent ? max_cycles - spent : 0);
    const uint32_t irq = device.read_reg(r::IRQ_STATUS);
    device.write_reg(r::IRQ_STATUS, irq);
    if (irq & hw::bits::IRQ_ERROR) {
      result.error_code = device.read_reg(r::ERROR_CODE);
      result.error_addr = device.read_reg(r::ERROR_ADDR);
      result.error_instr = device.read_reg(r::ERROR_INSTR);
      break;
    }
    if (device.read_reg(r::COMPLETED_SEQ(0)) == seq) {
      result.completed = true;
      break;
    }
    if (why == StopReason::kCycleLimit) {
      result.cycle_limit = true;
      break;
    }
    if (why == StopReason::kIdle) break;  // halted or disabled without a fence
  }
  result.cycles = device.cycle() - start;
  return result;
}

}  // namespace npu::sim
