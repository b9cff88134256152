// libFuzzer target for the ioctl ABI gate of the kernel-driver model.
//
// Each input is a little program of system calls on one freshly opened (privileged) file of
// the "sim" device: ioctls with fuzzed numbers, directions, sizes and payloads, mmap/munmap
// of fuzzed offsets, and poll. Pointer-sized payload slots whose top byte is 0xAA are turned
// into pointers into a fuzzed scratch area, so nested user pointers (handle arrays, in-syncs,
// query buffers) are reached with valid as well as invalid addresses. WAIT deadlines are
// clamped to 1 ms so an input never blocks. Closing the file at the end must release
// everything (LeakSanitizer checks that).
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "npu/driver/kmd.h"
#include "npu/driver/os.h"
#include "npu/driver/umd.h"
#include "uapi/drm/npu_accel.h"

namespace {

struct Reader {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{u8()} << (8 * i);
    return v;
  }
  void bytes(void* dst, size_t len) {
    const size_t k = std::min(len, n);
    std::memcpy(dst, p, k);
    std::memset(static_cast<uint8_t*>(dst) + k, 0, len - k);
    p += k;
    n -= k;
  }
};

npu::driver::Os& os() {
  static auto* o = [] {
    npu::driver::kmd::set_hang_timeout_ms("sim", 20);
    return npu::driver::make_model_os({npu::driver::ModelCredentials::Privilege::kPrivileged})
        .release();
  }();
  return *o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const int fd = os().open("sim", 02 /* O_RDWR */);
  if (fd < 0) return 0;
  alignas(8) uint8_t scratch[4096];
  in.bytes(scratch, in.u8() * 16u);
  struct Map {
    void* p;
    size_t len;
  };
  std::vector<Map> maps;
  for (int step = 0; step < 32 && !in.empty(); ++step) {
    const uint8_t kind = in.u8();
    if (kind < 200) {
      // An ioctl: number mostly in the driver range, sometimes core or foreign.
      const uint8_t sel = in.u8();
      unsigned nr, type = DRM_IOCTL_BASE;
      if (sel < 200) nr = DRM_COMMAND_BASE + (sel % (DRM_NPU_NUM_IOCTLS + 2));
      else if (sel < 240) nr = sel % 0x40;
      else {
        nr = sel;
        type = in.u8();
      }
      const unsigned dir = in.u8() & 3;
      const size_t len = std::min<size_t>(in.u8(), 256);
      alignas(8) uint8_t arg[256 + 8];
      in.bytes(arg, len);
      for (size_t off = 0; off + 8 <= len; off += 8) {
        uint64_t v;
        std::memcpy(&v, arg + off, 8);
        if ((v >> 56) == 0xAA) {
          v = reinterpret_cast<uintptr_t>(scratch) + (v & 0xFFF);
          std::memcpy(arg + off, &v, 8);
        }
      }
      if (nr == DRM_COMMAND_BASE + DRM_NPU_WAIT && len >= offsetof(drm_npu_wait, status)) {
        const int64_t dl = npu::driver::deadline_after_ms(1);
        std::memcpy(arg + offsetof(drm_npu_wait, deadline_ns), &dl, sizeof(dl));
      }
      const unsigned long cmd = _IOC(dir, type, nr, len);
      void* p = (in.u8() & 0x1F) == 0 ? reinterpret_cast<void*>(uintptr_t{in.u8()}) : arg;
      os().ioctl(fd, cmd, p);
    } else if (kind < 230) {
      const uint64_t off = in.u64();
      const size_t len = in.u16() * 4096ul;
      void* p = os().mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                          static_cast<off_t>(off));
      if (p != MAP_FAILED) {
        static_cast<volatile uint8_t*>(p)[0] = 1;  // the mapping is really usable
        maps.push_back({p, len});
      }
    } else if (kind < 245) {
      if (!maps.empty()) {
        os().munmap(maps.back().p, maps.back().len);
        maps.pop_back();
      }
    } else {
      struct pollfd pfd = {fd, POLLIN, 0};
      os().poll(&pfd, 1, 0);
    }
  }
  for (auto& m : maps) os().munmap(m.p, m.len);
  os().close(fd);
  return 0;
}
