// uAPI conformance suite (kmd-test style): written once against the ioctl interface and run
// against every backend: the in-process model ("sim", and "rtl" when built) always, a real
// /dev/accel node when one exists. Tests that need model-only controls (fault injection,
// unplug) skip on real nodes with a reason.
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>

#include "driver_test_util.h"

namespace npu::driver::test {
namespace {

class Uapi : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    NPU_OPEN_BACKEND_OR_SKIP(GetParam(), dev_);
    if (model()) {
      ASSERT_EQ(kmd::clear_faults(GetParam()), 0);
      ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 300), 0);
    }
  }
  void TearDown() override {
    if (!dev_ || !model()) return;
    // Leave the process-wide device clean for the next test in this process.
    kmd::clear_faults(GetParam());
    kmd::set_hang_timeout_ms(GetParam(), 2000);
    std::string err;
    auto admin = UmdDevice::open_with_os(
        make_model_os({ModelCredentials::Privilege::kPrivileged}), GetParam(), &err);
    if (admin) admin->reset();
  }
  bool model() const { return is_model(GetParam()); }
  // A second open file on the same device.
  std::unique_ptr<UmdDevice> reopen() {
    std::string err;
    auto d = UmdDevice::open(dev_->info().node, &err);
    EXPECT_NE(d, nullptr) << err;
    return d;
  }
  uint32_t ctx(uint32_t prio = DRM_NPU_PRIORITY_NORMAL) {
    uint32_t c = 0;
    EXPECT_EQ(dev_->ctx_create(prio, &c), 0);
    return c;
  }
  BoInfo bo(uint64_t size = 65536, uint32_t flags = 0) {
    BoInfo b;
    EXPECT_EQ(dev_->bo_create(size, flags, &b), 0);
    return b;
  }
  std::unique_ptr<UmdDevice> dev_;
};

// ---- version and parameters -----------------------------------------------------------------
TEST_P(Uapi, VersionReportsNpuDriver) {
  DriverVersion v;
  ASSERT_EQ(dev_->os().get_version(dev_->fd(), &v), 0);
  EXPECT_EQ(v.name, "npu");
  EXPECT_EQ(v.major, DRM_NPU_UAPI_MAJOR);
}

TEST_P(Uapi, VersionCopiesAtMostCallerLength) {
  char name[2] = {'x', 'x'};
  drm_version v{};
  v.name = name;
  v.name_len = 2;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_VERSION, &v), 0);
  EXPECT_EQ(v.name_len, 3u);  // actual length reported
  EXPECT_EQ(std::string(name, 2), "np");
}

TEST_P(Uapi, GetParamKnownParams) {
  for (uint32_t p = DRM_NPU_PARAM_DEVICE_ID; p <= DRM_NPU_PARAM_HANG_TIMEOUT_MS; ++p) {
    drm_npu_get_param a{};
    a.param = p;
    EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0) << "param " << p;
  }
  drm_npu_get_param a{};
  a.param = DRM_NPU_PARAM_DEVICE_ID;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, hw::kDeviceId);
  a.param = DRM_NPU_PARAM_PAGE_SIZE;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, hw::kPageBytes);
}

TEST_P(Uapi, GetParamUnknownParamIsEinval) {
  drm_npu_get_param a{};
  a.param = 0xFFFF;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), EINVAL);
}

TEST_P(Uapi, GetParamNonzeroIndexIsEinval) {
  drm_npu_get_param a{};
  a.param = DRM_NPU_PARAM_DEVICE_ID;
  a.index = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), EINVAL);
}

TEST_P(Uapi, GetParamMatchesDeviceInfo) {
  drm_npu_get_param a{};
  a.param = DRM_NPU_PARAM_ARRAY_DIM;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, dev_->info().array_dim);
  a.param = DRM_NPU_PARAM_FINGERPRINT;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, hw::fingerprint_for_dim(dev_->info().array_dim));
  a.param = DRM_NPU_PARAM_MAX_CONTEXTS;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, dev_->info().max_contexts);
  a.param = DRM_NPU_PARAM_CAPABILITIES;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &a), 0);
  EXPECT_EQ(a.value, dev_->info().capabilities);
  if (model()) {
    // The model devices' memory is the process's own: coherent; they chain through in_syncs.
    EXPECT_NE(a.value & DRM_NPU_CAP_COHERENT, 0u);
    EXPECT_NE(a.value & DRM_NPU_CAP_IN_SYNCS, 0u);
  }
}

TEST_P(Uapi, QueryNullDataReturnsSize) {
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_DEVICE_INFO;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), 0);
  EXPECT_EQ(q.size, sizeof(drm_npu_device_info));
}

TEST_P(Uapi, QueryShortBufferCopiesPrefixOnly) {
  struct {
    uint32_t device_id;
    uint32_t guard;
  } buf{0, 0xDEADBEEF};
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_DEVICE_INFO;
  q.size = 4;
  q.data = reinterpret_cast<uintptr_t>(&buf);
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), 0);
  EXPECT_EQ(buf.device_id, hw::kDeviceId);
  EXPECT_EQ(buf.guard, 0xDEADBEEFu);
  EXPECT_EQ(q.size, sizeof(drm_npu_device_info));
}

TEST_P(Uapi, QueryUnknownTypeIsEinval) {
  drm_npu_query q{};
  q.type = 77;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), EINVAL);
}

TEST_P(Uapi, QueryNonzeroFlagsIsEinval) {
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_DEVICE_INFO;
  q.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), EINVAL);
}

TEST_P(Uapi, QueryBadPointerIsEfault) {
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_DEVICE_INFO;
  q.size = sizeof(drm_npu_device_info);
  q.data = 16;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), EFAULT);
}

TEST_P(Uapi, QueryQueuesHasStride) {
  std::vector<unsigned char> buf(4096);
  drm_npu_query q{};
  q.type = DRM_NPU_QUERY_QUEUES;
  q.size = static_cast<uint32_t>(buf.size());
  q.data = reinterpret_cast<uintptr_t>(buf.data());
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_QUERY, &q), 0);
  drm_npu_queues head;
  std::memcpy(&head, buf.data(), sizeof(head));
  EXPECT_EQ(head.queue_count, dev_->info().num_queues);
  EXPECT_GE(head.queue_struct_size, sizeof(drm_npu_queue_info));
  EXPECT_EQ(q.size, sizeof(head) + head.queue_count * head.queue_struct_size);
}

// ---- the ABI gate ---------------------------------------------------------------------------
TEST_P(Uapi, ForeignIoctlTypeIsEnotty) {
  int value = 0;
  EXPECT_EQ(raw(*dev_, _IOWR('x', 0x40, int), &value), ENOTTY);
}

TEST_P(Uapi, UnknownDriverNumberIsEinval) {
  uint64_t arg[4] = {};
  EXPECT_EQ(raw(*dev_, DRM_IOWR(DRM_COMMAND_BASE + 0x3F, uint64_t[4]), arg), EINVAL);
  EXPECT_EQ(raw(*dev_, DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_NUM_IOCTLS, uint64_t[4]), arg), EINVAL);
}

TEST_P(Uapi, UnknownCoreNumberIsEinval) {
  uint64_t arg[4] = {};
  EXPECT_EQ(raw(*dev_, DRM_IOWR(0x3E, uint64_t[4]), arg), EINVAL);
}

TEST_P(Uapi, OlderSmallerStructWorksAndOnlyItsSizeIsWritten) {
  // An old binary whose bo_create struct ended before out_size.
  struct old_bo_create {
    __u64 size;
    __u32 flags;
    __u32 handle;
    __u64 npu_va;
  };
  struct {
    old_bo_create a;
    uint64_t guard;
  } buf{{4096, 0, 0, 0}, 0x1122334455667788ull};
  ASSERT_EQ(raw(*dev_, DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_BO_CREATE, old_bo_create), &buf.a), 0);
  EXPECT_NE(buf.a.handle, 0u);
  EXPECT_NE(buf.a.npu_va, 0u);
  EXPECT_EQ(buf.guard, 0x1122334455667788ull);
}

TEST_P(Uapi, NewerLargerStructIsAccepted) {
  struct {
    drm_npu_get_param p;
    uint64_t future[2];
  } big{};
  big.p.param = DRM_NPU_PARAM_DEVICE_ID;
  ASSERT_EQ(raw(*dev_, DRM_IOWR(DRM_COMMAND_BASE + DRM_NPU_GET_PARAM, decltype(big)), &big), 0);
  EXPECT_EQ(big.p.value, hw::kDeviceId);
  EXPECT_EQ(big.future[0], 0u);
}

TEST_P(Uapi, NullArgumentIsEfault) {
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, nullptr), EFAULT);
}

TEST_P(Uapi, BadArgumentPointerIsEfault) {
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, reinterpret_cast<void*>(16)), EFAULT);
}

// An argument the driver must write back (_IOWR) in a read-only page: read, handled, and
// EFAULT on the copy out. On the heap and on another thread's stack it works as on the
// caller's (the model copies the caller's live stack plainly, everything else checked).
TEST_P(Uapi, ArgumentsOffTheCallersStackAreCheckedBothWays) {
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* a = new (mem) drm_npu_get_param{};
  a->param = DRM_NPU_PARAM_DEVICE_ID;
  ASSERT_EQ(mprotect(mem, static_cast<size_t>(page), PROT_READ), 0);
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, mem), EFAULT);
  EXPECT_EQ(a->value, 0u);
  ASSERT_EQ(munmap(mem, static_cast<size_t>(page)), 0);
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, mem), EFAULT);  // unmapped now

  auto heap = std::make_unique<drm_npu_get_param>();
  heap->param = DRM_NPU_PARAM_DEVICE_ID;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, heap.get()), 0);
  EXPECT_EQ(heap->value, hw::kDeviceId);

  // A struct on a thread's stack, used by this thread while that one waits.
  std::atomic<drm_npu_get_param*> theirs{nullptr};
  std::atomic<bool> done{false};
  std::thread owner([&] {
    drm_npu_get_param mine{};
    mine.param = DRM_NPU_PARAM_DEVICE_ID;
    theirs.store(&mine);
    while (!done.load()) std::this_thread::yield();
  });
  while (theirs.load() == nullptr) std::this_thread::yield();
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, theirs.load()), 0);
  EXPECT_EQ(theirs.load()->value, hw::kDeviceId);
  done.store(true);
  owner.join();
}

// ---- buffer objects -------------------------------------------------------------------------
TEST_P(Uapi, BoCreateReturnsHandleVaAndRoundedSize) {
  BoInfo b = bo(100);
  EXPECT_NE(b.handle, 0u);
  EXPECT_GE(b.npu_va, dev_->info().va_start);
  EXPECT_EQ(b.npu_va % dev_->info().page_size, 0u);
  EXPECT_EQ(b.size, dev_->info().page_size);
}

TEST_P(Uapi, BoCreateSizeZeroIsEinval) {
  BoInfo b;
  EXPECT_EQ(dev_->bo_create(0, 0, &b), EINVAL);
}

TEST_P(Uapi, BoCreateSizeMaxIsEinval) {
  BoInfo b;
  EXPECT_EQ(dev_->bo_create(UINT64_MAX, 0, &b), EINVAL);
}

TEST_P(Uapi, BoCreateAboveMaxBoSizeIsEinval) {
  BoInfo b;
  EXPECT_EQ(dev_->bo_create(dev_->info().max_bo_size + 1, 0, &b), EINVAL);
}

TEST_P(Uapi, BoCreateUnknownFlagsIsEinval) {
  BoInfo b;
  EXPECT_EQ(dev_->bo_create(4096, 1u << 31, &b), EINVAL);
  EXPECT_EQ(dev_->bo_create(4096, 2, &b), EINVAL);
}

TEST_P(Uapi, BoHandlesAreNonzeroDistinctAndVasDisjoint) {
  std::vector<BoInfo> bos;
  for (int i = 0; i < 16; ++i) bos.push_back(bo(65536 * (i % 3 + 1)));
  for (size_t i = 0; i < bos.size(); ++i) {
    for (size_t j = i + 1; j < bos.size(); ++j) {
      EXPECT_NE(bos[i].handle, bos[j].handle);
      const bool disjoint = bos[i].npu_va + bos[i].size <= bos[j].npu_va ||
                            bos[j].npu_va + bos[j].size <= bos[i].npu_va;
      EXPECT_TRUE(disjoint);
    }
  }
}

TEST_P(Uapi, BoInfoUnknownHandleIsEnoent) {
  drm_npu_bo_info a{};
  a.handle = 123456;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), ENOENT);
  a.handle = 0;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), ENOENT);
}

TEST_P(Uapi, BoInfoNonzeroFlagsIsEinval) {
  BoInfo b = bo();
  drm_npu_bo_info a{};
  a.handle = b.handle;
  a.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), EINVAL);
}

TEST_P(Uapi, BoInfoMatchesCreate) {
  BoInfo b = bo(3 * 65536);
  drm_npu_bo_info a{};
  a.handle = b.handle;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), 0);
  EXPECT_EQ(a.size, b.size);
  EXPECT_EQ(a.npu_va, b.npu_va);
  EXPECT_EQ(a.mmap_offset % 4096, 0u);
}

TEST_P(Uapi, ClosedHandleIsEnoent) {
  BoInfo b = bo();
  ASSERT_EQ(dev_->bo_destroy(b.handle), 0);
  EXPECT_EQ(dev_->bo_destroy(b.handle), ENOENT);
  drm_npu_bo_info a{};
  a.handle = b.handle;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), ENOENT);
  void* p = nullptr;
  EXPECT_EQ(dev_->bo_map(b.handle, &p), ENOENT);
}

TEST_P(Uapi, GemCloseReleasesHandle) {
  BoInfo b = bo();
  drm_gem_close c{};
  c.handle = b.handle;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_GEM_CLOSE, &c), 0);
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_GEM_CLOSE, &c), ENOENT);
}

TEST_P(Uapi, BoDestroyNonzeroPadIsEinval) {
  BoInfo b = bo();
  drm_npu_bo_destroy a{};
  a.handle = b.handle;
  a.pad = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_DESTROY, &a), EINVAL);
}

TEST_P(Uapi, BoMmapIsSharedBetweenMappings) {
  BoInfo b = bo();
  drm_npu_bo_info a{};
  a.handle = b.handle;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), 0);
  Os& os = dev_->os();
  void* p1 = os.mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                     static_cast<off_t>(a.mmap_offset));
  void* p2 = os.mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                     static_cast<off_t>(a.mmap_offset));
  ASSERT_NE(p1, MAP_FAILED);
  ASSERT_NE(p2, MAP_FAILED);
  static_cast<volatile uint32_t*>(p1)[100] = 0xC0FFEE;
  EXPECT_EQ(static_cast<volatile uint32_t*>(p2)[100], 0xC0FFEEu);
  EXPECT_EQ(os.munmap(p1, a.size), 0);
  EXPECT_EQ(os.munmap(p2, a.size), 0);
}

TEST_P(Uapi, StaleMmapOffsetIsRejected) {
  BoInfo b = bo();
  drm_npu_bo_info a{};
  a.handle = b.handle;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), 0);
  ASSERT_EQ(dev_->bo_destroy(b.handle), 0);
  bo();  // a new BO must not inherit the old offset
  void* p = dev_->os().mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                            static_cast<off_t>(a.mmap_offset));
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(Uapi, MmapOffsetOfAnotherFileIsRejected) {
  auto other = reopen();
  BoInfo b;
  ASSERT_EQ(other->bo_create(65536, 0, &b), 0);
  drm_npu_bo_info a{};
  a.handle = b.handle;
  ASSERT_EQ(raw(*other, DRM_IOCTL_NPU_BO_INFO, &a), 0);
  void* p = dev_->os().mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                            static_cast<off_t>(a.mmap_offset));
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_TRUE(errno == EACCES || errno == EINVAL) << std::strerror(errno);
}

TEST_P(Uapi, MmapLongerThanBoIsEinval) {
  BoInfo b = bo();
  drm_npu_bo_info a{};
  a.handle = b.handle;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_BO_INFO, &a), 0);
  void* p = dev_->os().mmap(nullptr, a.size * 2, PROT_READ | PROT_WRITE, MAP_SHARED, dev_->fd(),
                            static_cast<off_t>(a.mmap_offset));
  EXPECT_EQ(p, MAP_FAILED);
  EXPECT_EQ(errno, EINVAL);
}

TEST_P(Uapi, NewBoIsZeroed) {
  BoInfo b = bo();
  void* p = nullptr;
  ASSERT_EQ(dev_->bo_map(b.handle, &p), 0);
  std::memset(p, 0xAB, b.size);
  ASSERT_EQ(dev_->bo_destroy(b.handle), 0);
  for (int i = 0; i < 4; ++i) {
    BoInfo c = bo();
    void* q = nullptr;
    ASSERT_EQ(dev_->bo_map(c.handle, &q), 0);
    const auto* bytes = static_cast<const unsigned char*>(q);
    for (uint64_t k = 0; k < c.size; k += 997) ASSERT_EQ(bytes[k], 0) << "offset " << k;
  }
}

TEST_P(Uapi, BoMapTwiceReturnsSamePointer) {
  BoInfo b = bo();
  void* p = nullptr;
  void* q = nullptr;
  ASSERT_EQ(dev_->bo_map(b.handle, &p), 0);
  ASSERT_EQ(dev_->bo_map(b.handle, &q), 0);
  EXPECT_EQ(p, q);
  EXPECT_EQ(dev_->bo_unmap(b.handle), 0);
  EXPECT_EQ(dev_->bo_unmap(b.handle), ENOENT);
}

TEST_P(Uapi, BoSyncValidRange) {
  BoInfo b = bo();
  EXPECT_EQ(dev_->bo_sync(b.handle, DRM_NPU_SYNC_TO_DEVICE, 0, b.size), 0);
  EXPECT_EQ(dev_->bo_sync(b.handle, DRM_NPU_SYNC_FROM_DEVICE, 4096, 4096), 0);
}

TEST_P(Uapi, BoSyncBadDirectionIsEinval) {
  BoInfo b = bo();
  EXPECT_EQ(dev_->bo_sync(b.handle, 0, 0, 64), EINVAL);
  EXPECT_EQ(dev_->bo_sync(b.handle, 4, 0, 64), EINVAL);
}

TEST_P(Uapi, BoSyncOutOfRangeIsEinval) {
  BoInfo b = bo();
  EXPECT_EQ(dev_->bo_sync(b.handle, DRM_NPU_SYNC_TO_DEVICE, 0, 0), EINVAL);
  EXPECT_EQ(dev_->bo_sync(b.handle, DRM_NPU_SYNC_TO_DEVICE, 0, b.size + 1), EINVAL);
  EXPECT_EQ(dev_->bo_sync(b.handle, DRM_NPU_SYNC_TO_DEVICE, 64, UINT64_MAX - 32), EINVAL);
}

TEST_P(Uapi, BoSyncUnknownHandleIsEnoent) {
  EXPECT_EQ(dev_->bo_sync(987654, DRM_NPU_SYNC_TO_DEVICE, 0, 64), ENOENT);
}

TEST_P(Uapi, BoHandlesArePerFile) {
  auto other = reopen();
  BoInfo b = bo();
  drm_npu_bo_info a{};
  a.handle = b.handle + 1000;
  EXPECT_EQ(raw(*other, DRM_IOCTL_NPU_BO_INFO, &a), ENOENT);
  a.handle = b.handle;
  BoInfo ob;
  ASSERT_EQ(other->bo_create(65536, 0, &ob), 0);
  // The same number names a different object in the other file.
  ASSERT_EQ(raw(*other, DRM_IOCTL_NPU_BO_INFO, &a), 0);
}

// ---- contexts -------------------------------------------------------------------------------
TEST_P(Uapi, CtxCreateAndDestroy) {
  uint32_t c = ctx();
  EXPECT_NE(c, 0u);
  EXPECT_EQ(dev_->ctx_destroy(c), 0);
}

TEST_P(Uapi, CtxBadPriorityIsEinval) {
  uint32_t c = 0;
  EXPECT_EQ(dev_->ctx_create(DRM_NPU_PRIORITY_REALTIME + 1, &c), EINVAL);
}

TEST_P(Uapi, CtxCreateNonzeroFlagsIsEinval) {
  drm_npu_ctx_create a{};
  a.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_CTX_CREATE, &a), EINVAL);
  a.flags = 0;
  a.pad = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_CTX_CREATE, &a), EINVAL);
}

TEST_P(Uapi, CtxDestroyUnknownOrTwiceIsEnoent) {
  EXPECT_EQ(dev_->ctx_destroy(0), ENOENT);
  uint32_t c = ctx();
  ASSERT_EQ(dev_->ctx_destroy(c), 0);
  EXPECT_EQ(dev_->ctx_destroy(c), ENOENT);
}

TEST_P(Uapi, CtxLimitIsEnospcAndCountIsExposed) {
  const uint32_t max = dev_->info().max_contexts;
  drm_npu_get_param p{};
  p.param = DRM_NPU_PARAM_CONTEXT_COUNT;
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &p), 0);
  const uint64_t before = p.value;
  std::vector<uint32_t> ids;
  int err = 0;
  for (uint32_t i = 0; i <= max; ++i) {
    uint32_t c = 0;
    err = dev_->ctx_create(DRM_NPU_PRIORITY_LOW, &c);
    if (err != 0) break;
    ids.push_back(c);
  }
  EXPECT_EQ(err, ENOSPC);
  EXPECT_EQ(ids.size() + before, max);
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_GET_PARAM, &p), 0);
  EXPECT_EQ(p.value, max);
  ASSERT_EQ(dev_->ctx_destroy(ids.back()), 0);
  uint32_t c = 0;
  EXPECT_EQ(dev_->ctx_create(DRM_NPU_PRIORITY_LOW, &c), 0);
}

TEST_P(Uapi, CtxQueryFreshContext) {
  uint32_t c = ctx(DRM_NPU_PRIORITY_HIGH);
  ContextState s;
  ASSERT_EQ(dev_->ctx_query(c, &s), 0);
  EXPECT_EQ(s.state, static_cast<uint32_t>(DRM_NPU_CTX_STATE_ACTIVE));
  EXPECT_EQ(s.priority, static_cast<uint32_t>(DRM_NPU_PRIORITY_HIGH));
  EXPECT_EQ(s.last_submitted_seq, 0u);
  EXPECT_EQ(s.pending, 0u);
}

TEST_P(Uapi, CtxQueryNonzeroFlagsIsEinval) {
  drm_npu_ctx_query a{};
  a.ctx_id = ctx();
  a.flags = 2;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_CTX_QUERY, &a), EINVAL);
}

TEST_P(Uapi, WrongContextFromAnotherFileIsEnoent) {
  auto other = reopen();
  uint32_t theirs = 0;
  ASSERT_EQ(other->ctx_create(DRM_NPU_PRIORITY_NORMAL, &theirs), 0);
  ContextState s;
  EXPECT_EQ(dev_->ctx_query(theirs, &s), ENOENT);
  EXPECT_EQ(dev_->ctx_destroy(theirs), ENOENT);
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t seq = 0;
  EXPECT_EQ(dev_->submit(theirs, {}, cmd.bo.handle, 0, cmd.bytes, &seq), ENOENT);
  JobResult r;
  EXPECT_EQ(dev_->wait(theirs, 1, deadline_after_ms(10), &r), ENOENT);
}

TEST_P(Uapi, OneHundredTwentyEightOpenFiles) {
  std::vector<std::unique_ptr<UmdDevice>> files;
  for (int i = 0; i < 128; ++i) {
    auto d = reopen();
    ASSERT_NE(d, nullptr) << "open #" << i;
    files.push_back(std::move(d));
  }
  int created = 0, enospc = 0;
  for (auto& f : files) {
    BoInfo b;
    ASSERT_EQ(f->bo_create(65536, 0, &b), 0);
    uint32_t c = 0;
    const int e = f->ctx_create(DRM_NPU_PRIORITY_NORMAL, &c);
    if (e == 0) ++created;
    else if (e == ENOSPC) ++enospc;
    else ADD_FAILURE() << f->describe_error(e);
  }
  EXPECT_GT(created, 0);
  EXPECT_EQ(created + enospc, 128);
  // Every file still works; closing them frees their contexts.
  files.clear();
  uint32_t c = 0;
  EXPECT_EQ(dev_->ctx_create(DRM_NPU_PRIORITY_NORMAL, &c), 0);
}

// ---- submit ---------------------------------------------------------------------------------
TEST_P(Uapi, SubmitNopSucceedsWithMonotonicSeq) {
  uint32_t c = ctx();
  uint64_t s1 = submit_program(*dev_, c, nop_program());
  uint64_t s2 = submit_program(*dev_, c, nop_program(4));
  EXPECT_EQ(s1, 1u);
  EXPECT_EQ(s2, 2u);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, s2, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
  ASSERT_EQ(wait_ms(*dev_, c, s1, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
  ContextState s;
  ASSERT_EQ(dev_->ctx_query(c, &s), 0);
  EXPECT_EQ(s.last_completed_seq, 2u);
}

TEST_P(Uapi, SubmitCopyProgramMovesDataAndReportsCycles) {
  const uint32_t n = dev_->info().array_dim;
  BoInfo src = bo(), dst = bo();
  void *ps = nullptr, *pd = nullptr;
  ASSERT_EQ(dev_->bo_map(src.handle, &ps), 0);
  ASSERT_EQ(dev_->bo_map(dst.handle, &pd), 0);
  for (uint32_t i = 0; i < 8 * n; ++i) static_cast<uint8_t*>(ps)[i] = static_cast<uint8_t>(i * 7 + 1);
  uint32_t c = ctx();
  std::vector<uint32_t> bos = {src.handle, dst.handle};
  uint64_t seq = submit_program(
      *dev_, c, copy_program(static_cast<uint32_t>(src.npu_va), static_cast<uint32_t>(dst.npu_va), 8, n),
      bos);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  ASSERT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS)) << r.device_error;
  EXPECT_EQ(std::memcmp(ps, pd, 8 * n), 0);
  EXPECT_GT(r.device_cycles, 0u);
}

TEST_P(Uapi, SubmitNonzeroFlagsIsEinval) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  drm_npu_submit a{};
  a.ctx_id = c;
  a.cmd_handle = cmd.bo.handle;
  a.cmd_size = 32;
  a.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &a), EINVAL);
}

TEST_P(Uapi, SubmitUnknownContextIsEnoent) {
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(0xFFFF, {}, cmd.bo.handle, 0, 32, &seq), ENOENT);
}

TEST_P(Uapi, SubmitUnknownCmdBoIsEnoent) {
  uint32_t c = ctx();
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, {}, 4242, 0, 32, &seq), ENOENT);
}

TEST_P(Uapi, SubmitUnknownBoInListIsEnoent) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  std::vector<uint32_t> bos = {cmd.bo.handle, 777777};
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, bos, cmd.bo.handle, 0, 32, &seq), ENOENT);
}

TEST_P(Uapi, SubmitClosedCmdHandleIsEnoent) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  ASSERT_EQ(dev_->bo_destroy(cmd.bo.handle), 0);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 0, 32, &seq), ENOENT);
}

TEST_P(Uapi, SubmitMisalignedOffsetIsEinval) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(4), &cmd), 0);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 16, 32, &seq), EINVAL);
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 1, 32, &seq), EINVAL);
}

TEST_P(Uapi, SubmitOutOfRangeOffsetIsEinval) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, cmd.bo.size, 32, &seq), EINVAL);
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, cmd.bo.size - 32, 64, &seq), EINVAL);
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 1ull << 40, 32, &seq), EINVAL);
}

TEST_P(Uapi, SubmitBadSizeIsEinval) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 0, 0, &seq), EINVAL);
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 0, 48, &seq), EINVAL);
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 32, UINT64_MAX - 31, &seq), EINVAL);
}

TEST_P(Uapi, SubmitBadHandleArrayPointerIsEfault) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  drm_npu_submit a{};
  a.ctx_id = c;
  a.cmd_handle = cmd.bo.handle;
  a.cmd_size = 32;
  a.bo_handles = 8;
  a.bo_count = 2;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &a), EFAULT);
}

TEST_P(Uapi, SubmitTooManyBosIsEinval) {
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  std::vector<uint32_t> bos(5000, cmd.bo.handle);
  uint64_t seq;
  EXPECT_EQ(dev_->submit(c, bos, cmd.bo.handle, 0, 32, &seq), EINVAL);
}

TEST_P(Uapi, SubmitInSyncOrdersAcrossContexts) {
  uint32_t a = ctx(DRM_NPU_PRIORITY_LOW), b = ctx(DRM_NPU_PRIORITY_REALTIME);
  uint64_t sa = submit_program(*dev_, a, nop_program(64));
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  drm_npu_sync dep{a, 0, sa};
  drm_npu_submit s{};
  s.ctx_id = b;
  s.cmd_handle = cmd.bo.handle;
  s.cmd_size = 32;
  s.in_syncs = reinterpret_cast<uintptr_t>(&dep);
  s.in_sync_count = 1;
  s.in_sync_struct_size = sizeof(dep);
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &s), 0);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, b, s.seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
  // b's job could only start after a's ended.
  ContextState st;
  ASSERT_EQ(dev_->ctx_query(a, &st), 0);
  EXPECT_EQ(st.last_completed_seq, sa);
}

TEST_P(Uapi, SubmitInSyncInvalidIsRejected) {
  uint32_t a = ctx(), b = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  drm_npu_sync dep{a, 0, 5};  // a has no job 5
  drm_npu_submit s{};
  s.ctx_id = b;
  s.cmd_handle = cmd.bo.handle;
  s.cmd_size = 32;
  s.in_syncs = reinterpret_cast<uintptr_t>(&dep);
  s.in_sync_count = 1;
  s.in_sync_struct_size = sizeof(dep);
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &s), EINVAL);
  s.in_sync_struct_size = 8;  // smaller than the element
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &s), EINVAL);
  dep = {0xABCDEF, 0, 1};
  s.in_sync_struct_size = sizeof(dep);
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &s), ENOENT);
  s.in_syncs = 24;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_SUBMIT, &s), EFAULT);
}

TEST_P(Uapi, WriteToReadOnlyBoIsPageFaultAndBansContext) {
  const uint32_t n = dev_->info().array_dim;
  BoInfo src = bo(), ro = bo(65536, DRM_NPU_BO_DEVICE_RDONLY);
  uint32_t c = ctx();
  std::vector<uint32_t> bos = {src.handle, ro.handle};
  uint64_t seq = submit_program(
      *dev_, c, copy_program(static_cast<uint32_t>(src.npu_va), static_cast<uint32_t>(ro.npu_va), 1, n),
      bos);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_PAGE_FAULT));
  EXPECT_EQ(r.device_error, static_cast<uint32_t>(hw::ErrorCode::kPageFault));
  EXPECT_EQ(r.error_addr, ro.npu_va);
  ContextState st;
  ASSERT_EQ(dev_->ctx_query(c, &st), 0);
  EXPECT_EQ(st.state, static_cast<uint32_t>(DRM_NPU_CTX_STATE_BANNED));
  EXPECT_EQ(st.fault_addr, ro.npu_va);
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t s2;
  EXPECT_EQ(dev_->submit(c, {}, cmd.bo.handle, 0, 32, &s2), EBADFD);
  // Other contexts are unaffected.
  uint32_t c2 = ctx();
  uint64_t s3 = submit_program(*dev_, c2, nop_program());
  ASSERT_EQ(wait_ms(*dev_, c2, s3, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

TEST_P(Uapi, LoadFromUnmappedVaIsPageFault) {
  const uint32_t n = dev_->info().array_dim;
  BoInfo dst = bo();
  uint32_t c = ctx();
  // VA 0 is never mapped.
  uint64_t seq = submit_program(*dev_, c, copy_program(0, static_cast<uint32_t>(dst.npu_va), 1, n),
                                {dst.handle});
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_PAGE_FAULT));
  EXPECT_EQ(r.error_addr, 0u);
}

TEST_P(Uapi, IllegalInstructionIsDeviceErrorAndContextSurvives) {
  uint32_t c = ctx();
  Program bad(1, isa::Words{0x3F, 0, 0, 0, 0, 0, 0, 0});
  uint64_t seq = submit_program(*dev_, c, bad);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_DEVICE_ERROR));
  EXPECT_EQ(r.device_error, static_cast<uint32_t>(hw::ErrorCode::kIllegalInstruction));
  uint64_t s2 = submit_program(*dev_, c, nop_program());
  ASSERT_EQ(wait_ms(*dev_, c, s2, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

TEST_P(Uapi, QueueFullIsEbusy) {
  if (!model()) GTEST_SKIP() << "model-only: needs a hang injection to hold the queue";
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(), &cmd), 0);
  uint64_t seq = 0;
  uint32_t ok = 0;
  int err = 0;
  for (uint32_t i = 0; i <= dev_->info().queue_depth; ++i) {
    err = dev_->submit(c, {}, cmd.bo.handle, 0, 32, &seq);
    if (err != 0) break;
    ++ok;
  }
  EXPECT_EQ(err, EBUSY);
  EXPECT_EQ(ok, dev_->info().queue_depth);
  JobResult r;
  EXPECT_EQ(wait_ms(*dev_, c, 1, &r), 0);  // the hang resolves by reset
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_TIMEOUT));
  EXPECT_EQ(wait_ms(*dev_, c, ok, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

// ---- wait -----------------------------------------------------------------------------------
TEST_P(Uapi, WaitDeadlineInThePast) {
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  // Already ended: a past deadline still reports it.
  EXPECT_EQ(dev_->wait(c, seq, 0, &r), 0);
  EXPECT_EQ(dev_->wait(c, seq, monotonic_ns() - 1'000'000'000, &r), 0);
  if (!model()) return;
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint64_t hung = submit_program(*dev_, c, nop_program());
  const int64_t t0 = monotonic_ns();
  EXPECT_EQ(dev_->wait(c, hung, t0 - 1, &r), ETIMEDOUT);
  EXPECT_LT(monotonic_ns() - t0, 100'000'000);  // polled, did not block
}

TEST_P(Uapi, WaitTimesOutAtDeadline) {
  if (!model()) GTEST_SKIP() << "model-only: needs a hang injection";
  ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 2000), 0);
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  JobResult r;
  const int64_t t0 = monotonic_ns();
  EXPECT_EQ(dev_->wait(c, seq, t0 + 50'000'000, &r), ETIMEDOUT);
  EXPECT_GE(monotonic_ns() - t0, 50'000'000);
}

TEST_P(Uapi, WaitInvalidArgs) {
  uint32_t c = ctx();
  JobResult r;
  EXPECT_EQ(dev_->wait(c, 0, deadline_after_ms(10), &r), EINVAL);
  EXPECT_EQ(dev_->wait(c, 1, deadline_after_ms(10), &r), EINVAL);  // nothing submitted
  EXPECT_EQ(dev_->wait(999999, 1, deadline_after_ms(10), &r), ENOENT);
  drm_npu_wait w{};
  w.ctx_id = c;
  w.seq = 1;
  w.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_WAIT, &w), EINVAL);
}

TEST_P(Uapi, WaitOnTheWrongContextIsEinval) {
  uint32_t a = ctx(), b = ctx();
  uint64_t seq = submit_program(*dev_, a, nop_program());
  JobResult r;
  EXPECT_EQ(dev_->wait(b, seq, deadline_after_ms(10), &r), EINVAL);
  EXPECT_EQ(wait_ms(*dev_, a, seq, &r), 0);
}

TEST_P(Uapi, ResetDuringWaitAbortsTheJob) {
  if (!model()) GTEST_SKIP() << "model-only: needs a hang injection";
  ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 10000), 0);
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  std::string err;
  auto admin = UmdDevice::open_with_os(make_model_os({ModelCredentials::Privilege::kPrivileged}),
                                       GetParam(), &err);
  ASSERT_NE(admin, nullptr) << err;
  std::atomic<int> rc{-1};
  JobResult r;
  std::thread waiter([&] { rc = dev_->wait(c, seq, deadline_after_ms(8000), &r); });
  // The waiter is blocked (the device is stuck); a reset must release it.
  ASSERT_EQ(dev_->wait(c, seq, deadline_after_ms(100), nullptr), ETIMEDOUT);
  ASSERT_EQ(admin->reset(), 0);
  waiter.join();
  EXPECT_EQ(rc.load(), EIO);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_ABORTED));
  uint64_t next = submit_program(*dev_, c, nop_program());
  ASSERT_EQ(wait_ms(*dev_, c, next, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

TEST_P(Uapi, UnplugDuringWaitIsEnodevAndReopenWorks) {
  if (!model()) GTEST_SKIP() << "model-only: unplug is simulated";
  ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 10000), 0);
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  std::atomic<int> rc{-1};
  std::thread waiter([&] {
    JobResult r;
    rc = dev_->wait(c, seq, deadline_after_ms(8000), &r);
  });
  ASSERT_EQ(dev_->wait(c, seq, deadline_after_ms(100), nullptr), ETIMEDOUT);
  ASSERT_EQ(kmd::unplug(GetParam()), 0);
  waiter.join();
  EXPECT_EQ(rc.load(), ENODEV);
  BoInfo b;
  EXPECT_EQ(dev_->bo_create(4096, 0, &b), ENODEV);
  std::string err;
  auto fresh = UmdDevice::open(GetParam(), &err);
  ASSERT_NE(fresh, nullptr) << err;
  uint32_t c2 = 0;
  ASSERT_EQ(fresh->ctx_create(DRM_NPU_PRIORITY_NORMAL, &c2), 0);
  uint64_t s2 = submit_program(*fresh, c2, nop_program());
  JobResult r;
  ASSERT_EQ(wait_ms(*fresh, c2, s2, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

TEST_P(Uapi, ContextDestroyAbortsPendingJobsOfWaiters) {
  if (!model()) GTEST_SKIP() << "model-only: needs a hang injection";
  ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 10000), 0);
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  std::atomic<int> rc{-1};
  JobResult r;
  std::thread waiter([&] { rc = dev_->wait(c, seq, deadline_after_ms(8000), &r); });
  ASSERT_EQ(dev_->wait(c, seq, deadline_after_ms(100), nullptr), ETIMEDOUT);
  ASSERT_EQ(dev_->ctx_destroy(c), 0);
  waiter.join();
  EXPECT_EQ(rc.load(), EIO);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_ABORTED));
  kmd::set_hang_timeout_ms(GetParam(), 100);  // let the stuck device recover before exit
}

// A job still in a ring holds the only reference to a context its file destroyed; a reset
// then ends that job and must not touch the context after freeing it (found by fuzz_replay;
// the AddressSanitizer run of this suite reported a heap-use-after-free in reset_locked).
TEST_P(Uapi, ResetAfterContextDestroyedWithItsJobInARing) {
  if (!model()) GTEST_SKIP() << "model-only: needs a hang injection";
  ASSERT_EQ(kmd::set_hang_timeout_ms(GetParam(), 10000), 0);
  ASSERT_EQ(kmd::inject_fault(GetParam(), {kmd::Fault::kHang, 0, 1}), 0);
  uint32_t c = ctx();
  submit_program(*dev_, c, nop_program());
  ASSERT_EQ(dev_->ctx_destroy(c), 0);
  std::string err;
  auto admin = UmdDevice::open_with_os(make_model_os({ModelCredentials::Privilege::kPrivileged}),
                                       GetParam(), &err);
  ASSERT_NE(admin, nullptr) << err;
  ASSERT_EQ(admin->reset(), 0);
  uint32_t c2 = 0;
  ASSERT_EQ(dev_->ctx_create(DRM_NPU_PRIORITY_NORMAL, &c2), 0);
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c2, submit_program(*dev_, c2, nop_program()), &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

// ---- perf, privileged path, poll ------------------------------------------------------------
TEST_P(Uapi, PerfNullReturnsCount) {
  drm_npu_perf p{};
  ASSERT_EQ(raw(*dev_, DRM_IOCTL_NPU_PERF, &p), 0);
  EXPECT_EQ(p.count, hw::kNumCounters);
  p.flags = 1;
  EXPECT_EQ(raw(*dev_, DRM_IOCTL_NPU_PERF, &p), EINVAL);
}

TEST_P(Uapi, PerfCountsJobs) {
  std::vector<uint64_t> before, after;
  ASSERT_EQ(dev_->read_counters(&before), 0);
  ASSERT_EQ(before.size(), hw::kNumCounters);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program(3));
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  ASSERT_EQ(dev_->read_counters(&after), 0);
  const auto jobs = static_cast<size_t>(hw::Counter::kJobs);
  const auto instrs = static_cast<size_t>(hw::Counter::kInstrs);
  // Counters reset with the device; when no reset happened in between they grew.
  uint64_t rc = 0;
  ASSERT_EQ(dev_->reset_count(&rc), 0);
  EXPECT_GE(after[jobs], 1u);
  EXPECT_GE(after[instrs], 3u);
}

TEST_P(Uapi, PrivilegedIoctlsNeedPrivilege) {
  std::unique_ptr<UmdDevice> user;
  if (model()) {
    std::string err;
    user = UmdDevice::open_with_os(make_model_os({ModelCredentials::Privilege::kUnprivileged}),
                                   GetParam(), &err);
    ASSERT_NE(user, nullptr) << err;
  } else {
    if (geteuid() == 0) GTEST_SKIP() << "running as root: cannot test EACCES on a real node";
    user = std::move(dev_);
  }
  uint32_t v = 0;
  EXPECT_EQ(user->reg_read(hw::reg::ID, &v), EACCES);
  EXPECT_EQ(user->reg_write(hw::reg::IRQ_MASK, 0), EACCES);
  EXPECT_EQ(user->reset(), EACCES);
  drm_npu_reg bad{};
  bad.offset = 3;  // EACCES comes before argument checks
  EXPECT_EQ(raw(*user, DRM_IOCTL_NPU_REG_READ, &bad), EACCES);
}

TEST_P(Uapi, RegReadPrivileged) {
  std::unique_ptr<UmdDevice> admin;
  if (model()) {
    std::string err;
    admin = UmdDevice::open_with_os(make_model_os({ModelCredentials::Privilege::kPrivileged}),
                                    GetParam(), &err);
    ASSERT_NE(admin, nullptr) << err;
  } else {
    if (geteuid() != 0) GTEST_SKIP() << "needs root on a real node";
    admin = std::move(dev_);
  }
  uint32_t v = 0;
  ASSERT_EQ(admin->reg_read(hw::reg::ID, &v), 0);
  EXPECT_EQ(v, hw::kDeviceId);
  EXPECT_EQ(admin->reg_read(hw::reg::CONFIG, &v), 0);
  EXPECT_EQ(v & 0xFF, admin->info().array_dim);
  EXPECT_EQ(admin->reg_read(2, &v), EINVAL);
  EXPECT_EQ(admin->reg_read(hw::reg::REGISTER_SPACE_BYTES, &v), EINVAL);
  EXPECT_EQ(admin->reg_write(0x1001, 0), EINVAL);
}

TEST_P(Uapi, ResetBumpsCountAndNextJobSucceeds) {
  std::unique_ptr<UmdDevice> admin;
  if (model()) {
    std::string err;
    admin = UmdDevice::open_with_os(make_model_os({ModelCredentials::Privilege::kPrivileged}),
                                    GetParam(), &err);
    ASSERT_NE(admin, nullptr) << err;
  } else {
    if (geteuid() != 0) GTEST_SKIP() << "needs root on a real node";
    admin = reopen();
  }
  uint64_t before = 0, after = 0;
  ASSERT_EQ(admin->reset_count(&before), 0);
  ASSERT_EQ(admin->reset(), 0);
  ASSERT_EQ(admin->reset_count(&after), 0);
  EXPECT_EQ(after, before + 1);
  drm_npu_reset bad{1, 0};
  EXPECT_EQ(raw(*admin, DRM_IOCTL_NPU_RESET, &bad), EINVAL);
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
}

TEST_P(Uapi, PollSignalsJobEnd) {
  uint32_t c = ctx();
  uint64_t seq = submit_program(*dev_, c, nop_program());
  struct pollfd p = {dev_->fd(), POLLIN, 0};
  ASSERT_EQ(dev_->os().poll(&p, 1, 5000), 1);
  EXPECT_TRUE(p.revents & POLLIN);
  JobResult r;
  EXPECT_EQ(wait_ms(*dev_, c, seq, &r), 0);
}

TEST_P(Uapi, ManyJobsAcrossPrioritiesAllSucceed) {
  std::vector<uint32_t> ctxs;
  for (uint32_t p = DRM_NPU_PRIORITY_LOW; p <= DRM_NPU_PRIORITY_REALTIME; ++p) ctxs.push_back(ctx(p));
  CmdBo cmd;
  ASSERT_EQ(make_cmd_bo(*dev_, nop_program(8), &cmd), 0);
  std::vector<std::pair<uint32_t, uint64_t>> jobs;
  for (int i = 0; i < 40; ++i) {
    for (uint32_t c : ctxs) {
      uint64_t seq;
      ASSERT_EQ(dev_->submit(c, {}, cmd.bo.handle, 0, cmd.bytes, &seq), 0);
      jobs.emplace_back(c, seq);
    }
  }
  for (auto [c, seq] : jobs) {
    JobResult r;
    ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
    EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
  }
}

TEST_P(Uapi, BoOutlivesHandleWhileJobRuns) {
  const uint32_t n = dev_->info().array_dim;
  BoInfo src = bo(), dst = bo();
  void *ps = nullptr, *pd = nullptr;
  ASSERT_EQ(dev_->bo_map(src.handle, &ps), 0);
  ASSERT_EQ(dev_->bo_map(dst.handle, &pd), 0);
  std::memset(ps, 0x5A, n * 4);
  uint32_t c = ctx();
  std::vector<uint32_t> bos = {src.handle, dst.handle};
  uint64_t seq = submit_program(
      *dev_, c, copy_program(static_cast<uint32_t>(src.npu_va), static_cast<uint32_t>(dst.npu_va), 4, n),
      bos);
  ASSERT_EQ(dev_->bo_unmap(src.handle), 0);
  ASSERT_EQ(dev_->bo_destroy(src.handle), 0);  // the job still holds it
  JobResult r;
  ASSERT_EQ(wait_ms(*dev_, c, seq, &r), 0);
  EXPECT_EQ(r.status, static_cast<uint32_t>(DRM_NPU_JOB_SUCCESS));
  EXPECT_EQ(static_cast<uint8_t*>(pd)[0], 0x5A);
}

TEST_P(Uapi, CloseReleasesDeviceMemory) {
  if (!model()) GTEST_SKIP() << "model-only: reads the model's memory statistics";
  kmd::Stats before, after;
  ASSERT_EQ(kmd::stats(GetParam(), &before), 0);
  {
    auto f = reopen();
    BoInfo b;
    ASSERT_EQ(f->bo_create(4 << 20, 0, &b), 0);
    void* p = nullptr;
    ASSERT_EQ(f->bo_map(b.handle, &p), 0);
    uint32_t c = 0;
    ASSERT_EQ(f->ctx_create(DRM_NPU_PRIORITY_NORMAL, &c), 0);
    uint64_t seq = submit_program(*f, c, nop_program());
    JobResult r;
    ASSERT_EQ(wait_ms(*f, c, seq, &r), 0);
  }
  ASSERT_EQ(kmd::stats(GetParam(), &after), 0);
  EXPECT_EQ(after.free_dram, before.free_dram);
  EXPECT_EQ(after.open_files, before.open_files);
  EXPECT_EQ(after.contexts, before.contexts);
}

TEST_P(Uapi, DescribeErrorIsActionable) {
  EXPECT_NE(dev_->describe_error(EBADFD).find("destroy"), std::string::npos);
  EXPECT_NE(dev_->describe_error(ENOSPC).find("contexts"), std::string::npos);
  EXPECT_NE(dev_->describe_error(ENODEV).find("reopen"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, Uapi, ::testing::Values("sim", "rtl", "real"),
                         [](const auto& p) { return p.param; });

// ---- open-time checks (model, not parameterised) ----------------------------------------------
TEST(UapiOpen, UnknownSpecIsExplained) {
  std::string err;
  EXPECT_EQ(UmdDevice::open("bogus", &err), nullptr);
  EXPECT_NE(err.find("sim, rtl, accel:N"), std::string::npos) << err;
  EXPECT_EQ(UmdDevice::open("accel:x", &err), nullptr);
  EXPECT_EQ(UmdDevice::open("/dev/accel/accel99", &err), nullptr);
  EXPECT_NE(err.find("accel99"), std::string::npos) << err;
}

TEST(UapiOpen, RtlNotBuiltIsExplained) {
  if (kmd::device_available("rtl")) GTEST_SKIP() << "rtl is built";
  std::string err;
  EXPECT_EQ(UmdDevice::open("rtl", &err), nullptr);
  EXPECT_NE(err.find("rtl device not built"), std::string::npos) << err;
}

TEST(UapiOpen, NotAnNpuIsExplained) {
  // /dev/null answers DRM_IOCTL_VERSION with ENOTTY: not a DRM device at all.
  std::string err;
  EXPECT_EQ(UmdDevice::open("/dev/null", &err), nullptr);
  EXPECT_NE(err.find("expected"), std::string::npos) << err;
}

TEST(UapiOpen, EaccesDiagnosisNamesTheRule) {
  // A root-owned 0600 node opened by an unprivileged user (a child that drops to nobody).
  char path[] = "/tmp/npu-eacces-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_EQ(chmod(path, 0600), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    std::string err;
    auto d = UmdDevice::open(path, &err);
    ssize_t w = write(pipefd[1], err.data(), err.size());
    _exit(d == nullptr && w > 0 ? 0 : 1);
  }
  close(pipefd[1]);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  unlink(path);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << msg;
  EXPECT_NE(msg.find("permission denied"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mode 0600"), std::string::npos) << msg;
  EXPECT_NE(msg.find("NOT in group"), std::string::npos) << msg;
  EXPECT_NE(msg.find("70-npu.rules"), std::string::npos) << msg;
  EXPECT_NE(msg.find("GROUP=\"render\""), std::string::npos) << msg;
}

TEST(UapiOpen, ListDevicesHasSim) {
  auto devs = list_devices();
  EXPECT_NE(std::find(devs.begin(), devs.end(), "sim"), devs.end());
}

}  // namespace
}  // namespace npu::driver::test
