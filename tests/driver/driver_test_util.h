// Shared helpers of the driver test suites: backends, raw ioctls and tiny command streams.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "npu/driver/kmd.h"
#include "npu/driver/os.h"
#include "npu/driver/umd.h"
#include "npu/hw/isa.h"
#include "uapi/drm/npu_accel.h"

namespace npu::driver::test {

// Raw ioctl through the device's own seam: 0 or errno, no retry.
inline int raw(UmdDevice& dev, unsigned long request, void* arg) {
  return dev.os().ioctl(dev.fd(), request, arg) == 0 ? 0 : errno;
}

// The first real npu node, or "" when the machine has none.
inline std::string first_real_node() {
  for (const auto& d : list_devices()) {
    if (!d.empty() && d.front() == '/') return d;
  }
  return "";
}

// Whether a backend name is the in-process model (fault injection and kmd controls work).
inline bool is_model(const std::string& backend) { return backend != "real"; }

// Opens a backend: "sim", "rtl" or "real". Skips the test with a reason when it cannot exist.
#define NPU_OPEN_BACKEND_OR_SKIP(backend, out)                                            \
  do {                                                                                    \
    std::string spec_ = (backend);                                                        \
    if (spec_ == "real") {                                                                \
      spec_ = ::npu::driver::test::first_real_node();                                     \
      if (spec_.empty()) GTEST_SKIP() << "no /dev/accel node driven by npu on this machine"; \
    } else if (!::npu::driver::kmd::device_available(spec_)) {                            \
      GTEST_SKIP() << spec_ << " device not built (NPU_BUILD_RTL=OFF)";                   \
    }                                                                                     \
    std::string err_;                                                                     \
    (out) = ::npu::driver::UmdDevice::open(spec_, &err_);                                 \
    ASSERT_NE((out), nullptr) << err_;                                                    \
  } while (0)

using Program = std::vector<isa::Words>;

inline Program nop_program(size_t n = 1) { return Program(n, isa::Words{}); }

// Copies `rows` rows of N bytes from src to dst through the ACT scratchpad.
inline Program copy_program(uint32_t src_va, uint32_t dst_va, uint16_t rows, uint32_t n) {
  isa::Load ld;
  ld.sp = hw::Scratchpad::kAct;
  ld.va = src_va;
  ld.x = rows;
  ld.x_stride = n;
  ld.tokens.push_next = true;
  isa::Sync sy;
  sy.engine = isa::Engine::kCompute;
  sy.tokens.pop_prev = true;
  sy.tokens.push_next = true;
  isa::Store st;
  st.sp = hw::Scratchpad::kAct;
  st.va = dst_va;
  st.x = rows;
  st.x_stride = n;
  st.tokens.pop_prev = true;
  return {isa::encode(ld), isa::encode(sy), isa::encode(st)};
}

// A command buffer BO holding `prog`, mapped.
struct CmdBo {
  BoInfo bo;
  void* ptr = nullptr;
  uint64_t bytes = 0;
};

inline int make_cmd_bo(UmdDevice& dev, const Program& prog, CmdBo* out) {
  const uint64_t bytes = prog.size() * sizeof(isa::Words);
  if (int e = dev.bo_create(bytes, 0, &out->bo)) return e;
  if (int e = dev.bo_map(out->bo.handle, &out->ptr)) return e;
  std::memcpy(out->ptr, prog.data(), bytes);
  out->bytes = bytes;
  return 0;
}

// Submits `prog` on ctx and returns the seq (asserting success).
inline uint64_t submit_program(UmdDevice& dev, uint32_t ctx, const Program& prog,
                               std::vector<uint32_t> extra = {}) {
  CmdBo cmd;
  EXPECT_EQ(make_cmd_bo(dev, prog, &cmd), 0);
  uint64_t seq = 0;
  EXPECT_EQ(dev.submit(ctx, extra, cmd.bo.handle, 0, cmd.bytes, &seq), 0);
  // The job holds the BO: the handle can go now.
  EXPECT_EQ(dev.bo_destroy(cmd.bo.handle), 0);
  return seq;
}

inline int wait_ms(UmdDevice& dev, uint32_t ctx, uint64_t seq, JobResult* r, int64_t ms = 10000) {
  return dev.wait(ctx, seq, deadline_after_ms(ms), r);
}

}  // namespace npu::driver::test
