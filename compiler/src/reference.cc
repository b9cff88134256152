// Float reference kernels: the calibration interpreter, and the host fallback's kernels.
// Plain loops: clarity over speed (the NPU path is the fast path).
#include <algorithm>
#include <cmath>
#include <functional>

#include "ir.h"

namespace npu::compiler {
namespace {

using Kernel = std::function<Status(const Graph&, const Node&, std::vector<Tensor>&)>;

const Tensor& in(std::vector<Tensor>& env, const Node& n, size_t k) {
  return env[static_cast<size_t>(n.inputs[k])];
}

// Numpy-style broadcasting of two shapes.
Result<std::vector<int64_t>> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                                             const Node& n) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return make_error(StatusCode::kInvalidArgument,
                        n.label() + ": shapes " + shape_to_string(a) + " and " + shape_to_string(b) +
                            " do not broadcast");
    out[i] = std::max(da, db);
  }
  return out;
}

// Index into a broadcast operand for the flat output index.
int64_t broadcast_index(int64_t flat, const std::vector<int64_t>& out, const std::vector<int64_t>& shape) {
  int64_t idx = 0, stride = 1;
  const size_t off = out.size() - shape.size();
  for (size_t i = out.size(); i-- > 0;) {
    const int64_t coord = flat % out[i];
    flat /= out[i];
    if (i >= off) {
      const int64_t d = shape[i - off];
      if (d != 1) idx += coord * stride;
      stride *= d;
    }
  }
  return idx;
}

Status binary(const Node& n, std::vector<Tensor>& env, const std::function<float(float, float)>& f) {
  const Tensor a = to_float(in(env, n, 0));
  const Tensor b = to_float(in(env, n, 1));
  NPU_ASSIGN_OR_RETURN(auto shape, broadcast_shape(a.shape, b.shape, n));
  Tensor out = Tensor::zeros(DType::kF32, shape);
  auto o = out.as<float>();
  auto pa = a.as<float>();
  auto pb = b.as<float>();
  for (int64_t i = 0; i < out.element_count(); ++i)
    o[static_cast<size_t>(i)] = f(pa[static_cast<size_t>(broadcast_index(i, shape, a.shape))],
                                  pb[static_cast<size_t>(broadcast_index(i, shape, b.shape))]);
  env[static_cast<size_t>(n.outputs[0])] = std::move(out);
  return Status::ok();
}

// C[M,N] = alpha * op(A) op(B) + beta * bias, with A [M,K] (or [K,M] transposed).
Status gemm(const Graph&, const Node& n, std::vector<Tensor>& env) {
  const Tensor a = to_float(in(env, n, 0));
  const Tensor b = to_float(in(env, n, 1));
  if (a.shape.size() != 2 || b.shape.size() != 2)
    return make_error(StatusCode::kInvalidArgument, n.label() + ": A and B must be 2-D");
  const bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  const float alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  const int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  const int64_t Kb = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != Kb)
    return make_error(StatusCode::kInvalidArgument, n.label() + ": inner dimensions differ (" +
                                                        std::to_string(K) + " vs " + std::to_string(Kb) + ")");
  Tensor out = Tensor::zeros(DType::kF32, {M, N});
  auto o = out.as<float>();
  auto pa = a.as<float>();
  auto pb = b.as<float>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float av = pa[static_cast<size_t>(ta ? k * M + m : m * K + k)];
      for (int64_t j = 0; j < N; ++j)
        o[static_cast<size_t>(m * N + j)] += av * pb[static_cast<size_t>(tb ? j * K + k : k * N + j)];
    }
  for (auto& v : o) v *= alpha;
  if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor c = to_float(in(env, n, 2));
    for (int64_t i = 0; i < M * N; ++i)
      o[static_cast<size_t>(i)] += beta * c.as<float>()[static_cast<size_t>(broadcast_index(i, out.shape, c.shape))];
  }
  env[static_cast<size_t>(n.outputs[0])] = std::move(out);
  return Status::ok();
}

Status matmul(const Graph&, const Node& n, std::vector<Tensor>& env) {
  const Tensor a = to_float(in(env, n, 0));
  const Tensor b = to_float(in(env, n, 1));
  if (a.shape.size() < 2 || b.shape.size() != 2)
    return make_error(StatusCode::kUnsupported,
                      n.label() + ": only A[...,M,K] x B[K,N] is supported, got " + shape_to_string(a.shape) +
                          " x " + shape_to_string(b.shape));
  const int64_t K = a.shape.back(), N = b.shape[1];
  if (b.shape[0] != K)
    return make_error(StatusCode::kInvalidArgument, n.label() + ": inner dimensions differ");
  const int64_t rows = a.element_count() / K;
  std::vector<int64_t> shape = a.shape;
  shape.back() = N;
  Tensor out = Tensor::zeros(DType::kF32, shape);
  auto o = out.as<float>();
  auto pa = a.as<float>();
  auto pb = b.as<float>();
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const float av = pa[static_cast<size_t>(m * K + k)];
      for (int64_t j = 0; j < N; ++j) o[static_cast<size_t>(m * N + j)] += av * pb[static_cast<size_t>(k * N + j)];
    }
  env[static_cast<size_t>(n.outputs[0])] = std::move(out);
  return Status::ok();
}

Status relu(const Graph&, const Node& n, std::vector<Tensor>& env) {
  Tensor t = to_float(in(env, n, 0));
  for (auto& v : t.as<float>()) v = std::max(v, 0.0f);
  env[static_cast<size_t>(n.outputs[0])] = std::move(t);
  return Status::ok();
}

const std::map<std::string, Kernel>& kernels() {
  static const std::map<std::string, Kernel> table = {
      {"Gemm", gemm},
      {"MatMul", matmul},
      {"Relu", relu},
      {"Add", [](const Graph&, const Node& n, std::vector<Tensor>& env) {
         return binary(n, env, [](float x, float y) { return x + y; });
       }},
      {"Sub", [](const Graph&, const Node& n, std::vector<Tensor>& env) {
         return binary(n, env, [](float x, float y) { return x - y; });
       }},
      {"Mul", [](const Graph&, const Node& n, std::vector<Tensor>& env) {
         return binary(n, env, [](float x, float y) { return x * y; });
       }},
  };
  return table;
}

}  // namespace

Result<std::vector<Tensor>> run_reference(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (inputs.size() != graph.inputs.size())
    return make_error(StatusCode::kInvalidArgument,
                      "model has " + std::to_string(graph.inputs.size()) + " input(s), got " +
                          std::to_string(inputs.size()));
  std::vector<Tensor> env(graph.values.size());
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (graph.values[v].constant) env[v] = *graph.values[v].constant;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = graph.value(graph.inputs[i]);
    if (inputs[i].shape != v.shape)
      return make_error(StatusCode::kInvalidArgument,
                        "input '" + v.name + "' expects shape " + shape_to_string(v.shape) + ", got " +
                            shape_to_string(inputs[i].shape));
    env[static_cast<size_t>(graph.inputs[i])] = inputs[i];
  }
  for (const Node& n : graph.nodes) {
    auto it = kernels().find(n.op);
    if (it == kernels().end())
      return make_error(StatusCode::kUnsupported,
                        "operator " + n.op + " (node '" + n.name + "') is supported neither on the NPU nor by the host fallback");
    NPU_RETURN_IF_ERROR(it->second(graph, n, env));
  }
  return env;
}

}  // namespace npu::compiler
