// The process-wide table of in-process devices, and the kmd.h control functions.
#include <cerrno>
#include <charconv>
#include <map>
#include <stdexcept>

#include "kmd_internal.h"
#include "npu/driver/in_process.h"
#include "npu/driver/log.h"
#include "uapi/drm/npu_accel.h"
#if NPU_DRIVER_HAVE_RTL
#include "npu/sim/rtl_device.h"
#endif

#define NPU_STRINGIFY_(x) #x
#define NPU_STRINGIFY(x) NPU_STRINGIFY_(x)

namespace npu::driver::kmd {
namespace {

struct Entry {
  uint32_t platform = 0;
  DeviceFactory make;
  std::shared_ptr<KDevice> current;
  std::string probe_error;  // why the last probe failed
};

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry, std::less<>> entries;
  Registry() {
    entries["sim"] = Entry{DRM_NPU_PLATFORM_FUNCTIONAL, [](std::span<std::byte> dram) {
                             return sim::make_functional_device(sim::DeviceConfig{}, dram);
                           }, nullptr};
#if NPU_DRIVER_HAVE_RTL
    entries["rtl"] = Entry{DRM_NPU_PLATFORM_RTL, [](std::span<std::byte> dram) {
                             return sim::make_rtl_device(sim::DeviceConfig{}, dram);
                           }, nullptr};
#endif
  }
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: devices outlive static teardown
  return *r;
}

// The current instance of `name`, created (probed) if there is none or it was unplugged.
int instance(std::string_view name, std::shared_ptr<KDevice>* out) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.entries.find(name);
  if (it == r.entries.end()) return ENODEV;
  Entry& e = it->second;
  if (!e.current || e.current->unplugged()) {
    e.current.reset();
    e.probe_error.clear();
    int err = 0;
    try {
      err = KDevice::create(std::string(name), e.platform, e.make, &e.current);
    } catch (const std::exception& ex) {
      // A factory refuses its configuration by throwing; the probe fails as a driver's would.
      e.probe_error = ex.what();
      e.current.reset();
      return ENODEV;
    }
    if (err != 0) return err;
  }
  *out = e.current;
  return 0;
}

// The current instance without probing a new one (nullptr if none).
std::shared_ptr<KDevice> existing(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.entries.find(name);
  return it == r.entries.end() ? nullptr : it->second.current;
}

}  // namespace

int open_device(std::string_view name, bool privileged, std::shared_ptr<File>* out) {
  std::shared_ptr<KDevice> dev;
  int err = instance(name, &dev);
  if (err != 0) return err;
  return dev->open_file(privileged, out);
}

int parse_faults(std::string_view text, std::vector<NamedFaultRule>* out, std::string* error) {
  static const std::map<std::string_view, Fault> kNames = {
      {"hang", Fault::kHang},           {"page_fault", Fault::kPageFault},
      {"eintr", Fault::kEintr},         {"enomem", Fault::kEnomem},
      {"ebusy", Fault::kEbusy},         {"isa_mismatch", Fault::kIsaMismatch},
      {"fw_mismatch", Fault::kFwMismatch}, {"unplug", Fault::kUnplug}};
  auto fail = [&](std::string_view rule, const char* why) {
    if (error) *error = "bad fault rule '" + std::string(rule) + "': " + why;
    return EINVAL;
  };
  out->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view rule = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (rule.empty()) continue;
    NamedFaultRule r;
    std::string_view s = rule;
    if (size_t colon = s.find(':'); colon != std::string_view::npos) {
      r.device = std::string(s.substr(0, colon));
      s.remove_prefix(colon + 1);
    }
    const size_t end = s.find_first_of("@x");
    auto it = kNames.find(s.substr(0, end));
    if (it == kNames.end()) return fail(rule, "unknown fault name");
    r.rule.fault = it->second;
    s = end == std::string_view::npos ? std::string_view() : s.substr(end);
    auto number = [&](std::string_view* in, uint32_t* v) {
      const char* b = in->data();
      auto [p, ec] = std::from_chars(b, b + in->size(), *v);
      if (ec != std::errc() || p == b) return false;
      in->remove_prefix(static_cast<size_t>(p - b));
      return true;
    };
    if (!s.empty() && s.front() == '@') {
      s.remove_prefix(1);
      uint32_t n = 0;
      if (!number(&s, &n) || n == 0) return fail(rule, "@N needs N >= 1");
      r.rule.skip = n - 1;
    }
    if (!s.empty() && s.front() == 'x') {
      s.remove_prefix(1);
      if (s == "*") {
        r.rule.count = 0;
        s = {};
      } else {
        uint32_t n = 0;
        if (!number(&s, &n) || n == 0) return fail(rule, "xCOUNT needs COUNT >= 1 or *");
        r.rule.count = n;
      }
    }
    if (!s.empty()) return fail(rule, "trailing characters");
    out->push_back(std::move(r));
  }
  return 0;
}

int inject_fault(std::string_view device, const FaultRule& rule) {
  std::shared_ptr<KDevice> dev;
  if (int err = instance(device, &dev)) return err;
  dev->inject(rule);
  return 0;
}

int clear_faults(std::string_view device) {
  std::shared_ptr<KDevice> dev;
  if (int err = instance(device, &dev)) return err;
  dev->clear_faults();
  return 0;
}

int unplug(std::string_view device) {
  auto dev = existing(device);
  if (!dev) return device_available(device) ? 0 : ENODEV;
  dev->unplug();
  return 0;
}

int set_hang_timeout_ms(std::string_view device, uint32_t ms) {
  std::shared_ptr<KDevice> dev;
  if (int err = instance(device, &dev)) return err;
  dev->set_hang_timeout_ms(ms);
  return 0;
}

int stats(std::string_view device, Stats* out) {
  std::shared_ptr<KDevice> dev;
  if (int err = instance(device, &dev)) return err;
  *out = dev->stats();
  return 0;
}

int register_device(std::string name, uint32_t platform, DeviceFactory make) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  if (r.entries.count(name) != 0) return EEXIST;
  r.entries[std::move(name)] = Entry{platform, std::move(make), nullptr};
  return 0;
}

bool device_available(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return r.entries.find(name) != r.entries.end();
}

std::string last_probe_error(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  auto it = r.entries.find(name);
  return it == r.entries.end() ? std::string() : it->second.probe_error;
}

std::vector<std::string> device_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : r.entries) names.push_back(name);
  return names;
}

}  // namespace npu::driver::kmd

// ---- The model as the user-mode driver reaches it (npu/driver/in_process.h) ----

namespace npu::driver::kmd {
namespace {

class Backend final : public InProcessBackend {
 public:
  bool device_available(std::string_view name) override { return kmd::device_available(name); }
  std::string last_probe_error(std::string_view name) override {
    return kmd::last_probe_error(name);
  }
  std::vector<std::string> device_names() override { return kmd::device_names(); }
  std::unique_ptr<Os> make_os(ModelCredentials credentials) override {
    return make_model_os(credentials);
  }
};

}  // namespace
}  // namespace npu::driver::kmd

extern "C" __attribute__((visibility("default"))) npu::driver::InProcessBackend*
npu_sim_plugin_open(const npu_sim_plugin_host* host, const char** why) {
  // nullptr host: the program linked npu_kmd and calls its own copy (same logging state).
  if (host != nullptr) {
    if (host->abi != NPU_SIM_PLUGIN_ABI) {
      if (why) *why = "plugin ABI " NPU_STRINGIFY(NPU_SIM_PLUGIN_ABI) " differs from the program's";
      return nullptr;
    }
    if (host->version == nullptr || std::string_view(host->version) != NPU_VERSION) {
      if (why) *why = "the plugin is npu " NPU_VERSION ", built for another version of the program";
      return nullptr;
    }
    npu::log::forward_to_host(host->log_mask, host->log_emit);
  }
  static auto* backend = new npu::driver::kmd::Backend();  // lives as long as the devices
  return backend;
}
