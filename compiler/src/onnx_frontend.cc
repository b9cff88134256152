// ONNX -> IR, through the ONNX library: parse, check, infer shapes.
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "ir.h"
#include "npu/compiler/image.h"
#include "npu/hal/file.h"
#include "onnx_tensor.h"

namespace npu::compiler {
namespace {

Status value_from_info(const onnx::ValueInfoProto& info, Value* v, bool require_shape) {
  v->name = info.name();
  if (!info.type().has_tensor_type())
    return make_error(StatusCode::kUnsupported, "value '" + info.name() + "' is not a tensor");
  const auto& tt = info.type().tensor_type();
  NPU_ASSIGN_OR_RETURN(v->dtype, dtype_from_onnx(tt.elem_type(), "value '" + info.name() + "'"));
  v->shape.clear();
  if (!tt.has_shape()) {
    if (require_shape)
      return make_error(StatusCode::kInvalidArgument,
                        "input '" + info.name() + "' has no shape; give one with --input-shape " +
                            info.name() + "=D0,D1,...");
    return Status::ok();
  }
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) {
      v->shape.push_back(d.dim_value());
    } else {
      v->shape.push_back(-1);  // dynamic: must be overridden or inferred
    }
  }
  return Status::ok();
}

// Bounds of what the model image (and so the stack) holds: compiler/src/image.cc.
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxElements = int64_t{1} << 28;
constexpr int64_t kMaxSpatial = 1 << 16;  // strides, dilations, kernel extents, pads
constexpr int kMaxSpatialRank = 8;
constexpr int64_t kMinOpset = 7, kMaxOpset = 18;  // default domain

// A graph input's shape, before ONNX shape inference sees it: every dimension and the
// element count inside the image format's bounds. `flag` names where the shape came from.
Status check_input_dims(const std::string& name, const std::vector<int64_t>& dims,
                        const std::string& flag) {
  int64_t elements = 1;
  for (int64_t d : dims) {
    if (d > kMaxDim)
      return make_error(StatusCode::kInvalidArgument,
                        "input shape: " + flag + "'" + name + "' has dimension " +
                            std::to_string(d) + ", more than the largest the NPU image holds (" +
                            std::to_string(kMaxDim) + "); give a smaller one with --input-shape " +
                            name + "=D0,D1,...");
    if (d > 0) elements = std::min(elements * d, kMaxElements + 1);
  }
  if (elements > kMaxElements)
    return make_error(StatusCode::kInvalidArgument,
                      "input shape: " + flag + "'" + name + "' " + shape_to_string(dims) +
                          " has more than " + std::to_string(kMaxElements) +
                          " elements, the most the NPU image holds in one tensor; "
                          "give a smaller one with --input-shape " +
                          name + "=D0,D1,...");
  return Status::ok();
}

// The attributes ONNX shape inference divides by or allocates from (strides, dilations,
// kernel_shape, pads, group, output_padding, output_shape) of the windowed operators,
// checked before it runs: a zero stride is a SIGFPE inside the ONNX library, a huge pad or
// kernel a runaway allocation.
Status check_node_attributes(const onnx::NodeProto& np, int index, const std::string& path,
                             const std::map<std::string, std::vector<int64_t>>& known_dims) {
  // The operators with a sliding window (Pad's `pads`, for one, may be negative).
  static const std::set<std::string> kWindowed = {
      "Conv",        "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
      "AveragePool", "LpPool",        "MaxUnpool",   "DeformConv",  "Col2Im"};
  const bool default_domain = np.domain().empty() || np.domain() == "ai.onnx";
  if (!default_domain || !kWindowed.count(np.op_type())) return Status::ok();
  const std::string label = np.op_type() + " node '" +
                            (np.name().empty() ? std::string("#").append(std::to_string(index)) : np.name()) + "'";
  auto bad = [&](const std::string& what) {
    return make_error(
        StatusCode::kInvalidArgument,
        path + ": " + label + ": " + what + "; fix the attribute in the exporter or the model");
  };
  int spatial = -1;  // the count strides/dilations/kernel_shape agree on
  for (const auto& a : np.attribute()) {
    const std::string& n = a.name();
    const bool per_axis = n == "strides" || n == "dilations" || n == "kernel_shape";
    const bool pads = n == "pads" || n == "output_padding";
    if (per_axis || pads || n == "output_shape") {
      if (a.type() != onnx::AttributeProto::INTS)
        return bad("attribute '" + n + "' must be a list of integers");
      const int count = a.ints_size();
      if (count > 2 * kMaxSpatialRank)
        return bad("attribute '" + n + "' has " + std::to_string(count) + " entries");
      const int64_t lo = per_axis ? 1 : 0, hi = n == "output_shape" ? kMaxDim : kMaxSpatial;
      for (int64_t v : a.ints())
        if (v < lo || v > hi)
          return bad("attribute '" + n + "' has the value " + std::to_string(v) + ", outside " +
                     std::to_string(lo) + ".." + std::to_string(hi));
      if (per_axis) {
        if (count > kMaxSpatialRank || count == 0)
          return bad("attribute '" + n + "' has " + std::to_string(count) + " entries (1.." +
                     std::to_string(kMaxSpatialRank) + " spatial axes)");
        if (spatial >= 0 && count != spatial)
          return bad(
              "attributes strides, dilations and kernel_shape disagree on the number of spatial "
              "axes (" +
              std::to_string(spatial) + " and " + std::to_string(count) + ")");
        spatial = count;
      }
      if (n == "pads" && count % 2 != 0)
        return bad("attribute 'pads' has an odd number of entries (" + std::to_string(count) +
                   "); it lists a begin and an end per axis");
    } else if (n == "group") {
      if (a.type() != onnx::AttributeProto::INT || a.i() < 1 || a.i() > kMaxDim)
        return bad("attribute 'group' must be an integer from 1 to " + std::to_string(kMaxDim));
    }
  }
  // A weight of known rank (a constant, or a graph input with a declared shape) fixes the
  // spatial rank too: ONNX's convolution shape inference indexes the attributes and the input
  // by the weight's rank (a rank-3 weight with 2-D pads, and a rank-5 weight on a rank-4
  // input, were SIGSEGVs inside it, found by fuzz_onnx).
  const bool conv = np.op_type() == "Conv" || np.op_type() == "ConvTranspose" || np.op_type() == "ConvInteger" ||
                    np.op_type() == "QLinearConv" || np.op_type() == "DeformConv";
  const int w_index = np.op_type() == "QLinearConv" ? 3 : 1;
  if (conv && np.input_size() > w_index) {
    if (auto w = known_dims.find(np.input(w_index)); w != known_dims.end()) {
      const int w_spatial = static_cast<int>(w->second.size()) - 2;
      if (w_spatial < 1 || w_spatial > kMaxSpatialRank)
        return bad("weight '" + np.input(w_index) + "' has rank " + std::to_string(w->second.size()) +
                   "; a convolution weight is [M, C/group, k1, ..., kn] with 1 to " +
                   std::to_string(kMaxSpatialRank) + " spatial axes");
      if (spatial >= 0 && spatial != w_spatial)
        return bad("attributes give " + std::to_string(spatial) + " spatial axes but weight '" + np.input(w_index) +
                   "' has " + std::to_string(w_spatial));
      spatial = w_spatial;
      if (auto x = known_dims.find(np.input(0)); x != known_dims.end() && x->second.size() != w->second.size())
        return bad("input '" + np.input(0) + "' has rank " + std::to_string(x->second.size()) + " but weight '" +
                   np.input(w_index) + "' has rank " + std::to_string(w->second.size()) +
                   "; a convolution's input and weight have the same rank");
      for (const auto& a : np.attribute())
        if (a.name() == "kernel_shape")
          for (int d = 0; d < a.ints_size(); ++d)
            if (w->second[static_cast<size_t>(d) + 2] >= 0 && a.ints(d) != w->second[static_cast<size_t>(d) + 2])
              return bad("kernel_shape does not match weight '" + np.input(w_index) + "' (axis " +
                         std::to_string(d) + ": " + std::to_string(a.ints(d)) + " against " +
                         std::to_string(w->second[static_cast<size_t>(d) + 2]) + ")");
    }
  }
  for (const auto& a : np.attribute())
    if ((a.name() == "pads" && spatial >= 0 && a.ints_size() != 2 * spatial) ||
        (a.name() == "output_padding" && spatial >= 0 && a.ints_size() != spatial))
      return bad("attribute '" + a.name() + "' has " + std::to_string(a.ints_size()) + " entries, not " +
                 (a.name() == "pads" ? "2 per" : "1 per") + " spatial axis (" + std::to_string(spatial) + " axes)");
  return Status::ok();
}

// check_node_attributes over a graph and the subgraphs of its nodes (If, Loop, Scan bodies),
// which ONNX shape inference descends into as well.
Status check_graph_attributes(const onnx::GraphProto& graph, const std::string& path) {
  // Dims known before shape inference: declared shapes of inputs and value_info (-1 for a
  // dimension without a value), overridden by initializers' own dims.
  std::map<std::string, std::vector<int64_t>> known_dims;
  for (const auto* list : {&graph.input(), &graph.value_info()})
    for (const auto& vi : *list) {
      if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
      auto& dims = known_dims[vi.name()];
      dims.clear();
      for (const auto& d : vi.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
  for (const auto& init : graph.initializer())
    known_dims[init.name()] = std::vector<int64_t>(init.dims().begin(), init.dims().end());
  for (int n = 0; n < graph.node_size(); ++n) {
    NPU_RETURN_IF_ERROR(check_node_attributes(graph.node(n), n, path, known_dims));
    for (const auto& a : graph.node(n).attribute()) {
      if (a.has_g()) NPU_RETURN_IF_ERROR(check_graph_attributes(a.g(), path));
      for (const auto& sub : a.graphs()) NPU_RETURN_IF_ERROR(check_graph_attributes(sub, path));
    }
  }
  return Status::ok();
}

// Every value the top-level graph uses is defined before it: node inputs (other than the empty
// name of an omitted optional input) by a graph input, an initializer or an earlier node, and
// every graph output by one of those. ONNX requires topological order; its version converter
// dereferences a missing producer (a SIGSEGV in graphProtoToGraph, found by fuzz_onnx), and
// the rest of the frontend needs the same. Subgraphs may use outer-scope names and are checked
// where they are imported.
Status check_graph_references(const onnx::GraphProto& graph, const std::string& path) {
  std::set<std::string> defined;
  for (const auto& v : graph.input()) defined.insert(v.name());
  for (const auto& t : graph.initializer()) defined.insert(t.name());
  for (int n = 0; n < graph.node_size(); ++n) {
    const auto& node = graph.node(n);
    const std::string what = node.op_type() + " node '" + (node.name().empty() ? std::string("#").append(std::to_string(n)) : node.name()) + "'";
    for (const auto& in : node.input())
      if (!in.empty() && !defined.count(in))
        return make_error(StatusCode::kInvalidArgument,
                          path + ": " + what + " reads '" + in +
                              "', which no graph input, initializer or earlier node defines; re-export the model "
                              "(nodes must be in topological order)");
    for (const auto& out : node.output())
      if (!out.empty()) defined.insert(out);
  }
  for (const auto& v : graph.output())
    if (!defined.count(v.name()))
      return make_error(StatusCode::kInvalidArgument,
                        path + ": graph output '" + v.name() +
                            "' is not produced by any node, input or initializer; re-export the model");
  return Status::ok();
}

// Before opset 7 a 1-D PRelu slope of C values is per channel (axis 1); from opset 7 it
// broadcasts against the last axis. The version converter has no adapter for that change, so
// an upgraded model's constant [C] slope of a rank-r input becomes [C, 1, ..., 1] (rank r - 1).
void upgrade_prelu_slopes(onnx::ModelProto& model) {
  auto* graph = model.mutable_graph();
  std::map<std::string, int> rank;
  for (const auto* list : {&graph->input(), &graph->value_info(), &graph->output()})
    for (const auto& vi : *list)
      if (vi.type().tensor_type().has_shape())
        rank[vi.name()] = vi.type().tensor_type().shape().dim_size();
  for (const auto& node : graph->node()) {
    if (node.op_type() != "PRelu" || node.input_size() != 2 || !rank.count(node.input(0))) continue;
    const int r = rank[node.input(0)];
    for (auto& init : *graph->mutable_initializer()) {
      if (init.name() != node.input(1) || init.dims_size() != 1 || init.dims(0) <= 1 || r <= 2)
        continue;
      for (int k = 0; k < r - 2; ++k) init.add_dims(1);
      for (auto& in : *graph->mutable_input())
        if (in.name() == init.name() && in.type().tensor_type().has_shape())
          for (int k = 0; k < r - 2; ++k)
            in.mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
    }
  }
}

}  // namespace

Result<Graph> load_onnx(const std::string& path,
                        const std::map<std::string, std::vector<int64_t>>& input_shapes) {
  NPU_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                       read_file(path, kMaxModelFileBytes, "ONNX model (.onnx)"));
  if (looks_like_image(bytes))
    return make_error(
        StatusCode::kInvalidArgument,
        path +
            ": is a model image written by npu-compile, not an ONNX model; give the .onnx it was "
            "compiled from (npu-run runs the image itself)");
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return make_error(StatusCode::kInvalidArgument,
                      path + ": not an ONNX model (protobuf parse failed); export it with torch.onnx.export or onnx.save");
  // The attributes first: the version converter below runs ONNX shape inference too.
  NPU_RETURN_IF_ERROR(check_graph_attributes(model.graph(), path));
  NPU_RETURN_IF_ERROR(check_graph_references(model.graph(), path));
  int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  Graph g;
  if (opset >= 1 && opset < kMinOpset) {
    // Older models are upgraded with ONNX's own version converter (its adapters rewrite the
    // operators that changed, e.g. the broadcast attribute of opset-6 Add).
    const int64_t from = opset;
    try {
      // The converter's broadcast adapters need every input's shape, also of Constant outputs.
      onnx::shape_inference::InferShapes(model);
      model = onnx::version_conversion::ConvertVersion(model, kMinOpset);
    } catch (const std::exception& e) {
      return make_error(StatusCode::kUnsupported,
                        path + ": default-domain opset " + std::to_string(from) +
                            ": the ONNX version converter cannot upgrade it to opset " +
                            std::to_string(kMinOpset) + " (" + e.what() +
                            "); export the model at opset " + std::to_string(kMinOpset) +
                            " or later");
    }
    opset = kMinOpset;
    g.notes.push_back("upgraded from opset " + std::to_string(from) + " to opset " +
                      std::to_string(kMinOpset) + " with the ONNX version converter");
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    return make_error(StatusCode::kUnsupported,
                      path + ": default-domain opset " + std::to_string(opset) +
                          " is outside the supported range " + std::to_string(kMinOpset) + ".." +
                          std::to_string(kMaxOpset) + "; convert it with onnx.version_converter");

  // Apply --input-shape overrides before shape inference so that they propagate.
  auto* graph_proto = model.mutable_graph();
  std::set<std::string> initializer_names;
  for (const auto& init : graph_proto->initializer()) initializer_names.insert(init.name());
  std::set<std::string> overridden;
  for (auto& input : *graph_proto->mutable_input()) {
    auto it = input_shapes.find(input.name());
    if (it == input_shapes.end()) continue;
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    // A rank change would reach the ONNX library's shape inference, which crashes on some.
    if (input.type().tensor_type().has_shape() && shape->dim_size() != static_cast<int>(it->second.size()))
      return make_error(StatusCode::kInvalidArgument,
                        "input shape: --input-shape " + input.name() + "=" +
                            shape_to_string(it->second) + ": input '" + input.name() +
                            "' has rank " + std::to_string(shape->dim_size()) + " in " + path);
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
    overridden.insert(input.name());
  }
  for (const auto& [name, dims] : input_shapes)
    if (!overridden.count(name))
      return make_error(StatusCode::kInvalidArgument, "input shape: --input-shape names '" + name +
                                                          "', which is not an input of " + path);

  // Everything ONNX shape inference trusts, checked before it runs.
  for (const auto& input : graph_proto->input()) {
    if (initializer_names.count(input.name()) || !input.type().tensor_type().has_shape()) continue;
    std::vector<int64_t> dims;
    for (const auto& d : input.type().tensor_type().shape().dim())
      dims.push_back(d.has_dim_value() ? d.dim_value() : 0);
    NPU_RETURN_IF_ERROR(check_input_dims(
        input.name(), dims, overridden.count(input.name()) ? "--input-shape " : "input "));
  }
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInvalidArgument, path + ": ONNX checker: " + e.what());
  }
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception& e) {
    return make_error(StatusCode::kInvalidArgument, path + ": ONNX shape inference: " + e.what());
  }
  if (!g.notes.empty()) upgrade_prelu_slopes(model);

  g.opset = opset;
  std::map<std::string, int> by_name;
  for (const auto& init : graph_proto->initializer()) {
    NPU_ASSIGN_OR_RETURN(Tensor t, tensor_from_proto(init));
    Value v;
    v.name = init.name();
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.constant = std::move(t);
    const std::string name = v.name;
    by_name[name] = g.add_value(std::move(v));
  }
  for (const auto& input : graph_proto->input()) {
    if (initializer_names.count(input.name())) continue;
    Value v;
    NPU_RETURN_IF_ERROR(value_from_info(input, &v, true));
    for (int64_t d : v.shape)
      if (d < 0)
        return make_error(StatusCode::kInvalidArgument,
                          "input shape: input '" + v.name + "' has a dynamic shape " +
                              shape_to_string(v.shape) + "; fix it with --input-shape " + v.name +
                              "=D0,D1,...");
    const int id = g.add_value(std::move(v));
    by_name[input.name()] = id;
    g.inputs.push_back(id);
  }
  std::map<std::string, const onnx::ValueInfoProto*> infos;
  for (const auto& vi : graph_proto->value_info()) infos[vi.name()] = &vi;
  for (const auto& vi : graph_proto->output()) infos[vi.name()] = &vi;

  for (int n = 0; n < graph_proto->node_size(); ++n) {
    const auto& np = graph_proto->node(n);
    Node node;
    node.op = np.op_type();
    node.name = np.name().empty() ? node.op + "_" + std::to_string(n) : np.name();
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      return make_error(StatusCode::kUnsupported,
                        "operator " + np.domain() + "::" + node.op + " (node '" + node.name +
                            "') is from a custom domain that neither the NPU nor the host fallback supports");
    for (const auto& a : np.attribute()) node.attrs[a.name()] = attribute_from_proto(a);
    node.proto = np.SerializeAsString();
    for (const auto& in_name : np.input()) {
      if (in_name.empty()) {
        node.inputs.push_back(-1);
        continue;
      }
      auto it = by_name.find(in_name);
      if (it == by_name.end())
        return make_error(StatusCode::kInvalidArgument,
                          node.label() + " reads '" + in_name + "', which nothing produces (graph not topologically sorted?)");
      node.inputs.push_back(it->second);
    }
    for (const auto& out_name : np.output()) {
      Value v;
      v.name = out_name;
      if (auto it = infos.find(out_name); it != infos.end())
        NPU_RETURN_IF_ERROR(value_from_info(*it->second, &v, false));
      const int id = g.add_value(std::move(v));
      by_name[out_name] = id;
      node.outputs.push_back(id);
    }
    g.nodes.push_back(std::move(node));
  }
  for (const auto& out : graph_proto->output()) {
    auto it = by_name.find(out.name());
    if (it == by_name.end())
      return make_error(StatusCode::kInvalidArgument, "graph output '" + out.name() + "' is never produced");
    g.outputs.push_back(it->second);
  }
  return g;
}

}  // namespace npu::compiler
