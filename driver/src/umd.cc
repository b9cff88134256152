// The user-mode driver over the Os seam.
#include "npu/driver/umd.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "npu/driver/log.h"
#include "npu/driver/in_process.h"
#include "npu/driver/os.h"
#include "npu/hw/config.h"
#include "uapi/drm/npu_accel.h"

namespace npu::driver {

namespace {

constexpr uint32_t kExpectedFwMajor = 1;
constexpr const char* kUdevRule =
    "SUBSYSTEM==\"accel\", KERNEL==\"accel[0-9]*\", DRIVERS==\"npu\", GROUP=\"render\", "
    "MODE=\"0660\", TAG+=\"uaccess\"";

std::string version_string(uint32_t v) {
  return std::to_string(v >> 16) + "." + std::to_string(v & 0xFFFF);
}

// The one retry policy: EINTR and EAGAIN only (errno, not -errno).
int xioctl(Os& os, int fd, unsigned long request, void* arg) {
  for (;;) {
    if (os.ioctl(fd, request, arg) == 0) return 0;
    const int err = errno;
    if (err == EINTR || err == EAGAIN) {
      NPU_LOG_AT(kUmd, "ioctl %#lx: %s, retrying", request, std::strerror(err));
      continue;
    }
    return err;
  }
}

std::string group_name(gid_t gid) {
  struct group* g = getgrgid(gid);
  return g ? g->gr_name : std::to_string(gid);
}

std::string user_name(uid_t uid) {
  struct passwd* p = getpwuid(uid);
  return p ? p->pw_name : std::to_string(uid);
}

bool in_group(gid_t gid) {
  if (getegid() == gid) return true;
  int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  n = getgroups(n, groups.data());
  return std::find(groups.begin(), groups.begin() + std::max(n, 0), gid) != groups.begin() + std::max(n, 0);
}

std::string diagnose_eacces(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return "permission denied opening " + path + " (and stat failed: " + std::strerror(errno) + ")";
  }
  char mode[16];
  std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
  std::string msg = "permission denied opening " + path + ": node is mode " + mode + " owner " +
                    user_name(st.st_uid) + " group " + group_name(st.st_gid) + "; you are " +
                    user_name(geteuid()) + " and " + (in_group(st.st_gid) ? "" : "NOT ") +
                    "in group " + group_name(st.st_gid) + ". ";
  msg += "Fix: install udev/70-npu.rules (" + std::string(kUdevRule) +
         ") into /etc/udev/rules.d/ (or `cmake --install`), run `udevadm control --reload && "
         "udevadm trigger -s accel`, and add yourself to the render group "
         "(`sudo usermod -aG render " + user_name(geteuid()) + "`, then log in again).";
  return msg;
}

std::string platform_name(uint32_t p) {
  switch (p) {
    case DRM_NPU_PLATFORM_SILICON: return "silicon";
    case DRM_NPU_PLATFORM_RTL: return "rtl";
    case DRM_NPU_PLATFORM_FUNCTIONAL: return "functional";
  }
  return "unknown(" + std::to_string(p) + ")";
}

bool is_in_process_name(std::string_view spec) {
  return spec.find('/') == std::string_view::npos && spec.rfind("accel:", 0) != 0;
}

}  // namespace

int64_t monotonic_ns() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t deadline_after_ms(int64_t ms) { return monotonic_ns() + ms * 1'000'000; }

struct UmdDevice::Impl {
  std::unique_ptr<Os> os;
  int fd = -1;
  DeviceInfo info;
  std::mutex mu;  // guards maps
  struct Map {
    void* ptr;
    size_t size;
  };
  std::map<uint32_t, Map> maps;
};

UmdDevice::UmdDevice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UmdDevice::~UmdDevice() {
  if (!impl_) return;
  for (auto& [h, m] : impl_->maps) impl_->os->munmap(m.ptr, m.size);
  impl_->maps.clear();
  if (impl_->fd >= 0) impl_->os->close(impl_->fd);
}

std::unique_ptr<UmdDevice> UmdDevice::open(std::string_view spec, std::string* error) {
  auto fail = [&](std::string msg) -> std::unique_ptr<UmdDevice> {
    if (error) *error = std::move(msg);
    return nullptr;
  };
  if (spec.empty()) return fail("empty device spec; use sim, rtl, accel:N or /dev/accel/accelN");
  if (spec.rfind("accel:", 0) == 0) {
    std::string n(spec.substr(6));
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) {
      return fail("bad device spec '" + std::string(spec) + "': expected accel:N with N a number");
    }
    return open_with_os(make_real_os(), "/dev/accel/accel" + n, error);
  }
  if (spec.front() == '/') return open_with_os(make_real_os(), spec, error);
  if (is_in_process_name(spec)) {
    std::string why;
    InProcessBackend* model = in_process_backend(&why);
    if (model != nullptr && model->device_available(spec))
      return open_with_os(model->make_os({}), spec, error);
    if (spec == "sim" || spec == "rtl") {
      if (model == nullptr) return fail(why);
      return fail("rtl device not built: reconfigure with -DNPU_BUILD_RTL=ON (needs Verilator 5)");
    }
  }
  return fail("unknown device spec '" + std::string(spec) +
              "': use sim, rtl, accel:N or /dev/accel/accelN (npu-smi list shows what exists)");
}

std::unique_ptr<UmdDevice> UmdDevice::open_with_os(std::unique_ptr<Os> os, std::string_view path,
                                                   std::string* error) {
  auto fail = [&](std::string msg) -> std::unique_ptr<UmdDevice> {
    if (error) *error = std::move(msg);
    return nullptr;
  };
  const std::string p(path);
  auto impl = std::make_unique<Impl>();
  impl->os = std::move(os);
  Os& o = *impl->os;
  const int fd = o.open(p.c_str(), O_RDWR);
  if (fd < 0) {
    const int err = errno;
    if (err == EACCES) return fail(diagnose_eacces(p));
    if (err == ENOENT) {
      return fail("no device node " + p + ": is the npu kernel driver loaded? (" +
                  "`ls /sys/class/accel`, `dmesg | grep npu`); for a simulator use sim or rtl");
    }
    if (err == ENODEV) {
      if (InProcessBackend* model = is_in_process_name(p) ? in_process_backend(nullptr) : nullptr)
        if (std::string why = model->last_probe_error(p); !why.empty())
          return fail(p + ": failed to probe: " + why);
      return fail(p + ": device is gone (unplugged or failed to probe)");
    }
    return fail("cannot open " + p + ": " + std::strerror(err));
  }
  impl->fd = fd;
  auto close_on_fail = [&](std::string msg) {
    o.close(fd);
    impl->fd = -1;
    return fail(std::move(msg));
  };
  DriverVersion v;
  if (o.get_version(fd, &v) != 0) {
    return close_on_fail(p + ": DRM_IOCTL_VERSION failed (" + std::strerror(errno) +
                         "): not a DRM device, expected an npu accel node");
  }
  if (v.name != DRM_NPU_DRIVER_NAME) {
    return close_on_fail(p + " is not an NPU: its driver is '" + v.name + "', expected '" +
                         DRM_NPU_DRIVER_NAME + "'");
  }
  if (v.major != DRM_NPU_UAPI_MAJOR) {
    return close_on_fail(p + ": uAPI version mismatch: driver " + std::to_string(v.major) + "." +
                         std::to_string(v.minor) + ", this user-mode driver expects " +
                         std::to_string(DRM_NPU_UAPI_MAJOR) + ".x");
  }
  drm_npu_device_info di{};
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_DEVICE_INFO;
  q.size = sizeof(di);
  q.data = reinterpret_cast<uintptr_t>(&di);
  if (int err = xioctl(o, fd, DRM_IOCTL_NPU_QUERY, &q)) {
    return close_on_fail(p + ": QUERY(DEVICE_INFO) failed: " + std::strerror(err));
  }
  if ((di.isa_version >> 16) != hw::kIsaVersionMajor) {
    return close_on_fail(p + ": ISA version mismatch: device implements ISA " +
                         version_string(di.isa_version) + ", this software stack targets ISA " +
                         version_string(hw::kIsaVersion) +
                         " (update the firmware/bitstream or rebuild against its npu_hw.toml)");
  }
  if ((di.fw_version >> 16) != kExpectedFwMajor) {
    return close_on_fail(p + ": firmware version mismatch: device runs firmware " +
                         version_string(di.fw_version) + ", expected " +
                         std::to_string(kExpectedFwMajor) + ".x (update the npu firmware)");
  }
  DeviceInfo& info = impl->info;
  info.node = p;
  info.platform = platform_name(di.platform);
  info.driver_name = v.name;
  info.driver_major = static_cast<uint32_t>(v.major);
  info.driver_minor = static_cast<uint32_t>(v.minor);
  info.driver_patch = static_cast<uint32_t>(v.patch);
  info.device_id = di.device_id;
  info.array_dim = di.array_dim;
  info.fingerprint = di.fingerprint;
  info.isa_version = di.isa_version;
  info.fw_version = di.fw_version;
  info.num_queues = di.num_queues;
  info.clock_mhz = di.clock_mhz;
  info.max_contexts = di.max_contexts;
  info.queue_depth = di.queue_depth;
  info.page_size = di.page_size;
  info.va_start = di.va_start;
  info.va_size = di.va_size;
  info.dram_size = di.dram_size;
  info.max_bo_size = di.max_bo_size;
  info.act_sp_rows = di.act_sp_rows;
  info.wgt_sp_tiles = di.wgt_sp_tiles;
  info.acc_sp_rows = di.acc_sp_rows;
  info.num_counters = di.num_counters;
  info.capabilities = di.capabilities;
  NPU_LOG_AT(kUmd, "opened %s (%s, dim %u)", p.c_str(), info.platform.c_str(), info.array_dim);
  return std::unique_ptr<UmdDevice>(new UmdDevice(std::move(impl)));
}

const DeviceInfo& UmdDevice::info() const { return impl_->info; }
Os& UmdDevice::os() const { return *impl_->os; }
int UmdDevice::fd() const { return impl_->fd; }

int UmdDevice::bo_create(uint64_t size, uint32_t flags, BoInfo* out) {
  if (out == nullptr) return EINVAL;
  drm_npu_bo_create a{};
  a.size = size;
  a.flags = flags;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_BO_CREATE, &a)) return err;
  *out = BoInfo{a.handle, a.npu_va, a.out_size};
  return 0;
}

int UmdDevice::bo_map(uint32_t handle, void** out_ptr) {
  if (out_ptr == nullptr) return EINVAL;
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (auto it = impl_->maps.find(handle); it != impl_->maps.end()) {
    *out_ptr = it->second.ptr;
    return 0;
  }
  drm_npu_bo_info a{};
  a.handle = handle;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_BO_INFO, &a)) return err;
  void* p = impl_->os->mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, impl_->fd,
                            static_cast<off_t>(a.mmap_offset));
  if (p == MAP_FAILED) return errno;
  impl_->maps[handle] = {p, a.size};
  *out_ptr = p;
  return 0;
}

int UmdDevice::bo_unmap(uint32_t handle) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->maps.find(handle);
  if (it == impl_->maps.end()) return ENOENT;
  if (impl_->os->munmap(it->second.ptr, it->second.size) != 0) return errno;
  impl_->maps.erase(it);
  return 0;
}

int UmdDevice::bo_destroy(uint32_t handle) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (auto it = impl_->maps.find(handle); it != impl_->maps.end()) {
      impl_->os->munmap(it->second.ptr, it->second.size);
      impl_->maps.erase(it);
    }
  }
  drm_npu_bo_destroy a{};
  a.handle = handle;
  return xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_BO_DESTROY, &a);
}

int UmdDevice::bo_sync(uint32_t handle, uint32_t direction, uint64_t offset, uint64_t size) {
  drm_npu_bo_sync a{};
  a.handle = handle;
  a.direction = direction;
  a.offset = offset;
  a.size = size;
  return xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_BO_SYNC, &a);
}

int UmdDevice::ctx_create(uint32_t priority, uint32_t* out_ctx) {
  if (out_ctx == nullptr) return EINVAL;
  drm_npu_ctx_create a{};
  a.priority = priority;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_CTX_CREATE, &a)) return err;
  *out_ctx = a.ctx_id;
  return 0;
}

int UmdDevice::ctx_destroy(uint32_t ctx) {
  drm_npu_ctx_destroy a{};
  a.ctx_id = ctx;
  return xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_CTX_DESTROY, &a);
}

int UmdDevice::ctx_query(uint32_t ctx, ContextState* out) {
  if (out == nullptr) return EINVAL;
  drm_npu_ctx_query a{};
  a.ctx_id = ctx;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_CTX_QUERY, &a)) return err;
  *out = ContextState{a.state, a.priority, a.reset_count, a.pending, a.last_submitted_seq,
                      a.last_completed_seq, a.fault_code, a.fault_addr};
  return 0;
}

int UmdDevice::submit(uint32_t ctx, std::span<const uint32_t> bo_handles, uint32_t cmd_bo,
                      uint64_t cmd_offset, uint64_t cmd_size, uint64_t* out_seq) {
  return submit(ctx, bo_handles, cmd_bo, cmd_offset, cmd_size, {}, out_seq);
}

int UmdDevice::submit(uint32_t ctx, std::span<const uint32_t> bo_handles, uint32_t cmd_bo,
                      uint64_t cmd_offset, uint64_t cmd_size, std::span<const SyncPoint> after,
                      uint64_t* out_seq) {
  if (out_seq == nullptr) return EINVAL;
  if (!after.empty() && (info().capabilities & DRM_NPU_CAP_IN_SYNCS) == 0) return EOPNOTSUPP;
  if (after.size() > 64) return EINVAL;
  drm_npu_sync syncs[64];
  for (size_t i = 0; i < after.size(); ++i) syncs[i] = drm_npu_sync{after[i].ctx, 0, after[i].seq};
  drm_npu_submit a{};
  if (!after.empty()) {
    a.in_syncs = reinterpret_cast<uintptr_t>(syncs);
    a.in_sync_count = static_cast<uint32_t>(after.size());
    a.in_sync_struct_size = sizeof(drm_npu_sync);
  }
  a.ctx_id = ctx;
  a.bo_handles = bo_handles.empty() ? 0 : reinterpret_cast<uintptr_t>(bo_handles.data());
  a.bo_count = static_cast<uint32_t>(bo_handles.size());
  a.cmd_handle = cmd_bo;
  a.cmd_offset = cmd_offset;
  a.cmd_size = cmd_size;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_SUBMIT, &a)) return err;
  *out_seq = a.seq;
  return 0;
}

int UmdDevice::wait(uint32_t ctx, uint64_t seq, int64_t deadline_ns, JobResult* out) {
  drm_npu_wait a{};
  a.ctx_id = ctx;
  a.seq = seq;
  a.deadline_ns = deadline_ns;
  const int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_WAIT, &a);
  if (out != nullptr && (err == 0 || err == EIO)) {
    *out = JobResult{a.status, a.device_error, a.error_addr, a.device_cycles};
  }
  return err;
}

int UmdDevice::read_counters(std::vector<uint64_t>* out) {
  if (out == nullptr) return EINVAL;
  out->assign(hw::kNumCounters, 0);
  drm_npu_perf a{};
  a.count = hw::kNumCounters;
  a.values = reinterpret_cast<uintptr_t>(out->data());
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_PERF, &a)) return err;
  out->resize(std::min<size_t>(a.count, hw::kNumCounters));
  return 0;
}

int UmdDevice::reg_read(uint32_t offset, uint32_t* out_value) {
  if (out_value == nullptr) return EINVAL;
  drm_npu_reg a{};
  a.offset = offset;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_REG_READ, &a)) return err;
  *out_value = a.value;
  return 0;
}

int UmdDevice::reg_write(uint32_t offset, uint32_t value) {
  drm_npu_reg a{};
  a.offset = offset;
  a.value = value;
  return xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_REG_WRITE, &a);
}

int UmdDevice::reset() {
  drm_npu_reset a{};
  return xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_RESET, &a);
}

int UmdDevice::reset_count(uint64_t* out) {
  if (out == nullptr) return EINVAL;
  drm_npu_get_param a{};
  a.param = DRM_NPU_PARAM_RESET_COUNT;
  if (int err = xioctl(*impl_->os, impl_->fd, DRM_IOCTL_NPU_GET_PARAM, &a)) return err;
  *out = a.value;
  return 0;
}

std::string UmdDevice::describe_error(int err) const {
  const std::string node = impl_->info.node;
  switch (err) {
    case 0: return "success";
    case EINVAL: return node + ": invalid argument (bad flags, size, alignment or range; see docs/uapi.md)";
    case ENOENT: return node + ": unknown buffer handle or context id (destroyed, or from another open file)";
    case EFAULT: return node + ": the driver could not read or write a user pointer";
    case EBUSY: return node + ": the context queue is full (" + std::to_string(impl_->info.queue_depth) +
                       " jobs); wait for an older job and resubmit";
    case ENOSPC: return node + ": all " + std::to_string(impl_->info.max_contexts) +
                        " device contexts are in use; close idle sessions or share a context";
    case ENOMEM: return node + ": out of device memory or NPU address space; free buffers or use smaller ones";
    case ETIMEDOUT: return node + ": the wait deadline passed; the job is still running (wait again or raise the deadline)";
    case EBADFD: return node + ": the context was banned after a page fault; destroy it, create a new one and check buffer addresses";
    case EIO: return node + ": the job was aborted (device reset after another job hung or faulted, or its context went away); resubmit it";
    case ENODEV: return node + ": the device is gone (unplugged or removed); close it and reopen";
    case EOPNOTSUPP: return node + ": the device does not support this capability";
    case EACCES: return node + ": permission denied: this operation needs CAP_SYS_ADMIN (run npu-smi as root)";
    case ENOTTY: return node + ": not an npu ioctl (wrong device node?)";
    default: return node + ": " + std::strerror(err);
  }
}

std::vector<std::string> list_devices() {
  std::vector<std::string> out;
  if (DIR* d = opendir("/sys/class/accel")) {
    std::vector<std::string> nodes;
    while (struct dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("accel", 0) == 0 && n.size() > 5 &&
          n.find_first_not_of("0123456789", 5) == std::string::npos) {
        nodes.push_back(n);
      }
    }
    closedir(d);
    std::sort(nodes.begin(), nodes.end());
    auto os = make_real_os();
    for (const auto& n : nodes) {
      const std::string path = "/dev/accel/" + n;
      bool npu = false;
      const int fd = os->open(path.c_str(), O_RDWR);
      if (fd >= 0) {
        DriverVersion v;
        npu = os->get_version(fd, &v) == 0 && v.name == DRM_NPU_DRIVER_NAME;
        os->close(fd);
      } else {
        // Cannot open (permissions): fall back to the sysfs driver link.
        char buf[256] = {};
        const std::string link = "/sys/class/accel/" + n + "/device/driver";
        ssize_t len = readlink(link.c_str(), buf, sizeof(buf) - 1);
        if (len > 0) {
          std::string target(buf, static_cast<size_t>(len));
          npu = target.substr(target.rfind('/') + 1) == DRM_NPU_DRIVER_NAME;
        }
      }
      if (npu) out.push_back(path);
    }
  }
  if (InProcessBackend* model = in_process_backend(nullptr)) {
    for (const char* name : {"sim", "rtl"}) {
      if (model->device_available(name)) out.emplace_back(name);
    }
  }
  return out;
}

}  // namespace npu::driver
