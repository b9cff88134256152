// HAL conformance suite: written once against the public HAL API and run on the backend named
// by NPU_TEST_DEVICE (sim by default; rtl; accel:N on hardware).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "image_builder.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/hal/api.h"
#include "test_device.h"

namespace npu::hal {
namespace {

using test::test_device;

class HalCts : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto d = open_device(test_device());
    ASSERT_TRUE(d.is_ok()) << d.status().to_string();
    device_ = std::move(d).value();
  }
  static void TearDownTestSuite() { device_.reset(); }

  std::shared_ptr<Executable> load(const test::ImageOptions& o = {}) {
    test::ImageOptions opts = o;
    opts.array_dim = device_->info().array_dim;
    opts.fingerprint = device_->info().fingerprint;
    auto exe = runtime::load_executable(device_, test::identity_image(opts));
    EXPECT_TRUE(exe.is_ok()) << exe.status().to_string();
    return exe.is_ok() ? std::move(exe).value() : nullptr;
  }
  static void fill_input(Buffer& act, uint8_t seed) {
    for (int row = 0; row < 4; ++row)
      for (int c = 0; c < 16; ++c)
        act.host()[static_cast<size_t>(32 * row + c)] = static_cast<std::byte>(seed + 16 * row + c);
  }
  static bool output_matches(const Buffer& act, uint8_t seed) {
    for (int row = 0; row < 4; ++row)
      for (int c = 0; c < 16; ++c)
        if (act.host()[static_cast<size_t>(256 + 16 * row + c)] !=
            static_cast<std::byte>(seed + 16 * row + c))
          return false;
    return true;
  }
  static std::shared_ptr<Device> device_;
};
std::shared_ptr<Device> HalCts::device_;

TEST_F(HalCts, DeviceInfoDescribesTheHardware) {
  const DeviceInfo& i = device_->info();
  EXPECT_EQ(i.spec, test_device());
  EXPECT_TRUE(i.array_dim == 8 || i.array_dim == 16 || i.array_dim == 32) << i.array_dim;
  EXPECT_EQ(i.fingerprint, hw::fingerprint_for_dim(i.array_dim));
  EXPECT_EQ(i.isa_version >> 16, hw::kIsaVersionMajor);
  EXPECT_GT(i.queue_depth, 0u);
  EXPECT_EQ(i.page_size, hw::kPageBytes);
  EXPECT_FALSE(i.describe().empty());
  auto counters = device_->read_counters();
  ASSERT_TRUE(counters.is_ok()) << counters.status().to_string();
  EXPECT_EQ(counters->size(), hw::kNumCounters);
}

TEST_F(HalCts, BuffersAreZeroedPageRoundedDistinctAndMapped) {
  std::vector<std::shared_ptr<Buffer>> bufs;
  for (int k = 0; k < 3; ++k) {
    auto b = device_->allocate(100, BufferUsage::kDeviceReadWrite);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    EXPECT_EQ((*b)->size() % device_->info().page_size, 0u);
    EXPECT_GE((*b)->size(), 100u);
    for (std::byte x : (*b)->host()) ASSERT_EQ(x, std::byte{0});
    (*b)->host()[7] = std::byte{42};
    EXPECT_TRUE((*b)->sync_to_device(0, 100).is_ok());
    EXPECT_EQ((*b)->sync_to_device((*b)->size(), 1).code(), StatusCode::kInvalidArgument);
    bufs.push_back(std::move(b).value());
  }
  for (size_t a = 0; a < bufs.size(); ++a)
    for (size_t b = a + 1; b < bufs.size(); ++b) {
      const uint64_t a0 = bufs[a]->device_address(), b0 = bufs[b]->device_address();
      EXPECT_TRUE(a0 + bufs[a]->size() <= b0 || b0 + bufs[b]->size() <= a0) << "overlapping VAs";
    }
  EXPECT_EQ(device_->allocate(0, BufferUsage::kDeviceReadWrite).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(HalCts, AJobRunsThroughAContextAndItsFence) {
  auto exe = load();
  ASSERT_TRUE(exe);
  auto inst = exe->instantiate();
  ASSERT_TRUE(inst.is_ok()) << inst.status().to_string();
  fill_input((*inst)->activations(), 5);
  auto ctx = device_->create_context(Priority::kNormal);
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  auto cb = (*inst)->command_buffer(0);
  ASSERT_TRUE(cb.is_ok());
  auto fence = (*ctx)->submit(*cb);
  ASSERT_TRUE(fence.is_ok()) << fence.status().to_string();
  EXPECT_EQ(fence->sequence(), 1u);
  auto r = fence->wait(deadline_after(std::chrono::seconds(60)));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_GT(r->device_cycles, 0u);
  EXPECT_TRUE(output_matches((*inst)->activations(), 5));
  // The end of a job is cached: waiting again, or polling, returns it at once.
  auto again = fence->poll();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->device_cycles, r->device_cycles);
  auto st = (*ctx)->query();
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ(st->health, ContextHealth::kActive);
  EXPECT_EQ(st->pending, 0u);
}

TEST_F(HalCts, JobsHoldTheirBuffersAfterTheCallerDropsThem) {
  auto exe = load();
  ASSERT_TRUE(exe);
  auto ctx = device_->create_context(Priority::kHigh);
  ASSERT_TRUE(ctx.is_ok());
  std::weak_ptr<Buffer> weak;
  Fence fence;
  {
    std::shared_ptr<ExecutableInstance> inst = std::move(exe->instantiate()).value();
    fill_input(inst->activations(), 9);
    weak = inst->shared_activations();
    auto f = (*ctx)->submit(std::move(inst->command_buffer(0)).value());
    ASSERT_TRUE(f.is_ok());
    fence = *f;
  }
  EXPECT_FALSE(weak.expired()) << "the fence must hold the job's buffers";
  auto r = fence.wait(deadline_after(std::chrono::seconds(60)));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(weak.expired()) << "the buffers are released once the job has ended";
}

TEST_F(HalCts, ContextsOfEveryPriorityInterleave) {
  auto exe = load();
  ASSERT_TRUE(exe);
  std::vector<std::shared_ptr<Context>> contexts;
  for (Priority p : {Priority::kLow, Priority::kNormal, Priority::kHigh, Priority::kRealtime}) {
    auto c = device_->create_context(p);
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_EQ((*c)->priority(), p);
    contexts.push_back(std::move(c).value());
  }
  std::vector<std::shared_ptr<ExecutableInstance>> insts;
  std::vector<Fence> fences;
  const uint32_t per_ctx = std::min<uint32_t>(4, device_->info().queue_depth);
  for (uint32_t j = 0; j < per_ctx; ++j) {
    for (size_t c = 0; c < contexts.size(); ++c) {
      std::shared_ptr<ExecutableInstance> inst = std::move(exe->instantiate()).value();
      fill_input(inst->activations(), static_cast<uint8_t>(j * 4 + c));
      auto f = contexts[c]->submit(std::move(inst->command_buffer(0)).value());
      ASSERT_TRUE(f.is_ok()) << f.status().to_string();
      EXPECT_EQ(f->sequence(), j + 1);
      fences.push_back(*f);
      insts.push_back(std::move(inst));
    }
  }
  for (size_t k = 0; k < fences.size(); ++k) {
    auto r = fences[k].wait(deadline_after(std::chrono::seconds(60)));
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE(output_matches(insts[k]->activations(), static_cast<uint8_t>(k)));
  }
}

TEST_F(HalCts, APageFaultBansOnlyItsContext) {
  test::ImageOptions bad;
  bad.fault = true;
  bad.fault_va = 0xFFFF0000u;
  auto faulty = load(bad);
  auto good = load();
  ASSERT_TRUE(faulty && good);
  auto ctx = device_->create_context(Priority::kNormal);
  auto other = device_->create_context(Priority::kNormal);
  ASSERT_TRUE(ctx.is_ok() && other.is_ok());
  auto fi = faulty->instantiate();
  auto f = (*ctx)->submit(std::move((*fi)->command_buffer(0)).value());
  ASSERT_TRUE(f.is_ok());
  auto r = f->wait(deadline_after(std::chrono::seconds(60)));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeviceFault);
  EXPECT_NE(r.status().message().find("PAGE_FAULT at virtual address 0xffff0000"),
            std::string::npos)
      << r.status().message();
  auto st = (*ctx)->query();
  ASSERT_TRUE(st.is_ok());
  EXPECT_EQ(st->health, ContextHealth::kBanned);
  auto gi = good->instantiate();
  auto cb = std::move((*gi)->command_buffer(0)).value();
  EXPECT_EQ((*ctx)->submit(cb).status().code(), StatusCode::kUnavailable);
  fill_input((*gi)->activations(), 3);
  auto ok = (*other)->submit(cb);
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_TRUE(ok->wait(deadline_after(std::chrono::seconds(60))).is_ok());
  EXPECT_TRUE(output_matches((*gi)->activations(), 3));
}

TEST_F(HalCts, DeviceReadOnlyBuffersFaultOnDeviceWrites) {
  if (!device_->info().read_only_buffers) GTEST_SKIP() << "device has no read-only buffers";
  test::ImageOptions o;
  o.store_to_weights = true;
  auto exe = load(o);
  ASSERT_TRUE(exe);
  auto inst = exe->instantiate();
  auto ctx = device_->create_context(Priority::kNormal);
  ASSERT_TRUE(inst.is_ok() && ctx.is_ok());
  auto f = (*ctx)->submit(std::move((*inst)->command_buffer(0)).value());
  ASSERT_TRUE(f.is_ok());
  auto r = f->wait(deadline_after(std::chrono::seconds(60)));
  EXPECT_EQ(r.status().code(), StatusCode::kDeviceFault) << r.status().to_string();
  char va[32];
  std::snprintf(va, sizeof va, "0x%llx",
                static_cast<unsigned long long>(exe->weights()->device_address()));
  EXPECT_NE(r.status().message().find(va), std::string::npos) << r.status().message();
  // The weights were not modified.
  EXPECT_EQ(static_cast<uint8_t>(exe->weights()->host()[0]), 1);
}

TEST_F(HalCts, AWaitWhoseDeadlineHasPassedReportsDeadlineExceededOrTheResult) {
  auto exe = load({.repeat = 64});
  ASSERT_TRUE(exe);
  auto inst = exe->instantiate();
  auto ctx = device_->create_context(Priority::kLow);
  auto f = (*ctx)->submit(std::move((*inst)->command_buffer(0)).value());
  ASSERT_TRUE(f.is_ok());
  auto early = f->poll();
  if (!early.is_ok()) {
    EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded);
  }
  EXPECT_TRUE(f->wait(kInfiniteDeadline).is_ok());
}

TEST_F(HalCts, ExecuteChainsCommandBuffersAndSignalsEachInOrder) {
  if (!device_->info().wait_fences) GTEST_SKIP() << "device cannot chain jobs on fences";
  auto exe = load({.npu_steps = 3});
  ASSERT_TRUE(exe);
  auto inst = exe->instantiate();
  auto ctx = device_->create_context(Priority::kNormal);
  ASSERT_TRUE(inst.is_ok() && ctx.is_ok());
  fill_input((*inst)->activations(), 11);
  std::vector<CommandBuffer> cbs;
  for (size_t s = 0; s < 3; ++s) cbs.push_back(std::move((*inst)->command_buffer(s)).value());
  std::vector<Fence> signal;
  ASSERT_TRUE((*ctx)->execute({}, cbs, &signal).is_ok());
  ASSERT_EQ(signal.size(), 3u);
  auto last = signal.back().wait(deadline_after(std::chrono::seconds(60)));
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  // Each job waited on the one before it: when the last has ended, so have the others.
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(signal[k].sequence() + 1, signal[k + 1].sequence());
    auto r = signal[k].poll();
    ASSERT_TRUE(r.is_ok()) << "step " << k << ": " << r.status().to_string();
    EXPECT_GT(r->device_cycles, 0u);
  }
  EXPECT_TRUE(output_matches((*inst)->activations(), 11));
}

TEST_F(HalCts, AJobWaitingOnAFailedFenceOfAnotherContextEndsAbortedWithoutRunning) {
  if (!device_->info().wait_fences) GTEST_SKIP() << "device cannot chain jobs on fences";
  test::ImageOptions bad;
  bad.fault = true;
  bad.fault_va = 0xFFFF0000u;
  auto faulty = load(bad);
  auto good = load();
  ASSERT_TRUE(faulty && good);
  auto a = device_->create_context(Priority::kNormal);
  auto b = device_->create_context(Priority::kHigh);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto fi = faulty->instantiate();
  auto gi = good->instantiate();
  ASSERT_TRUE(fi.is_ok() && gi.is_ok());
  fill_input((*gi)->activations(), 21);
  auto fa = (*a)->submit(std::move((*fi)->command_buffer(0)).value());
  ASSERT_TRUE(fa.is_ok()) << fa.status().to_string();
  const Fence wait[] = {*fa};
  auto fb = (*b)->submit(std::move((*gi)->command_buffer(0)).value(), wait);
  ASSERT_TRUE(fb.is_ok()) << fb.status().to_string();
  auto rb = fb->wait(deadline_after(std::chrono::seconds(60)));
  EXPECT_EQ(rb.status().code(), StatusCode::kAborted) << rb.status().to_string();
  EXPECT_EQ(fa->poll().status().code(), StatusCode::kDeviceFault);
  // It never ran: its output rows are still zero.
  for (int k = 0; k < 64; ++k) ASSERT_EQ((*gi)->activations().host()[256 + k], std::byte{0});
  // Only the faulting context is banned; b runs the job when it waits for nothing.
  auto again = (*b)->submit(std::move((*gi)->command_buffer(0)).value());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_TRUE(again->wait(deadline_after(std::chrono::seconds(60))).is_ok());
  EXPECT_TRUE(output_matches((*gi)->activations(), 21));
}

TEST_F(HalCts, AWaitListWithAnEmptyFenceIsRefused) {
  auto exe = load();
  ASSERT_TRUE(exe);
  auto inst = exe->instantiate();
  auto ctx = device_->create_context(Priority::kNormal);
  ASSERT_TRUE(inst.is_ok() && ctx.is_ok());
  const Fence wait[] = {Fence()};
  auto f = (*ctx)->submit(std::move((*inst)->command_buffer(0)).value(), wait);
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << f.status().to_string();
}

}  // namespace
}  // namespace npu::hal
