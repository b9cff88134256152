// The functional model of the NPU: the bit-exact reference for the RTL and a cycle
// predictor for it. Every rule implemented here is written down in docs/architecture.md
// section 1; the comments below only say why an implementation choice was made.
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_features.h"
#include "cycle_model.h"
#include "mac_kernels.h"
#include "simd_kernels.h"
#include "vec_kernels.h"
#include "npu/sim/device.h"
#include "npu/hw/isa.h"

namespace npu::sim {
namespace {

using hw::ErrorCode;

struct Fault {
  ErrorCode code;
  uint32_t addr;
};

constexpr uint32_t kNoInstr = 0xFFFFFFFFu;
constexpr uint32_t kPageShift = 16;
constexpr uint32_t kPageMask = (1u << kPageShift) - 1;

// Token channels, numbered as ERROR_ADDR reports them.
enum Channel : uint32_t { kL2C = 0, kC2L = 1, kC2S = 2, kS2C = 3 };

uint32_t field(uint32_t word, unsigned lo, unsigned width) {
  return (word >> lo) & ((width == 32) ? 0xFFFFFFFFu : ((1u << width) - 1u));
}

class FunctionalDevice final : public Device {
 public:
  FunctionalDevice(const DeviceConfig& config, std::span<std::byte> dram)
      : config_(config), dram_(dram), n_(config.array_dim), timing_(config) {
    act_rows_ = static_cast<uint32_t>(hw::kActSpBytes / n_);
    wgt_rows_ = static_cast<uint32_t>(hw::kWgtSpBytes / n_);
    acc_rows_ = static_cast<uint32_t>(hw::kAccSpBytes / (4 * n_));
    act_.assign(static_cast<size_t>(act_rows_) * n_, 0);
    wgt_.assign(static_cast<size_t>(wgt_rows_) * n_, 0);
    acc_.assign(static_cast<size_t>(acc_rows_) * n_, 0);
    reset_state();
    reset_count_ = 0;
  }

  std::string_view kind() const override { return "functional"; }
  const DeviceConfig& config() const override { return config_; }
  uint64_t cycle() const override { return cycle_; }
  void set_trace(TraceSink sink) override { trace_ = std::move(sink); }

  uint32_t read_reg(uint32_t offset) override {
    namespace r = hw::reg;
    switch (offset) {
      case r::ID: return hw::kDeviceId;
      case r::VERSION: return hw::kIsaVersion;
      case r::FINGERPRINT_LO: return static_cast<uint32_t>(hw::fingerprint_for_dim(n_));
      case r::FINGERPRINT_HI: return static_cast<uint32_t>(hw::fingerprint_for_dim(n_) >> 32);
      case r::CONFIG: return n_ | (hw::kNumQueues << 8);
      case r::CONTROL: return control_;
      case r::STATUS:
        return (has_work() ? hw::bits::STATUS_BUSY : 0u) |
               (error_code_ != 0 ? hw::bits::STATUS_ERROR : 0u) |
               ((control_ & hw::bits::CONTROL_ENABLE) ? hw::bits::STATUS_ENABLED : 0u);
      case r::IRQ_STATUS: return irq_status_;
      case r::IRQ_MASK: return irq_mask_;
      case r::ERROR_CODE: return error_code_;
      case r::ERROR_ADDR: return error_addr_;
      case r::ERROR_QUEUE: return error_queue_;
      case r::ERROR_INSTR: return error_instr_;
      case r::ACT_SP_ROWS: return act_rows_;
      case r::WGT_SP_TILES: return wgt_rows_ / n_;
      case r::ACC_SP_ROWS: return acc_rows_;
      case r::RESET_COUNT: return reset_count_;
      default: break;
    }
    if (offset >= r::QUEUE_BASE && offset < r::QUEUE_BASE + hw::kNumQueues * r::QUEUE_STRIDE) {
      const Queue& q = queues_[(offset - r::QUEUE_BASE) / r::QUEUE_STRIDE];
      switch ((offset - r::QUEUE_BASE) % r::QUEUE_STRIDE) {
        case r::QUEUE_RING_BASE: return q.base;
        case r::QUEUE_RING_SIZE: return q.size;
        case r::QUEUE_RING_HEAD: return q.head;
        case r::QUEUE_RING_TAIL: return q.tail;
        case r::QUEUE_COMPLETED_SEQ: return q.completed;
        default: return 0;
      }
    }
    if (offset >= r::COUNTER_BASE && offset < r::REGISTER_SPACE_BYTES) {
      const uint64_t value = counters_[(offset - r::COUNTER_BASE) / 8];
      return (offset & 4) ? static_cast<uint32_t>(value >> 32) : static_cast<uint32_t>(value);
    }
    return 0;
  }

  void write_reg(uint32_t offset, uint32_t value) override {
    namespace r = hw::reg;
    switch (offset) {
      case r::CONTROL:
        if (value & hw::bits::CONTROL_RESET) {
          reset_state();
          ++reset_count_;
        } else {
          control_ = value & hw::bits::CONTROL_ENABLE;
        }
        return;
      case r::IRQ_STATUS: irq_status_ &= ~value; return;
      case r::IRQ_MASK: irq_mask_ = value & (hw::bits::IRQ_ERROR | ((1u << hw::kNumQueues) - 1)); return;
      default: break;
    }
    if (offset >= r::QUEUE_BASE && offset < r::QUEUE_BASE + hw::kNumQueues * r::QUEUE_STRIDE) {
      Queue& q = queues_[(offset - r::QUEUE_BASE) / r::QUEUE_STRIDE];
      switch ((offset - r::QUEUE_BASE) % r::QUEUE_STRIDE) {
        case r::QUEUE_RING_BASE: q.base = value; q.head = q.tail = 0; ++q.generation; return;
        case r::QUEUE_RING_SIZE: q.size = value; q.head = q.tail = 0; ++q.generation; return;
        case r::QUEUE_RING_TAIL: q.tail = value; return;
        default: return;
      }
    }
  }

  StopReason run(uint64_t max_cycles) override {
    const uint64_t start = cycle_;
    deadline_ = max_cycles > UINT64_MAX - cycle_ ? UINT64_MAX : cycle_ + max_cycles;
    for (;;) {
      if (irq_line()) return StopReason::kInterrupt;
      if (!has_work()) return StopReason::kIdle;
      if (cycle_ - start >= max_cycles) return StopReason::kCycleLimit;
      step_ring();
    }
  }

 private:
  struct Queue {
    uint32_t base = 0, size = 0, head = 0, tail = 0, completed = 0;
    uint32_t generation = 0;  // bumped when RING_BASE/RING_SIZE empty the ring
  };

  void reset_state() {
    control_ = 0;
    irq_status_ = irq_mask_ = 0;
    error_code_ = error_addr_ = error_queue_ = error_instr_ = 0;
    for (Queue& q : queues_) q = Queue{};
    job_ = ActiveJob{};
    std::fill(counters_.begin(), counters_.end(), 0);
    std::fill(act_.begin(), act_.end(), int8_t{0});
    std::fill(wgt_.begin(), wgt_.end(), int8_t{0});
    forget_packed_tiles();
    std::fill(acc_.begin(), acc_.end(), 0);
  }

  bool irq_line() const { return (irq_status_ & irq_mask_) != 0; }

  bool has_work() const {
    // An entry in progress completes even if ENABLE is cleared (as on the RTL).
    if (job_.active) return error_code_ == 0;
    if (!(control_ & hw::bits::CONTROL_ENABLE) || error_code_ != 0) return false;
    for (const Queue& q : queues_)
      if (q.head != q.tail) return true;
    return false;
  }

  void latch_error(const Fault& fault, uint32_t queue, uint32_t instr) {
    error_code_ = static_cast<uint32_t>(fault.code);
    error_addr_ = fault.addr;
    error_queue_ = queue;
    error_instr_ = instr;
    irq_status_ |= hw::bits::IRQ_ERROR;
  }

  void tick(uint64_t cycles) {
    cycle_ += cycles;
    counters_[static_cast<size_t>(hw::Counter::kCycles)] += cycles;
  }
  void count(hw::Counter c, uint64_t v) { counters_[static_cast<size_t>(c)] += v; }

  // --- physical memory -------------------------------------------------------------------
  bool phys_ok(uint64_t phys, uint64_t len) const { return phys + len <= dram_.size(); }
  uint32_t read32_phys(uint32_t phys) const {
    uint32_t v;
    std::memcpy(&v, dram_.data() + phys, 4);
    return v;
  }

  // One-entry translation cache (architecture.md 1.7): timing only, flushed at every EXEC.
  struct Tlb {
    bool valid = false;
    uint32_t page = 0;
    uint32_t pte = 0;
  };

  // Translates one page of an access through `tlb`. Returns the physical address of `va`.
  std::optional<Fault> translate(uint32_t va, bool write, Tlb& tlb, uint32_t* phys) {
    uint32_t pte;
    if (tlb.valid && tlb.page == (va >> kPageShift)) {
      pte = tlb.pte;
    } else {
      const uint64_t pte_addr = static_cast<uint64_t>(pt_base_) + 4ull * (va >> kPageShift);
      if (!phys_ok(pte_addr, 4)) return Fault{ErrorCode::kBusError, static_cast<uint32_t>(pte_addr)};
      pte = read32_phys(static_cast<uint32_t>(pte_addr));
      tlb = Tlb{true, va >> kPageShift, pte};
    }
    if (!(pte & 1u) || (write && !(pte & 2u))) return Fault{ErrorCode::kPageFault, va};
    *phys = (pte & ~kPageMask) | (va & kPageMask);
    return std::nullopt;
  }

  // Translates [va, va+len) (len <= one page) into at most two physical chunks.
  struct Chunks {
    uint32_t phys[2];
    uint32_t len[2];
    int count;
  };
  std::optional<Fault> translate_range(uint32_t va, uint32_t len, bool write, Tlb& tlb, Chunks* out) {
    const uint32_t first_len = std::min<uint32_t>(len, (kPageMask + 1) - (va & kPageMask));
    out->count = first_len < len ? 2 : 1;
    out->len[0] = first_len;
    out->len[1] = len - first_len;
    uint32_t vas[2] = {va, va + first_len};  // wraps modulo 2^32 like the address bus
    for (int c = 0; c < out->count; ++c) {
      if (auto f = translate(vas[c], write, tlb, &out->phys[c])) return f;
      if (!phys_ok(out->phys[c], out->len[c])) return Fault{ErrorCode::kBusError, out->phys[c]};
    }
    return std::nullopt;
  }

  // The page of the last whole-row translation of a LOAD or STORE: the next rows on that page
  // take its frame without a lookup (the same result: nothing changes a PTE between them,
  // except a STORE into the page table, which resets the cursor).
  struct PageCursor {
    bool valid = false;
    uint32_t page = 0;
    uint32_t frame = 0;
  };
  std::optional<Fault> translate_row(uint32_t va, uint32_t len, bool write, PageCursor& cursor, Chunks* out) {
    const uint32_t offset = va & kPageMask;
    if (cursor.valid && (va >> kPageShift) == cursor.page && offset + len <= kPageMask + 1) {
      out->count = 1;
      out->phys[0] = cursor.frame | offset;
      out->len[0] = len;
      if (!phys_ok(out->phys[0], len)) return Fault{ErrorCode::kBusError, out->phys[0]};
      return std::nullopt;
    }
    auto fault = translate_range(va, len, write, dtlb_, out);
    if (!fault && out->count == 1) cursor = PageCursor{true, va >> kPageShift, out->phys[0] & ~kPageMask};
    return fault;
  }

  // A STORE into the job's page table flushes the translation caches (timing only). Returns
  // whether [phys, phys + len) is in the page table.
  bool into_page_table(uint64_t phys, uint64_t len) const {
    const uint64_t pt_end = uint64_t{pt_base_} + 4ull * (1ull << (hw::kVaBits - kPageShift));
    return phys < pt_end && phys + len > pt_base_;
  }
  bool note_store(uint32_t phys, uint32_t len) {
    const bool into_pt = into_page_table(phys, len);
    if (into_pt) itlb_ = dtlb_ = Tlb{};
    timing_.store_written(phys, len, into_pt);
    return into_pt;
  }

  // --- ring processing ---------------------------------------------------------------------
  void step_ring() {
    if (job_.active) {
      continue_job();
      return;
    }
    uint32_t qi = 0;
    while (queues_[qi].head == queues_[qi].tail) ++qi;
    Queue& q = queues_[qi];
    const uint64_t entry_addr = static_cast<uint64_t>(q.base) + q.head;
    job_cycles_ = timing_.ring_entry();
    const bool size_ok = q.size >= 64 && (q.size & (q.size - 1)) == 0 && (q.base & 31) == 0 &&
                         (q.head & 31) == 0 && q.head < q.size &&
                         (q.tail & 31) == 0 && q.tail < q.size;
    if (!size_ok) {
      tick(job_cycles_);
      latch_error({ErrorCode::kBadRingEntry, static_cast<uint32_t>(entry_addr)}, qi, kNoInstr);
      return;
    }
    if (!phys_ok(entry_addr, hw::kRingEntryBytes)) {
      tick(job_cycles_);
      latch_error({ErrorCode::kBusError, static_cast<uint32_t>(entry_addr)}, qi, kNoInstr);
      return;
    }
    isa::Words w;
    std::memcpy(w.data(), dram_.data() + entry_addr, sizeof(w));
    std::optional<Fault> fault;
    uint32_t fault_instr = kNoInstr;
    const auto bad_entry = Fault{ErrorCode::kBadRingEntry, static_cast<uint32_t>(entry_addr)};
    switch (static_cast<hw::RingOpcode>(w[0] & 0xFF)) {
      case hw::RingOpcode::kNop:
        break;
      case hw::RingOpcode::kFence:
        q.completed = w[1];
        irq_status_ |= 1u << qi;
        break;
      case hw::RingOpcode::kExec:
        if ((w[1] & 31) || w[2] == 0 || (w[2] & 31) || (w[3] & 3)) {
          fault = bad_entry;
          break;
        }
        pt_base_ = w[3];
        tokens_ = {0, 0, 0, 0};
        itlb_ = dtlb_ = Tlb{};
        timing_.begin_job();
        job_ = ActiveJob{true, qi, w[1], w[2], 0, q.generation, cycle_};
        continue_job();
        return;
      default:
        fault = bad_entry;
        break;
    }
    tick(job_cycles_);
    if (fault) {
      latch_error(*fault, qi, fault_instr);
      return;
    }
    q.head = (q.head + hw::kRingEntryBytes) & (q.size - 1);
  }

  // Runs the active EXEC job from its next instruction, or leaves it for a later run(): the
  // budget of run() is charged at instruction boundaries, so that one call cannot run far past
  // it (a legal VEC of 42919 x 42752 rows otherwise ran inside a single run(2M) call for
  // minutes; fuzz_exec's finding). Time passes up to the budget while the job is in progress,
  // as on the RTL, and the job's ring entry shows as in progress (STATUS.BUSY, HEAD).
  void continue_job() {
    uint32_t fault_instr = kNoInstr;
    bool suspended = false;
    const std::optional<Fault> fault = exec(&fault_instr, &suspended);
    if (suspended) {
      if (deadline_ > cycle_) tick(deadline_ - cycle_);
      return;
    }
    job_.active = false;
    job_cycles_ += timing_.end_job();  // the engines overlap: the job's cycles come at its end
    if (!fault) count(hw::Counter::kJobs, 1);
    const uint64_t ticked = cycle_ - job_.start_cycle;  // while it waited for budget
    tick(job_cycles_ > ticked ? job_cycles_ - ticked : 0);
    if (fault) {
      latch_error(*fault, job_.queue, fault_instr);
      return;
    }
    Queue& q = queues_[job_.queue];
    if (q.generation == job_.generation) q.head = (q.head + hw::kRingEntryBytes) & (q.size - 1);
  }

  // Engine cycles a GEMM or VEC takes at least, from its words alone: O·I·max(R, N) and
  // O·R·kh·⌈kw/W⌉ (ISA 1.3), below their costs in docs/rtl-timing.md (LOAD and STORE are bounded by the
  // scratchpads they fill or drain); 0 for the others.
  uint64_t work_bound(const isa::Words& w) const {
    switch (static_cast<hw::Opcode>(w[0] & 0xFF)) {
      case hw::Opcode::kGemm:
        return uint64_t{field(w[3], 0, 16)} * field(w[3], 16, 16) *
               std::max<uint64_t>(field(w[2], 16, 16), n_);
      case hw::Opcode::kVec:
        if (field(w[0], 16, 4) == static_cast<uint32_t>(hw::VecMode::kSoftmax))  // three passes
          return 3 * uint64_t{field(w[3], 0, 16)} * field(w[2], 16, 16);
        return uint64_t{field(w[3], 0, 16)} * field(w[2], 16, 16) *
               (field(w[0], 16, 4) >= 4 ? CycleModel::window_cycles(field(w[7], 8, 8), field(w[7], 0, 8)) : 1);
      default:
        return 0;
    }
  }

  // Whether `w` must wait for a later run(): it would run (an instruction that faults at its
  // checks faults now, however large), and its end lies past this call's budget even by a lower
  // bound: GEMM and VEC share the COMPUTE engine, so the job cannot end that instruction before
  // start + the sum of their work bounds. A lower bound, so that waiting never delays a job
  // past its predicted cycles.
  bool must_wait(const isa::Words& w, uint32_t va) {
    const uint64_t bound = work_bound(w);
    if (bound == 0) return false;
    if (job_.start_cycle + job_.compute_bound + bound <= deadline_) {
      job_.compute_bound += bound;
      return false;
    }
    checking_only_ = true;  // the checks of execute() without their effects
    const Fault f = execute(w, va);
    checking_only_ = false;
    if (f.code != ErrorCode::kNone) return false;  // execute() reports the fault
    return true;
  }

  std::optional<Fault> exec(uint32_t* fault_instr, bool* suspended) {
    const uint32_t cmd_va = job_.cmd_va, cmd_bytes = job_.cmd_bytes, queue = job_.queue;
    for (uint32_t off = job_.next; off < cmd_bytes; off += hw::kInstructionBytes) {
      *fault_instr = off;
      const uint32_t va = cmd_va + off;
      Chunks chunks;
      if (auto f = translate_range(va, hw::kInstructionBytes, false, itlb_, &chunks)) return f;
      isa::Words w;
      std::memcpy(w.data(), dram_.data() + chunks.phys[0], sizeof(w));  // 32-aligned: one chunk
      if (must_wait(w, va)) {
        job_.next = off;
        *suspended = true;
        return std::nullopt;
      }
      job_cycles_ += timing_.instruction(va, chunks.phys[0], uint64_t{cmd_va} + cmd_bytes, dram_.size(), w.data());
      if (const Fault f = execute(w, va); f.code != ErrorCode::kNone) return f;
      count(hw::Counter::kInstrs, 1);
      if (trace_) {
        TraceEvent ev;
        ev.cycle = job_.start_cycle + job_cycles_ + timing_.completion();
        ev.queue = queue;
        ev.cmd_offset = off;
        std::copy(w.begin(), w.end(), ev.words);
        trace_(ev);
      }
    }
    return std::nullopt;
  }

  // --- decode ------------------------------------------------------------------------------
  static bool reserved_zero(const isa::Words& w, uint32_t w0_mask,
                            std::initializer_list<std::pair<int, uint32_t>> word_masks) {
    if (w[0] & w0_mask) return false;
    for (auto [index, mask] : word_masks)
      if (w[static_cast<size_t>(index)] & mask) return false;
    return true;
  }

  // Returns the instruction's fault, ErrorCode::kNone if it completed. (A plain Fault, not an
  // optional: GCC assembles the optional of every path in memory and reloads it wider than it
  // stored it, a store-forwarding stall on every instruction.)
  Fault execute(const isa::Words& w, uint32_t va) {
    const Fault illegal{ErrorCode::kIllegalInstruction, va};
    const uint32_t opcode = w[0] & 0xFF;
    const bool pop_prev = w[0] & (1u << 8), pop_next = w[0] & (1u << 9);
    const bool push_prev = w[0] & (1u << 10), push_next = w[0] & (1u << 11);
    isa::Engine engine;
    switch (static_cast<hw::Opcode>(opcode)) {
      case hw::Opcode::kNop:
        if (!reserved_zero(w, 0xFFFFF000u, {{1, ~0u}, {2, ~0u}, {3, ~0u}, {4, ~0u}, {5, ~0u}, {6, ~0u}, {7, ~0u}}))
          return illegal;
        engine = isa::Engine::kCompute;
        break;
      case hw::Opcode::kSync:
        if (!reserved_zero(w, 0xFFFCF000u, {{1, ~0u}, {2, ~0u}, {3, ~0u}, {4, ~0u}, {5, ~0u}, {6, ~0u}, {7, ~0u}}) ||
            field(w[0], 16, 2) > 2)
          return illegal;
        engine = static_cast<isa::Engine>(field(w[0], 16, 2));
        break;
      case hw::Opcode::kLoad:
      case hw::Opcode::kStore: {
        const bool is_store = opcode == static_cast<uint32_t>(hw::Opcode::kStore);
        if (!reserved_zero(w, 0x00F8F000u, {{4, is_store ? 0xFFFF0000u : 0u}}) ||
            field(w[0], 16, 2) > 2 || ((w[0] & isa::kDmaWideBit) && field(w[0], 16, 2) != 0) ||
            field(w[0], 24, 8) > n_ || field(w[3], 0, 16) == 0 ||
            field(w[3], 16, 16) == 0 || field(w[4], 0, 16) == 0)
          return illegal;
        engine = is_store ? isa::Engine::kStore : isa::Engine::kLoad;
        break;
      }
      case hw::Opcode::kGemm:
        if (!reserved_zero(w, 0xFFFCF000u, {}) || field(w[2], 16, 16) == 0 ||
            field(w[3], 0, 16) == 0 || field(w[3], 16, 16) == 0)
          return illegal;
        engine = isa::Engine::kCompute;
        break;
      case hw::Opcode::kVec:
        if (!reserved_zero(w, 0xFF00F000u, {{3, 0xFF000000u}}) || field(w[2], 16, 16) == 0 ||
            field(w[3], 0, 16) == 0 || !vec_fields_legal(w))
          return illegal;
        engine = isa::Engine::kCompute;
        break;
      default:
        return illegal;
    }
    // Token legality and the program-order token rule (architecture.md 1.4).
    if (engine == isa::Engine::kLoad && (pop_prev || push_prev)) return illegal;
    if (engine == isa::Engine::kStore && (pop_next || push_next)) return illegal;
    const auto prev_in = engine == isa::Engine::kCompute ? kL2C : kC2S;   // pop_prev channel
    const auto next_in = engine == isa::Engine::kLoad ? kC2L : kS2C;      // pop_next channel
    const auto prev_out = engine == isa::Engine::kCompute ? kC2L : kS2C;  // push_prev channel
    const auto next_out = engine == isa::Engine::kLoad ? kL2C : kC2S;     // push_next channel
    if (pop_prev && tokens_[prev_in] == 0) return Fault{ErrorCode::kTokenDeadlock, prev_in};
    if (pop_next && tokens_[next_in] == 0) return Fault{ErrorCode::kTokenDeadlock, next_in};
    if (checking_only_) {  // must_wait(): the range checks too, then nothing else
      std::optional<Fault> f;
      if (opcode == static_cast<uint32_t>(hw::Opcode::kGemm)) f = do_gemm(w);
      if (opcode == static_cast<uint32_t>(hw::Opcode::kVec)) f = do_vec(w);
      return f ? *f : Fault{ErrorCode::kNone, 0};
    }
    if (pop_prev) --tokens_[prev_in];
    if (pop_next) --tokens_[next_in];

    std::optional<Fault> fault;
    switch (static_cast<hw::Opcode>(opcode)) {
      case hw::Opcode::kLoad: fault = do_load(w); break;
      case hw::Opcode::kStore: fault = do_store(w); break;
      case hw::Opcode::kGemm: fault = do_gemm(w); break;
      case hw::Opcode::kVec: fault = do_vec(w); break;
      default: break;  // NOP and SYNC: tokens only
    }
    if (fault) return *fault;
    // Pushes take effect after the instruction: an overflow is reported with its effects visible.
    if (push_prev && tokens_[prev_out] >= hw::kMaxTokens) return Fault{ErrorCode::kTokenDeadlock, prev_out};
    if (push_next && tokens_[next_out] >= hw::kMaxTokens) return Fault{ErrorCode::kTokenDeadlock, next_out};
    if (push_prev) ++tokens_[prev_out];
    if (push_next) ++tokens_[next_out];
    return Fault{ErrorCode::kNone, 0};
  }

  uint32_t sp_rows(uint32_t sp) const {
    return sp == 0 ? act_rows_ : sp == 1 ? wgt_rows_ : acc_rows_;
  }

  static std::optional<Fault> check_range(uint64_t max_index, uint32_t limit) {
    if (max_index >= limit) return Fault{ErrorCode::kSpRange, static_cast<uint32_t>(max_index)};
    return std::nullopt;
  }

  // --- LOAD / STORE --------------------------------------------------------------------------
  // Rows are translated and checked one by one, in order, as the ISA defines; their copies are
  // coalesced into one memcpy/memset per run of rows that are contiguous on both sides. A run
  // is flushed before a fault is returned, so the rows before the faulting one are complete
  // and nothing of it is written, exactly as with one copy per row.
  class CoalescedCopy {
   public:
    // Copies len bytes from src to dst later, or zeroes them when src is null.
    void add(std::byte* dst, const std::byte* src, size_t len) {
      if (len == 0) return;  // (an empty pad between two lines would end the run)
      const bool extends = dst == dst_ + len_ && (src == nullptr ? src_ == nullptr : src_ && src == src_ + len_);
      if (!extends) {
        flush();
        dst_ = dst;
        src_ = src;
      }
      len_ += len;
    }
    void flush() {
      if (len_ >= 16 && len_ <= 64) {
        // Most runs are one strided row of 16..64 bytes: 16-byte moves (the last one
        // overlapping) instead of a library call.
        std::byte chunk[16] = {};
        for (size_t i = 0; i < len_; i += 16) {
          const size_t at = std::min(i, len_ - 16);
          if (src_) std::memcpy(chunk, src_ + at, 16);
          std::memcpy(dst_ + at, chunk, 16);
        }
      } else if (len_ != 0) {
        if (src_) {
          std::memcpy(dst_, src_, len_);
        } else {
          std::memset(dst_, 0, len_);
        }
      }
      len_ = 0;
      dst_ = nullptr;
      src_ = nullptr;
    }

   private:
    std::byte* dst_ = nullptr;
    const std::byte* src_ = nullptr;
    size_t len_ = 0;
  };

  // Appends the timing rows of a line, va0 + x·stride for x < count.
  void append_line_rows(uint32_t va0, uint32_t stride, uint32_t count, uint32_t len) {
    const size_t first = dma_rows_.size();
    dma_rows_.resize(first + count);
    DmaRow* row = dma_rows_.data() + first;
    for (uint32_t x = 0; x < count; ++x) row[x] = DmaRow{false, va0 + x * stride, len};
  }

  // `count` rows of `len` bytes, dst + x·dst_stride from src + x·src_stride, in order (a
  // strided line between DRAM and a scratchpad). Rows of a scratchpad size are a few moves
  // each instead of a library call.
  // (Four rows per iteration: a row of one scratchpad size is one or two moves, which the
  // loop's pointer steps and branch otherwise outnumber.)
  template <uint32_t kLen>
  static void copy_rows_of(std::byte* dst, size_t dst_stride, const std::byte* src, size_t src_stride,
                           uint32_t count, uint32_t len) {
    uint32_t x = 0;
    if constexpr (kLen != 0) {
      for (; x + 4 <= count; x += 4, dst += 4 * dst_stride, src += 4 * src_stride) {
        std::memcpy(dst, src, kLen);
        std::memcpy(dst + dst_stride, src + src_stride, kLen);
        std::memcpy(dst + 2 * dst_stride, src + 2 * src_stride, kLen);
        std::memcpy(dst + 3 * dst_stride, src + 3 * src_stride, kLen);
      }
    }
    for (; x < count; ++x, dst += dst_stride, src += src_stride) std::memcpy(dst, src, kLen ? kLen : len);
  }
  static void copy_rows(std::byte* dst, size_t dst_stride, const std::byte* src, size_t src_stride, uint32_t count,
                        uint32_t len) {
    switch (len) {
      case 8: return copy_rows_of<8>(dst, dst_stride, src, src_stride, count, len);
      case 16: return copy_rows_of<16>(dst, dst_stride, src, src_stride, count, len);
      case 32: return copy_rows_of<32>(dst, dst_stride, src, src_stride, count, len);
      case 64: return copy_rows_of<64>(dst, dst_stride, src, src_stride, count, len);
      case 128: return copy_rows_of<128>(dst, dst_stride, src, src_stride, count, len);
      default: return copy_rows_of<0>(dst, dst_stride, src, src_stride, count, len);
    }
  }

  // `count` rows of `len` < `row_bytes` bytes from src + x·src_stride, each zero-filled to
  // `row_bytes` at dst + x·row_bytes (a LOAD of fewer than N elements per row): the Highway
  // kernel of the path's target (on AVX-512 one masked load and one masked store per row), or
  // a copy and a clear per row.
  void copy_partial_rows(std::byte* dst, size_t row_bytes, const std::byte* src, size_t src_stride, uint32_t count,
                         uint32_t len) const {
    if (simd_ != nullptr) return simd_->copy_partial_rows(dst, row_bytes, src, src_stride, count, len);
    for (uint32_t x = 0; x < count; ++x, dst += row_bytes, src += src_stride) {
      std::memcpy(dst, src, len);
      std::memset(dst + len, 0, row_bytes - len);
    }
  }

  // When the `count` rows va0 + x·stride (len bytes each) all lie in one page that
  // translates and whose frame holds them, the physical address of row 0: the whole line then
  // takes one translation. Otherwise nothing, and the caller translates row by row (which
  // reproduces any fault exactly; this lookup changed nothing the row path would not).
  std::optional<uint32_t> line_in_one_page(uint32_t va0, uint32_t stride, uint32_t count, uint32_t len, bool write,
                                           PageCursor& cursor) {
    const uint64_t last = uint64_t{va0} + uint64_t{count - 1} * stride;
    if (last + len > (uint64_t{va0} | kPageMask) + 1) return std::nullopt;  // crosses a page or wraps
    Chunks c;
    if (translate_row(va0, len, write, cursor, &c)) return std::nullopt;
    if (!phys_ok(c.phys[0], last - va0 + len)) return std::nullopt;
    return c.phys[0];
  }

  // line_in_one_page for every line of a LOAD or STORE at once (lines w[1] + z·w[7] + y·w[6]
  // for z < Z, y < Y, each X rows of `len` bytes w[5] apart): when all its rows lie in the
  // page of w[1], the physical address of w[1], and each line's is then w[1]'s plus its
  // offset. The first row that either way translates is w[1]'s, so the translation caches end
  // the same. Otherwise nothing, and the lines translate one by one.
  std::optional<uint32_t> instruction_in_one_page(const isa::Words& w, uint32_t X, uint32_t Y, uint32_t Z,
                                                  uint32_t len, bool write, PageCursor& cursor) {
    const uint64_t span = uint64_t{Z - 1} * w[7] + uint64_t{Y - 1} * w[6] + uint64_t{X - 1} * w[5] + len;
    if (uint64_t{w[1]} + span > (uint64_t{w[1]} | kPageMask) + 1) return std::nullopt;
    Chunks c;
    if (translate_row(w[1], len, write, cursor, &c)) return std::nullopt;
    if (!phys_ok(c.phys[0], span)) return std::nullopt;
    // A STORE into the page table changes translations between its lines.
    if (write && into_page_table(c.phys[0], span)) return std::nullopt;
    return c.phys[0];
  }

  // Bytes per element of a LOAD's or STORE's scratchpad rows, and how many scratchpad rows
  // one (z, y, x) step covers: a wide ACT row (ISA 1.4) is N int16 in two ACT rows, which
  // are contiguous in act_, so a step is one 2N-byte row of the copy loops.
  static uint32_t dma_esize(const isa::Words& w) {
    return field(w[0], 16, 2) == 2 ? 4 : (w[0] & isa::kDmaWideBit) ? 2 : 1;
  }
  static uint32_t dma_rows_per_step(const isa::Words& w) { return (w[0] & isa::kDmaWideBit) ? 2 : 1; }

  std::optional<Fault> do_load(const isa::Words& w) {
    const uint32_t sp = field(w[0], 16, 2);
    const uint32_t elems = field(w[0], 24, 8) ? field(w[0], 24, 8) : n_;
    const uint32_t esize = dma_esize(w);
    const uint32_t X = field(w[3], 0, 16), Y = field(w[3], 16, 16), Z = field(w[4], 0, 16);
    const uint32_t pl = field(w[4], 16, 4), pr = field(w[4], 20, 4);
    const uint32_t pt = field(w[4], 24, 4), pb = field(w[4], 28, 4);
    const uint32_t Xp = X + pl + pr, Yp = Y + pt + pb;
    const uint64_t rows = static_cast<uint64_t>(Z) * Yp * Xp;
    if (auto f = check_range(w[2] + rows * dma_rows_per_step(w) - 1, sp_rows(sp))) return f;
    const uint32_t row_bytes = elems * esize;
    const size_t sp_row_bytes = static_cast<size_t>(n_) * esize;
    const uint32_t stride = w[5];
    uint64_t bytes = 0;
    // Rows for the cycle predictor only when it has not costed this very LOAD before.
    const CycleModel::DmaCost* known = timing_.known_load(w.data());
    dma_rows_.clear();
    if (!known) dma_rows_.reserve(rows);
    // The tiles this LOAD may write lose their packed copies (also when it faults part way).
    if (sp == 1) forget_packed_tiles(w[2] / n_, static_cast<uint32_t>((w[2] + rows - 1) / n_));
    CoalescedCopy copy;
    PageCursor cursor;
    auto pad_rows = [&](std::byte* dst, uint32_t count) {
      if (count == 0) return;
      copy.add(dst, nullptr, count * sp_row_bytes);
      if (!known) dma_rows_.insert(dma_rows_.end(), count, DmaRow{true, 0, 0});
    };
    const std::optional<uint32_t> phys_w1 = instruction_in_one_page(w, X, Y, Z, row_bytes, false, cursor);
    // Scratchpad rows are contiguous: one line of the LOAD is Xp consecutive rows.
    std::byte* line = sp_row_ptr(sp, w[2]);
    for (uint32_t z = 0; z < Z; ++z) {
      for (uint32_t yp = 0; yp < Yp; ++yp, line += Xp * sp_row_bytes) {
        if (yp < pt || yp >= pt + Y) {
          pad_rows(line, Xp);
          continue;
        }
        pad_rows(line, pl);
        std::byte* dst = line + pl * sp_row_bytes;
        const uint32_t va0 = w[1] + z * w[7] + (yp - pt) * w[6];
        if (auto phys0 = phys_w1 ? std::optional<uint32_t>(*phys_w1 + (va0 - w[1]))
                                 : line_in_one_page(va0, stride, X, row_bytes, false, cursor)) {
          const std::byte* src = dram_.data() + *phys0;
          if (stride == row_bytes && row_bytes == sp_row_bytes) {
            copy.add(dst, src, static_cast<size_t>(X) * row_bytes);
          } else if (row_bytes == sp_row_bytes) {
            // Strided full rows: each is its own copy (a LOAD's destination rows are disjoint
            // and it writes no DRAM, so the order against the pending run does not matter).
            copy_rows(dst, sp_row_bytes, src, stride, X, row_bytes);
          } else {
            copy_partial_rows(dst, sp_row_bytes, src, stride, X, row_bytes);  // disjoint rows, as above
          }
          if (!known) append_line_rows(va0, stride, X, row_bytes);
          bytes += uint64_t{X} * row_bytes;
        } else {
          for (uint32_t x = 0; x < X; ++x, dst += sp_row_bytes) {
            const uint32_t va = va0 + x * stride;
            Chunks c;
            if (auto f = translate_row(va, row_bytes, false, cursor, &c)) {
              copy.flush();
              count(hw::Counter::kDmaRdBytes, bytes);
              return f;
            }
            copy.add(dst, dram_.data() + c.phys[0], c.len[0]);
            if (c.count == 2) copy.add(dst + c.len[0], dram_.data() + c.phys[1], c.len[1]);
            if (row_bytes < sp_row_bytes) copy.add(dst + row_bytes, nullptr, sp_row_bytes - row_bytes);
            bytes += row_bytes;
            if (!known) dma_rows_.push_back(DmaRow{false, va, row_bytes});
          }
        }
        pad_rows(line + (pl + X) * sp_row_bytes, pr);
      }
    }
    copy.flush();
    count(hw::Counter::kDmaRdBytes, bytes);
    job_cycles_ += known ? timing_.charge_load(*known) : timing_.load(dma_rows_, w.data());
    return std::nullopt;
  }

  std::optional<Fault> do_store(const isa::Words& w) {
    const uint32_t sp = field(w[0], 16, 2);
    const uint32_t elems = field(w[0], 24, 8) ? field(w[0], 24, 8) : n_;
    const uint32_t esize = dma_esize(w);
    const uint32_t X = field(w[3], 0, 16), Y = field(w[3], 16, 16), Z = field(w[4], 0, 16);
    const uint64_t rows = static_cast<uint64_t>(Z) * Y * X;
    if (auto f = check_range(w[2] + rows * dma_rows_per_step(w) - 1, sp_rows(sp))) return f;
    const uint32_t row_bytes = elems * esize;
    const size_t sp_row_bytes = static_cast<size_t>(n_) * esize;
    const uint32_t stride = w[5];
    uint64_t bytes = 0;
    CoalescedCopy copy;
    PageCursor cursor;
    const std::optional<uint32_t> phys_w1 = instruction_in_one_page(w, X, Y, Z, row_bytes, true, cursor);
    const std::byte* line = sp_row_ptr(sp, w[2]);
    for (uint32_t z = 0; z < Z; ++z) {
      for (uint32_t y = 0; y < Y; ++y, line += X * sp_row_bytes) {
        const uint32_t va0 = w[1] + z * w[7] + y * w[6];
        auto phys0 = phys_w1 ? std::optional<uint32_t>(*phys_w1 + (va0 - w[1]))
                             : line_in_one_page(va0, stride, X, row_bytes, true, cursor);
        // A line that writes into the page table goes row by row (below): its rows must land
        // before the next translation reads them.
        if (phys0 && !into_page_table(*phys0, uint64_t{X - 1} * stride + row_bytes)) {
          std::byte* dst = dram_.data() + *phys0;
          if (stride == row_bytes && row_bytes == sp_row_bytes) {
            copy.add(dst, line, size_t{X} * row_bytes);  // the line is one contiguous run
          } else {
            copy.flush();  // these rows are copied directly, in order
            copy_rows(dst, stride, line, sp_row_bytes, X, row_bytes);
          }
          timing_.store_line_written(*phys0, stride, X, row_bytes);
          bytes += uint64_t{X} * row_bytes;
          continue;
        }
        for (uint32_t x = 0; x < X; ++x) {
          const uint32_t va = va0 + x * stride;
          Chunks c;
          if (auto f = translate_row(va, row_bytes, true, cursor, &c)) {
            copy.flush();
            count(hw::Counter::kDmaWrBytes, bytes);
            return f;
          }
          const std::byte* src = line + x * sp_row_bytes;
          for (int k = 0; k < c.count; ++k) {
            copy.add(dram_.data() + c.phys[k], src + (k ? c.len[0] : 0), c.len[k]);
            if (note_store(c.phys[k], c.len[k])) {
              copy.flush();
              cursor = PageCursor{};
            }
          }
          bytes += row_bytes;
        }
      }
    }
    copy.flush();
    count(hw::Counter::kDmaWrBytes, bytes);
    // The cost is looked up after the data path: a write into the page table has flushed
    // STORE's translation cache by now, and the cost is computed with the flushed cache.
    if (const CycleModel::DmaCost* known = timing_.known_store(w.data())) {
      job_cycles_ += timing_.charge_store(*known);
      return std::nullopt;
    }
    // A completed STORE's rows are its lines in order, whichever path each line took above.
    dma_rows_.clear();
    dma_rows_.reserve(rows);
    for (uint32_t z = 0; z < Z; ++z)
      for (uint32_t y = 0; y < Y; ++y) append_line_rows(w[1] + z * w[7] + y * w[6], stride, X, row_bytes);
    job_cycles_ += timing_.store(dma_rows_, w.data());
    return std::nullopt;
  }

  std::byte* sp_row_ptr(uint32_t sp, uint32_t row) {
    switch (sp) {
      case 0: return reinterpret_cast<std::byte*>(act_.data() + static_cast<size_t>(row) * n_);
      case 1: return reinterpret_cast<std::byte*>(wgt_.data() + static_cast<size_t>(row) * n_);
      default: return reinterpret_cast<std::byte*>(acc_.data() + static_cast<size_t>(row) * n_);
    }
  }

  // --- GEMM --------------------------------------------------------------------------------
  std::optional<Fault> do_gemm(const isa::Words& w) {
    const bool clear = w[0] & (1u << 16);
    const uint32_t act = field(w[1], 0, 16), wgt = field(w[1], 16, 16);
    const uint32_t acc = field(w[2], 0, 16), R = field(w[2], 16, 16);
    const uint32_t O = field(w[3], 0, 16), I = field(w[3], 16, 16);
    const uint32_t aso = field(w[4], 0, 16), asi = field(w[4], 16, 16);
    const uint32_t asr = field(w[5], 0, 16), cso = field(w[5], 16, 16);
    const uint32_t csi = field(w[6], 0, 16), csr = field(w[6], 16, 16);
    const uint32_t wso = field(w[7], 0, 16), wsi = field(w[7], 16, 16);
    const uint64_t act_max = act + uint64_t{O - 1} * aso + uint64_t{I - 1} * asi + uint64_t{R - 1} * asr;
    const uint64_t wgt_max = wgt + uint64_t{O - 1} * wso + uint64_t{I - 1} * wsi;
    const uint64_t acc_max = acc + uint64_t{O - 1} * cso + uint64_t{I - 1} * csi + uint64_t{R - 1} * csr;
    const bool wide = w[0] & isa::kGemmWideBit;  // ISA 1.4: each operand is rows a, a + 1
    if (auto f = check_range(act_max + (wide ? 1 : 0), act_rows_)) return f;
    if (auto f = check_range(wgt_max, wgt_rows_ / n_)) return f;
    if (auto f = check_range(acc_max, acc_rows_)) return f;
    if (checking_only_) return std::nullopt;
    // Packed tiles are cached (direct-mapped) until the weight scratchpad is written: a
    // convolution cycles through the same few tiles for every output row.
    auto packed_tile = [&](uint32_t tile_index) -> const PackedTile& {
      const uint32_t slot = tile_index % kPackedSlots;
      const int8_t* tile = wgt_.data() + static_cast<size_t>(tile_index) * n_ * n_;
      if (packed_index_[slot] != tile_index) {
        pack_tile(tile, n_, mac_kernel_, &packed_[slot]);
        packed_index_[slot] = tile_index;
      }
      if (wide) ensure_pairs(tile, n_, &packed_[slot]);  // (the VNNI packings have none)
      return packed_[slot];
    };
    // When the accumulator rows of different o are disjoint (o·cso lies past every row of an
    // earlier o) and the tile does not depend on o, each accumulator row sees the same updates
    // in the same order whether o or i is the outer loop (GEMM reads ACT and WGT, writes only
    // ACC). Then the whole O×R walk of each i is one kernel call with its tile held, instead of
    // O calls of R rows (a 1×1 convolution of an 8×8 image: R = 8).
    const bool o_blocks_disjoint = wso == 0 && uint64_t{cso} > uint64_t{I - 1} * csi + uint64_t{R - 1} * csr;
    // When every i adds into the same accumulator rows (csi = 0) and the tiles do not depend on
    // o, a row's I products are summed before its accumulator is updated (one kernel call, and
    // one load and store of the row instead of I): the same result when nothing is overwritten
    // or no two rows of the O×R walk share an accumulator (the sums wrap, so their order does not
    // matter), and all I tiles are packed at once (no two in one cache slot).
    const bool rows_distinct = (R == 1 || csr != 0) && (O == 1 || uint64_t{cso} > uint64_t{R - 1} * csr);
    // Wide activations (ISA 1.4) run the int16-pair kernels of the path's Highway target on
    // the same walks (packed_tile gives every tile its pairs), or the portable reference.
    const int64_t wide_target = mac_kernel_.kind == MacKind::kMadd ? mac_kernel_.target : vec_kernel_.target;
    const bool summing_kernel = wide ? wide_target != 0 : mac_kernel_.kind == MacKind::kMadd;
    const bool sum_tiles = I > 1 && I <= kPackedSlots && csi == 0 && (O == 1 || wso == 0) &&
                           (!clear || rows_distinct) && summing_kernel;
    // One walk of `count` tiles (mac_rows_2d_tiles' contract) in the activations' width.
    auto walk = [&](const PackedTile* const* t, uint32_t count, uint32_t a, uint32_t c, uint32_t o_count,
                    uint32_t r_count, bool overwrite) {
      const int8_t* a_ptr = act_.data() + static_cast<size_t>(a) * n_;
      int32_t* c_ptr = acc_.data() + static_cast<size_t>(c) * n_;
      const ptrdiff_t a_st = ptrdiff_t{asi} * n_, a_so = ptrdiff_t{aso} * n_, a_sr = ptrdiff_t{asr} * n_;
      const ptrdiff_t c_so = ptrdiff_t{cso} * n_, c_sr = ptrdiff_t{csr} * n_;
      if (wide)
        return mac_rows_2d_tiles_wide(wide_target, t, count, a_st, a_ptr, a_so, a_sr, c_ptr, c_so, c_sr, o_count,
                                      r_count, overwrite);
      if (count > 1)
        return mac_rows_2d_tiles(t, count, a_st, a_ptr, a_so, a_sr, c_ptr, c_so, c_sr, o_count, r_count, overwrite);
      if (o_count > 1) return mac_rows_2d(*t[0], a_ptr, a_so, a_sr, c_ptr, c_so, c_sr, o_count, r_count, overwrite);
      mac_rows(*t[0], a_ptr, a_sr, c_ptr, c_sr, r_count, overwrite);
    };
    std::array<const PackedTile*, kPackedSlots> tiles;
    auto pack_all = [&] {
      for (uint32_t i = 0; i < I; ++i) tiles[i] = &packed_tile(wgt + i * wsi);
      for (uint32_t i = 0; i < I; ++i)
        if (packed_index_[(wgt + i * wsi) % kPackedSlots] != wgt + i * wsi) return false;
      return true;
    };
    if (sum_tiles && pack_all()) {
      walk(tiles.data(), I, act, acc, O, R, clear);
    } else if (O > 1 && o_blocks_disjoint) {
      for (uint32_t i = 0; i < I; ++i) {
        const PackedTile* tile = &packed_tile(wgt + i * wsi);
        walk(&tile, 1, act + i * asi, acc + i * csi, O, R, clear && i == 0);
      }
    } else {
      for (uint32_t o = 0; o < O; ++o)
        for (uint32_t i = 0; i < I; ++i) {
          const PackedTile* tile = &packed_tile(wgt + o * wso + i * wsi);
          walk(&tile, 1, act + o * aso + i * asi, acc + o * cso + i * csi, 1, R, clear && i == 0);
        }
    }
    job_cycles_ += timing_.gemm(O, I, R);
    count(hw::Counter::kMacs, uint64_t{O} * I * R * n_ * n_);
    return std::nullopt;
  }

  // --- VEC ---------------------------------------------------------------------------------
  // Which optional fields each mode may use (architecture.md 1.4, VEC modes).
  bool vec_fields_legal(const isa::Words& w) const {
    const uint32_t mode = field(w[0], 16, 4);
    const bool bias = w[0] & (1u << 20);
    const uint32_t aux = field(w[6], 16, 16), param = field(w[2], 0, 16);
    const uint32_t kw = field(w[7], 0, 8), kh = field(w[7], 8, 8);
    const bool window = mode == 4 || mode == 5 || mode == 6;
    // Wide rows (ISA 1.4): sources in DWCONV and LUT, destinations in REQUANT, DWCONV and a
    // LUT with a wide source; never with wrap.
    const bool wide_src = w[0] & isa::kVecWideSrcBit, wide_dst = w[0] & isa::kVecWideDstBit;
    if (wide_src && mode != 1 && mode != 6) return false;
    if (wide_dst && !(mode == 0 || mode == 6 || (mode == 1 && wide_src))) return false;
    if ((wide_src || wide_dst) && (w[0] & isa::kVecWrapBit)) return false;
    if (mode == static_cast<uint32_t>(hw::VecMode::kSoftmax)) return vec_softmax_fields_legal(w);
    if (mode > 6) return false;
    // wrap (ISA 1.2): REQUANT, ADD and MUL only, with clamp low = high = 0.
    if ((w[0] & isa::kVecWrapBit) && ((mode != 0 && mode != 2 && mode != 3) || field(w[6], 0, 16) != 0)) return false;
    if (window ? (kw == 0 || kh == 0) : w[7] != 0) return false;
    switch (mode) {
      case 0: return aux == 0;
      case 1: return aux == 0 && !bias;
      case 2: case 3: return !bias;
      case 4: return aux == 0 && !bias && param == 0;
      case 5: return aux == 0 && !bias;
      default: return true;
    }
  }

  // SOFTMAX (ISA 1.3, architecture.md 1.4.1): no bias, wrap or aux; w7 holds the shift
  // (bits 5:0) and the tail lane count (15:8, at most N), nothing else.
  bool vec_softmax_fields_legal(const isa::Words& w) const {
    return !(w[0] & (3u << 20)) && field(w[6], 16, 16) == 0 && (w[7] & 0xFFFF00C0u) == 0 && field(w[7], 8, 8) <= n_;
  }

  // The fields every VEC mode shares (architecture 1.4): rows, counts, strides, zero point
  // and clamp bounds, in the order do_vec and do_vec_softmax bind them.
  struct VecCommon {
    uint32_t src, dst, param, R, O;
    int8_t zp;
    uint32_t sso, ssr, dso, dsr;
    int8_t lo, hi;
  };
  static VecCommon vec_common(const isa::Words& w) {
    return {field(w[1], 0, 16),  field(w[1], 16, 16), field(w[2], 0, 16),
            field(w[2], 16, 16), field(w[3], 0, 16),  static_cast<int8_t>(field(w[3], 16, 8)),
            field(w[4], 0, 16),  field(w[4], 16, 16), field(w[5], 0, 16),
            field(w[5], 16, 16), static_cast<int8_t>(field(w[6], 0, 8)),
            static_cast<int8_t>(field(w[6], 8, 8))};
  }

  // SOFTMAX runs each segment in three passes over its rows, as the RTL does: the maximum, the
  // sum of the table's exponentials, then (after the one division per segment) the output
  // rows, each read before it is written, so outputs that overwrite later source rows are
  // read back as the RTL reads them.
  std::optional<Fault> do_vec_softmax(const isa::Words& w) {
    const auto [src, dst, param, R, O, zp, sso, ssr, dso, dsr, lo, hi] = vec_common(w);
    const uint32_t shift = field(w[7], 0, 6);
    const uint32_t tail = field(w[7], 8, 8) == 0 ? n_ : field(w[7], 8, 8);
    if (auto f = check_range(src + uint64_t{O - 1} * sso + uint64_t{R - 1} * ssr, act_rows_)) return f;
    if (auto f = check_range(dst + uint64_t{O - 1} * dso + uint64_t{R - 1} * dsr, act_rows_)) return f;
    if (auto f = check_range(uint64_t{param} + 256 / n_ - 1, acc_rows_)) return f;
    if (checking_only_) return std::nullopt;
    int32_t table[256];  // latched before the first segment, as the RTL does
    std::memcpy(table, acc_.data() + static_cast<size_t>(param) * n_, sizeof(table));
    auto row = [&](uint32_t index) { return act_.data() + static_cast<size_t>(index) * n_; };
    for (uint32_t o = 0; o < O; ++o) {
      const uint32_t base = src + o * sso;
      auto lanes = [&](uint32_t r) { return r + 1 == R ? tail : n_; };
      int32_t m = -128;
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t c = 0; c < lanes(r); ++c) m = std::max<int32_t>(m, row(base + r * ssr)[c]);
      int64_t sum = 0;
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t c = 0; c < lanes(r); ++c) sum += table[row(base + r * ssr)[c] - m + 255];
      const uint64_t q = sum > 0 ? (uint64_t{1} << 62) / static_cast<uint64_t>(sum) : 0;
      for (uint32_t r = 0; r < R; ++r) {
        int8_t x[32];
        std::memcpy(x, row(base + r * ssr), n_);
        int8_t* y = row(dst + o * dso + r * dsr);
        for (uint32_t c = 0; c < n_; ++c) {
          const int64_t e = c < lanes(r) ? table[x[c] - m + 255] : 0;
          const auto t = static_cast<int64_t>(static_cast<uint64_t>(e) * q);  // 64-bit, wrapping
          y[c] = vec_clamp(static_cast<int64_t>(static_cast<uint64_t>(vec_round_shift(t, shift)) + static_cast<uint64_t>(int64_t{zp})), lo, hi);
        }
      }
    }
    job_cycles_ += timing_.vec(static_cast<uint32_t>(hw::VecMode::kSoftmax), O, R, 1, 1);
    return std::nullopt;
  }

  std::optional<Fault> do_vec(const isa::Words& w) {
    const uint32_t mode = field(w[0], 16, 4);
    if (mode == static_cast<uint32_t>(hw::VecMode::kSoftmax)) return do_vec_softmax(w);
    const bool bias = w[0] & (1u << 20);
    const bool wrap = w[0] & isa::kVecWrapBit;
    const auto [src, dst, param, R, O, zp, sso, ssr, dso, dsr, lo, hi] = vec_common(w);
    const uint32_t aux = field(w[6], 16, 16);
    const uint32_t kw = mode >= 4 ? field(w[7], 0, 8) : 1, kh = mode >= 4 ? field(w[7], 8, 8) : 1;
    const uint32_t wys = field(w[7], 16, 16);
    const bool wide_src = w[0] & isa::kVecWideSrcBit, wide_dst = w[0] & isa::kVecWideDstBit;
    // A wide element is two rows: window elements lie 2 apart, and every range covers the
    // second row of its last element (ISA 1.4).
    const uint64_t src_extent = uint64_t{O - 1} * sso + uint64_t{R - 1} * ssr + uint64_t{kh - 1} * wys +
                                (wide_src ? 2 * uint64_t{kw - 1} + 1 : kw - 1);
    // Range checks in the documented order: src, aux, dst, params.
    if (auto f = check_range(src + src_extent, mode == 0 ? acc_rows_ : act_rows_)) return f;
    if (mode == 2 || mode == 3) {
      if (auto f = check_range(aux + src_extent, act_rows_)) return f;
    } else if (mode == 6) {
      if (auto f = check_range(uint64_t{aux} + kh * kw - 1, wgt_rows_)) return f;
    }
    if (auto f = check_range(dst + uint64_t{O - 1} * dso + uint64_t{R - 1} * dsr + (wide_dst ? 1 : 0), act_rows_))
      return f;
    if (mode == 0 || mode == 6) {
      if (auto f = check_range(uint64_t{param} + 2, acc_rows_)) return f;
    } else if (mode == 1) {
      if (auto f = check_range(uint64_t{param} + (wide_src ? isa::wide_lut_rows(n_) : 256 / n_) - 1, act_rows_))
        return f;
    } else if (mode != 4) {
      if (auto f = check_range(param, acc_rows_)) return f;
    }
    if (checking_only_) return std::nullopt;
    // LUT's P is an ACT row (its table) and MAXPOOL has no parameters: neither reads ACC
    // rows, and P may lie beyond them (a table at the top of ACT).
    static constexpr std::array<int32_t, 3 * 32> kNoParams{};
    const int32_t* prow = mode == 1 || mode == 4 ? kNoParams.data() : acc_.data() + static_cast<size_t>(param) * n_;
    const int32_t* m = prow + n_;  // REQUANT/DWCONV per-lane multiplier row
    const int32_t* s = m + n_;     // and shift row
    const int64_t m0 = prow[0], m1 = prow[1];
    const uint32_t s0 = static_cast<uint32_t>(prow[2]) & 63u;
    const int64_t za = prow[3], zb = prow[4];
    auto out = [&](int64_t t) { return vec_clamp(t, lo, hi); };
    const RequantParams rq{m, s, zp, lo, hi, wrap, wide_dst};
    const BinaryParams bin{mode == 3, za, zb, m0, m1, s0, zp, lo, hi, wrap};
    // LUT reads its table rows once, before any output row (as the RTL latches them), so an
    // output row that overwrites a table row does not change the table of this instruction.
    // (With a wide source the table is the interpolated one, ISA 1.4: 257 int16, little-endian
    // as the host stores them.)
    alignas(64) int8_t table[256];
    alignas(64) int16_t wide_table[isa::kWideLutEntries];
    if (mode == 1 && wide_src) {
      std::memcpy(wide_table, act_.data() + static_cast<size_t>(param) * n_, sizeof(wide_table));
    } else if (mode == 1) {
      std::memcpy(table, act_.data() + static_cast<size_t>(param) * n_, sizeof(table));
    }
    auto act_row = [&](uint32_t row) { return act_.data() + static_cast<size_t>(row) * n_; };
    const RowWalk walk{O, R, ptrdiff_t{sso} * n_, ptrdiff_t{ssr} * n_, ptrdiff_t{dso} * n_, ptrdiff_t{dsr} * n_};
    const int32_t* bias_row = bias ? prow : nullptr;
    switch (mode) {
      case 0:
        requantize_rows(vec_kernel_, acc_.data() + static_cast<size_t>(src) * n_, bias_row, rq, act_row(dst), walk, n_);
        break;
      case 1:
        if (wide_src) {
          lut_rows_wide(vec_kernel_, wide_table, act_row(src), lo, hi, wide_dst, act_row(dst), walk, n_);
        } else {
          lut_rows(vec_kernel_, table, act_row(src), lo, hi, act_row(dst), walk, n_);
        }
        break;
      case 2:
      case 3: binary_rows(vec_kernel_, act_row(src), act_row(aux), bin, act_row(dst), walk, n_); break;
      case 6:
        dwconv_rows(vec_kernel_, act_row(src),
                    Window{ptrdiff_t{wys} * n_, kw, kh, wgt_.data() + size_t{aux} * n_, wide_src}, bias_row, rq,
                    act_row(dst), walk, n_);
        break;
      default:  // MAXPOOL, AVGPOOL
        for (uint32_t o = 0; o < O; ++o) {
          for (uint32_t r = 0; r < R; ++r) {
            int8_t* y = act_row(dst + o * dso + r * dsr);
            int32_t sum[32];
            window_reduce(vec_kernel_, mode == 4 ? WindowOp::kMax : WindowOp::kAdd, act_row(src + o * sso + r * ssr),
                          static_cast<ptrdiff_t>(wys) * n_, kw, kh, nullptr, n_, sum);
            for (uint32_t c = 0; c < n_; ++c)
              y[c] = mode == 4 ? out(sum[c]) : out(vec_round_shift((int64_t{sum[c]} - int64_t{kh} * kw * za) * m0, s0) + zp);
          }
        }
        break;
    }
    job_cycles_ += timing_.vec(mode, O, R, kh, kw, wide_src);
    return std::nullopt;
  }

 private:
  DeviceConfig config_;
  std::span<std::byte> dram_;
  uint32_t n_;
  // make_functional_device always sets it (checked_kernel_path): no second look at the environment.
  KernelPath kernel_path_ = *config_.kernels;
  MacKernel mac_kernel_ = mac_kernel_for(kernel_path_, n_);
  VecKernel vec_kernel_ = vec_kernel_for(kernel_path_);
  // The Highway kernels of the path's VEC target (DMA rows); null on the portable path.
  const SimdKernels* simd_ = vec_kernel_.target == 0 ? nullptr : simd_kernels(vec_kernel_.target);
  CycleModel timing_;
  TraceSink trace_;
  uint32_t act_rows_ = 0, wgt_rows_ = 0, acc_rows_ = 0;
  std::vector<int8_t> act_, wgt_;
  std::vector<int32_t> acc_;
  uint32_t control_ = 0, irq_status_ = 0, irq_mask_ = 0;
  uint32_t error_code_ = 0, error_addr_ = 0, error_queue_ = 0, error_instr_ = 0;
  uint32_t reset_count_ = 0;
  std::array<Queue, hw::kNumQueues> queues_{};
  std::array<uint64_t, hw::kNumCounters> counters_{};
  std::array<uint32_t, 4> tokens_{};
  uint32_t pt_base_ = 0;
  Tlb itlb_, dtlb_;
  std::vector<DmaRow> dma_rows_;  // the current LOAD/STORE's rows, for the cycle predictor
  static constexpr uint32_t kNoTile = 0xFFFFFFFFu;
  static constexpr uint32_t kPackedSlots = 64;
  // Slot s holds the packing of WGT tile packed_index_[s]; a LOAD into that tile invalidates it.
  // The indices are kept apart from the ~3 KiB tiles so that looking one up (every GEMM block)
  // and forgetting a range (every WGT LOAD) read one or two cache lines, not one per slot.
  std::vector<PackedTile> packed_ = std::vector<PackedTile>(kPackedSlots);
  std::array<uint32_t, kPackedSlots> packed_index_;
  void forget_packed_tiles() { packed_index_.fill(kNoTile); }
  // Forgets the packed copies of tiles first..last (a LOAD into those WGT rows).
  void forget_packed_tiles(uint32_t first, uint32_t last) {
    for (uint32_t& index : packed_index_)
      if (index >= first && index <= last) index = kNoTile;
  }
  uint64_t cycle_ = 0;
  uint64_t job_cycles_ = 0;
  uint64_t deadline_ = 0;        // cycle_ at which the current run() call's budget ends
  bool checking_only_ = false;   // execute() as must_wait() calls it
  // The EXEC entry in progress (continue_job()).
  struct ActiveJob {
    bool active = false;
    uint32_t queue = 0, cmd_va = 0, cmd_bytes = 0, next = 0;  // next: byte offset to run
    uint32_t generation = 0;                                  // of its ring when picked
    uint64_t start_cycle = 0;                                 // cycle_ when it was picked
    uint64_t compute_bound = 0;  // sum of work_bound() of its GEMM/VEC instructions run so far
  } job_;
};

// The config's kernel path, checked: the one place that refuses a path this CPU cannot run.
KernelPath checked_kernel_path(const DeviceConfig& config) {
  if (!config.kernels) return default_kernel_path();
  if (const std::string missing = kernel_path_missing_features(*config.kernels); !missing.empty())
    throw std::invalid_argument("kernel path " + std::string(kernel_path_name(*config.kernels)) +
                                ": this CPU lacks " + missing);
  return *config.kernels;
}

}  // namespace

std::unique_ptr<Device> make_functional_device(const DeviceConfig& config,
                                               std::span<std::byte> dram) {
  if (std::find(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end(),
                config.array_dim) == hw::kSupportedArrayDims.end())
    return nullptr;
  DeviceConfig checked = config;
  checked.kernels = checked_kernel_path(config);
  return std::make_unique<FunctionalDevice>(checked, dram);
}

std::string describe_functional_kernels(const DeviceConfig& config) {
  const KernelPath path = checked_kernel_path(config);
  return std::string(kernel_path_name(path)) + ": " + describe_kernel_path(path, config.array_dim);
}

}  // namespace npu::sim
