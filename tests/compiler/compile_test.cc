// End-to-end through the compiler and the functional model, without the driver: compile,
// load the image onto a bare-metal device, run, dequantise, compare with the float reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "ir.h"
#include "npu/compiler/compiler.h"
#include "npu/compiler/image.h"
#include "npu/sim/bare_metal.h"
#include "quantize.h"

namespace npu::compiler {
namespace {

const std::string kData = NPU_TEST_DATA;

// Runs image on a fresh functional device; returns dequantised outputs.
std::vector<Tensor> run_on_model(const ModelImage& image, const std::vector<Tensor>& inputs,
                                 uint64_t* cycles = nullptr) {
  const auto& m = image.model();
  sim::BareMetal bm(64ull << 20);
  sim::DeviceConfig dc;
  dc.array_dim = m.array_dim();
  auto dev = sim::make_functional_device(dc, bm.dram());
  const uint32_t wva = bm.allocate(m.weights()->size(), false);
  const uint32_t ava = bm.allocate(m.activation_bytes(), true);
  std::memcpy(bm.view(wva, m.weights()->size()).data(), m.weights()->data(), m.weights()->size());
  auto act = bm.view(ava, m.activation_bytes());
  for (uint32_t i = 0; i < m.inputs()->size(); ++i) {
    const auto* view = m.inputs()->Get(i)->device();
    const QParams q{view->quant()->scale()->Get(0), view->quant()->zero_point()->Get(0)};
    auto x = inputs[i].as<float>();
    for (size_t e = 0; e < x.size(); ++e)
      act[view->offset() + e] = static_cast<std::byte>(quantize_value(x[e], q));  // dense strides
  }
  for (const auto* step : *m.steps()) {
    const auto* seg = step->segment_as_NpuSegment();
    EXPECT_NE(seg, nullptr);
    const uint32_t cva = bm.allocate(seg->commands()->size(), false);
    auto cmd = bm.view(cva, seg->commands()->size());
    std::memcpy(cmd.data(), seg->commands()->data(), seg->commands()->size());
    for (const auto* r : *seg->relocations()) {
      const uint32_t v = (r->buffer() == image::BufferKind::Weights ? wva : ava) + r->offset();
      std::memcpy(cmd.data() + r->cmd_offset(), &v, 4);
    }
    auto res = bm.run(*dev, cva, static_cast<uint32_t>(seg->commands()->size()));
    EXPECT_TRUE(res.completed) << "error " << res.error_code << " at instr " << res.error_instr;
    if (cycles) *cycles = res.cycles;
  }
  std::vector<Tensor> outs;
  for (const auto* io : *m.outputs()) {
    const auto* view = io->device();
    std::vector<int64_t> shape(io->desc()->shape()->begin(), io->desc()->shape()->end());
    Tensor t = Tensor::zeros(DType::kF32, shape);
    const float scale = view->quant()->scale()->Get(0);
    const int zp = view->quant()->zero_point()->Get(0);
    auto y = t.as<float>();
    for (size_t e = 0; e < y.size(); ++e)
      y[e] = scale * (static_cast<float>(static_cast<int8_t>(act[view->offset() + e])) - static_cast<float>(zp));
    outs.push_back(std::move(t));
  }
  return outs;
}

double model_sqnr(const std::string& onnx, uint32_t array_dim, bool use_calib_dir) {
  CompileOptions options;
  options.array_dim = array_dim;
  if (use_calib_dir) options.calibration_dir = kData + "/calib";
  auto bytes = compile_onnx_file(kData + "/" + onnx, options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto image = ModelImage::from_bytes(bytes.value(), onnx);
  EXPECT_TRUE(image.is_ok()) << image.status().to_string();
  auto input = read_npy(kData + "/input_0.npy");
  EXPECT_TRUE(input.is_ok());
  auto graph = load_onnx(kData + "/" + onnx, {});
  EXPECT_TRUE(graph.is_ok());
  auto env = run_reference(graph.value(), {input.value()});
  EXPECT_TRUE(env.is_ok());
  const Tensor& ref = env.value()[static_cast<size_t>(graph->outputs[0])];
  auto outs = run_on_model(**image, {input.value()});
  const double db = sqnr_db(ref.as<float>(), outs[0].as<float>());
  std::printf("%s on %ux%u: SQNR %.2f dB\n", onnx.c_str(), array_dim, array_dim, db);
  return db;
}

}  // namespace

class CompileAndRun : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CompileAndRun, GemmReluReaches30dB) { EXPECT_GE(model_sqnr("gemm_relu.onnx", GetParam(), true), 30.0); }
TEST_P(CompileAndRun, MlpReaches30dB) { EXPECT_GE(model_sqnr("mlp.onnx", GetParam(), true), 30.0); }
TEST_P(CompileAndRun, RandomCalibrationStillClose) { EXPECT_GE(model_sqnr("gemm_relu.onnx", GetParam(), false), 25.0); }

INSTANTIATE_TEST_SUITE_P(ArrayDims, CompileAndRun, ::testing::Values(8u, 16u, 32u));

TEST(CompileErrors, MissingFileNamesIt) {
  auto r = compile_onnx_file("/nonexistent/model.onnx", {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/model.onnx"), std::string::npos);
}

TEST(CompileErrors, NotAnOnnxFile) {
  const std::string path = ::testing::TempDir() + "/garbage.onnx";
  std::ofstream(path) << "\xff\xff\xff garbage";
  auto r = compile_onnx_file(path, {});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(CompileErrors, UnknownInputShapeOverride) {
  CompileOptions options;
  options.input_shapes["nope"] = {1, 64};
  auto r = compile_onnx_file(kData + "/gemm_relu.onnx", options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'nope'"), std::string::npos);
}

TEST(CompileErrors, CalibrationShapeMismatchIsNamed) {
  CompileOptions options;
  options.calibration = {{Tensor::zeros(DType::kF32, {2, 64})}};
  auto r = compile_onnx_file(kData + "/gemm_relu.onnx", options);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("[4,64]"), std::string::npos);
}

}  // namespace npu::compiler
