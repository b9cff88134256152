// npu-compile MODEL.onnx -o IMAGE [--calib DIR] [--calibration METHOD] [--export-qdq FILE]
//             [--input-shape NAME=D0,D1,...]... [--array 8|16|32] [--report]
//             [--accuracy-report [--accuracy-inputs DIR | --accuracy-inputs FILE.npy...]]
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
#include "npu/hal/number.h"

namespace {

constexpr const char* kUsage =
    "usage: npu-compile MODEL.onnx -o IMAGE [--calib DIR] [--calibration METHOD]\n"
    "                   [--export-qdq FILE.onnx] [--input-shape NAME=D0,D1,...]...\n"
    "                   [--array 8|16|32] [--report]\n"
    "                   [--accuracy-report [--accuracy-inputs DIR|FILE.npy]... [--accuracy-dump D]]\n"
    "  -o IMAGE          where to write the model image\n"
    "  --calib DIR       calibration samples: DIR/<sample>/input_<k>.npy\n"
    "  --calibration M   activation ranges: minmax (default), percentile[=P] (clip |x| at\n"
    "                    the P% point, default 99.99), entropy (KL-divergence threshold,\n"
    "                    2048-bin histogram, 128 levels) or mse (the clip with the least\n"
    "                    squared quantisation error). Scales a QDQ model declares with\n"
    "                    QuantizeLinear/DequantizeLinear are always used as they are\n"
    "  --export-qdq FILE also write the quantised graph as a QDQ ONNX model (uint8\n"
    "                    activations and int8 per-channel weights with the compiler's\n"
    "                    scales, int32 conv biases) that another runtime can run to check\n"
    "                    the quantisation\n"
    "  --input-shape     fix an input's shape (dynamic dimensions), repeatable\n"
    "  --array N         target MAC-array size (default 16)\n"
    "  --report          print per-layer MACs, predicted cycles, utilisation, scratchpad use\n"
    "  --accuracy-report run the float model and the image (on $NPU_DEVICE, default sim) on\n"
    "                    the same inputs and print, per value a layer computes, the SQNR of\n"
    "                    the NPU's value against the float one, marking the layers where\n"
    "                    accuracy is lost, and the worst layers with their likely cause\n"
    "  --accuracy-inputs the report's inputs: a directory laid out like --calib's, or .npy\n"
    "                    files, one per model input (one sample); default: the --calib samples\n"
    "  --accuracy-dump D also write the first sample's values to directory D, each as\n"
    "                    <row>_<value>.npu.npy and <row>_<value>.float.npy\n";

// Exit status: 0 written, 1 the compilation or a file failed, 2 a usage error.
int fail(const std::string& message, int code = 1) {
  std::fprintf(stderr, "npu-compile: error: %s\n", message.c_str());
  return code;
}

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
                    const std::string& dump_dir) {
  auto image = npu::compiler::ModelImage::from_bytes(image_bytes, model);
  if (!image) return fail(image.status().message());
  const size_t num_inputs = (*image)->model().inputs() ? (*image)->model().inputs()->size() : 0;
  auto samples = accuracy_samples(inputs, options.calibration_dir, num_inputs);
  if (!samples) return fail(samples.status().message());
  options.progress("accuracy report: compiling with every value exposed, running " +
                   std::to_string(samples->size()) + " sample(s) on the image and the float model");
  auto report = npu::accuracy::accuracy_report(model, options, *samples, &image_bytes, "", dump_dir);
  if (!report) return fail(report.status().message());
  std::fputs(npu::accuracy::format_report(*report).c_str(), stdout);
  return report->image_outputs_identical ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, output;
  npu::compiler::CompileOptions options;
  bool report = false, accuracy = false;
  std::vector<std::string> accuracy_inputs;
  std::string accuracy_dump;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) return nullptr;
      (void)flag;
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "-o") {
      const char* v = value("-o");
      if (!v || !*v) return usage_error("-o needs a file name");
      output = v;
    } else if (arg == "--calib") {
      const char* v = value("--calib");
      if (!v || !*v) return usage_error("--calib needs a directory");
      options.calibration_dir = v;
    } else if (arg == "--calibration") {
      const char* v = value("--calibration");
      if (!v) return usage_error("--calibration needs minmax, percentile[=P], entropy or mse");
      auto method = npu::compiler::parse_calibration_method(v);
      if (!method) return usage_error(method.status().message());
      options.calibration_method = *method;
    } else if (arg == "--export-qdq") {
      const char* v = value("--export-qdq");
      if (!v || !*v) return usage_error("--export-qdq needs an output file name (FILE.onnx)");
      options.export_qdq_path = v;
    } else if (arg == "--input-shape") {
      const char* v = value("--input-shape");
      const std::string spec = v ? v : "";
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0)
        return usage_error("input shape: --input-shape expects NAME=D0,D1,... (got '" + spec +
                           "')");
      std::vector<int64_t> dims;
      size_t pos = eq + 1;
      while (pos <= spec.size()) {
        const size_t comma = std::min(spec.find(',', pos), spec.size());
        // Bounded here only against overflow; the compiler checks them against the image.
        const auto d = npu::parse_uint(std::string_view(spec).substr(pos, comma - pos), INT64_MAX);
        if (!d || *d == 0)
          return usage_error("input shape: --input-shape " + spec +
                             ": dimensions must be positive integers");
        dims.push_back(static_cast<int64_t>(*d));
        pos = comma + 1;
      }
      options.input_shapes[spec.substr(0, eq)] = dims;
    } else if (arg == "--array") {
      const char* v = value("--array");
      const std::string s = v ? v : "";
      if (s != "8" && s != "16" && s != "32") return usage_error("--array must be 8, 16 or 32");
      options.array_dim = static_cast<uint32_t>(std::stoul(s));
    } else if (arg == "--report") {
      report = true;
    } else if (arg == "--accuracy-report") {
      accuracy = true;
    } else if (arg == "--accuracy-dump") {
      const char* v = value("--accuracy-dump");
      if (!v || !*v) return usage_error("--accuracy-dump needs a directory");
      accuracy_dump = v;
    } else if (arg == "--accuracy-inputs") {
      const char* v = value("--accuracy-inputs");
      if (!v || !*v) return usage_error("--accuracy-inputs needs a directory of samples or a FILE.npy");
      accuracy_inputs.push_back(v);
    } else if (!arg.empty() && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'; see npu-compile --help");
    } else if (model.empty()) {
      model = arg;
    } else {
      return usage_error("more than one model given ('" + model + "' and '" + arg + "')");
    }
  }
  if ((!accuracy_inputs.empty() || !accuracy_dump.empty()) && !accuracy)
    return usage_error("--accuracy-inputs and --accuracy-dump are for --accuracy-report; add --accuracy-report");
  if (!accuracy_dump.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(accuracy_dump, ec))
      return usage_error("--accuracy-dump " + accuracy_dump + ": not a directory; create it first");
  }
  if (accuracy && accuracy_inputs.empty() && options.calibration_dir.empty())
    return usage_error("--accuracy-report needs inputs: --accuracy-inputs DIR (or FILE.npy per input), or --calib DIR");
  if (model.empty() || output.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
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
  if (report) {
    auto image = npu::compiler::ModelImage::from_bytes(std::move(bytes.value()), output);
    if (!image) return fail(image.status().message());
    print_report((*image)->model());
  }
  if (accuracy) return accuracy_report(model, options, accuracy_inputs, *bytes, accuracy_dump);
  return 0;
}
