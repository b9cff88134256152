// The Os implementation over the in-process kernel-driver model: a file table of fake file
// descriptors, mmap through the memfd that is the device DRAM, poll on job completions.
#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "kmd_internal.h"
#include "npu/driver/os.h"
#include "uapi/drm/npu_accel.h"

namespace npu::driver {
namespace {

constexpr int kFirstFd = 1 << 20;

bool process_has_cap_sys_admin() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) {
      const unsigned long long caps = std::stoull(line.substr(7), nullptr, 16);
      return (caps >> 21) & 1;  // CAP_SYS_ADMIN
    }
  }
  return false;
}

struct Mapping {
  std::shared_ptr<kmd::KDevice> dev;
  std::shared_ptr<kmd::BoMem> ref;
  size_t length;
};

// Process-wide, shared by every model Os (like the kernel's file table).
struct FileTable {
  std::mutex mu;
  std::map<int, std::shared_ptr<kmd::File>> files;
  std::map<uintptr_t, Mapping> mappings;
  int next_fd = kFirstFd;
};

FileTable& table() {
  static FileTable* t = new FileTable();
  return *t;
}

std::shared_ptr<kmd::File> lookup(int fd) {
  FileTable& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = t.files.find(fd);
  return it == t.files.end() ? nullptr : it->second;
}

class ModelOs final : public Os {
 public:
  explicit ModelOs(ModelCredentials cred) : cred_(cred) {}

  int open(const char* path, int flags) override {
    if ((flags & O_ACCMODE) != O_RDWR) {
      errno = EACCES;  // DRM nodes need read-write
      return -1;
    }
    bool privileged = false;
    switch (cred_.privilege) {
      case ModelCredentials::Privilege::kPrivileged: privileged = true; break;
      case ModelCredentials::Privilege::kUnprivileged: privileged = false; break;
      case ModelCredentials::Privilege::kFromProcess:
        privileged = process_has_cap_sys_admin();
        break;
    }
    std::string_view name(path);
    if (name.rfind("/dev/accel/", 0) == 0) name.remove_prefix(11);
    if (!kmd::device_available(name)) {
      errno = ENOENT;
      return -1;
    }
    std::shared_ptr<kmd::File> file;
    if (int err = kmd::open_device(name, privileged, &file)) {
      errno = err;
      return -1;
    }
    FileTable& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    const int fd = t.next_fd++;
    t.files[fd] = std::move(file);
    return fd;
  }

  int close(int fd) override {
    std::shared_ptr<kmd::File> file;
    {
      FileTable& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.files.find(fd);
      if (it == t.files.end()) {
        errno = EBADF;
        return -1;
      }
      file = std::move(it->second);
      t.files.erase(it);
    }
    file->dev->close_file(file.get());
    return 0;
  }

  int ioctl(int fd, unsigned long request, void* arg) override {
    auto file = lookup(fd);
    if (!file) {
      errno = EBADF;
      return -1;
    }
    const long ret = file->dev->ioctl(file.get(), request, arg);
    if (ret < 0) {
      errno = static_cast<int>(-ret);
      return -1;
    }
    return static_cast<int>(ret);
  }

  void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override {
    auto file = lookup(fd);
    if (!file) {
      errno = EBADF;
      return MAP_FAILED;
    }
    if ((flags & MAP_SHARED) == 0) {
      errno = EINVAL;  // a BO mapping is always shared with the device
      return MAP_FAILED;
    }
    uint64_t phys = 0;
    std::shared_ptr<kmd::BoMem> ref;
    if (int err = file->dev->mmap_resolve(file.get(), static_cast<uint64_t>(offset), length,
                                          &phys, &ref)) {
      errno = err;
      return MAP_FAILED;
    }
    void* p = ::mmap(addr, length, prot, flags, file->dev->memfd(), static_cast<off_t>(phys));
    if (p == MAP_FAILED) {
      const int err = errno;
      file->dev->mmap_release(std::move(ref));
      errno = err;
      return MAP_FAILED;
    }
    FileTable& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    t.mappings[reinterpret_cast<uintptr_t>(p)] = Mapping{file->dev, std::move(ref), length};
    return p;
  }

  int munmap(void* addr, size_t length) override {
    Mapping m;
    {
      FileTable& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.mappings.find(reinterpret_cast<uintptr_t>(addr));
      if (it != t.mappings.end()) {
        if (it->second.length != length) {
          errno = EINVAL;  // the model only unmaps whole BO mappings
          return -1;
        }
        m = std::move(it->second);
        t.mappings.erase(it);
      }
    }
    const int ret = ::munmap(addr, length);
    if (m.dev) m.dev->mmap_release(std::move(m.ref));
    return ret;
  }

  int poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) override {
    if (nfds != 1) {
      errno = EINVAL;  // the model polls one device file at a time
      return -1;
    }
    auto file = lookup(fds[0].fd);
    if (!file) {
      fds[0].revents = POLLNVAL;
      return 1;
    }
    const int r = file->dev->poll_file(file.get(), timeout_ms);
    if (r < 0) {
      fds[0].revents = POLLERR | POLLHUP;
      return 1;
    }
    fds[0].revents = r > 0 ? static_cast<short>(fds[0].events & (POLLIN | POLLRDNORM)) : 0;
    return fds[0].revents != 0 ? 1 : 0;
  }

  int get_version(int fd, DriverVersion* out) override {
    char name[64] = {}, date[64] = {}, desc[256] = {};
    drm_version v{};
    v.name = name;
    v.name_len = sizeof(name) - 1;
    v.date = date;
    v.date_len = sizeof(date) - 1;
    v.desc = desc;
    v.desc_len = sizeof(desc) - 1;
    if (ioctl(fd, DRM_IOCTL_VERSION, &v) != 0) return -1;
    out->major = v.version_major;
    out->minor = v.version_minor;
    out->patch = v.version_patchlevel;
    out->name.assign(name, std::min<size_t>(v.name_len, sizeof(name) - 1));
    out->date.assign(date, std::min<size_t>(v.date_len, sizeof(date) - 1));
    out->desc.assign(desc, std::min<size_t>(v.desc_len, sizeof(desc) - 1));
    return 0;
  }

  const char* name() const override { return "model"; }

 private:
  ModelCredentials cred_;
};

}  // namespace

std::unique_ptr<Os> make_model_os(ModelCredentials credentials) {
  return std::make_unique<ModelOs>(credentials);
}

}  // namespace npu::driver
