// The user-mode driver: the API the HAL calls to reach an NPU, real or simulated.
//
// Conventions (kernel / IREE style): every fallible member returns 0 or a positive errno value
// (EINVAL, ENOENT, EBUSY, ETIMEDOUT, EBADFD, EIO, ENODEV, EACCES, ...; see docs/uapi.md for the
// full contract), results come back through out-parameters, and describe_error() turns an errno
// into a one-line message a person can act on. Only EINTR and EAGAIN are retried internally.
//
// Threading: a UmdDevice is thread-safe. Any member may be called from any thread; ioctls run
// concurrently (the kernel serialises what it must), the table of CPU mappings is guarded by
// an internal mutex. wait() blocks the calling thread only, up to its deadline.
//
// Ownership: the UmdDevice owns its file descriptor, every buffer object, context and CPU
// mapping created through it; destroying it unmaps, releases and closes them all (pending jobs
// of its contexts end ABORTED, as when a process exits).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace npu::driver {

class Os;

// Static description of an opened device, read once at open (GET_PARAM/QUERY).
struct DeviceInfo {
  std::string node;          // what was opened: "/dev/accel/accel0", "sim", "rtl"
  std::string platform;      // "silicon", "rtl" or "functional"
  std::string driver_name;   // DRM_IOCTL_VERSION name ("npu")
  uint32_t driver_major = 0;  // DRM_IOCTL_VERSION major.minor.patch
  uint32_t driver_minor = 0;
  uint32_t driver_patch = 0;
  uint32_t device_id = 0;     // ID register, 0x4E505531
  uint32_t array_dim = 0;     // MAC array is array_dim x array_dim
  uint64_t fingerprint = 0;   // hardware fingerprint (FINGERPRINT_LO/HI)
  uint32_t isa_version = 0;   // major << 16 | minor
  uint32_t fw_version = 0;    // major << 16 | minor
  uint32_t num_queues = 0;    // hardware queues (priority levels)
  uint32_t clock_mhz = 0;
  uint32_t max_contexts = 0;  // device-wide context limit
  uint32_t queue_depth = 0;   // jobs a context may have pending before SUBMIT says EBUSY
  uint64_t page_size = 0;     // NPU page size (BO sizes round up to it)
  uint64_t va_start = 0;      // first usable NPU virtual address
  uint64_t va_size = 0;       // bytes of NPU virtual address space per open file
  uint64_t dram_size = 0;     // device DRAM
  uint64_t max_bo_size = 0;
  uint32_t act_sp_rows = 0;
  uint32_t wgt_sp_tiles = 0;
  uint32_t acc_sp_rows = 0;
  uint32_t num_counters = 0;
  uint64_t capabilities = 0;  // DRM_NPU_CAP_* bits
};

// A buffer object as created: its per-file handle, NPU virtual address and (page-rounded) size.
struct BoInfo {
  uint32_t handle = 0;
  uint64_t npu_va = 0;
  uint64_t size = 0;
};

// The end of one job. status is a DRM_NPU_JOB_* value (uapi/drm/npu_accel.h): SUCCESS,
// ABORTED, TIMEOUT, PAGE_FAULT or DEVICE_ERROR. device_error is the raw ERROR_CODE of the
// device (npu::hw::ErrorCode) and error_addr its ERROR_ADDR when the job faulted.
// device_cycles = device cycle at the job's FENCE minus the cycle at which its EXEC started.
// A job another job waits for (SUBMIT's in_syncs): job `seq` of context `ctx` (same file).
struct SyncPoint {
  uint32_t ctx = 0;
  uint64_t seq = 0;
};

struct JobResult {
  uint32_t status = 0;
  uint32_t device_error = 0;
  uint64_t error_addr = 0;
  uint64_t device_cycles = 0;
};

// State of a context, from CTX_QUERY.
struct ContextState {
  uint32_t state = 0;        // DRM_NPU_CTX_STATE_{ACTIVE,BANNED,LOST}
  uint32_t priority = 0;
  uint32_t reset_count = 0;  // resets that affected this context
  uint32_t pending = 0;      // jobs submitted and not yet ended
  uint64_t last_submitted_seq = 0;
  uint64_t last_completed_seq = 0;
  uint32_t fault_code = 0;   // device error that banned the context, if any
  uint64_t fault_addr = 0;
};

class UmdDevice final {
 public:
  // Opens a device. spec: "sim" or "rtl" (the in-process kernel-driver model over the
  // functional model or the Verilator RTL), "accel:N" or "/dev/accel/accelN" (a real node).
  // Checks the driver name, the uAPI version, the ISA and firmware versions. On failure returns
  // nullptr and, when error is not null, fills it with an actionable message (EACCES
  // diagnosis with the udev rule, not-an-NPU, version mismatch with expected/found, unknown
  // spec, "rtl device not built", ...). Does not block beyond the open itself.
  static std::unique_ptr<UmdDevice> open(std::string_view spec, std::string* error);
  // As open(), through a caller-provided syscall seam (tests, interceptors). `path` is what
  // is handed to os->open().
  static std::unique_ptr<UmdDevice> open_with_os(std::unique_ptr<Os> os, std::string_view path,
                                                 std::string* error);
  ~UmdDevice();
  UmdDevice(const UmdDevice&) = delete;
  UmdDevice& operator=(const UmdDevice&) = delete;

  const DeviceInfo& info() const;

  // Buffer objects. size > 0, rounded up to info().page_size; flags DRM_NPU_BO_* (0 for a
  // device-writable buffer). The BO has an NPU VA for its whole life.
  int bo_create(uint64_t size, uint32_t flags, BoInfo* out);
  // Maps the whole BO into this process (shared with the device: no copies, BO_SYNC-free on
  // the simulators). Mapping an already mapped BO returns the same pointer.
  int bo_map(uint32_t handle, void** out_ptr);
  int bo_unmap(uint32_t handle);
  // Unmaps if mapped, then releases the handle. The memory lives on until every job that
  // references it has ended.
  int bo_destroy(uint32_t handle);
  // Cache maintenance (DRM_NPU_SYNC_TO_DEVICE / FROM_DEVICE) over [offset, offset + size).
  int bo_sync(uint32_t handle, uint32_t direction, uint64_t offset, uint64_t size);

  // Contexts. priority: DRM_NPU_PRIORITY_{LOW,NORMAL,HIGH,REALTIME}. ENOSPC when the
  // device-wide context limit is reached.
  int ctx_create(uint32_t priority, uint32_t* out_ctx);
  // Jobs of the context that have not ended, end ABORTED.
  int ctx_destroy(uint32_t ctx);
  int ctx_query(uint32_t ctx, ContextState* out);

  // Queues one job: run cmd_size bytes of instructions at cmd_offset in cmd_bo, with every BO
  // in bo_handles (and cmd_bo) held alive until the job ends. Returns the context's sequence
  // number of the job (monotonic, starting at 1). Does not block; EBUSY when the context's
  // queue is full (wait for an older job, then retry).
  int submit(uint32_t ctx, std::span<const uint32_t> bo_handles, uint32_t cmd_bo,
             uint64_t cmd_offset, uint64_t cmd_size, uint64_t* out_seq);
  // As submit(), and the device starts the job only after every job in `after` has ended
  // (SUBMIT's in_syncs, at most 64; needs DRM_NPU_CAP_IN_SYNCS, else EOPNOTSUPP). If one of
  // them did not end SUCCESS, this job ends ABORTED without running.
  int submit(uint32_t ctx, std::span<const uint32_t> bo_handles, uint32_t cmd_bo,
             uint64_t cmd_offset, uint64_t cmd_size, std::span<const SyncPoint> after,
             uint64_t* out_seq);
  // Blocks until job `seq` of `ctx` has ended or the absolute CLOCK_MONOTONIC deadline passes
  // (ETIMEDOUT; the job keeps running). Returns 0 when the job ended on its own terms
  // (status SUCCESS, PAGE_FAULT, DEVICE_ERROR or TIMEOUT) and EIO when it was ABORTED by a
  // reset or by its context being destroyed or banned; *out is filled in both cases.
  int wait(uint32_t ctx, uint64_t seq, int64_t deadline_ns, JobResult* out);

  // Performance counters, hw::kNumCounters values in register order.
  int read_counters(std::vector<uint64_t>* out);

  // Privileged bring-up path (EACCES unless the opener is privileged).
  int reg_read(uint32_t offset, uint32_t* out_value);
  int reg_write(uint32_t offset, uint32_t value);
  int reset();
  // Device-wide reset count (GET_PARAM RESET_COUNT), read fresh.
  int reset_count(uint64_t* out);

  // Actionable one-line description of an errno returned by this device.
  std::string describe_error(int err) const;

  // Raw access for tools and conformance tests: the seam and the file descriptor.
  Os& os() const;
  int fd() const;

 private:
  struct Impl;
  explicit UmdDevice(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Device specs that open() accepts right now: real nodes found under /sys/class/accel whose
// driver is "npu" ("/dev/accel/accelN"), then "sim", then "rtl" when it is built.
std::vector<std::string> list_devices();

// Current time on CLOCK_MONOTONIC in nanoseconds, and a deadline `ms` from now, for wait().
int64_t monotonic_ns();
int64_t deadline_after_ms(int64_t ms);

}  // namespace npu::driver
