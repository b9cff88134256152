// How the user-mode driver reaches the in-process kernel-driver model (the devices "sim",
// "rtl" and any name a test registers) without linking it (docs/decisions/sim-plugin-on-demand.md).
//
// The kernel-driver model, the functional model and the Verilated RTL live in npu_kmd. A
// deployment program does not link it: the first time a program asks for an in-process device
// the user-mode driver loads the simulator plugin, libnpu-sim.so, which is npu_kmd built as a
// shared module exporting one C function, npu_sim_plugin_open. The plugin is found by
//   1. $NPU_SIM_PLUGIN, a path to the plugin (an error when it does not load), else
//   2. dlopen("libnpu-sim.so"): the RUNPATH of the program or library that calls it (the
//      build gives every target the build tree's plugin directory, the install gives tools
//      $ORIGIN/../LIBDIR/npu and libnpu.so $ORIGIN/npu), LD_LIBRARY_PATH, the system paths.
// A program that links npu_kmd itself (tests and tools that use the kmd.h control surface:
// fault injection, registered fake devices) defines npu_sim_plugin_open, and the user-mode
// driver then uses that copy and never loads the plugin, so a process has one model.
//
// Threading: thread-safe; the plugin is loaded at most once per process and never unloaded
// (device threads of the model run until exit).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "npu/driver/os.h"

namespace npu::driver {

// The model as the user-mode driver sees it. Implemented by npu_kmd.
class InProcessBackend {
 public:
  virtual ~InProcessBackend() = default;
  // Whether an in-process device of this name can be opened ("rtl" only when built).
  virtual bool device_available(std::string_view name) = 0;
  // Why the last probe of `name` failed (kmd::last_probe_error); empty when it did not.
  virtual std::string last_probe_error(std::string_view name) = 0;
  // Names of the in-process devices that can be opened.
  virtual std::vector<std::string> device_names() = 0;
  // A new Os over the model (make_model_os).
  virtual std::unique_ptr<Os> make_os(ModelCredentials credentials) = 0;
};

// The model: npu_kmd's copy when linked in, else the plugin (loaded on the first call).
// nullptr with *error saying which plugin was tried and why it did not load.
InProcessBackend* in_process_backend(std::string* error);

// Whether `name` is an in-process device that can be opened (loads the plugin if needed;
// false when it cannot be loaded).
bool in_process_device_available(std::string_view name);

}  // namespace npu::driver

extern "C" {
// Bumped when InProcessBackend, Os or npu_sim_plugin_host change.
#define NPU_SIM_PLUGIN_ABI 1

// What a host program hands the plugin: its logging (npu::log::host_mask/host_emit), so that
// the plugin's messages follow the program's NPU_LOG, mask and sink.
typedef struct npu_sim_plugin_host {
  uint32_t abi;          // NPU_SIM_PLUGIN_ABI
  const char* version;   // the project version the host was built from (PROJECT_VERSION)
  uint32_t (*log_mask)(void);
  void (*log_emit)(uint32_t category, const char* message);
} npu_sim_plugin_host;

// The plugin's one export (also defined by npu_kmd when linked in). Returns the process-wide
// backend, or nullptr when `host` has another ABI or version (*why then says which).
npu::driver::InProcessBackend* npu_sim_plugin_open(const npu_sim_plugin_host* host,
                                                   const char** why);
}
