// Loading images onto a device: hardware checks, weights, relocation patching.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "fake_device.h"
#include "image_builder.h"
#include "npu/runtime/image_to_hal.h"
#include "npu/hal/api.h"

namespace npu::hal {
namespace {

uint32_t word_at(const Buffer& b, uint64_t offset) {
  uint32_t w;
  std::memcpy(&w, b.host().data() + offset, 4);
  return w;
}

TEST(Executable, RefusesAnImageForAnotherFingerprintNamingBothValues) {
  auto device = std::make_shared<test::FakeDevice>();
  test::ImageOptions o;
  o.fingerprint = 0x1122334455667788ull;
  auto exe = runtime::load_executable(device, test::identity_image(o));
  ASSERT_FALSE(exe.is_ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kIncompatible);
  const std::string& m = exe.status().message();
  EXPECT_NE(m.find("0x1122334455667788"), std::string::npos) << m;
  char device_fp[32];
  std::snprintf(device_fp, sizeof device_fp, "%016llx",
                static_cast<unsigned long long>(hw::fingerprint_for_dim(16)));
  EXPECT_NE(m.find(device_fp), std::string::npos) << m;
}

// Version 3 stores host-step attributes in the image's own tables (version 2: an ONNX
// NodeProto). A sealed version-2 image is refused as INCOMPATIBLE with "recompile".
TEST(ImageVerifier, Version2ImageIsRefusedWithRecompile) {
  test::ImageOptions v2;
  v2.schema_version = 2;
  auto r = compiler::ModelImage::from_bytes(test::build_identity_image(v2), "v2.npuimg");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIncompatible) << r.status().to_string();
  EXPECT_NE(r.status().message().find("v2.npuimg: image schema version 2"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("recompile"), std::string::npos) << r.status().message();
}

// Version 2 images end in a CRC-32 trailer. An image from before (version 1, no trailer) is
// refused as INCOMPATIBLE with "recompile"; a version-2 image without its trailer, or with
// any trailer byte changed, is CORRUPT_DATA naming the file.
TEST(ImageVerifier, IntegrityTrailerIsRequired) {
  test::ImageOptions v1;
  v1.schema_version = 1;
  v1.sealed = false;
  auto r = compiler::ModelImage::from_bytes(test::build_identity_image(v1), "old.npuimg");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIncompatible) << r.status().to_string();
  EXPECT_NE(r.status().message().find("old.npuimg: image schema version 1"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("recompile"), std::string::npos) << r.status().message();
  test::ImageOptions unsealed;
  unsealed.sealed = false;
  r = compiler::ModelImage::from_bytes(test::build_identity_image(unsealed), "bare.npuimg");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << r.status().to_string();
  EXPECT_NE(r.status().message().find("bare.npuimg"), std::string::npos) << r.status().message();
  const std::vector<uint8_t> good = test::build_identity_image({});
  ASSERT_TRUE(compiler::ModelImage::from_bytes(good, "good.npuimg").is_ok());
  for (size_t k = good.size() - compiler::kImageTrailerBytes; k < good.size(); ++k) {
    std::vector<uint8_t> bad = good;
    bad[k] ^= 0x01;
    r = compiler::ModelImage::from_bytes(bad, "bad.npuimg");
    ASSERT_FALSE(r.is_ok()) << "trailer byte " << k;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData) << r.status().to_string();
  }
  // An appended byte moves the trailer: refused too.
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(compiler::ModelImage::from_bytes(longer, "long.npuimg").status().code(),
            StatusCode::kCorruptData);
}

// The verifier stays strict about what this branch added to the image: specialised inputs
// must name an input and hold exactly its bytes; int32 device views must be 4-byte aligned.
TEST(ImageVerifier, SpecialisedInputsAndInt32ViewsAreChecked) {
  auto load = [](const test::ImageOptions& o) { return compiler::ModelImage::from_bytes(test::build_identity_image(o), "t"); };
  test::ImageOptions ok;
  ok.specialized_input = 0;
  EXPECT_TRUE(load(ok).is_ok()) << load(ok).status().to_string();
  test::ImageOptions unknown = ok;
  unknown.specialized_input = 1;
  auto r = load(unknown);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
  EXPECT_NE(r.status().message().find("specialised input names an unknown input"), std::string::npos) << r.status().message();
  test::ImageOptions short_value = ok;
  short_value.specialized_bytes = 255;
  r = load(short_value);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("has the wrong size"), std::string::npos) << r.status().message();
  test::ImageOptions misaligned;
  misaligned.int32_view_misaligned = true;
  r = load(misaligned);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not 4-byte aligned"), std::string::npos) << r.status().message();
}

// Per-axis device quantisation: one scale and zero point per index of an axis inside the
// view's rank; the verifier refuses every other combination by name.
TEST(ImageVerifier, PerAxisQuantisationIsRangeChecked) {
  auto load = [](const test::ImageOptions& o) { return compiler::ModelImage::from_bytes(test::build_identity_image(o), "t"); };
  test::ImageOptions ok;  // x is [4, 16]
  ok.input_axis = 1;
  ok.input_scales.assign(16, 0.5f);
  ok.input_zero_points.assign(16, -3);
  EXPECT_TRUE(load(ok).is_ok()) << load(ok).status().to_string();
  auto refused = [&](const test::ImageOptions& o, const std::string& why) {
    auto r = load(o);
    ASSERT_FALSE(r.is_ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  test::ImageOptions axis_out_of_rank = ok;
  axis_out_of_rank.input_axis = 2;
  refused(axis_out_of_rank, "along axis 2, outside its rank 2");
  test::ImageOptions negative_axis = ok;
  negative_axis.input_axis = -2;
  refused(negative_axis, "along axis -2, outside its rank 2");
  test::ImageOptions wrong_axis = ok;  // 16 scales along axis 0 of size 4
  wrong_axis.input_axis = 0;
  refused(wrong_axis, "16 scales and 16 zero points along axis 0 of size 4");
  test::ImageOptions short_zero_points = ok;
  short_zero_points.input_zero_points.resize(15);
  refused(short_zero_points, "16 scales and 15 zero points along axis 1 of size 16");
  test::ImageOptions zero_scale = ok;
  zero_scale.input_scales[7] = 0.0f;
  refused(zero_scale, "a scale that is not positive and finite");
  test::ImageOptions per_tensor_with_many = ok;
  per_tensor_with_many.input_axis = -1;
  refused(per_tensor_with_many, "per-tensor quantisation with 16 scales");
}

TEST(Executable, RefusesAnImageForAnotherArrayDim) {
  auto device = std::make_shared<test::FakeDevice>();
  test::ImageOptions o;
  o.array_dim = 8;
  o.fingerprint = hw::fingerprint_for_dim(8);
  auto exe = runtime::load_executable(device, test::identity_image(o));
  ASSERT_FALSE(exe.is_ok());
  EXPECT_EQ(exe.status().code(), StatusCode::kIncompatible);
  EXPECT_NE(exe.status().message().find("8x8"), std::string::npos) << exe.status().message();
  EXPECT_NE(exe.status().message().find("16x16"), std::string::npos) << exe.status().message();
}

TEST(Executable, UploadsWeightsAndPatchesRelocationsPerInstance) {
  auto device = std::make_shared<test::FakeDevice>();
  auto exe = runtime::load_executable(device, test::identity_image());
  ASSERT_TRUE(exe.is_ok()) << exe.status().to_string();
  ASSERT_NE((*exe)->weights(), nullptr);
  EXPECT_EQ(static_cast<uint8_t>((*exe)->weights()->host()[2]), 3);
  EXPECT_EQ((*exe)->weights()->usage(), BufferUsage::kDeviceReadOnly);
  ASSERT_EQ((*exe)->steps().size(), 1u);
  EXPECT_EQ((*exe)->steps()[0].command_bytes, 96u);

  auto a = (*exe)->instantiate();
  auto b = (*exe)->instantiate();
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto cba = (*a)->command_buffer(0);
  auto cbb = (*b)->command_buffer(0);
  ASSERT_TRUE(cba.is_ok() && cbb.is_ok());
  const Buffer& ca = *cba->commands();
  const Buffer& cb = *cbb->commands();
  // LOAD w1 -> activations + 0, STORE w1 -> activations + 256, per instance.
  EXPECT_EQ(word_at(ca, 4), (*a)->activations().device_address());
  EXPECT_EQ(word_at(ca, 64 + 4), (*a)->activations().device_address() + 256);
  EXPECT_EQ(word_at(cb, 4), (*b)->activations().device_address());
  EXPECT_NE((*a)->activations().device_address(), (*b)->activations().device_address());
  // The job holds the activations and weights.
  EXPECT_EQ(cba->uses().size(), 2u);
  EXPECT_EQ(cba->size(), 96u);
}

TEST(Executable, HostStepsAreDescribedAndHaveNoCommandBuffer) {
  auto device = std::make_shared<test::FakeDevice>();
  test::ImageOptions o;
  o.host_step = true;
  auto exe = runtime::load_executable(device, test::identity_image(o));
  ASSERT_TRUE(exe.is_ok()) << exe.status().to_string();
  ASSERT_EQ((*exe)->steps().size(), 2u);
  EXPECT_EQ((*exe)->steps()[1].kind, StepKind::kHost);
  EXPECT_EQ((*exe)->steps()[1].op_type, "FancyOp");
  EXPECT_EQ((*exe)->steps()[1].node_name, "fancy_1");
  auto inst = (*exe)->instantiate();
  ASSERT_TRUE(inst.is_ok());
  EXPECT_EQ((*inst)->command_buffer(1).status().code(), StatusCode::kInvalidArgument);
}

TEST(Fence, JobResultsBecomeStatusesNamingTheDeviceError) {
  Status s = job_result_to_status({JobEnd::kPageFault, 3, 0xdead0000, 0}, "sim: context 1 job 2");
  EXPECT_EQ(s.code(), StatusCode::kDeviceFault);
  EXPECT_NE(s.message().find("PAGE_FAULT"), std::string::npos);
  EXPECT_NE(s.message().find("0xdead0000"), std::string::npos);
  EXPECT_NE(s.message().find("sim: context 1 job 2"), std::string::npos);
  EXPECT_EQ(job_result_to_status({JobEnd::kDeviceError, 1, 0x40, 0}, "j").code(),
            StatusCode::kDeviceFault);
  EXPECT_NE(job_result_to_status({JobEnd::kDeviceError, 1, 0x40, 0}, "j").message().find(
                "ILLEGAL_INSTRUCTION"),
            std::string::npos);
  EXPECT_EQ(job_result_to_status({JobEnd::kTimeout, 0, 0, 0}, "j").code(), StatusCode::kDeviceTimeout);
  EXPECT_EQ(job_result_to_status({JobEnd::kAborted, 0, 0, 0}, "j").code(), StatusCode::kAborted);
  EXPECT_EQ(job_result_to_status({JobEnd::kLost, 0, 0, 0}, "j").code(), StatusCode::kDeviceLost);
  EXPECT_TRUE(job_result_to_status({JobEnd::kSuccess, 0, 0, 5}, "j").is_ok());
}

TEST(DeviceSpec, UnknownNamesAndBadListsFailLoudly) {
  auto r = open_device("tpu0");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("tpu0"), std::string::npos);
  EXPECT_NE(r.status().message().find("accel:N"), std::string::npos);
  EXPECT_EQ(open_devices("sim,,rtl").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open_device("sim,sim").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open_devices("accel:x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(resolve_device_spec(" rtl "), "rtl");
}

}  // namespace
// A device whose contexts cannot wait on fences says so; the scheduler then waits on the host.
TEST(Context, AWaitListOnADeviceWithoutWaitFencesIsUnsupported) {
  auto device = std::make_shared<test::FakeDevice>();
  ASSERT_FALSE(device->info().wait_fences);
  auto exe = runtime::load_executable(device, test::identity_image());
  ASSERT_TRUE(exe.is_ok()) << exe.status().to_string();
  auto inst = (*exe)->instantiate();
  auto ctx = device->create_context(hal::Priority::kNormal);
  ASSERT_TRUE(inst.is_ok() && ctx.is_ok());
  auto cb = std::move((*inst)->command_buffer(0)).value();
  auto first = (*ctx)->submit(cb);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  const hal::Fence wait[] = {*first};
  auto second = (*ctx)->submit(cb, wait);
  EXPECT_EQ(second.status().code(), StatusCode::kUnsupported) << second.status().to_string();
  EXPECT_NE(second.status().message().find("in_syncs"), std::string::npos)
      << second.status().message();
  // A batch of one needs no wait list; a longer one does.
  std::vector<hal::Fence> signal;
  EXPECT_TRUE((*ctx)->execute({}, std::span(&cb, 1), &signal).is_ok());
  EXPECT_EQ(signal.size(), 1u);
  const hal::CommandBuffer two[] = {cb, cb};
  signal.clear();
  EXPECT_EQ((*ctx)->execute({}, two, &signal).code(), StatusCode::kUnsupported);
  EXPECT_EQ(signal.size(), 1u) << "the first job was queued and is reported";
  for (const hal::Fence& f : signal) EXPECT_TRUE(f.wait(hal::kInfiniteDeadline).is_ok());
  EXPECT_TRUE(first->wait(hal::kInfiniteDeadline).is_ok());
}

}  // namespace npu::hal
