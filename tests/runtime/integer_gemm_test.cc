// Integer GEMM operators on the device (ConvInteger, MatMulInteger, QLinearMatMul with a
// run-time B): models built here, compiled, run through the runtime and compared element
// for element with a plain integer reference computed here. Shapes that tile (several
// channel and output blocks, K beyond one block, several M tiles), zero points of every
// kind (0, which needs the two-half correction, per channel, int8 operands) and padding,
// whose border pixels need their own bias.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "npu/compiler/compiler.h"
#include "npu/runtime/api.h"
#include "test_device.h"

namespace npu::runtime {
namespace {

int onnx_type(DType t) {
  switch (t) {
    case DType::kU8:
      return onnx::TensorProto::UINT8;
    case DType::kI8:
      return onnx::TensorProto::INT8;
    case DType::kI32:
      return onnx::TensorProto::INT32;
    default:
      return onnx::TensorProto::FLOAT;
  }
}

// A one-node ONNX model written to a temporary file.
class ModelBuilder {
 public:
  ModelBuilder() {
    model_.set_ir_version(8);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(13);
    graph_ = model_.mutable_graph();
    graph_->set_name("integer_gemm");
  }
  void input(const std::string& name, DType t, const std::vector<int64_t>& shape) {
    describe(graph_->add_input(), name, t, shape);
  }
  void output(const std::string& name, DType t, const std::vector<int64_t>& shape) {
    describe(graph_->add_output(), name, t, shape);
  }
  void initializer(const std::string& name, const Tensor& t) {
    auto* init = graph_->add_initializer();
    init->set_name(name);
    init->set_data_type(onnx_type(t.dtype));
    for (int64_t d : t.shape) init->add_dims(d);
    init->set_raw_data(t.data.data(), t.data.size());
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::string& out) {
    auto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(op + "_node");
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  std::string save(const std::string& file) const {
    const auto path =
        std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + file);
    std::ofstream f(path, std::ios::binary);
    model_.SerializeToOstream(&f);
    return path.string();
  }

 private:
  static void describe(onnx::ValueInfoProto* v, const std::string& name, DType t,
                       const std::vector<int64_t>& shape) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx_type(t));
    auto* sh = tt->mutable_shape();
    for (int64_t d : shape) sh->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto model_;
  onnx::GraphProto* graph_ = nullptr;
};

// Codes as integers, whatever their dtype.
int32_t code(const Tensor& t, size_t i) {
  return t.dtype == DType::kU8 ? static_cast<int32_t>(t.data[i])
                               : static_cast<int32_t>(t.as<int8_t>()[i]);
}

Tensor random_codes(DType t, std::vector<int64_t> shape, std::mt19937& rng, int lo = -1000,
                    int hi = 1000) {
  Tensor x = Tensor::zeros(t, std::move(shape));
  const int dlo = t == DType::kU8 ? 0 : -128, dhi = t == DType::kU8 ? 255 : 127;
  std::uniform_int_distribution<int> d(std::max(lo, dlo), std::min(hi, dhi));
  for (auto& b : x.data) b = static_cast<uint8_t>(d(rng));
  return x;
}

Tensor scalar_code(DType t, int v) {
  Tensor z = Tensor::zeros(t, {});
  z.data[0] = static_cast<uint8_t>(v);
  return z;
}

class IntegerGemm : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    auto rt = test::open_test_runtime();
    ASSERT_TRUE(rt.is_ok()) << rt.status().to_string();
    runtime_ = std::move(rt).value();
  }
  static void TearDownTestSuite() { runtime_.reset(); }

  // Compiles `path` (calibrating on `inputs`), runs it once and returns its first output;
  // *host_steps says how many operators ran on the host.
  static Tensor run(const std::string& path, const std::vector<Tensor>& inputs,
                    size_t* host_steps) {
    compiler::CompileOptions co;
    co.array_dim = runtime_->device(0)->info().array_dim;
    co.calibration = {inputs};
    auto bytes = compiler::compile_onnx_file(path, co);
    EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    if (!bytes.is_ok()) return {};
    auto m = Model::from_bytes(std::move(bytes).value(), path);
    EXPECT_TRUE(m.is_ok()) << m.status().to_string();
    if (!m.is_ok()) return {};
    *host_steps = (*m)->host_steps();
    auto s = Session::create(runtime_, *m);
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    if (!s.is_ok()) return {};
    auto out = (*s)->run(inputs);
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    std::filesystem::remove(path);
    return out.is_ok() ? out->tensors[0] : Tensor{};
  }

  static void expect_int32(const Tensor& got, const std::vector<int32_t>& expected,
                           const std::vector<int64_t>& shape) {
    ASSERT_EQ(got.dtype, DType::kI32);
    ASSERT_EQ(got.shape, shape);
    const auto y = got.as<int32_t>();
    ASSERT_EQ(y.size(), expected.size());
    size_t bad = 0;
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != expected[i] && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": expected " << expected[i] << ", got " << y[i];
    EXPECT_EQ(bad, 0u) << "elements differ";
  }

  static std::shared_ptr<Runtime> runtime_;
};
std::shared_ptr<Runtime> IntegerGemm::runtime_;

struct ConvCase {
  DType xt, wt;
  int64_t C, Cout, H, W, K, stride;
  std::vector<int64_t> pads;  // t, l, b, r
  int xzp;
  std::vector<int> wzp;  // one (per tensor), Cout (per channel) or none
  std::string name;
};

// ConvInteger with the weights (and zero points) as initializers, x a graph input.
void conv_integer_case(const ConvCase& c, size_t expected_host_steps = 0) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(static_cast<uint32_t>(c.C * 131 + c.Cout * 7 + c.K));
  const int64_t OH = (c.H + c.pads[0] + c.pads[2] - c.K) / c.stride + 1;
  const int64_t OW = (c.W + c.pads[1] + c.pads[3] - c.K) / c.stride + 1;
  Tensor x = random_codes(c.xt, {1, c.C, c.H, c.W}, rng);
  // Weights within 128 of their channel's zero point: w - w_zp is an int8 code.
  Tensor w = Tensor::zeros(c.wt, {c.Cout, c.C, c.K, c.K});
  const int64_t per = c.C * c.K * c.K;
  auto wzp_of = [&](int64_t co) {
    return c.wzp.empty() ? 0 : c.wzp[c.wzp.size() == 1 ? 0 : static_cast<size_t>(co)];
  };
  for (int64_t co = 0; co < c.Cout; ++co) {
    const int lo = wzp_of(co) - 128, hi = wzp_of(co) + 127;
    Tensor ch = random_codes(c.wt, {per}, rng, lo, hi);
    std::copy(ch.data.begin(), ch.data.end(), w.data.begin() + co * per);
  }
  ModelBuilder mb;
  mb.input("x", c.xt, {1, c.C, c.H, c.W});
  mb.output("y", DType::kI32, {1, c.Cout, OH, OW});
  mb.initializer("w", w);
  mb.initializer("x_zero_point", scalar_code(c.xt, c.xzp));
  std::vector<std::string> ins = {"x", "w", "x_zero_point"};
  if (!c.wzp.empty()) {
    Tensor z = Tensor::zeros(c.wt, {static_cast<int64_t>(c.wzp.size())});
    for (size_t i = 0; i < c.wzp.size(); ++i) z.data[i] = static_cast<uint8_t>(c.wzp[i]);
    if (c.wzp.size() == 1) z.shape = {};
    mb.initializer("w_zero_point", z);
    ins.push_back("w_zero_point");
  }
  auto* n = mb.node("ConvInteger", ins, "y");
  ModelBuilder::ints(n, "pads", c.pads);
  ModelBuilder::ints(n, "strides", {c.stride, c.stride});
  ModelBuilder::ints(n, "kernel_shape", {c.K, c.K});
  size_t host_steps = 99;
  const Tensor y = IntegerGemm::run(mb.save(c.name + ".onnx"), {x}, &host_steps);
  EXPECT_EQ(host_steps, expected_host_steps);
  // ONNX: padded pixels hold x_zero_point, i.e. contribute nothing to (x - x_zp).
  std::vector<int32_t> expected(static_cast<size_t>(c.Cout * OH * OW), 0);
  for (int64_t co = 0; co < c.Cout; ++co)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        int64_t acc = 0;
        for (int64_t ci = 0; ci < c.C; ++ci)
          for (int64_t ky = 0; ky < c.K; ++ky)
            for (int64_t kx = 0; kx < c.K; ++kx) {
              const int64_t iy = oy * c.stride + ky - c.pads[0],
                            ix = ox * c.stride + kx - c.pads[1];
              if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
              const auto xi = static_cast<size_t>((ci * c.H + iy) * c.W + ix);
              const auto wi = static_cast<size_t>(((co * c.C + ci) * c.K + ky) * c.K + kx);
              acc += static_cast<int64_t>(code(x, xi) - c.xzp) * (code(w, wi) - wzp_of(co));
            }
        expected[static_cast<size_t>((co * OH + oy) * OW + ox)] = static_cast<int32_t>(acc);
      }
  IntegerGemm::expect_int32(y, expected, {1, c.Cout, OH, OW});
}

TEST_F(IntegerGemm, ConvInteger40ChannelsOn20x20WithPaddingAndPerChannelWeightZeroPoints) {
  std::vector<int> wzp(40);
  for (size_t i = 0; i < wzp.size(); ++i) wzp[i] = 90 + static_cast<int>(i) * 2;
  conv_integer_case({DType::kU8,
                     DType::kU8,
                     40,
                     40,
                     20,
                     20,
                     3,
                     1,
                     {1, 1, 1, 1},
                     131,
                     wzp,
                     "conv40_pad1_perchannel"});
}

TEST_F(IntegerGemm, ConvIntegerOn64x64TilesTheOutputRowsWithBorderBiasesInEveryTile) {
  // 64x64 with 40 input channels does not fit the scratchpads at once: several output-row
  // tiles (double-buffered), each with its own top/bottom border rectangles.
  conv_integer_case(
      {DType::kU8, DType::kI8, 40, 24, 64, 64, 3, 1, {1, 1, 1, 1}, 77, {-3}, "conv40_64x64_tiles"});
}

TEST_F(IntegerGemm, ConvIntegerStridedAsymmetricPaddingAndZeroPointZero) {
  // x_zero_point 0 (uint8): x - x_zp = code + 128 needs the two-half correction of the border
  // biases; w without zero point.
  conv_integer_case(
      {DType::kU8, DType::kU8, 5, 20, 11, 9, 3, 2, {2, 0, 1, 2}, 0, {}, "conv_stride2_zp0"});
}

TEST_F(IntegerGemm, ConvIntegerWithInt8OperandsAndNoPadding) {
  conv_integer_case(
      {DType::kI8, DType::kI8, 17, 33, 7, 8, 2, 1, {0, 0, 0, 0}, -5, {3}, "conv_int8_valid"});
}

TEST_F(IntegerGemm, ConvIntegerWhoseShiftedWeightsLeaveInt8RunsAsSeveralWeightSets) {
  // uint8 w up to 255 with zero point 0: w - w_zp needs three int8 weight sets (255 = 3·85).
  std::mt19937 rng(5);
  ModelBuilder mb;
  Tensor x = random_codes(DType::kU8, {1, 3, 5, 5}, rng);
  Tensor w = random_codes(DType::kU8, {4, 3, 3, 3}, rng, 0, 255);
  w.data[0] = 255;
  mb.input("x", DType::kU8, {1, 3, 5, 5});
  mb.output("y", DType::kI32, {1, 4, 3, 3});
  mb.initializer("w", w);
  mb.node("ConvInteger", {"x", "w"}, "y");
  size_t host_steps = 0;
  const Tensor y = IntegerGemm::run(mb.save("conv_wide_weights.onnx"), {x}, &host_steps);
  EXPECT_EQ(host_steps, 0u);
  std::vector<int32_t> expected(36, 0);
  for (int64_t co = 0; co < 4; ++co)
    for (int64_t oy = 0; oy < 3; ++oy)
      for (int64_t ox = 0; ox < 3; ++ox)
        for (int64_t ci = 0; ci < 3; ++ci)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx)
              expected[static_cast<size_t>((co * 3 + oy) * 3 + ox)] +=
                  code(x, static_cast<size_t>((ci * 5 + oy + ky) * 5 + ox + kx)) *
                  code(w, static_cast<size_t>(((co * 3 + ci) * 3 + ky) * 3 + kx));
  expect_int32(y, expected, {1, 4, 3, 3});
}

struct MatMulCase {
  DType at, bt;
  std::vector<int64_t> a_shape, b_shape;
  int azp, bzp;
  bool b_constant;
  std::string name;
};

void matmul_integer_case(const MatMulCase& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(static_cast<uint32_t>(c.a_shape.back() * 17 + c.b_shape.back()));
  const int64_t K = c.a_shape.back(), N = c.b_shape.back();
  const int64_t M = c.a_shape[c.a_shape.size() - 2];
  const int64_t batches = c.a_shape.size() == 3 ? c.a_shape[0] : 1;
  Tensor a = random_codes(c.at, c.a_shape, rng);
  Tensor b = random_codes(c.bt, c.b_shape, rng);
  ModelBuilder mb;
  std::vector<int64_t> y_shape = c.a_shape;
  y_shape.back() = N;
  mb.input("A", c.at, c.a_shape);
  std::vector<Tensor> inputs = {a};
  if (c.b_constant) {
    mb.initializer("B", b);
  } else {
    mb.input("B", c.bt, c.b_shape);
    inputs.push_back(b);
  }
  mb.output("Y", DType::kI32, y_shape);
  mb.initializer("a_zero_point", scalar_code(c.at, c.azp));
  mb.initializer("b_zero_point", scalar_code(c.bt, c.bzp));
  mb.node("MatMulInteger", {"A", "B", "a_zero_point", "b_zero_point"}, "Y");
  size_t host_steps = 99;
  const Tensor y = IntegerGemm::run(mb.save(c.name + ".onnx"), inputs, &host_steps);
  EXPECT_EQ(host_steps, 0u);
  std::vector<int32_t> expected(static_cast<size_t>(batches * M * N), 0);
  const bool b_batched = c.b_shape.size() == 3;
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<int64_t>(code(a, static_cast<size_t>((bt * M + m) * K + k)) - c.azp) *
                 (code(b, static_cast<size_t>(((b_batched ? bt : 0) * K + k) * N + n)) - c.bzp);
        expected[static_cast<size_t>((bt * M + m) * N + n)] = static_cast<int32_t>(acc);
      }
  IntegerGemm::expect_int32(y, expected, y_shape);
}

TEST_F(IntegerGemm, MatMulInteger70x50x30WithRunTimeBAndZeroPointsZero) {
  // Zero points 0 of uint8: both corrections multiply by 128, two int8 halves each.
  matmul_integer_case(
      {DType::kU8, DType::kU8, {70, 50}, {50, 30}, 0, 0, false, "mmi_70x50x30_zp0"});
}

TEST_F(IntegerGemm, MatMulIntegerTallAIsTiledOverM) {
  // 5000 rows do not fit the ACT/ACC scratchpads at once: several M tiles, each corrected.
  matmul_integer_case({DType::kU8, DType::kU8, {5000, 50}, {50, 30}, 0, 1, false, "mmi_tall"});
}

TEST_F(IntegerGemm, MatMulIntegerWithRunTimeBAndNonZeroZeroPoints) {
  matmul_integer_case(
      {DType::kU8, DType::kU8, {70, 50}, {50, 30}, 12, 200, false, "mmi_70x50x30_zp"});
  matmul_integer_case(
      {DType::kI8, DType::kI8, {3, 9, 37}, {3, 37, 20}, -7, 5, false, "mmi_batched_int8"});
  // One B for every batch of A.
  matmul_integer_case(
      {DType::kU8, DType::kU8, {2, 5, 37}, {37, 20}, 130, 90, false, "mmi_shared_b"});
}

TEST_F(IntegerGemm, MatMulIntegerWithConstantB) {
  // B - b_zp spans -140..115 (two int8 weight sets) and -10..245 (three).
  matmul_integer_case(
      {DType::kU8, DType::kU8, {33, 40}, {40, 18}, 100, 140, true, "mmi_constant_b"});
  matmul_integer_case(
      {DType::kU8, DType::kU8, {20, 70}, {70, 35}, 3, 10, true, "mmi_constant_b_wide"});
}

TEST_F(IntegerGemm, MatMulIntegerWithAPerRowZeroPointStaysOnTheHostAndIsStillRight) {
  // A per-row a_zero_point has no single device zero point: the host computes it.
  std::mt19937 rng(9);
  Tensor a = random_codes(DType::kU8, {4, 6}, rng), b = random_codes(DType::kU8, {6, 5}, rng);
  Tensor azp = random_codes(DType::kU8, {4}, rng);
  ModelBuilder mb;
  mb.input("A", DType::kU8, {4, 6});
  mb.input("B", DType::kU8, {6, 5});
  mb.output("Y", DType::kI32, {4, 5});
  mb.initializer("a_zero_point", azp);
  mb.node("MatMulInteger", {"A", "B", "a_zero_point"}, "Y");
  size_t host_steps = 0;
  const Tensor y = run(mb.save("mmi_per_row_zp.onnx"), {a, b}, &host_steps);
  EXPECT_EQ(host_steps, 1u);
  std::vector<int32_t> expected(20, 0);
  for (size_t m = 0; m < 4; ++m)
    for (size_t n = 0; n < 5; ++n)
      for (size_t k = 0; k < 6; ++k)
        expected[m * 5 + n] += (code(a, m * 6 + k) - code(azp, m)) * code(b, k * 5 + n);
  expect_int32(y, expected, {4, 5});
}

// QLinearMatMul with B a graph input: y = saturate(round(acc · a_scale·b_scale / y_scale) + y_zp),
// acc = Σ_k (a − a_zp)(b − b_zp), for codes of type t (uint8 or int8 throughout); y_scale and
// y_zero_point map the accumulators' range onto the codes, so that the outputs do not all
// saturate (the test checks that too). With batches > 1, a [batches, M, K], b [batches, K, N].
void qlinear_matmul_case(DType t, int azp, int bzp, const std::string& name, int64_t M = 70,
                         int64_t K = 50, int64_t N = 30, int64_t batches = 1) {
  SCOPED_TRACE(name);
  std::mt19937 rng(11);
  const float as = 0.0066f, bs = 0.00705f;
  auto shape = [&](int64_t r, int64_t c) {
    return batches > 1 ? std::vector<int64_t>{batches, r, c} : std::vector<int64_t>{r, c};
  };
  Tensor a = random_codes(t, shape(M, K), rng), b = random_codes(t, shape(K, N), rng);
  std::vector<int64_t> acc(static_cast<size_t>(batches * M * N), 0);
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          acc[static_cast<size_t>((bt * M + m) * N + n)] +=
              static_cast<int64_t>(code(a, static_cast<size_t>((bt * M + m) * K + k)) - azp) *
              (code(b, static_cast<size_t>((bt * K + k) * N + n)) - bzp);
  // The range [min(acc, 0), max(acc, 0)] over 250 steps: the real 0 (y_zp) is a code.
  const int64_t acc_lo = std::min<int64_t>(0, *std::min_element(acc.begin(), acc.end()));
  const int64_t acc_hi = std::max<int64_t>(0, *std::max_element(acc.begin(), acc.end()));
  const double lo = t == DType::kU8 ? 0 : -128, hi = t == DType::kU8 ? 255 : 127;
  const auto ys = static_cast<float>(static_cast<double>(acc_hi - acc_lo) * as * bs / 250.0);
  const int yzp = static_cast<int>(lo) + 2 -
                  static_cast<int>(std::lround(static_cast<double>(acc_lo) * as * bs / ys));
  auto f32 = [](float v) {
    Tensor s = Tensor::zeros(DType::kF32, {});
    s.as<float>()[0] = v;
    return s;
  };
  ModelBuilder mb;
  mb.input("a", t, shape(M, K));
  mb.input("b", t, shape(K, N));
  mb.output("y", t, shape(M, N));
  mb.initializer("a_scale", f32(as));
  mb.initializer("a_zero_point", scalar_code(t, azp));
  mb.initializer("b_scale", f32(bs));
  mb.initializer("b_zero_point", scalar_code(t, bzp));
  mb.initializer("y_scale", f32(ys));
  mb.initializer("y_zero_point", scalar_code(t, yzp));
  mb.node(
      "QLinearMatMul",
      {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"},
      "y");
  size_t host_steps = 99;
  const Tensor y = IntegerGemm::run(mb.save(name + ".onnx"), {a, b}, &host_steps);
  EXPECT_EQ(host_steps, 0u);
  ASSERT_EQ(y.dtype, t);
  size_t bad = 0, saturated = 0;
  for (size_t i = 0; i < acc.size(); ++i) {
    const double q =
        std::nearbyint(static_cast<double>(acc[i]) * (static_cast<double>(as) * bs) / ys) + yzp;
    const auto expected = static_cast<int>(std::clamp(q, lo, hi));
    saturated += q <= lo || q >= hi;
    const int got = code(y, i);
    if (got != expected && bad++ < 5)
      ADD_FAILURE() << "y[" << i << "]: expected " << expected << ", got " << got;
  }
  EXPECT_EQ(bad, 0u);
  EXPECT_LT(saturated, acc.size() / 20) << "the case tests little: most outputs saturate";
}

TEST_F(IntegerGemm, QLinearMatMulWithRunTimeBRequantisesLikeOnnx) {
  qlinear_matmul_case(DType::kU8, 113, 114, "qlmm_uint8");
  qlinear_matmul_case(DType::kU8, 0, 255, "qlmm_uint8_extreme_zero_points");
  qlinear_matmul_case(DType::kI8, -3, 5, "qlmm_int8");
  // B's 38x38 tiles do not all fit the weight scratchpad: loaded per output block.
  qlinear_matmul_case(DType::kU8, 0, 100, "qlmm_large_b", 40, 600, 600);
  // A B per batch: the bias rows that carry α·Σ_k b_kn are rebuilt for every B.
  qlinear_matmul_case(DType::kU8, 40, 200, "qlmm_batched", 20, 37, 24, 3);
}

}  // namespace
}  // namespace npu::runtime
