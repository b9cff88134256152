// The graph passes: load_graph, rewrite_patterns, calibrate_graph (pipeline.h).
#include <algorithm>
#include <random>

#include "calibration.h"
#include "lower.h"
#include "passes.h"
#include "pipeline.h"

namespace npu::compiler {
namespace {

std::vector<std::vector<Tensor>> random_samples(const Graph& g, size_t count) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<Tensor>> samples(count);
  for (auto& sample : samples)
    for (int in : g.inputs) {
      Tensor t = Tensor::zeros(DType::kF32, g.value(in).shape);
      for (auto& v : t.as<float>()) v = dist(rng);
      sample.push_back(std::move(t));
    }
  return samples;
}

// A graph input read only at operand slots that `slot_is_parameter(node, slot)` accepts, and
// holding the same value in every calibration sample, becomes a constant of the graph; the
// image records the value (SpecializedInput) and the runtime rejects a request with any other
// by the input's name. Returns (input index, value) pairs.
template <typename SlotPredicate>
std::vector<std::pair<size_t, Tensor>> specialize_inputs(Graph& g, const std::vector<std::vector<Tensor>>& samples,
                                                         SlotPredicate slot_is_parameter) {
  std::vector<std::pair<size_t, Tensor>> out;
  if (samples.empty()) return out;
  auto parameter_only = [&](int v) {
    bool used = false;
    for (const Node& n : g.nodes)
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] != v) continue;
        if (!slot_is_parameter(n, k)) return false;
        used = true;
      }
    return used && std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end();
  };
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const int v = g.inputs[i];
    if (g.is_constant(v) || !parameter_only(v)) continue;
    const bool same = std::all_of(samples.begin(), samples.end(), [&](const std::vector<Tensor>& sample) {
      return sample.size() == g.inputs.size() && sample[i].dtype == samples[0][i].dtype &&
             sample[i].shape == samples[0][i].shape && sample[i].data == samples[0][i].data;
    });
    if (!same) continue;
    g.value(v).constant = samples[0][i];
    out.emplace_back(i, samples[0][i]);
  }
  return out;
}

// Shape operands (Reshape's shape, Resize's roi/scales/sizes) fix the shapes the image is
// compiled for.
bool is_shape_operand(const Node& n, size_t k) {
  return (n.op == "Reshape" && k == 1) || (n.op == "Resize" && k >= 1) || (n.op == "Upsample" && k == 1);
}

// Quantisation parameters (scales, zero points) and the integer filters and biases of the
// quantised convolutions are parameters of the operator: specialised, they become constants
// before expand_qlinear/fold_qdq, so the operator is lowered with the model's own
// quantisation. The second operand of an integer matmul is deliberately not among them: a
// MatMul B fed as an input is a run-time operand (attention's K, V) that a user expects to
// vary, not a parameter to freeze.
bool is_quant_parameter(const Node& n, size_t k) {
  if (n.op == "QuantizeLinear" || n.op == "DequantizeLinear") return k == 1 || k == 2;
  if (n.op == "QLinearConv") return k >= 1;  // x_scale .. y_zero_point, w (3), B (8)
  if (n.op == "QLinearMatMul") return k != 0 && k != 3;
  if (n.op == "ConvInteger") return k >= 1;  // w (1), x_zero_point (2), w_zero_point (3)
  if (n.op == "MatMulInteger") return k == 2 || k == 3;
  return false;
}

// The float reference run holds every value of a sample at once (float32); past this the
// compiler refuses instead of swapping or being killed.
constexpr uint64_t kMaxReferenceBytes = 8ull << 30;
// Above this, the layers are lowered once on placeholder quantisation before calibration, so
// that a layer that can never fit the scratchpads is named in seconds, not after minutes of
// reference runs. Below it calibration is quick and the check would only cost time.
constexpr uint64_t kEarlyFitCheckBytes = 64ull << 20;

// Sizes, memory needs and scratchpad fit, before calibration runs the reference.
// `input_copies`: the calibration samples still to be made (each holds every input).
Status check_before_calibration(const Graph& g, uint32_t N, uint64_t input_copies) {
  uint64_t total = 0, largest = 0;
  int largest_value = -1;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const auto& shape = g.values[v].shape;
    if (shape.empty() || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
      continue;
    uint64_t bytes = 4;
    for (int64_t d : shape)
      bytes = std::min<uint64_t>(bytes * static_cast<uint64_t>(d), kMaxReferenceBytes + 1);
    const bool input =
        std::find(g.inputs.begin(), g.inputs.end(), static_cast<int>(v)) != g.inputs.end();
    total = std::min(total + bytes * (input ? 1 + input_copies : 1), kMaxReferenceBytes + 1);
    if (bytes > largest) {
      largest = bytes;
      largest_value = static_cast<int>(v);
    }
  }
  if (total > kMaxReferenceBytes)
    return make_error(StatusCode::kResourceExhausted,
                      "calibration: the float reference run and its samples would need more than " +
                          std::to_string(kMaxReferenceBytes >> 30) + " GiB (largest value '" +
                          g.values[static_cast<size_t>(largest_value)].name + "' " +
                          shape_to_string(g.values[static_cast<size_t>(largest_value)].shape) +
                          "); give smaller input shapes with --input-shape");
  if (total < kEarlyFitCheckBytes) return Status::ok();
  const QParams placeholder{1.0f, 0};
  for (const PartitionStep& step : partition(g, N))
    for (const NpuLayer& op : step.ops) {
      // Constant-weight GEMMs and convolutions: whether they fit does not depend on the
      // quantisation. Tap-folding convolutions have their own lowering; they are checked
      // where they are lowered.
      Program prog;
      std::vector<uint8_t> weights;
      Result<LayerFacts> facts = LayerFacts{};
      if (const auto* fc = std::get_if<FcLayer>(&op); fc && fc->weight_input < 0)
        facts = lower_fc_layer(*fc, placeholder, placeholder, N, 0, 0, weights, prog);
      else if (const auto* c = std::get_if<ConvLayer>(&op);
               c && c->weight_input < 0 && !conv_folds_taps(*c, N))
        facts = lower_conv_layer(*c, placeholder, placeholder, N, 0, 0, weights, prog, {}, placeholder);
      if (!facts.is_ok() && facts.status().code() == StatusCode::kUnsupported)
        return Status(
            StatusCode::kUnsupported,
            "model: " + facts.status().message() +
                " (found before calibration; give smaller input shapes with --input-shape)");
    }
  return Status::ok();
}

}  // namespace

Result<LoadedGraph> load_graph(const std::string& onnx_path, const CompileOptions& options, const Say& say) {
  say("loading " + onnx_path);
  NPU_ASSIGN_OR_RETURN(Graph g, in_stage("model", load_onnx(onnx_path, options.input_shapes)));
  for (const std::string& note : g.notes) say("note: " + note);
  // Calibration samples are read first: quantisation parameters fed as inputs are
  // specialised to their calibration value before the QDQ passes need them constant.
  std::vector<std::vector<Tensor>> samples = options.calibration;
  if (samples.empty() && !options.calibration_dir.empty()) {
    NPU_ASSIGN_OR_RETURN(
        samples,
        in_stage("calibration", read_calibration_dir(options.calibration_dir, g.inputs.size())));
  }
  std::vector<std::pair<size_t, Tensor>> specialized = specialize_inputs(g, samples, is_quant_parameter);
  for (const auto& [i, t] : specialized)
    say("input '" + g.value(g.inputs[i]).name + "' is a quantisation parameter: compiled for its calibration value only");
  return LoadedGraph{std::move(g), std::move(samples), std::move(specialized)};
}

Result<PatternedGraph> rewrite_patterns(LoadedGraph loaded, bool bind_io, const Say& say) {
  Graph& g = loaded.graph;
  std::vector<std::vector<Tensor>>& samples = loaded.samples;
  // Before constant folding, which would turn dequantised weights into plain floats.
  int qlinear = 0;
  // A run-time B and the integer GEMM operators are exact on the NPU only with their codes
  // bound to the device (bind_io); without binding they stay host operators.
  NPU_RETURN_IF_ERROR(expand_qlinear(g, &qlinear, bind_io));
  if (qlinear) say("rewrote " + std::to_string(qlinear) + " QLinearConv/QLinearMatMul node(s) as DequantizeLinear -> op -> QuantizeLinear");
  if (bind_io) {
    int integer_ops = 0;
    std::vector<std::string> notes;
    NPU_RETURN_IF_ERROR(expand_integer_ops(g, &integer_ops, &notes));
    if (integer_ops)
      say("rewrote " + std::to_string(integer_ops) + " ConvInteger/MatMulInteger node(s) as DequantizeLinear -> Conv/MatMul with an int32 output");
    for (const std::string& note : notes) say("note: " + note);
  }
  QdqSummary qdq;
  NPU_RETURN_IF_ERROR(fold_qdq(g, &qdq));
  if (qdq.activation_pairs || qdq.weights)
    say("quantised model: " + std::to_string(qdq.activation_pairs) + " QuantizeLinear/DequantizeLinear pair(s) and " +
        std::to_string(qdq.weights) + " quantised weight(s) keep the model's scales and zero points");
  for (const std::string& note : qdq.notes) say("note: " + note + " (left as a graph node)");
  int integer_io = 0;
  if (bind_io) NPU_RETURN_IF_ERROR(bind_integer_io(g, &integer_io));
  if (integer_io) {
    say(std::to_string(integer_io) + " integer graph input(s)/output(s) bound to int8 device views");
    // The graph now reads those inputs as the reals their codes stand for.
    for (auto& sample : samples)
      for (size_t i = 0; i < g.inputs.size() && i < sample.size(); ++i) {
        const Value& in = g.value(g.inputs[i]);
        if (!in.io_codes || sample[i].dtype != *in.io_codes) continue;
        const Tensor codes = to_float(sample[i]);  // the user's codes as floats (uint8 unshifted)
        Tensor real = Tensor::zeros(DType::kF32, codes.shape);
        const float shift = *in.io_codes == DType::kU8 ? -128.0f : 0.0f;
        for (size_t k = 0; k < real.as<float>().size(); ++k)
          real.as<float>()[k] =
              in.quant->scale[0] * (codes.as<float>()[k] + shift - static_cast<float>(in.quant->zero_point[0]));
        sample[i] = std::move(real);
      }
  }
  int folded_constants = 0, folded_bn = 0, swapped = 0;
  NPU_RETURN_IF_ERROR(fold_constants(g, &folded_constants));
  NPU_RETURN_IF_ERROR(canonicalize_commutative(g, &swapped));
  NPU_RETURN_IF_ERROR(fold_batchnorm(g, &folded_bn));
  if (folded_constants || folded_bn)
    say("folded " + std::to_string(folded_constants) + " constant node(s), and " + std::to_string(folded_bn) +
        " BatchNormalization/Mul/Add node(s) into convolutions");
  int gates = 0;
  NPU_RETURN_IF_ERROR(residual_gate_as_mul(g, &gates));
  if (gates) say("rewrote " + std::to_string(gates) + " residual gate(s) x + x*s as x*(s + 1)");
  return PatternedGraph{std::move(g), std::move(samples), std::move(loaded.specialized)};
}

Result<CalibratedGraph> calibrate_graph(PatternedGraph patterned, const CompileOptions& options, const Say& say) {
  const uint32_t N = options.array_dim;
  Graph& g = patterned.graph;
  std::vector<std::vector<Tensor>>& samples = patterned.samples;
  std::vector<std::pair<size_t, Tensor>>& specialized = patterned.specialized;
  // Calibration: the float reference over every sample gives each value's range and shape
  // (and checks that every operator has a host kernel).
  constexpr size_t kRandomSamples = 8;
  NPU_RETURN_IF_ERROR(check_before_calibration(g, N, samples.empty() ? kRandomSamples : 0));
  if (samples.empty()) {
    samples = random_samples(g, kRandomSamples);
    say("warning: no calibration data; calibrating on 8 deterministic N(0,1) samples. Pass --calib DIR for accuracy on real data");
  }
  NPU_ASSIGN_OR_RETURN(ValueRanges ranges, in_stage("calibration", calibrate(g, samples, options.calibration_method)));
  say("calibrated on " + std::to_string(samples.size()) + " sample(s) (" + calibration_method_name(options.calibration_method) + ")");
  for (const auto& [i, t] : specialize_inputs(g, samples, is_shape_operand)) {
    say("input '" + g.value(g.inputs[i]).name + "' is a shape operand: compiled for its calibration value only");
    specialized.emplace_back(i, t);
  }

  // The reference run gave every value its static shape, so Shape nodes of values that shape
  // inference left unknown (behind a Reshape whose shape a Shape/Slice/Concat chain
  // computes) fold now, and with them the rest of such chains.
  {
    int refolded = 0;
    NPU_RETURN_IF_ERROR(fold_constants(g, &refolded));
    if (refolded) say("folded " + std::to_string(refolded) + " shape-chain node(s) of calibrated static shapes");
    int means = 0;
    NPU_RETURN_IF_ERROR(reduce_mean_as_matmul(g, &means));
    if (means) say(std::to_string(means) + " last-axis ReduceMean(s) as MatMuls by 1/C (LayerNorm statistics on the MAC array)");
  }
  return CalibratedGraph{std::move(g), std::move(samples), std::move(specialized), std::move(ranges)};
}

}  // namespace npu::compiler
