// Device instance of the kernel-driver model: DRAM, rings, scheduling, the device thread
// (interrupts, progress watchdog), reset, unplug and fault injection.
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "npu/driver/log.h"
#include "kmd_internal.h"
#include "uapi/drm/npu_accel.h"

namespace npu::driver::kmd {

namespace {
constexpr uint64_t kPage = hw::kPageBytes;
constexpr uint64_t kPtBytes = (1ull << hw::kVaBits) / hw::kPageBytes * 4;  // 256 KiB
constexpr uint64_t kPtPages = kPtBytes / kPage;
constexpr uint64_t kVaPages = (1ull << hw::kVaBits) / hw::kPageBytes;

void put32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }

// A module-parameter-like environment variable: a whole number in [lo, hi]. Unset: false. Set
// but malformed or out of range: reported (it must not pass silently) and false, so the
// caller keeps its default.
bool env_number(const char* name, long lo, long hi, const char* unit, long fallback, long* out) {
  const char* t = std::getenv(name);
  if (!t) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(t, &end, 10);
  if (end == t || *end != '\0' || errno != 0 || v < lo || v > hi) {
    log::notice(log::kFault, "ignoring %s=%s: expected %s %ld..%ld; using %ld", name, t, unit,
                lo, hi, fallback);
    return false;
  }
  *out = v;
  return true;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
void RangeAllocator::init(uint64_t first, uint64_t count) {
  free_.clear();
  free_[first] = count;
  free_total_ = count;
}

bool RangeAllocator::alloc(uint64_t count, uint64_t* out_first) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < count) continue;
    *out_first = it->first;
    uint64_t rest = it->second - count;
    uint64_t next = it->first + count;
    free_.erase(it);
    if (rest > 0) free_[next] = rest;
    free_total_ -= count;
    return true;
  }
  return false;
}

void RangeAllocator::release(uint64_t first, uint64_t count) {
  auto [it, inserted] = free_.emplace(first, count);
  (void)inserted;
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == first) {
      prev->second += count;
      free_.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  free_total_ += count;
}

AddressSpace::~AddressSpace() { dev->free_as_locked(this); }
BoMem::~BoMem() {
  if (dev != nullptr) dev->free_bo_locked(this);
}

void KDevice::free_bo_locked(BoMem* bo) {
  const uint64_t pages = bo->size / kPage;
  if (bo->as) {
    for (uint64_t i = 0; i < pages; ++i) {
      put32(dram_ + bo->as->pt_phys + 4 * ((bo->va / kPage) + i), 0);
    }
    bo->as->va.release(bo->va / kPage, pages);
  }
  // Hand the pages back zeroed, as a kernel would before reusing them.
  fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(bo->phys),
            static_cast<off_t>(bo->size));
  phys_.release(bo->phys / kPage, pages);
  NPU_LOG_AT(kMm, "%s: free bo phys=%#llx size=%#llx", name_.c_str(),
           static_cast<unsigned long long>(bo->phys), static_cast<unsigned long long>(bo->size));
}

void KDevice::free_as_locked(AddressSpace* as) {
  fallocate(memfd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            static_cast<off_t>(as->pt_phys), static_cast<off_t>(kPtBytes));
  phys_.release(as->pt_phys / kPage, kPtPages);
}

// ---------------------------------------------------------------------------------------------
KDevice::KDevice(std::string name, uint32_t platform)
    : name_(std::move(name)), platform_(platform) {}

int KDevice::create(std::string name, uint32_t platform, const DeviceFactory& make,
                    std::shared_ptr<KDevice>* out) {
  std::shared_ptr<KDevice> dev(new KDevice(std::move(name), platform));
  int err = dev->init(make);
  if (err != 0) return err;
  *out = std::move(dev);
  return 0;
}

int KDevice::init(const DeviceFactory& make) {
  dram_size_ = hw::kDramBytes;
  memfd_ = memfd_create(("npu-dram-" + name_).c_str(), MFD_CLOEXEC);
  if (memfd_ < 0) return errno;
  if (ftruncate(memfd_, static_cast<off_t>(dram_size_)) != 0) return errno;
  void* p = ::mmap(nullptr, dram_size_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
  if (p == MAP_FAILED) return errno;
  dram_ = static_cast<std::byte*>(p);
  sim_ = make(std::span<std::byte>(dram_, dram_size_));
  if (!sim_) return ENODEV;

  device_id_ = sim_->read_reg(hw::reg::ID);
  if (device_id_ != hw::kDeviceId) return ENODEV;
  isa_version_ = sim_->read_reg(hw::reg::VERSION);
  const uint32_t config = sim_->read_reg(hw::reg::CONFIG);
  array_dim_ = config & 0xFF;
  num_queues_ = (config >> 8) & 0xF;
  if (num_queues_ == 0 || num_queues_ > hw::kNumQueues) return ENODEV;
  fingerprint_ = sim::read_fingerprint(*sim_);
  act_sp_rows_ = sim_->read_reg(hw::reg::ACT_SP_ROWS);
  wgt_sp_tiles_ = sim_->read_reg(hw::reg::WGT_SP_TILES);
  acc_sp_rows_ = sim_->read_reg(hw::reg::ACC_SP_ROWS);

  // DRAM layout: page 0 holds the rings, the next kPtPages the fault page table (all
  // invalid), the rest is allocated to page tables and buffer objects.
  rings_.resize(num_queues_);
  for (uint32_t q = 0; q < num_queues_; ++q) {
    rings_[q].phys = q * kRingBytes;
    rings_[q].size = kRingBytes;
  }
  fault_pt_ = kPage;
  phys_.init(1 + kPtPages, dram_size_ / kPage - 1 - kPtPages);

  long v = 0;
  if (env_number("NPU_KMD_HANG_TIMEOUT_MS", 1, kMaxHangTimeoutMs, "milliseconds",
                 static_cast<long>(hang_timeout_.count()), &v))
    hang_timeout_ = std::chrono::milliseconds(v);
  if (env_number("NPU_WAIT_SPIN_US", 0, kMaxWaitSpinUs, "microseconds (0 = never spin)",
                 kDefaultWaitSpinUs, &v))
    wait_spin_ = std::chrono::microseconds(v);
  if (const char* spec = std::getenv("NPU_FAULT")) {
    std::vector<NamedFaultRule> rules;
    std::string error;
    if (parse_faults(spec, &rules, &error) != 0) {
      log::notice(log::kFault, "ignoring NPU_FAULT: %s", error.c_str());
    } else {
      for (const auto& r : rules) {
        if (r.device.empty() || r.device == name_) inject(r.rule);
      }
    }
  }

  {
    std::lock_guard<std::mutex> lk(mu_);
    std::lock_guard<std::mutex> hw(hw_mu_);
    program_device_locked();
  }
  thread_ = std::thread([this] {
    // Named for top -H, perf --sort comm and gdb (the kernel keeps 15 characters).
    pthread_setname_np(pthread_self(), ("npu-dev:" + name_).substr(0, 15).c_str());
    thread_main();
  });
  NPU_LOG_AT(kReset, "%s: probed id=%#x isa=%#x dim=%u queues=%u", name_.c_str(), device_id_,
           isa_version_, array_dim_, num_queues_);
  return 0;
}

KDevice::~KDevice() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    kick_device_locked();
  }
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& r : rings_) {
      r.jobs.clear();
      r.withheld_hang.reset();
    }
    hung_job_.reset();
  }
  {
    std::lock_guard<std::mutex> hw(hw_mu_);
    sim_.reset();
  }
  if (dram_ != nullptr) ::munmap(dram_, dram_size_);
  if (memfd_ >= 0) ::close(memfd_);
}

// Resets the device and programs rings, interrupt mask and ENABLE. Both locks held.
void KDevice::program_device_locked() {
  sim_->write_reg(hw::reg::CONTROL, hw::bits::CONTROL_RESET);
  for (uint32_t q = 0; q < num_queues_; ++q) {
    Ring& r = rings_[q];
    std::memset(dram_ + r.phys, 0, r.size);
    r.tail = 0;
    r.doorbell = 0;
    r.doorbell_posted = false;
    sim_->write_reg(hw::reg::RING_BASE(q), static_cast<uint32_t>(r.phys));
    sim_->write_reg(hw::reg::RING_SIZE(q), r.size);
  }
  sim_->write_reg(hw::reg::IRQ_MASK, hw::bits::IRQ_ERROR | ((1u << num_queues_) - 1));
  sim_->write_reg(hw::reg::CONTROL, hw::bits::CONTROL_ENABLE);
  last_fence_cycle_ = sim_->cycle();
}

// ---------------------------------------------------------------------------------------------
int KDevice::open_file(bool privileged, std::shared_ptr<File>* out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (unplugged_) return ENODEV;
  if (open_files_ >= kMaxFiles) return EMFILE;
  uint64_t pt_page = 0;
  if (!phys_.alloc(kPtPages, &pt_page)) return ENOMEM;
  auto f = std::make_shared<File>();
  f->dev = shared_from_this();
  f->privileged = privileged;
  f->as = std::make_shared<AddressSpace>(this, pt_page * kPage);
  std::memset(dram_ + f->as->pt_phys, 0, kPtBytes);
  f->as->va.init(1, kVaPages - 1);  // VA page 0 stays invalid: a null NPU pointer faults
  ++open_files_;
  *out = std::move(f);
  return 0;
}

void KDevice::close_file(File* file) {
  std::lock_guard<std::mutex> lk(mu_);
  if (file->closed) return;
  file->closed = true;
  auto contexts = std::move(file->contexts);
  for (auto& [id, ctx] : contexts) destroy_context_locked(ctx);
  contexts.clear();
  for (auto it = mmap_offsets_.begin(); it != mmap_offsets_.end();) {
    it = it->second.first == file ? mmap_offsets_.erase(it) : std::next(it);
  }
  file->handles.clear();
  file->as.reset();
  --open_files_;
  dispatch_locked();
  cv_wait_.notify_all();
}

// ---------------------------------------------------------------------------------------------
bool KDevice::check_fault_locked(Fault f) {
  bool fire = false;
  for (auto it = faults_.begin(); it != faults_.end();) {
    if (it->rule.fault != f) {
      ++it;
      continue;
    }
    if (it->rule.skip > 0) {
      --it->rule.skip;
      ++it;
      continue;
    }
    fire = true;
    if (!it->forever && --it->rule.count == 0) {
      it = faults_.erase(it);
    } else {
      ++it;
    }
  }
  if (fire) NPU_LOG_AT(kFault, "%s: injected fault %u fires", name_.c_str(), static_cast<unsigned>(f));
  return fire;
}

void KDevice::inject(const FaultRule& rule) {
  std::lock_guard<std::mutex> lk(mu_);
  if (rule.fault == Fault::kIsaMismatch) {
    isa_mismatch_ = true;
    return;
  }
  if (rule.fault == Fault::kFwMismatch) {
    fw_mismatch_ = true;
    return;
  }
  faults_.push_back(ArmedFault{rule, rule.count == 0});
}

void KDevice::clear_faults() {
  std::lock_guard<std::mutex> lk(mu_);
  faults_.clear();
  isa_mismatch_ = false;
  fw_mismatch_ = false;
}

void KDevice::set_hang_timeout_ms(uint32_t ms) {
  std::lock_guard<std::mutex> lk(mu_);
  hang_timeout_ = std::chrono::milliseconds(ms);
  kick_device_locked();
}

uint32_t KDevice::isa_version_locked() const {
  return isa_mismatch_ ? isa_version_ + (1u << 16) : isa_version_;
}
uint32_t KDevice::fw_version_locked() const {
  return fw_mismatch_ ? kFwVersion + (1u << 16) : kFwVersion;
}

Stats KDevice::stats() {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s = stats_;
  s.open_files = open_files_;
  s.contexts = context_count_;
  s.free_dram = phys_.free_units() * kPage;
  s.checked_user_copies = checked_user_copies();
  return s;
}

bool KDevice::unplugged() {
  std::lock_guard<std::mutex> lk(mu_);
  return unplugged_;
}

void KDevice::unplug() {
  std::lock_guard<std::mutex> lk(mu_);
  unplug_locked();
}

void KDevice::unplug_locked() {
  if (unplugged_) return;
  NPU_LOG_AT(kReset, "%s: unplugged", name_.c_str());
  unplugged_ = true;
  for (auto& r : rings_) {
    for (auto& job : r.jobs) {
      if (!job->ended) end_job_locked(*job, DRM_NPU_JOB_ABORTED, 0, 0, 0);
    }
    if (r.withheld_hang && !r.withheld_hang->ended) {
      end_job_locked(*r.withheld_hang, DRM_NPU_JOB_ABORTED, 0, 0, 0);
    }
  }
  for (auto& [id, weak] : contexts_) {
    if (auto ctx = weak.lock()) {
      abort_context_jobs_locked(*ctx);
      ctx->state = DRM_NPU_CTX_STATE_LOST;
    }
  }
  for (auto& [id, weak] : contexts_) {
    if (auto ctx = weak.lock()) ctx->cv_wait.notify_all();
  }
  kick_device_locked();
  cv_wait_.notify_all();
}

// ---------------------------------------------------------------------------------------------
void KDevice::end_job_locked(Job& job, uint32_t status, uint32_t device_error,
                             uint64_t error_addr, uint64_t device_cycles) {
  if (job.ended) {
    ++stats_.jobs_double_end;
    return;
  }
  job.ended = true;
  Context& ctx = *job.ctx;
  ctx.results[job.seq] = JobEnd{status, device_error, error_addr, device_cycles};
  while (ctx.results.size() > kResultsKept) {
    ctx.pruned_upto = ctx.results.begin()->first;
    ctx.results.erase(ctx.results.begin());
  }
  ctx.last_ended = std::max(ctx.last_ended, job.seq);
  if (job.seq == ctx.solo_seq) {
    ctx.solo_seq = 0;
    if (status == DRM_NPU_JOB_SUCCESS) ctx.learn_solo_time(Clock::now() - ctx.solo_submitted);
  }
  --ctx.unended;
  if (ctx.file != nullptr) ++ctx.file->events;
  ++stats_.jobs_ended;
  switch (status) {
    case DRM_NPU_JOB_SUCCESS: ++stats_.jobs_success; break;
    case DRM_NPU_JOB_ABORTED: ++stats_.jobs_aborted; break;
    case DRM_NPU_JOB_TIMEOUT: ++stats_.jobs_timeout; break;
    case DRM_NPU_JOB_PAGE_FAULT: ++stats_.jobs_page_fault; break;
    default: ++stats_.jobs_device_error; break;
  }
  NPU_LOG_AT(kJob, "%s: ctx %u seq %llu ends status %u err %u addr %#llx cycles %llu",
           name_.c_str(), ctx.id, static_cast<unsigned long long>(job.seq), status,
           device_error, static_cast<unsigned long long>(error_addr),
           static_cast<unsigned long long>(device_cycles));
  ctx.ends.fetch_add(1, std::memory_order_release);
  if (ctx.waited.count(job.seq) != 0) {
    if (defer_wakeups_) {
      deferred_wakeups_.push_back(job.ctx);
    } else {
      ctx.cv_wait.notify_all();
    }
  }
  cv_wait_.notify_all();  // poll()
}

// Ends every job of ctx that has not ended: queued ones leave the queue; jobs already in a
// ring stay there (the device may be running them) and are retired silently at their fence.
void KDevice::abort_context_jobs_locked(Context& ctx) {
  for (auto& job : ctx.queued) end_job_locked(*job, DRM_NPU_JOB_ABORTED, 0, 0, 0);
  ctx.queued.clear();
  for (auto& r : rings_) {
    for (auto& job : r.jobs) {
      if (job->ctx.get() == &ctx && !job->ended) end_job_locked(*job, DRM_NPU_JOB_ABORTED, 0, 0, 0);
    }
    if (r.withheld_hang && r.withheld_hang->ctx.get() == &ctx && !r.withheld_hang->ended) {
      end_job_locked(*r.withheld_hang, DRM_NPU_JOB_ABORTED, 0, 0, 0);
    }
  }
}

void KDevice::destroy_context_locked(const std::shared_ptr<Context>& ctx) {
  abort_context_jobs_locked(*ctx);
  auto& list = rings_[ctx->queue].contexts;
  list.erase(std::remove(list.begin(), list.end(), ctx.get()), list.end());
  contexts_.erase(ctx->id);
  ctx->file = nullptr;
  --context_count_;
}

// ---------------------------------------------------------------------------------------------
bool KDevice::job_ready_locked(const Job& job, bool* failed_dep) const {
  *failed_dep = false;
  for (const auto& [dep, seq] : job.deps) {
    if (seq <= dep->pruned_upto) continue;
    auto it = dep->results.find(seq);
    if (it == dep->results.end()) return false;
    if (it->second.status != DRM_NPU_JOB_SUCCESS) *failed_dep = true;
  }
  return true;
}

void KDevice::write_job_locked(Ring& ring, uint32_t q, const std::shared_ptr<Job>& job) {
  job->queue = q;
  job->hw_seq = ring.next_hw_seq++;
  if (ring.next_hw_seq == 0) ring.next_hw_seq = 1;
  const uint32_t pt = job->inject_page_fault ? static_cast<uint32_t>(fault_pt_)
                                             : static_cast<uint32_t>(job->as->pt_phys);
  const uint32_t exec[8] = {static_cast<uint32_t>(hw::RingOpcode::kExec), job->cmd_va,
                            job->cmd_size, pt, job->ctx->id, 0, 0, 0};
  const uint32_t fence[8] = {static_cast<uint32_t>(hw::RingOpcode::kFence), job->hw_seq,
                             0, 0, 0, 0, 0, 0};
  std::memcpy(dram_ + ring.phys + ring.tail, exec, sizeof(exec));
  ring.tail = (ring.tail + hw::kRingEntryBytes) % ring.size;
  std::memcpy(dram_ + ring.phys + ring.tail, fence, sizeof(fence));
  ring.tail = (ring.tail + hw::kRingEntryBytes) % ring.size;
  job->in_ring = true;
  ++jobs_in_rings_;
  NPU_LOG_AT(kJob, "%s: ctx %u seq %llu -> queue %u hw_seq %u va %#x size %u%s%s", name_.c_str(),
           job->ctx->id, static_cast<unsigned long long>(job->seq), q, job->hw_seq, job->cmd_va,
           job->cmd_size, job->inject_hang ? " [hang]" : "",
           job->inject_page_fault ? " [page fault]" : "");
  if (job->inject_hang) {
    // The device will get stuck on this job: its entries are in the ring but the doorbell
    // never covers them, and the device thread freezes once it would run it.
    ring.withheld_hang = job;
    kick_device_locked();  // no doorbell will wake the device thread for this one
  } else {
    ring.jobs.push_back(job);
  }
}

void KDevice::ring_doorbell_locked(uint32_t q) {
  Ring& ring = rings_[q];
  uint32_t target = ring.tail;
  if (ring.withheld_hang) {
    // Never ring past the hung job's entries (they are the last written ones).
    target = (ring.tail + ring.size - 2 * hw::kRingEntryBytes) % ring.size;
  }
  if (target == ring.doorbell) return;
  ring.doorbell = target;
  stalled_ = false;
  last_progress_ = Clock::now();
  // While the device thread runs the device it holds hw_mu_, for up to a slice (milliseconds
  // on the RTL). Waiting for it here would hold the device lock meanwhile: every other ioctl
  // would queue behind this one, and the device thread, done with its run, would spin for the
  // device lock until this thread had woken up. The doorbell is posted instead, as an MMIO
  // write is, and the device thread writes it before it looks at the device again (and before
  // its next run); the device sees it a slice later at most, which the cycle counts show.
  std::unique_lock<std::mutex> hw(hw_mu_, std::try_to_lock);
  if (hw.owns_lock()) {
    write_doorbell_hw_locked(q);
  } else {
    ring.doorbell_posted = true;
    ++stats_.doorbells_posted;
  }
  kick_device_locked();
}

void KDevice::write_doorbell_hw_locked(uint32_t q) {
  Ring& ring = rings_[q];
  const uint64_t now_cycle = sim_->cycle();
  for (auto& job : ring.jobs) {
    if (job->doorbell_cycle == 0) job->doorbell_cycle = now_cycle + 1;  // +1: 0 means unset
  }
  sim_->write_reg(hw::reg::RING_TAIL(q), ring.doorbell);
  ring.doorbell_posted = false;
}

void KDevice::write_posted_doorbells_locked() {
  // A look at a few rings under mu_; hw_mu_ only when one has a doorbell posted.
  if (std::none_of(rings_.begin(), rings_.end(), [](const Ring& r) { return r.doorbell_posted; }))
    return;
  std::lock_guard<std::mutex> hw(hw_mu_);
  for (uint32_t q = 0; q < num_queues_; ++q)
    if (rings_[q].doorbell_posted) write_doorbell_hw_locked(q);
}

// Moves ready jobs from the context queues into the ring windows, round robin among the
// contexts of each priority, and rings the doorbells.
void KDevice::dispatch_locked() {
  if (unplugged_) return;  // while hung the driver keeps filling rings, as a real one would
  for (uint32_t q = 0; q < num_queues_; ++q) {
    Ring& ring = rings_[q];
    bool wrote = false;
    while (!ring.withheld_hang && ring.jobs.size() < kRingWindow && !ring.contexts.empty()) {
      bool progressed = false;
      for (size_t n = 0; n < ring.contexts.size(); ++n) {
        Context* ctx = ring.contexts[(ring.rr + n) % ring.contexts.size()];
        if (ctx->queued.empty()) continue;
        auto job = ctx->queued.front();
        bool failed_dep = false;
        if (!job_ready_locked(*job, &failed_dep)) continue;
        ctx->queued.pop_front();
        if (failed_dep) {
          end_job_locked(*job, DRM_NPU_JOB_ABORTED, 0, 0, 0);
        } else {
          write_job_locked(ring, q, job);
          wrote = true;
        }
        ring.rr = (ring.rr + n + 1) % ring.contexts.size();
        progressed = true;
        break;
      }
      if (!progressed) break;
    }
    if (wrote) ring_doorbell_locked(q);
  }
}

// ---------------------------------------------------------------------------------------------
// Interrupt handler: fences first (jobs that completed before an error), then the error.
void KDevice::handle_irq_locked() {
  std::unique_lock<std::mutex> hw(hw_mu_);
  const uint32_t irq = sim_->read_reg(hw::reg::IRQ_STATUS);
  sim_->write_reg(hw::reg::IRQ_STATUS, irq);
  const uint64_t now_cycle = sim_->cycle();
  NPU_LOG_AT(kIrq, "%s: irq %#x at cycle %llu", name_.c_str(), irq,
           static_cast<unsigned long long>(now_cycle));
  for (uint32_t q = 0; q < num_queues_; ++q) {
    if ((irq & (1u << q)) == 0) continue;
    const uint32_t completed = sim_->read_reg(hw::reg::COMPLETED_SEQ(q));
    Ring& ring = rings_[q];
    while (!ring.jobs.empty() &&
           static_cast<int32_t>(ring.jobs.front()->hw_seq - completed) <= 0) {
      auto job = ring.jobs.front();
      ring.jobs.pop_front();
      --jobs_in_rings_;
      job->in_ring = false;
      ++ring.completed_total;
      const uint64_t start = std::max(job->doorbell_cycle - 1, last_fence_cycle_);
      if (!job->ended) {
        end_job_locked(*job, DRM_NPU_JOB_SUCCESS, 0, 0, now_cycle - std::min(start, now_cycle));
      }
      last_fence_cycle_ = now_cycle;
    }
  }
  last_progress_ = Clock::now();
  if (irq & hw::bits::IRQ_ERROR) {
    const uint32_t code = sim_->read_reg(hw::reg::ERROR_CODE);
    const uint32_t addr = sim_->read_reg(hw::reg::ERROR_ADDR);
    const uint32_t q = sim_->read_reg(hw::reg::ERROR_QUEUE);
    hw.unlock();
    std::shared_ptr<Job> guilty;
    if (q < num_queues_ && !rings_[q].jobs.empty()) guilty = rings_[q].jobs.front();
    NPU_LOG_AT(kIrq, "%s: device error %u addr %#x queue %u", name_.c_str(), code, addr, q);
    const uint32_t status = code == static_cast<uint32_t>(hw::ErrorCode::kPageFault)
                                ? DRM_NPU_JOB_PAGE_FAULT
                                : DRM_NPU_JOB_DEVICE_ERROR;
    reset_locked(guilty.get(), status, code, addr);
    return;
  }
  hw.unlock();
  dispatch_locked();
}

void KDevice::handle_hang_locked() {
  std::shared_ptr<Job> guilty = hung_job_;
  if (!guilty) {
    // Lowest queue with work is the one the device was running.
    for (auto& r : rings_) {
      if (!r.jobs.empty()) {
        guilty = r.jobs.front();
        break;
      }
    }
  }
  NPU_LOG_AT(kReset, "%s: no progress for %lld ms: hang", name_.c_str(),
           static_cast<long long>(hang_timeout_.count()));
  reset_locked(guilty.get(), DRM_NPU_JOB_TIMEOUT, 0, 0);
}

// Resets the device. The guilty job (if any) ends with `status`; every other job in a ring
// ends ABORTED; jobs still in context queues survive and run after the reset. A page fault
// bans the guilty context.
void KDevice::reset_locked(Job* guilty, uint32_t status, uint32_t device_error,
                           uint64_t error_addr) {
  ++stats_.resets;
  // Shared: clearing the rings can drop the last reference to a context its file destroyed.
  std::vector<std::shared_ptr<Context>> affected;
  if (guilty != nullptr) {
    affected.push_back(guilty->ctx);
    if (!guilty->ended) end_job_locked(*guilty, status, device_error, error_addr, 0);
    if (status == DRM_NPU_JOB_PAGE_FAULT) {
      Context& ctx = *guilty->ctx;
      ctx.state = DRM_NPU_CTX_STATE_BANNED;
      ctx.fault_code = device_error;
      ctx.fault_addr = error_addr;
      abort_context_jobs_locked(ctx);
    }
  }
  for (auto& r : rings_) {
    for (auto& job : r.jobs) {
      affected.push_back(job->ctx);
      if (!job->ended) end_job_locked(*job, DRM_NPU_JOB_ABORTED, 0, 0, 0);
      job->in_ring = false;
    }
    if (r.withheld_hang) {
      affected.push_back(r.withheld_hang->ctx);
      if (!r.withheld_hang->ended) end_job_locked(*r.withheld_hang, DRM_NPU_JOB_ABORTED, 0, 0, 0);
      r.withheld_hang.reset();
    }
    r.jobs.clear();
  }
  std::sort(affected.begin(), affected.end());
  affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
  for (const auto& c : affected) ++c->reset_count;
  jobs_in_rings_ = 0;
  hung_job_.reset();
  stalled_ = false;
  {
    std::lock_guard<std::mutex> hw(hw_mu_);
    program_device_locked();
  }
  last_progress_ = Clock::now();
  NPU_LOG_AT(kReset, "%s: reset done (#%llu)", name_.c_str(),
           static_cast<unsigned long long>(stats_.resets));
  dispatch_locked();
  cv_wait_.notify_all();
}

// Whether the device will make progress on its own: enabled, no error, some ring non-empty.
bool KDevice::device_has_work_hw_locked() {
  const uint32_t status = sim_->read_reg(hw::reg::STATUS);
  if ((status & hw::bits::STATUS_ERROR) || !(status & hw::bits::STATUS_ENABLED)) {
    return (sim_->read_reg(hw::reg::IRQ_STATUS) & sim_->read_reg(hw::reg::IRQ_MASK)) != 0;
  }
  for (uint32_t q = 0; q < num_queues_; ++q) {
    if (sim_->read_reg(hw::reg::RING_HEAD(q)) != sim_->read_reg(hw::reg::RING_TAIL(q))) return true;
  }
  return (sim_->read_reg(hw::reg::IRQ_STATUS) & sim_->read_reg(hw::reg::IRQ_MASK)) != 0;
}

void KDevice::kick_device_locked() {
  kicks_.fetch_add(1, std::memory_order_release);
  cv_dev_.notify_all();
}

void KDevice::spin_until(std::unique_lock<std::mutex>& lk, const std::atomic<uint64_t>& counter,
                         uint64_t seen, Clock::time_point until) {
  lk.unlock();
  // Yield between short bursts of pause: on a machine with fewer cores than spinners (16
  // requests in flight on 2 cores) the thread that would end the spin gets the CPU.
  while (counter.load(std::memory_order_acquire) == seen && Clock::now() < until) {
    for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    std::this_thread::yield();
  }
  // Take the lock back without sleeping on it either: whoever bumped the counter (the device
  // thread ending the job, a submitter ringing the doorbell) still holds it for a moment.
  lock_spinning(lk);
}

void KDevice::lock_spinning(std::unique_lock<std::mutex>& lk) {
  if (lk.try_lock()) return;
  const auto until = Clock::now() + wait_spin_;
  do {
    for (int i = 0; i < 16; ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    if (lk.try_lock()) return;
  } while (Clock::now() < until);
  lk.lock();
}

// The device thread: runs the simulator while jobs are in the rings, services interrupts and
// watches for lack of progress. Blocks on cv_dev_ when there is nothing to do.
void KDevice::thread_main() {
  std::unique_lock<std::mutex> lk(mu_);
  bool spun = false;  // this idle period's spin is spent
  bool idle = false;  // in an idle period, which began at idle_since
  Clock::time_point idle_since;
  // This idle period's spin (adaptive polling, as QEMU's event loop does): 1.5 times the
  // last idle period when that was short, so that the next doorbell of a request loop (after
  // the host's work between two requests) finds this thread awake; back to the spin bound
  // after a long one. Never past kMaxIdleSpin (or the spin bound, when that is longer).
  Clock::duration idle_spin = wait_spin_;
  std::vector<std::shared_ptr<Context>> wakeups;  // deferred_wakeups_, taken out to notify
  const Clock::duration idle_spin_cap = std::max<Clock::duration>(wait_spin_, kMaxIdleSpin);
  while (!stop_) {
    if (unplugged_) {
      cv_dev_.wait(lk, [&] { return stop_; });
      break;
    }
    const bool withheld = std::any_of(rings_.begin(), rings_.end(),
                                      [](const Ring& r) { return r.withheld_hang != nullptr; });
    if (jobs_in_rings_ == 0 && !withheld) {
      // Idle: spin once before sleeping, so a doorbell rung soon after the last job ended
      // (the next request of a loop) finds this thread awake.
      if (!idle) {
        idle = true;
        idle_since = Clock::now();
      }
      if (!spun && wait_spin_.count() > 0) {
        spun = true;
        spin_until(lk, kicks_, kicks_.load(std::memory_order_relaxed), Clock::now() + idle_spin);
        continue;
      }
      cv_dev_.wait(lk);
      continue;
    }
    if (idle) {
      idle = false;
      const Clock::duration gap = Clock::now() - idle_since;
      idle_spin = gap > idle_spin_cap
                      ? wait_spin_
                      : std::clamp<Clock::duration>(gap + gap / 2, wait_spin_, idle_spin_cap);
    }
    spun = false;
    if (hung_job_ || stalled_) {
      const auto deadline = (hung_job_ ? hung_since_ : last_progress_) + hang_timeout_;
      if (Clock::now() >= deadline) {
        handle_hang_locked();
        continue;
      }
      cv_dev_.wait_until(lk, deadline);
      continue;
    }
    write_posted_doorbells_locked();  // posted while another thread held hw_mu_ for a moment
    lk.unlock();
    sim::StopReason reason;
    uint64_t sig = 0;
    {
      std::lock_guard<std::mutex> hw(hw_mu_);
      reason = sim_->run(kSliceCycles);
      sig = sim::read_counter(*sim_, hw::Counter::kInstrs) +
            sim::read_counter(*sim_, hw::Counter::kJobs);
    }
    lock_spinning(lk);  // a WAIT or SUBMIT holds it for a moment: do not sleep on it
    // Doorbells rung during the run: before the device's state is read (an idle device with
    // a posted doorbell has work, not a stall).
    write_posted_doorbells_locked();
    if (stop_ || unplugged_) continue;
    if (reason == sim::StopReason::kInterrupt) {
      defer_wakeups_ = true;
      handle_irq_locked();
      defer_wakeups_ = false;
      if (!deferred_wakeups_.empty()) {
        // The results are recorded (under mu_); a WAIT that has not slept yet finds them, one
        // that has is woken here, after the unlock, and takes mu_ without sleeping on it.
        wakeups.swap(deferred_wakeups_);
        lk.unlock();
        for (const auto& ctx : wakeups) ctx->cv_wait.notify_all();
        wakeups.clear();
        lock_spinning(lk);
      }
      continue;
    }
    if (reason == sim::StopReason::kIdle) {
      bool has_work;
      {
        std::lock_guard<std::mutex> hw(hw_mu_);
        has_work = device_has_work_hw_locked();
      }
      if (has_work) continue;  // a doorbell raced with the run
      // Idle with jobs outstanding: either the device reached a hung job (all lower queues
      // drained), or it is disabled. Either way it makes no progress from here.
      for (auto& r : rings_) {
        if (r.withheld_hang && r.jobs.empty()) {
          hung_job_ = r.withheld_hang;
          break;
        }
      }
      if (!hung_job_) stalled_ = true;
      if (hung_job_) hung_since_ = Clock::now();
      NPU_LOG_AT(kReset, "%s: device idle with jobs outstanding (%s)", name_.c_str(),
               hung_job_ ? "hung job" : "stalled");
      continue;
    }
    // Cycle limit: still busy. Progress = instructions or jobs completed.
    if (sig != progress_sig_) {
      progress_sig_ = sig;
      last_progress_ = Clock::now();
    } else if (Clock::now() - last_progress_ > hang_timeout_) {
      handle_hang_locked();
    }
  }
}

// ---------------------------------------------------------------------------------------------
int KDevice::mmap_resolve(File* file, uint64_t offset, uint64_t length, uint64_t* out_phys,
                          std::shared_ptr<BoMem>* out_ref) {
  std::lock_guard<std::mutex> lk(mu_);
  if (unplugged_) return ENODEV;
  auto it = mmap_offsets_.find(offset);
  if (it == mmap_offsets_.end()) return EINVAL;
  if (it->second.first != file) return EACCES;
  auto h = file->handles.find(it->second.second);
  if (h == file->handles.end()) return EINVAL;
  if (length == 0 || length > h->second->size) return EINVAL;
  *out_phys = h->second->phys;
  *out_ref = h->second;
  return 0;
}

void KDevice::mmap_release(std::shared_ptr<BoMem> ref) {
  std::lock_guard<std::mutex> lk(mu_);
  ref.reset();
}

int KDevice::poll_file(File* file, int timeout_ms) {
  std::unique_lock<std::mutex> lk(mu_);
  auto ready = [&] { return unplugged_ || file->events != file->events_seen; };
  if (timeout_ms < 0) {
    cv_wait_.wait(lk, ready);
  } else {
    cv_wait_.wait_for(lk, std::chrono::milliseconds(timeout_ms), ready);
  }
  if (unplugged_) return -ENODEV;
  if (file->events == file->events_seen) return 0;
  file->events_seen = file->events;
  return 1;
}

}  // namespace npu::driver::kmd
