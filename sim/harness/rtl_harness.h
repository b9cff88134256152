// RtlDevice<Model>: the C++ harness around one Verilated configuration of npu_top.
//
// It owns the VerilatedContext and the model, drives the register bus, and plays the memory
// system: requests are served from the caller-owned DRAM span with a first-beat latency of
// DeviceConfig::dram_latency_cycles and one 16-byte beat per cycle (docs/rtl-timing.md).
// Private to npu_sim_rtl; instantiated once per built array dim (rtl_model_<dim>.cc).
#pragma once

#ifndef NPU_RTL_THREADS
#define NPU_RTL_THREADS 1  // set by sim/harness/CMakeLists.txt from the NPU_RTL_THREADS option
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "npu/hw/config.h"
#include "npu/sim/device.h"
#include "npu/sim/rtl_device.h"
#include "verilated.h"
#include "verilated_fst_c.h"

namespace npu::sim::rtl {

// Bytes per memory beat; the RTL bus width is generated from the same TOML value.
inline constexpr uint32_t kBeatBytes = static_cast<uint32_t>(hw::kDmaBeatBytes);
static_assert(kBeatBytes % 4 == 0);

template <class Model>
class RtlDevice final : public Device {
 public:
  RtlDevice(const DeviceConfig& config, std::span<std::byte> dram, const RtlOptions& options)
      : config_(config), dram_(dram), ctx_(std::make_unique<VerilatedContext>()) {
    ctx_->debug(0);
    ctx_->randReset(0);  // --x-initial fast: power-on state is all zeros
    // As many threads as the model was verilated for (NPU_RTL_THREADS, default 1): the
    // context's default (one per core) would start idle workers, and abort a threaded model
    // on a machine with fewer cores.
    ctx_->threads(NPU_RTL_THREADS);
    if (!options.fst_path.empty()) ctx_->traceEverOn(true);
    top_ = std::make_unique<Model>(ctx_.get(), "npu");
    if (!options.fst_path.empty()) {
      fst_ = std::make_unique<VerilatedFstC>();
      top_->trace(fst_.get(), 99);
      fst_->open(options.fst_path.c_str());
    }
    const uint64_t size = std::min<uint64_t>(dram_.size(), uint64_t{1} << 32);
    top_->dram_bytes_i = size;
    top_->mem_req_ready_i = 1;
    top_->mem_rsp_valid_i = 0;
    top_->hold_i = 0;
    top_->reg_valid_i = 0;
    top_->reg_write_i = 0;
    top_->clk_i = 0;
    // Power-on reset: two cycles with rst_ni low. Not counted in cycle().
    top_->rst_ni = 0;
    edge();
    edge();
    top_->rst_ni = 1;
    top_->eval();
  }

  ~RtlDevice() override {
    top_->final();
    if (fst_) fst_->close();
  }

  std::string_view kind() const override { return "rtl"; }
  const DeviceConfig& config() const override { return config_; }

  uint32_t read_reg(uint32_t offset) override {
    if (offset >= hw::reg::REGISTER_SPACE_BYTES || (offset & 3) != 0) return 0;
    top_->reg_addr_i = static_cast<uint16_t>(offset);
    top_->eval();
    return top_->reg_rdata_o;
  }

  // The write is applied on a held clock edge: the engines, counters and the memory system do
  // not advance, so device time passes only in run(), as in the functional model.
  void write_reg(uint32_t offset, uint32_t value) override {
    if (offset >= hw::reg::REGISTER_SPACE_BYTES || (offset & 3) != 0) return;
    top_->reg_valid_i = 1;
    top_->reg_write_i = 1;
    top_->reg_addr_i = static_cast<uint16_t>(offset);
    top_->reg_wdata_i = value;
    top_->hold_i = 1;
    top_->mem_req_ready_i = 0;
    const uint8_t rsp_valid = top_->mem_rsp_valid_i;
    top_->mem_rsp_valid_i = 0;
    edge();
    top_->hold_i = 0;
    top_->mem_req_ready_i = 1;
    top_->mem_rsp_valid_i = rsp_valid;
    top_->reg_valid_i = 0;
    top_->reg_write_i = 0;
    if (offset == hw::reg::CONTROL && (value & hw::bits::CONTROL_RESET) != 0) {
      // The reset also clears the memory system: in-flight read bursts are dropped.
      reads_.clear();
      top_->mem_rsp_valid_i = 0;
    }
    top_->eval();
  }

  StopReason run(uint64_t max_cycles) override {
    for (uint64_t n = 0;; ++n) {
      if (top_->irq_o) return StopReason::kInterrupt;
      if (!top_->busy_o) return StopReason::kIdle;
      if (n >= max_cycles) return StopReason::kCycleLimit;
      tick();
    }
  }

  uint64_t cycle() const override { return cycle_; }

  void set_trace(TraceSink sink) override { trace_ = std::move(sink); }

 private:
  struct Burst {
    uint64_t due;    // cycle whose edge samples the next beat
    uint32_t addr;   // address of the next beat
    uint32_t beats;  // beats left
  };

  // One clock edge (rising then falling), with the FST dump if enabled.
  void edge() {
    top_->clk_i = 1;
    top_->eval();
    if (fst_) fst_->dump(2 * ctx_->time());
    top_->clk_i = 0;
    top_->eval();
    if (fst_) fst_->dump(2 * ctx_->time() + 1);
    ctx_->timeInc(1);
  }

  void tick() {
    // Requests the RTL presents now are accepted on this edge (ready is always high).
    if (top_->mem_req_valid_o) {
      const uint32_t addr = top_->mem_req_addr_o;
      if (top_->mem_req_write_o) {
        write_beat(addr, top_->mem_req_wstrb_o);
      } else {
        const uint64_t start = std::max(cycle_ + config_.dram_latency_cycles,
                                        reads_.empty() ? 0 : last_due_ + 1);
        reads_.push_back(Burst{start, addr, top_->mem_req_beats_o});
        last_due_ = start + top_->mem_req_beats_o - 1;
      }
    }
    // Read data for this edge: one beat per cycle.
    if (!reads_.empty() && reads_.front().due <= cycle_) {
      Burst& b = reads_.front();
      read_beat(b.addr);
      top_->mem_rsp_valid_i = 1;
      b.addr += kBeatBytes;
      ++b.due;
      if (--b.beats == 0) reads_.pop_front();
    } else {
      top_->mem_rsp_valid_i = 0;
    }
    edge();
    ++cycle_;
    if (trace_ && top_->trace_valid_o) emit_trace();  // completions of this edge, by engine
  }

  void read_beat(uint32_t addr) {
    alignas(8) std::byte beat[kBeatBytes] = {};
    if (uint64_t{addr} + kBeatBytes <= dram_.size()) {
      std::memcpy(beat, dram_.data() + addr, kBeatBytes);
    } else {
      for (uint32_t i = 0; i < kBeatBytes; ++i)
        if (uint64_t{addr} + i < dram_.size()) beat[i] = dram_[addr + i];
    }
    std::memcpy(top_->mem_rsp_data_i.data(), beat, kBeatBytes);
  }

  void write_beat(uint32_t addr, uint32_t strobe) {
    alignas(8) std::byte beat[kBeatBytes];
    std::memcpy(beat, top_->mem_req_wdata_o.data(), kBeatBytes);
    for (uint32_t i = 0; i < kBeatBytes; ++i) {
      if ((strobe >> i) & 1u) {
        if (uint64_t{addr} + i < dram_.size()) dram_[addr + i] = beat[i];
      }
    }
  }

  // One port per engine (LOAD, COMPUTE, STORE): instructions complete out of program order
  // when the engines overlap, and several may complete on one edge.
  void emit_trace() {
    for (uint32_t e = 0; e < 3; ++e) {
      if (((top_->trace_valid_o >> e) & 1u) == 0) continue;
      TraceEvent ev;
      ev.cycle = cycle_;
      ev.queue = top_->trace_queue_o;
      ev.cmd_offset = top_->trace_offset_o[e];
      std::memcpy(ev.words, top_->trace_instr_o.data() + 8 * e, sizeof(ev.words));
      trace_(ev);
    }
  }

  DeviceConfig config_;
  std::span<std::byte> dram_;
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<Model> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  std::deque<Burst> reads_;
  uint64_t last_due_ = 0;
  uint64_t cycle_ = 0;
  TraceSink trace_;
};

}  // namespace npu::sim::rtl
