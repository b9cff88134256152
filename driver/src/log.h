// Logging by category, selected with NPU_LOG=ioctl,job,irq,reset,fault,mm,umd (or "all").
#pragma once

#include <cstdint>
#include <cstdio>

namespace npu::driver::log {

enum Category : uint32_t {
  kIoctl = 1u << 0,
  kJob = 1u << 1,
  kIrq = 1u << 2,
  kReset = 1u << 3,
  kFault = 1u << 4,
  kMm = 1u << 5,
  kUmd = 1u << 6,
};

uint32_t mask();
inline bool on(Category c) { return (mask() & c) != 0; }
void write(Category c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace npu::driver::log

#define NPU_DLOG(cat, ...)                                                   \
  do {                                                                       \
    if (::npu::driver::log::on(::npu::driver::log::cat)) {                   \
      ::npu::driver::log::write(::npu::driver::log::cat, __VA_ARGS__);       \
    }                                                                        \
  } while (0)
