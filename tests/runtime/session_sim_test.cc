// The runtime end to end on the functional model ("sim"): the real driver, kernel-driver
// model and device. With NPU_TEST_DEVICE=rtl the same tests run on the Verilator RTL.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <thread>

#include "image_builder.h"
#include "ir.h"  // the compiler's float reference interpreter
#include "npu/compiler/compiler.h"
#include "npu/driver/kmd.h"
#include "npu/runtime/api.h"
#include "test_device.h"

namespace npu::runtime {
namespace {

std::vector<Tensor> random_input(std::vector<int64_t> shape, uint32_t seed) {
  Tensor x = Tensor::zeros(DType::kF32, std::move(shape));
  uint32_t s = seed * 2654435761u + 1;
  for (float& v : x.as<float>()) {
    s = s * 1664525u + 1013904223u;
    v = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 4.0f;
  }
  return {x};
}

class SimTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto rt = test::open_test_runtime();
    ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
    runtime_ = std::move(rt).value();
    compiler::CompileOptions co;
    co.array_dim = runtime_->device(0)->info().array_dim;
    auto bytes = compiler::compile_onnx_file(NPU_TEST_DATA "/gemm_relu.onnx", co);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    auto m = Model::from_bytes(std::move(bytes).value(), "gemm_relu.onnx");
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    gemm_ = std::move(m).value();
  }
  static void TearDownTestSuite() {
    gemm_.reset();
    runtime_.reset();
  }
  // Runs the hand-built identity image on one input and checks that its output is the input
  // on the image's int8 grid, exactly.
  static void run_identity(const test::ImageOptions& o, uint32_t seed, RunStats* stats = nullptr) {
    auto m = Model::from_image(test::identity_image(o));
    ASSERT_TRUE(m.is_ok());
    auto s = Session::create(runtime_, *m);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    auto in = random_input({4, 16}, seed);
    auto out = (*s)->run(in);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    auto x = in[0].as<float>();
    auto y = out->tensors[0].as<float>();
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], dequantize(quantize_int8(x[i], o.scale, o.zero_point), o.scale, o.zero_point))
          << "element " << i;
    if (stats) *stats = out->stats;
  }
  static std::shared_ptr<Runtime> runtime_;
  static std::shared_ptr<const Model> gemm_;
};
std::shared_ptr<Runtime> SimTest::runtime_;
std::shared_ptr<const Model> SimTest::gemm_;

TEST_F(SimTest, GemmReluReachesThirtyDbAgainstTheFloatReference) {
  auto s = Session::create(runtime_, gemm_);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto graph = compiler::load_onnx(NPU_TEST_DATA "/gemm_relu.onnx", {});
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto in = random_input({4, 64}, seed);
    for (float& v : in[0].as<float>()) v *= 0.5f;  // inside the calibrated N(0,1) range
    auto out = (*s)->run(in);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    auto ref = compiler::run_reference(*graph, in);
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    const Tensor& expect = (*ref)[static_cast<size_t>(graph->outputs[0])];
    ASSERT_EQ(out->tensors[0].shape, expect.shape);
    const double sqnr = sqnr_db(expect.as<float>(), out->tensors[0].as<float>());
    EXPECT_GE(sqnr, 30.0) << "seed " << seed;
    EXPECT_GT(out->stats.device_cycles, 0u);
    std::printf("seed %u: SQNR %.2f dB, %llu device cycles\n", seed, sqnr,
                static_cast<unsigned long long>(out->stats.device_cycles));
  }
}

// A shape operand fed as an input is specialised to its calibration value: the Reshape runs
// on the NPU (a view), and a request with another shape is refused by name, never computed.
TEST_F(SimTest, ASpecialisedShapeInputAcceptsOnlyItsCompiledValue) {
  auto shape = [](int64_t a, int64_t b) {
    Tensor t = Tensor::zeros(DType::kI64, {2});
    t.as<int64_t>()[0] = a;
    t.as<int64_t>()[1] = b;
    return t;
  };
  Tensor x = random_input({2, 3, 4}, 5)[0];
  compiler::CompileOptions co;
  co.array_dim = runtime_->device(0)->info().array_dim;
  co.calibration = {{x, shape(6, 4)}};
  auto bytes = compiler::compile_onnx_file(NPU_TEST_DATA "/reshape_shape_input.onnx", co);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto m = Model::from_bytes(std::move(bytes).value(), "reshape_shape_input.onnx");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ((*m)->host_steps(), 0u);
  ASSERT_EQ((*m)->specialized_inputs().size(), 1u);
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const std::vector<Tensor> good = {x, shape(6, 4)}, bad = {x, shape(4, 6)};
  auto out = (*s)->run(good);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  ASSERT_EQ(out->tensors[0].shape, (std::vector<int64_t>{6, 4}));
  const double sqnr = sqnr_db(x.as<float>(), out->tensors[0].as<float>());
  EXPECT_GE(sqnr, 30.0);
  auto other = (*s)->run(bad);
  ASSERT_FALSE(other.is_ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("('shape') must be [6, 4]"), std::string::npos) << other.status().message();
}

// Quantisation parameters fed as inputs are specialised to their calibration value before
// the QDQ passes: the QuantizeLinear/DequantizeLinear pair folds into the input's
// quantisation, everything runs on the NPU, and another scale is refused by name.
TEST_F(SimTest, SpecialisedQuantisationParameterInputsFoldTheQdqPair) {
  Tensor scale = Tensor::zeros(DType::kF32, {});
  scale.as<float>()[0] = 0.03125f;
  Tensor zero_point = Tensor::zeros(DType::kI8, {});
  zero_point.as<int8_t>()[0] = -3;
  Tensor x = random_input({2, 32}, 9)[0];
  compiler::CompileOptions co;
  co.array_dim = runtime_->device(0)->info().array_dim;
  co.calibration = {{x, scale, zero_point}};
  auto bytes = compiler::compile_onnx_file(NPU_TEST_DATA "/qdq_param_inputs.onnx", co);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto m = Model::from_bytes(std::move(bytes).value(), "qdq_param_inputs.onnx");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ((*m)->host_steps(), 0u);
  ASSERT_EQ((*m)->specialized_inputs().size(), 2u);
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const std::vector<Tensor> inputs = {x, scale, zero_point};
  auto out = (*s)->run(inputs);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  // Relu(DQ(Q(x))) with the specialised scale and zero point, to within half a step of the
  // output's own calibrated int8 quantisation (range [0, max] over 255 steps).
  std::vector<float> expected;
  for (float xi : x.as<float>()) {
    const float q = std::clamp(std::nearbyint(xi / 0.03125f) - 3.0f, -128.0f, 127.0f);
    expected.push_back(std::max(0.0f, (q + 3.0f) * 0.03125f));
  }
  const float half_step = *std::max_element(expected.begin(), expected.end()) / 255.0f / 2.0f;
  const auto y = out->tensors[0].template as<float>();
  ASSERT_EQ(y.size(), expected.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], expected[i], half_step * 1.001f) << "element " << i;
  Tensor other_scale = scale;
  other_scale.as<float>()[0] = 0.0625f;
  const std::vector<Tensor> other_inputs = {x, other_scale, zero_point};
  auto other = (*s)->run(other_inputs);
  ASSERT_FALSE(other.is_ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("('scale') must be [0.03125]"), std::string::npos) << other.status().message();
}

// Compiles tests/data/<onnx> for this device, calibrated on `inputs`; no host steps allowed.
std::shared_ptr<const Model> compile_all_npu(const std::string& onnx, const std::vector<Tensor>& inputs, uint32_t array_dim) {
  compiler::CompileOptions co;
  co.array_dim = array_dim;
  co.calibration = {inputs};
  auto bytes = compiler::compile_onnx_file(std::string(NPU_TEST_DATA) + "/" + onnx, co);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes.is_ok()) return nullptr;
  auto m = Model::from_bytes(std::move(bytes).value(), onnx);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return nullptr;
  EXPECT_EQ((*m)->host_steps(), 0u) << onnx;
  return *m;
}

// Per-axis QuantizeLinear (float -> uint8, axis 1) and DequantizeLinear (int8 -> float,
// axis -1) at the graph boundary: the device views carry one scale and zero point per
// channel, and the results are bit-exact with ONNX (ties to even, saturation; real =
// scale·(q − zp)). Quantising the dequantised codes again gives the codes back.
TEST_F(SimTest, PerAxisQuantizeAndDequantizeAreBitExact) {
  const uint32_t dim = runtime_->device(0)->info().array_dim;
  const std::vector<int64_t> shape{2, 3, 4, 5};
  Tensor x = Tensor::zeros(DType::kF32, shape);
  auto xv = x.as<float>();
  const float q_scale[3] = {0.02f, 0.5f, 0.125f};
  const int32_t q_zero[3] = {0, 128, 250};
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = i / 20 % 3;
    // Half steps (ties), and values that saturate at both ends.
    xv[i] = (static_cast<float>(i % 40) - 20.0f + 0.5f) * q_scale[c] * (i % 7 == 0 ? 40.0f : 1.0f);
  }
  auto quantize = compile_all_npu("quantize_axis.onnx", {x}, dim);
  ASSERT_NE(quantize, nullptr);
  ASSERT_EQ(quantize->outputs()[0].device_quant.axis, 1);
  auto qs = Session::create(runtime_, quantize);
  ASSERT_TRUE(qs.is_ok()) << qs.status().to_string();
  const std::vector<Tensor> q_inputs{x};
  auto codes = (*qs)->run(q_inputs);
  ASSERT_TRUE(codes.is_ok()) << codes.status().to_string();
  ASSERT_EQ(codes->tensors[0].dtype, DType::kU8);
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = i / 20 % 3;
    const float expect = std::clamp(std::nearbyint(xv[i] / q_scale[c]) + static_cast<float>(q_zero[c]), 0.0f, 255.0f);
    EXPECT_EQ(codes->tensors[0].as<uint8_t>()[i], static_cast<uint8_t>(expect)) << "element " << i;
  }

  Tensor codes8 = Tensor::zeros(DType::kI8, shape);
  for (size_t i = 0; i < xv.size(); ++i) codes8.as<int8_t>()[i] = static_cast<int8_t>(static_cast<int>(i * 37 % 256) - 128);
  auto dequantize = compile_all_npu("dequantize_axis.onnx", {codes8}, dim);
  ASSERT_NE(dequantize, nullptr);
  auto ds = Session::create(runtime_, dequantize);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  const std::vector<Tensor> dq_inputs{codes8};
  auto reals = (*ds)->run(dq_inputs);
  ASSERT_TRUE(reals.is_ok()) << reals.status().to_string();
  const float d_scale[5] = {0.1f, 0.25f, 1.5f, 0.003f, 2.0f};
  const int32_t d_zero[5] = {0, -128, 127, 5, -7};
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = i % 5;
    const int32_t q = codes8.as<int8_t>()[i];
    const float real = static_cast<float>(q - d_zero[c]) * d_scale[c];
    EXPECT_EQ(reals->tensors[0].as<float>()[i], real) << "element " << i;
    // The round trip: quantising the real with its channel's parameters gives q back.
    EXPECT_EQ(std::clamp(std::nearbyint(real / d_scale[c]) + static_cast<float>(d_zero[c]), -128.0f, 127.0f),
              static_cast<float>(q));
  }
}

// A Reshape of an empty tensor (a zero dimension) and a Relu of the result run on the NPU as
// a segment without work: no zero-size allocation, no crash, an empty output of the new shape.
TEST_F(SimTest, EmptyTensorsRunEndToEnd) {
  Tensor x = Tensor::zeros(DType::kF32, {0, 3, 4});
  auto m = compile_all_npu("empty_reshape.onnx", {x}, runtime_->device(0)->info().array_dim);
  ASSERT_NE(m, nullptr);
  auto s = Session::create(runtime_, m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  const std::vector<Tensor> inputs{x};
  for (int request = 0; request < 2; ++request) {
    auto out = (*s)->run(inputs);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    ASSERT_EQ(out->tensors.size(), 1u);
    EXPECT_EQ(out->tensors[0].shape, (std::vector<int64_t>{3, 4, 0}));
    EXPECT_EQ(out->tensors[0].element_count(), 0);
  }
  // A non-empty tensor is still refused by shape, by name.
  const std::vector<Tensor> not_empty{Tensor::zeros(DType::kF32, {1, 3, 4})};
  auto wrong = (*s)->run(not_empty);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SimTest, HandBuiltProgramCopiesExactlyThroughRelocationsAndStrides) {
  run_identity({}, 7);
}

TEST_F(SimTest, APageFaultIsReportedWithItsAddressAndTheNextRequestSucceeds) {
  test::ImageOptions bad;
  bad.fault = true;
  bad.fault_va = 0xFFFF0000u;  // far beyond any allocation
  auto fm = Model::from_image(test::identity_image(bad));
  ASSERT_TRUE(fm.is_ok());
  auto faulty = Session::create(runtime_, *fm);
  ASSERT_TRUE(faulty.is_ok());
  auto r = (*faulty)->run(random_input({4, 16}, 1));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeviceFault) << r.status().to_string();
  EXPECT_NE(r.status().message().find("PAGE_FAULT"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("0xffff0000"), std::string::npos) << r.status().message();
  // The faulting context was banned and is replaced: the good model runs on.
  auto good = Session::create(runtime_, gemm_);
  ASSERT_TRUE(good.is_ok());
  auto ok = (*good)->run(random_input({4, 64}, 2));
  EXPECT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_GE(runtime_->scheduler(0).stats().contexts_replaced, 1u);
}

// k NPU steps and no host step: the steps are chained on the device (each waits on the one
// before), and the host sleeps once, on the last. The kernel-driver model counts the WAITs
// that could block and the times one slept.
TEST_F(SimTest, ARequestOfKNpuStepsWakesTheHostOnce) {
  driver::kmd::Stats probe;
  if (driver::kmd::stats(test::test_device(), &probe) != 0)
    GTEST_SKIP() << "not an in-process device: its WAITs cannot be counted";
  for (int k : {1, 3, 8}) {
    auto m = Model::from_image(test::identity_image({.repeat = 8, .npu_steps = k}));
    ASSERT_TRUE(m.is_ok());
    auto s = Session::create(runtime_, *m);
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    auto in = random_input({4, 16}, 5);
    ASSERT_TRUE((*s)->run(in).is_ok());  // warm: contexts and instances exist
    driver::kmd::Stats before, after;
    ASSERT_EQ(driver::kmd::stats(test::test_device(), &before), 0);
    auto out = (*s)->run(in);
    ASSERT_EQ(driver::kmd::stats(test::test_device(), &after), 0);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ(after.jobs_submitted - before.jobs_submitted, static_cast<uint64_t>(k));
    EXPECT_EQ(after.jobs_success - before.jobs_success, static_cast<uint64_t>(k));
    EXPECT_EQ(after.waits - before.waits, 1u) << k << " steps";
    EXPECT_LE(after.wait_sleeps - before.wait_sleeps, 1u) << k << " steps";
    EXPECT_EQ(out->stats.device_waits, 1u);
    EXPECT_GT(out->stats.device_cycles, 0u);
    auto x = in[0].as<float>();
    auto y = out->tensors[0].as<float>();
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(y[i], dequantize(quantize_int8(x[i], 0.05f, 3), 0.05f, 3)) << "element " << i;
  }
}

// The simulators are coherent (DRM_NPU_CAP_COHERENT): a request crosses into the driver only
// to submit and to wait, and the HAL's syncs still check their range. Those ioctls' arguments
// are on the caller's stack, so the kernel-driver model copies them without a system call
// (docs/architecture.md 6.7).
TEST_F(SimTest, OnACoherentDeviceARequestMakesNoBufferSyncCall) {
  driver::kmd::Stats probe;
  if (driver::kmd::stats(test::test_device(), &probe) != 0)
    GTEST_SKIP() << "not an in-process device: its ioctls cannot be counted";
  auto m = Model::from_image(test::identity_image({.repeat = 8, .npu_steps = 2}));
  ASSERT_TRUE(m.is_ok());
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  ASSERT_TRUE(runtime_->device(0)->info().coherent);
  auto in = random_input({4, 16}, 9);
  ASSERT_TRUE((*s)->run(in).is_ok());  // warm
  driver::kmd::Stats before, after;
  ASSERT_EQ(driver::kmd::stats(test::test_device(), &before), 0);
  auto out = (*s)->run(in);
  ASSERT_EQ(driver::kmd::stats(test::test_device(), &after), 0);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(after.bo_syncs - before.bo_syncs, 0u);
  EXPECT_EQ(after.jobs_submitted - before.jobs_submitted, 2u);
  EXPECT_EQ(after.checked_user_copies - before.checked_user_copies, 0u);
  auto buf = runtime_->device(0)->allocate(4096, hal::BufferUsage::kDeviceReadWrite);
  ASSERT_TRUE(buf.is_ok());
  const uint64_t size = (*buf)->size();
  EXPECT_TRUE((*buf)->sync_to_device(0, size).is_ok());
  EXPECT_EQ((*buf)->sync_from_device(size - 100, 200).code(), StatusCode::kInvalidArgument);
  ASSERT_EQ(driver::kmd::stats(test::test_device(), &before), 0);
  EXPECT_EQ(before.bo_syncs, after.bo_syncs);
}

// With a host step the NPU step before it needs its outputs on the host: one wait per chain.
TEST_F(SimTest, AHostStepWakesTheHostWhereItNeedsTheDevicesResults) {
  driver::kmd::Stats probe;
  if (driver::kmd::stats(test::test_device(), &probe) != 0)
    GTEST_SKIP() << "not an in-process device: its WAITs cannot be counted";
  register_host_kernel("FancyOp", [](const HostOpContext& c) {
    auto y = c.inputs[0]->as<float>();
    auto out = (*c.outputs)[0].as<float>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = y[i];
    return Status::ok();
  });
  auto m = Model::from_image(test::identity_image({.host_step = true, .npu_steps = 3}));
  ASSERT_TRUE(m.is_ok());
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto in = random_input({4, 16}, 6);
  auto out = (*s)->run(in);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  // Every segment of this image reads and writes host values: nothing can chain.
  EXPECT_EQ(out->stats.device_waits, 3u);
  EXPECT_GT(out->stats.host_steps_us, 0.0);
}

// An image with value maps quantises its inputs and dequantises its outputs on the lane, in
// the step hooks: that time is the request's copy-in and copy-out, not host steps (there are
// none) and not device time.
TEST_F(SimTest, AMappedImagesConversionsCountAsCopyInAndOutNotAsHostSteps) {
  ASSERT_TRUE(Model::from_image(test::identity_image({.value_maps = true})).value()->mapped());
  RunStats st;
  ASSERT_NO_FATAL_FAILURE(run_identity({.value_maps = true, .repeat = 8}, 7, &st));
  EXPECT_EQ(st.host_steps_us, 0.0);
  EXPECT_GT(st.copy_in_us, 0.0);
  EXPECT_GT(st.copy_out_us, 0.0);
  EXPECT_LE(st.copy_in_us + st.queue_us + st.device_us + st.copy_out_us, st.total_us + 0.5);
}
TEST_F(SimTest, AFaultInTheMiddleOfAChainIsReportedAndAbortsTheStepsAfterIt) {
  driver::kmd::Stats probe;
  if (driver::kmd::stats(test::test_device(), &probe) != 0)
    GTEST_SKIP() << "not an in-process device: its job ends cannot be counted";
  test::ImageOptions bad{.npu_steps = 4, .fault_step = 1};
  bad.fault = true;
  bad.fault_va = 0xFFFF0000u;
  auto m = Model::from_image(test::identity_image(bad));
  ASSERT_TRUE(m.is_ok());
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok());
  driver::kmd::Stats before, after;
  ASSERT_EQ(driver::kmd::stats(test::test_device(), &before), 0);
  auto r = (*s)->run(random_input({4, 16}, 1));
  ASSERT_EQ(driver::kmd::stats(test::test_device(), &after), 0);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeviceFault) << r.status().to_string();
  EXPECT_NE(r.status().message().find("0xffff0000"), std::string::npos) << r.status().message();
  EXPECT_EQ(after.jobs_success - before.jobs_success, 1u);     // step 0
  EXPECT_EQ(after.jobs_page_fault - before.jobs_page_fault, 1u);  // step 1
  // Steps 2 and 3 never ran: queued behind the fault they end ABORTED; submitted after it
  // the banned context refuses them. A fault is never retried.
  const uint64_t submitted = after.jobs_submitted - before.jobs_submitted;
  EXPECT_GE(submitted, 2u);
  EXPECT_LE(submitted, 4u);
  EXPECT_EQ(after.jobs_aborted - before.jobs_aborted, submitted - 2);
  // The next request runs on a fresh context.
  auto good = Session::create(runtime_, gemm_);
  ASSERT_TRUE(good.is_ok());
  EXPECT_TRUE((*good)->run(random_input({4, 64}, 2)).is_ok());
}

TEST_F(SimTest, AnImageForOtherHardwareIsRefused) {
  test::ImageOptions o;
  o.fingerprint ^= 1;
  auto m = Model::from_image(test::identity_image(o));
  ASSERT_TRUE(m.is_ok());
  auto s = Session::create(runtime_, *m);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIncompatible);
  EXPECT_NE(s.status().message().find("recompile"), std::string::npos);
}

TEST_F(SimTest, ManyThreadsGetTheSameOutputsAsOne) {
  SessionOptions so;
  so.max_in_flight = 3;
  auto s = Session::create(runtime_, gemm_, so);
  ASSERT_TRUE(s.is_ok());
  std::vector<std::vector<float>> expected;
  for (uint32_t k = 0; k < 8; ++k) {
    auto out = (*s)->run(random_input({4, 64}, 100 + k));
    ASSERT_TRUE(out.is_ok());
    auto v = out->tensors[0].as<float>();
    expected.emplace_back(v.begin(), v.end());
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t k = 0; k < 8; ++k) {
        const uint32_t which = (k + static_cast<uint32_t>(t)) % 8;
        auto out = (*s)->run(random_input({4, 64}, 100 + which));
        if (!out.is_ok()) {
          ++failures;
          continue;
        }
        auto v = out->tensors[0].as<float>();
        if (!std::equal(v.begin(), v.end(), expected[which].begin())) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(SimTest, AsyncRequestsCompleteExactlyOnceOnTheDevice) {
  SessionOptions so;
  so.max_in_flight = 4;
  so.max_outstanding = 16;
  auto pair = AsyncSession::create(runtime_, gemm_, so);
  ASSERT_TRUE(pair.is_ok());
  auto& [session, queue] = *pair;
  std::map<int, int> seen;
  int received = 0;
  for (int i = 0; i < 40; ++i) {
    // Keep at most 16 outstanding by receiving as we go.
    auto id = session->submit(random_input({4, 64}, static_cast<uint32_t>(i)), i,
                              Clock::now() + std::chrono::milliseconds(1));
    if (!id.is_ok()) {
      ASSERT_EQ(id.status().code(), StatusCode::kResourceExhausted);
      auto c = queue->recv(std::chrono::seconds(30));
      ASSERT_TRUE(c.is_ok()) << c.status().to_string();
      EXPECT_TRUE(c->status.is_ok()) << c->status.to_string();
      seen[std::any_cast<int>(c->user_context)]++;
      ++received;
      --i;
    }
  }
  session->close();
  for (Completion& c : *queue) {
    EXPECT_TRUE(c.status.is_ok()) << c.status.to_string();
    seen[std::any_cast<int>(c.user_context)]++;
    ++received;
  }
  EXPECT_EQ(received, 40);
  EXPECT_EQ(seen.size(), 40u);
  for (auto [k, n] : seen) EXPECT_EQ(n, 1) << k;
}

}  // namespace
}  // namespace npu::runtime
