#include "log.h"

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

namespace npu::driver::log {
namespace {

uint32_t parse(const char* env) {
  if (env == nullptr) return 0;
  uint32_t m = 0;
  std::string_view s(env);
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view w = s.substr(0, comma);
    if (w == "ioctl") m |= kIoctl;
    else if (w == "job") m |= kJob;
    else if (w == "irq") m |= kIrq;
    else if (w == "reset") m |= kReset;
    else if (w == "fault") m |= kFault;
    else if (w == "mm") m |= kMm;
    else if (w == "umd") m |= kUmd;
    else if (w == "all") m |= ~0u;
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return m;
}

const char* name(Category c) {
  switch (c) {
    case kIoctl: return "ioctl";
    case kJob: return "job";
    case kIrq: return "irq";
    case kReset: return "reset";
    case kFault: return "fault";
    case kMm: return "mm";
    case kUmd: return "umd";
  }
  return "?";
}

}  // namespace

uint32_t mask() {
  static const uint32_t m = parse(std::getenv("NPU_LOG"));
  return m;
}

void write(Category c, const char* fmt, ...) {
  static std::mutex mu;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[npu:%s] %s\n", name(c), buf);
}

}  // namespace npu::driver::log
