// Element-wise operators: unary math, activations, binary and variadic operators with numpy
// broadcasting, comparisons and logic (bool is uint8 0/1), Where, Clip, Cast.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel.h"

namespace npu::host {
namespace {

// ---- unary ----

// Float-only math: F is constructed from the context (for its attributes) and maps a float.
template <typename F>
Result<Outputs> unary_float(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->dtype != DType::kF32)
    return c.unsupported("input of type " + std::string(dtype_name(x->dtype)));
  const F f(c);
  Tensor out = *x;
  for (float& v : out.as<float>()) v = f(v);
  return one(std::move(out));
}

#define NPU_FLOAT_UNARY(Name, expr)                  \
  struct Name {                                      \
    explicit Name(const OpContext&) {}               \
    float operator()(float x) const { return expr; } \
  }

NPU_FLOAT_UNARY(Exp, std::exp(x));
NPU_FLOAT_UNARY(Log, std::log(x));
NPU_FLOAT_UNARY(Sqrt, std::sqrt(x));
NPU_FLOAT_UNARY(Reciprocal, 1.0f / x);
NPU_FLOAT_UNARY(Floor, std::floor(x));
NPU_FLOAT_UNARY(Ceil, std::ceil(x));
NPU_FLOAT_UNARY(Round, std::nearbyint(x));  // half to even in the default rounding mode
NPU_FLOAT_UNARY(Sigmoid,
                x >= 0 ? 1.0f / (1.0f + std::exp(-x)) : std::exp(x) / (1.0f + std::exp(x)));
NPU_FLOAT_UNARY(Tanh, std::tanh(x));
NPU_FLOAT_UNARY(Softplus, x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
NPU_FLOAT_UNARY(Softsign, x / (1.0f + std::fabs(x)));
NPU_FLOAT_UNARY(HardSwish, x* std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f)));
NPU_FLOAT_UNARY(Erf, std::erf(x));
NPU_FLOAT_UNARY(Sin, std::sin(x));
NPU_FLOAT_UNARY(Cos, std::cos(x));
NPU_FLOAT_UNARY(Tan, std::tan(x));
NPU_FLOAT_UNARY(Asin, std::asin(x));
NPU_FLOAT_UNARY(Acos, std::acos(x));
NPU_FLOAT_UNARY(Atan, std::atan(x));
NPU_FLOAT_UNARY(Sinh, std::sinh(x));
NPU_FLOAT_UNARY(Cosh, std::cosh(x));
NPU_FLOAT_UNARY(Asinh, std::asinh(x));
NPU_FLOAT_UNARY(Acosh, std::acosh(x));
NPU_FLOAT_UNARY(Atanh, std::atanh(x));
#undef NPU_FLOAT_UNARY

struct LeakyRelu {
  float alpha;
  explicit LeakyRelu(const OpContext& c) : alpha(c.attr_float("alpha", 0.01f)) {}
  float operator()(float x) const { return x < 0 ? alpha * x : x; }
};
struct ThresholdedRelu {
  float alpha;
  explicit ThresholdedRelu(const OpContext& c) : alpha(c.attr_float("alpha", 1.0f)) {}
  float operator()(float x) const { return x > alpha ? x : 0.0f; }
};
struct Elu {
  float alpha;
  explicit Elu(const OpContext& c) : alpha(c.attr_float("alpha", 1.0f)) {}
  float operator()(float x) const { return x < 0 ? alpha * std::expm1(x) : x; }
};
struct Celu {
  float alpha;
  explicit Celu(const OpContext& c) : alpha(c.attr_float("alpha", 1.0f)) {}
  float operator()(float x) const {
    return std::max(0.0f, x) + std::min(0.0f, alpha * std::expm1(x / alpha));
  }
};
struct Selu {
  float alpha, gamma;
  explicit Selu(const OpContext& c)
      : alpha(c.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(c.attr_float("gamma", 1.05070102214813232421875f)) {}
  float operator()(float x) const { return gamma * (x > 0 ? x : alpha * std::expm1(x)); }
};
struct HardSigmoid {
  float alpha, beta;
  explicit HardSigmoid(const OpContext& c)
      : alpha(c.attr_float("alpha", 0.2f)), beta(c.attr_float("beta", 0.5f)) {}
  float operator()(float x) const { return std::max(0.0f, std::min(1.0f, alpha * x + beta)); }
};
struct Shrink {
  float lambd, bias;
  explicit Shrink(const OpContext& c)
      : lambd(c.attr_float("lambd", 0.5f)), bias(c.attr_float("bias", 0.0f)) {}
  float operator()(float x) const { return x < -lambd ? x + bias : (x > lambd ? x - bias : 0.0f); }
};

// Numeric unary operators defined for every dtype.
template <typename F>
Result<Outputs> unary_numeric(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  Tensor out = *x;
  visit_dtype(x->dtype, [&](auto tag) {
    for (auto& v : out.as<decltype(tag)>()) v = F{}(v);
  });
  return one(std::move(out));
}

struct Abs {
  template <typename T>
  T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < 0 ? wrapping_neg(x) : x;
  }
};
struct Neg {
  template <typename T>
  T operator()(T x) const {
    return wrapping_neg(x);
  }
};
struct Sign {
  template <typename T>
  T operator()(T x) const {
    return static_cast<T>((T{0} < x) - (x < T{0}));
  }
};
struct Relu {
  template <typename T>
  T operator()(T x) const {
    return x > T{0} ? x : T{0};
  }
};

// Float -> bool predicates.
template <typename F>
Result<Outputs> predicate(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  if (x->dtype != DType::kF32)
    return c.unsupported("input of type " + std::string(dtype_name(x->dtype)));
  const F f(c);
  Tensor out = Tensor::zeros(DType::kU8, x->shape);
  auto src = x->as<float>();
  for (size_t i = 0; i < src.size(); ++i) out.data[i] = f(src[i]) ? 1 : 0;
  return one(std::move(out));
}
struct IsNaN {
  explicit IsNaN(const OpContext&) {}
  bool operator()(float x) const { return std::isnan(x); }
};
struct IsInf {
  bool neg, pos;
  explicit IsInf(const OpContext& c)
      : neg(c.attr_int("detect_negative", 1) != 0), pos(c.attr_int("detect_positive", 1) != 0) {}
  bool operator()(float x) const { return std::isinf(x) && (x < 0 ? neg : pos); }
};

Result<Outputs> not_op(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  Tensor out = *x;
  for (auto& v : out.data) v = v == 0;
  return one(std::move(out));
}

// ---- binary with broadcasting ----

template <typename TA, typename TB, typename TO, typename F>
void apply2(const Tensor& a, const Tensor& b, Tensor& out, F&& f) {
  auto pa = a.as<TA>();
  auto pb = b.as<TB>();
  auto po = out.as<TO>();
  if (a.shape == out.shape && b.shape == out.shape) {
    for (size_t i = 0; i < po.size(); ++i) po[i] = f(pa[i], pb[i]);
    return;
  }
  const Shape sa = broadcast_strides(a.shape, out.shape),
              sb = broadcast_strides(b.shape, out.shape);
  for_each_strided<2>(out.shape, {&sa, &sb}, [&](int64_t i, const std::array<int64_t, 2>& o) {
    po[static_cast<size_t>(i)] = f(pa[static_cast<size_t>(o[0])], pb[static_cast<size_t>(o[1])]);
  });
}

Status same_dtype(const OpContext& c, const Tensor& a, const Tensor& b) {
  if (a.dtype == b.dtype) return Status::ok();
  return c.invalid("operands are " + std::string(dtype_name(a.dtype)) + " and " +
                   std::string(dtype_name(b.dtype)) + "; they must have the same type");
}

// Arithmetic op F on two operands of the same dtype; F::apply returns false on a domain error
// (integer division by zero).
template <typename F>
Result<Tensor> arith(const OpContext& c, const Tensor& a, const Tensor& b) {
  NPU_RETURN_IF_ERROR(same_dtype(c, a, b));
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&a.shape, &b.shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, a.dtype, shape));
  bool ok = true;
  const F f(c);
  visit_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    apply2<T, T, T>(a, b, out, [&](T x, T y) { return f(x, y, ok); });
  });
  if (!ok) return c.invalid("integer division by zero");
  return out;
}

template <typename F>
Result<Outputs> binary_arith(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  NPU_ASSIGN_OR_RETURN(Tensor out, arith<F>(c, *a, *b));
  return one(std::move(out));
}

// Variadic (Sum, Max, Min, Mean): a left fold of the binary operator.
template <typename F, bool kMean = false>
Result<Outputs> variadic(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* first, c.need(0));
  Tensor acc = *first;
  for (size_t k = 1; k < c.inputs.size(); ++k) {
    NPU_ASSIGN_OR_RETURN(const Tensor* next, c.need(k));
    NPU_ASSIGN_OR_RETURN(acc, arith<F>(c, acc, *next));
  }
  if constexpr (kMean) {
    const auto n = static_cast<double>(c.inputs.size());
    visit_dtype(acc.dtype, [&](auto tag) {
      for (auto& v : acc.as<decltype(tag)>())
        v = static_cast<decltype(tag)>(static_cast<double>(v) / n);
    });
  }
  return one(std::move(acc));
}

#define NPU_ARITH(Name, expr)                \
  struct Name {                              \
    explicit Name(const OpContext&) {}       \
    template <typename T>                    \
    T operator()(T a, T b, bool& ok) const { \
      (void)ok;                              \
      return static_cast<T>(expr);           \
    }                                        \
  }
NPU_ARITH(AddF, wrapping_add(a, b));
NPU_ARITH(SubF, wrapping_sub(a, b));
NPU_ARITH(MulF, wrapping_mul(a, b));
NPU_ARITH(MaxF, (a != a || a > b) ? a : b);  // NaN propagates
NPU_ARITH(MinF, (a != a || a < b) ? a : b);
#undef NPU_ARITH

struct DivF {
  explicit DivF(const OpContext&) {}
  template <typename T>
  T operator()(T a, T b, bool& ok) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        ok = false;
        return T{0};
      }
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return a == std::numeric_limits<T>::lowest() ? a : static_cast<T>(-a);
    }
    return static_cast<T>(a / b);
  }
};

struct ModF {
  bool fmod;
  explicit ModF(const OpContext& c) : fmod(c.attr_int("fmod", 0) != 0) {}
  template <typename T>
  T operator()(T a, T b, bool& ok) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) {
        ok = false;
        return 0;
      }
      if (std::is_signed_v<T> && b == T(-1)) return 0;
      T r = static_cast<T>(a % b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      T r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};

// Pow: the result has the base's type; the exponent may have another.
Result<Outputs> pow_op(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&a->shape, &b->shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, a->dtype, shape));
  const Tensor e = cast_tensor(*b, DType::kF32);
  visit_dtype(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    apply2<T, float, T>(*a, e, out, [](T x, float y) {
      if constexpr (std::is_floating_point_v<T>)
        return std::pow(x, y);
      else
        return convert<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    });
  });
  return one(std::move(out));
}

Result<Outputs> prelu(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* slope, c.need(1));
  NPU_RETURN_IF_ERROR(same_dtype(c, *x, *slope));
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&x->shape, &slope->shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    apply2<T, T, T>(*x, *slope, out, [](T v, T s) { return v < T{0} ? wrapping_mul(v, s) : v; });
  });
  return one(std::move(out));
}

// Comparisons and logic: bool (uint8) results.
template <typename F>
Result<Outputs> compare(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  NPU_RETURN_IF_ERROR(same_dtype(c, *a, *b));
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&a->shape, &b->shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, DType::kU8, shape));
  visit_dtype(a->dtype, [&](auto tag) {
    using T = decltype(tag);
    apply2<T, T, uint8_t>(*a, *b, out, [](T x, T y) { return static_cast<uint8_t>(F{}(x, y)); });
  });
  return one(std::move(out));
}
struct EqualF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LessF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct LessEqF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct GreaterEqF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
struct AndF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a && b;
  }
};
struct OrF {
  template <typename T>
  bool operator()(T a, T b) const {
    return a || b;
  }
};
struct XorF {
  template <typename T>
  bool operator()(T a, T b) const {
    return (a != 0) != (b != 0);
  }
};

Result<Outputs> bitshift(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* a, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* b, c.need(1));
  NPU_RETURN_IF_ERROR(same_dtype(c, *a, *b));
  if (a->dtype != DType::kU8)
    return c.unsupported("input of type " + std::string(dtype_name(a->dtype)));
  const std::string dir = c.attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") return c.invalid("direction must be LEFT or RIGHT");
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&a->shape, &b->shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, a->dtype, shape));
  const bool left = dir == "LEFT";
  apply2<uint8_t, uint8_t, uint8_t>(*a, *b, out, [&](uint8_t x, uint8_t s) {
    if (s >= 8) return uint8_t{0};
    return static_cast<uint8_t>(left ? x << s : x >> s);
  });
  return one(std::move(out));
}

Result<Outputs> where(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* cond, c.need(0));
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(1));
  NPU_ASSIGN_OR_RETURN(const Tensor* y, c.need(2));
  NPU_RETURN_IF_ERROR(same_dtype(c, *x, *y));
  NPU_ASSIGN_OR_RETURN(Shape shape, broadcast_shapes(c, {&cond->shape, &x->shape, &y->shape}));
  NPU_ASSIGN_OR_RETURN(Tensor out, new_tensor(c, x->dtype, shape));
  const Tensor cb = cast_tensor(*cond, DType::kU8);
  const Shape sc = broadcast_strides(cond->shape, shape), sx = broadcast_strides(x->shape, shape),
              sy = broadcast_strides(y->shape, shape);
  const size_t es = dtype_size(x->dtype);
  for_each_strided<3>(shape, {&sc, &sx, &sy}, [&](int64_t i, const std::array<int64_t, 3>& o) {
    const Tensor& src = cb.data[static_cast<size_t>(o[0])] ? *x : *y;
    const int64_t off = cb.data[static_cast<size_t>(o[0])] ? o[1] : o[2];
    std::memcpy(out.data.data() + static_cast<size_t>(i) * es,
                src.data.data() + static_cast<size_t>(off) * es, es);
  });
  return one(std::move(out));
}

// Clip: bounds are attributes before opset 11, optional scalar inputs from it on.
Result<Outputs> clip(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  Tensor out = *x;
  visit_dtype(x->dtype, [&](auto tag) {
    using T = decltype(tag);
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (c.opset < 11) {
      lo = convert<T>(c.attr_float("min", -std::numeric_limits<float>::max()));
      hi = convert<T>(c.attr_float("max", std::numeric_limits<float>::max()));
    } else {
      if (const Tensor* t = c.in(1); t && t->element_count() > 0)
        lo = convert<T>(element_as_double(*t, 0));
      if (const Tensor* t = c.in(2); t && t->element_count() > 0)
        hi = convert<T>(element_as_double(*t, 0));
    }
    for (auto& v : out.as<T>()) v = v < lo ? lo : (v > hi ? hi : v);
  });
  return one(std::move(out));
}

Result<Outputs> cast_to(const OpContext& c, DType to, bool to_bool) {
  NPU_ASSIGN_OR_RETURN(const Tensor* x, c.need(0));
  Tensor out = cast_tensor(*x, to);
  if (to_bool) {
    visit_dtype(x->dtype, [&](auto tag) {
      auto src = x->as<decltype(tag)>();
      for (size_t i = 0; i < src.size(); ++i) out.data[i] = src[i] != 0;
    });
  }
  return one(std::move(out));
}

Result<Outputs> cast(const OpContext& c) {
  const Attribute* to = c.attr("to");
  if (!to || to->kind != Attribute::Kind::kInt) return c.invalid("attribute 'to' is required");
  NPU_ASSIGN_OR_RETURN(DType dtype, dtype_from_onnx_type(c, to->i));
  return cast_to(c, dtype, to->i == 9);
}

Result<Outputs> cast_like(const OpContext& c) {
  NPU_ASSIGN_OR_RETURN(const Tensor* like, c.need(1));
  return cast_to(c, like->dtype, false);
}

}  // namespace

void register_elementwise(KernelTable& t) {
  t["Exp"] = unary_float<Exp>;
  t["Log"] = unary_float<Log>;
  t["Sqrt"] = unary_float<Sqrt>;
  t["Reciprocal"] = unary_float<Reciprocal>;
  t["Floor"] = unary_float<Floor>;
  t["Ceil"] = unary_float<Ceil>;
  t["Round"] = unary_float<Round>;
  t["Sigmoid"] = unary_float<Sigmoid>;
  t["Tanh"] = unary_float<Tanh>;
  t["Softplus"] = unary_float<Softplus>;
  t["Softsign"] = unary_float<Softsign>;
  t["HardSwish"] = unary_float<HardSwish>;
  t["Erf"] = unary_float<Erf>;
  t["Sin"] = unary_float<Sin>;
  t["Cos"] = unary_float<Cos>;
  t["Tan"] = unary_float<Tan>;
  t["Asin"] = unary_float<Asin>;
  t["Acos"] = unary_float<Acos>;
  t["Atan"] = unary_float<Atan>;
  t["Sinh"] = unary_float<Sinh>;
  t["Cosh"] = unary_float<Cosh>;
  t["Asinh"] = unary_float<Asinh>;
  t["Acosh"] = unary_float<Acosh>;
  t["Atanh"] = unary_float<Atanh>;
  t["LeakyRelu"] = unary_float<LeakyRelu>;
  t["ThresholdedRelu"] = unary_float<ThresholdedRelu>;
  t["Elu"] = unary_float<Elu>;
  t["Celu"] = unary_float<Celu>;
  t["Selu"] = unary_float<Selu>;
  t["HardSigmoid"] = unary_float<HardSigmoid>;
  t["Shrink"] = unary_float<Shrink>;
  t["Abs"] = unary_numeric<Abs>;
  t["Neg"] = unary_numeric<Neg>;
  t["Sign"] = unary_numeric<Sign>;
  t["Relu"] = unary_numeric<Relu>;
  t["IsNaN"] = predicate<IsNaN>;
  t["IsInf"] = predicate<IsInf>;
  t["Not"] = not_op;
  t["Add"] = binary_arith<AddF>;
  t["Sub"] = binary_arith<SubF>;
  t["Mul"] = binary_arith<MulF>;
  t["Div"] = binary_arith<DivF>;
  t["Mod"] = binary_arith<ModF>;
  t["Pow"] = pow_op;
  t["PRelu"] = prelu;
  t["Sum"] = variadic<AddF>;
  t["Mean"] = variadic<AddF, true>;
  t["Max"] = variadic<MaxF>;
  t["Min"] = variadic<MinF>;
  t["Equal"] = compare<EqualF>;
  t["Less"] = compare<LessF>;
  t["LessOrEqual"] = compare<LessEqF>;
  t["Greater"] = compare<GreaterF>;
  t["GreaterOrEqual"] = compare<GreaterEqF>;
  t["And"] = compare<AndF>;
  t["Or"] = compare<OrF>;
  t["Xor"] = compare<XorF>;
  t["BitShift"] = bitshift;
  t["Where"] = where;
  t["Clip"] = clip;
  t["Cast"] = cast;
  t["CastLike"] = cast_like;
}

}  // namespace npu::host
