// The simulator plugin libnpu-sim.so is npu_kmd as a shared module: its one export,
// npu_sim_plugin_open, is defined in kmd_registry.cc and pulled in by the link
// (-Wl,--undefined=npu_sim_plugin_open); this file only gives the module a source.
#include "npu/driver/in_process.h"
