// npu-smi: the bring-up and system-management tool.
//   npu-smi list
//   npu-smi info     [--device SPEC]
//   npu-smi regs     [--device SPEC] [read REG | write REG VALUE]   (privileged)
//   npu-smi reset    [--device SPEC]                                (privileged)
//   npu-smi selftest [--device SPEC]
// SPEC: sim, rtl, accel:N or /dev/accel/accelN (default: $NPU_DEVICE, else the first device
// `list` shows). --json: one JSON object on the last stdout line. Arguments by CLI11, JSON by
// nlohmann::json (npu/tools/cli.h).
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "npu/driver/umd.h"
#include "npu/hal/number.h"
#include "npu/hw/config.h"
#include "npu/sim/device.h"
#include "npu/hw/isa.h"
#include "npu/sim/kernel_paths.h"
#include "npu/tools/cli.h"
#include "uapi/drm/npu_accel.h"

namespace {

using npu::driver::BoInfo;
using npu::driver::JobResult;
using npu::driver::UmdDevice;
namespace hw = npu::hw;
namespace isa = npu::isa;

constexpr const char* kSynopsis =
    "usage: npu-smi list     [--json]\n"
    "       npu-smi info     [--device SPEC] [--json]\n"
    "       npu-smi regs     [--device SPEC] [--json] [read REG | write REG VALUE]\n"
    "       npu-smi reset    [--device SPEC] [--json]\n"
    "       npu-smi selftest [--device SPEC] [--json]\n";
constexpr const char* kDescription =
    "SPEC: sim, rtl, accel:N, /dev/accel/accelN (default: $NPU_DEVICE, else the first of\n"
    "`npu-smi list`). REG: a register name (npu-smi regs lists them) or a byte offset.\n"
    "regs and reset are privileged. Exit 0 ok, 1 failure, 2 usage error.\n";

npu::tools::Cli* g_cli = nullptr;

// "npu-smi: error: MESSAGE" on stderr; returns `code`.
int fail(const std::string& message, int code = 1) { return g_cli->error(message, code); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

struct Reg {
  std::string name;
  uint32_t offset;
};

// Register names come from the generated configuration, never from hand-copied offsets.
std::vector<Reg> registers() {
  std::vector<Reg> regs;
  for (const auto& r : hw::reg::kNamedRegisters) regs.push_back({std::string(r.name), r.offset});
  return regs;
}

bool parse_reg(const std::string& s, uint32_t* out) {
  for (const auto& r : registers()) {
    if (r.name == s) {
      *out = r.offset;
      return true;
    }
  }
  const auto v = npu::parse_uint(s, UINT32_MAX);
  if (!v) return false;
  *out = static_cast<uint32_t>(*v);
  return true;
}

std::unique_ptr<UmdDevice> open_device(const std::string& spec) {
  std::string s = spec;
  if (s.empty()) {
    auto devs = npu::driver::list_devices();
    if (devs.empty()) {
      fail("no device found: give --device sim (the functional model) or load the npu kernel driver");
      return nullptr;
    }
    s = devs.front();
  }
  std::string err;
  auto dev = UmdDevice::open(s, &err);
  if (!dev) fail(err);
  return dev;
}

std::string ver(uint32_t v) { return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF); }

int cmd_list(nlohmann::json* out) {
  auto devs = npu::driver::list_devices();
  nlohmann::json list = nlohmann::json::array();
  std::printf("%-22s %-11s %-4s %-5s %-18s %s\n", "DEVICE", "PLATFORM", "DIM", "ISA",
              "FINGERPRINT", "STATUS");
  for (const auto& d : devs) {
    std::string err;
    auto dev = UmdDevice::open(d, &err);
    if (!dev) {
      std::printf("%-22s %-11s %-4s %-5s %-18s %s\n", d.c_str(), "-", "-", "-", "-", err.c_str());
      list.push_back({{"device", d}, {"status", err}});
      continue;
    }
    const auto& i = dev->info();
    list.push_back({{"device", d}, {"platform", i.platform}, {"array_dim", i.array_dim},
                    {"isa_version", ver(i.isa_version)}, {"fingerprint", hex(i.fingerprint)},
                    {"status", "ok"}});
    std::printf("%-22s %-11s %-4u %-5s 0x%016" PRIx64 " ok\n", d.c_str(), i.platform.c_str(),
                i.array_dim, ver(i.isa_version).c_str(), i.fingerprint);
  }
  *out = {{"devices", list}};
  return 0;
}

int cmd_info(UmdDevice& dev, nlohmann::json* out) {
  const auto& i = dev.info();
  uint64_t resets = 0;
  dev.reset_count(&resets);
  nlohmann::json& j = *out;
  j = {{"device", i.node},
       {"driver", {{"name", i.driver_name},
                   {"version", std::to_string(i.driver_major) + "." + std::to_string(i.driver_minor) +
                                   "." + std::to_string(i.driver_patch)}}},
       {"platform", i.platform},
       {"device_id", hex(i.device_id)},
       {"isa_version", ver(i.isa_version)},
       {"fw_version", ver(i.fw_version)},
       {"fingerprint", hex(i.fingerprint)},
       {"array_dim", i.array_dim},
       {"clock_mhz", i.clock_mhz},
       {"scratchpads", {{"act_rows", i.act_sp_rows}, {"wgt_tiles", i.wgt_sp_tiles}, {"acc_rows", i.acc_sp_rows}}},
       {"queues", i.num_queues},
       {"queue_depth", i.queue_depth},
       {"max_contexts", i.max_contexts},
       {"memory", {{"dram_bytes", i.dram_size}, {"page_bytes", i.page_size}, {"max_bo_bytes", i.max_bo_size}}},
       {"va_start", hex(i.va_start)},
       {"va_size", hex(i.va_size)},
       {"capabilities", hex(i.capabilities)},
       {"resets", resets}};
  std::printf("device        %s\n", i.node.c_str());
  std::printf("driver        %s %u.%u.%u\n", i.driver_name.c_str(), i.driver_major, i.driver_minor,
              i.driver_patch);
  std::printf("platform      %s\n", i.platform.c_str());
  if (i.platform == "functional") {
    // The functional model runs in this process: which of this CPU's features its kernels use
    // (docs/architecture.md 1.8, NPU_SIM_KERNELS). The device opened, so the path is valid.
    npu::sim::DeviceConfig dc;
    dc.array_dim = i.array_dim;
    std::printf("host cpu      %s\n", npu::sim::host_cpu_feature_names().c_str());
    std::printf("host kernels  %s\n", npu::sim::describe_functional_kernels(dc).c_str());
    j["host_cpu"] = npu::sim::host_cpu_feature_names();
    j["host_kernels"] = npu::sim::describe_functional_kernels(dc);
  }
  std::printf("device id     0x%08x\n", i.device_id);
  std::printf("isa version   %s\n", ver(i.isa_version).c_str());
  std::printf("fw version    %s\n", ver(i.fw_version).c_str());
  std::printf("fingerprint   0x%016" PRIx64 "\n", i.fingerprint);
  std::printf("array         %ux%u MACs @ %u MHz\n", i.array_dim, i.array_dim, i.clock_mhz);
  std::printf("scratchpads   act %u rows, wgt %u tiles, acc %u rows\n", i.act_sp_rows,
              i.wgt_sp_tiles, i.acc_sp_rows);
  std::printf("queues        %u (queue depth %u jobs per context)\n", i.num_queues, i.queue_depth);
  std::printf("contexts      max %u\n", i.max_contexts);
  std::printf("memory        dram %" PRIu64 " MiB, page %" PRIu64 " KiB, max bo %" PRIu64 " MiB\n",
              i.dram_size >> 20, i.page_size >> 10, i.max_bo_size >> 20);
  std::printf("address space 0x%" PRIx64 " + 0x%" PRIx64 "\n", i.va_start, i.va_size);
  std::printf("capabilities  0x%" PRIx64 "%s%s%s%s%s\n", i.capabilities,
              (i.capabilities & DRM_NPU_CAP_IN_SYNCS) ? " in-syncs" : "",
              (i.capabilities & DRM_NPU_CAP_PERF) ? " perf" : "",
              (i.capabilities & DRM_NPU_CAP_BO_RDONLY) ? " bo-rdonly" : "",
              (i.capabilities & DRM_NPU_CAP_REG_ACCESS) ? " reg-access" : "",
              (i.capabilities & DRM_NPU_CAP_COHERENT) ? " coherent" : "");
  std::printf("resets        %" PRIu64 "\n", resets);
  std::vector<uint64_t> counters;
  if (dev.read_counters(&counters) == 0) {
    for (size_t k = 0; k < counters.size(); ++k) {
      j["counters"][std::string(hw::kCounterNames[k])] = counters[k];
      std::printf("counter       %-13s %" PRIu64 "%s\n", std::string(hw::kCounterNames[k]).c_str(),
                  counters[k], hw::kCounterArchitectural[k] ? "" : " (timing)");
    }
  }
  return 0;
}

int cmd_regs(UmdDevice& dev, const std::vector<std::string>& args, nlohmann::json* out) {
  if (args.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : registers()) {
      uint32_t v = 0;
      if (int e = dev.reg_read(r.offset, &v)) return fail(dev.describe_error(e));
      std::printf("0x%03x %-22s 0x%08x\n", r.offset, r.name.c_str(), v);
      list.push_back({{"name", r.name}, {"offset", r.offset}, {"value", v}});
    }
    *out = {{"registers", list}};
    return 0;
  }
  uint32_t off = 0;
  if (args[0] == "read" && args.size() == 2 && parse_reg(args[1], &off)) {
    uint32_t v = 0;
    if (int e = dev.reg_read(off, &v)) return fail(dev.describe_error(e));
    std::printf("0x%03x 0x%08x\n", off, v);
    *out = {{"offset", off}, {"value", v}};
    return 0;
  }
  if (args[0] == "write" && args.size() == 3 && parse_reg(args[1], &off)) {
    const auto value = npu::parse_uint(args[2], UINT32_MAX);
    if (!value)
      return fail("regs write: '" + args[2] + "' is not a number from 0 to 0xffffffff (decimal or 0x hex)", 2);
    const auto v = static_cast<uint32_t>(*value);
    if (int e = dev.reg_write(off, v)) return fail(dev.describe_error(e));
    std::printf("0x%03x <- 0x%08x\n", off, v);
    *out = {{"offset", off}, {"written", v}};
    return 0;
  }
  if ((args[0] == "read" && args.size() == 2) || (args[0] == "write" && args.size() == 3))
    return fail("regs " + args[0] + ": '" + args[1] +
                    "' is not a register: give a name (npu-smi regs lists them) or a byte offset",
                2);
  return fail("regs takes nothing, read REG or write REG VALUE; see npu-smi --help", 2);
}

int cmd_reset(UmdDevice& dev, nlohmann::json* out) {
  uint64_t before = 0, after = 0;
  dev.reset_count(&before);
  if (int e = dev.reset()) return fail("reset failed: " + dev.describe_error(e));
  dev.reset_count(&after);
  *out = {{"device", dev.info().node}, {"resets_before", before}, {"resets_after", after}};
  std::printf("%s: reset ok (reset count %" PRIu64 " -> %" PRIu64 ")\n", dev.info().node.c_str(),
              before, after);
  return 0;
}

// ---- self-test: one tiny command stream per engine, checked against a CPU reference --------
struct Bo {
  BoInfo info;
  uint8_t* ptr = nullptr;
};

class SelfTest {
 public:
  explicit SelfTest(UmdDevice& dev) : dev_(dev), n_(dev.info().array_dim) {}

  int bo(uint64_t size, Bo* out) {
    if (int e = dev_.bo_create(size, 0, &out->info)) return e;
    void* p = nullptr;
    if (int e = dev_.bo_map(out->info.handle, &p)) return e;
    out->ptr = static_cast<uint8_t*>(p);
    bos_.push_back(out->info.handle);
    return 0;
  }
  uint32_t va(const Bo& b) const { return static_cast<uint32_t>(b.info.npu_va); }

  // Runs prog; returns an error string or "" and the job's cycles.
  std::string run(const std::vector<isa::Words>& prog, uint64_t* cycles) {
    Bo cmd;
    if (int e = bo(prog.size() * 32, &cmd)) return dev_.describe_error(e);
    std::memcpy(cmd.ptr, prog.data(), prog.size() * 32);
    if (ctx_ == 0) {
      if (int e = dev_.ctx_create(DRM_NPU_PRIORITY_NORMAL, &ctx_)) return dev_.describe_error(e);
    }
    uint64_t seq = 0;
    if (int e = dev_.submit(ctx_, bos_, cmd.info.handle, 0, prog.size() * 32, &seq)) {
      return dev_.describe_error(e);
    }
    JobResult r;
    const int e = dev_.wait(ctx_, seq, npu::driver::deadline_after_ms(30000), &r);
    if (e != 0 && e != EIO) return dev_.describe_error(e);
    *cycles = r.device_cycles;
    if (r.status != DRM_NPU_JOB_SUCCESS) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "job status %u, device error %s at 0x%" PRIx64, r.status,
                    std::string(hw::error_name(static_cast<hw::ErrorCode>(r.device_error))).c_str(),
                    r.error_addr);
      return buf;
    }
    return "";
  }

  std::string load() {  // LOAD with left/right padding, copied out through STORE
    Bo src, dst;
    if (bo(65536, &src) || bo(65536, &dst)) return "bo_create failed";
    const uint16_t rows = 4;
    for (uint32_t i = 0; i < rows * n_; ++i) src.ptr[i] = static_cast<uint8_t>(i * 13 + 5);
    isa::Load ld;
    ld.va = va(src);
    ld.x = rows;
    ld.x_stride = n_;
    ld.pad_l = 1;
    ld.pad_r = 1;
    ld.tokens.push_next = true;
    isa::Sync sy;
    sy.tokens.pop_prev = true;
    sy.tokens.push_next = true;
    isa::Store st;
    st.va = va(dst);
    st.x = rows + 2;
    st.x_stride = n_;
    st.tokens.pop_prev = true;
    uint64_t cycles = 0;
    std::string err = run({isa::encode(ld), isa::encode(sy), isa::encode(st)}, &cycles);
    if (!err.empty()) return err;
    for (uint32_t r = 0; r < rows + 2u; ++r) {
      for (uint32_t k = 0; k < n_; ++k) {
        const uint8_t want = (r == 0 || r == rows + 1u) ? 0 : src.ptr[(r - 1) * n_ + k];
        if (dst.ptr[r * n_ + k] != want) return "padded row " + std::to_string(r) + " mismatch";
      }
    }
    cycles_ = cycles;
    return "";
  }

  std::string store() {  // STORE scattering rows with a Y stride
    Bo src, dst;
    if (bo(65536, &src) || bo(65536, &dst)) return "bo_create failed";
    for (uint32_t i = 0; i < 4 * n_; ++i) src.ptr[i] = static_cast<uint8_t>(0xA0 + i);
    std::memset(dst.ptr, 0xEE, 16 * n_);
    isa::Load ld;
    ld.va = va(src);
    ld.x = 4;
    ld.x_stride = n_;
    ld.tokens.push_next = true;
    isa::Sync sy;
    sy.tokens.pop_prev = true;
    sy.tokens.push_next = true;
    isa::Store st;
    st.va = va(dst);
    st.x = 1;
    st.y = 4;
    st.y_stride = 3 * n_;  // rows land 3 rows apart
    st.tokens.pop_prev = true;
    uint64_t cycles = 0;
    std::string err = run({isa::encode(ld), isa::encode(sy), isa::encode(st)}, &cycles);
    if (!err.empty()) return err;
    for (uint32_t r = 0; r < 12; ++r) {
      for (uint32_t k = 0; k < n_; ++k) {
        const uint8_t want = (r % 3 == 0) ? src.ptr[(r / 3) * n_ + k] : 0xEE;
        if (dst.ptr[r * n_ + k] != want) return "row " + std::to_string(r) + " mismatch";
      }
    }
    cycles_ = cycles;
    return "";
  }

  std::string gemm() {  // one activation row times one weight tile, int32 out
    Bo a, w, out;
    if (bo(65536, &a) || bo(65536, &w) || bo(65536, &out)) return "bo_create failed";
    for (uint32_t k = 0; k < n_; ++k) a.ptr[k] = static_cast<uint8_t>(static_cast<int8_t>(k % 7) - 3);
    for (uint32_t i = 0; i < n_ * n_; ++i) w.ptr[i] = static_cast<uint8_t>(static_cast<int8_t>((i * 5) % 11) - 5);
    isa::Load la;
    la.va = va(a);
    isa::Load lw;
    lw.sp = hw::Scratchpad::kWgt;
    lw.va = va(w);
    lw.x = static_cast<uint16_t>(n_);
    lw.x_stride = n_;
    lw.tokens.push_next = true;
    isa::Gemm g;
    g.clear = true;
    g.tokens.pop_prev = true;
    g.tokens.push_next = true;
    isa::Store st;
    st.sp = hw::Scratchpad::kAcc;
    st.va = va(out);
    st.tokens.pop_prev = true;
    uint64_t cycles = 0;
    std::string err =
        run({isa::encode(la), isa::encode(lw), isa::encode(g), isa::encode(st)}, &cycles);
    if (!err.empty()) return err;
    for (uint32_t c = 0; c < n_; ++c) {
      int32_t want = 0;
      for (uint32_t k = 0; k < n_; ++k) {
        want += static_cast<int8_t>(a.ptr[k]) * static_cast<int8_t>(w.ptr[k * n_ + c]);
      }
      int32_t got;
      std::memcpy(&got, out.ptr + 4 * c, 4);
      if (got != want) {
        return "column " + std::to_string(c) + ": got " + std::to_string(got) + ", want " +
               std::to_string(want);
      }
    }
    cycles_ = cycles;
    return "";
  }

  std::string vec() {  // REQUANT with bias, multiplier, shift, zero point and clamp
    Bo in, out;
    if (bo(65536, &in) || bo(65536, &out)) return "bo_create failed";
    std::vector<int32_t> rows(4 * n_);
    for (uint32_t k = 0; k < n_; ++k) {
      rows[k] = static_cast<int32_t>(k * 1000) - 7000;  // values
      rows[n_ + k] = 37;                                // bias
      rows[2 * n_ + k] = 3 + static_cast<int32_t>(k);   // multiplier
      rows[3 * n_ + k] = 6;                             // shift
    }
    std::memcpy(in.ptr, rows.data(), rows.size() * 4);
    isa::Load ld;
    ld.sp = hw::Scratchpad::kAcc;
    ld.va = va(in);
    ld.x = 4;
    ld.x_stride = 4 * n_;
    ld.tokens.push_next = true;
    isa::VecRequant v;
    v.bias = true;
    v.param = 1;
    v.zero_point = 3;
    v.clamp_lo = -100;
    v.clamp_hi = 100;
    v.tokens.pop_prev = true;
    v.tokens.push_next = true;
    isa::Store st;
    st.va = va(out);
    st.tokens.pop_prev = true;
    uint64_t cycles = 0;
    std::string err = run({isa::encode(ld), isa::encode(v), isa::encode(st)}, &cycles);
    if (!err.empty()) return err;
    for (uint32_t k = 0; k < n_; ++k) {
      const int64_t val = int64_t{rows[k]} + rows[n_ + k];
      const int64_t s = rows[3 * n_ + k] & 63;
      int64_t t = val * rows[2 * n_ + k];
      t = s > 0 ? (t + (int64_t{1} << (s - 1))) >> s : t;
      t += 3;
      const int8_t want = static_cast<int8_t>(t < -100 ? -100 : (t > 100 ? 100 : t));
      if (static_cast<int8_t>(out.ptr[k]) != want) {
        return "channel " + std::to_string(k) + ": got " +
               std::to_string(static_cast<int8_t>(out.ptr[k])) + ", want " + std::to_string(want);
      }
    }
    cycles_ = cycles;
    return "";
  }

  void cleanup() {
    for (uint32_t h : bos_) dev_.bo_destroy(h);
    bos_.clear();
  }
  uint64_t cycles() const { return cycles_; }
  ~SelfTest() {
    cleanup();
    if (ctx_ != 0) dev_.ctx_destroy(ctx_);
  }

 private:
  UmdDevice& dev_;
  uint32_t n_;
  uint32_t ctx_ = 0;
  uint64_t cycles_ = 0;
  std::vector<uint32_t> bos_;
};

int cmd_selftest(UmdDevice& dev, nlohmann::json* out) {
  SelfTest t(dev);
  struct Case {
    const char* engine;
    std::function<std::string()> fn;
  };
  const Case cases[] = {{"LOAD", [&] { return t.load(); }},
                        {"STORE", [&] { return t.store(); }},
                        {"GEMM", [&] { return t.gemm(); }},
                        {"VEC", [&] { return t.vec(); }}};
  int failed = 0;
  nlohmann::json engines = nlohmann::json::array();
  std::printf("selftest on %s (%s, %ux%u)\n", dev.info().node.c_str(), dev.info().platform.c_str(),
              dev.info().array_dim, dev.info().array_dim);
  for (const auto& c : cases) {
    const std::string err = c.fn();
    t.cleanup();
    engines.push_back({{"engine", c.engine}, {"passed", err.empty()}, {"error", err}});
    if (err.empty()) engines.back()["cycles"] = t.cycles();
    if (err.empty()) {
      std::printf("  %-6s PASS  (%" PRIu64 " device cycles)\n", c.engine, t.cycles());
    } else {
      ++failed;
      std::printf("  %-6s FAIL  %s\n", c.engine, err.c_str());
    }
  }
  std::printf("%s\n", failed == 0 ? "selftest: PASS" : "selftest: FAIL");
  *out = {{"device", dev.info().node}, {"platform", dev.info().platform}, {"array_dim", dev.info().array_dim},
          {"engines", engines}, {"passed", failed == 0}};
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  npu::tools::Cli cli("npu-smi", kSynopsis, kDescription);
  g_cli = &cli;
  CLI::App& app = cli.app();
  std::string spec;
  bool json = false;
  std::vector<std::string> reg_args;
  // --device and --json belong to npu-smi and may also follow the command (fallthrough).
  cli.add_device(&spec, nullptr, "$NPU_DEVICE, else the first of `npu-smi list`");
  cli.add_json(&json, "what the command printed");
  app.fallthrough();
  CLI::App* list = cli.add_subcommand("list", "usage: npu-smi list [--json]\n",
                                      "the devices: node, platform, array size, ISA, fingerprint");
  CLI::App* info = cli.add_subcommand("info", "usage: npu-smi info [--device SPEC] [--json]\n",
                                      "one device's parameters, capabilities and counters");
  CLI::App* regs =
      cli.add_subcommand("regs", "usage: npu-smi regs [--device SPEC] [--json] [read REG | write REG VALUE]\n",
                         "all registers, or read REG, or write REG VALUE (privileged)");
  regs->add_option("ARGS", reg_args, "read REG | write REG VALUE");
  CLI::App* reset = cli.add_subcommand("reset", "usage: npu-smi reset [--device SPEC] [--json]\n",
                                       "reset the device (privileged)");
  CLI::App* selftest = cli.add_subcommand("selftest", "usage: npu-smi selftest [--device SPEC] [--json]\n",
                                          "one tiny job per engine, checked against a CPU reference");
  for (CLI::App* sub : {list, info, regs, reset, selftest}) sub->fallthrough();
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return npu::tools::run_guarded(cli, [&] {
    nlohmann::json out;
    int rc = 0;
    if (list->parsed()) {
      if (!spec.empty()) throw npu::tools::UsageError("list shows every device; --device is for the other commands");
      rc = cmd_list(&out);
    } else if (info->parsed() || regs->parsed() || reset->parsed() || selftest->parsed()) {
      auto dev = open_device(npu::tools::device_spec(spec, ""));
      if (!dev) return 1;
      if (info->parsed()) rc = cmd_info(*dev, &out);
      if (regs->parsed()) rc = cmd_regs(*dev, reg_args, &out);
      if (reset->parsed()) rc = cmd_reset(*dev, &out);
      if (selftest->parsed()) rc = cmd_selftest(*dev, &out);
    } else {
      throw npu::tools::UsageError("name a command: list, info, regs, reset or selftest; see npu-smi --help");
    }
    if (json && rc != npu::tools::kExitUsage && !out.is_null()) std::printf("%s\n", npu::tools::json_line(out).c_str());
    return rc;
  });
}
