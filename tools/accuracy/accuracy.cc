#include "npu/accuracy/accuracy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "npu/runtime/api.h"

namespace npu::accuracy {
namespace {

// Sums over all samples of one value: signal and noise powers of the NPU against the float
// value and of the float value rounded onto its grid.
struct Accumulator {
  double signal = 0, noise = 0, grid_noise = 0;
  uint64_t elements = 0, clipped = 0;
  float lo = INFINITY, hi = -INFINITY;
  // Per channel of a feature map (v.shape NCHW): largest |x|, signal and grid noise powers.
  std::vector<float> ch_max;
  std::vector<double> ch_signal, ch_grid_noise;

  void add(std::span<const float> ref, std::span<const float> npu, const ValueAccuracy& v) {
    const bool per_channel = v.shape.size() == 4 && v.shape[1] > 1;
    const size_t channels = per_channel ? static_cast<size_t>(v.shape[1]) : 0;
    const size_t plane = per_channel ? static_cast<size_t>(v.shape[2] * v.shape[3]) : 1;
    if (per_channel && ch_max.size() != channels) {
      ch_max.assign(channels, 0);
      ch_signal.assign(channels, 0);
      ch_grid_noise.assign(channels, 0);
    }
    const float scale = v.scale;
    const int32_t zp = v.zero_point;
    const bool grid = std::isfinite(scale) && scale > 0;
    const bool live = !std::isnan(v.live_lo);
    const double qmin = (v.code_lo - zp) * scale, qmax = (v.code_hi - zp) * scale;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (!std::isfinite(ref[i])) continue;
      lo = std::min(lo, ref[i]);
      hi = std::max(hi, ref[i]);
      const double r = live ? std::clamp(ref[i], v.live_lo, v.live_hi) : ref[i];
      signal += r * r;
      // A host operator's output is float, not saturated: clamp it as the device copy is.
      const double a = npu.empty() ? 0.0 : live ? std::clamp(npu[i], v.live_lo, v.live_hi) : npu[i];
      if (!npu.empty()) noise += (r - a) * (r - a);
      ++elements;
      if (!grid) continue;
      const double q = std::clamp(std::nearbyint(r / scale) + zp, v.code_lo, v.code_hi);
      const double e = r - scale * (q - zp);
      grid_noise += e * e;
      if (per_channel) {
        const size_t c = (i / plane) % channels;
        ch_max[c] = std::max(ch_max[c], static_cast<float>(std::fabs(r)));
        ch_signal[c] += r * r;
        ch_grid_noise[c] += e * e;
      }
      clipped += r < qmin - scale / 2 || r > qmax + scale / 2;
    }
  }
};

double db(double signal, double noise) {
  if (noise == 0) return INFINITY;
  if (signal == 0) return -INFINITY;
  return 10 * std::log10(signal / noise);
}

void finish(ValueAccuracy& v, const Accumulator& a, bool measured) {
  v.lo = a.elements ? a.lo : 0;
  v.hi = a.elements ? a.hi : 0;
  if (measured) v.sqnr_db = db(a.signal, a.noise);
  if (std::isfinite(v.scale)) {
    v.grid_db = db(a.signal, a.grid_noise);
    v.clipped_percent = a.elements ? 100.0 * static_cast<double>(a.clipped) / static_cast<double>(a.elements) : 0;
  }
  if (a.ch_max.empty()) return;
  // The median channel by range, and the median of the channels' grid SQNRs.
  std::vector<float> ranges = a.ch_max;
  std::vector<double> grid;
  for (size_t c = 0; c < a.ch_max.size(); ++c)
    if (a.ch_signal[c] > 0) grid.push_back(db(a.ch_signal[c], a.ch_grid_noise[c]));
  std::nth_element(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(ranges.size() / 2), ranges.end());
  v.channels = ranges.size();
  v.channel_median = ranges[ranges.size() / 2];
  v.channel_widest = *std::max_element(a.ch_max.begin(), a.ch_max.end());
  if (!grid.empty()) {
    std::nth_element(grid.begin(), grid.begin() + static_cast<std::ptrdiff_t>(grid.size() / 2), grid.end());
    v.channel_grid_median_db = grid[grid.size() / 2];
  }
}

// The per-tensor int8 (or wide, int16) grid of a device view, or NaN.
void set_grid(ValueAccuracy& v, const runtime::TensorInfo& info) {
  const bool wide = info.device_dtype == DType::kI16;
  if (!info.on_device || (info.device_dtype != DType::kI8 && !wide) || info.device_quant.scale.size() != 1) return;
  v.scale = info.device_quant.scale[0];
  v.zero_point = info.device_quant.zero_point[0];
  if (wide) {
    v.code_lo = -32768;
    v.code_hi = 32767;
  }
}

Result<std::vector<Tensor>> run_image(runtime::Session& session, const std::vector<Tensor>& sample) {
  NPU_ASSIGN_OR_RETURN(runtime::Outputs out, session.run(sample));
  return std::move(out.tensors);
}

std::string fmt_db(double d) {
  char buf[32];
  if (std::isnan(d)) return "-";
  if (std::isinf(d)) return d > 0 ? "exact" : "-inf";
  std::snprintf(buf, sizeof buf, "%.1f", d);
  return buf;
}

std::string shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

}  // namespace

Result<AccuracyReport> accuracy_report(const std::string& onnx_path, const compiler::CompileOptions& options,
                                       const std::vector<std::vector<Tensor>>& samples, const std::vector<uint8_t>* image,
                                       const std::string& device, const std::string& dump_dir) {
  if (samples.empty())
    return make_error(StatusCode::kInvalidArgument, "accuracy report: no input samples; give --accuracy-inputs DIR or --calib DIR");
  compiler::CompileOptions quiet = options;
  quiet.progress = nullptr;  // the normal compile has said it all
  quiet.export_qdq_path.clear();
  NPU_ASSIGN_OR_RETURN(compiler::ExposedImage exposed, compiler::compile_exposing_values(onnx_path, quiet));
  NPU_ASSIGN_OR_RETURN(auto rt, runtime::Runtime::open(runtime::RuntimeOptions{device, {}}));
  NPU_ASSIGN_OR_RETURN(auto model, runtime::Model::from_bytes(std::move(exposed.bytes), onnx_path));
  NPU_ASSIGN_OR_RETURN(auto session, runtime::Session::create(rt, model));
  std::unique_ptr<runtime::Session> normal;
  if (image) {
    NPU_ASSIGN_OR_RETURN(auto m, runtime::Model::from_bytes(*image, onnx_path));
    NPU_ASSIGN_OR_RETURN(normal, runtime::Session::create(rt, m));
  }
  const size_t model_outputs = model->outputs().size() - exposed.values.size();

  AccuracyReport report;
  report.samples = samples.size();
  report.device = device.empty() ? "default device" : device;
  report.image_compared = image != nullptr;
  for (const auto& in : model->inputs()) {
    ValueAccuracy v;
    v.value = in.name;
    v.layer = "(model input)";
    v.graph_input = true;
    v.shape = in.shape;
    set_grid(v, in);
    report.inputs.push_back(std::move(v));
  }
  for (size_t k = 0; k < model->outputs().size(); ++k) {
    const auto& info = model->outputs()[k];
    ValueAccuracy v;
    v.value = info.name;
    v.shape = info.shape;
    set_grid(v, info);
    if (k >= model_outputs) {
      const compiler::ExposedValue& e = exposed.values[k - model_outputs];
      v.layer = e.layer;
      v.op = e.op;
      v.on_npu = e.on_npu;
      v.inputs = e.inputs;
      v.weight_db = e.weight_sqnr_db;
      v.live_lo = e.live_lo;
      v.live_hi = e.live_hi;
      report.values.push_back(std::move(v));
    } else {
      const compiler::ExposedValue& e = exposed.outputs[k];
      v.layer = e.layer.empty() ? "(model output)" : e.layer;
      v.op = e.op;
      v.on_npu = e.on_npu;
      v.inputs = e.inputs;
      v.weight_db = e.weight_sqnr_db;
      report.outputs.push_back(std::move(v));
    }
  }

  std::vector<Accumulator> in_acc(report.inputs.size()), out_acc(model->outputs().size());
  std::vector<bool> found(model->outputs().size(), false);
  for (size_t s = 0; s < samples.size(); ++s) {
    NPU_ASSIGN_OR_RETURN(auto npu_out, run_image(*session, samples[s]));
    NPU_ASSIGN_OR_RETURN(auto reference, compiler::run_float_model(onnx_path, options.input_shapes, samples[s]));
    std::map<std::string, const Tensor*> by_name;
    for (const auto& [name, t] : reference) by_name.emplace(name, &t);
    for (size_t i = 0; i < report.inputs.size(); ++i) {
      const Tensor f = to_float(samples[s][i]);
      in_acc[i].add(f.as<float>(), {}, report.inputs[i]);
    }
    for (size_t k = 0; k < npu_out.size(); ++k) {
      ValueAccuracy& v = k < model_outputs ? report.outputs[k] : report.values[k - model_outputs];
      auto it = by_name.find(v.value);
      if (it == by_name.end() || npu_out[k].dtype != DType::kF32 ||
          it->second->element_count() != npu_out[k].element_count())
        continue;
      found[k] = true;
      if (s == 0 && !dump_dir.empty()) {
        std::string file = (k < model_outputs ? "out" + std::to_string(k) : std::to_string(k - model_outputs)) + "_" + v.value;
        for (char& c : file)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
        NPU_RETURN_IF_ERROR(write_npy(dump_dir + "/" + file + ".npu.npy", npu_out[k]));
        Tensor ref = *it->second;
        ref.shape = npu_out[k].shape;
        NPU_RETURN_IF_ERROR(write_npy(dump_dir + "/" + file + ".float.npy", ref));
      }
      out_acc[k].add(it->second->as<float>(), npu_out[k].as<float>(), v);
    }
    if (normal) {
      NPU_ASSIGN_OR_RETURN(auto image_out, run_image(*normal, samples[s]));
      for (size_t k = 0; k < image_out.size() && k < model_outputs; ++k)
        if (image_out[k].data != npu_out[k].data) report.image_outputs_identical = false;
    }
  }
  for (size_t i = 0; i < report.inputs.size(); ++i) {
    finish(report.inputs[i], in_acc[i], false);
    report.inputs[i].sqnr_db = report.inputs[i].grid_db;  // what the device receives
  }
  for (size_t k = 0; k < out_acc.size(); ++k)
    finish(k < model_outputs ? report.outputs[k] : report.values[k - model_outputs], out_acc[k], found[k]);

  // Drops: against the worst input that has a row (model inputs, exposed values; a model
  // output is also a value some layer computed).
  std::map<std::string, double> known;
  for (const auto& v : report.inputs) known[v.value] = v.sqnr_db;
  auto drop_of = [&](ValueAccuracy& v) {
    double worst = INFINITY;
    bool any = false;
    for (const auto& in : v.inputs)
      if (auto it = known.find(in); it != known.end() && !std::isnan(it->second)) {
        if (!any || it->second < worst) v.worst_input = in;
        worst = std::min(worst, it->second);
        any = true;
      }
    if (any && !std::isnan(v.sqnr_db)) v.drop_db = std::isinf(worst) && std::isinf(v.sqnr_db) ? 0 : worst - v.sqnr_db;
    known[v.value] = v.sqnr_db;
  };
  // Execution order puts a model output after the values it reads, except for an output that
  // another layer reads as well: then its readers' drops are against it before it has a row.
  for (auto& v : report.outputs) known[v.value] = v.sqnr_db;
  for (auto& v : report.values) drop_of(v);
  for (auto& v : report.outputs) drop_of(v);
  return report;
}

std::string likely_cause(const ValueAccuracy& v) {
  if (std::isnan(v.drop_db) || v.drop_db < 1) return "";
  if (!v.on_npu) return "host operator (float): inherits its inputs' error";
  // Noise powers relative to the signal: what this layer added, and what its output grid
  // (rounding and clipping at its scale) and its int8 weights add on their own. The larger
  // of the two explains the drop when it accounts for at least half of what was added.
  auto power = [](double db) { return std::isfinite(db) ? std::pow(10.0, -db / 10) : 0.0; };
  const double added = power(v.sqnr_db) - power(v.sqnr_db + v.drop_db);
  const double grid = power(v.grid_db), weights = power(v.weight_db);
  if (std::max(grid, weights) >= added / 2) {
    if (weights > grid) return "int8 weights (" + fmt_db(v.weight_db) + " dB)";
    if (v.clipped_percent > 0.01) {
      char pct[32];
      std::snprintf(pct, sizeof pct, "%.2g", v.clipped_percent);
      return "output range clips " + std::string(pct) + "% of the values (grid " + fmt_db(v.grid_db) + " dB)";
    }
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.3g", v.scale);
    return "output grid too coarse (" + fmt_db(v.grid_db) + " dB at scale " + scale + ")";
  }
  return "the layer's arithmetic or its inputs' noise amplified (tables, requantisation, weights)";
}

std::string channel_spread_note(const ValueAccuracy& v) {
  if (v.channels < 2 || !(v.channel_median > 0) || v.channel_widest < 8 * v.channel_median) return "";
  char note[160];
  std::snprintf(note, sizeof note, "channel ranges %.0fx apart (widest %.3g, median %.3g)", v.channel_widest / v.channel_median,
                v.channel_widest, v.channel_median);
  std::string out = note;
  if (!std::isnan(v.channel_grid_median_db))
    out += ": the median channel is at " + fmt_db(v.channel_grid_median_db) + " dB on the per-tensor grid";
  return out;
}

std::string format_report(const AccuracyReport& report, size_t worst, double mark_db) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "accuracy report: %zu sample(s) on %s; float = the compiler's reference interpreter\n"
                "  SQNR: NPU value against the float value; drop: worst input's SQNR minus this one;\n"
                "  grid: the float value rounded onto its own grid (int8, or int16 for a wide value; the best\n"
                "  this scale allows);\n"
                "  a value marked * only feeds lookup tables and is compared where they are not flat\n",
                report.samples, report.device.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-4s %-32s %-34s %-4s %8s %8s %8s %7s %8s  %s\n", "#", "value", "layer (op)", "on",
                "SQNR dB", "drop dB", "grid dB", "clip %", "wgt dB", "float range");
  out += line;
  auto row = [&](const std::string& idx, const ValueAccuracy& v) {
    const std::string layer = v.graph_input ? v.layer : v.layer + " (" + v.op + ")";
    char clip[16];
    std::snprintf(clip, sizeof clip, "%.2f", v.clipped_percent);
    std::snprintf(line, sizeof line, "%-4s %-32s %-34s %-4s %8s %8s %8s %7s %8s  [%.3g, %.3g]%s\n", idx.c_str(),
                  shorten(std::isnan(v.live_lo) ? v.value : v.value + "*", 32).c_str(), shorten(layer, 34).c_str(), v.graph_input ? "" : v.on_npu ? "npu" : "host",
                  fmt_db(v.sqnr_db).c_str(), fmt_db(v.drop_db).c_str(), fmt_db(v.grid_db).c_str(),
                  std::isfinite(v.scale) ? clip : "-", fmt_db(v.weight_db).c_str(), v.lo, v.hi,
                  !std::isnan(v.drop_db) && v.drop_db >= mark_db ? "  <<" : "");
    out += line;
  };
  for (const auto& v : report.inputs) row("in", v);
  for (size_t i = 0; i < report.values.size(); ++i) row(std::to_string(i), report.values[i]);
  for (const auto& v : report.outputs) row("out", v);

  std::vector<size_t> order(report.values.size());
  std::iota(order.begin(), order.end(), 0);
  order.erase(std::remove_if(order.begin(), order.end(),
                             [&](size_t i) { return std::isnan(report.values[i].drop_db); }),
              order.end());
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return report.values[a].drop_db > report.values[b].drop_db; });
  if (order.size() > worst) order.resize(worst);
  out += "model outputs:";
  for (const auto& v : report.outputs) out += " '" + v.value + "' " + fmt_db(v.sqnr_db) + " dB";
  out += "\nworst layers (largest SQNR drop):\n";
  std::map<std::string, const ValueAccuracy*> by_value;
  for (const auto* list : {&report.inputs, &report.values, &report.outputs})
    for (const auto& v : *list) by_value.emplace(v.value, &v);
  for (size_t i : order) {
    const ValueAccuracy& v = report.values[i];
    std::snprintf(line, sizeof line, "  #%zu %s (%s): %s dB -> %s dB (drop %s dB)%s%s", i, v.layer.c_str(),
                  v.op.c_str(), fmt_db(v.sqnr_db + v.drop_db).c_str(), fmt_db(v.sqnr_db).c_str(),
                  fmt_db(v.drop_db).c_str(), likely_cause(v).empty() ? "" : ": ", likely_cause(v).c_str());
    out += line;
    // A per-tensor grid over channels of very different ranges: on the value itself, or on
    // the input whose error this layer carried on (the one its drop is measured against).
    std::string note = channel_spread_note(v);
    if (auto it = by_value.find(v.worst_input); note.empty() && it != by_value.end())
      if (const std::string in_note = channel_spread_note(*it->second); !in_note.empty())
        note = "its input '" + v.worst_input + "' has " + in_note;
    if (!note.empty()) out += "; " + note;
    out += "\n";
  }
  if (report.image_compared)
    out += report.image_outputs_identical
               ? "the exposing image's model outputs equal the image's bit for bit on every sample\n"
               : "WARNING: the exposing image's model outputs differ from the image's (please report this bug)\n";
  return out;
}

}  // namespace npu::accuracy
