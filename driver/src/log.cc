#include "npu/driver/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace npu::log {
namespace {

constexpr Category kCategories[] = {kIoctl, kJob, kIrq, kReset, kFault, kMm, kUmd, kSched, kDevice};

struct State {
  std::mutex mu;  // serialises the sink
  Sink sink = nullptr;
  void* user = nullptr;
  std::atomic<uint32_t> mask{0};
  std::atomic<HostMask> forward_mask{nullptr};
  std::atomic<HostEmit> forward_emit{nullptr};
};

void emit_locked(State& s, Category c, const char* msg) {
  if (s.sink) {
    s.sink(s.user, c, msg);
  } else {
    std::fprintf(stderr, "[npu:%s] %s\n", std::string(category_name(c)).c_str(), msg);
  }
}

State& state() {
  // Never destroyed: device threads may log during static teardown.
  static State* s = new State();
  return *s;
}

// NPU_LOG, read once on first use of this copy's own mask (a copy inside the simulator plugin
// defers to the host's and never reads it, so an unknown word is reported once).
State& with_env() {
  State& s = state();
  static std::once_flag once;
  std::call_once(once, [&s] {
    uint32_t m = 0;
    std::string error;
    const char* env = std::getenv("NPU_LOG");
    if (env && !parse_categories(env, &m, &error)) {
      const std::string line = "NPU_LOG: " + error;
      std::lock_guard<std::mutex> lock(s.mu);
      emit_locked(s, kUmd, line.c_str());  // a notice: whatever the mask
    }
    s.mask.store(m, std::memory_order_relaxed);
  });
  return s;
}

}  // namespace

std::string_view category_name(Category c) {
  switch (c) {
    case kIoctl: return "ioctl";
    case kJob: return "job";
    case kIrq: return "irq";
    case kReset: return "reset";
    case kFault: return "fault";
    case kMm: return "mm";
    case kUmd: return "umd";
    case kSched: return "sched";
    case kDevice: return "device";
  }
  return "?";
}

std::string known_categories() {
  std::string out;
  for (Category c : kCategories) out += std::string(category_name(c)) + ", ";
  return out + "all, quiet";
}

bool parse_categories(std::string_view text, uint32_t* mask, std::string* error) {
  uint32_t m = 0;
  bool ok = true;
  for (;;) {
    const size_t comma = text.find(',');
    const std::string_view w = text.substr(0, comma);
    if (w == "all") {
      m |= kAll;
    } else if (!w.empty() && w != "quiet" && w != "none") {
      bool known = false;
      for (Category c : kCategories)
        if (w == category_name(c)) {
          m |= c;
          known = true;
        }
      if (!known && ok) {
        ok = false;
        if (error)
          *error = "unknown category '" + std::string(w) + "'; known: " + known_categories();
      }
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *mask = m;
  return ok;
}

uint32_t mask() {
  if (HostMask f = state().forward_mask.load(std::memory_order_acquire)) return f();
  return with_env().mask.load(std::memory_order_relaxed);
}

void set_mask(uint32_t m) { with_env().mask.store(m & kAll, std::memory_order_relaxed); }

namespace {
// `forwarded` is the category as the host's host_emit receives it (with kNoticeBit for a notice).
void emit(Category c, uint32_t forwarded, const char* fmt, va_list ap) {
  char buf[1024];
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  State& s = state();
  if (HostEmit f = s.forward_emit.load(std::memory_order_acquire)) return f(forwarded, buf);
  std::lock_guard<std::mutex> lock(s.mu);
  emit_locked(s, c, buf);
}
}  // namespace

void write(Category c, const char* fmt, ...) {
  if (!enabled(c)) return;
  va_list ap;
  va_start(ap, fmt);
  emit(c, c, fmt, ap);
  va_end(ap);
}

void notice(Category c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(c, c | kNoticeBit, fmt, ap);
  va_end(ap);
}

void set_sink(Sink sink, void* user) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.sink = sink;
  s.user = sink ? user : nullptr;
}

void forward_to_host(HostMask m, HostEmit e) {
  State& s = state();
  s.forward_emit.store(e, std::memory_order_release);
  s.forward_mask.store(m, std::memory_order_release);
}

uint32_t host_mask() { return with_env().mask.load(std::memory_order_relaxed); }

void host_emit(uint32_t category, const char* message) {
  State& s = state();
  const auto c = static_cast<Category>(category & ~kNoticeBit);
  if ((category & kNoticeBit) == 0 && (host_mask() & category) == 0) return;
  std::lock_guard<std::mutex> lock(s.mu);
  emit_locked(s, c, message);
}

}  // namespace npu::log
