// Graph passes keep the model's float semantics and remove what they fold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ir.h"
#include "passes.h"

namespace npu::compiler {

TEST(Passes, FoldBatchNormAndShapeChainKeepResults) {
  auto graph = load_onnx(std::string(NPU_TEST_DATA) + "/bn_shape_chain.onnx", {});
  ASSERT_TRUE(graph.is_ok()) << graph.status().to_string();
  Graph g = graph.value();
  Tensor x = Tensor::zeros(DType::kF32, {1, 3, 8, 8});
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (auto& v : x.as<float>()) v = dist(rng);
  auto before = run_reference(g, {x});
  ASSERT_TRUE(before.is_ok());
  const Tensor expected = before.value()[static_cast<size_t>(g.outputs[0])];

  int constants = 0, bns = 0;
  ASSERT_TRUE(fold_constants(g, &constants).is_ok());
  ASSERT_TRUE(fold_batchnorm(g, &bns).is_ok());
  EXPECT_EQ(bns, 1);
  EXPECT_EQ(constants, 4);  // Shape, Gather, Unsqueeze, Concat
  for (const Node& n : g.nodes) {
    EXPECT_NE(n.op, "BatchNormalization");
    EXPECT_NE(n.op, "Shape");
  }
  auto after = run_reference(g, {x});
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  const Tensor& got = after.value()[static_cast<size_t>(g.outputs[0])];
  ASSERT_EQ(got.shape, expected.shape);
  for (size_t i = 0; i < got.as<float>().size(); ++i)
    EXPECT_NEAR(got.as<float>()[i], expected.as<float>()[i], 1e-4f) << i;
}

}  // namespace npu::compiler
