// The Os implementation over real DRM accel nodes, through libdrm.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xf86drm.h>

#include <cerrno>

#include "npu/driver/os.h"

namespace npu::driver {
namespace {

class RealOs final : public Os {
 public:
  int open(const char* path, int flags) override { return ::open(path, flags | O_CLOEXEC); }
  int close(int fd) override { return ::close(fd); }
  // drmIoctl restarts on EINTR/EAGAIN itself, which is exactly the retry policy we want.
  int ioctl(int fd, unsigned long request, void* arg) override {
    return drmIoctl(fd, request, arg);
  }
  void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override {
    return ::mmap(addr, length, prot, flags, fd, offset);
  }
  int munmap(void* addr, size_t length) override { return ::munmap(addr, length); }
  int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) override {
    return ::poll(fds, nfds, timeout_ms);
  }
  int get_version(int fd, DriverVersion* out) override {
    drmVersionPtr v = drmGetVersion(fd);
    if (v == nullptr) return -1;
    out->major = v->version_major;
    out->minor = v->version_minor;
    out->patch = v->version_patchlevel;
    out->name.assign(v->name ? v->name : "", static_cast<size_t>(v->name_len));
    out->date.assign(v->date ? v->date : "", static_cast<size_t>(v->date_len));
    out->desc.assign(v->desc ? v->desc : "", static_cast<size_t>(v->desc_len));
    drmFreeVersion(v);
    return 0;
  }
  const char* name() const override { return "real"; }
};

}  // namespace

std::unique_ptr<Os> make_real_os() { return std::make_unique<RealOs>(); }

}  // namespace npu::driver
