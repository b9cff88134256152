// npu-bench model IMAGE_OR_ONNX ...: see model_bench.h.
// npu-bench sim [--json] [--array 8|16|32] [--kernels conv,matmul,depthwise] [--seed S]
//               [--trace FILE.fst] [--itrace FILE]
// Arguments by CLI11 and --json by nlohmann::json (npu/tools/cli.h).
// Runs the benchmark kernels of sim/bench on the functional model and on the RTL through
// npu::sim::BareMetal, verifies them (model against a scalar C++ reference, RTL against the
// model, bit for bit) and reports cycles, the model's cycle prediction, MAC utilisation and
// simulation speed. With --json the last stdout line is one JSON object.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels.h"
#include "model_bench.h"
#include "npu/hal/number.h"
#include "npu/sim/bare_metal.h"
#include "npu/sim/program_generator.h"
#include "npu/sim/rtl_device.h"
#include "npu/tools/cli.h"

namespace {

using namespace npu;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU time of the calling thread (the simulation speed per core, independent of other load).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Forwards to a device and prints a progress line on stderr every couple of seconds while a
// long run() is in flight (run() is sliced; the result is the same as one call).
class ProgressDevice final : public sim::Device {
 public:
  ProgressDevice(sim::Device& inner, std::string label) : inner_(inner), label_(std::move(label)) {}
  std::string_view kind() const override { return inner_.kind(); }
  const sim::DeviceConfig& config() const override { return inner_.config(); }
  uint32_t read_reg(uint32_t offset) override { return inner_.read_reg(offset); }
  void write_reg(uint32_t offset, uint32_t value) override { inner_.write_reg(offset, value); }
  uint64_t cycle() const override { return inner_.cycle(); }
  void set_trace(sim::TraceSink sink) override { inner_.set_trace(std::move(sink)); }
  sim::StopReason run(uint64_t max_cycles) override {
    const auto start = Clock::now();
    const uint64_t c0 = inner_.cycle();
    for (;;) {
      const uint64_t done = inner_.cycle() - c0;
      if (done >= max_cycles) return sim::StopReason::kCycleLimit;
      const sim::StopReason why = inner_.run(std::min<uint64_t>(max_cycles - done, kSlice));
      if (why != sim::StopReason::kCycleLimit) return why;
      if (Clock::now() - last_report_ > std::chrono::seconds(2)) {
        last_report_ = Clock::now();
        const double s = seconds_since(start);
        std::fprintf(stderr, "npu-bench: %s: %.2f M cycles so far, %.2f M cycles/s\n", label_.c_str(),
                     static_cast<double>(inner_.cycle() - c0) / 1e6,
                     s > 0 ? static_cast<double>(inner_.cycle() - c0) / s / 1e6 : 0.0);
      }
    }
  }
  void set_label(std::string label) { label_ = std::move(label); }

 private:
  static constexpr uint64_t kSlice = 1u << 18;
  sim::Device& inner_;
  std::string label_;
  Clock::time_point last_report_ = Clock::now();
};

struct Options {
  bool json = false;
  uint32_t dim = hw::kDefaultArrayDim;
  std::vector<std::string> kernels = sim::bench::kernel_short_names();
  uint64_t seed = 1;
  std::string fst_path;
  std::string itrace_path;
};

constexpr const char* kSynopsis =
    "usage: npu-bench sim [--json] [--array 8|16|32] [--kernels conv,matmul,depthwise]\n"
    "                     [--seed S] [--trace FILE.fst] [--itrace FILE]\n"
    "       npu-bench model IMAGE_OR_ONNX [--device D] [--input FILE.npy]...\n"
    "                     [--input-shape NAME=D0,D1,...]... [--iterations N] [--warmup N] [--rounds N]\n"
    "                     [--concurrency N] [--json] [--compare-ort [--ort-model FILE.onnx]]\n";
constexpr const char* kDescription =
    "sim: kernels on the functional model and the RTL (verified; cycles, MAC utilisation, speed).\n"
    "model: latency percentiles, throughput, device cycles and host-time split of a model\n"
    "(--compare-ort: against onnxruntime-node in the same run). Exit 0 ok, 1 failure, 2 usage.\n"
    "`npu-bench sim --help`, `npu-bench model --help`: the options of each.\n";

struct Row {
  std::string name;
  bool model_ok = false;
  std::string model_problem;
  bool rtl_supported = true;
  std::string rtl_status;  // "match", "MISMATCH ...", "unsupported: ..."
  bool rtl_ok = false;
  uint64_t rtl_cycles = 0, model_cycles = 0, macs = 0, instructions = 0;
  double rtl_seconds = 0, rtl_cpu_seconds = 0, model_seconds = 0;
  std::vector<uint64_t> rtl_counters;
};

std::vector<uint64_t> counters(sim::Device& d) {
  std::vector<uint64_t> v;
  for (uint32_t c = 0; c < hw::kNumCounters; ++c) v.push_back(sim::read_counter(d, static_cast<hw::Counter>(c)));
  return v;
}

std::string describe(const sim::BareMetalResult& r) {
  if (r.completed) return "completed";
  if (r.cycle_limit) return "hit the cycle limit";
  if (r.error_code != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "device error %s (ERROR_ADDR 0x%x, instruction +0x%x)",
                  std::string(hw::error_name(static_cast<hw::ErrorCode>(r.error_code))).c_str(), r.error_addr,
                  r.error_instr);
    return buf;
  }
  return "stopped without its fence";
}

// Whether the RTL accepts VEC mode DWCONV: a one-instruction probe (ILLEGAL_INSTRUCTION if not).
std::optional<std::string> rtl_dwconv_unsupported(const sim::DeviceConfig& dc) {
  sim::BareMetal bm(1u << 20);
  const uint32_t cmd = bm.allocate(32, false);
  sim::bench::VecOp v;
  v.mode = hw::VecMode::kDwconv;
  v.dst = 1;
  v.kw = v.kh = 1;
  const isa::Words w = sim::bench::encode_vec(v);
  std::memcpy(bm.view(cmd, 32).data(), w.data(), 32);
  auto dev = sim::make_rtl_device(dc, bm.dram());
  const auto r = bm.run(*dev, cmd, 32, 1'000'000);
  if (r.completed) return std::nullopt;
  return "the RTL rejects VEC mode DWCONV (" + describe(r) + "): not implemented in sim/rtl yet";
}

std::string fmt_count(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIu64, v);
  return buf;
}

// Checks the values of `npu-bench sim` (a UsageError names a bad one).
Options checked(const std::string& array, const std::string& seed, const std::string& kernels,
                const std::string& fst, const std::string& itrace, bool json) {
  Options opt;
  opt.json = json;
  if (!array.empty()) {
    const auto n = npu::parse_uint(array, 32);
    if (!n || (*n != 8 && *n != 16 && *n != 32)) throw tools::UsageError("--array must be 8, 16 or 32");
    opt.dim = static_cast<uint32_t>(*n);
  }
  if (!seed.empty()) opt.seed = tools::parse_count("--seed", seed, 0, UINT64_MAX);
  if (!kernels.empty()) {
    opt.kernels.clear();
    std::stringstream ss(kernels);
    const auto names = sim::bench::kernel_short_names();
    for (std::string k; std::getline(ss, k, ',');) {
      if (std::find(names.begin(), names.end(), k) == names.end())
        throw tools::UsageError("unknown kernel '" + k + "': use conv, matmul or depthwise");
      opt.kernels.push_back(k);
    }
  }
  opt.fst_path = fst;
  opt.itrace_path = itrace;
  return opt;
}

int sim_main(const Options& opt);

}  // namespace

int main(int argc, char** argv) {
  tools::Cli cli("npu-bench", kSynopsis, kDescription);
  CLI::App* sim = cli.add_subcommand(
      "sim",
      "usage: npu-bench sim [--json] [--array 8|16|32] [--kernels conv,matmul,depthwise]\n"
      "                     [--seed S] [--trace FILE.fst] [--itrace FILE]\n",
      "conv 3x3, matmul and depthwise kernels on the functional model and the RTL, verified");
  std::string array, seed, kernels, fst, itrace;
  bool json = false;
  cli.add_json(&json, "array size, RTL speed and one entry per kernel", sim);
  sim->add_option("--array", array, "MAC-array size: 8, 16 or 32 (default 16)")->type_name("N");
  sim->add_option("--kernels", kernels, "the kernels to run (default: all)")->type_name("conv,matmul,depthwise");
  sim->add_option("--seed", seed, "seed of the kernels' data (default 1)")->type_name("S");
  sim->add_option("--trace", fst, "write the RTL's waveform (FST)")->type_name("FILE.fst");
  sim->add_option("--itrace", itrace, "write the instruction trace of both models")->type_name("FILE");
  CLI::App* model = cli.add_subcommand(
      "model",
      "usage: npu-bench model IMAGE_OR_ONNX [--device D] [--input FILE.npy]...\n"
      "                     [--input-shape NAME=D0,D1,...]... [--iterations N] [--warmup N] [--rounds N]\n"
      "                     [--concurrency N] [--json] [--compare-ort [--ort-model FILE.onnx]]\n",
      "a model of your own through the runtime: latency, throughput, device cycles, host split");
  tools::ModelBenchArgs model_args;
  tools::add_model_bench_options(cli, model, &model_args);
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return tools::run_guarded(cli, [&] {
    if (model->parsed()) return tools::model_main(cli, model_args);
    if (!sim->parsed()) throw tools::UsageError("name a mode: npu-bench sim or npu-bench model; see npu-bench --help");
    if (sim->count("--trace") && fst.empty()) throw tools::UsageError("--trace needs a file name (FILE.fst)");
    if (sim->count("--itrace") && itrace.empty()) throw tools::UsageError("--itrace needs a file name");
    if (sim->count("--kernels") && kernels.empty())
      throw tools::UsageError("--kernels needs a list, e.g. conv,matmul,depthwise");
    return sim_main(checked(array, seed, kernels, fst, itrace, json));
  });
}

namespace {

int sim_main(const Options& opt) {
  std::vector<sim::bench::Kernel> kernels;
  uint64_t dram_bytes = 0;
  for (const auto& name : opt.kernels) {
    kernels.push_back(sim::bench::make_kernel(name, opt.dim, opt.seed));
    dram_bytes += sim::bench::dram_bytes_needed(kernels.back());
  }
  // The waveform writer opens its file only when the RTL starts, and says nothing when it
  // cannot: check that the path is writable first.
  if (!opt.fst_path.empty()) {
    FILE* probe = std::fopen(opt.fst_path.c_str(), "w");
    if (probe == nullptr) {
      std::fprintf(stderr,
                   "npu-bench: error: cannot write the waveform '%s': %s; give a writable path\n",
                   opt.fst_path.c_str(), std::strerror(errno));
      return 1;
    }
    std::fclose(probe);
  }
  FILE* itrace = nullptr;
  if (!opt.itrace_path.empty()) {
    itrace = std::fopen(opt.itrace_path.c_str(), "w");
    if (itrace == nullptr) {
      std::fprintf(stderr, "npu-bench: error: cannot write the instruction trace '%s': %s\n",
                   opt.itrace_path.c_str(), std::strerror(errno));
      return 1;
    }
  }

  // One image per device, all kernels placed side by side, so one RTL device (and one FST
  // file) covers the whole run.
  sim::DeviceConfig dc;
  dc.array_dim = opt.dim;
  sim::BareMetal bm_f(dram_bytes), bm_r(dram_bytes);
  std::unique_ptr<sim::Device> fdev = sim::make_functional_device(dc, bm_f.dram());
  std::unique_ptr<sim::Device> rdev;
  std::optional<std::string> dwconv_unsupported;
  try {
    sim::RtlOptions ro;
    ro.fst_path = opt.fst_path;
    rdev = sim::make_rtl_device(dc, bm_r.dram(), ro);
    dwconv_unsupported = rtl_dwconv_unsupported(dc);
  } catch (const std::exception& e) {
    // The RTL of this array size is not in this build: the argument does not fit the build.
    std::fprintf(stderr, "npu-bench: error: %s\n", e.what());
    return tools::kExitUsage;
  }
  ProgressDevice rtl(*rdev, "rtl");
  std::string trace_label;
  auto sink_for = [&](const char* dev) -> sim::TraceSink {
    if (itrace == nullptr) return {};
    return [itrace, dev, &trace_label](const sim::TraceEvent& ev) {
      isa::Words w;
      std::copy(std::begin(ev.words), std::end(ev.words), w.begin());
      std::fprintf(itrace, "%s %s cycle=%" PRIu64 " q=%u +0x%05x %s\n", trace_label.c_str(), dev, ev.cycle, ev.queue,
                   ev.cmd_offset, sim::disassemble(w).c_str());
    };
  };

  std::vector<Row> rows;
  bool all_ok = true;
  for (const auto& k : kernels) {
    Row row;
    row.name = k.name;
    row.macs = k.macs;
    trace_label = k.name;
    const auto pf = sim::bench::place(k, bm_f);
    const auto pr = sim::bench::place(k, bm_r);
    row.instructions = pf.instructions;

    // Functional model: correctness against the scalar reference, then timing.
    fdev->set_trace(sink_for("model"));
    auto t0 = Clock::now();
    const auto rf = bm_f.run(*fdev, pf.cmd_va, pf.cmd_bytes);
    double best = seconds_since(t0);
    fdev->set_trace({});
    row.model_cycles = rf.cycles;
    if (!rf.completed) {
      row.model_problem = "functional model: " + describe(rf);
    } else {
      const int64_t d = sim::bench::first_difference(sim::bench::output_of(bm_f, pf, k), k.expected);
      if (d >= 0) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "functional model output differs from the scalar reference at byte %" PRId64
                      " (model %d, reference %d)", d, sim::bench::output_of(bm_f, pf, k)[static_cast<size_t>(d)],
                      k.expected[static_cast<size_t>(d)]);
        row.model_problem = buf;
      } else {
        row.model_ok = true;
      }
    }
    double total = best;
    for (int rep = 0; rep < 10 && total < 0.5 && row.model_ok; ++rep) {
      t0 = Clock::now();
      bm_f.run(*fdev, pf.cmd_va, pf.cmd_bytes);
      const double s = seconds_since(t0);
      best = std::min(best, s);
      total += s;
    }
    row.model_seconds = best;

    // RTL: bit-identical with the model.
    if (k.uses_vec_dwconv && dwconv_unsupported) {
      row.rtl_supported = false;
      row.rtl_status = "unsupported: " + *dwconv_unsupported;
    } else {
      rtl.set_label(k.name + " on rtl");
      rtl.set_trace(sink_for("rtl"));
      t0 = Clock::now();
      const double cpu0 = thread_cpu_seconds();
      const auto rr = bm_r.run(rtl, pr.cmd_va, pr.cmd_bytes);
      row.rtl_seconds = seconds_since(t0);
      row.rtl_cpu_seconds = thread_cpu_seconds() - cpu0;
      rtl.set_trace({});
      row.rtl_cycles = rr.cycles;
      row.rtl_counters = counters(rtl);
      const auto fc = counters(*fdev);
      if (!rr.completed) {
        row.rtl_status = "RTL " + describe(rr);
      } else {
        const auto df = bm_f.dram(), dr = bm_r.dram();
        const auto it = std::mismatch(df.begin(), df.end(), dr.begin()).first;
        std::string diff;
        if (it != df.end()) {
          const auto off = static_cast<uint64_t>(it - df.begin());
          char buf[200];
          std::snprintf(buf, sizeof buf, "MISMATCH: DRAM byte 0x%" PRIx64 " (output byte %" PRId64 "): model 0x%02x, rtl 0x%02x",
                        off, static_cast<int64_t>(off) - pr.output_va, static_cast<unsigned>(*it),
                        static_cast<unsigned>(dr[off]));
          diff = buf;
        }
        for (uint32_t c = 0; c < hw::kNumCounters && diff.empty(); ++c)
          if (hw::kCounterArchitectural[c] && fc[c] != row.rtl_counters[c])
            diff = "MISMATCH: counter " + std::string(hw::kCounterNames[c]) + ": model " + fmt_count(fc[c]) +
                   ", rtl " + fmt_count(row.rtl_counters[c]);
        row.rtl_ok = diff.empty();
        row.rtl_status = diff.empty() ? "bit-identical with the model" : diff;
      }
    }
    if (!row.model_ok || (row.rtl_supported && !row.rtl_ok)) all_ok = false;
    rows.push_back(std::move(row));
  }
  if (itrace != nullptr) std::fclose(itrace);
  rdev.reset();  // closes the FST file
  if (!opt.fst_path.empty()) {
    std::error_code ec;
    if (std::filesystem::file_size(opt.fst_path, ec) == 0 || ec) {
      std::fprintf(stderr, "npu-bench: error: the waveform '%s' was not written\n",
                   opt.fst_path.c_str());
      return 1;
    }
  }

  const double n2 = static_cast<double>(opt.dim) * opt.dim;
  uint64_t rtl_cycles_total = 0;
  double rtl_seconds_total = 0, rtl_cpu_total = 0;
  std::printf("npu-bench sim: array %ux%u, DRAM latency %u cycles, seed %" PRIu64 "\n", opt.dim, opt.dim,
              dc.dram_latency_cycles, opt.seed);
  std::printf("%-26s %12s %12s %9s %8s %12s %13s\n", "kernel", "RTL cycles", "model cycles", "model/RTL",
              "MAC util", "model MAC/s", "RTL cycles/s");
  for (const Row& r : rows) {
    const double model_macs_s = r.model_seconds > 0 ? static_cast<double>(r.macs) / r.model_seconds : 0;
    char model_rate[32];
    std::snprintf(model_rate, sizeof model_rate, "%.2f G", model_macs_s / 1e9);
    if (r.rtl_supported && r.rtl_cycles > 0) {
      rtl_cycles_total += r.rtl_cycles;
      rtl_seconds_total += r.rtl_seconds;
      rtl_cpu_total += r.rtl_cpu_seconds;
      std::printf("%-26s %12" PRIu64 " %12" PRIu64 " %9.4f %8.3f %12s %11.2f M\n", r.name.c_str(), r.rtl_cycles,
                  r.model_cycles, static_cast<double>(r.model_cycles) / static_cast<double>(r.rtl_cycles),
                  static_cast<double>(r.macs) / (static_cast<double>(r.rtl_cycles) * n2), model_rate,
                  static_cast<double>(r.rtl_cycles) / r.rtl_seconds / 1e6);
    } else {
      std::printf("%-26s %12s %12" PRIu64 " %9s %8s %12s %13s\n", r.name.c_str(), "unsupported", r.model_cycles, "-",
                  "-", model_rate, "-");
    }
  }
  for (const Row& r : rows) {
    std::printf("%s: %" PRIu64 " MACs, %" PRIu64 " instructions; model: %s; rtl: %s\n", r.name.c_str(), r.macs,
                r.instructions, r.model_ok ? "matches the scalar reference" : r.model_problem.c_str(),
                r.rtl_status.c_str());
    if (!r.rtl_counters.empty() && r.rtl_cycles > 0) {
      auto c = [&](hw::Counter x) { return r.rtl_counters[static_cast<size_t>(x)]; };
      const uint64_t busiest = std::max({c(hw::Counter::kBusyLoad), c(hw::Counter::kBusyCompute), c(hw::Counter::kBusyStore)});
      const double cyc = static_cast<double>(r.rtl_cycles);
      if (c(hw::Counter::kMacs) != 0)  // GEMM MACs only (VEC DWCONV does not count)
        std::printf("  rtl: MACS counter %" PRIu64 "; MAC util by that counter %.3f\n", c(hw::Counter::kMacs),
                    static_cast<double>(c(hw::Counter::kMacs)) / (static_cast<double>(r.rtl_cycles) * n2));
      // The engines overlap, so the busy shares may add up to more than 100%; the bound is
      // the utilisation if the busiest engine were never idle.
      std::printf("  rtl busy: LOAD %.1f%%, COMPUTE %.1f%%, STORE %.1f%% (overlapping); token stalls %.1f%%; "
                  "MAC util bound by the busiest engine: %.3f\n",
                  100.0 * static_cast<double>(c(hw::Counter::kBusyLoad)) / cyc,
                  100.0 * static_cast<double>(c(hw::Counter::kBusyCompute)) / cyc,
                  100.0 * static_cast<double>(c(hw::Counter::kBusyStore)) / cyc,
                  100.0 * static_cast<double>(c(hw::Counter::kStallToken)) / cyc,
                  static_cast<double>(r.macs) / (static_cast<double>(busiest) * n2));
    }
  }
  const double rtl_rate = rtl_seconds_total > 0 ? static_cast<double>(rtl_cycles_total) / rtl_seconds_total : 0;
  const double rtl_cpu_rate = rtl_cpu_total > 0 ? static_cast<double>(rtl_cycles_total) / rtl_cpu_total : 0;
  std::printf("RTL simulation speed: %.0f cycles/s wall clock, %.0f cycles per CPU-second, over %" PRIu64
              " cycles (%.2f s)\n",
              rtl_rate, rtl_cpu_rate, rtl_cycles_total, rtl_seconds_total);
  if (!opt.fst_path.empty()) std::printf("waveform: %s\n", opt.fst_path.c_str());
  if (!opt.itrace_path.empty()) std::printf("instruction trace: %s\n", opt.itrace_path.c_str());
  if (opt.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const Row& r : rows) {
      const bool have_rtl = r.rtl_supported && r.rtl_cycles > 0;
      list.push_back(
          {{"name", r.name},
           {"rtl_cycles", have_rtl ? nlohmann::json(r.rtl_cycles) : nlohmann::json(nullptr)},
           {"model_cycles", r.model_cycles},
           {"mac_utilization",
            have_rtl ? tools::json_number(static_cast<double>(r.macs) / (static_cast<double>(r.rtl_cycles) * n2))
                     : nlohmann::json(nullptr)},
           {"model_macs_per_s",
            std::round(r.model_seconds > 0 ? static_cast<double>(r.macs) / r.model_seconds : 0.0)},
           {"macs", r.macs},
           {"rtl_supported", r.rtl_supported},
           {"rtl_status", r.rtl_status},
           {"verified", r.model_ok && (!r.rtl_supported || r.rtl_ok)}});
    }
    const nlohmann::json j = {{"array_dim", opt.dim},
                              {"rtl_cycles_per_s", std::round(rtl_rate)},
                              {"rtl_cycles_per_cpu_s", std::round(rtl_cpu_rate)},
                              {"kernels", list}};
    std::printf("%s\n", tools::json_line(j).c_str());
  }
  return all_ok ? 0 : 1;
}

}  // namespace
