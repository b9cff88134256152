// npu-compile MODEL.onnx -o IMAGE [--calib DIR] [--calibration METHOD] [--export-qdq FILE]
//             [--input-shape NAME=D0,D1,...]... [--array 8|16|32] [--report]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "npu/compiler/compiler.h"
#include "npu/compiler/image.h"

namespace {

constexpr const char* kUsage =
    "usage: npu-compile MODEL.onnx -o IMAGE [--calib DIR] [--calibration METHOD]\n"
    "                   [--export-qdq FILE.onnx] [--input-shape NAME=D0,D1,...]...\n"
    "                   [--array 8|16|32] [--report]\n"
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
    "  --report          print per-layer MACs, predicted cycles, utilisation, scratchpad use\n";

int fail(const std::string& message) {
  std::fprintf(stderr, "npu-compile: error: %s\n", message.c_str());
  return 1;
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

}  // namespace

int main(int argc, char** argv) {
  std::string model, output;
  npu::compiler::CompileOptions options;
  bool report = false;
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
      if (!v) return fail("-o needs a file name");
      output = v;
    } else if (arg == "--calib") {
      const char* v = value("--calib");
      if (!v) return fail("--calib needs a directory");
      options.calibration_dir = v;
    } else if (arg == "--calibration") {
      const char* v = value("--calibration");
      if (!v) return fail("--calibration needs minmax, percentile[=P], entropy or mse");
      auto method = npu::compiler::parse_calibration_method(v);
      if (!method) return fail(method.status().message());
      options.calibration_method = *method;
    } else if (arg == "--export-qdq") {
      const char* v = value("--export-qdq");
      if (!v) return fail("--export-qdq needs an output file name (FILE.onnx)");
      options.export_qdq_path = v;
    } else if (arg == "--input-shape") {
      const char* v = value("--input-shape");
      const std::string spec = v ? v : "";
      const auto eq = spec.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail("--input-shape expects NAME=D0,D1,... (got '" + spec + "')");
      std::vector<int64_t> dims;
      size_t pos = eq + 1;
      while (pos <= spec.size()) {
        const size_t comma = std::min(spec.find(',', pos), spec.size());
        try {
          size_t used = 0;
          const long long d = std::stoll(spec.substr(pos, comma - pos), &used);
          if (used != comma - pos || d <= 0) throw std::invalid_argument("bad");
          dims.push_back(d);
        } catch (...) {
          return fail("--input-shape " + spec + ": dimensions must be positive integers");
        }
        pos = comma + 1;
      }
      options.input_shapes[spec.substr(0, eq)] = dims;
    } else if (arg == "--array") {
      const char* v = value("--array");
      const std::string s = v ? v : "";
      if (s != "8" && s != "16" && s != "32") return fail("--array must be 8, 16 or 32");
      options.array_dim = static_cast<uint32_t>(std::stoul(s));
    } else if (arg == "--report") {
      report = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return fail("unknown option " + arg + "\n" + kUsage);
    } else if (model.empty()) {
      model = arg;
    } else {
      return fail("more than one model given ('" + model + "' and '" + arg + "')");
    }
  }
  if (model.empty() || output.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  options.progress = [&](const std::string& line) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[%6.2fs] %s\n", s, line.c_str());
  };
  auto bytes = npu::compiler::compile_onnx_file(model, options);
  if (!bytes) return fail(bytes.status().to_string());
  std::ofstream out(output, std::ios::binary);
  if (!out) return fail(output + ": cannot create file (does the directory exist and is it writable?)");
  out.write(reinterpret_cast<const char*>(bytes->data()), static_cast<std::streamsize>(bytes->size()));
  out.close();
  if (!out) return fail(output + ": write failed");
  std::printf("wrote %s (%zu bytes)\n", output.c_str(), bytes->size());
  if (report) {
    auto image = npu::compiler::ModelImage::from_bytes(std::move(bytes.value()), output);
    if (!image) return fail(image.status().to_string());
    print_report((*image)->model());
  }
  return 0;
}
