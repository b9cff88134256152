// The ioctl ABI gate of the kernel-driver model and the ioctl handlers.
//
// The gate reproduces drm_ioctl(): a foreign ioctl type is ENOTTY, an unknown number EINVAL;
// the argument is copied in with the caller's size (from the ioctl number), zero-filled up to
// the kernel's size, handed to the handler, and copied out with the caller's size even when
// the handler failed. User pointers are read and written through copy_from_user /
// copy_to_user, which return EFAULT instead of crashing on a bad address.
#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "npu/driver/log.h"
#include "kmd_internal.h"
#include "uapi/drm/npu_accel.h"

namespace npu::driver::kmd {

namespace {

// Copies through a pipe, a page at a time: write() from an unreadable range and read() into an
// unwritable one fail with EFAULT, as copy_*_user do. The fallback for where process_vm_readv/
// writev are not available: container seccomp profiles that block them (EPERM) and user-mode
// emulators such as qemu-user (ENOSYS). One pipe per thread, made on first use.
int copy_through_pipe(void* dst, const void* src, size_t n) {
  struct Pipe {
    int fd[2] = {-1, -1};
    Pipe() {
      if (pipe2(fd, O_CLOEXEC) != 0) fd[0] = fd[1] = -1;
    }
    ~Pipe() {
      for (int f : fd)
        if (f >= 0) close(f);
    }
  };
  thread_local Pipe p;
  if (p.fd[0] < 0) return EFAULT;
  constexpr size_t kChunk = 4096;  // below the pipe's capacity: one write never blocks
  for (size_t at = 0; at < n; at += kChunk) {
    const size_t k = std::min(kChunk, n - at);
    if (write(p.fd[1], static_cast<const char*>(src) + at, k) != static_cast<ssize_t>(k)) return EFAULT;
    if (read(p.fd[0], static_cast<char*>(dst) + at, k) != static_cast<ssize_t>(k)) {
      char drain[kChunk];  // the k bytes are still in the pipe: empty it for the next copy
      if (read(p.fd[0], drain, k) < 0) p.fd[0] = -1;  // (cannot happen; never reuse a full pipe)
      return EFAULT;
    }
  }
  return 0;
}

bool process_vm_unavailable(ssize_t result) { return result < 0 && (errno == ENOSYS || errno == EPERM); }

// getpid() is a system call, and every ioctl copies a few times; the pid changes only across
// fork(), whose child forgets it.
std::atomic<pid_t> cached_pid{0};

pid_t self_pid() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { cached_pid.store(0); });
    return true;
  }();
  (void)registered;
  pid_t pid = cached_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = getpid();
    cached_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

// The calling thread's stack, [lo, hi), from pthread_getattr_np once per thread (0, 0 when
// it cannot be read).
struct StackRange {
  uintptr_t lo = 0, hi = 0;
  StackRange() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
      lo = reinterpret_cast<uintptr_t>(addr);
      hi = lo + size;
    }
    pthread_attr_destroy(&attr);
  }
};

// Whether [p, p + n) lies in the calling thread's live stack: between this function's frame
// and the top of the stack that frame is in. That memory is mapped and writable for as long
// as the caller's frames exist, so a plain copy cannot fault there. The kernel's
// copy_*_user are plain copies with a fault fixup; a user-space model cannot recover from a
// fault, so it copies plainly only where none can happen, and through a checked system call
// everywhere else. The UMD keeps its ioctl arguments and small arrays on its stack, so a
// request's ioctls make no copy system call (each costs 1-3 us in a VM). A frame on another
// stack (sigaltstack, a fiber's, ASan's fake stacks) takes the checked path.
[[gnu::noinline]] bool on_live_stack(uint64_t p, size_t n) {
  thread_local const StackRange stack;
  const auto frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (frame < stack.lo || frame >= stack.hi) return false;
  return p >= frame && p < stack.hi && n <= stack.hi - p;
}

std::atomic<uint64_t> checked_copies{0};

}  // namespace

uint64_t checked_user_copies() { return checked_copies.load(std::memory_order_relaxed); }

int copy_from_user(void* dst, uint64_t src, size_t n) {
  if (n == 0) return 0;
  if (src == 0) return EFAULT;
  if (on_live_stack(src, n)) {
    std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), n);
    return 0;
  }
  checked_copies.fetch_add(1, std::memory_order_relaxed);
  struct iovec local = {dst, n};
  struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(src)), n};
  ssize_t got = process_vm_readv(self_pid(), &local, 1, &remote, 1, 0);
  if (process_vm_unavailable(got)) return copy_through_pipe(dst, remote.iov_base, n);
  return got == static_cast<ssize_t>(n) ? 0 : EFAULT;
}

int copy_to_user(uint64_t dst, const void* src, size_t n) {
  if (n == 0) return 0;
  if (dst == 0) return EFAULT;
  if (on_live_stack(dst, n)) {
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), src, n);
    return 0;
  }
  checked_copies.fetch_add(1, std::memory_order_relaxed);
  struct iovec local = {const_cast<void*>(src), n};
  struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), n};
  ssize_t put = process_vm_writev(self_pid(), &local, 1, &remote, 1, 0);
  if (process_vm_unavailable(put)) return copy_through_pipe(remote.iov_base, src, n);
  return put == static_cast<ssize_t>(n) ? 0 : EFAULT;
}

namespace {

// What every model device offers. Its memory is the process's own, so CPU mappings are
// coherent with the device (BO_SYNC only checks its arguments).
constexpr uint64_t kCapabilities = DRM_NPU_CAP_IN_SYNCS | DRM_NPU_CAP_PERF |
                                   DRM_NPU_CAP_BO_RDONLY | DRM_NPU_CAP_REG_ACCESS |
                                   DRM_NPU_CAP_COHERENT;

enum Flags : uint32_t { kNone = 0, kRootOnly = 1, kBlocking = 2 };

struct IoctlDesc {
  unsigned long cmd;  // the kernel's definition (direction and size)
  const char* name;
  uint32_t flags;
};

// Driver ioctls, indexed by number - DRM_COMMAND_BASE. Append-only, as the uAPI table.
constexpr IoctlDesc kDriverIoctls[] = {
    {DRM_IOCTL_NPU_GET_PARAM, "GET_PARAM", kNone},
    {DRM_IOCTL_NPU_QUERY, "QUERY", kNone},
    {DRM_IOCTL_NPU_BO_CREATE, "BO_CREATE", kNone},
    {DRM_IOCTL_NPU_BO_INFO, "BO_INFO", kNone},
    {DRM_IOCTL_NPU_BO_SYNC, "BO_SYNC", kNone},
    {DRM_IOCTL_NPU_BO_DESTROY, "BO_DESTROY", kNone},
    {DRM_IOCTL_NPU_CTX_CREATE, "CTX_CREATE", kNone},
    {DRM_IOCTL_NPU_CTX_DESTROY, "CTX_DESTROY", kNone},
    {DRM_IOCTL_NPU_SUBMIT, "SUBMIT", kNone},
    {DRM_IOCTL_NPU_WAIT, "WAIT", kBlocking},
    {DRM_IOCTL_NPU_CTX_QUERY, "CTX_QUERY", kNone},
    {DRM_IOCTL_NPU_PERF, "PERF", kNone},
    {DRM_IOCTL_NPU_REG_READ, "REG_READ", kRootOnly},
    {DRM_IOCTL_NPU_REG_WRITE, "REG_WRITE", kRootOnly},
    {DRM_IOCTL_NPU_RESET, "RESET", kRootOnly},
};
static_assert(sizeof(kDriverIoctls) / sizeof(kDriverIoctls[0]) == DRM_NPU_NUM_IOCTLS);

// A copy of a user argument, zeroed: on the stack up to N elements and allocated above, as
// Linux's drm_ioctl() and drivers copy small arguments (SUBMIT and WAIT are on every
// request's path).
template <typename T, size_t N>
class ArgCopy {
 public:
  explicit ArgCopy(size_t n) : n_(n) {
    if (n > N) heap_.resize(n);
    std::fill_n(data(), n, T{});
  }
  T* data() { return n_ > N ? heap_.data() : stack_; }
  size_t size() const { return n_; }
  std::span<T> span() { return {data(), n_}; }

 private:
  size_t n_;
  alignas(16) T stack_[N];
  std::vector<T> heap_;
};

bool has_nonzero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return std::any_of(b, b + n, [](unsigned char c) { return c != 0; });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
long KDevice::ioctl(File* file, unsigned long cmd, void* arg) {
  if (_IOC_TYPE(cmd) != DRM_IOCTL_BASE) return -ENOTTY;
  const unsigned nr = _IOC_NR(cmd);
  const IoctlDesc* desc = nullptr;
  static constexpr IoctlDesc kVersion = {DRM_IOCTL_VERSION, "VERSION", kNone};
  static constexpr IoctlDesc kGemClose = {DRM_IOCTL_GEM_CLOSE, "GEM_CLOSE", kNone};
  if (nr == _IOC_NR(DRM_IOCTL_VERSION)) {
    desc = &kVersion;
  } else if (nr == _IOC_NR(DRM_IOCTL_GEM_CLOSE)) {
    desc = &kGemClose;
  } else if (nr >= DRM_COMMAND_BASE && nr < DRM_COMMAND_BASE + DRM_NPU_NUM_IOCTLS) {
    desc = &kDriverIoctls[nr - DRM_COMMAND_BASE];
  } else {
    return -EINVAL;
  }

  std::unique_lock<std::mutex> lk(mu_, std::defer_lock);
  lock_spinning(lk);  // the device thread holds it for a moment at a job's end
  if (check_fault_locked(Fault::kUnplug)) unplug_locked();
  if (unplugged_) return -ENODEV;
  if (file->closed) return -EBADF;
  if (check_fault_locked(Fault::kEintr)) return -EINTR;

  const size_t drv_size = _IOC_SIZE(desc->cmd);
  size_t in_size = _IOC_SIZE(cmd);
  size_t out_size = in_size;
  if ((cmd & desc->cmd & IOC_IN) == 0) in_size = 0;
  if ((cmd & desc->cmd & IOC_OUT) == 0) out_size = 0;
  const size_t ksize = std::max(std::max(in_size, out_size), drv_size);
  ArgCopy<unsigned char, 256> arg_copy(ksize);
  unsigned char* kdata = arg_copy.data();
  const uint64_t uarg = reinterpret_cast<uintptr_t>(arg);
  if (copy_from_user(kdata, uarg, in_size) != 0) return -EFAULT;

  NPU_LOG_AT(kIoctl, "%s: %s in=%zu out=%zu", name_.c_str(), desc->name, in_size, out_size);
  int err = 0;
  if ((desc->flags & kRootOnly) && !file->privileged) {
    err = EACCES;
  } else {
    void* d = kdata;
    switch (nr) {
      case _IOC_NR(DRM_IOCTL_VERSION): err = do_version(*file, d); break;
      case _IOC_NR(DRM_IOCTL_GEM_CLOSE): err = do_gem_close(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_GET_PARAM: err = do_get_param(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_QUERY: err = do_query(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_BO_CREATE: err = do_bo_create(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_BO_INFO: err = do_bo_info(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_BO_SYNC: err = do_bo_sync(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_BO_DESTROY: err = do_bo_destroy(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_CTX_CREATE: err = do_ctx_create(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_CTX_DESTROY: err = do_ctx_destroy(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_SUBMIT: err = do_submit(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_WAIT: err = do_wait(*file, d, lk); break;
      case DRM_COMMAND_BASE + DRM_NPU_CTX_QUERY: err = do_ctx_query(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_PERF: err = do_perf(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_REG_READ: err = do_reg_read(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_REG_WRITE: err = do_reg_write(*file, d); break;
      case DRM_COMMAND_BASE + DRM_NPU_RESET: err = do_reset(*file, d); break;
      default: err = EINVAL; break;
    }
  }
  lk.unlock();
  if (copy_to_user(uarg, kdata, out_size) != 0) err = EFAULT;
  NPU_LOG_AT(kIoctl, "%s: %s -> %d (%s)", name_.c_str(), desc->name, -err, std::strerror(err));
  return -err;
}

// ---------------------------------------------------------------------------------------------
int KDevice::do_version(File&, void* data) {
  auto* v = static_cast<drm_version*>(data);
  v->version_major = DRM_NPU_UAPI_MAJOR;
  v->version_minor = DRM_NPU_UAPI_MINOR;
  v->version_patchlevel = 0;
  auto put = [](const char* s, __kernel_size_t* len, char* uptr) -> int {
    const size_t actual = std::strlen(s);
    const size_t n = std::min<size_t>(*len, actual);
    *len = actual;
    if (n > 0 && copy_to_user(reinterpret_cast<uintptr_t>(uptr), s, n) != 0) return EFAULT;
    return 0;
  };
  const std::string desc = "NPU accel driver (in-process model, " + name_ + ")";
  if (int e = put(DRM_NPU_DRIVER_NAME, &v->name_len, v->name)) return e;
  if (int e = put("20261130", &v->date_len, v->date)) return e;
  return put(desc.c_str(), &v->desc_len, v->desc);
}

int KDevice::do_get_param(File&, void* data) {
  auto* p = static_cast<drm_npu_get_param*>(data);
  if (p->index != 0) return EINVAL;
  switch (p->param) {
    case DRM_NPU_PARAM_DEVICE_ID: p->value = device_id_; break;
    case DRM_NPU_PARAM_REVISION: p->value = isa_version_locked(); break;
    case DRM_NPU_PARAM_PLATFORM: p->value = platform_; break;
    case DRM_NPU_PARAM_CLOCK_MHZ: p->value = hw::kClockMhz; break;
    case DRM_NPU_PARAM_MAX_CONTEXTS: p->value = kMaxContexts; break;
    case DRM_NPU_PARAM_CONTEXT_COUNT: p->value = context_count_; break;
    case DRM_NPU_PARAM_VA_START: p->value = hw::kPageBytes; break;
    case DRM_NPU_PARAM_VA_SIZE: p->value = (1ull << hw::kVaBits) - hw::kPageBytes; break;
    case DRM_NPU_PARAM_ISA_VERSION: p->value = isa_version_locked(); break;
    case DRM_NPU_PARAM_FW_VERSION: p->value = fw_version_locked(); break;
    case DRM_NPU_PARAM_CAPABILITIES:
      p->value = kCapabilities;
      break;
    case DRM_NPU_PARAM_RESET_COUNT: p->value = stats_.resets; break;
    case DRM_NPU_PARAM_ARRAY_DIM: p->value = array_dim_; break;
    case DRM_NPU_PARAM_FINGERPRINT: p->value = fingerprint_; break;
    case DRM_NPU_PARAM_NUM_QUEUES: p->value = num_queues_; break;
    case DRM_NPU_PARAM_DRAM_SIZE: p->value = dram_size_; break;
    case DRM_NPU_PARAM_PAGE_SIZE: p->value = hw::kPageBytes; break;
    case DRM_NPU_PARAM_QUEUE_DEPTH: p->value = kQueueDepth; break;
    case DRM_NPU_PARAM_NUM_COUNTERS: p->value = hw::kNumCounters; break;
    case DRM_NPU_PARAM_MAX_BO_SIZE: p->value = kMaxBoSize; break;
    case DRM_NPU_PARAM_HANG_TIMEOUT_MS: p->value = static_cast<uint64_t>(hang_timeout_.count()); break;
    default: return EINVAL;
  }
  return 0;
}

int KDevice::do_query(File&, void* data) {
  auto* q = static_cast<drm_npu_query*>(data);
  if (q->flags != 0 || q->pad != 0) return EINVAL;
  std::vector<unsigned char> answer;
  switch (q->type) {
    case DRM_NPU_QUERY_DEVICE_INFO: {
      drm_npu_device_info info{};
      info.device_id = device_id_;
      info.isa_version = isa_version_locked();
      info.fw_version = fw_version_locked();
      info.platform = platform_;
      info.array_dim = array_dim_;
      info.num_queues = num_queues_;
      info.clock_mhz = hw::kClockMhz;
      info.max_contexts = kMaxContexts;
      info.context_count = context_count_;
      info.queue_depth = kQueueDepth;
      info.act_sp_rows = act_sp_rows_;
      info.wgt_sp_tiles = wgt_sp_tiles_;
      info.acc_sp_rows = acc_sp_rows_;
      info.num_counters = hw::kNumCounters;
      info.page_size = hw::kPageBytes;
      info.va_start = hw::kPageBytes;
      info.va_size = (1ull << hw::kVaBits) - hw::kPageBytes;
      info.dram_size = dram_size_;
      info.max_bo_size = kMaxBoSize;
      info.fingerprint = fingerprint_;
      info.capabilities = kCapabilities;
      info.reset_count = stats_.resets;
      answer.resize(sizeof(info));
      std::memcpy(answer.data(), &info, sizeof(info));
      break;
    }
    case DRM_NPU_QUERY_QUEUES: {
      drm_npu_queues head{num_queues_, sizeof(drm_npu_queue_info)};
      answer.resize(sizeof(head) + num_queues_ * sizeof(drm_npu_queue_info));
      std::memcpy(answer.data(), &head, sizeof(head));
      for (uint32_t i = 0; i < num_queues_; ++i) {
        drm_npu_queue_info qi{};
        qi.queue = i;
        qi.priority = DRM_NPU_PRIORITY_REALTIME - std::min<uint32_t>(i, DRM_NPU_PRIORITY_REALTIME);
        qi.contexts = static_cast<uint32_t>(rings_[i].contexts.size());
        qi.jobs_in_ring = static_cast<uint32_t>(rings_[i].jobs.size());
        qi.jobs_completed = rings_[i].completed_total;
        std::memcpy(answer.data() + sizeof(head) + i * sizeof(qi), &qi, sizeof(qi));
      }
      break;
    }
    default: return EINVAL;
  }
  const uint32_t actual = static_cast<uint32_t>(answer.size());
  if (q->data != 0) {
    const size_t n = std::min<size_t>(q->size, actual);
    if (copy_to_user(q->data, answer.data(), n) != 0) return EFAULT;
  }
  q->size = actual;
  return 0;
}

int KDevice::do_bo_create(File& f, void* data) {
  auto* a = static_cast<drm_npu_bo_create*>(data);
  if ((a->flags & ~DRM_NPU_BO_FLAGS) != 0) return EINVAL;
  if (a->size == 0 || a->size > kMaxBoSize) return EINVAL;
  if (check_fault_locked(Fault::kEnomem)) return ENOMEM;
  const uint64_t pages = (a->size + hw::kPageBytes - 1) / hw::kPageBytes;
  uint64_t phys_page = 0, va_page = 0;
  if (!phys_.alloc(pages, &phys_page)) return ENOMEM;
  if (!f.as->va.alloc(pages, &va_page)) {
    phys_.release(phys_page, pages);
    return ENOMEM;
  }
  auto bo = std::make_shared<BoMem>();
  bo->dev = this;
  bo->as = f.as;
  bo->phys = phys_page * hw::kPageBytes;
  bo->size = pages * hw::kPageBytes;
  bo->va = va_page * hw::kPageBytes;
  bo->flags = a->flags;
  bo->mmap_offset = next_mmap_offset_;
  next_mmap_offset_ += bo->size;
  const bool writable = (a->flags & DRM_NPU_BO_DEVICE_RDONLY) == 0;
  for (uint64_t i = 0; i < pages; ++i) {
    const uint32_t pte = static_cast<uint32_t>(((phys_page + i) * hw::kPageBytes) & 0xFFFF0000u) |
                         (writable ? 2u : 0u) | 1u;
    std::memcpy(dram_ + f.as->pt_phys + 4 * (va_page + i), &pte, 4);
  }
  const uint32_t handle = f.next_handle++;
  f.handles[handle] = bo;
  mmap_offsets_[bo->mmap_offset] = {&f, handle};
  a->handle = handle;
  a->npu_va = bo->va;
  a->out_size = bo->size;
  NPU_LOG_AT(kMm, "%s: bo %u va %#llx phys %#llx size %#llx", name_.c_str(), handle,
           static_cast<unsigned long long>(bo->va), static_cast<unsigned long long>(bo->phys),
           static_cast<unsigned long long>(bo->size));
  return 0;
}

int KDevice::do_bo_info(File& f, void* data) {
  auto* a = static_cast<drm_npu_bo_info*>(data);
  if (a->flags != 0) return EINVAL;
  auto it = f.handles.find(a->handle);
  if (it == f.handles.end()) return ENOENT;
  a->mmap_offset = it->second->mmap_offset;
  a->size = it->second->size;
  a->npu_va = it->second->va;
  return 0;
}

int KDevice::do_bo_sync(File& f, void* data) {
  auto* a = static_cast<drm_npu_bo_sync*>(data);
  ++stats_.bo_syncs;
  if (a->direction == 0 ||
      (a->direction & ~(DRM_NPU_SYNC_TO_DEVICE | DRM_NPU_SYNC_FROM_DEVICE)) != 0) {
    return EINVAL;
  }
  auto it = f.handles.find(a->handle);
  if (it == f.handles.end()) return ENOENT;
  if (a->size == 0 || a->offset > it->second->size || a->size > it->second->size - a->offset) {
    return EINVAL;
  }
  // The simulators share memory coherently with the CPU: nothing to flush. Taking the device
  // lock (done by the gate) already orders the CPU's writes before the next doorbell.
  return 0;
}

int KDevice::destroy_handle_locked(File& f, uint32_t handle) {
  auto it = f.handles.find(handle);
  if (it == f.handles.end()) return ENOENT;
  mmap_offsets_.erase(it->second->mmap_offset);
  f.handles.erase(it);  // memory lives on while jobs or mappings reference it
  return 0;
}

int KDevice::do_bo_destroy(File& f, void* data) {
  auto* a = static_cast<drm_npu_bo_destroy*>(data);
  if (a->pad != 0) return EINVAL;
  return destroy_handle_locked(f, a->handle);
}

int KDevice::do_gem_close(File& f, void* data) {
  auto* a = static_cast<drm_gem_close*>(data);
  if (a->pad != 0) return EINVAL;
  return destroy_handle_locked(f, a->handle);
}

int KDevice::do_ctx_create(File& f, void* data) {
  auto* a = static_cast<drm_npu_ctx_create*>(data);
  if (a->flags != 0 || a->pad != 0) return EINVAL;
  if (a->priority > DRM_NPU_PRIORITY_REALTIME) return EINVAL;
  if (check_fault_locked(Fault::kEnomem)) return ENOMEM;
  if (context_count_ >= kMaxContexts) return ENOSPC;
  auto ctx = std::make_shared<Context>();
  ctx->id = next_ctx_id_++;
  if (next_ctx_id_ == 0) next_ctx_id_ = 1;
  ctx->file = &f;
  ctx->priority = a->priority;
  ctx->queue = std::min(num_queues_ - 1, DRM_NPU_PRIORITY_REALTIME - a->priority);
  f.contexts[ctx->id] = ctx;
  contexts_[ctx->id] = ctx;
  rings_[ctx->queue].contexts.push_back(ctx.get());
  ++context_count_;
  a->ctx_id = ctx->id;
  return 0;
}

int KDevice::do_ctx_destroy(File& f, void* data) {
  auto* a = static_cast<drm_npu_ctx_destroy*>(data);
  if (a->pad != 0) return EINVAL;
  auto it = f.contexts.find(a->ctx_id);
  if (it == f.contexts.end()) return ENOENT;
  auto ctx = it->second;
  f.contexts.erase(it);
  destroy_context_locked(ctx);
  dispatch_locked();
  return 0;
}

int KDevice::do_submit(File& f, void* data) {
  auto* a = static_cast<drm_npu_submit*>(data);
  if (a->flags != 0) return EINVAL;
  auto cit = f.contexts.find(a->ctx_id);
  if (cit == f.contexts.end()) return ENOENT;
  const auto& ctx = cit->second;
  if (ctx->state == DRM_NPU_CTX_STATE_BANNED) return EBADFD;
  if (ctx->state == DRM_NPU_CTX_STATE_LOST) return ENODEV;
  if (a->bo_count > kMaxBoHandlesPerSubmit) return EINVAL;
  if (a->in_sync_count > kMaxInSyncs) return EINVAL;
  if (a->in_sync_count > 0 &&
      (a->in_sync_struct_size < sizeof(drm_npu_sync) || a->in_sync_struct_size > 4096)) {
    return EINVAL;
  }
  if (a->in_sync_count == 0 && (a->in_syncs != 0 || a->in_sync_struct_size != 0)) return EINVAL;
  if (a->bo_count == 0 && a->bo_handles != 0) return EINVAL;

  auto job = std::make_shared<Job>();
  // A job names a handful of buffers; its list is sized once.
  ArgCopy<uint32_t, 32> handle_copy(a->bo_count);
  const std::span<uint32_t> handles = handle_copy.span();
  if (copy_from_user(handles.data(), a->bo_handles, handles.size() * sizeof(uint32_t)) != 0) {
    return EFAULT;
  }
  job->bos.reserve(handles.size() + 1);
  for (uint32_t h : handles) {
    auto it = f.handles.find(h);
    if (it == f.handles.end()) return ENOENT;
    job->bos.push_back(it->second);
  }
  auto cmd = f.handles.find(a->cmd_handle);
  if (cmd == f.handles.end()) return ENOENT;
  const BoMem& cbo = *cmd->second;
  if (a->cmd_size == 0 || a->cmd_size % hw::kInstructionBytes != 0) return EINVAL;
  if (a->cmd_offset % hw::kInstructionBytes != 0) return EINVAL;
  if (a->cmd_offset >= cbo.size || a->cmd_size > cbo.size - a->cmd_offset) return EINVAL;
  job->bos.push_back(cmd->second);

  std::vector<unsigned char> sync(a->in_sync_struct_size);
  job->deps.reserve(a->in_sync_count);
  for (uint32_t i = 0; i < a->in_sync_count; ++i) {
    if (copy_from_user(sync.data(), a->in_syncs + uint64_t{i} * a->in_sync_struct_size,
                       sync.size()) != 0) {
      return EFAULT;
    }
    drm_npu_sync s;
    std::memcpy(&s, sync.data(), sizeof(s));
    if (s.pad != 0 || has_nonzero(sync.data() + sizeof(s), sync.size() - sizeof(s))) return EINVAL;
    auto dit = f.contexts.find(s.ctx_id);
    if (dit == f.contexts.end()) return ENOENT;
    if (s.seq == 0 || s.seq > dit->second->last_submitted) return EINVAL;
    job->deps.emplace_back(dit->second, s.seq);
  }

  if (ctx->unended >= kQueueDepth) return EBUSY;
  if (check_fault_locked(Fault::kEbusy)) return EBUSY;
  job->inject_hang = check_fault_locked(Fault::kHang);
  job->inject_page_fault = check_fault_locked(Fault::kPageFault);
  job->ctx = ctx;
  job->seq = ++ctx->last_submitted;
  job->cmd_va = static_cast<uint32_t>(cbo.va + a->cmd_offset);
  job->cmd_size = static_cast<uint32_t>(a->cmd_size);
  job->as = f.as;
  if (ctx->unended == 0) {
    ctx->solo_seq = job->seq;
    ctx->solo_submitted = Clock::now();
  }
  ++ctx->unended;
  ++stats_.jobs_submitted;
  ctx->queued.push_back(job);
  a->seq = job->seq;
  dispatch_locked();
  return 0;
}

int KDevice::do_wait(File& f, void* data, std::unique_lock<std::mutex>& lk) {
  auto* a = static_cast<drm_npu_wait*>(data);
  if (a->flags != 0) return EINVAL;
  auto cit = f.contexts.find(a->ctx_id);
  if (cit == f.contexts.end()) return ENOENT;
  std::shared_ptr<Context> ctx = cit->second;
  if (a->seq == 0 || a->seq > ctx->last_submitted || a->seq <= ctx->pruned_upto) return EINVAL;
  const auto deadline =
      Clock::time_point(std::chrono::nanoseconds(std::max<int64_t>(a->deadline_ns, 0)));
  if (Clock::now() < deadline) ++stats_.waits;  // not a poll
  bool spun = false;    // one bounded spin per WAIT, before its first sleep
  bool napped = false;  // the nap before that spin was considered (taken when nap_margin > 0)
  Clock::duration nap_margin{};
  for (;;) {
    if (unplugged_) return ENODEV;
    auto it = ctx->results.find(a->seq);
    if (it != ctx->results.end()) {
      a->status = it->second.status;
      a->device_error = it->second.device_error;
      a->error_addr = it->second.error_addr;
      a->device_cycles = it->second.device_cycles;
      return it->second.status == DRM_NPU_JOB_ABORTED ? EIO : 0;
    }
    const auto now = Clock::now();
    if (now >= deadline) return ETIMEDOUT;
    // Spin only for the context's one outstanding job (a short request): behind other jobs
    // (a pipelined batch) the wait is long and sleeping costs one wake-up for all of them.
    if (!spun && wait_spin_.count() > 0 && ctx->unended <= 1) {
      // A job expected to run for longer (a real model on the functional simulator) first
      // sleeps until shortly before its expected end, then spins across it (hybrid polling,
      // as Linux's block layer does): its end finds the waiter awake instead of paying a
      // wake-up, and the CPU is not spun for the whole job. The sleep is an ordinary WAIT
      // sleep: an earlier end wakes it.
      if (!napped) {
        napped = true;
        const Clock::time_point wake = nap_until_locked(*ctx, a->seq, &nap_margin);
        if (wake > now) {
          ++stats_.wait_naps;
          sleep_in_wait_locked(*ctx, a->seq, lk, std::min(deadline, wake));
          continue;
        }
        nap_margin = {};  // no nap: the plain spin below
      }
      // The deadline bounds the spin too: a timeout counts from the start of the WAIT. After
      // a nap the spin covers the margin before the expected end and as much after it.
      spun = true;
      const Clock::duration bound = std::max<Clock::duration>(2 * nap_margin, wait_spin_);
      spin_until(lk, ctx->ends, ctx->ends.load(std::memory_order_relaxed),
                 std::min(deadline, Clock::now() + bound));
      continue;
    }
    sleep_in_wait_locked(*ctx, a->seq, lk, deadline);
  }
}

Clock::time_point KDevice::nap_until_locked(const Context& ctx, uint64_t seq,
                                            Clock::duration* margin) const {
  if (seq != ctx.solo_seq || ctx.solo_ns <= 0) return {};
  const Clock::duration expected = std::chrono::nanoseconds(ctx.solo_ns);
  // Only jobs long against the spin bound: a short one is spun for as before.
  if (expected < 2 * kNapMargins * wait_spin_) return {};
  // The margin covers the jobs' spread, four mean deviations (as TCP's retransmission timeout
  // does; one sample counts as a deviation of half its time, so the first estimate never
  // naps), and a timed wake-up's latency (kNapMargins spin bounds). Jobs too irregular for a
  // margin of kMaxNapMargin are not napped for: the spin after a nap that wakes too early
  // would run out, and the WAIT would sleep a second time.
  *margin = std::max<Clock::duration>(4 * std::chrono::nanoseconds(ctx.solo_dev_ns), kNapMargins * wait_spin_);
  if (*margin > std::max<Clock::duration>(kMaxNapMargin, kNapMargins * wait_spin_)) return {};
  return ctx.solo_submitted + expected - *margin;
}

void KDevice::sleep_in_wait_locked(Context& ctx, uint64_t seq, std::unique_lock<std::mutex>& lk,
                                   Clock::time_point until) {
  ++stats_.wait_sleeps;
  auto w = ctx.waited.insert(seq);
  ctx.cv_wait.wait_until(lk, until);
  ctx.waited.erase(w);
}

int KDevice::do_ctx_query(File& f, void* data) {
  auto* a = static_cast<drm_npu_ctx_query*>(data);
  if (a->flags != 0) return EINVAL;
  auto cit = f.contexts.find(a->ctx_id);
  if (cit == f.contexts.end()) return ENOENT;
  const Context& c = *cit->second;
  a->state = c.state;
  a->priority = c.priority;
  a->reset_count = c.reset_count;
  a->pending = c.unended;
  a->last_submitted_seq = c.last_submitted;
  a->last_completed_seq = c.last_ended;
  a->fault_code = c.fault_code;
  a->pad = 0;
  a->fault_addr = c.fault_addr;
  return 0;
}

int KDevice::do_perf(File&, void* data) {
  auto* a = static_cast<drm_npu_perf*>(data);
  if (a->flags != 0) return EINVAL;
  if (a->values != 0) {
    uint64_t values[hw::kNumCounters];
    {
      std::lock_guard<std::mutex> hw(hw_mu_);
      for (uint32_t i = 0; i < hw::kNumCounters; ++i) {
        values[i] = sim::read_counter(*sim_, static_cast<hw::Counter>(i));
      }
    }
    const size_t n = std::min<size_t>(a->count, hw::kNumCounters);
    if (copy_to_user(a->values, values, n * sizeof(uint64_t)) != 0) return EFAULT;
  }
  a->count = hw::kNumCounters;
  return 0;
}

int KDevice::do_reg_read(File&, void* data) {
  auto* a = static_cast<drm_npu_reg*>(data);
  if (a->offset % 4 != 0 || a->offset >= hw::reg::REGISTER_SPACE_BYTES) return EINVAL;
  std::lock_guard<std::mutex> hw(hw_mu_);
  a->value = sim_->read_reg(a->offset);
  if (a->offset == hw::reg::VERSION) a->value = isa_version_locked();
  return 0;
}

int KDevice::do_reg_write(File&, void* data) {
  auto* a = static_cast<drm_npu_reg*>(data);
  if (a->offset % 4 != 0 || a->offset >= hw::reg::REGISTER_SPACE_BYTES) return EINVAL;
  if (a->offset == hw::reg::CONTROL && (a->value & hw::bits::CONTROL_RESET)) {
    // A reset behind the driver's back would orphan every job: take the driver's path.
    reset_locked(nullptr, DRM_NPU_JOB_ABORTED, 0, 0);
    return 0;
  }
  std::lock_guard<std::mutex> hw(hw_mu_);
  sim_->write_reg(a->offset, a->value);
  kick_device_locked();
  return 0;
}

int KDevice::do_reset(File&, void* data) {
  auto* a = static_cast<drm_npu_reset*>(data);
  if (a->flags != 0 || a->pad != 0) return EINVAL;
  reset_locked(nullptr, DRM_NPU_JOB_ABORTED, 0, 0);
  return 0;
}

}  // namespace npu::driver::kmd
