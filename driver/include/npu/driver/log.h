// The stack's one logging facility (library npu_log, the lowest layer: the driver, the
// kernel-driver model, the HAL and the scheduler all log through it).
//
// Messages belong to a category. Nothing is written unless its category is switched on, by
// NPU_LOG (read once, on first use) or by set_mask(). NPU_LOG is a comma-separated list of
// category names (category_name), "all", or "quiet"/"none"/"" (nothing); an unknown word is
// reported once through the sink, with the list of known words, and ignored.
// Enabled messages go to the sink: by default one line on stderr, "[npu:CATEGORY] message";
// an application replaces it with set_sink() (C: npu_log_set_sink in npu/c_common.h).
//
// Threading: every function is thread-safe. The sink is called from whatever thread logs
// (device threads, scheduler lanes, the caller's thread), one message at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace npu::log {

enum Category : uint32_t {
  kIoctl = 1u << 0,   // every ioctl of the kernel-driver model
  kJob = 1u << 1,     // job submission and completion in the kernel-driver model
  kIrq = 1u << 2,
  kReset = 1u << 3,
  kFault = 1u << 4,   // injected faults
  kMm = 1u << 5,      // buffer objects and mappings
  kUmd = 1u << 6,     // the user-mode driver
  kSched = 1u << 7,   // the scheduler's lanes, contexts and retries
  kDevice = 1u << 8,  // devices opened by the HAL ("opened sim (...)")
};
inline constexpr uint32_t kAll = (1u << 9) - 1;

// "ioctl", "job", ...; "?" for a value that is not one category.
std::string_view category_name(Category category);
// Every category name, comma-separated, for help texts and error messages.
std::string known_categories();

// Parses the NPU_LOG syntax into a mask. false with *error naming the first unknown word
// (*mask then holds the known words).
bool parse_categories(std::string_view text, uint32_t* mask, std::string* error);

// The enabled categories (NPU_LOG on first use, unless set_mask ran before).
uint32_t mask();
void set_mask(uint32_t mask);
inline bool enabled(Category category) { return (mask() & category) != 0; }

// Formats and hands one message to the sink when `category` is enabled.
void write(Category category, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Formats and hands one message to the sink whatever the mask: for a setting the user made that
// cannot be honoured (an unknown NPU_LOG word, a malformed NPU_FAULT), which must not pass
// silently. Use it for nothing that happens in normal operation.
void notice(Category category, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Where enabled messages go. `message` has no trailing newline and is valid during the call.
// set_sink(nullptr, nullptr) restores the stderr sink.
using Sink = void (*)(void* user, Category category, const char* message);
void set_sink(Sink sink, void* user);

// For a copy of this library inside a plugin (libnpu-sim.so): from then on mask() and write()
// of that copy defer to the host program's functions, so one NPU_LOG, one mask and one sink
// serve the whole process.
using HostMask = uint32_t (*)();
using HostEmit = void (*)(uint32_t category, const char* message);
void forward_to_host(HostMask mask, HostEmit emit);
// The functions a host hands to forward_to_host (they bypass any forwarding of their own).
// host_emit passes a message whose category carries kNoticeBit whatever the mask.
inline constexpr uint32_t kNoticeBit = 1u << 31;
uint32_t host_mask();
void host_emit(uint32_t category, const char* message);

}  // namespace npu::log

// Logs only when the category is on, without evaluating the arguments otherwise.
#define NPU_LOG_AT(cat, ...)                                      \
  do {                                                            \
    if (::npu::log::enabled(::npu::log::cat)) {                   \
      ::npu::log::write(::npu::log::cat, __VA_ARGS__);            \
    }                                                             \
  } while (0)
