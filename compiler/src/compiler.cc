// npu-compile's pipeline: ONNX -> IR -> partition (NPU layers, host operators) ->
// calibration -> int8 quantisation -> command streams -> cycle prediction on the functional
// model -> verified model image. The passes and their products are in pipeline.h.
#include "npu/compiler/compiler.h"

#include <algorithm>
#include <filesystem>

#include "calibration.h"
#include "ir.h"
#include "pipeline.h"

namespace npu::compiler {

// npu-compile's errors say which stage failed: "model" (the ONNX graph, its operators and
// their lowering), "input shape", "calibration" or "image" (the image it writes).
bool has_stage(const std::string& message) {
  for (const char* stage : {"model: ", "input shape: ", "calibration: ", "image: "})
    if (message.rfind(stage, 0) == 0) return true;
  return false;
}

Status in_stage(const char* stage, Status s) {
  if (s.is_ok() || has_stage(s.message())) return s;
  return Status(s.code(), std::string(stage) + ": " + s.message());
}

Result<std::vector<std::vector<Tensor>>> read_calibration_dir(const std::string& dir, size_t num_inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return make_error(StatusCode::kNotFound, "--calib " + dir + ": not a directory");
  std::vector<fs::path> subdirs;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory()) subdirs.push_back(e.path());
  std::sort(subdirs.begin(), subdirs.end());
  if (subdirs.empty())
    return make_error(StatusCode::kInvalidArgument,
                      "--calib " + dir + ": no sample folders; expected one subfolder per sample holding input_<k>.npy");
  std::vector<std::vector<Tensor>> samples;
  for (const auto& sd : subdirs) {
    std::vector<Tensor> sample;
    for (size_t k = 0; k < num_inputs; ++k) {
      NPU_ASSIGN_OR_RETURN(Tensor t, read_npy((sd / ("input_" + std::to_string(k) + ".npy")).string()));
      sample.push_back(std::move(t));  // keep the dtype: integer inputs stay integer
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

namespace {

// The whole compilation. With `bind_io`, integer graph inputs/outputs are bound to device
// views (bind_integer_io); when a host step would touch one of them, or the device cannot
// hold its codes exactly, it stops with an error and says why in *io_refused. With
// `exposed`, every value a step computes is also an image output (expose_values).
Result<std::vector<uint8_t>> compile_model(const std::string& onnx_path, const CompileOptions& options, bool bind_io,
                                           std::string* io_refused, ExposedImage* exposed = nullptr) {
  const Say say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  const uint32_t N = options.array_dim;
  if (std::find(hw::kSupportedArrayDims.begin(), hw::kSupportedArrayDims.end(), N) == hw::kSupportedArrayDims.end())
    return make_error(StatusCode::kInvalidArgument, "array dim " + std::to_string(N) + " is not one of 8, 16, 32");
  NPU_ASSIGN_OR_RETURN(LoadedGraph loaded, load_graph(onnx_path, options, say));
  NPU_ASSIGN_OR_RETURN(PatternedGraph patterned, rewrite_patterns(std::move(loaded), bind_io, say));
  NPU_ASSIGN_OR_RETURN(CalibratedGraph graph, calibrate_graph(std::move(patterned), options, say));
  const Graph& g = graph.graph;
  NPU_ASSIGN_OR_RETURN(Partition partition, partition_graph(graph, N, say, io_refused, exposed));
  QuantPlan quant = plan_quantisation(g, partition, graph.ranges, N, say, options.wide_activations);
  if (options.error_feedback_rounding) NPU_RETURN_IF_ERROR(round_weights(g, partition, graph.samples, say));
  if (options.bias_correction) NPU_RETURN_IF_ERROR(correct_biases(g, partition, quant, graph.samples, say));
  NPU_RETURN_IF_ERROR(check_int32_outputs(g, partition, quant, io_refused));
  if (!options.export_qdq_path.empty())
    NPU_RETURN_IF_ERROR(export_qdq(g, partition, quant, options.export_qdq_path, say));
  MemoryPlan memory = plan_memory(g, partition, quant, say);
  NPU_ASSIGN_OR_RETURN(LoweredModel lowered, lower_segments(g, partition, quant, memory, N, say));
  NPU_RETURN_IF_ERROR(predict_cycles(lowered, memory, N, say));
  NPU_RETURN_IF_ERROR(check_device_values(g, quant, memory, graph.ranges, io_refused));
  return write_image(onnx_path, N, g, graph.specialized, partition, quant, memory, lowered, say);
}

}  // namespace

Result<std::vector<uint8_t>> compile_onnx_file(const std::string& onnx_path, const CompileOptions& options) {
  // --export-qdq writes the float graph with its quantisation: it keeps integer inputs and
  // outputs as graph nodes, so it compiles without binding them.
  const bool bind_io = options.export_qdq_path.empty();
  std::string io_refused;
  auto bytes = in_stage("model", compile_model(onnx_path, options, bind_io, &io_refused));
  if (bytes.is_ok() || io_refused.empty()) return bytes;
  if (options.progress)
    options.progress("integer graph inputs/outputs stay as they are (" + io_refused +
                     "): compiling again without binding them to the device");
  return in_stage("model", compile_model(onnx_path, options, false, &io_refused));
}

Result<ExposedImage> compile_exposing_values(const std::string& onnx_path, const CompileOptions& options) {
  // The same binding decision as compile_onnx_file, so that the layers are the same.
  const bool bind_io = options.export_qdq_path.empty();
  std::string io_refused;
  ExposedImage out;
  auto bytes = in_stage("model", compile_model(onnx_path, options, bind_io, &io_refused, &out));
  if (!bytes.is_ok() && !io_refused.empty()) {
    out = ExposedImage{};
    bytes = in_stage("model", compile_model(onnx_path, options, false, &io_refused, &out));
  }
  if (!bytes.is_ok()) return bytes.status();
  out.bytes = std::move(bytes.value());
  return out;
}

Result<std::vector<std::pair<std::string, Tensor>>> run_float_model(
    const std::string& onnx_path, const std::map<std::string, std::vector<int64_t>>& input_shapes,
    const std::vector<Tensor>& inputs) {
  NPU_ASSIGN_OR_RETURN(Graph g, in_stage("model", load_onnx(onnx_path, input_shapes)));
  NPU_ASSIGN_OR_RETURN(std::vector<Tensor> env, in_stage("calibration", run_reference(g, inputs)));
  std::vector<std::pair<std::string, Tensor>> out;
  auto keep = [&](int v) {
    const Value& val = g.value(v);
    Tensor& t = env[static_cast<size_t>(v)];
    if (!val.name.empty() && t.dtype == DType::kF32 && !g.is_constant(v)) out.emplace_back(val.name, std::move(t));
  };
  for (int v : g.inputs) keep(v);
  for (const Node& n : g.nodes)
    for (int v : n.outputs)
      if (v >= 0) keep(v);
  return out;
}

}  // namespace npu::compiler
