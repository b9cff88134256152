// npu-bench model: latency, throughput and the split of host time for a user's own model,
// optionally against onnxruntime-node on the same model and inputs (see model_bench.h).
#include "model_bench.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "npu/compiler/compiler.h"
#include "npu/runtime/api.h"

namespace npu::tools {
namespace {

namespace rt = npu::runtime;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model;
  std::string device;
  std::vector<std::string> inputs;
  uint64_t iterations = 100;
  uint64_t warmup = 10;
  uint64_t rounds = 0;  // 0: 1, or 3 with --compare-ort
  uint64_t concurrency = 1;
  bool json = false;
  bool compare_ort = false;
  std::string ort_model;
  std::map<std::string, std::vector<int64_t>> input_shapes;  // --input-shape, for .onnx
};

const Cli* g_cli = nullptr;

int fail(const std::string& why) { return g_cli->error(why); }

bool ends_with(const std::string& s, const char* suffix) {
  const std::string x(suffix);
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// A progress line on stderr every two seconds while a phase runs (silent for short runs).
class Progress {
 public:
  Progress() : thread_([this] { loop(); }) {}
  ~Progress() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void phase(std::string name, uint64_t total) {
    std::lock_guard lock(mu_);
    name_ = std::move(name);
    total_ = total;
    done_ = 0;
  }
  void tick() { done_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void loop() {
    const auto start = Clock::now();
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(2), [&] { return stop_; })) {
      std::fprintf(stderr, "npu-bench: %s: %llu/%llu, %.0f s elapsed\n", name_.c_str(),
                   static_cast<unsigned long long>(done_.load()),
                   static_cast<unsigned long long>(total_),
                   std::chrono::duration<double>(Clock::now() - start).count());
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string name_ = "starting";
  uint64_t total_ = 0;
  std::atomic<uint64_t> done_{0};
  std::thread thread_;
};

// onnxruntime-node in a child process (scripts/ort/ort_serve.js), driven line by line.
class OrtProcess {
 public:
  static std::unique_ptr<OrtProcess> start(const std::string& model,
                                         const std::vector<std::string>& inputs, std::string* error) {
    const char* env_script = std::getenv("NPU_ORT_SERVE");
    const std::string script = env_script && *env_script ? env_script : NPU_ORT_SERVE_JS;
    if (!std::filesystem::exists(script)) {
      *error = "onnxruntime-node driver " + script +
               " not found; set NPU_ORT_SERVE to scripts/ort/ort_serve.js of the source tree";
      return nullptr;
    }
    int to_child[2], from_child[2];
    if (pipe(to_child) != 0 || pipe(from_child) != 0) {
      *error = "cannot create pipes for the onnxruntime-node process";
      return nullptr;
    }
    const pid_t pid = fork();
    if (pid < 0) {
      *error = "cannot start the onnxruntime-node process";
      return nullptr;
    }
    if (pid == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      std::vector<std::string> args{"node", script, model};
      args.insert(args.end(), inputs.begin(), inputs.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("node", argv.data());
      std::fprintf(stderr, "npu-bench: error: cannot run node: install nodejs (scripts/install-deps)\n");
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    std::unique_ptr<OrtProcess> p(new OrtProcess());
    p->pid_ = pid;
    p->in_ = fdopen(to_child[1], "w");
    p->out_ = fdopen(from_child[0], "r");
    const std::string ready = p->read_line();
    const auto reply = nlohmann::json::parse(ready, nullptr, /*allow_exceptions=*/false);
    if (!reply.is_object() || reply.value("ready", false) != true) {
      *error = "onnxruntime-node did not start: " +
               (ready.empty() ? std::string("no answer (is scripts/ort/node_modules installed? "
                                            "run scripts/install-deps)")
                              : ready);
      p->stop();
      return nullptr;
    }
    return p;
  }
  OrtProcess(const OrtProcess&) = delete;
  ~OrtProcess() { stop(); }

  // Runs `n` inferences; their latencies in microseconds (empty on error, with *error set).
  std::vector<double> run(uint64_t n, const std::string& output, std::string* error) {
    std::fprintf(in_, "run %llu %s\n", static_cast<unsigned long long>(n), output.c_str());
    std::fflush(in_);
    const std::string line = read_line();
    std::vector<double> us;
    const auto reply = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!reply.is_object() || !reply.contains("latency_ms") || !reply["latency_ms"].is_array()) {
      *error = "onnxruntime-node failed: " + (line.empty() ? std::string("no answer") : line);
      return us;
    }
    for (const auto& ms : reply["latency_ms"])
      if (ms.is_number()) us.push_back(ms.get<double>() * 1000.0);
    return us;
  }

 private:
  OrtProcess() = default;
  std::string read_line() {
    std::string s;
    int c;
    while (out_ && (c = std::fgetc(out_)) != EOF && c != '\n') s += static_cast<char>(c);
    return s;
  }
  void stop() {
    if (in_) {
      std::fputs("quit\n", in_);
      std::fclose(in_);
    }
    if (out_) std::fclose(out_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
    in_ = out_ = nullptr;
    pid_ = -1;
  }
  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
};

// The checked arguments; a bad value throws UsageError.
Args checked(const ModelBenchArgs& in) {
  Args a;
  a.model = in.model;
  a.device = in.device;
  a.inputs = in.inputs;
  for (const auto& i : a.inputs)
    if (i.empty()) throw UsageError("--input needs a .npy file");
  a.iterations = parse_count("--iterations", in.iterations, 1, 100000000);
  a.warmup = parse_count("--warmup", in.warmup, 0, 100000000);
  if (!in.rounds.empty()) a.rounds = parse_count("--rounds", in.rounds, 1, 100000000);
  a.concurrency = parse_count("--concurrency", in.concurrency, 1, 1024);
  a.json = in.json;
  a.compare_ort = in.compare_ort;
  a.ort_model = in.ort_model;
  a.input_shapes = parse_input_shapes(in.input_shapes);
  if (a.compare_ort && a.ort_model.empty()) {
    if (!ends_with(a.model, ".onnx"))
      throw UsageError("--compare-ort needs the ONNX model: give the .onnx, or --ort-model FILE.onnx");
    a.ort_model = a.model;
  }
  if (!a.input_shapes.empty() && !ends_with(a.model, ".onnx"))
    throw UsageError("--input-shape is for an .onnx model compiled on the fly, and " + a.model +
                     " is a model image; give --input-shape to npu-compile instead");
  if (!a.compare_ort && !a.ort_model.empty()) throw UsageError("--ort-model is for --compare-ort; add --compare-ort");
  if (a.rounds == 0) a.rounds = a.compare_ort ? 3 : 1;
  return a;
}

// Deterministic inputs in [-1, 1) (a 64-bit LCG), the same on every platform.
std::vector<Tensor> make_inputs(const rt::Model& model, std::string* error) {
  std::vector<Tensor> in;
  uint64_t s = 0x2545F4914F6CDD1Dull;
  for (const rt::TensorInfo& info : model.inputs()) {
    if (info.dtype != DType::kF32) {
      *error = "input '" + info.name + "' is " + std::string(dtype_name(info.dtype)) +
               "; generated inputs are float only: pass it with --input";
      return {};
    }
    Tensor t = Tensor::zeros(DType::kF32, info.shape);
    for (float& x : t.as<float>()) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<float>(static_cast<double>(s >> 11) / 4503599627370496.0 - 1.0);
    }
    in.push_back(std::move(t));
  }
  return in;
}

struct Split {
  std::vector<double> total, copy_in, queue, device, host_steps, copy_out, cycles;
  void add(const rt::RunStats& s) {
    total.push_back(s.total_us);
    copy_in.push_back(s.copy_in_us);
    queue.push_back(s.queue_us);
    device.push_back(s.device_us - s.host_steps_us);
    host_steps.push_back(s.host_steps_us);
    copy_out.push_back(s.copy_out_us);
    cycles.push_back(static_cast<double>(s.device_cycles));
  }
};

double sqnr_db(const Tensor& ref, const Tensor& got) {
  const Tensor a = to_float(ref), b = to_float(got);
  if (a.element_count() != b.element_count()) return NAN;
  double sig = 0, err = 0;
  const auto x = a.as<float>(), y = b.as<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    sig += static_cast<double>(x[i]) * x[i];
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
  }
  return err == 0 ? INFINITY : 10 * std::log10(sig / err);
}

}  // namespace

void add_model_bench_options(Cli& cli, CLI::App* sub, ModelBenchArgs* a) {
  sub->add_option("IMAGE_OR_ONNX", a->model, "a model image, or an .onnx model (compiled on the fly)")
      ->required();
  cli.add_device(&a->device, sub);
  sub->add_option("--input", a->inputs,
                  "one .npy per model input, in order; without any, deterministic uniform [-1, 1) inputs")
      ->allow_extra_args(false)->type_name("FILE.npy");
  sub->add_option("--input-shape", a->input_shapes, "fix a dynamic dimension of an .onnx model's input, repeatable")
      ->allow_extra_args(false)->type_name("NAME=D0,D1,...");
  sub->add_option("--iterations", a->iterations, "timed Session::run calls per round (default 100)")->type_name("N");
  sub->add_option("--warmup", a->warmup, "untimed runs before each round (default 10)")->type_name("N");
  sub->add_option("--rounds", a->rounds, "latency rounds (default 1; 3 with --compare-ort)")->type_name("N");
  sub->add_option("--concurrency", a->concurrency,
                  "requests in flight through an AsyncSession for the throughput figure (1..1024, default 1)")
      ->type_name("N");
  cli.add_json(&a->json, "latency, throughput, device cycles, host split (and the onnxruntime comparison)", sub);
  sub->add_flag("--compare-ort", a->compare_ort,
                "also run onnxruntime-node (CPU, one thread) on the same ONNX model and inputs, alternating "
                "rounds with the NPU: each round's ratio, their median and the SQNR of output 0");
  sub->add_option("--ort-model", a->ort_model, "the ONNX model onnxruntime runs (default: the model itself)")
      ->type_name("FILE.onnx");
}

int model_main(const Cli& cli, const ModelBenchArgs& in) {
  g_cli = &cli;
  const Args args = checked(in);
  setenv("NPU_LOG", "quiet", 0);
  std::vector<Tensor> inputs;
  for (const std::string& p : args.inputs) {
    auto t = read_npy(p);
    if (!t.is_ok()) return fail(t.status().message());
    inputs.push_back(std::move(t).value());
  }
  rt::RuntimeOptions ro;
  ro.device = args.device;
  auto runtime = rt::Runtime::open(ro);
  if (!runtime.is_ok()) return fail(runtime.status().message());
  const hal::DeviceInfo& dev = (*runtime)->device(0)->info();

  std::shared_ptr<const rt::Model> model;
  if (ends_with(args.model, ".onnx")) {
    compiler::CompileOptions co;
    co.array_dim = dev.array_dim;
    co.input_shapes = args.input_shapes;
    if (!inputs.empty()) co.calibration.push_back(inputs);
    std::fprintf(stderr, "npu-bench: compiling %s for a %ux%u array\n", args.model.c_str(),
                 dev.array_dim, dev.array_dim);
    auto bytes = compiler::compile_onnx_file(args.model, co);
    if (!bytes.is_ok()) return fail(bytes.status().message());
    auto m = rt::Model::from_bytes(std::move(bytes).value(), args.model);
    if (!m.is_ok()) return fail(m.status().message());
    model = std::move(m).value();
  } else {
    auto m = rt::Model::load_file(args.model);
    if (!m.is_ok()) return fail(m.status().message());
    model = std::move(m).value();
  }
  const bool generated_inputs = inputs.empty();
  if (generated_inputs) {
    std::string err;
    inputs = make_inputs(*model, &err);
    if (!err.empty()) return fail(err);
  } else if (inputs.size() != model->inputs().size()) {
    return fail(std::to_string(inputs.size()) + " --input file(s) given, but the model takes " +
                std::to_string(model->inputs().size()) + "; give one per model input, in order");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status st = rt::check_input(inputs[i], model->inputs()[i], i);
    if (!st.is_ok()) return fail(st.message());
  }

  // onnxruntime-node reads the same inputs from .npy files.
  std::filesystem::path work;
  std::unique_ptr<OrtProcess> ort;
  if (args.compare_ort) {
    char tmpl[] = "/tmp/npu-bench-XXXXXX";
    if (!mkdtemp(tmpl)) return fail("cannot create a temporary directory in /tmp");
    work = tmpl;
    std::vector<std::string> files;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string f = (work / ("input_" + std::to_string(i) + ".npy")).string();
      Status st = write_npy(f, to_float(inputs[i]));
      if (!st.is_ok()) return fail(st.message());
      files.push_back(f);
    }
    std::string err;
    ort = OrtProcess::start(args.ort_model, files, &err);
    if (!ort) return fail(err);
  }

  auto session = rt::Session::create(*runtime, model);
  if (!session.is_ok()) return fail(session.status().message());
  Progress progress;
  Split split;
  std::vector<double> round_npu_p50, round_ort_p50, ort_all;
  rt::Outputs last;
  for (uint64_t r = 0; r < args.rounds; ++r) {
    const std::string round = "round " + std::to_string(r + 1) + "/" + std::to_string(args.rounds);
    progress.phase(round + ": npu warm-up", args.warmup);
    for (uint64_t k = 0; k < args.warmup; ++k, progress.tick()) {
      auto out = (*session)->run(inputs);
      if (!out.is_ok()) return fail(out.status().message());
    }
    progress.phase(round + ": npu latency", args.iterations);
    std::vector<double> lat;
    for (uint64_t k = 0; k < args.iterations; ++k, progress.tick()) {
      const auto t = Clock::now();
      auto out = (*session)->run(inputs);
      lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
      if (!out.is_ok()) return fail(out.status().message());
      split.add(out->stats);
      last = std::move(out).value();
    }
    round_npu_p50.push_back(pct(lat, 50));
    if (ort) {
      progress.phase(round + ": onnxruntime-node", args.iterations);
      std::string err;
      const std::string output =
          r + 1 == args.rounds ? (work / "ort_output_0.npy").string() : std::string();
      std::vector<double> o = ort->run(args.iterations, output, &err);
      if (o.empty()) return fail(err);
      round_ort_p50.push_back(pct(o, 50));
      ort_all.insert(ort_all.end(), o.begin(), o.end());
    }
  }
  std::vector<double> ratios;
  for (size_t r = 0; r < round_ort_p50.size(); ++r) ratios.push_back(round_npu_p50[r] / round_ort_p50[r]);
  double sqnr = NAN;
  if (ort) {
    auto ref = read_npy((work / "ort_output_0.npy").string());
    if (ref.is_ok() && !last.tensors.empty()) sqnr = sqnr_db(*ref, last.tensors[0]);
    ort.reset();
    std::error_code ec;
    std::filesystem::remove_all(work, ec);
  }

  // Throughput: `concurrency` requests in flight through an AsyncSession.
  rt::SessionOptions so;
  so.max_in_flight = static_cast<uint32_t>(args.concurrency);
  so.max_outstanding = static_cast<uint32_t>(args.concurrency);
  auto pair = rt::AsyncSession::create(*runtime, model, so);
  if (!pair.is_ok()) return fail(pair.status().message());
  auto& [async, queue] = pair.value();
  const uint64_t requests = std::max<uint64_t>(args.iterations, 4 * args.concurrency);
  progress.phase("throughput at " + std::to_string(args.concurrency) + " in flight", requests);
  auto submit = [&]() -> Status { return async->submit(std::vector<Tensor>(inputs)).status(); };
  for (uint64_t k = 0; k < args.concurrency; ++k)
    if (Status st = submit(); !st.is_ok()) return fail(st.message());
  // The first `concurrency` completions are warm-up.
  for (uint64_t k = 0; k < args.concurrency; ++k) {
    auto c = queue->recv();
    if (!c.is_ok() || !c->status.is_ok()) return fail(c.is_ok() ? c->status.message() : c.status().message());
    if (Status st = submit(); !st.is_ok()) return fail(st.message());
  }
  const auto t0 = Clock::now();
  for (uint64_t k = 0; k < requests; ++k, progress.tick()) {
    auto c = queue->recv();
    if (!c.is_ok() || !c->status.is_ok()) return fail(c.is_ok() ? c->status.message() : c.status().message());
    if (k + args.concurrency < requests)
      if (Status st = submit(); !st.is_ok()) return fail(st.message());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double throughput = static_cast<double>(requests) / seconds;
  async->close();

  const double cycles = pct(split.cycles, 50);
  const double n2 = static_cast<double>(dev.array_dim) * dev.array_dim;
  const double util = cycles > 0 ? static_cast<double>(model->macs()) / (cycles * n2) : 0;
  const double ort_p50 = pct(ort_all, 50);
  std::sort(ratios.begin(), ratios.end());
  const double ratio = ratios.empty() ? NAN : ratios[ratios.size() / 2];

  std::printf("model       %s on %s (%s, array %ux%u)\n", args.model.c_str(), dev.spec.c_str(),
              dev.platform.c_str(), dev.array_dim, dev.array_dim);
  std::printf("latency     p50 %.1f us, p90 %.1f us, p99 %.1f us, mean %.1f us over %llu runs "
              "(%llu warm-up runs per round excluded)\n",
              pct(split.total, 50), pct(split.total, 90), pct(split.total, 99), mean(split.total),
              static_cast<unsigned long long>(split.total.size()),
              static_cast<unsigned long long>(args.warmup));
  std::printf("throughput  %.0f inferences/s with %llu in flight (AsyncSession, %llu requests)\n",
              throughput, static_cast<unsigned long long>(args.concurrency),
              static_cast<unsigned long long>(requests));
  std::printf("device      %.0f cycles per inference (%.1f us at %u MHz; predicted %llu), MAC "
              "utilisation %.1f%% (%llu MACs)\n",
              cycles, cycles / dev.clock_mhz, dev.clock_mhz,
              static_cast<unsigned long long>(model->predicted_cycles()), 100 * util,
              static_cast<unsigned long long>(model->macs()));
  std::printf("host split  mean copy-in %.1f us, queue %.1f us, device %.1f us, host steps %.1f us, "
              "copy-out %.1f us\n",
              mean(split.copy_in), mean(split.queue), mean(split.device), mean(split.host_steps),
              mean(split.copy_out));
  if (!ratios.empty()) {
    for (size_t r = 0; r < round_ort_p50.size(); ++r)
      std::printf("round %zu     npu p50 %.1f us, onnxruntime-node p50 %.1f us, ratio %.2fx\n",
                  r + 1, round_npu_p50[r], round_ort_p50[r], round_npu_p50[r] / round_ort_p50[r]);
    // A generated input is uniform noise, unlike the data a model was calibrated on: its SQNR
    // says little about the model's accuracy, and a user must not read it as such.
    std::printf("vs ort      median ratio npu/ort %.2fx over %zu alternating rounds; SQNR of "
                "output 0 against onnxruntime %.1f dB%s\n",
                ratio, ratios.size(), sqnr,
                generated_inputs ? " (on a generated uniform input, not the data the model was "
                                   "calibrated on; pass --input for a representative figure)"
                                 : "");
  }
  if (args.json) {
    using J = nlohmann::json;
    J j = {{"model", args.model},
           {"device", dev.spec},
           {"platform", dev.platform},
           {"array_dim", dev.array_dim},
           {"iterations", split.total.size()},
           {"warmup", args.warmup},
           {"rounds", args.rounds},
           {"latency_us",
            {{"p50", json_number(pct(split.total, 50))},
             {"p90", json_number(pct(split.total, 90))},
             {"p99", json_number(pct(split.total, 99))},
             {"mean", json_number(mean(split.total))}}},
           {"throughput",
            {{"concurrency", args.concurrency}, {"requests", requests}, {"per_s", json_number(throughput)}}},
           {"device_cycles", json_number(cycles)},
           {"predicted_cycles", model->predicted_cycles()},
           {"macs", model->macs()},
           {"mac_utilization", json_number(util)},
           {"host_us",
            {{"copy_in", json_number(mean(split.copy_in))},
             {"queue", json_number(mean(split.queue))},
             {"device", json_number(mean(split.device))},
             {"host_steps", json_number(mean(split.host_steps))},
             {"copy_out", json_number(mean(split.copy_out))}}}};
    if (!ratios.empty()) {
      J ort_rounds = J::array(), npu_rounds = J::array();
      for (double v : round_ort_p50) ort_rounds.push_back(json_number(v));
      for (double v : round_npu_p50) npu_rounds.push_back(json_number(v));
      j["ort"] = {{"p50_us", json_number(ort_p50)},
                  {"round_p50_us", ort_rounds},
                  {"npu_round_p50_us", npu_rounds},
                  {"ratio_median", json_number(ratio)},
                  {"sqnr_db", json_number(sqnr)},
                  {"sqnr_input", generated_inputs ? "generated" : "files"}};
    }
    std::printf("%s\n", json_line(j).c_str());
  }
  return 0;
}

}  // namespace npu::tools
