#include "npu/runtime/host_ops.h"

#include <map>
#include <mutex>

#include "npu/host_kernels/host_step.h"

namespace npu::runtime {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, HostKernel, std::less<>> kernels;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The built-in host fallback: the host kernels run the step from its image attributes.
Status run_builtin(HostOpContext& ctx) {
  auto outputs = host::run_host_step(ctx.segment, ctx.inputs);
  if (!outputs.is_ok()) return outputs.status();
  for (size_t k = 0; k < ctx.outputs->size() && k < outputs->size(); ++k)
    (*ctx.outputs)[k] = std::move((*outputs)[k]);
  return Status::ok();
}

}  // namespace

void register_host_kernel(std::string op_type, HostKernel kernel) {
  std::lock_guard lock(registry().mu);
  if (kernel) {
    registry().kernels[std::move(op_type)] = std::move(kernel);
  } else {
    registry().kernels.erase(op_type);
  }
}

HostKernel find_host_kernel(std::string_view op_type) {
  std::lock_guard lock(registry().mu);
  auto it = registry().kernels.find(op_type);
  if (it == registry().kernels.end()) it = registry().kernels.find(std::string_view("*"));
  if (it != registry().kernels.end()) return it->second;
  // Nothing registered: the built-in kernels serve every operator they implement.
  if (host::host_op_supported(std::string(op_type))) return run_builtin;
  return {};
}

}  // namespace npu::runtime
