// Device selection: spec parsing, the NPU_DEVICE variable, dispatch to the backend, logging.
#include "npu/hal/device.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "drivers/umd/umd_backend.h"
#include "npu/driver/in_process.h"
#include "npu/driver/log.h"

namespace npu::hal {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string_view priority_name(Priority priority) {
  switch (priority) {
    case Priority::kLow: return "low";
    case Priority::kNormal: return "normal";
    case Priority::kHigh: return "high";
    case Priority::kRealtime: return "realtime";
  }
  return "unknown";
}

std::string DeviceInfo::describe() const {
  std::ostringstream os;
  os << spec << " (" << platform << ", node " << node << ", array " << array_dim << "x"
     << array_dim << ", fingerprint 0x" << std::hex << fingerprint << std::dec << ", "
     << clock_mhz << " MHz, " << num_queues << " queues, "
     << (dram_size >> 20) << " MiB)";
  return os.str();
}

std::string resolve_device_spec(std::string_view spec) {
  std::string s = trim(spec);
  if (!s.empty()) return s;
  if (const char* env = std::getenv("NPU_DEVICE"); env && *env) return trim(env);
  return "sim";
}

std::vector<std::string> available_devices() { return drivers::umd::available(); }

Result<std::vector<std::shared_ptr<Device>>> open_devices(std::string_view spec_in) {
  const std::string spec = resolve_device_spec(spec_in);
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string name = trim(std::string_view(spec).substr(start, comma - start));
    if (name.empty())
      return make_error(StatusCode::kInvalidArgument,
                        "device list '" + spec + "' has an empty entry; write e.g. sim,accel:0");
    names.push_back(std::move(name));
    start = comma + 1;
  }
  std::vector<std::shared_ptr<Device>> devices;
  for (const std::string& name : names) {
    std::string node;
    if (name == "sim" || name == "rtl") {
      node = name;
    } else if (name.rfind("accel:", 0) == 0 && all_digits(std::string_view(name).substr(6))) {
      node = "/dev/accel/accel" + name.substr(6);
    } else if (name.rfind("/dev/accel/accel", 0) == 0 &&
               all_digits(std::string_view(name).substr(16))) {
      node = name;
    } else if (driver::in_process_device_available(name)) {
      node = name;  // registered in-process (kmd::register_device)
    } else {
      return make_error(StatusCode::kNotFound,
                        "unknown device '" + name +
                            "'; use sim, rtl, accel:N or /dev/accel/accelN (available now: " +
                            join(available_devices()) + ")");
    }
    for (const auto& d : devices)
      if (d->info().node == node)
        return make_error(StatusCode::kInvalidArgument,
                          "device '" + name + "' is listed twice in '" + spec + "'");
    NPU_ASSIGN_OR_RETURN(std::shared_ptr<Device> device, drivers::umd::open(name, node));
    NPU_LOG_AT(kDevice, "opened %s", device->info().describe().c_str());
    devices.push_back(std::move(device));
  }
  return devices;
}

Result<std::shared_ptr<Device>> open_device(std::string_view spec) {
  const std::string resolved = resolve_device_spec(spec);
  if (resolved.find(',') != std::string::npos)
    return make_error(StatusCode::kInvalidArgument,
                      "'" + resolved + "' names several devices where one is expected; pick one");
  NPU_ASSIGN_OR_RETURN(auto devices, open_devices(resolved));
  return devices.front();
}

}  // namespace npu::hal
