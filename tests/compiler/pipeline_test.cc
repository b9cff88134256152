// npu-compile's passes one by one (pipeline.h): each product checked on a small model, and the
// passes chained by hand build the same image compile_onnx_file builds.
#include "pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "expose.h"
#include "npu/compiler/image.h"

namespace npu::compiler {
namespace {

const std::string kData = NPU_TEST_DATA;

CompileOptions options_for(uint32_t N = 16) {
  CompileOptions o;
  o.array_dim = N;
  return o;
}

void ignore(const std::string&) {}

// load_graph -> rewrite_patterns -> calibrate_graph on `model`.
CalibratedGraph calibrated(const std::string& model, const CompileOptions& o, bool bind_io = true) {
  auto loaded = load_graph(kData + "/" + model, o, ignore);
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  auto patterned = rewrite_patterns(std::move(loaded).value(), bind_io, ignore);
  EXPECT_TRUE(patterned.is_ok()) << patterned.status().to_string();
  auto graph = calibrate_graph(std::move(patterned).value(), o, ignore);
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  return std::move(graph).value();
}

Partition partitioned(CalibratedGraph& graph, uint32_t N = 16) {
  std::string refused;
  auto p = partition_graph(graph, N, ignore, &refused, nullptr);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return std::move(p).value();
}

TEST(Pipeline, LoadGraphReadsTheSamplesAndSpecialisesQuantisationParameters) {
  CompileOptions o = options_for();
  o.calibration_dir = kData + "/calib";
  auto mlp = load_graph(kData + "/mlp.onnx", o, ignore);
  ASSERT_TRUE(mlp.is_ok()) << mlp.status().to_string();
  EXPECT_EQ(mlp->samples.size(), 8u);
  EXPECT_EQ(mlp->graph.inputs.size(), 1u);
  EXPECT_TRUE(mlp->specialized.empty());

  // qdq_param_inputs.onnx: x, scale, zero_point; the last two feed only QuantizeLinear/
  // DequantizeLinear parameter slots, so they become constants at their sample value.
  Tensor x = Tensor::zeros(DType::kF32, {2, 32});
  Tensor scale = Tensor::zeros(DType::kF32, {});
  scale.as<float>()[0] = 0.03125f;
  Tensor zero_point = Tensor::zeros(DType::kI8, {});
  zero_point.as<int8_t>()[0] = -3;
  CompileOptions q = options_for();
  q.calibration = {{x, scale, zero_point}};
  auto qdq = load_graph(kData + "/qdq_param_inputs.onnx", q, ignore);
  ASSERT_TRUE(qdq.is_ok()) << qdq.status().to_string();
  ASSERT_EQ(qdq->specialized.size(), 2u);
  EXPECT_EQ(qdq->specialized[0].first, 1u);
  EXPECT_EQ(qdq->specialized[1].first, 2u);
  EXPECT_TRUE(qdq->graph.is_constant(qdq->graph.inputs[1]));
  EXPECT_FALSE(qdq->graph.is_constant(qdq->graph.inputs[0]));

  auto missing = load_graph("/nonexistent/model.onnx", o, ignore);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().message().rfind("model: ", 0), 0u) << missing.status().message();
}

TEST(Pipeline, RewritePatternsFoldsBatchNormalization) {
  auto loaded = load_graph(kData + "/bn_shape_chain.onnx", options_for(), ignore);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  ASSERT_TRUE(std::any_of(loaded->graph.nodes.begin(), loaded->graph.nodes.end(),
                          [](const Node& n) { return n.op == "BatchNormalization"; }));
  std::vector<std::string> said;
  auto patterned = rewrite_patterns(std::move(loaded).value(), true, [&](const std::string& s) { said.push_back(s); });
  ASSERT_TRUE(patterned.is_ok()) << patterned.status().to_string();
  for (const Node& n : patterned->graph.nodes) EXPECT_NE(n.op, "BatchNormalization");
  EXPECT_TRUE(std::any_of(said.begin(), said.end(), [](const std::string& s) { return s.rfind("folded ", 0) == 0; }));
}

TEST(Pipeline, CalibrateGraphGivesEveryValueARange) {
  // No samples: eight deterministic random ones, and a range for every node output.
  CalibratedGraph graph = calibrated("gemm_relu.onnx", options_for());
  EXPECT_EQ(graph.samples.size(), 8u);
  for (const Node& n : graph.graph.nodes)
    for (int v : n.outputs) EXPECT_TRUE(graph.ranges.count(v)) << graph.graph.value(v).name;
  const int y = graph.graph.outputs[0];
  EXPECT_GE(graph.ranges.at(y).first, 0.0f);  // a Relu output
  EXPECT_GT(graph.ranges.at(y).second, 0.0f);
}

TEST(Pipeline, PartitionGraphNamesTheHostOperator) {
  Tensor x = Tensor::zeros(DType::kU8, {2, 8});
  for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<uint8_t>(i * 17);
  CompileOptions o = options_for();
  o.calibration = {{x}};
  // Unbound: the Sqrt (and the integer input's conversion) are host operators on reals.
  CalibratedGraph unbound = calibrated("integer_io_sqrt.onnx", o, false);
  Partition p = partitioned(unbound);
  EXPECT_EQ(p.npu_layers, 0u);
  EXPECT_EQ(p.host_ops, p.steps.size());
  std::vector<std::string> host;
  for (const auto& s : p.steps) {
    EXPECT_FALSE(s.on_npu);
    if (!s.on_npu) host.push_back(unbound.graph.nodes[static_cast<size_t>(s.node)].op);
  }
  EXPECT_NE(std::find(host.begin(), host.end(), "Sqrt"), host.end());
  // Bound to the device, the host operator would see codes: refused, with the reason.
  CalibratedGraph bound = calibrated("integer_io_sqrt.onnx", o, true);
  std::string refused;
  auto r = partition_graph(bound, 16, ignore, &refused, nullptr);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(refused.find("host operator Sqrt"), std::string::npos) << refused;
}

TEST(Pipeline, PlanQuantisationCoversTheCalibratedRange) {
  CalibratedGraph graph = calibrated("gemm_relu.onnx", options_for());
  Partition p = partitioned(graph);
  ASSERT_EQ(p.npu_layers, 1u);
  const int x = graph.graph.inputs[0], y = graph.graph.outputs[0];
  graph.ranges[x] = {0.0f, 2.55f};  // asymmetric int8: scale 0.01, zero point -128
  graph.ranges[y] = {-0.51f, 2.04f};  // scale 0.01, zero point -128 + 51
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  EXPECT_NEAR(q.qp.at(x).scale, 0.01f, 1e-7f);
  EXPECT_EQ(q.qp.at(x).zero_point, -128);
  EXPECT_NEAR(q.qp.at(y).scale, 0.01f, 1e-7f);
  EXPECT_EQ(q.qp.at(y).zero_point, -77);
  EXPECT_TRUE(q.on_device.count(x) && q.on_device.count(y));
  EXPECT_TRUE(q.int32_values.empty());
  const auto& xs = graph.graph.value(x).shape;  // [M, K], dense rows
  ASSERT_EQ(q.strides.at(x).size(), xs.size());
  EXPECT_EQ(q.strides.at(x).back(), 1);
  EXPECT_GE(q.bytes.at(x), static_cast<uint64_t>(xs[0] * xs[1]));
}

TEST(Pipeline, PlanMemoryNeverOverlapsLiveValues) {
  CompileOptions o = options_for();
  CalibratedGraph graph = calibrated("mobilenet_v3ish.onnx", o);
  Partition p = partitioned(graph);
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  MemoryPlan m = plan_memory(graph.graph, p, q, ignore);
  auto root = [&](int v) {
    while (q.alias.count(v)) v = q.alias.at(v);
    return v;
  };
  // Each root value is live at least from its first to its last use by an NPU layer (the
  // planner may keep it longer, never shorter).
  std::map<int, std::pair<int, int>> live;
  int t = 0;
  for (const auto& s : p.steps)
    for (const NpuLayer& op : s.ops) {
      std::vector<int> used = npu_layer_inputs(op);
      used.push_back(npu_layer_output(op));
      for (int v : used) {
        if (!q.on_device.count(v)) continue;
        auto [it, fresh] = live.emplace(root(v), std::make_pair(t, t));
        if (!fresh) it->second = {std::min(it->second.first, t), std::max(it->second.second, t)};
      }
      ++t;
    }
  ASSERT_GT(live.size(), 10u);
  size_t pairs = 0, shared = 0;
  for (const auto& [a, la] : live) {
    ASSERT_LE(m.offset.at(a) + q.bytes.at(a), m.bytes) << graph.graph.value(a).name;
    for (const auto& [b, lb] : live) {
      if (b <= a) continue;
      const bool overlap_in_time = la.first <= lb.second && lb.first <= la.second;
      const bool overlap_in_bytes = m.offset.at(a) < m.offset.at(b) + q.bytes.at(b) &&
                                    m.offset.at(b) < m.offset.at(a) + q.bytes.at(a);
      if (overlap_in_time) ++pairs;
      if (overlap_in_bytes) ++shared;
      EXPECT_FALSE(overlap_in_time && overlap_in_bytes)
          << graph.graph.value(a).name << " and " << graph.graph.value(b).name;
    }
  }
  EXPECT_GT(pairs, 0u);
  EXPECT_GT(shared, 0u);  // the buffer is reused, not one value after another
  for (const auto& [v, r] : q.alias) EXPECT_EQ(m.offset.at(v), m.offset.at(root(v)));  // views share bytes
}

TEST(Pipeline, CorrectBiasesMovesConvBiasesAndSaysSo) {
  CompileOptions o = options_for();
  CalibratedGraph graph = calibrated("convnet.onnx", o);
  Partition p = partitioned(graph);
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  auto biases = [&] {
    std::vector<std::vector<float>> out;
    for (const auto& s : p.steps)
      for (const NpuLayer& op : s.ops)
        if (const auto* c = std::get_if<ConvLayer>(&op)) out.push_back(c->bias);
    return out;
  };
  const auto before = biases();
  ASSERT_FALSE(before.empty());
  std::vector<std::string> said;
  ASSERT_TRUE(correct_biases(graph.graph, p, q, graph.samples, [&](const std::string& s) { said.push_back(s); })
                  .is_ok());
  EXPECT_NE(biases(), before);  // the partition's layers carry the corrected biases
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("bias correction: ", 0), 0u) << said[0];
}

TEST(Pipeline, LowerSegmentsAndPredictCycles) {
  CalibratedGraph graph = calibrated("mlp.onnx", options_for());
  Partition p = partitioned(graph);
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  MemoryPlan m = plan_memory(graph.graph, p, q, ignore);
  auto lowered = lower_segments(graph.graph, p, q, m, 16, ignore);
  ASSERT_TRUE(lowered.is_ok()) << lowered.status().to_string();
  ASSERT_EQ(lowered->segments.size(), 1u);
  const Segment& seg = lowered->segments[0];
  EXPECT_EQ(seg.layers.size(), p.npu_layers);
  ASSERT_EQ(seg.layer_end.size(), seg.layers.size());
  EXPECT_EQ(seg.layer_end.back(), seg.prog.size());
  EXPECT_GT(seg.prog.size(), 0u);
  EXPECT_FALSE(lowered->weights.empty());
  EXPECT_EQ(seg.inputs, graph.graph.inputs);
  EXPECT_TRUE(lowered->host_side.count(graph.graph.outputs[0]));

  ASSERT_TRUE(predict_cycles(*lowered, m, 16, ignore).is_ok());
  const Segment& run = lowered->segments[0];
  EXPECT_GT(run.cycles, 0u);
  ASSERT_EQ(run.layer_cycles.size(), run.layers.size());
  uint64_t sum = 0;
  for (uint64_t c : run.layer_cycles) sum += c;
  EXPECT_LE(sum, run.cycles);
  EXPECT_EQ(run.outputs, graph.graph.outputs);  // filtered to the host side
}

TEST(Pipeline, CheckDeviceValuesRefusesAnInfiniteScale) {
  CalibratedGraph graph = calibrated("gemm_relu.onnx", options_for());
  Partition p = partitioned(graph);
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  MemoryPlan m = plan_memory(graph.graph, p, q, ignore);
  std::string refused;
  ASSERT_TRUE(check_device_values(graph.graph, q, m, graph.ranges, &refused).is_ok());
  const int y = graph.graph.outputs[0];
  q.qp[y].scale = std::numeric_limits<float>::infinity();
  const Status s = check_device_values(graph.graph, q, m, graph.ranges, &refused);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("calibration: value '" + graph.graph.value(y).name + "'", 0), 0u) << s.message();
}

// ConvTranspose W is [C][Cout][taps]: its scales are per output channel (the second index),
// as the lowering quantises it, for the accuracy report's weight SQNR and --export-qdq alike.
// Output channel 1 is 50x output channel 0 in both input channels; per input channel (the
// first index, which the scales once followed) channel 0 would keep two levels.
TEST(Pipeline, ConvTransposeWeightScalesArePerOutputChannel) {
  ConvLayer L;
  L.transposed = true;
  L.C = 2;
  L.Cout = 2;
  L.KH = L.KW = 1;
  L.weights = {0.01f, 0.5f,   // input channel 0: output channels 0, 1
               0.02f, 1.0f};  // input channel 1
  const std::vector<float> s = conv_weight_scales(L);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s[0], 0.02f / 127.0f);
  EXPECT_FLOAT_EQ(s[1], 1.0f / 127.0f);
  EXPECT_GT(weight_sqnr_db(NpuLayer{L}), 40.0);  // 8-bit per-channel weights, not two levels
  ConvLayer R = L;  // the same weights as a regular conv [Cout][C]: scales per first index
  R.transposed = false;
  const std::vector<float> r = conv_weight_scales(R);
  EXPECT_FLOAT_EQ(r[0], 0.5f / 127.0f);
  EXPECT_FLOAT_EQ(r[1], 1.0f / 127.0f);
}

TEST(Pipeline, ExportQdqWritesALoadableModel) {
  CalibratedGraph graph = calibrated("convnet.onnx", options_for());
  Partition p = partitioned(graph);
  QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, 16, ignore);
  const std::string path = ::testing::TempDir() + "/pipeline_export.onnx";
  std::filesystem::remove(path);
  ASSERT_TRUE(export_qdq(graph.graph, p, q, path, ignore).is_ok());
  auto back = load_onnx(path, {});
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(std::any_of(back->nodes.begin(), back->nodes.end(),
                          [](const Node& n) { return n.op == "QuantizeLinear"; }));
}

// The passes chained by hand: the image verifies, and it is byte for byte the one
// compile_onnx_file writes (nothing in compile_model but the passes).
TEST(Pipeline, WriteImageVerifiesAndMatchesCompileOnnxFile) {
  for (uint32_t N : {8u, 16u, 32u}) {
    CompileOptions o = options_for(N);
    CalibratedGraph graph = calibrated("mobilenet_v3ish.onnx", o);
    Partition p = partitioned(graph, N);
    QuantPlan q = plan_quantisation(graph.graph, p, graph.ranges, N, ignore);
    std::string refused;
    ASSERT_TRUE(check_int32_outputs(graph.graph, p, q, &refused).is_ok());
    MemoryPlan m = plan_memory(graph.graph, p, q, ignore);
    auto lowered = lower_segments(graph.graph, p, q, m, N, ignore);
    ASSERT_TRUE(lowered.is_ok()) << lowered.status().to_string();
    ASSERT_TRUE(predict_cycles(*lowered, m, N, ignore).is_ok());
    ASSERT_TRUE(check_device_values(graph.graph, q, m, graph.ranges, &refused).is_ok());
    const std::string model = kData + "/mobilenet_v3ish.onnx";
    auto bytes = write_image(model, N, graph.graph, graph.specialized, p, q, m, *lowered, ignore);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    auto image = ModelImage::from_bytes(*bytes, "mobilenet_v3ish.onnx");
    ASSERT_TRUE(image.is_ok()) << image.status().to_string();
    EXPECT_EQ((*image)->model().array_dim(), N);
    EXPECT_EQ((*image)->model().steps()->size(), p.steps.size());
    auto direct = compile_onnx_file(model, o);
    ASSERT_TRUE(direct.is_ok()) << direct.status().to_string();
    EXPECT_TRUE(*bytes == *direct) << "N = " << N;
  }
}

}  // namespace
}  // namespace npu::compiler
