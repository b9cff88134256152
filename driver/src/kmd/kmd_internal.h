// Private state of the in-process kernel-driver model. One KDevice per device instance; the
// files, contexts, jobs and buffer objects below mirror what a DRM accel driver keeps in
// struct drm_file, its context xarray, its job queues and its GEM objects.
//
// Locking: KDevice::mu_ guards every field of every object below (the "device lock");
// KDevice::hw_mu_ guards the simulated Device (not thread-safe by contract). Order: mu_ then
// hw_mu_. Functions ending in _locked expect mu_ held. The device thread runs the simulator
// with only hw_mu_ held, so ioctls proceed while the device computes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "npu/driver/kmd.h"
#include "npu/hw/config.h"
#include "npu/sim/device.h"

namespace npu::driver::kmd {

class KDevice;
struct File;

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC on Linux

// First-fit allocator over unit indices (DRAM pages, VA pages). Guarded by the device lock.
class RangeAllocator final {
 public:
  void init(uint64_t first, uint64_t count);
  bool alloc(uint64_t count, uint64_t* out_first);
  void release(uint64_t first, uint64_t count);
  uint64_t free_units() const { return free_total_; }

 private:
  std::map<uint64_t, uint64_t> free_;  // first -> count
  uint64_t free_total_ = 0;
};

// A file's NPU address space: a flat page table in device DRAM. Freed with the device lock
// held (its last reference is always dropped under it).
struct AddressSpace final {
  AddressSpace(KDevice* d, uint64_t pt) : dev(d), pt_phys(pt) {}
  ~AddressSpace();
  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;
  KDevice* dev;
  uint64_t pt_phys;  // byte address of the 65536 PTEs
  RangeAllocator va;  // in pages
};

// The memory of a buffer object: a DRAM range and its VA mapping. Referenced by the handle,
// by jobs and by CPU mappings; freed (PTEs cleared, pages punched) when the last goes.
struct BoMem final {
  BoMem() = default;
  ~BoMem();
  BoMem(const BoMem&) = delete;
  BoMem& operator=(const BoMem&) = delete;
  KDevice* dev = nullptr;
  std::shared_ptr<AddressSpace> as;
  uint64_t phys = 0;
  uint64_t size = 0;
  uint64_t va = 0;
  uint32_t flags = 0;
  uint64_t mmap_offset = 0;
};

struct JobEnd {
  uint32_t status = 0;
  uint32_t device_error = 0;
  uint64_t error_addr = 0;
  uint64_t device_cycles = 0;
};

struct Context;

struct Job final {
  std::shared_ptr<Context> ctx;
  uint64_t seq = 0;
  uint32_t cmd_va = 0;
  uint32_t cmd_size = 0;
  std::shared_ptr<AddressSpace> as;
  std::vector<std::shared_ptr<BoMem>> bos;
  std::vector<std::pair<std::shared_ptr<Context>, uint64_t>> deps;
  bool inject_hang = false;
  bool inject_page_fault = false;
  uint32_t queue = 0;
  uint32_t hw_seq = 0;
  uint64_t doorbell_cycle = 0;
  bool in_ring = false;
  bool ended = false;
};

struct Context final {
  uint32_t id = 0;
  File* file = nullptr;  // null once destroyed
  uint32_t priority = 0;
  uint32_t queue = 0;
  uint32_t state = 0;  // DRM_NPU_CTX_STATE_*
  uint32_t reset_count = 0;
  uint32_t fault_code = 0;
  uint64_t fault_addr = 0;
  uint64_t last_submitted = 0;
  uint64_t last_ended = 0;
  uint32_t unended = 0;  // queued + in a ring, not ended
  std::deque<std::shared_ptr<Job>> queued;  // not yet written to a ring
  std::map<uint64_t, JobEnd> results;       // the most recent kResultsKept ends
  uint64_t pruned_upto = 0;                 // results of seq <= this are no longer kept
  // WAITs sleeping on this context, by the seq they wait for: a job's end wakes only the
  // WAITs for that job (one wake-up per waited job, not one per job of the device).
  std::multiset<uint64_t> waited;
  std::condition_variable cv_wait;
  // Bumped (under the device lock) at every job end of this context, read without it: a
  // WAIT spinning before it sleeps (KDevice::spin_until) polls this instead of taking the lock.
  std::atomic<uint64_t> ends{0};
  // Hybrid waiting (KDevice::do_wait): the job submitted while nothing else of this context
  // was outstanding (0 once it has ended), when it was submitted, and how long such jobs took
  // from SUBMIT to their end, estimated as TCP estimates round trips (RFC 6298): a smoothed
  // mean and mean deviation in ns (0 until one has ended).
  uint64_t solo_seq = 0;
  Clock::time_point solo_submitted;
  int64_t solo_ns = 0;
  int64_t solo_dev_ns = 0;
  // Adds one solo job's time to the estimate (RFC 6298's weights: 1/8 for the mean, 1/4 for
  // the deviation; the first sample's deviation is half its time).
  void learn_solo_time(Clock::duration took_time) {
    const int64_t took = std::chrono::duration_cast<std::chrono::nanoseconds>(took_time).count();
    if (solo_ns == 0) {
      solo_ns = took;
      solo_dev_ns = took / 2;
      return;
    }
    solo_dev_ns += (std::abs(solo_ns - took) - solo_dev_ns) / 4;
    solo_ns += (took - solo_ns) / 8;
  }
};

struct File final {
  std::shared_ptr<KDevice> dev;
  bool privileged = false;
  std::shared_ptr<AddressSpace> as;
  std::map<uint32_t, std::shared_ptr<BoMem>> handles;
  uint32_t next_handle = 1;
  std::map<uint32_t, std::shared_ptr<Context>> contexts;
  uint64_t events = 0;       // job ends on this file, for poll()
  uint64_t events_seen = 0;
  bool closed = false;
};

struct Ring {
  uint64_t phys = 0;
  uint32_t size = 0;
  uint32_t tail = 0;           // byte offset after the last written entry
  uint32_t doorbell = 0;       // last value written to RING_TAIL (or posted: below)
  // The doorbell is posted, not yet in the device's register: the device thread was running
  // the device (holding hw_mu_), and writes it between two runs (KDevice::ring_doorbell_locked).
  bool doorbell_posted = false;
  uint32_t next_hw_seq = 1;
  std::deque<std::shared_ptr<Job>> jobs;  // written to the ring, not yet fenced, oldest first
  std::shared_ptr<Job> withheld_hang;     // injected hang: entries written, doorbell withheld
  std::vector<Context*> contexts;         // round robin over contexts of this priority
  size_t rr = 0;
  uint64_t completed_total = 0;
};

struct ArmedFault {
  FaultRule rule;
  bool forever = false;
};

class KDevice final : public std::enable_shared_from_this<KDevice> {
 public:
  static constexpr uint32_t kRingBytes = 4096;
  static constexpr uint32_t kRingWindow = 4;  // jobs per ring; the rest wait in software
  static constexpr uint32_t kMaxContexts = 64;
  static constexpr uint32_t kQueueDepth = 64;
  static constexpr uint32_t kMaxFiles = 1024;
  static constexpr uint32_t kMaxBoHandlesPerSubmit = 4096;
  static constexpr uint32_t kMaxInSyncs = 64;
  static constexpr uint64_t kResultsKept = 65536;
  static constexpr uint64_t kMaxBoSize = 256ull << 20;
  static constexpr uint64_t kMmapOffsetStart = 1ull << 32;
  static constexpr uint32_t kFwVersion = 0x00010000;  // 1.0
  static constexpr uint64_t kSliceCycles = 1u << 16;
  static constexpr uint32_t kDefaultWaitSpinUs = 50;  // NPU_WAIT_SPIN_US; 0 = never spin
  static constexpr uint32_t kMaxWaitSpinUs = 10000;
  // The least margin of a nap before a long job's expected end, in spin bounds: a timed
  // wake-up of an idle vCPU takes tens of µs.
  static constexpr int kNapMargins = 2;
  // The longest idle spin of the device thread (unless the spin bound is longer), and the
  // longest margin of a nap: the CPU time a spin may take for one job.
  static constexpr std::chrono::microseconds kMaxIdleSpin{1000};
  static constexpr std::chrono::microseconds kMaxNapMargin{500};
  static constexpr uint32_t kMaxHangTimeoutMs = 3600 * 1000;  // NPU_KMD_HANG_TIMEOUT_MS

  // Creates and starts an instance. 0 or a positive errno.
  static int create(std::string name, uint32_t platform, const DeviceFactory& make,
                    std::shared_ptr<KDevice>* out);
  ~KDevice();
  KDevice(const KDevice&) = delete;
  KDevice& operator=(const KDevice&) = delete;

  const std::string& name() const { return name_; }

  // Files. open: 0 or errno. close: drops everything the file holds.
  int open_file(bool privileged, std::shared_ptr<File>* out);
  void close_file(File* file);

  // The ioctl ABI gate (kmd_ioctl.cc): drm_ioctl() rules, then the handler. 0 or a negative
  // errno, like the kernel's ioctl return.
  long ioctl(File* file, unsigned long cmd, void* arg);

  // mmap support: resolves a fake offset of `file` into a DRAM offset and a reference that
  // keeps the memory alive while mapped. 0 or a positive errno.
  int mmap_resolve(File* file, uint64_t offset, uint64_t length, uint64_t* out_phys,
                   std::shared_ptr<BoMem>* out_ref);
  void mmap_release(std::shared_ptr<BoMem> ref);
  // poll(): 1 if a job of `file` ended since the last poll, else waits until deadline; 0 on
  // timeout; negative errno (ENODEV).
  int poll_file(File* file, int timeout_ms);

  int memfd() const { return memfd_; }

  // Test and tool controls (kmd.h).
  void inject(const FaultRule& rule);
  void clear_faults();
  void unplug();
  void set_hang_timeout_ms(uint32_t ms);
  Stats stats();
  bool unplugged();

  // Called from BoMem/AddressSpace destructors, device lock held.
  void free_bo_locked(BoMem* bo);
  void free_as_locked(AddressSpace* as);

 private:
  friend class IoctlGate;
  KDevice(std::string name, uint32_t platform);
  int init(const DeviceFactory& make);

  // Jobs and scheduling.
  bool check_fault_locked(Fault f);
  void dispatch_locked();
  bool job_ready_locked(const Job& job, bool* failed_dep) const;
  void write_job_locked(Ring& ring, uint32_t q, const std::shared_ptr<Job>& job);
  void ring_doorbell_locked(uint32_t q);
  void write_doorbell_hw_locked(uint32_t q);  // both locks held
  void write_posted_doorbells_locked();       // mu_ held; takes hw_mu_ when one is posted
  void end_job_locked(Job& job, uint32_t status, uint32_t device_error, uint64_t error_addr,
                      uint64_t device_cycles);
  void abort_context_jobs_locked(Context& ctx);
  void destroy_context_locked(const std::shared_ptr<Context>& ctx);
  void handle_irq_locked();
  void handle_hang_locked();
  void reset_locked(Job* guilty, uint32_t status, uint32_t device_error, uint64_t error_addr);
  void program_device_locked();
  void unplug_locked();
  bool device_has_work_hw_locked();
  void thread_main();
  // Wakes the device thread: bumps kicks_ (which it polls while spinning) and notifies cv_dev_.
  void kick_device_locked();
  // The bounded spin before a sleep (NPU_WAIT_SPIN_US, docs/architecture.md §6.3): with the
  // device lock released, polls `counter` until it differs from `seen` or `until` passes.
  // Only an early look: the caller re-checks its condition under the lock and then sleeps as
  // it would have without the spin, so results, ordering and wake conditions are unchanged.
  void spin_until(std::unique_lock<std::mutex>& lk, const std::atomic<uint64_t>& counter,
                  uint64_t seen, Clock::time_point until);
  // Takes the device lock `lk` (not held) as std::mutex::lock does, but polls try_lock for up
  // to NPU_WAIT_SPIN_US first: the lock is held for microseconds at a time, and a contended
  // std::mutex puts the thread to sleep in the kernel, so that the holder's unlock must wake
  // it (a futex syscall and a reschedule: the wake-ups the spin avoids).
  void lock_spinning(std::unique_lock<std::mutex>& lk);
  // Hybrid waiting (§6.6): until when a WAIT for `seq` should first sleep, shortly before the
  // job's expected end (Context::solo_ns), with `margin` set to how long before that end the
  // nap ends; the epoch when it should not nap (not the context's solo job, no estimate yet,
  // a job short against the spin bound, or jobs too irregular).
  Clock::time_point nap_until_locked(const Context& ctx, uint64_t seq,
                                     Clock::duration* margin) const;
  // A WAIT's sleep on its context until woken by the job's end (or anything that ends it) or
  // `until`; counted in Stats::wait_sleeps.
  void sleep_in_wait_locked(Context& ctx, uint64_t seq, std::unique_lock<std::mutex>& lk,
                            Clock::time_point until);

  // Handlers (kmd_ioctl.cc).
  int do_get_param(File& f, void* data);
  int do_query(File& f, void* data);
  int do_bo_create(File& f, void* data);
  int do_bo_info(File& f, void* data);
  int do_bo_sync(File& f, void* data);
  int do_bo_destroy(File& f, void* data);
  int do_gem_close(File& f, void* data);
  int do_ctx_create(File& f, void* data);
  int do_ctx_destroy(File& f, void* data);
  int do_submit(File& f, void* data);
  int do_wait(File& f, void* data, std::unique_lock<std::mutex>& lk);
  int do_ctx_query(File& f, void* data);
  int do_perf(File& f, void* data);
  int do_reg_read(File& f, void* data);
  int do_reg_write(File& f, void* data);
  int do_reset(File& f, void* data);
  int do_version(File& f, void* data);
  int destroy_handle_locked(File& f, uint32_t handle);
  uint32_t isa_version_locked() const;
  uint32_t fw_version_locked() const;

  const std::string name_;
  const uint32_t platform_;

  std::mutex mu_;
  std::condition_variable cv_dev_;   // wakes the device thread
  std::condition_variable cv_wait_;  // wakes WAIT and poll
  // While set (by the device thread around its interrupt handling), end_job_locked leaves the
  // wake-up of a job's WAITs to the device thread, which wakes them after releasing mu_: a
  // WAIT woken under mu_ would only sleep again on it (one more wake-up per job).
  bool defer_wakeups_ = false;
  std::vector<std::shared_ptr<Context>> deferred_wakeups_;
  std::atomic<uint64_t> kicks_{0};   // bumped by kick_device_locked
  // How long a WAIT, and the device thread once idle, poll before sleeping: a job that ends
  // within it is seen without a cross-thread wake-up (tens of microseconds on an idle VM).
  std::chrono::microseconds wait_spin_{kDefaultWaitSpinUs};
  std::mutex hw_mu_;
  std::unique_ptr<sim::Device> sim_;

  int memfd_ = -1;
  std::byte* dram_ = nullptr;
  uint64_t dram_size_ = 0;
  RangeAllocator phys_;  // DRAM pages
  uint64_t fault_pt_ = 0;  // an all-invalid page table, for injected page faults

  // Cached at init (read-only registers).
  uint32_t device_id_ = 0;
  uint32_t isa_version_ = 0;
  uint32_t array_dim_ = 0;
  uint32_t num_queues_ = 0;
  uint64_t fingerprint_ = 0;
  uint32_t act_sp_rows_ = 0, wgt_sp_tiles_ = 0, acc_sp_rows_ = 0;

  std::vector<Ring> rings_;
  uint32_t jobs_in_rings_ = 0;
  std::map<uint32_t, std::weak_ptr<Context>> contexts_;  // every live context, by id
  uint32_t next_ctx_id_ = 1;
  uint32_t context_count_ = 0;
  uint32_t open_files_ = 0;
  std::map<uint64_t, std::pair<File*, uint32_t>> mmap_offsets_;
  uint64_t next_mmap_offset_ = kMmapOffsetStart;

  // Hang detection.
  Clock::time_point last_progress_ = Clock::now();
  uint64_t progress_sig_ = 0;
  std::shared_ptr<Job> hung_job_;  // device stuck on this job (injected hang)
  Clock::time_point hung_since_;
  bool stalled_ = false;           // device idle although jobs are in rings
  Clock::time_point stalled_since_;
  std::chrono::milliseconds hang_timeout_{2000};
  uint64_t last_fence_cycle_ = 0;

  // Faults.
  std::vector<ArmedFault> faults_;
  bool isa_mismatch_ = false;
  bool fw_mismatch_ = false;
  bool unplugged_ = false;

  Stats stats_;
  bool stop_ = false;
  std::thread thread_;
};

// Emulated copy_from_user/copy_to_user: EFAULT (positive) instead of a crash on a bad
// pointer, like the kernel.
// A range on the calling thread's live stack is copied plainly; any other through a checked
// system call, which checked_user_copies() counts (process-wide).
int copy_from_user(void* dst, uint64_t src, size_t n);
int copy_to_user(uint64_t dst, const void* src, size_t n);
uint64_t checked_user_copies();

// The process-wide registry (kmd_registry.cc).
int open_device(std::string_view name, bool privileged, std::shared_ptr<File>* out);

}  // namespace npu::driver::kmd
