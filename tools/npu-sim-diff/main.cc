// npu-sim-diff --programs N --seed S [--array 8|16|32] [--verbose] [--json]
// Runs constrained-random programs on the functional model and on the RTL and compares DRAM,
// architectural registers and architectural counters bit-exactly. A program that ends in an
// error is compared on what architecture.md 1.6 keeps precise (error registers, STATUS,
// IRQ_STATUS, ring HEAD/TAIL, COMPLETED_SEQ, JOBS): the RTL's engines overlap, so DRAM and the
// other counters are undefined after an error. On the first mismatch it prints the difference
// and the instruction trace, and exits 1.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "npu/hal/number.h"
#include "npu/sim/bare_metal.h"
#include "npu/sim/program_generator.h"
#include "npu/sim/rtl_device.h"
#include "npu/tools/cli.h"

namespace {

using namespace npu;
namespace isa = npu::isa;

struct Outcome {
  sim::BareMetalResult result;
  std::vector<std::byte> dram;
  std::vector<std::pair<std::string, uint32_t>> regs;
  std::vector<bool> precise;  // per entry of regs: still defined after an error
};

Outcome run_one(sim::Device& dev, sim::BareMetal& bm, const sim::ProgramMemory& mem,
                const sim::GeneratedProgram& prog) {
  auto cmd = bm.view(mem.cmd_va, sim::ProgramMemory::kCmdBytes);
  std::memset(cmd.data(), 0, cmd.size());
  std::memcpy(cmd.data(), prog.instructions.data(), prog.instructions.size() * 32);
  const uint32_t va = mem.cmd_va + (prog.misaligned_exec ? 16 : 0);
  Outcome o;
  o.result = bm.run(dev, va, static_cast<uint32_t>(std::max<size_t>(prog.instructions.size(), 1) * 32), 50'000'000);
  o.dram.assign(bm.dram().begin(), bm.dram().end());
  namespace r = hw::reg;
  for (auto [name, off] : std::initializer_list<std::pair<const char*, uint32_t>>{
           {"STATUS", r::STATUS}, {"IRQ_STATUS", r::IRQ_STATUS}, {"ERROR_CODE", r::ERROR_CODE},
           {"ERROR_ADDR", r::ERROR_ADDR}, {"ERROR_QUEUE", r::ERROR_QUEUE}, {"ERROR_INSTR", r::ERROR_INSTR},
           {"RING_HEAD0", r::RING_HEAD(0)}, {"RING_TAIL0", r::RING_TAIL(0)},
           {"COMPLETED_SEQ0", r::COMPLETED_SEQ(0)}}) {
    o.regs.emplace_back(name, dev.read_reg(off));
    o.precise.push_back(true);
  }
  for (uint32_t c = 0; c < hw::kNumCounters; ++c)
    if (hw::kCounterArchitectural[c]) {
      o.regs.emplace_back(std::string(hw::kCounterNames[c]), static_cast<uint32_t>(sim::read_counter(dev, static_cast<hw::Counter>(c))));
      o.precise.push_back(c == static_cast<uint32_t>(hw::Counter::kJobs));
    }
  return o;
}

constexpr const char* kSynopsis =
    "usage: npu-sim-diff --programs N --seed S [--array 8|16|32] [--verbose] [--json]\n";
constexpr const char* kDescription =
    "Runs N random programs (seeded by S) on the functional model and the RTL and compares\n"
    "DRAM, registers and the architectural counters; prints the model/RTL cycle ratio.\n"
    "Exit 0 when every program matched, 1 on a mismatch, 2 on a usage error.\n";

constexpr uint64_t kMaxPrograms = 1000000000;

int diff(uint64_t programs, uint64_t seed, uint32_t dim, bool verbose, bool json);

}  // namespace

int main(int argc, char** argv) {
  tools::Cli cli("npu-sim-diff", kSynopsis, kDescription);
  CLI::App& app = cli.app();
  std::string programs_text = "100", seed_text = "1", array_text;
  bool verbose = false, json = false;
  app.add_option("--programs", programs_text,
                 "how many programs (default 100; 0 runs none and checks that this array size has an "
                 "RTL build)")->type_name("N");
  app.add_option("--seed", seed_text, "the seed of the first program (default 1)")->type_name("S");
  app.add_option("--array", array_text, "MAC-array size: 8, 16 or 32 (default 16)")->type_name("N");
  app.add_flag("--verbose", verbose, "print every program's outcome, not only a mismatch");
  cli.add_json(&json, "programs, array size, errors by class, cycle ratio, RTL speed, mismatch");
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return tools::run_guarded(cli, [&] {
    const uint64_t programs = tools::parse_count("--programs", programs_text, 0, kMaxPrograms);
    const uint64_t seed = tools::parse_count("--seed", seed_text, 0, UINT64_MAX);
    uint32_t dim = hw::kDefaultArrayDim;
    if (!array_text.empty()) {
      const auto n = npu::parse_uint(array_text, 32);
      if (!n || (*n != 8 && *n != 16 && *n != 32)) throw tools::UsageError("--array must be 8, 16 or 32");
      dim = static_cast<uint32_t>(*n);
    }
    return diff(programs, seed, dim, verbose, json);
  });
}

namespace {

int diff(uint64_t programs, uint64_t seed, uint32_t dim, bool verbose, bool json) {
  sim::DeviceConfig dc;
  dc.array_dim = dim;
  const uint64_t dram_bytes = 2u << 20;
  sim::BareMetal bm_f(dram_bytes), bm_r(dram_bytes);
  std::unique_ptr<sim::Device> fdev = sim::make_functional_device(dc, bm_f.dram());
  std::unique_ptr<sim::Device> rdev;
  try {
    rdev = sim::make_rtl_device(dc, bm_r.dram());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "npu-sim-diff: error: %s\n", e.what());
    return 2;
  }
  if (!fdev) {
    std::fprintf(stderr, "npu-sim-diff: error: array dim %u is not supported (8, 16, 32)\n", dim);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  uint64_t errors_seen = 0, rtl_cycles = 0, model_cycles_completed = 0, rtl_cycles_completed = 0;
  double worst_cycle_error = 0;
  std::map<std::string, uint64_t> error_classes;
  // Completed VEC instructions (functional model's trace) by mode and wrap bit, so the run
  // shows which VEC paths it compared.
  std::map<std::string, uint64_t> vec_completed;
  std::map<std::string, uint64_t> wide_completed;  // ISA 1.4 wide rows, by instruction
  for (uint64_t p = 0; p < programs; ++p) {
    const uint64_t s = seed * 1'000'003ull + p;
    const auto mem_f = sim::ProgramMemory::create(bm_f, s);
    const auto mem_r = sim::ProgramMemory::create(bm_r, s);
    const auto prog = sim::generate_program(s, dim, mem_f);
    std::vector<sim::TraceEvent> trace;
    fdev->set_trace([&](const sim::TraceEvent& ev) { trace.push_back(ev); });
    const Outcome f = run_one(*fdev, bm_f, mem_f, prog);
    const Outcome r = run_one(*rdev, bm_r, mem_r, prog);
    rtl_cycles += r.result.cycles;
    if (f.result.completed && r.result.completed && r.result.cycles > 0) {
      // Timing is not architectural: report how well the model predicts it, do not fail on it.
      model_cycles_completed += f.result.cycles;
      rtl_cycles_completed += r.result.cycles;
      worst_cycle_error = std::max(worst_cycle_error, std::abs(static_cast<double>(f.result.cycles) / static_cast<double>(r.result.cycles) - 1.0));
    }
    // Fresh memory per program: re-create the BareMetal images from scratch next time.
    bm_f = sim::BareMetal(dram_bytes);
    bm_r = sim::BareMetal(dram_bytes);
    fdev = sim::make_functional_device(dc, bm_f.dram());
    rdev = sim::make_rtl_device(dc, bm_r.dram());
    std::string mismatch;
    const bool error_run = f.result.error_code != 0 || r.result.error_code != 0;
    for (size_t i = 0; i < f.regs.size() && mismatch.empty(); ++i)
      if ((!error_run || f.precise[i]) && f.regs[i].second != r.regs[i].second) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "register %s: functional 0x%08x, rtl 0x%08x", f.regs[i].first.c_str(),
                      f.regs[i].second, r.regs[i].second);
        mismatch = buf;
      }
    if (mismatch.empty() && f.result.completed != r.result.completed) mismatch = "completion differs";
    if (mismatch.empty() && !error_run)
      for (size_t b = 0; b < f.dram.size(); ++b)
        if (f.dram[b] != r.dram[b]) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "DRAM byte 0x%zx: functional 0x%02x, rtl 0x%02x", b,
                        static_cast<unsigned>(f.dram[b]), static_cast<unsigned>(r.dram[b]));
          mismatch = buf;
          break;
        }
    for (const auto& ev : trace) {
      const uint32_t opcode = ev.words[0] & 0xFF;
      if (opcode == static_cast<uint32_t>(hw::Opcode::kGemm) && (ev.words[0] & isa::kGemmWideBit)) ++wide_completed["GEMM"];
      if (opcode == static_cast<uint32_t>(hw::Opcode::kLoad) && (ev.words[0] & isa::kDmaWideBit)) ++wide_completed["LOAD"];
      if (opcode == static_cast<uint32_t>(hw::Opcode::kStore) && (ev.words[0] & isa::kDmaWideBit)) ++wide_completed["STORE"];
      if (opcode != static_cast<uint32_t>(hw::Opcode::kVec)) continue;
      static const char* modes[] = {"REQUANT", "LUT", "ADD", "MUL", "MAXPOOL", "AVGPOOL", "DWCONV"};
      const uint32_t mode = (ev.words[0] >> 16) & 0xF;
      const char* name = mode < 7 ? modes[mode] : mode == static_cast<uint32_t>(hw::VecMode::kSoftmax) ? "SOFTMAX" : "?";
      ++vec_completed[std::string(name) + ((ev.words[0] & isa::kVecWrapBit) ? "+wrap" : "")];
      if (ev.words[0] & (isa::kVecWideSrcBit | isa::kVecWideDstBit))
        ++wide_completed[std::string(name) + ((ev.words[0] & isa::kVecWideSrcBit) ? "+src" : "") +
                         ((ev.words[0] & isa::kVecWideDstBit) ? "+dst" : "")];
    }
    if (f.result.error_code) {
      ++errors_seen;
      ++error_classes[std::string(hw::error_name(static_cast<hw::ErrorCode>(f.result.error_code)))];
    }
    if (!mismatch.empty() || verbose) {
      std::printf("program %llu (seed %llu, %zu instructions, aimed at %s): %s\n", static_cast<unsigned long long>(p),
                  static_cast<unsigned long long>(s), prog.instructions.size(),
                  prog.expected_error.empty() ? "completion" : prog.expected_error.c_str(),
                  mismatch.empty() ? "match" : ("MISMATCH: " + mismatch).c_str());
    }
    if (!mismatch.empty()) {
      std::printf("instruction trace (functional model, completed instructions):\n");
      for (const auto& ev : trace) {
        isa::Words w;
        std::copy(std::begin(ev.words), std::end(ev.words), w.begin());
        std::printf("  +0x%04x %s\n", ev.cmd_offset, sim::disassemble(w).c_str());
      }
      std::printf("program:\n");
      for (size_t i = 0; i < prog.instructions.size(); ++i)
        std::printf("  +0x%04zx %s\n", i * 32, sim::disassemble(prog.instructions[i]).c_str());
      std::printf("functional: error %u addr 0x%x instr 0x%x; rtl: error %u addr 0x%x instr 0x%x\n",
                  f.result.error_code, f.result.error_addr, f.result.error_instr, r.result.error_code,
                  r.result.error_addr, r.result.error_instr);
      if (json)
        std::printf("%s\n", tools::json_line({{"programs", p + 1}, {"array_dim", dim}, {"matched", false},
                                                {"mismatch", {{"program", p}, {"seed", s}, {"what", mismatch}}}})
                                  .c_str());
      return 1;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report > std::chrono::seconds(2)) {
      last_report = now;
      std::fprintf(stderr, "npu-sim-diff: %llu/%llu programs match so far\n", static_cast<unsigned long long>(p + 1),
                   static_cast<unsigned long long>(programs));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("npu-sim-diff: %llu programs at %ux%u, all match (%llu ended in an error:", static_cast<unsigned long long>(programs),
              dim, dim, static_cast<unsigned long long>(errors_seen));
  for (const auto& [name, count] : error_classes) std::printf(" %s=%llu", name.c_str(), static_cast<unsigned long long>(count));
  std::printf("), %.1f s, %.0f RTL cycles/s\n", secs, static_cast<double>(rtl_cycles) / secs);
  std::printf("VEC instructions completed:");
  for (const auto& [name, count] : vec_completed) std::printf(" %s=%llu", name.c_str(), static_cast<unsigned long long>(count));
  std::printf("\nwide-row instructions completed (ISA 1.4):");
  for (const auto& [name, count] : wide_completed) std::printf(" %s=%llu", name.c_str(), static_cast<unsigned long long>(count));
  std::printf("\n");
  if (rtl_cycles_completed > 0)
    std::printf("cycle prediction on completed programs: model/RTL = %.4f overall, worst program off by %.2f%%\n",
                static_cast<double>(model_cycles_completed) / static_cast<double>(rtl_cycles_completed), 100 * worst_cycle_error);
  if (json) {
    const nlohmann::json j = {
        {"programs", programs},
        {"array_dim", dim},
        {"matched", true},
        {"errors", error_classes},
        {"vec_completed", vec_completed},
        {"wide_completed", wide_completed},
        {"seconds", secs},
        {"rtl_cycles_per_s", tools::json_number(static_cast<double>(rtl_cycles) / secs)},
        {"model_rtl_cycle_ratio",
         rtl_cycles_completed > 0
             ? tools::json_number(static_cast<double>(model_cycles_completed) / static_cast<double>(rtl_cycles_completed))
             : nlohmann::json(nullptr)},
        {"worst_cycle_error", worst_cycle_error}};
    std::printf("%s\n", tools::json_line(j).c_str());
  }
  return 0;
}

}  // namespace
