// The host-fallback hook: operators the compiler leaves on the host (HostSegment steps).
// A kernel is registered by op type; a session whose model has a host step without a kernel
// fails to create with UNSUPPORTED naming the operator and the node.
// Threading: registration is thread-safe; kernels run on scheduler lane threads and must be
// reentrant (several requests may run the same kernel at once, on different activations).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "npu/compiler/image.h"
#include "npu/hal/buffer.h"
#include "npu/hal/status.h"

namespace npu::runtime {

struct HostStepContext {
  const compiler::ModelImage& image;
  const image::HostSegment& segment;
  size_t step = 0;
  hal::Buffer& activations;  // this request's activation buffer
};

using HostKernel = std::function<Status(const HostStepContext&)>;

// Registers (or replaces) the kernel of `op_type`.
void register_host_kernel(std::string op_type, HostKernel kernel);
// The kernel of `op_type`, or an empty function.
HostKernel find_host_kernel(std::string_view op_type);

}  // namespace npu::runtime
