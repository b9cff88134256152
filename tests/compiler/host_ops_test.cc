// The host-fallback kernels where ONNX is easy to get wrong: broadcasting, opset-dependent
// attributes vs inputs, padding and rounding modes, index clamping, and bad inputs (errors,
// never crashes). The ONNX backend node tests (conformance label) cover the rest.
#include "npu/compiler/host_ops.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

#include "ir.h"

namespace npu::compiler {
namespace {

Tensor F(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.element_count()), v.size());
  std::copy(v.begin(), v.end(), t.as<float>().begin());
  return t;
}

Tensor I64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  Tensor t = Tensor::zeros(DType::kI64, std::move(shape));
  std::copy(v.begin(), v.end(), t.as<int64_t>().begin());
  return t;
}

Tensor Iota(std::vector<int64_t> shape) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(shape));
  for (size_t i = 0; i < t.as<float>().size(); ++i) t.as<float>()[i] = static_cast<float>(i);
  return t;
}

Attribute Int(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  return a;
}
Attribute Float(float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  return a;
}
Attribute Ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Str(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  return a;
}

Result<std::vector<Tensor>> RunOp(const std::string& op, int64_t opset, const HostOpAttrs& attrs,
                                  std::vector<const Tensor*> inputs, size_t num_outputs = 0) {
  return run_host_op(op, op + "_node", opset, attrs, inputs, num_outputs);
}

Tensor RunOne(const std::string& op, int64_t opset, const HostOpAttrs& attrs,
              std::vector<const Tensor*> inputs) {
  auto r = RunOp(op, opset, attrs, std::move(inputs));
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? r.value()[0] : Tensor{};
}

std::vector<float> Values(const Tensor& t) {
  const Tensor f = to_float(t);
  const auto v = f.as<float>();
  return {v.begin(), v.end()};
}

TEST(HostOps, BroadcastingBinaryAndWhere) {
  const Tensor a = Iota({2, 1, 3}), b = F({4, 1}, {0, 10, 20, 30});
  const Tensor y = RunOne("Add", 13, {}, {&a, &b});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 4, 3}));
  EXPECT_FLOAT_EQ(Values(y)[1 * 12 + 2 * 3 + 1], 4.0f + 20.0f);  // a[1,0,1] + b[2,0]
  const Tensor c = F({3}, {1, 0, 1});
  Tensor cond = Tensor::zeros(DType::kU8, {3});
  cond.data = {1, 0, 1};
  const Tensor w = RunOne("Where", 16, {}, {&cond, &a, &c});
  EXPECT_EQ(Values(w), (std::vector<float>{0, 0, 2, 3, 0, 5}));
  const Tensor bad = F({2}, {1, 2});
  auto r = RunOp("Mul", 13, {}, {&a, &bad});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("do not broadcast"), std::string::npos);
}

TEST(HostOps, IntegerDivisionByZeroIsAnErrorNotACrash) {
  Tensor a = Tensor::zeros(DType::kI32, {2}), b = Tensor::zeros(DType::kI32, {2});
  a.as<int32_t>()[0] = std::numeric_limits<int32_t>::min();
  b.as<int32_t>()[0] = -1;
  auto r = RunOp("Div", 14, {}, {&a, &b});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);
  auto m = RunOp("Mod", 13, {}, {&a, &b});
  EXPECT_FALSE(m.is_ok());
}

TEST(HostOps, ModFollowsTheDivisorSignUnlessFmod) {
  Tensor a = Tensor::zeros(DType::kI64, {2}), b = Tensor::zeros(DType::kI64, {2});
  a.as<int64_t>()[0] = -7, a.as<int64_t>()[1] = 7;
  b.as<int64_t>()[0] = 3, b.as<int64_t>()[1] = -3;
  EXPECT_EQ(Values(RunOne("Mod", 13, {}, {&a, &b})), (std::vector<float>{2, -2}));
  EXPECT_EQ(Values(RunOne("Mod", 13, {{"fmod", Int(1)}}, {&a, &b})), (std::vector<float>{-1, 1}));
}

TEST(HostOps, MatMulBroadcastsBatchesAndVectors) {
  const Tensor a = Iota({2, 1, 2, 3}), b = Iota({3, 3, 4});
  const Tensor y = RunOne("MatMul", 13, {}, {&a, &b});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{2, 3, 2, 4}));
  // y[1, 2, 1, 3] = sum_k a[1,0,1,k] * b[2,k,3]
  float want = 0;
  for (int k = 0; k < 3; ++k)
    want += static_cast<float>(6 + 3 + k) * static_cast<float>(24 + k * 4 + 3);
  EXPECT_FLOAT_EQ(Values(y)[((1 * 3 + 2) * 2 + 1) * 4 + 3], want);
  const Tensor v = F({3}, {1, 2, 3}), m = Iota({3, 2});
  EXPECT_EQ(RunOne("MatMul", 13, {}, {&v, &m}).shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(RunOne("MatMul", 13, {}, {&v, &v}).shape, (std::vector<int64_t>{}));
  auto r = RunOp("MatMul", 13, {}, {&m, &m});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("MatMul node 'MatMul_node'"), std::string::npos);
}

TEST(HostOps, GemmTransposesAndBroadcastsC) {
  const Tensor a = Iota({3, 2}), b = Iota({4, 3}), c = F({4}, {1, 2, 3, 4});
  const Tensor y =
      RunOne("Gemm", 13,
             {{"transA", Int(1)}, {"transB", Int(1)}, {"alpha", Float(2)}, {"beta", Float(0.5f)}},
             {&a, &b, &c});
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, 4}));
  // y[1,2] = 2 * sum_k A[k,1] * B[2,k] + 0.5 * 3
  const float want = 2 * (1 * 6 + 3 * 7 + 5 * 8) + 1.5f;
  EXPECT_FLOAT_EQ(Values(y)[1 * 4 + 2], want);
}

TEST(HostOps, SoftmaxCoercesTo2DBeforeOpset13) {
  const Tensor x = Iota({2, 3, 2});
  const HostOpAttrs axis1{{"axis", Int(1)}};
  const auto old = Values(RunOne("Softmax", 11, axis1, {&x}));
  const auto now = Values(RunOne("Softmax", 13, axis1, {&x}));
  float old_sum = 0, now_sum = 0;
  for (int k = 0; k < 6; ++k) old_sum += old[static_cast<size_t>(k)];      // one row of [2, 6]
  for (int k = 0; k < 3; ++k) now_sum += now[static_cast<size_t>(k * 2)];  // along axis 1
  EXPECT_NEAR(old_sum, 1.0f, 1e-6);
  EXPECT_NEAR(now_sum, 1.0f, 1e-6);
  EXPECT_NE(old[0], now[0]);
  // Default axis: 1 before opset 13, -1 from 13.
  const auto d13 = Values(RunOne("Softmax", 13, {}, {&x}));
  EXPECT_NEAR(d13[0] + d13[1], 1.0f, 1e-6);
  const auto lsm = Values(RunOne("LogSoftmax", 13, {}, {&x}));
  EXPECT_NEAR(std::exp(lsm[0]), d13[0], 1e-6);
}

TEST(HostOps, ConvAutoPadStridesDilationsGroups) {
  const Tensor x = Iota({1, 2, 5, 5});
  Tensor w = Tensor::zeros(DType::kF32, {2, 1, 3, 3});
  for (float& v : w.as<float>()) v = 1;
  const HostOpAttrs upper{
      {"auto_pad", Str("SAME_UPPER")}, {"strides", Ints({2, 2})}, {"group", Int(2)}};
  const Tensor y = RunOne("Conv", 11, upper, {&x, &w});
  ASSERT_EQ(y.shape, (std::vector<int64_t>{1, 2, 3, 3}));
  // SAME_UPPER with stride 2 on 5: total padding 2, one on each side; y[0,0,0,0] sums x[0:2,0:2].
  EXPECT_FLOAT_EQ(Values(y)[0], 0 + 1 + 5 + 6);
  // Channel 1 (group 2) starts at 25; y[0,1,2,2] sums x[1, 3:5, 3:5].
  EXPECT_FLOAT_EQ(Values(y)[9 + 8], 25 * 4 + 18 + 19 + 23 + 24);
  const HostOpAttrs lower{
      {"auto_pad", Str("SAME_LOWER")}, {"strides", Ints({2, 2})}, {"group", Int(2)}};
  EXPECT_FLOAT_EQ(Values(RunOne("Conv", 11, lower, {&x, &w}))[0], 0 + 1 + 5 + 6);
  const HostOpAttrs dil{{"dilations", Ints({2, 2})}, {"group", Int(2)}};
  const Tensor yd = RunOne("Conv", 11, dil, {&x, &w});
  ASSERT_EQ(yd.shape, (std::vector<int64_t>{1, 2, 1, 1}));
  EXPECT_FLOAT_EQ(Values(yd)[0], 0 + 2 + 4 + 10 + 12 + 14 + 20 + 22 + 24);
  const Tensor w_bad = Iota({2, 2, 3, 3});
  auto r = RunOp("Conv", 11, {{"group", Int(2)}}, {&x, &w_bad});
  EXPECT_FALSE(r.is_ok());
}

TEST(HostOps, ConvTransposeOutputShapeAndPadding) {
  const Tensor x = Iota({1, 1, 3, 3});
  Tensor w = Tensor::zeros(DType::kF32, {1, 2, 3, 3});
  for (float& v : w.as<float>()) v = 1;
  const Tensor y = RunOne("ConvTranspose", 11, {{"strides", Ints({3, 2})}}, {&x, &w});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 2, 9, 7}));
  const Tensor ys = RunOne("ConvTranspose", 11,
                           {{"strides", Ints({3, 2})}, {"output_shape", Ints({10, 8})}}, {&x, &w});
  EXPECT_EQ(ys.shape, (std::vector<int64_t>{1, 2, 10, 8}));
  const Tensor yp = RunOne("ConvTranspose", 11, {{"pads", Ints({1, 1, 1, 1})}}, {&x, &w});
  EXPECT_EQ(yp.shape, (std::vector<int64_t>{1, 2, 3, 3}));
  EXPECT_FLOAT_EQ(Values(yp)[4], 36);  // the centre sees all of x
}

TEST(HostOps, AveragePoolCountIncludePad) {
  const Tensor x = F({1, 1, 2, 2}, {1, 2, 3, 4});
  const HostOpAttrs base{{"kernel_shape", Ints({2, 2})}, {"pads", Ints({1, 1, 1, 1})}};
  HostOpAttrs incl = base;
  incl["count_include_pad"] = Int(1);
  EXPECT_FLOAT_EQ(Values(RunOne("AveragePool", 11, base, {&x}))[0], 1.0f);
  EXPECT_FLOAT_EQ(Values(RunOne("AveragePool", 11, incl, {&x}))[0], 0.25f);
  // ceil_mode adds a window, which must not start in the end padding.
  const Tensor x5 = Iota({1, 1, 5, 5});
  const HostOpAttrs ceil{
      {"kernel_shape", Ints({2, 2})}, {"strides", Ints({2, 2})}, {"ceil_mode", Int(1)}};
  const Tensor y = RunOne("AveragePool", 11, ceil, {&x5});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_FLOAT_EQ(Values(y)[8], 24);  // the last window holds one element
}

TEST(HostOps, MaxPoolIndicesInBothStorageOrders) {
  const Tensor x = F({1, 1, 2, 3}, {1, 9, 2, 3, 4, 8});
  const HostOpAttrs a{{"kernel_shape", Ints({2, 2})}};
  auto r = RunOp("MaxPool", 12, a, {&x});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(Values(r.value()[0]), (std::vector<float>{9, 9}));
  EXPECT_EQ(r.value()[1].as<int64_t>()[1], 1);  // row-major index of 9
  HostOpAttrs col = a;
  col["storage_order"] = Int(1);
  auto c = RunOp("MaxPool", 12, col, {&x});
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c.value()[1].as<int64_t>()[1], 2);  // column-major: h + w * H = 0 + 1 * 2
}

TEST(HostOps, SliceClampsAndStepsBackwards) {
  const Tensor x = Iota({5});
  const Tensor starts = I64({1}, {-1}), ends = I64({1}, {std::numeric_limits<int64_t>::min()}),
               axes = I64({1}, {0}), steps = I64({1}, {-2});
  EXPECT_EQ(Values(RunOne("Slice", 13, {}, {&x, &starts, &ends, &axes, &steps})),
            (std::vector<float>{4, 2, 0}));
  const Tensor s2 = I64({1}, {2}), e2 = I64({1}, {std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(Values(RunOne("Slice", 13, {}, {&x, &s2, &e2})), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(Values(RunOne("Slice", 9, {{"starts", Ints({1})}, {"ends", Ints({3})}}, {&x})),
            (std::vector<float>{1, 2}));
  const Tensor zero = I64({1}, {0});
  EXPECT_FALSE(RunOp("Slice", 13, {}, {&x, &s2, &e2, &axes, &zero}).is_ok());
}

TEST(HostOps, ReduceAxesAttributeOrInputByOpset) {
  const Tensor x = Iota({2, 3});
  EXPECT_EQ(Values(RunOne("ReduceMean", 13, {{"axes", Ints({1})}, {"keepdims", Int(0)}}, {&x})),
            (std::vector<float>{1, 4}));
  const Tensor axes = I64({1}, {-2});
  const Tensor y = RunOne("ReduceSum", 13, {}, {&x, &axes});
  EXPECT_EQ(y.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Values(y), (std::vector<float>{3, 5, 7}));
  const Tensor none = I64({0}, {});
  EXPECT_EQ(RunOne("ReduceSum", 13, {{"noop_with_empty_axes", Int(1)}}, {&x, &none}).shape,
            x.shape);
  EXPECT_EQ(Values(RunOne("ReduceSum", 13, {}, {&x, &none})), (std::vector<float>{15}));
  // The axes attribute is gone from ReduceMax in opset 18.
  EXPECT_FALSE(RunOp("ReduceMax", 18, {{"axes", Ints({1})}}, {&x}).is_ok());
  EXPECT_EQ(Values(RunOne("ReduceMax", 18, {{"keepdims", Int(0)}}, {&x, &axes})),
            (std::vector<float>{3, 4, 5}));
  const Tensor l = RunOne("ReduceLogSumExp", 13, {{"axes", Ints({1})}}, {&x});
  EXPECT_NEAR(Values(l)[0], std::log(std::exp(0.0) + std::exp(1.0) + std::exp(2.0)), 1e-5);
}

TEST(HostOps, SqueezeUnsqueezeAxesByOpset) {
  const Tensor x = Iota({1, 3, 1});
  EXPECT_EQ(RunOne("Squeeze", 11, {{"axes", Ints({-1})}}, {&x}).shape,
            (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(RunOne("Squeeze", 13, {}, {&x}).shape, (std::vector<int64_t>{3}));
  const Tensor axes = I64({2}, {0, -1});
  EXPECT_EQ(RunOne("Unsqueeze", 13, {}, {&x, &axes}).shape, (std::vector<int64_t>{1, 1, 3, 1, 1}));
  EXPECT_EQ(RunOne("Unsqueeze", 11, {{"axes", Ints({1})}}, {&x}).shape,
            (std::vector<int64_t>{1, 1, 3, 1}));
  const Tensor one = I64({1}, {1});
  EXPECT_FALSE(RunOp("Squeeze", 13, {}, {&x, &one}).is_ok());  // dim 1 is 3
}

TEST(HostOps, ClipBoundsAreAttributesBeforeOpset11) {
  const Tensor x = F({3}, {-2, 0.5f, 2});
  EXPECT_EQ(Values(RunOne("Clip", 6, {{"min", Float(-1)}, {"max", Float(1)}}, {&x})),
            (std::vector<float>{-1, 0.5f, 1}));
  const Tensor lo = F({}, {0});
  EXPECT_EQ(Values(RunOne("Clip", 13, {}, {&x, &lo, nullptr})), (std::vector<float>{0, 0.5f, 2}));
}

TEST(HostOps, GatherWrapsNegativeIndicesAndRejectsOutOfRange) {
  const Tensor x = Iota({3, 2}), idx = I64({2}, {-1, 0});
  EXPECT_EQ(Values(RunOne("Gather", 13, {}, {&x, &idx})), (std::vector<float>{4, 5, 0, 1}));
  const Tensor bad = I64({1}, {3});
  auto r = RunOp("Gather", 13, {}, {&x, &bad});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos);
}

TEST(HostOps, SplitUsesTheNodesOutputCount) {
  const Tensor x = Iota({6});
  auto r = RunOp("Split", 13, {}, {&x}, 3);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_EQ(Values(r.value()[2]), (std::vector<float>{4, 5}));
  auto uneven = RunOp("Split", 18, {{"num_outputs", Int(4)}}, {&x});
  ASSERT_TRUE(uneven.is_ok()) << uneven.status().to_string();
  EXPECT_EQ(uneven.value()[3].shape, (std::vector<int64_t>{0}));
  EXPECT_FALSE(RunOp("Split", 13, {}, {&x}).is_ok());  // count unknown
}

TEST(HostOps, ResizeCoordinateModes) {
  const Tensor x = F({1, 1, 1, 2}, {1, 2});
  const Tensor empty = F({0}, {}), scales = F({4}, {1, 1, 1, 2});
  const Tensor n = RunOne("Resize", 13, {}, {&x, &empty, &scales});
  EXPECT_EQ(Values(n), (std::vector<float>{1, 1, 2, 2}));
  const Tensor l = RunOne("Resize", 13, {{"mode", Str("linear")}}, {&x, &empty, &scales});
  EXPECT_EQ(Values(l), (std::vector<float>{1, 1.25f, 1.75f, 2}));
  const Tensor sizes = I64({4}, {1, 1, 1, 3});
  const Tensor a =
      RunOne("Resize", 13,
             {{"mode", Str("linear")}, {"coordinate_transformation_mode", Str("align_corners")}},
             {&x, &empty, nullptr, &sizes});
  EXPECT_EQ(Values(a), (std::vector<float>{1, 1.5f, 2}));
  EXPECT_FALSE(RunOp("Resize", 13, {{"mode", Str("bogus")}}, {&x, &empty, &scales}).is_ok());
  EXPECT_FALSE(RunOp("Resize", 13, {}, {&x, &empty, &scales, &sizes}).is_ok());
}

TEST(HostOps, PadModes) {
  const Tensor x = Iota({3});
  const Tensor pads = I64({2}, {2, 1});
  EXPECT_EQ(Values(RunOne("Pad", 13, {{"mode", Str("reflect")}}, {&x, &pads})),
            (std::vector<float>{2, 1, 0, 1, 2, 1}));
  EXPECT_EQ(Values(RunOne("Pad", 13, {{"mode", Str("edge")}}, {&x, &pads})),
            (std::vector<float>{0, 0, 0, 1, 2, 2}));
  const Tensor v = F({}, {7});
  EXPECT_EQ(Values(RunOne("Pad", 13, {}, {&x, &pads, &v})), (std::vector<float>{7, 7, 0, 1, 2, 7}));
  EXPECT_EQ(Values(RunOne("Pad", 7, {{"pads", Ints({0, -1})}}, {&x})), (std::vector<float>{0, 1}));
}

TEST(HostOps, UnsupportedNamesTheOperatorAndNode) {
  const Tensor x = Iota({2});
  auto r = run_host_op("Loop", "my_loop", 13, {}, {&x});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("Loop"), std::string::npos);
  EXPECT_NE(r.status().message().find("my_loop"), std::string::npos);
  EXPECT_FALSE(host_op_supported("Loop"));
  EXPECT_TRUE(host_op_supported("Conv"));
  Attribute graph;
  graph.kind = Attribute::Kind::kOther;
  graph.s = "a graph";
  auto g = run_host_op("Identity", "id", 13, {{"body", graph}}, {&x});
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  auto missing = run_host_op("Add", "add", 13, {}, {&x});
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  auto null_input = run_host_op("Relu", "relu", 13, {}, {nullptr});
  EXPECT_EQ(null_input.status().code(), StatusCode::kInvalidArgument);
  const Tensor huge = I64({2}, {int64_t{1} << 40, int64_t{1} << 40});
  auto big = run_host_op("ConstantOfShape", "big", 13, {}, {&huge});
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
}

TEST(HostOps, CastSaturatesAndBoolIsZeroOrOne) {
  const Tensor x = F({4}, {300.7f, -1.5f, 0.0f, std::nanf("")});
  const Tensor u8 = RunOne("Cast", 13, {{"to", Int(2)}}, {&x});
  EXPECT_EQ(u8.data, (std::vector<uint8_t>{255, 0, 0, 0}));
  const Tensor b = RunOne("Cast", 13, {{"to", Int(9)}}, {&x});
  EXPECT_EQ(b.data, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(RunOp("Cast", 13, {{"to", Int(10)}}, {&x}).status().code(), StatusCode::kUnsupported);
}

TEST(HostOps, QuantizeRoundsHalfToEven) {
  const Tensor x = F({4}, {0.5f, 1.5f, 2.5f, -300});
  const Tensor scale = F({}, {1});
  Tensor zp = Tensor::zeros(DType::kI8, {});
  const Tensor q = RunOne("QuantizeLinear", 13, {}, {&x, &scale, &zp});
  ASSERT_EQ(q.dtype, DType::kI8);
  EXPECT_EQ(Values(q), (std::vector<float>{0, 2, 2, -128}));
  EXPECT_EQ(Values(RunOne("DequantizeLinear", 13, {}, {&q, &scale, &zp})),
            (std::vector<float>{0, 2, 2, -128}));
}

TEST(HostOps, EinsumMatmulTraceAndEllipsis) {
  const Tensor a = Iota({2, 3}), b = Iota({3, 2});
  const Tensor mm = RunOne("Einsum", 12, {{"equation", Str("ij,jk->ik")}}, {&a, &b});
  EXPECT_EQ(Values(mm), Values(RunOne("MatMul", 13, {}, {&a, &b})));
  const Tensor sq = Iota({3, 3});
  EXPECT_EQ(Values(RunOne("Einsum", 12, {{"equation", Str("ii")}}, {&sq})),
            (std::vector<float>{12}));
  const Tensor batch = Iota({2, 2, 3});
  EXPECT_EQ(RunOne("Einsum", 12, {{"equation", Str("...ij->...ji")}}, {&batch}).shape,
            (std::vector<int64_t>{2, 3, 2}));
}

}  // namespace
}  // namespace npu::compiler

namespace npu::compiler {
namespace {

// Every kernel, fed arbitrary small inputs and attributes: any status is fine, a crash is not
// (run it under -DNPU_SANITIZER=address to catch out-of-bounds access too). Deeper runs:
// NPU_HOST_OPS_FUZZ=ITERATIONS[:SEED] (default 300 per operator, seed 12345).
TEST(HostOps, NoCrashOnArbitraryInputs) {
  uint64_t state = 12345;
  int iterations = 300;
  if (const char* env = std::getenv("NPU_HOST_OPS_FUZZ")) {
    iterations = std::max(1, std::atoi(env));
    if (const char* colon = std::strchr(env, ':')) state = std::strtoull(colon + 1, nullptr, 10);
  }
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  auto small = [&] { return static_cast<int64_t>(next(7)) - 3; };
  const DType dtypes[] = {DType::kF32, DType::kF32, DType::kI64,
                          DType::kI32, DType::kU8,  DType::kI8};
  auto tensor = [&] {
    std::vector<int64_t> shape(next(5));
    for (auto& d : shape) d = static_cast<int64_t>(next(4));
    // Small values, now and then an extreme one (data-driven shapes stay modest).
    Tensor f = Tensor::zeros(DType::kF32, shape);
    for (float& v : f.as<float>()) {
      const uint64_t pick = next(64);
      v = pick == 0   ? 1e30f
          : pick == 1 ? -1e30f
          : pick == 2 ? std::nanf("")
                      : static_cast<float>(small()) / 2;
    }
    Tensor t = to_float(f);
    const DType dtype = dtypes[next(6)];
    if (dtype == DType::kF32) return t;
    Tensor out = Tensor::zeros(dtype, shape);
    for (size_t i = 0; i < t.as<float>().size(); ++i) {
      const auto v = static_cast<int64_t>(std::isfinite(t.as<float>()[i]) ? t.as<float>()[i] : 7);
      switch (dtype) {
        case DType::kI64:
          out.as<int64_t>()[i] = v;
          break;
        case DType::kI32:
          out.as<int32_t>()[i] = static_cast<int32_t>(v);
          break;
        case DType::kI8:
          out.as<int8_t>()[i] = static_cast<int8_t>(v);
          break;
        default:
          out.data[i] = static_cast<uint8_t>(v);
          break;
      }
    }
    return out;
  };
  const char* int_attrs[] = {"axis",
                             "keepdims",
                             "group",
                             "to",
                             "transA",
                             "transB",
                             "ceil_mode",
                             "p",
                             "count_include_pad",
                             "storage_order",
                             "blocksize",
                             "k",
                             "largest",
                             "upper",
                             "exclusive",
                             "reverse",
                             "batch_dims",
                             "select_last_index",
                             "allowzero",
                             "num_outputs",
                             "training_mode",
                             "noop_with_empty_axes",
                             "size",
                             "fmod"};
  const char* ints_attrs[] = {"axes",    "perm",           "kernel_shape", "pads",
                              "strides", "dilations",      "starts",       "ends",
                              "split",   "output_padding", "output_shape", "shape"};
  const char* str_attrs[][2] = {{"mode", "constant"},
                                {"mode", "reflect"},
                                {"mode", "linear"},
                                {"mode", "cubic"},
                                {"auto_pad", "SAME_UPPER"},
                                {"auto_pad", "VALID"},
                                {"direction", "LEFT"},
                                {"equation", "ij,jk->ik"},
                                {"equation", "...i->i"},
                                {"reduction", "add"},
                                {"coordinate_transformation_mode", "align_corners"},
                                {"equation", "ii"},
                                {"mode", "CRD"}};
  size_t calls = 0;
  for (const std::string& op : host_op_types()) {
    const auto start = std::chrono::steady_clock::now();
    for (int iter = 0; iter < iterations; ++iter) {
      std::vector<Tensor> storage(next(10));
      for (auto& t : storage) t = tensor();
      std::vector<const Tensor*> inputs;
      for (auto& t : storage) inputs.push_back(next(6) == 0 ? nullptr : &t);
      HostOpAttrs attrs;
      for (uint64_t a = next(4); a > 0; --a) {
        switch (next(4)) {
          case 0:
            attrs[int_attrs[next(std::size(int_attrs))]] = Int(small());
            break;
          case 1: {
            std::vector<int64_t> v(next(5));
            for (auto& x : v) x = small();
            attrs[ints_attrs[next(std::size(ints_attrs))]] = Ints(v);
            break;
          }
          case 2: {
            const auto& s = str_attrs[next(std::size(str_attrs))];
            attrs[s[0]] = Str(s[1]);
            break;
          }
          default:
            attrs["alpha"] = Float(static_cast<float>(small()) / 2);
            break;
        }
      }
      const int64_t opset = 7 + static_cast<int64_t>(next(12));
      auto r = run_host_op(op, "fuzz", opset, attrs, inputs, next(4));
      ++calls;
      if (r.is_ok()) continue;
      EXPECT_FALSE(r.status().message().empty()) << op;
      EXPECT_NE(r.status().code(), StatusCode::kInternal) << op << ": " << r.status().message();
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    EXPECT_LT(ms.count(), 3 * iterations) << op << " is slow on small inputs";
  }
  EXPECT_EQ(calls, host_op_types().size() * static_cast<size_t>(iterations));
}

}  // namespace
}  // namespace npu::compiler

namespace npu::compiler {
namespace {

// Mutations of real operator calls: every single-node ONNX backend test, with one input
// reshaped, retyped or dropped, or one attribute changed. Any status is fine; a crash (or an
// ASan report) is not. NPU_HOST_OPS_FUZZ's seed varies the mutations.
TEST(HostOps, NoCrashOnMutatedNodeTests) {
  namespace fs = std::filesystem;
  const fs::path root = "/usr/share/libonnx-testdata/data/node";
  if (!fs::is_directory(root))
    GTEST_SKIP() << root << " is missing (Debian package libonnx-testdata)";
  uint64_t state = 777;
  if (const char* env = std::getenv("NPU_HOST_OPS_FUZZ"))
    if (const char* colon = std::strchr(env, ':')) state = std::strtoull(colon + 1, nullptr, 10);
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  size_t calls = 0;
  for (const auto& entry : fs::directory_iterator(root)) {
    auto info = inspect_onnx((entry.path() / "model.onnx").string());
    if (!info.is_ok() || info->nodes != 1) continue;
    std::vector<Tensor> inputs;
    bool ok = true;
    for (size_t k = 0; ok && k < info->inputs.size(); ++k) {
      auto t = read_tensor_pb(
          (entry.path() / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb")).string());
      ok = t.is_ok();
      if (ok) inputs.push_back(std::move(t).value());
    }
    if (!ok) continue;
    auto shapes = match_inputs(*info, inputs);
    if (!shapes.is_ok()) continue;
    auto g = load_onnx((entry.path() / "model.onnx").string(), *shapes);
    if (!g.is_ok() || g->nodes.size() != 1) continue;
    const Node& node = g->nodes[0];
    // Inputs by value index: graph inputs from the data, the rest (initializers) constant.
    std::vector<Tensor> args;
    for (int v : node.inputs) {
      if (v < 0) {
        args.emplace_back();
        continue;
      }
      auto it = std::find(g->inputs.begin(), g->inputs.end(), v);
      args.push_back(it != g->inputs.end() ? inputs[static_cast<size_t>(it - g->inputs.begin())]
                                           : g->value(v).constant.value_or(Tensor{}));
    }
    for (int round = 0; round < 20; ++round) {
      std::vector<Tensor> mutated = args;
      HostOpAttrs attrs = node.attrs;
      std::vector<bool> drop(mutated.size(), false);
      for (uint64_t m = 1 + next(3); m > 0; --m) {
        const uint64_t what = next(4);
        if (!mutated.empty() && what < 3) {
          Tensor& t = mutated[next(mutated.size())];
          if (what == 0 && !t.shape.empty()) {  // one dimension changes, data follows
            int64_t& d = t.shape[next(t.shape.size())];
            d = std::max<int64_t>(0, d + static_cast<int64_t>(next(5)) - 2);
            t.data.resize(static_cast<size_t>(t.element_count()) * dtype_size(t.dtype), 1);
          } else if (what == 1) {  // another dtype, same bytes where they fit
            const DType types[] = {DType::kF32, DType::kI64, DType::kI32, DType::kU8, DType::kI8};
            t.dtype = types[next(5)];
            t.data.resize(static_cast<size_t>(t.element_count()) * dtype_size(t.dtype), 0);
          } else {
            drop[static_cast<size_t>(&t - mutated.data())] = true;
          }
        } else if (!attrs.empty()) {
          auto it = std::next(attrs.begin(), static_cast<std::ptrdiff_t>(next(attrs.size())));
          it->second.i = static_cast<int64_t>(next(9)) - 4;
          for (auto& v : it->second.ints) v = static_cast<int64_t>(next(9)) - 4;
          if (next(2)) it->second.ints.push_back(1);
          it->second.f = static_cast<float>(next(9)) - 4;
        }
      }
      std::vector<const Tensor*> ptrs;
      for (size_t k = 0; k < mutated.size(); ++k)
        ptrs.push_back(drop[k] || node.inputs[k] < 0 ? nullptr : &mutated[k]);
      auto r = run_host_op(node.op, node.name, g->opset, attrs, ptrs, node.outputs.size());
      ++calls;
      if (!r.is_ok()) {
        EXPECT_NE(r.status().code(), StatusCode::kInternal)
            << node.op << ": " << r.status().message();
      }
    }
  }
  EXPECT_GT(calls, 1000u);
}

}  // namespace
}  // namespace npu::compiler
