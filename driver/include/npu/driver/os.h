// The one syscall seam of the driver stack. Everything the user-mode driver does to a device
// goes through an Os: the real implementation talks to /dev/accel/accelN through libdrm; the
// model implementation talks to the in-process kernel-driver model ("sim", "rtl"), which
// reproduces the kernel's behaviour (drm_ioctl() size rules, handles, mmap offsets, errno).
//
// Every member has the semantics of the syscall of the same name: it returns the syscall's
// result and, on failure, -1 (MAP_FAILED for mmap) with errno set. No member retries on
// EINTR/EAGAIN by itself (callers decide; the UMD retries only those two).
//
// Threading: both implementations are thread-safe.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace npu::driver {

// DRM_IOCTL_VERSION, decoded.
struct DriverVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  std::string name;
  std::string date;
  std::string desc;
};

class Os {
 public:
  virtual ~Os() = default;
  Os() = default;
  Os(const Os&) = delete;
  Os& operator=(const Os&) = delete;

  virtual int open(const char* path, int flags) = 0;
  virtual int close(int fd) = 0;
  virtual int ioctl(int fd, unsigned long request, void* arg) = 0;
  virtual void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) = 0;
  virtual int munmap(void* addr, size_t length) = 0;
  virtual int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) = 0;
  // DRM_IOCTL_VERSION (drmGetVersion on a real node). 0 or -1 with errno.
  virtual int get_version(int fd, DriverVersion* out) = 0;
  // "real" or "model".
  virtual const char* name() const = 0;
};

// libdrm over real device nodes (drmIoctl, drmGetVersion).
std::unique_ptr<Os> make_real_os();

// Who the model believes the caller is. The real kernel checks CAP_SYS_ADMIN; the model does
// the same by default and lets tests open unprivileged files while running as root.
struct ModelCredentials {
  enum class Privilege { kFromProcess, kPrivileged, kUnprivileged };
  Privilege privilege = Privilege::kFromProcess;
};

// The in-process kernel-driver model (defined in npu_kmd; programs that do not link it reach
// the model through npu/driver/in_process.h, which loads the simulator plugin). open() accepts the names of the in-process devices
// ("sim", "rtl", and names registered by tests with kmd::register_device). File descriptors
// it returns are its own (>= 1 << 20) and only mean something to this Os family: every
// model Os shares the same process-wide devices, so an fd from one model Os works on another.
std::unique_ptr<Os> make_model_os(ModelCredentials credentials = {});

}  // namespace npu::driver
