// plan_memory (pipeline.h): activation-buffer offsets by value lifetime.
#include <algorithm>

#include "pipeline.h"

namespace npu::compiler {

MemoryPlan plan_memory(const Graph& g, const Partition& partition, QuantPlan& qplan, const Say& say) {
  const std::vector<PartitionStep>& steps = partition.steps;
  const std::map<int, int>& alias = qplan.alias;
  std::map<int, uint64_t>& act_size = qplan.bytes;
  MemoryPlan mem;
  std::map<int, uint64_t>& act_offset = mem.offset;
  for (int v : qplan.on_device) act_offset[v] = 0;
  uint64_t& act_bytes = mem.bytes;
  // Memory planning: each device value lives from its first to its last use, in layer order
  // (graph inputs from the start, graph outputs to the end, values a segment exchanges with
  // the host for that whole segment); values whose lives do not overlap share bytes. A view
  // shares its input's bytes and extends its life.
  {
    auto root = [&](int v) {
      while (alias.count(v)) v = alias.at(v);
      return v;
    };
    std::map<int, std::pair<int, int>> life;  // root value -> [first, last] layer index
    std::set<int> read_by_host(g.outputs.begin(), g.outputs.end());
    for (const auto& s : steps)
      if (!s.on_npu)
        for (int v : g.nodes[static_cast<size_t>(s.node)].inputs) read_by_host.insert(v);
    auto use = [&](int v, int first, int last) {
      auto [it, fresh] = life.emplace(root(v), std::make_pair(first, last));
      if (!fresh) it->second = {std::min(it->second.first, first), std::max(it->second.second, last)};
    };
    int t = 0;
    for (const auto& s : steps) {
      if (!s.on_npu) continue;
      const int seg_first = t, seg_last = t + static_cast<int>(s.ops.size()) - 1;
      std::set<int> produced;
      for (const NpuLayer& op : s.ops) {
        for (int v : npu_layer_inputs(op)) use(v, produced.count(v) ? t : seg_first, t);
        produced.insert(npu_layer_output(op));
        use(npu_layer_output(op), t, t);
        ++t;
      }
      for (int v : produced)
        if (read_by_host.count(v)) use(v, life.at(root(v)).first, seg_last);  // dequantised after the segment
    }
    for (int v : g.inputs)
      if (act_offset.count(v)) use(v, 0, life.count(root(v)) ? life.at(root(v)).second : 0);
    for (int v : g.outputs)
      if (act_offset.count(v)) use(v, life.count(root(v)) ? life.at(root(v)).first : 0, t);
    std::vector<int> order;
    for (const auto& [v, range] : life) order.push_back(v);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return life[a].first < life[b].first; });
    struct Block {
      uint64_t offset, size;
      int first, last;
    };
    std::vector<Block> placed;
    for (int v : order) {
      uint64_t size = align_up(act_size[v]);
      for (const auto& [other, r] : alias)  // a view may be larger than its root (padding)
        if (root(other) == v) size = std::max(size, align_up(act_size[other]));
      const auto [first, last] = life[v];
      uint64_t offset = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (const Block& b : placed)
          if (b.first <= last && first <= b.last && offset < b.offset + b.size && b.offset < offset + size) {
            offset = b.offset + b.size;
            moved = true;
          }
      }
      placed.push_back({offset, size, first, last});
      act_offset[v] = offset;
      act_bytes = std::max(act_bytes, offset + size);
    }
    for (auto& [v, off] : act_offset) off = act_offset[root(v)];
    uint64_t unshared = 0;
    for (const Block& b : placed) unshared += b.size;
    say("activation buffer: " + std::to_string(act_bytes) + " bytes for " + std::to_string(placed.size()) +
        " values (" + std::to_string(unshared) + " without reuse)");
  }
  if (act_bytes == 0) act_bytes = kAlign;
  return mem;
}

}  // namespace npu::compiler
