// hal::Device: an opened NPU (real node or in-process simulator) and how to open one.
//
// Device selection (open_devices): a spec is one name or a comma-separated list of names:
//   "sim"                the in-process kernel-driver model over the functional model
//   "rtl"                the same over the Verilator RTL (when built)
//   "accel:N"            /dev/accel/accelN
//   "/dev/accel/accelN"  a device node
//   any other name an in-process device was registered under (driver::kmd::register_device;
//   tests use it for a second functional device)
// An empty spec means the environment variable NPU_DEVICE, and "sim" when that is unset too.
// Every listed device must open: there is no silent fallback. Each opened device is logged
// in category "device" ("opened sim (...)", NPU_LOG=device; nothing by default).
//
// Ownership: devices are shared (shared_ptr). Buffers and contexts created from a device keep
// it alive, so it is released only after the last buffer, context and in-flight job is gone.
// Threading: every member is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "npu/hal/status.h"

namespace npu::hal {

class Buffer;
class Context;

// Context priority; selects the hardware queue (REALTIME is queue 0).
enum class Priority : uint8_t { kLow = 0, kNormal = 1, kHigh = 2, kRealtime = 3 };
inline constexpr int kNumPriorities = 4;
std::string_view priority_name(Priority priority);

// What an opened device is. Read once at open.
struct DeviceInfo {
  std::string spec;        // the name it was opened by: "sim", "accel:0", ...
  std::string node;        // what the driver opened
  std::string platform;    // "silicon", "rtl" or "functional"
  uint32_t array_dim = 0;  // the MAC array is array_dim x array_dim
  uint64_t fingerprint = 0;
  uint32_t isa_version = 0;
  uint32_t clock_mhz = 0;
  uint32_t num_queues = 0;
  uint32_t max_contexts = 0;
  uint32_t queue_depth = 0;  // jobs one context may have pending
  uint64_t page_size = 0;
  uint64_t dram_size = 0;
  uint64_t max_buffer_size = 0;
  bool read_only_buffers = false;  // BufferUsage::kDeviceReadOnly is enforced by the MMU
  // Context::submit honours wait lists on the device (the driver's in_syncs): work that waits
  // only on other device work is chained there, without waking the host in between.
  bool wait_fences = false;
  // The CPU mapping of a buffer is coherent with the device (DRM_NPU_CAP_COHERENT):
  // Buffer::sync_to_device/sync_from_device check their range and make no driver call.
  bool coherent = false;
  std::string describe() const;    // one line for logs and tools
};

enum class BufferUsage : uint8_t {
  kDeviceReadWrite = 0,
  kDeviceReadOnly = 1,  // weights and command streams: a device write faults
};

// The device API. Backends (hal/src/drivers/<name>/) implement it; tests may implement it to
// inject device behaviour.
class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceInfo& info() const = 0;

  // Allocates a zero-filled buffer of at least `size` bytes, mapped for the CPU. Does not block
  // beyond the allocation. RESOURCE_EXHAUSTED when device memory or address space runs out.
  virtual Result<std::shared_ptr<Buffer>> allocate(uint64_t size, BufferUsage usage) = 0;

  // Creates an execution context (a bounded job queue with its own address space view).
  // RESOURCE_EXHAUSTED when the device-wide context limit is reached.
  virtual Result<std::shared_ptr<Context>> create_context(Priority priority) = 0;

  // The device performance counters in register order (npu::hw::Counter).
  virtual Result<std::vector<uint64_t>> read_counters() = 0;

 protected:
  Device() = default;
};

// Opens every device named by `spec` (see the file comment). Fails with the first device that
// cannot be opened: NOT_FOUND for an unknown name, PERMISSION_DENIED, INCOMPATIBLE, ... each
// with the driver's actionable message.
Result<std::vector<std::shared_ptr<Device>>> open_devices(std::string_view spec);
// As open_devices() for a spec naming exactly one device.
Result<std::shared_ptr<Device>> open_device(std::string_view spec);

// The resolved spec: `spec`, else $NPU_DEVICE, else "sim".
std::string resolve_device_spec(std::string_view spec);

// Device names that can be opened right now (real nodes, then "sim", then "rtl" when built).
std::vector<std::string> available_devices();

}  // namespace npu::hal
