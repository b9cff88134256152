// npu-compile's pipeline as named passes with named products (private to the compiler):
//
//   load_graph         ONNX file, calibration samples          -> LoadedGraph
//   rewrite_patterns   QDQ/integer operators, folds, rewrites  -> PatternedGraph
//   calibrate_graph    float reference over the samples        -> CalibratedGraph (ranges)
//   partition_graph    NPU layers and host operators           -> Partition
//   plan_quantisation  int8 parameters and device layouts      -> QuantPlan
//   round_weights      (--weight-rounding gptq) conv weights rounded with error feedback
//   correct_biases     (--bias-correction) conv biases absorb their input grid's mean error
//   check_int32_outputs  bound int32 outputs are exact accumulators
//   export_qdq         (--export-qdq) the quantised graph as a QDQ ONNX model
//   plan_memory        activation-buffer offsets by value lifetime -> MemoryPlan
//   lower_segments     command streams and weights per NPU segment -> LoweredModel
//   predict_cycles     each segment once on the functional model (fills LoweredModel's cycles)
//   check_device_values  bound values on their grids, finite scales
//   write_image        the FlatBuffers model image, verified as the runtime verifies it
//
// compile_model (compiler.cc) calls them in this order. Each pass takes the products it needs
// and returns its own; a pass that refines a graph takes the previous product by value and
// moves its graph on. Errors keep the stage prefix npu-compile prints ("model: ",
// "calibration: ", ...; in_stage). Progress lines go to `say` (CompileOptions::progress).
// Single-threaded; nothing here is shared between compilations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir.h"
#include "lower.h"
#include "npu/compiler/compiler.h"
#include "partition.h"
#include "program.h"
#include "qdq.h"

namespace npu::compiler {

// A progress line; never null (compile_model's forwards to CompileOptions::progress if set).
using Say = std::function<void(const std::string&)>;

// Prefixes a stage name ("model", "calibration", ...) to an error that has none.
bool has_stage(const std::string& message);
Status in_stage(const char* stage, Status s);
template <typename T>
Result<T> in_stage(const char* stage, Result<T> r) {
  if (r.is_ok()) return r;
  return in_stage(stage, r.status());
}

// The alignment of every value in the activation buffer and of the weights blob's size.
constexpr uint64_t kAlign = 64;
inline uint64_t align_up(uint64_t v, uint64_t a = kAlign) { return (v + a - 1) / a * a; }

// Element strides of a dense row-major tensor of `shape`.
std::vector<int64_t> dense_strides(const std::vector<int64_t>& shape);

// load_graph: the ONNX graph, its calibration samples (CompileOptions::calibration or
// ::calibration_dir, possibly none yet) and the graph inputs that are quantisation parameters
// held constant at their calibration value. rewrite_patterns needs those constant before the
// QDQ passes run.
struct LoadedGraph {
  Graph graph;
  std::vector<std::vector<Tensor>> samples;            // one vector of inputs per sample
  std::vector<std::pair<size_t, Tensor>> specialized;  // (graph input index, its value)
};
Result<LoadedGraph> load_graph(const std::string& onnx_path, const CompileOptions& options, const Say& say);

// rewrite_patterns: QLinear/integer operators expanded, QDQ pairs folded into declared
// quantisation, integer I/O bound to device views (`bind_io`; the samples of bound inputs are
// then the reals their codes stand for), constants and BatchNorms folded, residual gates as one
// Mul. The graph calibrate_graph runs the reference on.
struct PatternedGraph {
  Graph graph;
  std::vector<std::vector<Tensor>> samples;
  std::vector<std::pair<size_t, Tensor>> specialized;
};
Result<PatternedGraph> rewrite_patterns(LoadedGraph loaded, bool bind_io, const Say& say);

// calibrate_graph: every value's calibrated range (and, through the reference run, its static
// shape), on the given samples or on deterministic random ones; shape operands specialised
// to their calibration value, shape chains folded and last-axis ReduceMeans as MatMuls (both
// need the static shapes). `samples` are the ones calibrated on (bias correction reuses them).
struct CalibratedGraph {
  Graph graph;
  std::vector<std::vector<Tensor>> samples;
  std::vector<std::pair<size_t, Tensor>> specialized;
  ValueRanges ranges;  // value -> [lo, hi] over the samples
};
Result<CalibratedGraph> calibrate_graph(PatternedGraph patterned, const CompileOptions& options, const Say& say);

// partition_graph: the steps in execution order (NPU segments of layers, host operators).
// Refuses (kUnsupported, the reason in *io_refused) a host operator that touches a bound
// value. Narrows the ranges of values only lookup tables read (in `graph.ranges`), and with
// `exposed` makes every computed value an image output (expose_values).
struct Partition {
  std::vector<PartitionStep> steps;
  size_t npu_layers = 0, host_ops = 0;
  // The model's own outputs (g.outputs before an accuracy report exposes more): the choices
  // that depend on being an output (wide values) must not change with the exposure.
  std::vector<int> model_outputs;
};
Result<Partition> partition_graph(CalibratedGraph& graph, uint32_t N, const Say& say, std::string* io_refused,
                                  ExposedImage* exposed);

// plan_quantisation: the int8 (or int32) parameters of every value an NPU layer reads or
// writes, and the device layout of each value the device holds. plan_memory places
// `on_device` (sizes in `bytes`); lower_segments reads qp, strides, dense, bias_spread;
// write_image describes the views (strides, per_axis, int32).
struct QuantPlan {
  std::map<int, QParams> qp;                        // per-tensor parameters (placeholder for per_axis)
  std::set<int> on_device;                          // values with a view in the activation buffer
  std::map<int, std::vector<int64_t>> strides;      // byte strides in the float shape's order
  std::map<int, uint64_t> bytes;                    // bytes each device value's view spans
  std::set<int> int32_values;                       // int32 elements (accumulators, dynamic biases)
  std::map<int, int32_t> bias_spread;               // one-element Gemm biases: spreading factor k
  std::map<int, DeclaredQuant> per_axis;            // device views with per-axis quantisation
  std::map<int, int> alias;                         // views: output -> input whose bytes it is
  std::set<int> dense;                              // dense NHWC values (tap-folding conv inputs)
  // Wide values (ISA 1.4, docs/architecture.md 1.4.3): int16 codes on the 8.8 refinement of
  // qp (two bytes per element; strides and bytes above count them). Stored: conv outputs
  // that only convs read. Fused tables' inputs in `wide_lut`: the scratchpad only.
  std::set<int> wide, wide_lut;
};
// `wide_activations`: give conv outputs and fused activation inputs 16-bit codes where the
// layers that write and read them can (CompileOptions::wide_activations).
QuantPlan plan_quantisation(const Graph& g, const Partition& partition, ValueRanges& ranges, uint32_t N,
                            const Say& say, bool wide_activations = false);

// --bias-correction: the partition's conv biases absorb the mean error of their input's int8
// grid (on the calibration samples).
// --weight-rounding gptq: error-feedback rounding of constant conv weights (weight_rounding.h).
Status round_weights(const Graph& g, Partition& partition, const std::vector<std::vector<Tensor>>& samples,
                     const Say& say);
Status correct_biases(const Graph& g, Partition& partition, const QuantPlan& quant,
                      const std::vector<std::vector<Tensor>>& samples, const Say& say);

// An int32 graph output (ConvInteger/MatMulInteger) must be the exact accumulators of a layer
// over the model's own codes; else kUnsupported with the reason in *io_refused.
Status check_int32_outputs(const Graph& g, const Partition& partition, QuantPlan& quant, std::string* io_refused);

// --export-qdq: writes the graph with the plan's quantisation as a QDQ ONNX model to `path`.
Status export_qdq(const Graph& g, const Partition& partition, const QuantPlan& quant, const std::string& path,
                  const Say& say);

// plan_memory: each device value's offset in the activation buffer. A value lives from its
// first to its last use in layer order (graph inputs from the start, graph outputs to the end,
// values a segment exchanges with the host for that whole segment); values whose lives do not
// overlap share bytes, a view shares its input's.
struct MemoryPlan {
  std::map<int, uint64_t> offset;  // every QuantPlan::on_device value
  uint64_t bytes = 0;              // activation buffer size (at least one alignment unit)
};
MemoryPlan plan_memory(const Graph& g, const Partition& partition, QuantPlan& quant, const Say& say);

// One compiled NPU segment before serialisation.
struct Segment {
  Program prog;
  std::vector<LayerFacts> facts;
  std::vector<std::pair<std::string, std::string>> layers;  // name, op
  std::vector<uint32_t> layer_end;  // instruction count after each layer
  std::vector<uint64_t> layer_cycles;
  uint64_t cycles = 0;
  std::vector<int> inputs, outputs;  // graph values exchanged with the host side
};

// lower_segments: one Segment per NPU step of the partition (in order), the weights blob
// they all address, and the values the host side handles (graph I/O, host operands, values
// crossing between segments and the host). Segment outputs are filtered to host-side values
// by predict_cycles. `quant` and `memory` are taken mutable because lookups may add entries
// (std::map::operator[]), which the image then describes; keep it so.
struct LoweredModel {
  std::vector<uint8_t> weights;
  std::vector<Segment> segments;
  std::set<int> host_side;
};
Result<LoweredModel> lower_segments(const Graph& g, const Partition& partition, QuantPlan& quant, MemoryPlan& memory,
                                    uint32_t N, const Say& say);

// Runs one segment once on the functional model with zero data: predicted cycles, per layer.
Status predict_cycles(Segment& seg, const std::vector<uint8_t>& weights, uint64_t act_bytes, uint32_t N);
// Every segment of `lowered` (an empty stream gets a NOP), and its outputs filtered to the
// host side.
Status predict_cycles(LoweredModel& lowered, const MemoryPlan& memory, uint32_t N, const Say& say);

// A bound value is held on the device with its own codes (else kUnsupported, the reason in
// *io_refused); every device value has a finite int8 scale (else a "calibration: " error).
Status check_device_values(const Graph& g, QuantPlan& quant, const MemoryPlan& memory, ValueRanges& ranges,
                           std::string* io_refused);

// write_image: the sealed model image, verified exactly as the runtime verifies it.
Result<std::vector<uint8_t>> write_image(const std::string& onnx_path, uint32_t N, const Graph& g,
                                         const std::vector<std::pair<size_t, Tensor>>& specialized,
                                         const Partition& partition, QuantPlan& quant, MemoryPlan& memory,
                                         const LoweredModel& lowered, const Say& say);

}  // namespace npu::compiler
