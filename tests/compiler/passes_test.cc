// Graph passes keep the model's float semantics and remove what they fold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "ir.h"
#include "partition.h"
#include "passes.h"

namespace npu::compiler {

Tensor normal_input(std::vector<int64_t> shape, uint32_t seed) {
  Tensor x = Tensor::zeros(DType::kF32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (auto& v : x.as<float>()) v = dist(rng);
  return x;
}

// The graph's first output for input x on the float reference.
Tensor reference_output(const Graph& g, const Tensor& x) {
  auto env = run_reference(g, {x});
  EXPECT_TRUE(env.is_ok()) << env.status().to_string();
  return env.is_ok() ? env.value()[static_cast<size_t>(g.outputs[0])] : Tensor{};
}

void expect_close(const Tensor& got, const Tensor& expected) {
  ASSERT_EQ(got.shape, expected.shape);
  for (size_t i = 0; i < got.as<float>().size(); ++i)
    ASSERT_NEAR(got.as<float>()[i], expected.as<float>()[i], 1e-4f) << i;
}

TEST(Passes, FoldBatchNormAndShapeChainKeepResults) {
  auto graph = load_onnx(std::string(NPU_TEST_DATA) + "/bn_shape_chain.onnx", {});
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Graph g = graph.value();
  const Tensor x = normal_input({1, 3, 8, 8}, 5);
  const Tensor expected = reference_output(g, x);

  int constants = 0, bns = 0;
  ASSERT_TRUE(fold_constants(g, &constants).is_ok());
  ASSERT_TRUE(fold_batchnorm(g, &bns).is_ok());
  EXPECT_EQ(bns, 1);
  EXPECT_EQ(constants, 4);  // Shape, Gather, Unsqueeze, Concat
  for (const Node& n : g.nodes) {
    EXPECT_NE(n.op, "BatchNormalization");
    EXPECT_NE(n.op, "Shape");
  }
  expect_close(reference_output(g, x), expected);
}

// Blocks as Paddle2ONNX and PyTorch write them (scripts/make_models.py exporter_patterns):
// the constant-first Mul is swapped, the affine ops after the convolutions and the
// BatchNormalization after the ConvTranspose fold into weights and biases, with the same
// float results; partitioning then takes each element-wise chain as one table lookup.
TEST(Passes, ExporterPatternsFoldAndChainIntoLookups) {
  auto graph = load_onnx(std::string(NPU_TEST_DATA) + "/exporter_patterns.onnx", {});
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Graph g = graph.value();
  const Tensor x = normal_input({1, 8, 12, 12}, 9);
  const Tensor expected = reference_output(g, x);

  int constants = 0, swapped = 0, folded = 0;
  ASSERT_TRUE(fold_constants(g, &constants).is_ok());
  ASSERT_TRUE(canonicalize_commutative(g, &swapped).is_ok());
  ASSERT_TRUE(fold_batchnorm(g, &folded).is_ok());
  EXPECT_EQ(swapped, 2);  // the two Mul(constant, y)
  // affine0 Mul+Add into conv0, channel Mul+Add into the depthwise conv, bias Add and
  // BatchNormalization into the ConvTranspose. affine1 follows a Div, not a conv: it stays.
  EXPECT_EQ(folded, 6);
  for (const Node& n : g.nodes) {
    EXPECT_NE(n.op, "BatchNormalization");
    if (n.op == "Add" || n.op == "Mul") {
      EXPECT_FALSE(g.is_constant(n.inputs[0])) << n.name << ": constant first operand left";
    }
  }
  expect_close(reference_output(g, x), expected);

  std::vector<std::string> chains;
  std::map<std::string, std::vector<std::string>> fused;  // conv -> the nodes fused into it
  for (const PartitionStep& step : partition(g, 16)) {
    ASSERT_TRUE(step.on_npu) << "host step: " << g.nodes[static_cast<size_t>(step.node)].label();
    for (const NpuLayer& layer : step.ops) {
      if (npu_layer_op(layer).rfind("Chain(", 0) == 0) chains.push_back(npu_layer_op(layer));
      if (const auto* c = std::get_if<ConvLayer>(&layer)) fused[c->name] = c->fused;
    }
  }
  // Hard-swish with the affine after it is conv0's fused lookup table; the Relu after the
  // ConvTranspose is its clamp; SiLU and GELU after it one chain.
  EXPECT_EQ(fused["conv0"], (std::vector<std::string>{"hs_add", "hs_clip", "hs_mul", "hs_div", "affine1_mul",
                                                       "affine1_add"}));
  EXPECT_EQ(fused["deconv"], std::vector<std::string>{"relu"});
  EXPECT_EQ(chains, (std::vector<std::string>{"Chain(Sigmoid,Mul,Div,Erf,Add,Mul,Mul)"}));
}

// PP-OCRv4 det's RSE residual, x + x·HardSigmoid(conv(GlobalAveragePool(x))) (here without
// the conv): the Add goes, the Mul computes x·(s + 1) with the same float results, and the +1
// joins the gate's lookup table. The same graph with x·s also read elsewhere keeps its Add.
Graph residual_gate_graph(bool product_is_output) {
  Graph g;
  auto value = [&](const std::string& name, std::vector<int64_t> shape) {
    return g.add_value(Value{name, DType::kF32, std::move(shape)});
  };
  const int x = value("x", {1, 4, 3, 3}), p = value("p", {1, 4, 1, 1}), s = value("s", {1, 4, 1, 1});
  const int m = value("m", {1, 4, 3, 3}), y = value("y", {1, 4, 3, 3});
  const int k = g.add_value(Value{"k", DType::kF32, {1}, Tensor::zeros(DType::kF32, {1})});
  g.value(k).constant->as<float>()[0] = 2.0f;
  const int t = value("t", {1, 4, 1, 1});
  g.inputs = {x};
  g.outputs = {y};
  if (product_is_output) g.outputs.push_back(m);
  g.opset = 13;
  g.nodes.push_back(Node{"gap", "GlobalAveragePool", {x}, {p}});
  g.nodes.push_back(Node{"scale", "Mul", {p, k}, {t}});
  g.nodes.push_back(Node{"gate", "HardSigmoid", {t}, {s}});
  g.nodes.push_back(Node{"mul", "Mul", {x, s}, {m}});
  g.nodes.push_back(Node{"add", "Add", {m, x}, {y}});
  return g;
}

TEST(Passes, ResidualGateBecomesOneMul) {
  Graph g = residual_gate_graph(false);
  const Tensor x = normal_input({1, 4, 3, 3}, 11);
  const Tensor expected = reference_output(g, x);
  int rewritten = 0;
  ASSERT_TRUE(residual_gate_as_mul(g, &rewritten).is_ok());
  EXPECT_EQ(rewritten, 1);
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.name + ":" + n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"gap:GlobalAveragePool", "scale:Mul", "gate:HardSigmoid",
                                           "add_gate:Add", "mul:Mul"}));
  EXPECT_EQ(g.nodes.back().outputs[0], g.outputs[0]);
  expect_close(reference_output(g, x), expected);
  std::vector<std::string> layers;
  for (const PartitionStep& step : partition(g, 16)) {
    ASSERT_TRUE(step.on_npu) << "host step: " << g.nodes[static_cast<size_t>(step.node)].label();
    for (const NpuLayer& layer : step.ops) layers.push_back(npu_layer_op(layer));
  }
  EXPECT_EQ(layers, (std::vector<std::string>{"GlobalAveragePool", "Chain(Mul,HardSigmoid,Add)", "Mul"}));

  Graph kept = residual_gate_graph(true);
  ASSERT_TRUE(residual_gate_as_mul(kept, &rewritten).is_ok());
  EXPECT_EQ(rewritten, 0);
  EXPECT_EQ(kept.nodes.back().op, "Add");
}

}  // namespace npu::compiler
