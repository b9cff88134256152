// partition_graph (pipeline.h): NPU layers and host operators.
#include "calibration.h"
#include "expose.h"
#include "pipeline.h"

namespace npu::compiler {

Result<Partition> partition_graph(CalibratedGraph& graph, uint32_t N, const Say& say, std::string* io_refused,
                                  ExposedImage* exposed) {
  Graph& g = graph.graph;
  ValueRanges& ranges = graph.ranges;
  // Partition into NPU layers and host operators; every host operator is named. After
  // calibration, because the reference run gives every value its static shape (shape
  // inference cannot see through folded shape chains).
  std::vector<PartitionStep> steps = partition(g, N, &ranges);
  size_t npu_layers = 0, host_ops = 0;
  std::string host_list;
  for (const auto& s : steps) {
    if (s.on_npu) {
      npu_layers += s.ops.size();
    } else {
      ++host_ops;
      const Node& n = g.nodes[static_cast<size_t>(s.node)];
      host_list += (host_list.empty() ? "" : ", ") + n.op + " '" + n.name + "'";
    }
  }
  say("graph: " + std::to_string(g.nodes.size()) + " nodes -> " + std::to_string(npu_layers) + " NPU layer(s), " +
      std::to_string(host_ops) + " host operator(s)" + (host_ops ? ": " + host_list : ""));
  // A host step computes on reals: it must not see a bound value's codes.
  for (const auto& s : steps) {
    if (s.on_npu) continue;
    const Node& n = g.nodes[static_cast<size_t>(s.node)];
    for (const std::vector<int>* vs : {&n.inputs, &n.outputs})
      for (int v : *vs)
        if (v >= 0 && g.value(v).io_codes) {
          *io_refused = "host operator " + n.op + " '" + n.name + "' touches '" + g.value(v).name + "'";
          return make_error(StatusCode::kUnsupported, *io_refused);
        }
  }
  const ValueRanges narrowed = narrow_ranges_for_lut_readers(g, steps, ranges);
  if (!narrowed.empty())
    say("narrowed the ranges of " + std::to_string(narrowed.size()) +
        " value(s) that only lookup tables read to where their functions change");
  // After every decision that depends on which values are graph outputs.
  std::vector<int> model_outputs = g.outputs;
  if (exposed) expose_values(g, steps, narrowed, &exposed->values, &exposed->outputs);
  return Partition{std::move(steps), npu_layers, host_ops, std::move(model_outputs)};
}

}  // namespace npu::compiler
