#include "npu/runtime/host_ops.h"

#include <map>
#include <mutex>

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
  return it == registry().kernels.end() ? HostKernel{} : it->second;
}

}  // namespace npu::runtime
