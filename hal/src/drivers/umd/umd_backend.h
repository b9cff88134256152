// The HAL backend over the user-mode driver (npu::driver::UmdDevice): real /dev/accel nodes
// and the in-process kernel-driver model ("sim", "rtl").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "npu/hal/device.h"

namespace npu::hal::drivers::umd {

// Opens `name` ("sim", "rtl", "accel:N", "/dev/accel/accelN"); `node` is its resolved node.
Result<std::shared_ptr<Device>> open(const std::string& name, const std::string& node);
std::vector<std::string> available();

}  // namespace npu::hal::drivers::umd
