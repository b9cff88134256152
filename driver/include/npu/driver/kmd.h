// Control surface of the in-process kernel-driver model, for tests, tools and the fuzzer.
// Nothing here exists on a real kernel: on silicon the same effects come from debugfs and
// from the hardware itself.
//
// Devices are process-wide and named: "sim" (functional model), "rtl" (Verilator RTL, when
// built) and any name registered with register_device(). A device instance is created on
// first open and lives while files reference it; after unplug() the name is re-probed on the
// next open (a new instance, as after a hot re-plug).
//
// Fault injection syntax (also read from the environment variable NPU_FAULT when an instance
// is created):
//   NPU_FAULT = RULE[,RULE...]
//   RULE      = [DEVICE:]FAULT[@N][xCOUNT]
//   FAULT     = hang | page_fault | eintr | enomem | ebusy | isa_mismatch | fw_mismatch | unplug
//   @N        = fire on the Nth matching event from now (default 1 = the next one)
//   xCOUNT    = fire on COUNT consecutive matching events (default 1; x* = every one)
// Matching events: hang, page_fault, ebusy: a SUBMIT; enomem: a BO_CREATE or CTX_CREATE;
// eintr: any ioctl (refused before it has any effect); unplug: any ioctl (the device is gone
// before it runs); isa_mismatch, fw_mismatch: take effect immediately (the reported ISA or
// firmware major version is off by one from then on; the count is ignored).
// DEVICE defaults to every in-process device. Example: NPU_FAULT=sim:hang@3,eintrx*.
// NPU_KMD_HANG_TIMEOUT_MS sets the no-progress time after which a job is declared hung
// (default 2000).
//
// Threading: every function is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace npu::sim {
class Device;
}

namespace npu::driver::kmd {

enum class Fault : uint32_t {
  kHang,
  kPageFault,
  kEintr,
  kEnomem,
  kEbusy,
  kIsaMismatch,
  kFwMismatch,
  kUnplug,
};

struct FaultRule {
  Fault fault = Fault::kHang;
  uint32_t skip = 0;   // matching events to let through first (@N means skip = N - 1)
  uint32_t count = 1;  // events to fire on; 0 = every one
};

struct NamedFaultRule {
  std::string device;  // empty = every device
  FaultRule rule;
};

// Parses the NPU_FAULT syntax. 0 or EINVAL with *error naming the bad rule.
int parse_faults(std::string_view text, std::vector<NamedFaultRule>* out, std::string* error);

// Adds a rule to the current instance of `device` (creating it if needed). 0, ENODEV for an
// unknown or unbuilt device.
int inject_fault(std::string_view device, const FaultRule& rule);
// Drops every pending rule and version override of `device`.
int clear_faults(std::string_view device);
// Unplugs the current instance now: every file of it gets ENODEV from then on, every job
// that has not ended ends ABORTED.
int unplug(std::string_view device);
// No-progress time after which a job is declared hung (default 2000 ms).
int set_hang_timeout_ms(std::string_view device, uint32_t ms);

// Counters of the current instance, for tests.
struct Stats {
  uint64_t resets = 0;
  uint64_t jobs_submitted = 0;
  uint64_t jobs_ended = 0;         // every job ends exactly once
  uint64_t jobs_double_end = 0;    // must stay 0: a job whose end was reported twice
  uint64_t jobs_success = 0;
  uint64_t jobs_aborted = 0;
  uint64_t jobs_timeout = 0;
  uint64_t jobs_page_fault = 0;
  uint64_t jobs_device_error = 0;
  uint64_t waits = 0;        // WAIT ioctls with a deadline still ahead (polls not counted)
  uint64_t wait_sleeps = 0;  // times a WAIT slept until woken (or its deadline): host wake-ups
  uint64_t wait_naps = 0;    // of those, timed sleeps until shortly before a long job's
                             // expected end (then spun across it: NPU_WAIT_SPIN_US)
  uint64_t bo_syncs = 0;     // BO_SYNC ioctls that reached the driver (valid or not)
  // Doorbells rung while the device thread was running the device: posted, and written to
  // the device by that thread before it next looked at the device (the SUBMIT did not wait).
  uint64_t doorbells_posted = 0;
  // copy_from_user/copy_to_user that took the checked path (a system call: the range was not
  // on the calling thread's live stack), by every model device of the process together.
  uint64_t checked_user_copies = 0;
  uint32_t open_files = 0;
  uint32_t contexts = 0;
  uint64_t free_dram = 0;
};
int stats(std::string_view device, Stats* out);

// Registers an in-process device backed by `make` (tests use small fake devices). platform is
// a DRM_NPU_PLATFORM_* value. EEXIST if the name is taken.
using DeviceFactory =
    std::function<std::unique_ptr<sim::Device>(std::span<std::byte> dram)>;
int register_device(std::string name, uint32_t platform, DeviceFactory make);

// Whether an in-process device of this name can be opened ("rtl" only when built).
bool device_available(std::string_view name);
// Why the last probe of `name` failed (what a kernel driver would print to dmesg: the device
// factory's exception message, e.g. an unusable NPU_SIM_KERNELS); empty when it did not.
std::string last_probe_error(std::string_view name);
// Names of the in-process devices that can be opened.
std::vector<std::string> device_names();

}  // namespace npu::driver::kmd
