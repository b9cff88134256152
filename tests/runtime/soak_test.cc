// Soak and leak tests on two functional devices ("sim" and a second in-process functional
// device registered as "soak2"), through the whole stack: runtime, scheduler, HAL, user-mode
// driver, kernel-driver model.
//
// Soak.AsyncRequestsCompleteExactlyOnceWithTheRightStatus: NPU_SOAK_REQUESTS (default 10^4)
// async requests from 8 threads, each with its own input, ~1% cancelled at random, and one
// hang injected (kmd::inject_fault) per 10^4 requests, alternating between the devices. Every
// request completes exactly once: OK with its own identity output (y == x), CANCELLED only if
// it was cancelled, DEVICE_TIMEOUT once per injected hang; nothing else.
//
// Soak.RuntimeModelSessionCyclesKeepRssFlat: NPU_SOAK_CYCLES (default 100) cycles of open
// runtime, load model, create session, run one request, destroy all; the RSS after each cycle
// stays within 5% of the RSS after the warm-up cycles (not enforced under ASan, see below).
//
// Both print their figures (one "soak:" line each). ctest runs the short defaults in the
// default suite and the long versions (10^6 requests, 1000 cycles) under the label soak.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "image_builder.h"
#include "npu/driver/kmd.h"
#include "npu/runtime/api.h"
#include "npu/sim/device.h"
#include "uapi/drm/npu_accel.h"

namespace npu::runtime {
namespace {

// AddressSanitizer keeps freed memory in quarantine (256 MiB by default) and grows RSS on
// its own; there LeakSanitizer checks for leaks and the RSS bound is reported, not enforced.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kRssMeaningful = false;
#else
constexpr bool kRssMeaningful = true;
#endif
#else
constexpr bool kRssMeaningful = true;
#endif

constexpr const char* kSecondDevice = "soak2";
constexpr uint64_t kRequestsPerHang = 10000;

uint64_t env_count(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return (*end == '\0' && n > 0) ? n : fallback;
}

void register_second_device() {
  static const int once = driver::kmd::register_device(
      kSecondDevice, DRM_NPU_PLATFORM_FUNCTIONAL, [](std::span<std::byte> dram) {
        return sim::make_functional_device(sim::DeviceConfig{}, dram);
      });
  (void)once;
}

// Resident set size in KiB (VmRSS).
uint64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      uint64_t kib = 0;
      in >> kib;
      return kib;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

// Input of request `index`: multiples of the image's scale (0.05) inside the int8 range, so
// that the identity program returns it exactly; different requests get different inputs.
Tensor input_of(uint64_t index) {
  Tensor x = Tensor::zeros(DType::kF32, {4, 16});
  uint64_t s = index * 0x9E3779B97F4A7C15ull + 1;
  for (float& v : x.as<float>()) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const int q = static_cast<int>((s * 0x2545F4914F6CDD1Dull) >> 56) - 128;  // -128..127
    v = static_cast<float>(q - 3) * 0.05f;                                 // zero point 3
  }
  return x;
}

bool output_matches(uint64_t index, const std::vector<Tensor>& outputs) {
  if (outputs.size() != 1) return false;
  const Tensor expected = input_of(index);
  auto want = expected.as<float>();
  auto got = outputs[0].as<float>();
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-5f) return false;
  return true;
}

TEST(Soak, AsyncRequestsCompleteExactlyOnceWithTheRightStatus) {
  const uint64_t n = env_count("NPU_SOAK_REQUESTS", 10000);
  constexpr int kThreads = 8;
  register_second_device();
  RuntimeOptions ro;
  ro.device = std::string("sim,") + kSecondDevice;
  ro.scheduler.num_contexts = 2;
  ro.scheduler.queue_capacity = 256;
  auto rt = Runtime::open(ro);
  ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
  ASSERT_EQ((*rt)->device_count(), 2u);
  const std::array<const char*, 2> devices{"sim", kSecondDevice};
  driver::kmd::Stats before[2];
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(driver::kmd::set_hang_timeout_ms(devices[d], 50), 0);
    ASSERT_EQ(driver::kmd::stats(devices[d], &before[d]), 0);
  }
  auto model = Model::from_image(test::identity_image());
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  SessionOptions so;
  so.max_in_flight = 4;
  so.max_outstanding = 512;
  auto pair = AsyncSession::create(*rt, *model, so);
  ASSERT_TRUE(pair.is_ok()) << pair.status().to_string();
  auto& [session, queue] = *pair;

  // Per request: bit 0 submitted, bit 1 cancel requested; completions counted separately.
  std::vector<std::atomic<uint8_t>> flags(n);
  std::vector<std::atomic<uint8_t>> completions(n);
  std::atomic<uint64_t> next{0}, submit_errors{0}, hangs{0}, cancels{0};
  std::map<StatusCode, uint64_t> by_status;
  uint64_t wrong_output = 0, cancelled_unasked = 0, other_status = 0, received = 0;
  std::string first_problem;

  const auto t0 = std::chrono::steady_clock::now();
  std::thread receiver([&] {
    for (Completion& c : *queue) {
      ++received;
      const auto index = std::any_cast<uint64_t>(c.user_context);
      completions[index].fetch_add(1);
      const StatusCode code = c.status.code();
      by_status[code]++;
      const bool asked = (flags[index].load() & 2) != 0;
      auto note = [&](const std::string& what) {
        if (first_problem.empty())
          first_problem = "request " + std::to_string(index) + ": " + what + " (" +
                          c.status.to_string() + ")";
      };
      if (code == StatusCode::kOk) {
        if (!output_matches(index, c.outputs)) ++wrong_output, note("wrong output");
      } else if (code == StatusCode::kCancelled) {
        if (!asked) ++cancelled_unasked, note("cancelled without a cancel");
      } else if (code != StatusCode::kDeviceTimeout) {
        ++other_status, note("unexpected status");
      }
    }
  });
  std::vector<std::thread> submitters;
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      for (;;) {
        const uint64_t index = next.fetch_add(1);
        if (index >= n) return;
        if (index % kRequestsPerHang == kRequestsPerHang / 2) {
          // The next SUBMIT on this device hangs; the kmd watchdog resets the device.
          driver::kmd::FaultRule hang;
          hang.fault = driver::kmd::Fault::kHang;
          if (driver::kmd::inject_fault(devices[(index / kRequestsPerHang) % 2], hang) == 0)
            hangs.fetch_add(1);
        }
        flags[index].store(1);
        auto id = session->submit({input_of(index)}, index);
        if (!id.is_ok()) {
          submit_errors.fetch_add(1);
          continue;
        }
        if (rng() % 100 == 0) {
          flags[index].fetch_or(2);
          if (session->cancel(*id).is_ok()) cancels.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : submitters) th.join();
  session->close();
  receiver.join();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  uint64_t never = 0, twice = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t k = completions[i].load();
    if (k == 0) ++never;
    if (k > 1) ++twice;
  }
  uint64_t timeouts_on_device = 0, double_end = 0;
  for (int d = 0; d < 2; ++d) {
    driver::kmd::Stats after;
    ASSERT_EQ(driver::kmd::stats(devices[d], &after), 0);
    timeouts_on_device += after.jobs_timeout - before[d].jobs_timeout;
    double_end += after.jobs_double_end - before[d].jobs_double_end;
  }
  std::string kinds;
  for (auto [code, count] : by_status)
    kinds += " " + std::string(status_code_name(code)) + "=" + std::to_string(count);
  std::printf(
      "soak: %llu requests from %d threads over 2 devices in %.2f s (%.0f/s): received %llu;%s; "
      "cancel requests %llu, hangs injected %llu, device timeouts %llu, retried on reset %s\n",
      static_cast<unsigned long long>(n), kThreads, wall_s, static_cast<double>(n) / wall_s,
      static_cast<unsigned long long>(received), kinds.c_str(),
      static_cast<unsigned long long>(cancels.load()),
      static_cast<unsigned long long>(hangs.load()),
      static_cast<unsigned long long>(timeouts_on_device),
      std::to_string((*rt)->scheduler(0).stats().retried + (*rt)->scheduler(1).stats().retried)
          .c_str());
  std::fflush(stdout);

  EXPECT_EQ(submit_errors.load(), 0u);
  EXPECT_EQ(received, n);
  EXPECT_EQ(never, 0u) << "requests that never completed";
  EXPECT_EQ(twice, 0u) << "requests that completed more than once";
  EXPECT_EQ(double_end, 0u) << "device jobs whose end the kmd reported twice";
  EXPECT_EQ(wrong_output, 0u) << first_problem;
  EXPECT_EQ(cancelled_unasked, 0u) << first_problem;
  EXPECT_EQ(other_status, 0u) << first_problem;
  // Each injected hang ends exactly one request, as DEVICE_TIMEOUT.
  EXPECT_EQ(hangs.load(), n / kRequestsPerHang + (n % kRequestsPerHang > kRequestsPerHang / 2));
  EXPECT_EQ(timeouts_on_device, hangs.load());
  EXPECT_EQ(by_status[StatusCode::kDeviceTimeout], hangs.load());
}

TEST(Soak, RuntimeModelSessionCyclesKeepRssFlat) {
  const uint64_t cycles = env_count("NPU_SOAK_CYCLES", 100);
  const uint64_t warmup = std::max<uint64_t>(cycles / 10, 5);
  const std::vector<uint8_t> image = test::build_identity_image();
  uint64_t first = 0, last = 0, max = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < warmup + cycles; ++i) {
    {
      RuntimeOptions ro;
      ro.device = "sim";
      auto rt = Runtime::open(ro);
      ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
      auto model = Model::from_bytes(image, "identity.npuimg");
      ASSERT_TRUE(model.is_ok()) << model.status().to_string();
      auto session = Session::create(*rt, *model);
      ASSERT_TRUE(session.is_ok()) << session.status().to_string();
      const std::vector<Tensor> in{input_of(i)};
      auto out = (*session)->run(in);
      ASSERT_TRUE(out.is_ok()) << out.status().to_string();
      ASSERT_TRUE(output_matches(i, out->tensors));
    }
    const uint64_t rss = rss_kib();
    if (i + 1 == warmup) first = rss;
    if (i + 1 > warmup) {
      last = rss;
      max = std::max(max, rss);
    }
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "soak: %llu create/destroy cycles of runtime, model and session (after %llu warm-up) in "
      "%.2f s: RSS first %llu KiB, last %llu KiB, max %llu KiB (%+.2f%%)%s\n",
      static_cast<unsigned long long>(cycles), static_cast<unsigned long long>(warmup), wall_s,
      static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
      static_cast<unsigned long long>(max),
      100.0 * (static_cast<double>(max) - static_cast<double>(first)) /
          static_cast<double>(first),
      kRssMeaningful ? "" : " (ASan build: bound not enforced, LeakSanitizer checks leaks)");
  std::fflush(stdout);
  if (kRssMeaningful) {
    EXPECT_LE(static_cast<double>(max), static_cast<double>(first) * 1.05);
  }
}

}  // namespace
}  // namespace npu::runtime
