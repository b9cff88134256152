// QDQ models: the declared quantisation replaces calibration, exactly where it can.
#include "qdq.h"

#include <gtest/gtest.h>

#include "ir.h"
#include "passes.h"

namespace npu::compiler {
namespace {

int constant(Graph& g, const std::string& name, Tensor t) {
  Value v;
  v.name = name;
  v.dtype = t.dtype;
  v.shape = t.shape;
  v.constant = std::move(t);
  return g.add_value(std::move(v));
}

Tensor scalar_f32(float x) {
  Tensor t = Tensor::zeros(DType::kF32, {});
  t.as<float>()[0] = x;
  return t;
}

Tensor scalar_u8(uint8_t x) {
  Tensor t = Tensor::zeros(DType::kU8, {});
  t.data[0] = x;
  return t;
}

int value(Graph& g, const std::string& name, std::vector<int64_t> shape) {
  Value v;
  v.name = name;
  v.shape = std::move(shape);
  return g.add_value(std::move(v));
}

Node node(const std::string& op, const std::string& name, std::vector<int> in,
          std::vector<int> out) {
  Node n;
  n.op = op;
  n.name = name;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// x -> Q -> DQ -> MatMul(DQ(int8 W, per-channel)) -> Q -> DQ -> y
Graph qdq_matmul(bool codes_are_output) {
  Graph g;
  g.opset = 13;
  const int x = value(g, "x", {2, 4});
  g.inputs.push_back(x);
  const int s = constant(g, "s", scalar_f32(0.1f)), z = constant(g, "z", scalar_u8(130));
  const int xq = value(g, "xq", {2, 4}), xd = value(g, "xd", {2, 4});
  g.nodes.push_back(node("QuantizeLinear", "qx", {x, s, z}, {xq}));
  g.nodes.push_back(node("DequantizeLinear", "dqx", {xq, s, z}, {xd}));
  Tensor w = Tensor::zeros(DType::kI8, {4, 3});
  for (int i = 0; i < 12; ++i)
    w.as<int8_t>()[static_cast<size_t>(i)] = static_cast<int8_t>(i * 9 - 50);
  Tensor ws = Tensor::zeros(DType::kF32, {3});
  ws.as<float>()[0] = 0.01f, ws.as<float>()[1] = 0.02f, ws.as<float>()[2] = 0.03f;
  const int wc = constant(g, "w", w), wsv = constant(g, "ws", ws);
  const int wz = constant(g, "wz", Tensor::zeros(DType::kI8, {3}));
  const int wd = value(g, "wd", {4, 3});
  Node dqw = node("DequantizeLinear", "dqw", {wc, wsv, wz}, {wd});
  dqw.attrs["axis"].i = 1;
  g.nodes.push_back(dqw);
  const int m = value(g, "m", {2, 3});
  g.nodes.push_back(node("MatMul", "mm", {xd, wd}, {m}));
  const int s2 = constant(g, "s2", scalar_f32(0.05f)), z2 = constant(g, "z2", scalar_u8(128));
  const int mq = value(g, "mq", {2, 3}), y = value(g, "y", {2, 3});
  g.nodes.push_back(node("QuantizeLinear", "qm", {m, s2, z2}, {mq}));
  g.nodes.push_back(node("DequantizeLinear", "dqm", {mq, s2, z2}, {y}));
  g.outputs.push_back(codes_are_output ? mq : y);
  return g;
}

// MatMulInteger(A, B, a_zp, b_zp) with run-time uint8 A and B: two unit-scale
// DequantizeLinear nodes and a MatMul writing Y, bound as an int32 output; bind_integer_io then
// binds A and B with their zero points (shifted to int8), leaving the MatMul alone.
TEST(ExpandIntegerOps, MatMulIntegerBecomesAMatMulOfBoundCodesWithAnInt32Output) {
  Graph g;
  g.opset = 13;
  const int a = value(g, "A", {4, 3}), b = value(g, "B", {3, 2}), y = value(g, "Y", {4, 2});
  g.value(a).dtype = g.value(b).dtype = DType::kU8;
  g.value(y).dtype = DType::kI32;
  g.inputs = {a, b};
  const int az = constant(g, "az", scalar_u8(12)), bz = constant(g, "bz", scalar_u8(0));
  g.nodes.push_back(node("MatMulInteger", "mmi", {a, b, az, bz}, {y}));
  g.outputs.push_back(y);
  int expanded = -1;
  std::vector<std::string> notes;
  ASSERT_TRUE(expand_integer_ops(g, &expanded, &notes).is_ok());
  EXPECT_EQ(expanded, 1);
  EXPECT_TRUE(notes.empty());
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "MatMul"}));
  EXPECT_EQ(g.nodes[2].outputs[0], y);
  ASSERT_TRUE(g.value(y).io_codes.has_value());
  EXPECT_EQ(*g.value(y).io_codes, DType::kI32);
  EXPECT_EQ(g.value(y).dtype, DType::kF32);
  EXPECT_EQ(g.value(y).quant->scale, std::vector<float>{1.0f});
  int bound = -1;
  ASSERT_TRUE(bind_integer_io(g, &bound).is_ok());
  EXPECT_EQ(bound, 2);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<int>{a, b}));
  EXPECT_EQ(g.value(a).quant->zero_point, std::vector<int32_t>{12 - 128});
  EXPECT_EQ(g.value(b).quant->zero_point, std::vector<int32_t>{-128});
}

// The cases the NPU cannot take exactly stay as they are, with the reason.
TEST(ExpandIntegerOps, RunTimeZeroPointsAndRunTimeConvWeightsStayOnTheHostWithAReason) {
  Graph g;
  g.opset = 13;
  const int a = value(g, "A", {4, 3}), b = value(g, "B", {3, 2}), y = value(g, "Y", {4, 2});
  const int az = value(g, "az", {}), x = value(g, "x", {1, 1, 3, 3}), w = value(g, "w", {1, 1, 2, 2});
  const int yc = value(g, "yc", {1, 1, 2, 2});
  for (int v : {a, b, az, x, w}) g.value(v).dtype = DType::kU8;
  g.value(y).dtype = g.value(yc).dtype = DType::kI32;
  g.inputs = {a, b, az, x, w};
  g.nodes.push_back(node("MatMulInteger", "mmi", {a, b, az}, {y}));
  g.nodes.push_back(node("ConvInteger", "ci", {x, w}, {yc}));
  g.outputs = {y, yc};
  int expanded = -1;
  std::vector<std::string> notes;
  ASSERT_TRUE(expand_integer_ops(g, &expanded, &notes).is_ok());
  EXPECT_EQ(expanded, 0);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("zero points that vary at run time"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("a run-time w"), std::string::npos) << notes[1];
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].op, "MatMulInteger");
  EXPECT_EQ(g.nodes[1].op, "ConvInteger");
  EXPECT_FALSE(g.value(y).io_codes.has_value());
}

// QLinearMatMul whose B is a uint8 graph input: expanded only when asked (a compile that
// binds integer I/O), B then read through a DequantizeLinear that bind_integer_io binds.
TEST(ExpandQlinear, ARunTimeBIsExpandedOnlyForABindingCompile) {
  for (bool runtime_b : {false, true}) {
    Graph g;
    g.opset = 13;
    const int a = value(g, "a", {2, 4}), b = value(g, "b", {4, 3}), y = value(g, "y", {2, 3});
    g.value(a).dtype = g.value(b).dtype = g.value(y).dtype = DType::kU8;
    g.inputs = {a, b};
    const int as = constant(g, "as", scalar_f32(0.1f)), az = constant(g, "az", scalar_u8(113));
    const int bs = constant(g, "bs", scalar_f32(0.02f)), bz = constant(g, "bz", scalar_u8(114));
    const int ys = constant(g, "ys", scalar_f32(0.05f)), yz = constant(g, "yz", scalar_u8(118));
    g.nodes.push_back(node("QLinearMatMul", "qmm", {a, as, az, b, bs, bz, ys, yz}, {y}));
    g.outputs.push_back(y);
    int expanded = -1;
    ASSERT_TRUE(expand_qlinear(g, &expanded, runtime_b).is_ok());
    EXPECT_EQ(expanded, runtime_b ? 1 : 0);
    if (!runtime_b) continue;
    int bound = -1;
    QdqSummary summary;
    ASSERT_TRUE(fold_qdq(g, &summary).is_ok());
    ASSERT_TRUE(bind_integer_io(g, &bound).is_ok());
    EXPECT_EQ(bound, 3);  // a, b and y
    ASSERT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.nodes[0].op, "MatMul");
    EXPECT_EQ(g.nodes[0].inputs, (std::vector<int>{a, b}));
  }
}

}  // namespace

TEST(Qdq, PairsBecomeDeclaredQuantisation) {
  Graph g = qdq_matmul(false);
  QdqSummary summary;
  ASSERT_TRUE(fold_qdq(g, &summary).is_ok());
  EXPECT_EQ(summary.activation_pairs, 2);
  EXPECT_EQ(summary.weights, 1);
  ASSERT_EQ(g.nodes.size(), 2u);  // DQ(W) (folded later as a constant) and the MatMul
  const Node& mm = g.nodes[1];
  EXPECT_EQ(mm.op, "MatMul");
  // The graph input keeps its name and carries the uint8 parameters shifted to int8.
  EXPECT_EQ(mm.inputs[0], g.inputs[0]);
  ASSERT_TRUE(g.value(g.inputs[0]).quant);
  EXPECT_EQ(g.value(g.inputs[0]).quant->scale, std::vector<float>{0.1f});
  EXPECT_EQ(g.value(g.inputs[0]).quant->zero_point, std::vector<int32_t>{2});
  // The MatMul now writes the graph output 'y' itself.
  EXPECT_EQ(mm.outputs[0], g.outputs[0]);
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
  ASSERT_TRUE(g.value(g.outputs[0]).quant);
  EXPECT_EQ(g.value(g.outputs[0]).quant->zero_point, std::vector<int32_t>{0});
  // Weights: declared per output channel (axis 1 of [K, N]).
  EXPECT_EQ(declared_weight_scales(g, mm.inputs[1], 1, 3, 1.0f),
            (std::vector<float>{0.01f, 0.02f, 0.03f}));
  EXPECT_TRUE(declared_weight_scales(g, mm.inputs[1], 0, 3, 1.0f).empty());  // another axis
  const int weights = mm.inputs[1];
  int folded = 0;
  ASSERT_TRUE(fold_constants(g, &folded).is_ok());  // rebuilds g.nodes
  EXPECT_EQ(folded, 1);
  ASSERT_TRUE(g.value(weights).constant);
  EXPECT_FLOAT_EQ(g.value(weights).constant->as<float>()[0], -0.5f);  // 0.01 * -50
  EXPECT_TRUE(g.value(weights).quant);  // folding keeps the declared scales
}

TEST(Qdq, CodesOtherOperatorsReadStayNodes) {
  Graph g = qdq_matmul(true);  // the int8 codes of the MatMul output are a graph output
  QdqSummary summary;
  ASSERT_TRUE(fold_qdq(g, &summary).is_ok());
  EXPECT_EQ(summary.activation_pairs, 1);
  ASSERT_EQ(summary.notes.size(), 1u);
  EXPECT_NE(summary.notes[0].find("'qm'"), std::string::npos);
  EXPECT_EQ(g.nodes.back().op, "DequantizeLinear");
  EXPECT_FALSE(g.value(g.nodes.back().outputs[0]).quant);
}

TEST(Qdq, QLinearMatMulWithConstantParametersBecomesQdq) {
  for (const bool constant_scale : {true, false}) {
    Graph g;
    g.opset = 13;
    const int a = value(g, "a", {2, 4});
    g.value(a).dtype = DType::kU8;
    g.inputs.push_back(a);
    int as = constant(g, "as", scalar_f32(0.1f));
    if (!constant_scale) {  // like the ONNX node tests: the scale is a graph input
      as = value(g, "as_in", {});
      g.inputs.push_back(as);
    }
    const int az = constant(g, "az", scalar_u8(128));
    Tensor b = Tensor::zeros(DType::kI8, {4, 3});
    const int bv = constant(g, "b", b), bs = constant(g, "bs", scalar_f32(0.02f));
    const int bz = constant(g, "bz", Tensor::zeros(DType::kI8, {}));
    const int ys = constant(g, "ys", scalar_f32(0.05f)), yz = constant(g, "yz", scalar_u8(128));
    const int y = value(g, "y", {2, 3});
    g.value(y).dtype = DType::kU8;
    g.nodes.push_back(node("QLinearMatMul", "qmm", {a, as, az, bv, bs, bz, ys, yz}, {y}));
    g.outputs.push_back(y);
    int expanded = -1;
    ASSERT_TRUE(expand_qlinear(g, &expanded).is_ok());
    if (!constant_scale) {
      EXPECT_EQ(expanded, 0);
      ASSERT_EQ(g.nodes.size(), 1u);
      continue;
    }
    EXPECT_EQ(expanded, 1);
    std::vector<std::string> ops;
    for (const Node& n : g.nodes) ops.push_back(n.op);
    EXPECT_EQ(ops, (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "MatMul",
                                             "QuantizeLinear"}));
    EXPECT_EQ(g.nodes[2].name, "qmm");    // the float operator keeps the node's name
    EXPECT_EQ(g.nodes[3].outputs[0], y);  // and the codes stay the graph output
    EXPECT_FALSE(g.nodes[2].proto.empty());
    QdqSummary summary;
    ASSERT_TRUE(fold_qdq(g, &summary).is_ok());
    EXPECT_EQ(summary.weights, 1);
  }
}

// uint8 codes in -> DQ -> Relu -> Q -> uint8 codes out: both boundaries bound to int8 device
// views with the model's parameters (zero points shifted by -128), the Q/DQ nodes removed.
TEST(BindIntegerIo, DequantizedInputAndQuantizedOutputCarryTheModelsParameters) {
  Graph g;
  g.opset = 13;
  const int x = value(g, "x", {2, 4});
  g.value(x).dtype = DType::kU8;
  g.inputs.push_back(x);
  const int s = constant(g, "s", scalar_f32(0.1f)), z = constant(g, "z", scalar_u8(130));
  const int xd = value(g, "xd", {2, 4}), r = value(g, "r", {2, 4}), y = value(g, "y", {2, 4});
  g.value(y).dtype = DType::kU8;
  g.nodes.push_back(node("DequantizeLinear", "dq", {x, s, z}, {xd}));
  g.nodes.push_back(node("Relu", "relu", {xd}, {r}));
  const int s2 = constant(g, "s2", scalar_f32(0.05f)), z2 = constant(g, "z2", scalar_u8(100));
  g.nodes.push_back(node("QuantizeLinear", "q", {r, s2, z2}, {y}));
  g.outputs.push_back(y);
  int bound = -1;
  ASSERT_TRUE(bind_integer_io(g, &bound).is_ok());
  EXPECT_EQ(bound, 2);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op, "Relu");
  EXPECT_EQ(g.nodes[0].inputs[0], x);
  EXPECT_EQ(g.nodes[0].outputs[0], y);
  for (int v : {x, y}) {
    EXPECT_EQ(g.value(v).dtype, DType::kF32);
    ASSERT_TRUE(g.value(v).io_codes.has_value());
    EXPECT_EQ(*g.value(v).io_codes, DType::kU8);
  }
  EXPECT_EQ(g.value(x).quant->scale, std::vector<float>{0.1f});
  EXPECT_EQ(g.value(x).quant->zero_point, std::vector<int32_t>{2});
  EXPECT_EQ(g.value(y).quant->scale, std::vector<float>{0.05f});
  EXPECT_EQ(g.value(y).quant->zero_point, std::vector<int32_t>{-28});
}

// Operators exact on codes take uint8 codes at scale 1 (zero -128 after the shift); an input
// another operator also reads stays integer (and on the host).
TEST(BindIntegerIo, CodesOperatorsRunAtScaleOneAndMixedReadersAreLeftAlone) {
  for (bool mixed : {false, true}) {
    Graph g;
    g.opset = 13;
    const int x = value(g, "x", {1, 1, 4, 4});
    g.value(x).dtype = DType::kU8;
    g.inputs.push_back(x);
    const int y = value(g, "y", {1, 1, 3, 3});
    g.value(y).dtype = DType::kU8;
    Node pool = node("MaxPool", "pool", {x}, {y});
    pool.attrs["kernel_shape"].ints = {2, 2};
    g.nodes.push_back(pool);
    g.outputs.push_back(y);
    if (mixed) {
      const int a = value(g, "a", {1, 1, 4, 4});
      g.value(a).dtype = DType::kU8;
      g.nodes.push_back(node("Abs", "abs", {x}, {a}));  // not among the operators exact on codes
      g.outputs.push_back(a);
    }
    int bound = -1;
    ASSERT_TRUE(bind_integer_io(g, &bound).is_ok());
    if (mixed) {
      EXPECT_EQ(bound, 0);
      EXPECT_EQ(g.value(x).dtype, DType::kU8);
      EXPECT_FALSE(g.value(x).io_codes.has_value());
      continue;
    }
    EXPECT_EQ(bound, 2);
    for (int v : {x, y}) {
      ASSERT_TRUE(g.value(v).quant.has_value());
      EXPECT_EQ(g.value(v).quant->scale, std::vector<float>{1.0f});
      EXPECT_EQ(g.value(v).quant->zero_point, std::vector<int32_t>{-128});
    }
  }
}

// ONNX integer Add/Sub/Mul (wrapping modulo 256) and uint8 Div (truncating) bind both operands
// and the result at scale 1 with the code's own zero and are marked integer_wrap (lowered on the
// VEC unit); one with a constant operand, an operand another node also reads, or int8 Div
// (signed truncation) stays integer.
TEST(BindIntegerIo, IntegerArithmeticBindsItsOperandsAndIsMarkedWrapping) {
  for (DType t : {DType::kU8, DType::kI8}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
      // 0: two inputs; 1: a constant b; 2: b also read by a node not exact on codes.
      for (int variant = 0; variant < 3; ++variant) {
        SCOPED_TRACE(std::string(op) + (t == DType::kU8 ? " uint8" : " int8") + " variant " + std::to_string(variant));
        Graph g;
        g.opset = 14;
        const int a = value(g, "a", {2, 3});
        g.value(a).dtype = t;
        g.inputs.push_back(a);
        int b;
        if (variant == 1) {
          b = constant(g, "b", scalar_u8(3));
          g.value(b).dtype = t;
        } else {
          b = value(g, "b", {2, 3});
          g.value(b).dtype = t;
          g.inputs.push_back(b);
        }
        const int y = value(g, "y", {2, 3});
        g.value(y).dtype = t;
        g.nodes.push_back(node(op, "arith", {a, b}, {y}));
        g.outputs.push_back(y);
        if (variant == 2) {
          const int z = value(g, "z", {2, 3});
          g.value(z).dtype = t;
          g.nodes.push_back(node("Abs", "abs", {b}, {z}));  // not among the operators exact on codes
          g.outputs.push_back(z);
        }
        int bound = -1;
        ASSERT_TRUE(bind_integer_io(g, &bound).is_ok());
        const bool expect_bound = variant == 0 && (std::string(op) != "Div" || t == DType::kU8);
        EXPECT_EQ(g.nodes[0].integer_wrap, expect_bound);
        if (!expect_bound) {
          EXPECT_EQ(g.value(a).dtype, t);
          EXPECT_FALSE(g.value(a).io_codes.has_value());
          EXPECT_FALSE(g.value(y).io_codes.has_value());
          continue;
        }
        EXPECT_EQ(bound, 3);
        for (int v : {a, b, y}) {
          EXPECT_EQ(g.value(v).dtype, DType::kF32);
          ASSERT_TRUE(g.value(v).io_codes.has_value());
          EXPECT_EQ(*g.value(v).io_codes, t);
          ASSERT_TRUE(g.value(v).quant.has_value());
          EXPECT_EQ(g.value(v).quant->scale, std::vector<float>{1.0f});
          EXPECT_EQ(g.value(v).quant->zero_point, std::vector<int32_t>{t == DType::kU8 ? -128 : 0});
        }
      }
    }
  }
}

}  // namespace npu::compiler
