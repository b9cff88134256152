// npu-compile MODEL.onnx -o IMAGE [options]: ONNX to a verified model image (the options: see
// kSynopsis and the README). Arguments by CLI11 and --json by nlohmann::json (npu/tools/cli.h).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "npu/accuracy/accuracy.h"
#include "npu/compiler/compiler.h"
#include "npu/compiler/image.h"
#include "npu/tools/cli.h"

namespace {

constexpr const char* kSynopsis =
    "usage: npu-compile MODEL.onnx -o IMAGE [--calib DIR] [--calibration METHOD]\n"
    "                   [--bias-correction] [--weight-rounding nearest|gptq]\n"
    "                   [--export-qdq FILE.onnx] [--input-shape NAME=D0,D1,...]...\n"
    "                   [--array 8|16|32] [--report] [--json]\n"
    "                   [--accuracy-report [--accuracy-inputs DIR|FILE.npy]... [--accuracy-dump D]\n"
    "                    [--device SPEC]]\n";
constexpr const char* kDescription =
    "Quantises an ONNX model to int8, lowers it to the NPU's command stream and writes a\n"
    "verified model image. Exit 0 written, 1 the compilation or a file failed, 2 a usage error.\n";

npu::tools::Cli* g_cli = nullptr;

int fail(const std::string& message, int code = 1) { return g_cli->error(message, code); }

int usage_error(const std::string& message) { return fail(message, 2); }

// True when `a` and `b` name the same existing file (also through links or other paths).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) && !ec;
}

// Writes `bytes` to `path` through a temporary file in the same directory renamed over it,
// so a failed write never leaves a truncated image where a good one was.
npu::Status write_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out)
      return npu::make_error(
          npu::StatusCode::kInvalidArgument,
          "image: " + path + ": cannot create file (does the directory exist and is it writable?)");
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return npu::make_error(npu::StatusCode::kInvalidArgument,
                             "image: " + path + ": write failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return npu::make_error(npu::StatusCode::kInvalidArgument,
                           "image: " + path + ": cannot write (" + why + ")");
  }
  return npu::Status::ok();
}

void print_report(const npu::image::Model& m) {
  std::printf("%-24s %-8s %12s %12s %8s %10s\n", "layer", "op", "MACs", "cycles", "util", "sp bytes");
  const double n2 = static_cast<double>(m.array_dim()) * m.array_dim();
  for (const auto* step : *m.steps()) {
    if (const auto* seg = step->segment_as_NpuSegment()) {
      if (!seg->layers()) continue;
      for (const auto* l : *seg->layers()) {
        const double util = l->predicted_cycles() ? l->macs() / (n2 * static_cast<double>(l->predicted_cycles())) : 0;
        std::printf("%-24s %-8s %12llu %12llu %7.1f%% %10llu\n", l->name()->c_str(), l->op_type()->c_str(),
                    static_cast<unsigned long long>(l->macs()), static_cast<unsigned long long>(l->predicted_cycles()),
                    100 * util, static_cast<unsigned long long>(l->scratchpad_bytes()));
      }
    } else if (const auto* host = step->segment_as_HostSegment()) {
      std::printf("%-24s %-8s   (host fallback)\n", host->node_name()->c_str(), host->op_type()->c_str());
    }
  }
}

// The samples of --accuracy-inputs: one directory of samples, or one .npy per model input.
npu::Result<std::vector<std::vector<npu::Tensor>>> accuracy_samples(const std::vector<std::string>& paths,
                                                                   const std::string& calib_dir,
                                                                   size_t num_inputs) {
  if (paths.empty()) return npu::compiler::read_calibration_dir(calib_dir, num_inputs);
  std::error_code ec;
  if (paths.size() == 1 && std::filesystem::is_directory(paths[0], ec))
    return npu::compiler::read_calibration_dir(paths[0], num_inputs);
  if (paths.size() != num_inputs)
    return npu::make_error(npu::StatusCode::kInvalidArgument,
                           "--accuracy-inputs: the model has " + std::to_string(num_inputs) + " input(s) but " +
                               std::to_string(paths.size()) +
                               " .npy file(s) were given; give one per input, or one directory of samples");
  std::vector<npu::Tensor> sample;
  for (const auto& p : paths) {
    auto t = npu::read_npy(p);
    if (!t) return npu::make_error(t.status().code(), "--accuracy-inputs: " + t.status().message());
    sample.push_back(std::move(t.value()));
  }
  return std::vector<std::vector<npu::Tensor>>{std::move(sample)};
}

int accuracy_report(const std::string& model, npu::compiler::CompileOptions options,
                    const std::vector<std::string>& inputs, const std::vector<uint8_t>& image_bytes,
                    const std::string& dump_dir, const std::string& device) {
  auto image = npu::compiler::ModelImage::from_bytes(image_bytes, model);
  if (!image) return fail(image.status().message());
  const size_t num_inputs = (*image)->model().inputs() ? (*image)->model().inputs()->size() : 0;
  auto samples = accuracy_samples(inputs, options.calibration_dir, num_inputs);
  if (!samples) return fail(samples.status().message());
  options.progress("accuracy report: compiling with every value exposed, running " +
                   std::to_string(samples->size()) + " sample(s) on the image and the float model");
  auto report = npu::accuracy::accuracy_report(model, options, *samples, &image_bytes, device, dump_dir);
  if (!report) return fail(report.status().message());
  std::fputs(npu::accuracy::format_report(*report).c_str(), stdout);
  return report->image_outputs_identical ? 0 : 1;
}

// The --json object: what was written, its interface and where each layer runs.
nlohmann::json summary_json(const npu::image::Model& m, const std::string& model,
                            const std::string& output, size_t bytes) {
  auto tensors = [](const auto* list) {
    nlohmann::json a = nlohmann::json::array();
    if (list == nullptr) return a;
    for (const auto* b : *list) {
      const auto* d = b->desc();
      nlohmann::json shape = nlohmann::json::array();
      if (d && d->shape())
        for (int64_t x : *d->shape()) shape.push_back(x);
      a.push_back({{"name", d && d->name() ? d->name()->str() : ""},
                   {"dtype", d ? npu::image::EnumNameDType(d->dtype()) : ""},
                   {"shape", shape}});
    }
    return a;
  };
  nlohmann::json layers = nlohmann::json::array();
  uint64_t macs = 0, cycles = 0, npu_steps = 0, host_steps = 0;
  for (const auto* step : *m.steps()) {
    if (const auto* seg = step->segment_as_NpuSegment()) {
      ++npu_steps;
      macs += seg->macs();
      cycles += seg->predicted_cycles();
      if (!seg->layers()) continue;
      for (const auto* l : *seg->layers())
        layers.push_back({{"name", l->name()->str()}, {"op", l->op_type()->str()}, {"on", "npu"},
                          {"macs", l->macs()}, {"predicted_cycles", l->predicted_cycles()},
                          {"scratchpad_bytes", l->scratchpad_bytes()}});
    } else if (const auto* host = step->segment_as_HostSegment()) {
      ++host_steps;
      layers.push_back({{"name", host->node_name()->str()}, {"op", host->op_type()->str()}, {"on", "host"}});
    }
  }
  return {{"model", model},       {"image", output},         {"bytes", bytes},
          {"array_dim", m.array_dim()}, {"inputs", tensors(m.inputs())}, {"outputs", tensors(m.outputs())},
          {"npu_steps", npu_steps}, {"host_steps", host_steps}, {"macs", macs},
          {"predicted_cycles", cycles}, {"layers", layers}};
}

// Checks what parsing could not (files, combinations), compiles and writes the image.
int compile(const std::string& model, const std::string& output, npu::compiler::CompileOptions options,
            bool report, bool json, bool accuracy, const std::vector<std::string>& accuracy_inputs,
            const std::string& accuracy_dump, const std::string& device) {
  if ((!accuracy_inputs.empty() || !accuracy_dump.empty()) && !accuracy)
    return usage_error("--accuracy-inputs and --accuracy-dump are for --accuracy-report; add --accuracy-report");
  if (!accuracy_dump.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(accuracy_dump, ec))
      return usage_error("--accuracy-dump " + accuracy_dump + ": not a directory; create it first");
  }
  if (accuracy && accuracy_inputs.empty() && options.calibration_dir.empty())
    return usage_error("--accuracy-report needs inputs: --accuracy-inputs DIR (or FILE.npy per input), or --calib DIR");
  // Never write over the model (or the other output), also through another path or a link.
  if (same_file(model, output) || model == output)
    return usage_error("-o " + output + " is the input model " + model +
                       "; write the image to another file (IMAGE.npuimg)");
  if (!options.export_qdq_path.empty() &&
      (same_file(model, options.export_qdq_path) || model == options.export_qdq_path))
    return usage_error("--export-qdq " + options.export_qdq_path + " is the input model " + model +
                       "; give another file");
  if (!options.export_qdq_path.empty() &&
      (same_file(output, options.export_qdq_path) || output == options.export_qdq_path))
    return usage_error("--export-qdq and -o name the same file " + output + "; give two files");
  const auto start = std::chrono::steady_clock::now();
  options.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%6.2fs] %s\n", s, line.c_str());
  };
  auto bytes = npu::compiler::compile_onnx_file(model, options);
  if (!bytes) return fail(bytes.status().message());
  if (npu::Status st = write_atomically(output, *bytes); !st.is_ok()) return fail(st.message());
  std::printf("wrote %s (%zu bytes)\n", output.c_str(), bytes->size());
  auto image = npu::compiler::ModelImage::from_bytes(*bytes, output);
  if (!image) return fail(image.status().message());
  if (report) print_report((*image)->model());
  const int rc =
      accuracy ? accuracy_report(model, options, accuracy_inputs, *bytes, accuracy_dump, device) : 0;
  if (json) {
    nlohmann::json j = summary_json((*image)->model(), model, output, bytes->size());
    if (accuracy) j["accuracy_report"] = {{"image_outputs_identical", rc == 0}};
    std::printf("%s\n", npu::tools::json_line(j).c_str());
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  npu::tools::Cli cli("npu-compile", kSynopsis, kDescription);
  g_cli = &cli;
  CLI::App& app = cli.app();
  std::string model, output, calibration, array, weight_rounding;
  npu::compiler::CompileOptions options;
  bool report = false, accuracy = false, json = false;
  std::vector<std::string> accuracy_inputs, input_shapes;
  std::string accuracy_dump, device;
  app.add_option("MODEL.onnx", model, "the ONNX model")->required();
  app.add_option("-o", output, "where to write the model image")->required()->type_name("IMAGE");
  app.add_option("--calib", options.calibration_dir,
                 "calibration samples: DIR/<sample>/input_<k>.npy")->type_name("DIR");
  app.add_option("--calibration", calibration,
                 "activation ranges: minmax (default), percentile[=P] (clip |x| at the P% point, "
                 "default 99.99), entropy (KL-divergence threshold, 2048-bin histogram, 128 levels) "
                 "or mse (the clip with the least squared quantisation error). Scales a QDQ model "
                 "declares with QuantizeLinear/DequantizeLinear are always used as they are")
      ->type_name("METHOD");
  app.add_flag("--bias-correction", options.bias_correction,
               "each constant-weight conv's bias absorbs the mean error that rounding its input onto "
               "its int8 grid adds per channel on the calibration samples (flat regions round the "
               "same way everywhere); one more float run per sample");
  app.add_option("--weight-rounding", weight_rounding,
                 "how constant conv weights are rounded onto their int8 grids: nearest (each weight "
                 "to its nearest code) or gptq (error feedback: each rounding error is moved onto the "
                 "weights not yet rounded, weighted by how their inputs correlate on the calibration "
                 "samples, so that each layer's output error is small; one more float run per sample)")
      ->type_name("nearest|gptq");
  app.add_flag("--wide-activations", options.wide_activations,
               "16-bit codes (ISA 1.4) for conv outputs that only convs read and for the inputs of "
               "activation functions fused into convs; needs a device of ISA 1.4 or later");
  app.add_option("--export-qdq", options.export_qdq_path,
                 "also write the quantised graph as a QDQ ONNX model (uint8 activations and int8 "
                 "per-channel weights with the compiler's scales, int32 conv biases) that another "
                 "runtime can run to check the quantisation")->type_name("FILE.onnx");
  app.add_option("--input-shape", input_shapes, "fix an input's shape (dynamic dimensions), repeatable")
      ->allow_extra_args(false)->type_name("NAME=D0,D1,...");
  app.add_option("--array", array, "target MAC-array size: 8, 16 or 32 (default 16)")->type_name("N");
  app.add_flag("--report", report, "print per-layer MACs, predicted cycles, utilisation, scratchpad use");
  cli.add_json(&json, "the image written, its inputs, outputs and per-layer figures");
  app.add_flag("--accuracy-report", accuracy,
               "run the float model and the image on the same inputs and print, per value a layer "
               "computes, the SQNR of the NPU's value against the float one, marking the layers "
               "where accuracy is lost, and the worst layers with their likely cause");
  app.add_option("--accuracy-inputs", accuracy_inputs,
                 "the report's inputs: a directory laid out like --calib's, or .npy files, one per "
                 "model input (one sample); default: the --calib samples")
      ->allow_extra_args(false)->type_name("DIR|FILE.npy");
  app.add_option("--accuracy-dump", accuracy_dump,
                 "also write the first sample's values to directory D, each as "
                 "<row>_<value>.npu.npy and <row>_<value>.float.npy")->type_name("D");
  cli.add_device(&device, nullptr, "$NPU_DEVICE, else sim (where --accuracy-report runs the image)");
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return npu::tools::run_guarded(cli, [&] {
    if (output.empty()) return usage_error("-o needs a file name");
    if (app.count("--calib") && options.calibration_dir.empty()) return usage_error("--calib needs a directory");
    if (app.count("--calibration")) {
      auto method = npu::compiler::parse_calibration_method(calibration);
      if (!method) return usage_error(method.status().message());
      options.calibration_method = *method;
    }
    if (app.count("--weight-rounding")) {
      if (weight_rounding != "nearest" && weight_rounding != "gptq")
        return usage_error("--weight-rounding " + weight_rounding + ": unknown; use nearest or gptq");
      options.error_feedback_rounding = weight_rounding == "gptq";
    }
    if (app.count("--export-qdq") && options.export_qdq_path.empty())
      return usage_error("--export-qdq needs an output file name (FILE.onnx)");
    options.input_shapes = npu::tools::parse_input_shapes(input_shapes);
    if (app.count("--array")) {
      if (array != "8" && array != "16" && array != "32") return usage_error("--array must be 8, 16 or 32");
      options.array_dim = static_cast<uint32_t>(std::stoul(array));
    }
    for (const auto& in : accuracy_inputs)
      if (in.empty()) return usage_error("--accuracy-inputs needs a directory of samples or a FILE.npy");
    if (app.count("--accuracy-dump") && accuracy_dump.empty())
      return usage_error("--accuracy-dump needs a directory");
    if (app.count("--device") && !accuracy)
      return usage_error("--device is where --accuracy-report runs the image; add --accuracy-report");
    return compile(model, output, options, report, json, accuracy, accuracy_inputs, accuracy_dump,
                   npu::tools::device_spec(device));
  });
}
