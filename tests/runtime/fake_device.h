// A scriptable HAL device for scheduler and session tests: buffers in host memory; jobs
// "run" by copying the identity image's input rows to its output (so outputs are exact),
// and end as the test's policy says. A gate holds jobs (in wait) until the test opens it:
// tests synchronise on recorded events, never on sleeps.
#pragma once

#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "npu/hal/api.h"
#include "npu/hw/config.h"

namespace npu::test {

struct FakeJob {
  uint32_t ctx = 0;
  hal::Priority priority = hal::Priority::kNormal;
  uint64_t seq = 0;
  uint8_t marker = 0;  // byte 0 of the job's first buffer (the activations)
  int attempt = 0;     // submissions of this marker so far, from 1
  std::thread::id thread;  // the thread that submitted it
};

class FakeDevice final : public hal::Device, public std::enable_shared_from_this<FakeDevice> {
 public:
  // Decides how a job ends (default: success, 100 cycles).
  using Policy = std::function<hal::JobResult(const FakeJob&)>;

  FakeDevice() {
    info_.spec = "fake";
    info_.node = "fake";
    info_.platform = "functional";
    info_.array_dim = 16;
    info_.fingerprint = hw::fingerprint_for_dim(16);
    info_.isa_version = hw::kIsaVersion;
    info_.clock_mhz = 1000;
    info_.num_queues = 4;
    info_.max_contexts = 64;
    info_.queue_depth = 8;
    info_.page_size = 65536;
  }

  const hal::DeviceInfo& info() const override { return info_; }
  Result<std::shared_ptr<hal::Buffer>> allocate(uint64_t size, hal::BufferUsage usage) override;
  Result<std::shared_ptr<hal::Context>> create_context(hal::Priority priority) override;
  Result<std::vector<uint64_t>> read_counters() override {
    return std::vector<uint64_t>(hw::kNumCounters, 0);
  }

  void set_policy(Policy p) {
    std::lock_guard lock(mu_);
    policy_ = std::move(p);
  }
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Blocks until at least `n` jobs have been submitted (or 10 s passed: returns false).
  bool wait_submitted(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return jobs_.size() >= n; });
  }
  std::vector<FakeJob> jobs() {
    std::lock_guard lock(mu_);
    return jobs_;
  }
  uint32_t contexts_created() {
    std::lock_guard lock(mu_);
    return next_ctx_ - 1;
  }

 private:
  friend class FakeContext;
  hal::DeviceInfo info_;
  std::mutex mu_;
  std::condition_variable cv_;
  Policy policy_;
  bool held_ = false;
  std::vector<FakeJob> jobs_;
  std::map<uint8_t, int> attempts_;
  uint32_t next_ctx_ = 1;
  uint64_t next_va_ = 0x10000;
};

class FakeBuffer final : public hal::Buffer {
 public:
  FakeBuffer(std::shared_ptr<FakeDevice> d, uint64_t size, uint64_t va, uint32_t handle,
             hal::BufferUsage usage)
      : device_(std::move(d)), bytes_(size), va_(va), handle_(handle), usage_(usage) {}
  uint64_t device_address() const override { return va_; }
  uint64_t size() const override { return bytes_.size(); }
  hal::BufferUsage usage() const override { return usage_; }
  std::span<std::byte> host() override { return bytes_; }
  std::span<const std::byte> host() const override { return bytes_; }
  Status sync_to_device(uint64_t, uint64_t) override { return Status::ok(); }
  Status sync_from_device(uint64_t, uint64_t) override { return Status::ok(); }
  uint32_t handle() const override { return handle_; }
  hal::Device& device() const override { return *device_; }

 private:
  std::shared_ptr<FakeDevice> device_;
  std::vector<std::byte> bytes_;
  uint64_t va_;
  uint32_t handle_;
  hal::BufferUsage usage_;
};

class FakeContext final : public hal::Context {
 public:
  FakeContext(std::shared_ptr<FakeDevice> d, uint32_t id, hal::Priority p)
      : device_(std::move(d)), id_(id), priority_(p) {}
  ~FakeContext() override {
    std::lock_guard lock(device_->mu_);
    destroyed_ = true;
    device_->cv_.notify_all();
  }
  uint32_t id() const override { return id_; }
  hal::Priority priority() const override { return priority_; }
  hal::Device& device() const override { return *device_; }
  Result<hal::ContextStatus> query() override {
    std::lock_guard lock(device_->mu_);
    hal::ContextStatus s;
    s.health = banned_ ? hal::ContextHealth::kBanned : hal::ContextHealth::kActive;
    return s;
  }
  Result<uint64_t> submit_job(const hal::CommandBuffer& cb) override {
    std::lock_guard lock(device_->mu_);
    if (banned_) return make_error(StatusCode::kUnavailable, name() + " is banned");
    FakeJob job;
    job.ctx = id_;
    job.priority = priority_;
    job.seq = ++seq_;
    hal::Buffer& act = *cb.uses()[0];
    job.marker = static_cast<uint8_t>(act.host()[0]);
    job.attempt = ++device_->attempts_[job.marker];
    job.thread = std::this_thread::get_id();
    device_->jobs_.push_back(job);
    pending_[job.seq] = {job, &act};
    device_->cv_.notify_all();
    return job.seq;
  }
  Result<hal::JobResult> wait_job(uint64_t seq, hal::Deadline deadline) override {
    std::unique_lock lock(device_->mu_);
    auto open = [&] { return !device_->held_ || destroyed_; };
    if (deadline == hal::Deadline::max()) {
      device_->cv_.wait(lock, open);
    } else if (!device_->cv_.wait_until(lock, deadline, open)) {
      return make_error(StatusCode::kDeadlineExceeded, "fake job still running");
    }
    auto it = pending_.find(seq);
    if (it == pending_.end()) return make_error(StatusCode::kNotFound, "unknown job");
    if (destroyed_) return hal::JobResult{hal::JobEnd::kAborted, 0, 0, 0};
    hal::JobResult r{hal::JobEnd::kSuccess, 0, 0, 100};
    if (device_->policy_) r = device_->policy_(it->second.job);
    if (r.end == hal::JobEnd::kSuccess) {
      // The identity program: rows of 16 bytes at stride 32 -> offset 256, stride 16.
      auto bytes = it->second.act->host();
      for (int row = 0; row < 4; ++row)
        std::memcpy(bytes.data() + 256 + 16 * row, bytes.data() + 32 * row, 16);
    }
    if (r.end == hal::JobEnd::kPageFault) banned_ = true;
    pending_.erase(it);
    return r;
  }

 private:
  struct Pending {
    FakeJob job;
    hal::Buffer* act;
  };
  std::shared_ptr<FakeDevice> device_;
  uint32_t id_;
  hal::Priority priority_;
  uint64_t seq_ = 0;
  bool banned_ = false;
  bool destroyed_ = false;
  std::map<uint64_t, Pending> pending_;
};

inline Result<std::shared_ptr<hal::Buffer>> FakeDevice::allocate(uint64_t size,
                                                                  hal::BufferUsage usage) {
  std::lock_guard lock(mu_);
  const uint64_t rounded = (size + 65535) / 65536 * 65536;
  const uint64_t va = next_va_;
  next_va_ += rounded;
  return std::shared_ptr<hal::Buffer>(std::make_shared<FakeBuffer>(
      shared_from_this(), rounded, va, static_cast<uint32_t>(va >> 16), usage));
}

inline Result<std::shared_ptr<hal::Context>> FakeDevice::create_context(hal::Priority priority) {
  uint32_t id;
  {
    std::lock_guard lock(mu_);
    id = next_ctx_++;
  }
  return std::shared_ptr<hal::Context>(std::make_shared<FakeContext>(shared_from_this(), id, priority));
}

}  // namespace npu::test
