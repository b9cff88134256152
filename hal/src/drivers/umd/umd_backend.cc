// HAL objects over UmdDevice: errno -> Status, BO and context lifetimes, waits.
#include "drivers/umd/umd_backend.h"

#include <cerrno>
#include <cstring>
#include <limits>

#include "npu/driver/umd.h"
#include "npu/hal/buffer.h"
#include "npu/hal/context.h"
#include "uapi/drm/npu_accel.h"

namespace npu::hal::drivers::umd {
namespace {

class UmdHalDevice;

Status errno_status(const driver::UmdDevice& umd, int err, const std::string& what) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case EINVAL: code = StatusCode::kInvalidArgument; break;
    case ENOENT: code = StatusCode::kNotFound; break;
    case EACCES:
    case EPERM: code = StatusCode::kPermissionDenied; break;
    case EBUSY:
    case ENOSPC:
    case ENOMEM: code = StatusCode::kResourceExhausted; break;
    case ETIMEDOUT: code = StatusCode::kDeadlineExceeded; break;
    case EBADFD: code = StatusCode::kUnavailable; break;
    case ENODEV: code = StatusCode::kDeviceLost; break;
    case EOPNOTSUPP: code = StatusCode::kUnsupported; break;
    case EIO: code = StatusCode::kAborted; break;
    default: break;
  }
  return make_error(code, what + ": " + umd.describe_error(err));
}

class UmdHalDevice final : public Device, public std::enable_shared_from_this<UmdHalDevice> {
 public:
  UmdHalDevice(std::unique_ptr<driver::UmdDevice> umd, DeviceInfo info)
      : umd_(std::move(umd)), info_(std::move(info)) {}

  const DeviceInfo& info() const override { return info_; }
  driver::UmdDevice& umd() const { return *umd_; }

  Result<std::shared_ptr<Buffer>> allocate(uint64_t size, BufferUsage usage) override;
  Result<std::shared_ptr<Context>> create_context(Priority priority) override;
  Result<std::vector<uint64_t>> read_counters() override {
    std::vector<uint64_t> values;
    if (int err = umd_->read_counters(&values))
      return errno_status(*umd_, err, info_.spec + ": reading performance counters");
    return values;
  }

 private:
  std::unique_ptr<driver::UmdDevice> umd_;
  DeviceInfo info_;
};

class UmdBuffer final : public Buffer {
 public:
  UmdBuffer(std::shared_ptr<UmdHalDevice> device, driver::BoInfo bo, std::byte* ptr,
            BufferUsage usage)
      : device_(std::move(device)), bo_(bo), ptr_(ptr), usage_(usage) {}
  ~UmdBuffer() override {
    // The driver keeps the memory alive until every job that uses it has ended.
    (void)device_->umd().bo_destroy(bo_.handle);
  }
  uint64_t device_address() const override { return bo_.npu_va; }
  uint64_t size() const override { return bo_.size; }
  BufferUsage usage() const override { return usage_; }
  std::span<std::byte> host() override { return {ptr_, bo_.size}; }
  std::span<const std::byte> host() const override { return {ptr_, bo_.size}; }
  uint32_t handle() const override { return bo_.handle; }
  Device& device() const override { return *device_; }
  Status sync_to_device(uint64_t offset, uint64_t size) override {
    return sync(DRM_NPU_SYNC_TO_DEVICE, offset, size);
  }
  Status sync_from_device(uint64_t offset, uint64_t size) override {
    return sync(DRM_NPU_SYNC_FROM_DEVICE, offset, size);
  }

 private:
  Status sync(uint32_t direction, uint64_t offset, uint64_t size) {
    if (size == 0) return Status::ok();
    if (offset > bo_.size || size > bo_.size - offset)
      return make_error(StatusCode::kInvalidArgument, "buffer sync range outside the buffer");
    // Nothing to maintain: two ioctls fewer per request (copy-in and copy-out).
    if (device_->info().coherent) return Status::ok();
    if (int err = device_->umd().bo_sync(bo_.handle, direction, offset, size))
      return errno_status(device_->umd(), err, device_->info().spec + ": buffer sync");
    return Status::ok();
  }
  std::shared_ptr<UmdHalDevice> device_;
  driver::BoInfo bo_;
  std::byte* ptr_;
  BufferUsage usage_;
};

class UmdContext final : public Context {
 public:
  UmdContext(std::shared_ptr<UmdHalDevice> device, uint32_t ctx, Priority priority)
      : device_(std::move(device)), ctx_(ctx), priority_(priority) {}
  ~UmdContext() override { (void)device_->umd().ctx_destroy(ctx_); }

  uint32_t id() const override { return ctx_; }
  Priority priority() const override { return priority_; }
  Device& device() const override { return *device_; }

  Result<ContextStatus> query() override {
    driver::ContextState st;
    if (int err = device_->umd().ctx_query(ctx_, &st))
      return errno_status(device_->umd(), err, name() + ": query");
    ContextStatus out;
    out.health = st.state == DRM_NPU_CTX_STATE_BANNED ? ContextHealth::kBanned
                 : st.state == DRM_NPU_CTX_STATE_LOST ? ContextHealth::kLost
                                                      : ContextHealth::kActive;
    out.pending = st.pending;
    out.reset_count = st.reset_count;
    out.fault_code = st.fault_code;
    out.fault_addr = st.fault_addr;
    return out;
  }

  Result<uint64_t> submit_job(const CommandBuffer& cb) override { return submit_job_after(cb, {}); }

  Result<uint64_t> submit_job_after(const CommandBuffer& cb, std::span<const Fence> wait) override {
    // Small jobs (every model's) name a handful of buffers: no allocation on the hot path.
    constexpr size_t kInline = 16;
    uint32_t inline_handles[kInline];
    std::vector<uint32_t> heap;
    std::span<uint32_t> handles(inline_handles, cb.uses().size());
    if (cb.uses().size() > kInline) {
      heap.resize(cb.uses().size());
      handles = heap;
    }
    for (size_t i = 0; i < cb.uses().size(); ++i) handles[i] = cb.uses()[i]->handle();
    driver::SyncPoint after[kMaxWaitFences];
    for (size_t i = 0; i < wait.size(); ++i)
      after[i] = driver::SyncPoint{wait[i].context()->id(), wait[i].sequence()};
    uint64_t seq = 0;
    int err = device_->umd().submit(ctx_, handles, cb.commands()->handle(), cb.offset(),
                                    cb.size(), std::span(after, wait.size()), &seq);
    if (err == EBADFD)
      return make_error(StatusCode::kUnavailable,
                        name() + " is banned after a fault; create a new context");
    if (err == EBUSY)
      return make_error(StatusCode::kResourceExhausted,
                        name() + ": queue full; wait for an older job, then retry");
    if (err) return errno_status(device_->umd(), err, name() + ": submit");
    return seq;
  }

  Result<JobResult> wait_job(uint64_t seq, Deadline deadline) override {
    int64_t ns;
    if (deadline == Deadline::max()) {
      ns = std::numeric_limits<int64_t>::max();
    } else if (deadline <= Deadline{}) {
      ns = 0;
    } else {
      ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch())
               .count();
    }
    driver::JobResult jr;
    int err = device_->umd().wait(ctx_, seq, ns, &jr);
    if (err == ETIMEDOUT) {
      // A poll (a zero deadline) is routine on the hot path and its status is "not yet":
      // no message is built for it.
      if (ns == 0) return make_error(StatusCode::kDeadlineExceeded, "still running");
      return make_error(StatusCode::kDeadlineExceeded,
                        name() + " job " + std::to_string(seq) + " still running at the deadline");
    }
    if (err == ENODEV) return JobResult{JobEnd::kLost, 0, 0, 0};
    if (err != 0 && err != EIO)
      return errno_status(device_->umd(), err, name() + " wait for job " + std::to_string(seq));
    JobResult out;
    out.device_error = jr.device_error;
    out.error_addr = jr.error_addr;
    out.device_cycles = jr.device_cycles;
    switch (jr.status) {
      case DRM_NPU_JOB_SUCCESS: out.end = JobEnd::kSuccess; break;
      case DRM_NPU_JOB_ABORTED: out.end = JobEnd::kAborted; break;
      case DRM_NPU_JOB_TIMEOUT: out.end = JobEnd::kTimeout; break;
      case DRM_NPU_JOB_PAGE_FAULT: out.end = JobEnd::kPageFault; break;
      default: out.end = JobEnd::kDeviceError; break;
    }
    if (err == EIO) out.end = JobEnd::kAborted;
    return out;
  }

 private:
  std::shared_ptr<UmdHalDevice> device_;
  uint32_t ctx_;
  Priority priority_;
};

Result<std::shared_ptr<Buffer>> UmdHalDevice::allocate(uint64_t size, BufferUsage usage) {
  if (size == 0) return make_error(StatusCode::kInvalidArgument, "allocation of 0 bytes");
  uint32_t flags = 0;
  if (usage == BufferUsage::kDeviceReadOnly && info_.read_only_buffers)
    flags |= DRM_NPU_BO_DEVICE_RDONLY;
  driver::BoInfo bo;
  if (int err = umd_->bo_create(size, flags, &bo))
    return errno_status(*umd_, err,
                        info_.spec + ": allocating " + std::to_string(size) + " bytes");
  void* ptr = nullptr;
  if (int err = umd_->bo_map(bo.handle, &ptr)) {
    (void)umd_->bo_destroy(bo.handle);
    return errno_status(*umd_, err, info_.spec + ": mapping a buffer");
  }
  // Fresh BOs are zero on the simulators; make it a guarantee of the HAL.
  std::memset(ptr, 0, bo.size);
  return std::shared_ptr<Buffer>(
      std::make_shared<UmdBuffer>(shared_from_this(), bo, static_cast<std::byte*>(ptr), usage));
}

Result<std::shared_ptr<Context>> UmdHalDevice::create_context(Priority priority) {
  uint32_t ctx = 0;
  if (int err = umd_->ctx_create(static_cast<uint32_t>(priority), &ctx))
    return errno_status(*umd_, err,
                        info_.spec + ": creating a " + std::string(priority_name(priority)) +
                            " priority context");
  return std::shared_ptr<Context>(std::make_shared<UmdContext>(shared_from_this(), ctx, priority));
}

StatusCode classify_open_error(const std::string& msg) {
  auto has = [&](const char* s) { return msg.find(s) != std::string::npos; };
  if (has("ermission") || has("EACCES") || has("udev")) return StatusCode::kPermissionDenied;
  if (has("version") || has("mismatch")) return StatusCode::kIncompatible;
  if (has("not built") || has("unknown") || has("No such") || has("not found") ||
      has("does not exist"))
    return StatusCode::kNotFound;
  return StatusCode::kUnavailable;
}

}  // namespace

Result<std::shared_ptr<Device>> open(const std::string& name, const std::string& node) {
  std::string error;
  std::unique_ptr<driver::UmdDevice> umd = driver::UmdDevice::open(name, &error);
  if (!umd) {
    if (error.empty()) error = "the driver gave no reason";
    return make_error(classify_open_error(error), "cannot open device '" + name + "': " + error);
  }
  const driver::DeviceInfo& di = umd->info();
  DeviceInfo info;
  info.spec = name;
  info.node = di.node.empty() ? node : di.node;
  info.platform = di.platform;
  info.array_dim = di.array_dim;
  info.fingerprint = di.fingerprint;
  info.isa_version = di.isa_version;
  info.clock_mhz = di.clock_mhz;
  info.num_queues = di.num_queues;
  info.max_contexts = di.max_contexts;
  info.queue_depth = di.queue_depth;
  info.page_size = di.page_size;
  info.dram_size = di.dram_size;
  info.max_buffer_size = di.max_bo_size;
  info.read_only_buffers = (di.capabilities & DRM_NPU_CAP_BO_RDONLY) != 0;
  info.wait_fences = (di.capabilities & DRM_NPU_CAP_IN_SYNCS) != 0;
  info.coherent = (di.capabilities & DRM_NPU_CAP_COHERENT) != 0;
  return std::shared_ptr<Device>(std::make_shared<UmdHalDevice>(std::move(umd), std::move(info)));
}

std::vector<std::string> available() { return driver::list_devices(); }

}  // namespace npu::hal::drivers::umd
