// npu-run MODEL_OR_IMAGE [options] | npu-run --test-data DIR [options]: runs a model on a device
// (the options: kSynopsis and the README). Arguments by CLI11, --json by nlohmann::json.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "npu/compiler/compiler.h"
#include "npu/compiler/image.h"
#include "npu/hal/file.h"
#include "npu/runtime/api.h"
#include "npu/tools/cli.h"
#include "test_data.h"

namespace {

constexpr const char* kSynopsis =
    "usage: npu-run MODEL_OR_IMAGE [--device sim|rtl|accel:N|/dev/accel/accelN]\n"
    "               [--input FILE.npy]... [--input-shape NAME=D0,D1,...]... [--output-dir DIR]\n"
    "               [--iterations N] [--json] [--summary] [--trace FILE.json]\n"
    "       npu-run --test-data DIR [--json] [--host] [--device SPEC]\n";
constexpr const char* kDescription =
    "Runs a model image, or an .onnx model compiled on the fly (calibrating on the inputs), and\n"
    "prints its outputs, latency, device cycles and MAC utilisation. --test-data runs one ONNX\n"
    "backend test directory (model.onnx and test_data_set_*/{input,output}_<k>.pb).\n"
    "Exit 0 ok (test passed), 1 failure, 2 usage error, 4 a test the stack does not support.\n";

struct Args {
  std::string model;
  std::string device;
  std::vector<std::string> inputs;
  std::map<std::string, std::vector<int64_t>> input_shapes;  // --input-shape, for .onnx
  std::string output_dir;
  int64_t iterations = 1;
  bool json = false;
  bool summary = false;
  std::string trace;
};

npu::tools::Cli* g_cli = nullptr;

int fail(const std::string& message, int code = 1) { return g_cli->error(message, code); }

// Deterministic normal(0,1) samples, identical on every platform (SplitMix64 + Box-Muller).
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  float next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(bits() >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(bits() >> 11) / 9007199254740992.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2 * M_PI * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2 * M_PI * u2));
  }

 private:
  uint64_t bits() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
  bool has_spare_ = false;
  float spare_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::string first_values(const npu::Tensor& t, size_t n) {
  std::string s;
  const auto count = static_cast<size_t>(t.element_count());
  const npu::Tensor f = npu::to_float(t);
  const auto vals = f.as<float>();
  for (size_t i = 0; i < std::min(n, count); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.5g", i ? " " : "", static_cast<double>(vals[i]));
    s += buf;
  }
  if (count > n) s += " ...";
  return s;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run(const Args& args) {
  using Clock = std::chrono::steady_clock;
  namespace rt = npu::runtime;
  const bool tty = isatty(STDERR_FILENO) != 0;

  // The model file.
  std::error_code ec;
  auto model_bytes =
      npu::read_file(args.model, npu::kMaxModelFileBytes, "model (.onnx or npu-compile image)");
  if (!model_bytes.is_ok()) return fail(model_bytes.status().message());
  std::vector<uint8_t> bytes = std::move(model_bytes).value();
  // An image is verified (checksum first) before anything else is opened or run; its
  // errors carry the status code (CORRUPT_DATA, INCOMPATIBLE).
  std::shared_ptr<const rt::Model> model;
  const bool is_image = npu::compiler::looks_like_image(bytes);
  if (is_image || !ends_with(args.model, ".onnx")) {
    if (!args.input_shapes.empty())
      return fail("--input-shape is for an .onnx model compiled on the fly, and " + args.model +
                      " is a model image; give --input-shape to npu-compile instead",
                  2);
    auto m = rt::Model::from_bytes(std::move(bytes), args.model);
    if (!m.is_ok()) return fail(m.status().to_string());
    model = std::move(m).value();
  }

  // Inputs given on the command line.
  std::vector<npu::Tensor> inputs;
  for (const std::string& path : args.inputs) {
    auto t = npu::read_npy(path);
    if (!t.is_ok()) return fail(t.status().message());
    inputs.push_back(std::move(t).value());
  }

  // The device (first: an ONNX model is compiled for its array size).
  rt::RuntimeOptions ropts;
  ropts.device = args.device;
  auto runtime = rt::Runtime::open(ropts);
  if (!runtime.is_ok()) return fail(runtime.status().message());
  const npu::hal::DeviceInfo& dev = (*runtime)->device(0)->info();

  // An ONNX model, compiled on the fly.
  if (!model) {
    npu::compiler::CompileOptions copts;
    copts.array_dim = dev.array_dim;
    copts.input_shapes = args.input_shapes;
    copts.progress = [](const std::string& m) { std::fprintf(stderr, "npu-run: %s\n", m.c_str()); };
    if (!inputs.empty()) {
      copts.calibration.push_back(inputs);
    }
    std::fprintf(stderr, "npu-run: compiling %s for a %ux%u array%s\n", args.model.c_str(),
                 dev.array_dim, dev.array_dim,
                 inputs.empty() ? "" : " (calibrating on the given inputs)");
    // Without inputs the compiler calibrates on its own deterministic random samples.
    auto image_bytes = npu::compiler::compile_onnx_file(args.model, copts);
    if (!image_bytes.is_ok()) return fail(image_bytes.status().message());
    auto m = rt::Model::from_bytes(std::move(image_bytes).value(), args.model);
    if (!m.is_ok()) return fail(m.status().message());
    model = std::move(m).value();
  }
  if (args.summary) std::fputs(model->summary().c_str(), stdout);

  // Inputs: check the count, or make deterministic random ones.
  const bool random_inputs = inputs.empty();
  if (random_inputs) {
    std::fprintf(stderr,
                 "npu-run: no --input given: using deterministic random inputs "
                 "(normal(0,1), seed 0)\n");
    Normal normal(0);
    for (const rt::TensorInfo& info : model->inputs()) {
      if (info.dtype != npu::DType::kF32)
        return fail("input '" + info.name + "' is " + std::string(npu::dtype_name(info.dtype)) +
                    "; random inputs are float only: pass it with --input");
      npu::Tensor t = npu::Tensor::zeros(npu::DType::kF32, info.shape);
      for (float& x : t.as<float>()) x = normal.next();
      inputs.push_back(std::move(t));
    }
  } else if (inputs.size() != model->inputs().size()) {
    std::string want;
    for (const auto& i : model->inputs())
      want += (want.empty() ? "" : ", ") + i.name + " " + std::string(npu::dtype_name(i.dtype)) +
              npu::shape_to_string(i.shape);
    return fail(std::to_string(inputs.size()) + " --input file(s) given, but the model takes " +
                std::to_string(model->inputs().size()) + " (" + want +
                "); give one --input per model input, in that order");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    npu::Status st = rt::check_input(inputs[i], model->inputs()[i], i);
    if (!st.is_ok())
      return fail((args.inputs.empty() ? "" : args.inputs[i] + ": ") + st.message());
  }

  auto session = rt::Session::create(*runtime, model);
  if (!session.is_ok()) return fail(session.status().message());

  if (!args.trace.empty()) (*runtime)->start_profiling();
  std::vector<double> latency_us;
  std::vector<double> cycles;
  latency_us.reserve(static_cast<size_t>(args.iterations));
  rt::Outputs last;
  const Clock::time_point start = Clock::now();
  // Progress on stderr once the run takes more than two seconds (RTL runs can be slow):
  // every second on a terminal, every two seconds otherwise, also inside a long iteration.
  struct Progress {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int64_t completed = 0;
  } progress;
  std::thread reporter([&] {
    std::unique_lock lock(progress.mu);
    if (progress.cv.wait_for(lock, std::chrono::seconds(2), [&] { return progress.done; })) return;
    const auto interval = tty ? std::chrono::seconds(1) : std::chrono::seconds(2);
    do {
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (progress.completed > 0) {
        const double eta = elapsed / static_cast<double>(progress.completed) *
                           static_cast<double>(args.iterations - progress.completed);
        std::fprintf(stderr, "npu-run: %lld/%lld iterations, %.1f s elapsed, ~%.1f s left\n",
                     static_cast<long long>(progress.completed),
                     static_cast<long long>(args.iterations), elapsed, eta);
      } else {
        std::fprintf(stderr, "npu-run: running iteration 1/%lld on %s, %.1f s elapsed\n",
                     static_cast<long long>(args.iterations), dev.spec.c_str(), elapsed);
      }
    } while (!progress.cv.wait_for(lock, interval, [&] { return progress.done; }));
  });
  auto stop_reporter = [&] {
    {
      std::lock_guard lock(progress.mu);
      progress.done = true;
    }
    progress.cv.notify_all();
    if (reporter.joinable()) reporter.join();
  };
  for (int64_t it = 0; it < args.iterations; ++it) {
    const Clock::time_point t0 = Clock::now();
    auto out = (*session)->run(inputs);
    const Clock::time_point t1 = Clock::now();
    if (!out.is_ok()) {
      stop_reporter();
      return fail("iteration " + std::to_string(it + 1) + ": " + out.status().to_string());
    }
    latency_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    cycles.push_back(static_cast<double>(out->stats.device_cycles));
    last = std::move(out).value();
    std::lock_guard lock(progress.mu);
    progress.completed = it + 1;
  }
  stop_reporter();
  if (!args.trace.empty()) {
    std::ofstream tf(args.trace);
    tf << (*runtime)->end_profiling() << "\n";
    if (!tf) return fail(args.trace + ": cannot write the trace file");
  }

  // Outputs.
  std::vector<std::string> files;
  if (!args.output_dir.empty()) {
    std::filesystem::create_directories(args.output_dir, ec);
    if (ec) return fail(args.output_dir + ": cannot create the output directory (" + ec.message() + ")");
    for (size_t k = 0; k < last.tensors.size(); ++k) {
      const std::string path =
          (std::filesystem::path(args.output_dir) / ("output_" + std::to_string(k) + ".npy")).string();
      npu::Status st = npu::write_npy(path, last.tensors[k]);
      if (!st.is_ok()) return fail(st.message());
      files.push_back(path);
    }
  }

  const double p50 = percentile(latency_us, 50), p90 = percentile(latency_us, 90),
               p99 = percentile(latency_us, 99);
  const double device_cycles = percentile(cycles, 50);
  const double n2 = static_cast<double>(dev.array_dim) * dev.array_dim;
  const double util =
      device_cycles > 0 ? static_cast<double>(model->macs()) / (device_cycles * n2) : 0.0;
  const double device_us = device_cycles / (dev.clock_mhz ? dev.clock_mhz : 1000);

  std::printf("model   %s (%zu NPU step%s, %llu MACs per inference)\n", args.model.c_str(),
              model->npu_steps(), model->npu_steps() == 1 ? "" : "s",
              static_cast<unsigned long long>(model->macs()));
  std::printf("device  %s\n", dev.describe().c_str());
  std::printf("inputs  %s\n", random_inputs ? "deterministic random normal(0,1), seed 0" : "from --input files");
  for (size_t k = 0; k < last.tensors.size(); ++k) {
    const auto& info = model->outputs()[k];
    const auto& t = last.tensors[k];
    std::printf("output %zu %s %s%s: %s%s\n", k, info.name.c_str(),
                std::string(npu::dtype_name(t.dtype)).c_str(), npu::shape_to_string(t.shape).c_str(),
                first_values(t, 8).c_str(), files.empty() ? "" : ("  -> " + files[k]).c_str());
  }
  std::printf("latency %lld iteration%s: p50 %.1f us, p90 %.1f us, p99 %.1f us (host wall clock)\n",
              static_cast<long long>(args.iterations), args.iterations == 1 ? "" : "s", p50, p90, p99);
  std::printf("device  %.0f cycles per inference (%.2f us at %u MHz; predicted %llu), "
              "MAC utilization %.1f%%\n",
              device_cycles, device_us, dev.clock_mhz,
              static_cast<unsigned long long>(model->predicted_cycles()), 100 * util);

  if (args.json) {
    nlohmann::json outputs = nlohmann::json::array();
    for (size_t k = 0; k < last.tensors.size(); ++k) {
      const auto& t = last.tensors[k];
      nlohmann::json o = {{"name", model->outputs()[k].name},
                          {"shape", t.shape},
                          {"dtype", std::string(npu::dtype_name(t.dtype))}};
      if (!files.empty()) o["file"] = files[k];
      outputs.push_back(std::move(o));
    }
    using npu::tools::json_number;
    const nlohmann::json j = {
        {"model", args.model},
        {"device", dev.spec},
        {"platform", dev.platform},
        {"array_dim", dev.array_dim},
        {"iterations", args.iterations},
        {"random_inputs", random_inputs},
        {"outputs", outputs},
        {"latency_us", {{"p50", json_number(p50)}, {"p90", json_number(p90)}, {"p99", json_number(p99)}}},
        {"device_cycles", json_number(device_cycles)},
        {"device_us", json_number(device_us)},
        {"predicted_cycles", model->predicted_cycles()},
        {"macs", model->macs()},
        {"mac_utilization", json_number(util)}};
    std::printf("%s\n", npu::tools::json_line(j).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  npu::tools::Cli cli("npu-run", kSynopsis, kDescription);
  g_cli = &cli;
  CLI::App& app = cli.app();
  Args args;
  npu_run::TestDataOptions test;
  std::vector<std::string> shapes;
  std::string iterations;
  auto* model = app.add_option("MODEL_OR_IMAGE", args.model,
                               "an npu-compile image, or an .onnx model (compiled on the fly, "
                               "calibrating on the inputs)");
  cli.add_device(&args.device);
  auto* input = app.add_option("--input", args.inputs,
                               "one .npy per model input, in the model's input order; without any, "
                               "deterministic random inputs (normal(0,1), fixed seed) are used")
                    ->allow_extra_args(false)->type_name("FILE.npy");
  auto* shape = app.add_option("--input-shape", shapes,
                               "fix a dynamic dimension of an .onnx model's input, repeatable")
                    ->allow_extra_args(false)->type_name("NAME=D0,D1,...");
  auto* outdir = app.add_option("--output-dir", args.output_dir,
                                "write output_<k>.npy there (float32 unless the output is integer)")
                     ->type_name("DIR");
  auto* iters = app.add_option("--iterations", iterations, "run N times (default 1) for latency percentiles")
                    ->type_name("N");
  cli.add_json(&args.json, "the results (with --test-data: result, metric, placement)");
  auto* summary = app.add_flag("--summary", args.summary, "print the model summary (inputs, outputs, layers)");
  auto* trace = app.add_option("--trace", args.trace,
                               "write a Chrome trace (chrome://tracing, Perfetto) of the runs")
                    ->type_name("FILE.json");
  auto* test_data = app.add_option("--test-data", test.dir, "run the ONNX backend test in DIR")->type_name("DIR");
  auto* host = app.add_flag("--host", test.host, "with --test-data: skip the compiler, run every operator on the host fallback");
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return npu::tools::run_guarded(cli, [&] {
    if (*test_data) {
      for (const CLI::Option* o : {model, input, shape, outdir, iters, summary, trace})
        if (*o)
          throw npu::tools::UsageError("'" + o->get_name() + "' does not go with --test-data; see npu-run --help");
      if (test.dir.empty()) throw npu::tools::UsageError("--test-data needs a directory");
      test.device = args.device;
      test.json = args.json;
      return npu_run::test_data_main(test);
    }
    if (*host) throw npu::tools::UsageError("--host is for --test-data DIR; see npu-run --help");
    if (args.model.empty())
      throw npu::tools::UsageError("no model given; usage: npu-run MODEL_OR_IMAGE [options], see --help");
    if (*outdir && args.output_dir.empty()) throw npu::tools::UsageError("--output-dir needs a directory name");
    if (*trace && args.trace.empty()) throw npu::tools::UsageError("--trace needs a file name");
    if (*iters) args.iterations = static_cast<int64_t>(npu::tools::parse_count("--iterations", iterations, 1, 100000000));
    args.input_shapes = npu::tools::parse_input_shapes(shapes);
    return run(args);
  });
}
