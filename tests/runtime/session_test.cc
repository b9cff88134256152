// Session, AsyncSession and CompletionQueue semantics on a scripted device (pure host).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "fake_device.h"
#include "image_builder.h"
#include "npu/runtime/api.h"

namespace npu::runtime {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    device_ = std::make_shared<test::FakeDevice>();
    RuntimeOptions o;
    o.scheduler.num_contexts = 1;
    o.scheduler.queue_capacity = 64;
    o.scheduler.pipeline_depth = pipeline_depth();
    auto rt = Runtime::create({device_}, o);
    ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
    runtime_ = std::move(rt).value();
    auto m = Model::from_image(test::identity_image());
    ASSERT_TRUE(m.is_ok());
    model_ = std::move(m).value();
  }
  // One job on the device at a time: a request behind it stays queued (cancellable at once).
  virtual uint32_t pipeline_depth() const { return 1; }
  static std::vector<Tensor> input(float base) {
    Tensor x = Tensor::zeros(DType::kF32, {4, 16});
    auto v = x.as<float>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = base + 0.05f * static_cast<float>(i % 7);
    return {x};
  }
  std::pair<std::unique_ptr<AsyncSession>, std::unique_ptr<CompletionQueue>> async(
      uint32_t max_outstanding = 64) {
    SessionOptions o;
    o.max_outstanding = max_outstanding;
    o.max_in_flight = 16;  // activation buffers: room for every request these tests hold
    auto r = AsyncSession::create(runtime_, model_, o);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return std::move(r).value();
  }

  std::shared_ptr<test::FakeDevice> device_;
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<const Model> model_;
};

TEST_F(SessionTest, ModelIsIntrospectable) {
  ASSERT_EQ(model_->inputs().size(), 1u);
  EXPECT_EQ(model_->inputs()[0].name, "x");
  EXPECT_EQ(model_->inputs()[0].shape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(model_->inputs()[0].layout, "NC");
  EXPECT_EQ(model_->inputs()[0].device_strides, (std::vector<int64_t>{32, 1}));
  EXPECT_FLOAT_EQ(model_->inputs()[0].device_quant.scale[0], 0.05f);
  const std::string text = model_->summary();
  EXPECT_NE(text.find("x: float32[4,16] NC"), std::string::npos) << text;
  const std::string json = model_->summary_json();
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"name\":\"y\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"shape\":[4,16]"), std::string::npos) << json;
}

TEST_F(SessionTest, RunReturnsDequantisedOutputs) {
  auto s = Session::create(runtime_, model_);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto in = input(0.0f);
  auto out = (*s)->run(in);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  ASSERT_EQ(out->tensors.size(), 1u);
  auto y = out->tensors[0].as<float>();
  auto x = in[0].as<float>();
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(y[i], dequantize(quantize_int8(x[i], 0.05f, 3), 0.05f, 3)) << i;
  EXPECT_EQ(out->stats.device_cycles, 100u);
}

TEST_F(SessionTest, RunRejectsBadInputsWithoutTouchingTheDevice) {
  auto s = Session::create(runtime_, model_);
  ASSERT_TRUE(s.is_ok());
  std::vector<Tensor> none;
  EXPECT_EQ((*s)->run(none).status().code(), StatusCode::kInvalidArgument);
  std::vector<Tensor> wrong{Tensor::zeros(DType::kF32, {4, 15})};
  auto r = (*s)->run(wrong);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("[4,15]"), std::string::npos);
  EXPECT_TRUE(device_->jobs().empty());
}

TEST_F(SessionTest, AHostStepWithoutAKernelIsUnsupportedNamingOpAndNode) {
  test::ImageOptions o;
  o.host_step = true;
  auto m = Model::from_image(test::identity_image(o));
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ((*m)->host_steps(), 1u);
  auto s = Session::create(runtime_, *m);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(s.status().message().find("FancyOp"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("fancy_1"), std::string::npos) << s.status().message();
}

TEST_F(SessionTest, ARegisteredHostKernelRunsOnTheValuesOfItsRequest) {
  test::ImageOptions o;
  o.host_step = true;
  auto m = Model::from_image(test::identity_image(o));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  ASSERT_TRUE((*m)->mapped());
  ASSERT_EQ((*m)->constants().size(), 1u);
  EXPECT_FALSE((*m)->outputs()[0].on_device);
  std::atomic<int> calls{0};
  // z = c - y, elementwise with c broadcast over rows.
  register_host_kernel("FancyOp", [&](HostOpContext& ctx) {
    ++calls;
    if (ctx.step != 1 || ctx.inputs.size() != 2 || ctx.outputs->size() != 1)
      return make_error(StatusCode::kInternal, "unexpected call");
    auto y = ctx.inputs[0]->as<float>();
    auto c = ctx.inputs[1]->as<float>();
    auto z = (*ctx.outputs)[0].as<float>();
    for (size_t i = 0; i < z.size(); ++i) z[i] = c[i % 16] - y[i];
    return Status::ok();
  });
  auto s = Session::create(runtime_, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto in = input(1.0f);
  auto out = (*s)->run(in);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(calls.load(), 1);
  auto x = in[0].as<float>();
  auto z = out->tensors[0].as<float>();
  for (size_t i = 0; i < z.size(); ++i)
    EXPECT_FLOAT_EQ(z[i], 0.5f * static_cast<float>(i % 16) -
                              dequantize(quantize_int8(x[i], 0.05f, 3), 0.05f, 3))
        << i;
  // A failing kernel fails only its request, naming the operator and node.
  register_host_kernel("FancyOp", [](HostOpContext&) {
    return make_error(StatusCode::kInvalidArgument, "bad attribute");
  });
  auto bad = (*s)->run(in);
  register_host_kernel("FancyOp", {});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("FancyOp (node 'fancy_1'): bad attribute"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(SessionTest, RunIsSafeFromManyThreads) {
  SessionOptions so;
  so.max_in_flight = 3;
  auto s = Session::create(runtime_, model_, so);
  ASSERT_TRUE(s.is_ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        auto in = input(static_cast<float>(t) - 2.0f + 0.01f * static_cast<float>(k));
        auto out = (*s)->run(in);
        if (!out.is_ok()) {
          ++failures;
          continue;
        }
        const float x0 = in[0].as<float>()[5];
        if (out->tensors[0].as<float>()[5] != dequantize(quantize_int8(x0, 0.05f, 3), 0.05f, 3))
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(device_->jobs().size(), 120u);
}

TEST_F(SessionTest, RunAsyncAndFuturesComplete) {
  auto s = Session::create(runtime_, model_);
  ASSERT_TRUE(s.is_ok());
  auto fut = (*s)->run_future(input(0.5f));
  auto r = fut.get();
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::promise<Status> p;
  ASSERT_TRUE((*s)->run_async(input(0.5f), [&](Result<Outputs> o) { p.set_value(o.status()); }).is_ok());
  EXPECT_TRUE(p.get_future().get().is_ok());
  // A request that is not accepted never calls back.
  bool called = false;
  std::vector<Tensor> bad{Tensor::zeros(DType::kI32, {4, 16})};
  EXPECT_FALSE((*s)->run_async(bad, [&](Result<Outputs>) { called = true; }).is_ok());
  EXPECT_FALSE(called);
}

TEST_F(SessionTest, AsyncEveryRequestCompletesExactlyOnce) {
  auto [session, queue] = async();
  std::map<int, int> seen;
  std::map<uint64_t, int> ids;
  for (int i = 0; i < 50; ++i) {
    auto id = session->submit(input(static_cast<float>(i) * 0.01f), i);
    ASSERT_TRUE(id.is_ok()) << id.status().to_string();
    ids[*id] = i;
  }
  for (int i = 0; i < 50; ++i) {
    auto c = queue->recv(std::chrono::seconds(10));
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_TRUE(c->status.is_ok());
    const int ctx = std::any_cast<int>(c->user_context);
    EXPECT_EQ(ids.at(c->request_id), ctx);
    seen[ctx]++;
  }
  EXPECT_EQ(seen.size(), 50u);
  for (auto [k, n] : seen) EXPECT_EQ(n, 1) << k;
  auto none = queue->try_recv();
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(queue->recv(std::chrono::milliseconds(20)).status().code(), StatusCode::kDeadlineExceeded);
  session->close();
  EXPECT_EQ(queue->recv(std::chrono::seconds(1)).status().code(), StatusCode::kUnavailable);
}

TEST_F(SessionTest, ClosingTheSubmitSideDrains) {
  auto [session, queue] = async();
  device_->hold();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(session->submit(input(0), i).is_ok());
  session->close();
  session->close();  // idempotent
  EXPECT_EQ(session->submit(input(0), 99).status().code(), StatusCode::kUnavailable);
  device_->release();
  int n = 0;
  for (Completion& c : *queue) {
    EXPECT_TRUE(c.status.is_ok()) << c.status.to_string();
    ++n;
  }
  EXPECT_EQ(n, 10);
}

TEST_F(SessionTest, ClosingTheQueueCancelsPendingRequestsEachExactlyOnce) {
  auto [session, queue] = async();
  device_->hold();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(session->submit(input(0), i).is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));  // request 0 is on the device
  queue->close();
  queue->close();
  EXPECT_EQ(session->submit(input(0), 99).status().code(), StatusCode::kUnavailable);
  // The nine queued ones complete CANCELLED at once; the running one once the device is done.
  std::map<int, int> seen;
  for (int k = 0; k < 9; ++k) {
    auto c = queue->recv(std::chrono::seconds(10));
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_EQ(c->status.code(), StatusCode::kCancelled);
    seen[std::any_cast<int>(c->user_context)]++;
  }
  device_->release();
  auto last = queue->recv(std::chrono::seconds(10));
  ASSERT_TRUE(last.is_ok());
  EXPECT_EQ(last->status.code(), StatusCode::kCancelled);
  seen[std::any_cast<int>(last->user_context)]++;
  EXPECT_EQ(queue->recv(std::chrono::seconds(1)).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(seen.size(), 10u);
  for (auto [k, n] : seen) EXPECT_EQ(n, 1) << k;
  EXPECT_EQ(device_->jobs().size(), 1u);
}

TEST_F(SessionTest, CancelTouchesOnlyThatRequest) {
  auto [session, queue] = async();
  device_->hold();
  auto a = session->submit(input(0), 1);
  auto b = session->submit(input(0), 2);
  auto c = session->submit(input(0), 3);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_TRUE(device_->wait_submitted(1));
  ASSERT_TRUE(session->cancel(*b).is_ok());
  auto first = queue->recv(std::chrono::seconds(10));
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->request_id, *b);
  EXPECT_EQ(first->status.code(), StatusCode::kCancelled);
  device_->release();
  for (int k = 0; k < 2; ++k) {
    auto r = queue->recv(std::chrono::seconds(10));
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(r->status.is_ok()) << r->status.to_string();
    EXPECT_NE(r->request_id, *b);
  }
  EXPECT_EQ(session->cancel(*b).code(), StatusCode::kNotFound);
  EXPECT_EQ(device_->jobs().size(), 2u);
}

TEST_F(SessionTest, AsyncBackpressure) {
  auto [session, queue] = async(/*max_outstanding=*/2);
  device_->hold();
  ASSERT_TRUE(session->try_submit(input(0), 1).is_ok());
  ASSERT_TRUE(session->try_submit(input(0), 2).is_ok());
  auto full = session->try_submit(input(0), 3);
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  auto late = session->submit(input(0), 4, Clock::now() + std::chrono::milliseconds(30));
  EXPECT_EQ(late.status().code(), StatusCode::kResourceExhausted);
  device_->release();
  ASSERT_TRUE(queue->recv(std::chrono::seconds(10)).is_ok());
  EXPECT_TRUE(session->try_submit(input(0), 5).is_ok());
  EXPECT_EQ(queue->outstanding(), 2u);
}

TEST_F(SessionTest, CloseFromACallbackIsSafe) {
  auto [session, queue] = async();
  auto s = Session::create(runtime_, model_);
  ASSERT_TRUE(s.is_ok());
  std::promise<void> done;
  CompletionQueue* q = queue.get();
  ASSERT_TRUE((*s)->run_async(input(0), [&, q](Result<Outputs>) {
                   q->close();
                   q->close();
                   done.set_value();
                 }).is_ok());
  done.get_future().get();
  EXPECT_EQ(session->submit(input(0), 1).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(queue->recv(std::chrono::seconds(1)).status().code(), StatusCode::kUnavailable);
}

TEST_F(SessionTest, DestroyingEverythingWhileRequestsAreInFlightIsSafe) {
  device_->hold();
  {
    auto [session, queue] = async();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(session->submit(input(0), i).is_ok());
    ASSERT_TRUE(device_->wait_submitted(1));
    runtime_.reset();  // sessions keep the runtime alive
    model_.reset();
    session.reset();
    queue.reset();  // cancels the queued ones
  }
  device_->release();
  SUCCEED();
}

TEST(MultiDevice, RequestsAreSpreadOverEveryDeviceOfTheRuntime) {
  auto a = std::make_shared<test::FakeDevice>();
  auto b = std::make_shared<test::FakeDevice>();
  auto rt = Runtime::create({a, b});
  ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
  EXPECT_EQ((*rt)->device_count(), 2u);
  auto m = Model::from_image(test::identity_image());
  ASSERT_TRUE(m.is_ok());
  auto s = Session::create(*rt, *m);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  std::vector<Tensor> in{Tensor::zeros(DType::kF32, {4, 16})};
  uint32_t on_b = 0;
  for (int k = 0; k < 10; ++k) {
    auto out = (*s)->run(in);
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    on_b += out->stats.device_index;
  }
  EXPECT_EQ(a->jobs().size() + b->jobs().size(), 10u);
  EXPECT_EQ(b->jobs().size(), on_b);
  EXPECT_GE(a->jobs().size(), 3u);
  EXPECT_GE(b->jobs().size(), 3u);
}

TEST_F(SessionTest, ProfilingProducesChromeTraceSpans) {
  auto s = Session::create(runtime_, model_);
  ASSERT_TRUE(s.is_ok());
  runtime_->start_profiling();
  ASSERT_TRUE((*s)->run(input(0)).is_ok());
  const std::string trace = runtime_->end_profiling();
  for (const char* span : {"\"copy-in\"", "\"queue\"", "\"device\"", "\"copy-out\""})
    EXPECT_NE(trace.find(span), std::string::npos) << span << " missing in " << trace;
  EXPECT_NE(trace.find("\"ph\":\"X\""), std::string::npos);
}

// With pipelining a lane takes the requests queued behind the one it runs onto the device too:
// cancelling one of them still touches only that request, and it completes exactly once.
class PipelinedSessionTest : public SessionTest {
 protected:
  uint32_t pipeline_depth() const override { return 8; }
};

TEST_F(PipelinedSessionTest, CancelTouchesOnlyThatRequest) {
  auto [session, queue] = async();
  device_->hold();
  auto a = session->submit(input(0), 1);
  ASSERT_TRUE(device_->wait_submitted(1));
  auto b = session->submit(input(0), 2);
  auto c = session->submit(input(0), 3);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_TRUE(session->cancel(*b).is_ok());
  device_->release();
  std::map<uint64_t, int> seen;
  for (int k = 0; k < 3; ++k) {
    auto r = queue->recv(std::chrono::seconds(10));
    ASSERT_TRUE(r.is_ok());
    ++seen[r->request_id];
    if (r->request_id == *b) {
      EXPECT_EQ(r->status.code(), StatusCode::kCancelled) << r->status.to_string();
    } else {
      EXPECT_TRUE(r->status.is_ok()) << r->status.to_string();
    }
  }
  EXPECT_EQ(seen, (std::map<uint64_t, int>{{*a, 1}, {*b, 1}, {*c, 1}}));
  EXPECT_EQ(session->cancel(*b).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace npu::runtime
