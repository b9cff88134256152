// Matrix products: MatMul (numpy semantics), Gemm, MatMulInteger, Einsum.
#include <algorithm>
#include <cmath>

#include "kernel.h"

namespace npu::host {
namespace {

Result<Outputs> matmul(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  NPU_ASSIGN_OR_RETURN(Tensor out, matmul_tensors(c, *a, *b));
  return one(std::move(out));
}

// Y = alpha·op(A)·op(B) + beta·C, C broadcast to [M,N] (optional from opset 11).
Result<Outputs> gemm(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  if (a->shape.size() != 2 || b->shape.size() != 2)
    return c.invalid("A and B must be 2-D, got " + shape_to_string(a->shape) + " and " +
                     shape_to_string(b->shape));
  if (a->dtype != DType::kF32 || b->dtype != DType::kF32)
    return c.unsupported("non-float operands");
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const float alpha = c.attr_float("alpha", 1.0f), beta = c.attr_float("beta", 1.0f);
  const int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  const int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != Kb)
    return c.invalid("inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) +
                     ")");
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kF32, {M, N}));
  auto o = out.as<float>();
  matmul_2d<float>(a->as<float>().data(), ta ? 1 : K, ta ? M : 1, b->as<float>().data(), tb ? 1 : N,
                   tb ? K : 1, o.data(), M, K, N);
  for (float& v : o) v *= alpha;
  if (const Tensor* bias = c.in(2)) {
    if (bias->dtype != DType::kF32) return c.unsupported("a non-float C");
    const Shape mn{M, N};
    NPU_ASSIGN_OR_RETURN(Shape bshape, broadcast_shapes(c, {&bias->shape, &mn}));
    if (bshape != mn)
      return c.invalid("C " + shape_to_string(bias->shape) + " does not broadcast to " +
                       shape_to_string(mn));
    const Shape sc = broadcast_strides(bias->shape, mn);
    auto pc = bias->as<float>();
    for_each_strided<1>(mn, {&sc}, [&](int64_t i, const std::array<int64_t, 1>& off) {
      o[static_cast<size_t>(i)] += beta * pc[static_cast<size_t>(off[0])];
    });
  }
  return one(std::move(out));
}

Result<Outputs> matmul_integer(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  // a's zero point may be per row (axis -2), b's per column (axis -1).
  NPU_ASSIGN_OR_RETURN(Tensor a32, minus_zero_point(c, *a, c.in(2), -2));
  NPU_ASSIGN_OR_RETURN(Tensor b32, minus_zero_point(c, *b, c.in(3), -1));
  NPU_ASSIGN_OR_RETURN(Tensor out, matmul_tensors(c, a32, b32));
  return one(std::move(out));
}

// Einsum: explicit or implicit output, repeated letters (diagonals), one ellipsis per term.
Result<Outputs> einsum(const OpContext& c) {
  std::string eq;
  for (char ch : c.attr_string("equation", ""))
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t p = 0;;) {
    const size_t comma = lhs.find(',', p);
    terms.push_back(lhs.substr(p, comma == std::string::npos ? std::string::npos : comma - p));
    if (comma == std::string::npos) break;
    p = comma + 1;
  }
  if (terms.size() != c.inputs.size())
    return c.invalid("equation '" + eq + "' has " + std::to_string(terms.size()) +
                     " operand(s), the node " + std::to_string(c.inputs.size()));
  // The ellipsis stands for the leading broadcast dims; give them letters '0', '1', ...
  size_t ell_rank = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(t));
    const size_t pos = terms[t].find("...");
    if (pos == std::string::npos) continue;
    const size_t letters = terms[t].size() - 3;
    if (x->shape.size() < letters)
      return c.invalid("operand " + std::to_string(t) + " has too few dims");
    ell_rank = std::max(ell_rank, x->shape.size() - letters);
  }
  auto ell = [](size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += static_cast<char>('0' + i);
    return s;
  };
  std::map<char, int64_t> dim;
  for (size_t t = 0; t < terms.size(); ++t) {
    const Tensor& x = *c.inputs[t];
    std::string& term = terms[t];
    if (const size_t pos = term.find("..."); pos != std::string::npos) {
      const size_t n = x.shape.size() - (term.size() - 3);
      term = term.substr(0, pos) + ell(ell_rank).substr(ell_rank - n) + term.substr(pos + 3);
    }
    if (term.size() != x.shape.size())
      return c.invalid("term '" + term + "' does not match operand " + std::to_string(t) +
                       "'s rank");
    for (size_t i = 0; i < term.size(); ++i) {
      auto [it, fresh] = dim.emplace(term[i], x.shape[i]);
      if (!fresh && it->second != x.shape[i]) {
        if (it->second == 1 && std::isdigit(static_cast<unsigned char>(term[i])))
          it->second = x.shape[i];
        else if (!(x.shape[i] == 1 && std::isdigit(static_cast<unsigned char>(term[i]))))
          return c.invalid("letter '" + std::string(1, term[i]) + "' has sizes " +
                           std::to_string(it->second) + " and " + std::to_string(x.shape[i]));
      }
    }
  }
  std::string out_term;
  if (arrow != std::string::npos) {
    out_term = eq.substr(arrow + 2);
    if (const size_t pos = out_term.find("..."); pos != std::string::npos)
      out_term = out_term.substr(0, pos) + ell(ell_rank) + out_term.substr(pos + 3);
  } else {
    std::map<char, int> count;
    for (const auto& t : terms)
      for (char ch : t) ++count[ch];
    out_term = ell(ell_rank);
    for (const auto& [ch, n] : count)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(ch))) out_term += ch;
  }
  std::string letters = out_term;
  for (const auto& [ch, n] : dim)
    if (out_term.find(ch) == std::string::npos) letters += ch;
  Shape all;
  for (char ch : letters) {
    if (!dim.count(ch))
      return c.invalid("output letter '" + std::string(1, ch) + "' is not in any input");
    all.push_back(dim[ch]);
  }
  double work = static_cast<double>(terms.size());
  for (int64_t d : all) work *= static_cast<double>(d);
  if (work > 1e10)
    return c.unsupported("an equation over " + shape_to_string(all) + " (too much work)");
  const Shape out_shape(all.begin(), all.begin() + static_cast<int64_t>(out_term.size()));
  // Each operand's stride per letter of `all` (0 where it lacks the letter or broadcasts).
  std::vector<Shape> strides(terms.size(), Shape(all.size(), 0));
  std::vector<Tensor> xs;
  for (size_t t = 0; t < terms.size(); ++t) {
    xs.push_back(cast_tensor(*c.inputs[t], DType::kF32));
    const Shape own = strides_of(c.inputs[t]->shape);
    for (size_t i = 0; i < terms[t].size(); ++i)
      if (c.inputs[t]->shape[i] != 1 || dim[terms[t][i]] == 1)
        strides[t][letters.find(terms[t][i])] += own[i];
  }
  NPU_ASSIGN_OR_RETURN(Tensor acc, new_tensor(c, DType::kF32, out_shape));
  const int64_t inner = numel(all) / std::max<int64_t>(1, numel(out_shape));
  auto po = acc.as<float>();
  std::vector<int64_t> idx(all.size(), 0);
  const int64_t total = numel(all);
  for (int64_t flat = 0; flat < total; ++flat) {
    float prod = 1;
    for (size_t t = 0; t < xs.size(); ++t) {
      int64_t off = 0;
      for (size_t i = 0; i < all.size(); ++i) off += idx[i] * strides[t][i];
      prod *= xs[t].as<float>()[static_cast<size_t>(off)];
    }
    po[static_cast<size_t>(flat / std::max<int64_t>(1, inner))] += prod;
    for (size_t d = all.size(); d-- > 0;) {
      if (++idx[d] < all[d]) break;
      idx[d] = 0;
    }
  }
  return one(cast_tensor(acc, c.inputs[0]->dtype));
}

}  // namespace

// Batched, broadcasting matmul of same-typed a and b (ranks >= 1, numpy rules).
Result<Tensor> matmul_tensors(const OpContext& c, const Tensor& a, const Tensor& b) {
  if (a.dtype != b.dtype)
    return c.invalid("A is " + std::string(dtype_name(a.dtype)) + " and B " +
                     std::string(dtype_name(b.dtype)) + "; they must have the same type");
  if (a.shape.empty() || b.shape.empty()) return c.invalid("MatMul operands must have rank >= 1");
  Shape as = a.shape, bs = b.shape;
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K)
    return c.invalid("inner dimensions differ: " + shape_to_string(a.shape) + " x " +
                     shape_to_string(b.shape));
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  NPU_ASSIGN_OR_RETURN(Shape batch, broadcast_shapes(c, {&ab, &bb}));
  Shape out_shape = batch;
  if (!a_vec) out_shape.push_back(M);
  if (!b_vec) out_shape.push_back(N);
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, a.dtype, out_shape));
  Shape sa = broadcast_strides(ab, batch), sb = broadcast_strides(bb, batch);
  for (auto& s : sa) s *= M * K;
  for (auto& s : sb) s *= K * N;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.as<T>().data();
    const T* pb = b.as<T>().data();
    T* po = out.as<T>().data();
    for_each_strided<2>(batch, {&sa, &sb}, [&](int64_t i, const std::array<int64_t, 2>& o) {
      matmul_2d<T>(pa + o[0], K, 1, pb + o[1], N, 1, po + i * M * N, M, K, N);
    });
  });
  return out;
}

void register_linalg(KernelTable& t) {
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
  t["MatMulInteger"] = matmul_integer;
  t["Einsum"] = einsum;
}

}  // namespace npu::host
