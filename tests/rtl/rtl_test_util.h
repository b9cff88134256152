// Helpers shared by the RTL tests: instruction encoders, a DRAM image with a page table and a
// ring, and a bench that drives any npu::sim::Device the way the kernel driver would.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "npu/hw/config.h"
#include "npu/sim/device.h"

namespace npu::rtltest {

namespace reg = hw::reg;

inline constexpr uint32_t kPopPrev = 1u << 8;
inline constexpr uint32_t kPopNext = 1u << 9;
inline constexpr uint32_t kPushPrev = 1u << 10;
inline constexpr uint32_t kPushNext = 1u << 11;

struct Instr {
  std::array<uint32_t, 8> w{};
};

inline uint32_t op(hw::Opcode o) { return static_cast<uint32_t>(o); }
inline uint32_t lohi(uint32_t lo, uint32_t hi) { return (lo & 0xFFFF) | (hi << 16); }

struct DmaArgs {
  hw::Scratchpad sp = hw::Scratchpad::kAct;
  uint32_t va = 0, sp_row = 0;
  uint32_t x = 1, y = 1, z = 1;
  uint32_t xs = 0, ys = 0, zs = 0;
  uint32_t pad_l = 0, pad_r = 0, pad_t = 0, pad_b = 0;
  uint32_t row_elems = 0;  // 0 = N
  uint32_t flags = 0;      // token bits
};

inline Instr dma(hw::Opcode o, const DmaArgs& a) {
  Instr i;
  i.w[0] = op(o) | a.flags | (static_cast<uint32_t>(a.sp) << 16) | (a.row_elems << 24);
  i.w[1] = a.va;
  i.w[2] = a.sp_row;
  i.w[3] = lohi(a.x, a.y);
  i.w[4] = (a.z & 0xFFFF) | (a.pad_l << 16) | (a.pad_r << 20) | (a.pad_t << 24) | (a.pad_b << 28);
  i.w[5] = a.xs;
  i.w[6] = a.ys;
  i.w[7] = a.zs;
  return i;
}
inline Instr load(const DmaArgs& a) { return dma(hw::Opcode::kLoad, a); }
inline Instr store(const DmaArgs& a) { return dma(hw::Opcode::kStore, a); }

struct GemmArgs {
  uint32_t act = 0, wgt = 0, acc = 0;
  uint32_t r = 1, o = 1, i = 1;
  uint32_t aso = 0, asi = 0, asr = 0;
  uint32_t cso = 0, csi = 0, csr = 0;
  uint32_t wso = 0, wsi = 0;
  bool clear = false;
  uint32_t flags = 0;
};

inline Instr gemm(const GemmArgs& a) {
  Instr i;
  i.w[0] = op(hw::Opcode::kGemm) | a.flags | (a.clear ? 1u << 16 : 0);
  i.w[1] = lohi(a.act, a.wgt);
  i.w[2] = lohi(a.acc, a.r);
  i.w[3] = lohi(a.o, a.i);
  i.w[4] = lohi(a.aso, a.asi);
  i.w[5] = lohi(a.asr, a.cso);
  i.w[6] = lohi(a.csi, a.csr);
  i.w[7] = lohi(a.wso, a.wsi);
  return i;
}

struct VecArgs {
  uint32_t src = 0, dst = 0, param = 0;
  uint32_t r = 1, o = 1;
  int8_t zp = 0, lo = -128, hi = 127;
  uint32_t sso = 0, ssr = 0, dso = 0, dsr = 0;
  bool bias = false;
  bool wrap = false;  // w0 bit 21 (ISA 1.2): REQUANT/ADD/MUL write the low byte; lo = hi = 0
  uint32_t flags = 0;
};

inline Instr vec(const VecArgs& a) {
  Instr i;
  i.w[0] = op(hw::Opcode::kVec) | a.flags | (a.bias ? 1u << 20 : 0) | (a.wrap ? 1u << 21 : 0);
  i.w[1] = lohi(a.src, a.dst);
  i.w[2] = lohi(a.param, a.r);
  i.w[3] = (a.o & 0xFFFF) | (static_cast<uint32_t>(static_cast<uint8_t>(a.zp)) << 16);
  i.w[4] = lohi(a.sso, a.ssr);
  i.w[5] = lohi(a.dso, a.dsr);
  i.w[6] = static_cast<uint8_t>(a.lo) | (static_cast<uint32_t>(static_cast<uint8_t>(a.hi)) << 8);
  return i;
}

inline Instr sync(uint32_t engine, uint32_t flags) {
  Instr i;
  i.w[0] = op(hw::Opcode::kSync) | flags | (engine << 16);
  return i;
}

inline Instr nop(uint32_t flags = 0) {
  Instr i;
  i.w[0] = op(hw::Opcode::kNop) | flags;
  return i;
}

// Physical layout of the test DRAM image.
inline constexpr uint64_t kDramBytes = 32ull << 20;     // 32 MiB
inline constexpr uint32_t kRingBase = 0x1000;           // 4 rings of 4 KiB
inline constexpr uint32_t kRingSize = 0x1000;
inline constexpr uint32_t kPtBase = 0x10000;            // 256 KiB page table
inline constexpr uint32_t kCmdVa = 0x00100000;          // command buffers
inline constexpr uint32_t kDataVa = 0x00200000;         // data buffers
inline constexpr uint32_t kPageBytes = static_cast<uint32_t>(hw::kPageBytes);

// A device plus the DRAM it runs on, driven like the kernel driver would.
class Bench {
 public:
  using Factory = std::function<std::unique_ptr<sim::Device>(const sim::DeviceConfig&,
                                                             std::span<std::byte>)>;

  Bench(const Factory& factory, uint32_t dim, uint64_t dram_bytes = kDramBytes,
        uint32_t dram_latency = static_cast<uint32_t>(hw::kDramLatencyCycles))
      : dram_(dram_bytes) {
    sim::DeviceConfig cfg;
    cfg.array_dim = dim;
    cfg.dram_latency_cycles = dram_latency;
    dev_ = factory(cfg, std::span<std::byte>(dram_));
    // Identity-map every page of DRAM, writable.
    for (uint64_t p = 0; p < dram_bytes / kPageBytes; ++p) {
      map(static_cast<uint32_t>(p * kPageBytes), p * kPageBytes, true);
    }
  }

  sim::Device& dev() { return *dev_; }
  std::vector<std::byte>& dram() { return dram_; }

  void map(uint32_t va, uint64_t pa, bool writable) {
    w32(kPtBase + 4 * (va >> 16),
        static_cast<uint32_t>(pa & 0xFFFF0000u) | 1u | (writable ? 2u : 0u));
  }
  void map_raw(uint32_t va, uint32_t pte) { w32(kPtBase + 4 * (va >> 16), pte); }
  void unmap(uint32_t va) { w32(kPtBase + 4 * (va >> 16), 0); }

  void w32(uint64_t pa, uint32_t v) { std::memcpy(dram_.data() + pa, &v, 4); }
  uint32_t r32(uint64_t pa) const {
    uint32_t v;
    std::memcpy(&v, dram_.data() + pa, 4);
    return v;
  }
  void write(uint64_t pa, const void* src, size_t n) { std::memcpy(dram_.data() + pa, src, n); }
  void read(uint64_t pa, void* dst, size_t n) const { std::memcpy(dst, dram_.data() + pa, n); }

  // Writes a program at kCmdVa (+offset) and returns its length in bytes.
  uint32_t put_program(const std::vector<Instr>& prog, uint32_t offset = 0) {
    for (size_t i = 0; i < prog.size(); ++i)
      for (int k = 0; k < 8; ++k) w32(kCmdVa + offset + 32 * i + 4 * k, prog[i].w[k]);
    return static_cast<uint32_t>(32 * prog.size());
  }

  // Programs every ring and enables the device.
  void setup_rings(uint32_t irq_mask = 0x10F) {
    for (uint32_t q = 0; q < hw::kNumQueues; ++q) {
      dev_->write_reg(reg::RING_BASE(q), kRingBase + q * kRingSize);
      dev_->write_reg(reg::RING_SIZE(q), kRingSize);
    }
    dev_->write_reg(reg::IRQ_MASK, irq_mask);
    dev_->write_reg(reg::CONTROL, hw::bits::CONTROL_ENABLE);
  }

  // Appends ring entries to queue q and rings the doorbell.
  void push_entry(uint32_t q, const std::array<uint32_t, 8>& e) {
    uint32_t& tail = tails_[q];
    for (int k = 0; k < 8; ++k) w32(kRingBase + q * kRingSize + tail + 4 * k, e[k]);
    tail = (tail + 32) % kRingSize;
  }
  void doorbell(uint32_t q) { dev_->write_reg(reg::RING_TAIL(q), tails_[q]); }
  void exec(uint32_t q, uint32_t cb_va, uint32_t len, uint32_t pt = kPtBase, uint32_t tag = 0) {
    push_entry(q, {static_cast<uint32_t>(hw::RingOpcode::kExec), cb_va, len, pt, tag, 0, 0, 0});
  }
  void fence(uint32_t q, uint32_t seq) {
    push_entry(q, {static_cast<uint32_t>(hw::RingOpcode::kFence), seq, 0, 0, 0, 0, 0, 0});
  }
  void reset_tails() { tails_ = {}; }

  // Runs until idle, acknowledging fence interrupts; returns the final stop reason.
  sim::StopReason run_to_idle(uint64_t budget = 50'000'000) {
    for (;;) {
      auto why = dev_->run(budget);
      if (why != sim::StopReason::kInterrupt) return why;
      uint32_t st = dev_->read_reg(reg::IRQ_STATUS);
      if (st & hw::bits::IRQ_ERROR) return why;  // leave the error for the test to inspect
      dev_->write_reg(reg::IRQ_STATUS, st);
    }
  }

  // Runs one program on queue 0 with a trailing fence.
  sim::StopReason run_program(const std::vector<Instr>& prog, uint32_t seq = 1) {
    uint32_t len = put_program(prog);
    exec(0, kCmdVa, len);
    fence(0, seq);
    doorbell(0);
    return run_to_idle();
  }

  uint64_t counter(hw::Counter c) {
    auto i = static_cast<uint32_t>(c);
    return dev_->read_reg(reg::COUNTER_LO(i)) |
           (static_cast<uint64_t>(dev_->read_reg(reg::COUNTER_HI(i))) << 32);
  }

 private:
  std::vector<std::byte> dram_;
  std::unique_ptr<sim::Device> dev_;
  std::array<uint32_t, hw::kNumQueues> tails_{};
};

}  // namespace npu::rtltest
