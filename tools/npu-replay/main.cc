// npu-replay TRACE [--device SPEC] [--trace FILE.fst] [--itrace FILE] [--verbose] [--json]
// Replays a register/memory trace (docs/replay.md) on a device through the user-mode driver,
// the interface npu-smi uses: registers on the privileged REG_READ/REG_WRITE path, memory in
// buffer objects, jobs through SUBMIT/WAIT. Exit 0 when every check passed, 1 on the first
// failed check or bad trace line (named as TRACE:LINE) or a trace that cannot be read or has
// no commands, or a device that cannot be opened, 2 on a usage error. Arguments by CLI11,
// --json by nlohmann::json (npu/tools/cli.h).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "npu/driver/kmd.h"
#include "npu/driver/umd.h"
#include "npu/hal/file.h"
#include "npu/hw/config.h"
#include "npu/sim/device.h"
#include "npu/hw/isa.h"
#include "npu/sim/program_generator.h"
#include "npu/tools/cli.h"
#include "replay.h"
#include "uapi/drm/npu_accel.h"
#if NPU_REPLAY_HAVE_RTL
#include "npu/sim/rtl_device.h"
#endif

namespace {

using npu::driver::UmdDevice;
namespace hw = npu::hw;
namespace sim = npu::sim;
using Clock = std::chrono::steady_clock;

// A device the tool can close while the driver still holds it: after close() it is an idle
// device with zero registers (used only once every job has ended).
class ClosableDevice final : public sim::Device {
 public:
  explicit ClosableDevice(std::unique_ptr<sim::Device> inner)
      : inner_(std::move(inner)), kind_(inner_->kind()), config_(inner_->config()) {}
  std::string_view kind() const override { return kind_; }
  const sim::DeviceConfig& config() const override { return config_; }
  uint32_t read_reg(uint32_t offset) override {
    std::lock_guard<std::mutex> lk(mu_);
    return inner_ ? inner_->read_reg(offset) : 0;
  }
  void write_reg(uint32_t offset, uint32_t value) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (inner_) inner_->write_reg(offset, value);
  }
  sim::StopReason run(uint64_t max_cycles) override {
    std::lock_guard<std::mutex> lk(mu_);
    return inner_ ? inner_->run(max_cycles) : sim::StopReason::kIdle;
  }
  uint64_t cycle() const override {
    std::lock_guard<std::mutex> lk(mu_);
    return inner_ ? inner_->cycle() : 0;
  }
  void set_trace(sim::TraceSink sink) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (inner_) inner_->set_trace(std::move(sink));
  }
  void close() {
    std::lock_guard<std::mutex> lk(mu_);
    inner_.reset();
  }

 private:
  mutable std::mutex mu_;
  std::unique_ptr<sim::Device> inner_;
  std::string kind_;
  sim::DeviceConfig config_;
};

ClosableDevice* g_observed = nullptr;  // owned by the driver model's device instance

constexpr const char* kSynopsis =
    "usage: npu-replay TRACE [--device sim|rtl|accel:N|/dev/accel/accelN] [--trace FILE.fst]\n"
    "                  [--itrace FILE] [--verbose] [--json]\n";
constexpr const char* kDescription =
    "Replays a register/memory trace (format: docs/replay.md) through the user-mode driver.\n"
    "Exit 0 when every check passed, 1 on a failed check, a bad trace line or a device that\n"
    "cannot be opened, 2 on a usage error.\n";

struct Args {
  std::string trace_path, device, fst, itrace_path;
  bool verbose = false, json = false;
};

int replay(const npu::tools::Cli& cli, const Args& args);

}  // namespace

int main(int argc, char** argv) {
  npu::tools::Cli cli("npu-replay", kSynopsis, kDescription);
  CLI::App& app = cli.app();
  Args args;
  app.add_option("TRACE", args.trace_path, "the trace file")->required();
  cli.add_device(&args.device);
  app.add_option("--trace", args.fst, "write the RTL's waveform (FST; needs --device rtl)")->type_name("FILE.fst");
  app.add_option("--itrace", args.itrace_path, "write the instruction trace (sim or rtl)")->type_name("FILE");
  app.add_flag("--verbose", args.verbose, "echo every line, every BO's address and every job result");
  cli.add_json(&args.json, "trace, device, commands, passed, failure, device cycles");
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return npu::tools::run_guarded(cli, [&] { return replay(cli, args); });
}

namespace {

int replay(const npu::tools::Cli& cli, const Args& args) {
  if (args.trace_path.empty()) return cli.usage_error("no trace file given");
  const std::string& trace_path = args.trace_path;
  const std::string& fst = args.fst;
  const std::string& itrace_path = args.itrace_path;
  const std::string device = npu::tools::device_spec(args.device);
  const bool in_process = device == "sim" || device == "rtl";
  if (device == "rtl" && !npu::driver::kmd::device_available("rtl"))
    return cli.usage_error("the rtl device is not built here (configure with -DNPU_BUILD_RTL=ON), use --device sim");
  if (!fst.empty() && device != "rtl") return cli.usage_error("--trace (FST waveform) needs --device rtl");
  if (!itrace_path.empty() && !in_process)
    return cli.usage_error("--itrace needs an in-process device: --device sim or --device rtl");
  // Read whole and bounded: a device or a runaway file (/dev/zero) is refused, not buffered.
  auto trace_bytes =
      npu::read_file(trace_path, npu::kMaxTextFileBytes, "replay trace (docs/replay.md)");
  if (!trace_bytes.is_ok()) return cli.error(trace_bytes.status().message());
  const std::string in_text(trace_bytes->begin(), trace_bytes->end());

  // Observability: an in-process device of the same kind, with the waveform and the
  // instruction trace switched on, registered under its own name and opened the same way.
  FILE* itrace = nullptr;
  std::string spec = device;
  if (!fst.empty() || !itrace_path.empty()) {
    if (!itrace_path.empty()) {
      itrace = std::fopen(itrace_path.c_str(), "w");
      if (itrace == nullptr) return cli.error("cannot write '" + itrace_path + "': " + std::strerror(errno));
    }
    spec = "replay-" + device;
    const bool rtl = device == "rtl";
    npu::driver::kmd::register_device(
        spec, rtl ? DRM_NPU_PLATFORM_RTL : DRM_NPU_PLATFORM_FUNCTIONAL,
        [rtl, fst, itrace](std::span<std::byte> dram) -> std::unique_ptr<sim::Device> {
          std::unique_ptr<sim::Device> d;
#if NPU_REPLAY_HAVE_RTL
          if (rtl) {
            sim::RtlOptions o;
            o.fst_path = fst;
            d = sim::make_rtl_device(sim::DeviceConfig{}, dram, o);
          }
#endif
          if (!rtl) d = sim::make_functional_device(sim::DeviceConfig{}, dram);
          if (!d) return nullptr;
          if (itrace != nullptr)
            d->set_trace([itrace](const sim::TraceEvent& ev) {  // runs on the driver's device thread
              npu::isa::Words w;
              std::copy(std::begin(ev.words), std::end(ev.words), w.begin());
              std::fprintf(itrace, "cycle=%" PRIu64 " q=%u +0x%05x %s\n", ev.cycle, ev.queue, ev.cmd_offset,
                           sim::disassemble(w).c_str());
            });
          auto c = std::make_unique<ClosableDevice>(std::move(d));
          g_observed = c.get();
          return c;
        });
  }
  std::string err;
  auto dev = UmdDevice::open(spec, &err);
  if (!dev) return cli.error("cannot open device '" + device + "': " + err);
  uint32_t id = 0;
  if (int e = dev->reg_read(hw::reg::ID, &id); e != 0)
    return cli.error("the register path is refused (" + dev->describe_error(e) + "): run as root or with CAP_SYS_ADMIN");

  const auto start = Clock::now();
  npu::replay::Options options;
  options.verbose = args.verbose;
  const auto outcome = npu::replay::run_trace(*dev, in_text, trace_path, options);
  if (!outcome.passed()) std::fprintf(stderr, "npu-replay: FAIL %s\n", outcome.failure.c_str());
  const int rc = outcome.passed() ? 0 : 1;
  const int commands = outcome.commands;
  const uint64_t cycles = outcome.device_cycles;
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  dev.reset();
  // The driver keeps its device instance for the life of the process: close the observed
  // device explicitly so that the FST file is complete and the trace sink is gone.
  if (g_observed != nullptr) g_observed->close();
  if (itrace != nullptr) std::fclose(itrace);
  if (!fst.empty()) std::printf("waveform: %s\n", fst.c_str());
  if (!itrace_path.empty()) std::printf("instruction trace: %s\n", itrace_path.c_str());
  std::printf("npu-replay: %s on %s: %d commands, %s; %" PRIu64 " device cycles, %.0f cycles/s\n", trace_path.c_str(),
              device.c_str(), commands, rc == 0 ? "all checks passed" : "FAILED", cycles,
              secs > 0 ? static_cast<double>(cycles) / secs : 0.0);
  if (args.json) {
    const nlohmann::json j = {{"trace", trace_path},      {"device", device},
                              {"commands", commands},     {"passed", rc == 0},
                              {"failure", outcome.failure}, {"device_cycles", cycles},
                              {"seconds", secs}};
    std::printf("%s\n", npu::tools::json_line(j).c_str());
  }
  return rc;
}

}  // namespace
