#include "test_data.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "npu/compiler/compiler.h"
#include "npu/compiler/host_ops.h"
#include "npu/runtime/api.h"
#include "npu/tools/cli.h"

namespace npu_run {
namespace {

namespace fs = std::filesystem;
using npu::Result;
using npu::Status;
using npu::StatusCode;
using npu::Tensor;

constexpr double kRtol = 1e-3, kAtol = 1e-5, kMinSqnrDb = 30.0;
constexpr int kExitPass = 0, kExitFail = 1, kExitUnsupported = 4;

struct DataSet {
  std::string name;
  std::vector<Tensor> inputs, outputs;
};

enum class Verdict { kPass, kFail, kUnsupported };

struct Report {
  Verdict verdict = Verdict::kFail;
  std::vector<std::string> metrics;  // distinct metrics used, in order
  std::string path = "none";         // "npu", "host" or "none"
  size_t npu_ops = 0, host_ops = 0;
  std::string message;
};

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string describe(const Tensor& t) {
  return std::string(npu::dtype_name(t.dtype)) + npu::shape_to_string(t.shape);
}

std::string first_values(const Tensor& t, size_t n) {
  const Tensor f = npu::to_float(t);
  const auto v = f.as<float>();
  std::string s;
  for (size_t i = 0; i < std::min(n, v.size()); ++i) {
    // Piecewise: `(i ? " " : "") + str` trips GCC 12's -Wrestrict false positive at -O3.
    if (i) s += ' ';
    s += fmt(v[i]);
  }
  if (v.size() > n) s += " ...";
  return "[" + s + "]";
}

// Reads test_data_set_* (sorted by name): input_<k>.pb for k < num_inputs, output_<k>.pb for
// k < num_outputs.
Result<std::vector<DataSet>> read_data_sets(const fs::path& dir, size_t num_inputs,
                                            size_t num_outputs) {
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  if (ec) return npu::make_error(StatusCode::kNotFound, dir.string() + ": " + ec.message());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return npu::make_error(StatusCode::kNotFound, dir.string() + ": no test_data_set_* directory");
  std::vector<DataSet> out;
  for (const fs::path& s : sets) {
    DataSet ds;
    ds.name = s.filename().string();
    for (size_t k = 0; k < num_inputs; ++k) {
      NPU_ASSIGN_OR_RETURN(Tensor t, npu::compiler::read_tensor_pb(
                                         (s / ("input_" + std::to_string(k) + ".pb")).string()));
      ds.inputs.push_back(std::move(t));
    }
    for (size_t k = 0; k < num_outputs; ++k) {
      NPU_ASSIGN_OR_RETURN(Tensor t, npu::compiler::read_tensor_pb(
                                         (s / ("output_" + std::to_string(k) + ".pb")).string()));
      ds.outputs.push_back(std::move(t));
    }
    if (fs::exists(s / ("input_" + std::to_string(num_inputs) + ".pb")))
      return npu::make_error(StatusCode::kInvalidArgument,
                             s.string() +
                                 " has more input_<k>.pb files than the model has inputs (" +
                                 std::to_string(num_inputs) + ")");
    out.push_back(std::move(ds));
  }
  return out;
}

// Compares one output; returns the metric used and fills `detail`; false on a mismatch.
bool check_output(const Tensor& expected, const Tensor& actual, bool npu_path, std::string* metric,
                  std::string* detail) {
  const bool is_float = expected.dtype == npu::DType::kF32;
  *metric = !is_float ? "bit-exact" : npu_path ? "sqnr>=30dB" : "allclose(rtol=1e-3,atol=1e-5)";
  if (expected.shape != actual.shape || expected.dtype != actual.dtype) {
    *detail = "expected " + describe(expected) + ", got " + describe(actual);
    return false;
  }
  if (!is_float) {
    if (expected.data == actual.data) {
      *detail = "bit-exact";
      return true;
    }
    size_t i = 0;
    const size_t es = npu::dtype_size(expected.dtype);
    while (i + es <= expected.data.size() &&
           std::equal(expected.data.begin() + static_cast<std::ptrdiff_t>(i),
                      expected.data.begin() + static_cast<std::ptrdiff_t>(i + es),
                      actual.data.begin() + static_cast<std::ptrdiff_t>(i)))
      i += es;
    *detail = "differs first at element " + std::to_string(i / es);
    return false;
  }
  const auto e = expected.as<float>();
  const auto a = actual.as<float>();
  if (npu_path) {
    const double db = npu::sqnr_db(e, a);
    *detail = "SQNR " + fmt(db) + " dB";
    return db >= kMinSqnrDb;
  }
  double worst_err = 0;
  size_t bad = 0, first_bad = e.size();
  for (size_t i = 0; i < e.size(); ++i) {
    const double x = e[i], y = a[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) bad++, first_bad = std::min(first_bad, i);
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) bad++, first_bad = std::min(first_bad, i);
      continue;
    }
    const double err = std::fabs(x - y);
    worst_err = std::max(worst_err, err);
    if (err > kAtol + kRtol * std::fabs(x)) bad++, first_bad = std::min(first_bad, i);
  }
  *detail = "max |err| " + fmt(worst_err);
  if (bad)
    *detail += ", " + std::to_string(bad) + " element(s) out of tolerance, first at " +
               std::to_string(first_bad) + " (expected " + fmt(e[first_bad]) + ", got " +
               fmt(a[first_bad]) + ")";
  return bad == 0;
}

// Compiles for the NPU, calibrating on every data set's inputs.
Result<std::vector<uint8_t>> compile(const std::string& model, const std::vector<DataSet>& sets,
                                     const npu::compiler::OnnxModelInfo& info, uint32_t array_dim) {
  npu::compiler::CompileOptions copts;
  copts.array_dim = array_dim;
  for (const DataSet& ds : sets) copts.calibration.push_back(ds.inputs);
  NPU_ASSIGN_OR_RETURN(copts.input_shapes, npu::compiler::match_inputs(info, sets[0].inputs));
  return npu::compiler::compile_onnx_file(model, copts);
}

// Runs every data set through the runtime on `device`; fills `outputs` per set.
Status run_on_device(const std::string& model_path, std::vector<uint8_t> image,
                     const std::string& device, const std::vector<DataSet>& sets,
                     const npu::compiler::OnnxModelInfo& info,
                     std::vector<std::vector<Tensor>>* outputs, Report* report) {
  namespace rt = npu::runtime;
  rt::RuntimeOptions ropts;
  ropts.device = device;
  NPU_ASSIGN_OR_RETURN(std::shared_ptr<rt::Runtime> runtime, rt::Runtime::open(ropts));
  const uint32_t dim = runtime->device(0)->info().array_dim;
  if (dim != npu::hw::kDefaultArrayDim) {
    NPU_ASSIGN_OR_RETURN(image, compile(model_path, sets, info, dim));
  }
  NPU_ASSIGN_OR_RETURN(std::shared_ptr<const rt::Model> model,
                       rt::Model::from_bytes(std::move(image), model_path));
  report->host_ops = model->host_steps();
  report->npu_ops = info.nodes > report->host_ops ? info.nodes - report->host_ops : 0;
  NPU_ASSIGN_OR_RETURN(std::unique_ptr<rt::Session> session, rt::Session::create(runtime, model));
  for (const DataSet& ds : sets) {
    auto out = session->run(ds.inputs);
    if (!out.is_ok()) return Status(out.status().code(), ds.name + ": " + out.status().message());
    outputs->push_back(std::move(out->tensors));
  }
  return Status::ok();
}

Report run(const TestDataOptions& o) {
  Report r;
  const fs::path dir(o.dir), model = dir / "model.onnx";
  std::error_code ec;
  if (!fs::is_regular_file(model, ec)) {
    r.message = model.string() + ": no such file; give an ONNX backend test directory";
    return r;
  }
  auto info = npu::compiler::inspect_onnx(model.string());
  if (!info.is_ok()) {
    if (info.status().code() == StatusCode::kUnsupported) r.verdict = Verdict::kUnsupported;
    r.message = info.status().message();
    return r;
  }
  auto sets = read_data_sets(dir, info->inputs.size(), info->outputs.size());
  if (!sets.is_ok()) {
    if (sets.status().code() == StatusCode::kUnsupported) r.verdict = Verdict::kUnsupported;
    r.message = sets.status().message();
    return r;
  }
  for (const DataSet& ds : *sets) {
    // Inputs that contradict the model are the test's fault; they never reach the compiler.
    auto match = npu::compiler::match_inputs(*info, ds.inputs);
    if (!match.is_ok()) {
      r.message = ds.name + ": " + match.status().message();
      return r;
    }
  }
  std::printf("test    %s (%zu operator(s), %zu data set(s))\n", o.dir.c_str(), info->nodes,
              sets->size());

  std::vector<std::vector<Tensor>> actual;
  auto image =
      o.host ? Result<std::vector<uint8_t>>(npu::make_error(StatusCode::kUnsupported, "--host"))
             : compile(model.string(), *sets, *info, npu::hw::kDefaultArrayDim);
  std::string host_reason;
  if (o.host) {
    host_reason = "--host";
  } else if (image.is_ok()) {
    r.path = "npu";
    Status st = run_on_device(model.string(), std::move(image).value(), o.device, *sets, *info,
                              &actual, &r);
    if (st.is_ok()) {
      std::printf(
          "path    NPU image: %zu operator(s) on the NPU (or folded by the compiler), %zu on the "
          "host\n",
          r.npu_ops, r.host_ops);
    } else if (st.code() == StatusCode::kUnsupported) {
      host_reason = "the runtime cannot run the compiled image: " + st.message();
    } else {
      r.message = "NPU path: " + st.to_string();
      return r;
    }
  } else if (image.status().code() == StatusCode::kUnsupported) {
    host_reason = "the compiler says: " + image.status().message();
  } else {
    r.message = "compiler: " + image.status().to_string();
    return r;
  }
  if (!host_reason.empty()) {
    // Until the compiler partitions every graph and the runtime runs every host step, a model
    // the NPU path cannot take runs entirely on the host-op interpreter.
    r.path = "host";
    r.npu_ops = 0;
    actual.clear();
    for (const DataSet& ds : *sets) {
      auto run = npu::compiler::run_onnx_on_host(model.string(), ds.inputs);
      if (!run.is_ok()) {
        r.verdict = run.status().code() == StatusCode::kUnsupported ? Verdict::kUnsupported
                                                                    : Verdict::kFail;
        r.message = run.status().message();
        if (r.verdict == Verdict::kUnsupported) r.path = "none";
        return r;
      }
      r.host_ops = run->ops;
      actual.push_back(std::move(run->outputs));
    }
    std::printf("path    host fallback: all %zu operator(s) on the host, none on the NPU (%s)\n",
                r.host_ops, host_reason.c_str());
  }
  // Outputs computed downstream of NPU segments carry quantisation noise: SQNR. Outputs of a
  // host-only run: element-wise tolerance.
  const bool npu_path = r.npu_ops > 0;

  bool all_ok = true;
  for (size_t s = 0; s < sets->size(); ++s) {
    const DataSet& ds = (*sets)[s];
    if (actual[s].size() != ds.outputs.size()) {
      r.message = ds.name + ": the model produced " + std::to_string(actual[s].size()) +
                  " output(s), the test expects " + std::to_string(ds.outputs.size());
      return r;
    }
    for (size_t k = 0; k < ds.outputs.size(); ++k) {
      std::string metric, detail;
      const bool ok = check_output(ds.outputs[k], actual[s][k], npu_path, &metric, &detail);
      if (std::find(r.metrics.begin(), r.metrics.end(), metric) == r.metrics.end())
        r.metrics.push_back(metric);
      std::printf("output  %s/%zu '%s' %s: %s, %s\n", ds.name.c_str(), k, info->outputs[k].c_str(),
                  describe(ds.outputs[k]).c_str(), detail.c_str(), ok ? "ok" : "MISMATCH");
      if (!ok) {
        std::printf("        expected %s\n        actual   %s\n",
                    first_values(ds.outputs[k], 8).c_str(), first_values(actual[s][k], 8).c_str());
        if (all_ok)
          r.message =
              ds.name + " output " + std::to_string(k) + " '" + info->outputs[k] + "': " + detail;
        all_ok = false;
      }
    }
  }
  r.verdict = all_ok ? Verdict::kPass : Verdict::kFail;
  return r;
}

}  // namespace

int test_data_main(const TestDataOptions& o) {
  const Report r = run(o);
  const char* verdict = r.verdict == Verdict::kPass   ? "pass"
                        : r.verdict == Verdict::kFail ? "fail"
                                                      : "unsupported";
  std::string metric;
  for (const std::string& m : r.metrics) metric += (metric.empty() ? "" : "+") + m;
  if (metric.empty()) metric = "none";
  std::string upper = verdict;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::printf("result  %s (%s)%s%s\n", upper.c_str(), metric.c_str(), r.message.empty() ? "" : ": ",
              r.message.c_str());
  if (o.json) {
    const std::string name =
        fs::path(o.dir).lexically_normal().filename().string().empty()
            ? fs::path(o.dir).lexically_normal().parent_path().filename().string()
            : fs::path(o.dir).lexically_normal().filename().string();
    const nlohmann::json j = {{"test", name},
                              {"result", verdict},
                              {"metric", metric},
                              {"placement", {{"npu_ops", r.npu_ops}, {"host_ops", r.host_ops}}},
                              {"path", r.path},
                              {"message", r.message}};
    std::printf("%s\n", npu::tools::json_line(j).c_str());
  }
  std::fflush(stdout);
  return r.verdict == Verdict::kPass   ? kExitPass
         : r.verdict == Verdict::kFail ? kExitFail
                                       : kExitUnsupported;
}

}  // namespace npu_run
