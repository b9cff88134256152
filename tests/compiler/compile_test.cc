// End-to-end through the compiler and the functional model, without the driver: compile,
// load the image onto a bare-metal device, run, dequantise, compare with the float reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "ir.h"
#include "npu/compiler/compiler.h"
#include "npu/compiler/image.h"
#include "npu/sim/bare_metal.h"
#include "quantize.h"

namespace npu::compiler {
namespace {

const std::string kData = NPU_TEST_DATA;

// Byte offset of every element (row-major order of `shape`) in a strided device view.
std::vector<uint64_t> view_offsets(const image::DeviceView& view, const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<uint64_t> out;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    uint64_t off = view.offset();
    for (size_t d = 0; d < shape.size(); ++d) off += static_cast<uint64_t>(idx[d] * view.strides()->Get(static_cast<uint32_t>(d)));
    out.push_back(off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

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
    if (!view) continue;  // a specialised shape operand: host only
    const QParams q{view->quant()->scale()->Get(0), view->quant()->zero_point()->Get(0)};
    auto x = inputs[i].as<float>();
    const auto offs = view_offsets(*view, inputs[i].shape);
    for (size_t e = 0; e < x.size(); ++e) {
      if (view->dtype() == image::DType::I32) {  // a bias in accumulator units
        const auto v = static_cast<int32_t>(std::nearbyint(x[e] / q.scale));
        std::memcpy(act.data() + offs[e], &v, 4);
      } else {
        act[offs[e]] = static_cast<std::byte>(quantize_value(x[e], q));
      }
    }
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
    const auto offs = view_offsets(*view, shape);
    for (size_t e = 0; e < y.size(); ++e)
      y[e] = scale * (static_cast<float>(static_cast<int8_t>(act[offs[e]])) - static_cast<float>(zp));
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

// The NPU-set lowerings beyond the walking skeleton (dynamic operands, data movement,
// ConvTranspose, padded pools, Resize, PRelu, run-time Clip) on every array dim: normal(0,1)
// inputs for every graph input, calibrated on themselves, against the float reference.
double all_npu_model_sqnr(const std::string& onnx, uint32_t array_dim) {
  auto graph = load_onnx(kData + "/" + onnx, {});
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  std::mt19937 rng(array_dim);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Tensor> inputs;
  // Scalars are Clip bounds: -1 and 1.5 (random bounds may leave x's int8 grid a handful of
  // codes inside [lo, hi], which no int8 pipeline resolves to 30 dB).
  float next_scalar = -1.0f;
  for (int v : graph->inputs) {
    Tensor t = Tensor::zeros(DType::kF32, graph->value(v).shape);
    for (float& x : t.as<float>()) x = t.shape.empty() ? std::exchange(next_scalar, 1.5f) : dist(rng);
    inputs.push_back(std::move(t));
  }
  CompileOptions options;
  options.array_dim = array_dim;
  options.calibration = {inputs};
  auto bytes = compile_onnx_file(kData + "/" + onnx, options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes.is_ok()) return 0;
  auto image = ModelImage::from_bytes(bytes.value(), onnx);
  EXPECT_TRUE(image.is_ok()) << image.status().to_string();
  for (const auto* step : *(*image)->model().steps()) EXPECT_NE(step->segment_as_NpuSegment(), nullptr) << onnx;
  auto env = run_reference(graph.value(), inputs);
  EXPECT_TRUE(env.is_ok());
  const Tensor& ref = env.value()[static_cast<size_t>(graph->outputs[0])];
  auto outs = run_on_model(**image, inputs);
  const double db = sqnr_db(ref.as<float>(), outs[0].as<float>());
  std::printf("%s on %ux%u: SQNR %.2f dB\n", onnx.c_str(), array_dim, array_dim, db);
  return db;
}

TEST_P(CompileAndRun, NpuSetModelsReach30dB) {
  for (const char* model : {"movement.onnx", "dynamic_conv.onnx", "dynamic_gemm.onnx", "cnn_ops.onnx", "runtime_operands.onnx",
                            "big_transpose.onnx", "gemm_scalar_bias.onnx", "deconv1d.onnx", "dilated_pool.onnx",
                            "matmul_shared_b.onnx", "pool3d_max.onnx", "pool3d_avg.onnx", "pool3d_avg_ceil.onnx",
                            "deconv3d.onnx", "deconv3d_dynamic.onnx", "conv3d.onnx", "conv3d_dynamic.onnx",
                            "exporter_patterns.onnx", "deconv_head.onnx", "layernorm_block.onnx",
                            "slice_channels.onnx", "attention_block.onnx"})
    EXPECT_GE(all_npu_model_sqnr(model, GetParam()), 30.0) << model;
}

// 3-D pools (rank-5, strided, padded; MaxPool dilated, AveragePool with ceil_mode and
// count_include_pad) against the float reference run on the input the device holds (its
// int8 codes dequantised): MaxPool keeps the codes, so it is exact; AveragePool rounds once,
// so it is within half an output step (of the reference saturated to the output's grid).
double pool3d_error_in_steps(const std::string& onnx, uint32_t array_dim) {
  auto graph = load_onnx(kData + "/" + onnx, {});
  EXPECT_TRUE(graph.is_ok()) << graph.status().to_string();
  std::mt19937 rng(array_dim + 3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor x = Tensor::zeros(DType::kF32, graph->value(graph->inputs[0]).shape);
  for (float& v : x.as<float>()) v = dist(rng);
  CompileOptions options;
  options.array_dim = array_dim;
  options.calibration = {{x}};
  auto bytes = compile_onnx_file(kData + "/" + onnx, options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes.is_ok()) return 1e9;
  auto image = ModelImage::from_bytes(bytes.value(), onnx);
  EXPECT_TRUE(image.is_ok()) << image.status().to_string();
  const auto& m = (*image)->model();
  EXPECT_EQ(m.steps()->size(), 1u);
  EXPECT_NE(m.steps()->Get(0)->segment_as_NpuSegment(), nullptr) << onnx << " uses the host";
  const auto* qin = m.inputs()->Get(0)->device()->quant();
  const QParams q{qin->scale()->Get(0), qin->zero_point()->Get(0)};
  Tensor held = x;
  for (float& v : held.as<float>()) v = q.scale * static_cast<float>(quantize_value(v, q) - q.zero_point);
  auto env = run_reference(graph.value(), {held});
  EXPECT_TRUE(env.is_ok());
  const Tensor& ref = env.value()[static_cast<size_t>(graph->outputs[0])];
  auto outs = run_on_model(**image, {x});
  const float step = m.outputs()->Get(0)->device()->quant()->scale()->Get(0);
  const int zp = m.outputs()->Get(0)->device()->quant()->zero_point()->Get(0);
  double worst = 0;
  for (size_t i = 0; i < ref.as<float>().size(); ++i) {
    // The output grid was calibrated on x, not on the held codes: an average of the held
    // values may lie just outside it, where the device saturates.
    const double expect = std::clamp(ref.as<float>()[i], step * static_cast<float>(-128 - zp),
                                     step * static_cast<float>(127 - zp));
    worst = std::max(worst, std::fabs(expect - outs[0].as<float>()[i]) / step);
  }
  std::printf("%s on %ux%u: largest error %.3f output steps\n", onnx.c_str(), array_dim, array_dim, worst);
  return worst;
}

TEST_P(CompileAndRun, ThreeDMaxPoolIsExactOnTheDeviceCodes) {
  EXPECT_EQ(pool3d_error_in_steps("pool3d_max.onnx", GetParam()), 0.0);
}

TEST_P(CompileAndRun, ThreeDAveragePoolRoundsOnce) {
  EXPECT_LE(pool3d_error_in_steps("pool3d_avg.onnx", GetParam()), 0.51);
  EXPECT_LE(pool3d_error_in_steps("pool3d_avg_ceil.onnx", GetParam()), 0.51);
}

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

// A uint8 graph input read by DequantizeLinear is bound to an int8 device view when an NPU
// layer reads it; when a host operator would read it (Sqrt has no NPU lowering), the compiler
// says so and compiles again with the input integer on the host.
TEST(IntegerIo, BoundToTheDeviceOrLeftIntegerOnTheHost) {
  for (const char* op : {"relu", "sqrt"}) {
    const bool on_npu = std::string(op) == "relu";
    CompileOptions options;
    Tensor x = Tensor::zeros(DType::kU8, {2, 8});
    for (size_t i = 0; i < x.data.size(); ++i) x.data[i] = static_cast<uint8_t>(i * 17);
    options.calibration = {{x}};
    std::string progress;
    options.progress = [&](const std::string& s) { progress += s + "\n"; };
    auto bytes = compile_onnx_file(kData + "/integer_io_" + op + ".onnx", options);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    auto image = ModelImage::from_bytes(*bytes, op);
    ASSERT_TRUE(image.is_ok()) << image.status().to_string();
    const auto* in = (*image)->model().inputs()->Get(0);
    EXPECT_EQ(in->desc()->dtype(), image::DType::U8) << op;
    EXPECT_EQ(progress.find("compiling again without binding") != std::string::npos, !on_npu) << progress;
    if (on_npu) {
      ASSERT_NE(in->device(), nullptr);
      EXPECT_EQ(in->device()->dtype(), image::DType::I8);
      EXPECT_EQ(in->device()->quant()->zero_point()->Get(0), 0);  // uint8 128 after the -128 shift
      EXPECT_EQ(in->desc()->quant()->zero_point()->Get(0), 128);
    } else {
      EXPECT_EQ(in->device(), nullptr);
    }
  }
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
