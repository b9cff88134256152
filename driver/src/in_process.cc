// Finding the in-process kernel-driver model: linked in, or the simulator plugin.
#include "npu/driver/in_process.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "npu/driver/log.h"

// Defined only when npu_kmd is linked into the program (weak: no definition, no pull-in).
extern "C" npu::driver::InProcessBackend* npu_sim_plugin_open(const npu_sim_plugin_host* host,
                                                              const char** why)
    __attribute__((weak));

namespace npu::driver {
namespace {

using OpenFn = InProcessBackend* (*)(const npu_sim_plugin_host*, const char**);

constexpr const char* kPluginName = "libnpu-sim.so";

struct Loaded {
  InProcessBackend* backend = nullptr;
  std::string error;
};

Loaded load() {
  const npu_sim_plugin_host host{NPU_SIM_PLUGIN_ABI, NPU_VERSION, &log::host_mask,
                                 &log::host_emit};
  const char* why = nullptr;
  if (&npu_sim_plugin_open != nullptr) {
    // Linked in: same library copy, so no log forwarding (it would loop back to itself).
    if (InProcessBackend* b = npu_sim_plugin_open(nullptr, &why)) return {b, {}};
    return {nullptr, why ? why : "the linked kernel-driver model refused to start"};
  }
  const char* env = std::getenv("NPU_SIM_PLUGIN");
  const bool explicit_path = env != nullptr && *env != '\0';
  const char* path = explicit_path ? env : kPluginName;
  // RTLD_LOCAL: the plugin's symbols (its own copies of the model and of Verilator's runtime)
  // never interpose on the program's.
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    std::string msg = "the in-process devices (sim, rtl) need the simulator plugin " +
                      std::string(path) + ", which did not load (" + (e ? e : "unknown error") +
                      ")";
    msg += explicit_path ? "; fix NPU_SIM_PLUGIN" :
           "; install the npu tools (it lives in LIBDIR/npu/) or set NPU_SIM_PLUGIN to its path";
    return {nullptr, msg};
  }
  auto open = reinterpret_cast<OpenFn>(dlsym(handle, "npu_sim_plugin_open"));
  if (open == nullptr)
    return {nullptr, std::string(path) + " is not an npu simulator plugin (no npu_sim_plugin_open)"};
  InProcessBackend* b = open(&host, &why);
  if (b == nullptr)
    return {nullptr, std::string(path) + " refused this program: " +
                         (why ? why : "incompatible plugin") +
                         "; install the plugin built with this version"};
  NPU_LOG_AT(kUmd, "loaded the simulator plugin %s", path);
  return {b, {}};
}

}  // namespace

InProcessBackend* in_process_backend(std::string* error) {
  static std::once_flag once;
  static Loaded* loaded = nullptr;  // never destroyed: the model's threads run until exit
  std::call_once(once, [] { loaded = new Loaded(load()); });
  if (loaded->backend == nullptr && error) *error = loaded->error;
  return loaded->backend;
}

bool in_process_device_available(std::string_view name) {
  InProcessBackend* b = in_process_backend(nullptr);
  return b != nullptr && b->device_available(name);
}

}  // namespace npu::driver
