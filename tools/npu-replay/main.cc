// npu-replay TRACE [--device sim|rtl] [--trace FILE.fst] [--itrace FILE] [--verbose]
// Replays a register/memory trace (docs/replay.md) on a device through the user-mode driver,
// the interface npu-smi uses: registers on the privileged REG_READ/REG_WRITE path, memory in
// buffer objects, jobs through SUBMIT/WAIT. Exit 0 when every check passed, 1 on the first
// failed check or bad trace line (named as TRACE:LINE) or a trace that cannot be read or has
// no commands, 2 on a usage or device error.
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

constexpr const char* kUsage =
    "usage: npu-replay TRACE [--device sim|rtl] [--trace FILE.fst] [--itrace FILE] [--verbose]\n"
    "  Replays a register/memory trace (format: docs/replay.md) through the user-mode driver.\n"
    "  Exit 0 when every check passed, 1 on a failed check or bad trace line, 2 on a usage error.\n";

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "npu-replay: error: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string trace_path, device = "sim", fst, itrace_path;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> std::string {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') return {};
      (void)what;
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--device") {
      device = value("device");
      if (device != "sim" && device != "rtl") return usage("--device must be sim or rtl");
    } else if (a == "--trace") {
      fst = value("FILE.fst");
      if (fst.empty()) return usage("--trace needs a file name (FILE.fst)");
    } else if (a == "--itrace") {
      itrace_path = value("FILE");
      if (itrace_path.empty()) return usage("--itrace needs a file name");
    } else if (a == "--verbose") {
      verbose = true;
    } else if (!a.empty() && a[0] == '-') {
      return usage("unknown option '" + a + "'");
    } else if (trace_path.empty()) {
      trace_path = a;
    } else {
      return usage("one trace file at a time ('" + trace_path + "' and '" + a + "' given)");
    }
  }
  if (trace_path.empty()) return usage("no trace file given");
  // Read whole and bounded: a device or a runaway file (/dev/zero) is refused, not buffered.
  auto trace_bytes =
      npu::read_file(trace_path, npu::kMaxTextFileBytes, "replay trace (docs/replay.md)");
  if (!trace_bytes.is_ok()) {
    std::fprintf(stderr, "npu-replay: error: %s\n", trace_bytes.status().message().c_str());
    return 1;
  }
  const std::string in_text(trace_bytes->begin(), trace_bytes->end());
  if (device == "rtl" && !npu::driver::kmd::device_available("rtl"))
    return usage("the rtl device is not built here (configure with -DNPU_BUILD_RTL=ON), use --device sim");
  if (!fst.empty() && device != "rtl") return usage("--trace (FST waveform) needs --device rtl");

  // Observability: an in-process device of the same kind, with the waveform and the
  // instruction trace switched on, registered under its own name and opened the same way.
  FILE* itrace = nullptr;
  std::string spec = device;
  if (!fst.empty() || !itrace_path.empty()) {
    if (!itrace_path.empty()) {
      itrace = std::fopen(itrace_path.c_str(), "w");
      if (itrace == nullptr) return usage("cannot write '" + itrace_path + "': " + std::strerror(errno));
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
  if (!dev) return usage("cannot open device '" + device + "': " + err);
  uint32_t id = 0;
  if (int e = dev->reg_read(hw::reg::ID, &id); e != 0)
    return usage("the register path is refused (" + dev->describe_error(e) + "): run as root or with CAP_SYS_ADMIN");

  const auto start = Clock::now();
  npu::replay::Options options;
  options.verbose = verbose;
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
  return rc;
}
