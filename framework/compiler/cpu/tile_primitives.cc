#include "framework/compiler/cpu/tile_primitives.h"

#include <algorithm>

#include "ops/cpu/elementwise_functions.h"
#include "ops/cpu/elementwise_loops.h"

namespace sluice::framework::compiler::cpu {
namespace {

namespace ew = ::sluice::ops::internal::elementwise;

// out[i] = fn(x[i]); a broadcast argument is one value.
template <typename T, typename Fn>
void Unary(const TileArg* a, void* out, int64_t n, const double*) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  T* __restrict o = static_cast<T*>(out);
  const Fn fn;
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i]);
  } else {
    std::fill(o, o + n, fn(x[0]));
  }
}

// The sqrt kernel's own loop (explicit SIMD square roots).
template <typename T>
void Sqrt(const TileArg* a, void* out, int64_t n, const double*) {
  const T* x = static_cast<const T*>(a[0].data);
  T* o = static_cast<T*>(out);
  if (a[0].stride == 1) {
    ew::RunSqrt(x, o, n);
  } else {
    T v;
    ew::RunSqrt(x, &v, 1);
    std::fill(o, o + n, v);
  }
}

// out[i] = fn(x[i], y[i]), each argument contiguous or broadcast.
template <typename T, typename Fn>
void Binary(const TileArg* a, void* out, int64_t n, const double*) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  const T* __restrict y = static_cast<const T*>(a[1].data);
  T* __restrict o = static_cast<T*>(out);
  const Fn fn;
  if (a[0].stride == 1 && a[1].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], y[i]);
  } else if (a[0].stride == 1) {
    const T yv = y[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], yv);
  } else if (a[1].stride == 1) {
    const T xv = x[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fn(xv, y[i]);
  } else {
    std::fill(o, o + n, fn(x[0], y[0]));
  }
}

// out[i] = fn(x[i], y[i], z[i]).
template <typename T, typename Fn>
void Ternary(const TileArg* a, void* out, int64_t n, const double*) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  const T* __restrict y = static_cast<const T*>(a[1].data);
  const T* __restrict z = static_cast<const T*>(a[2].data);
  T* __restrict o = static_cast<T*>(out);
  const Fn fn;
  if (a[0].stride == 1 && a[1].stride == 1 && a[2].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], y[i], z[i]);
  } else if (a[0].stride == 1 && a[1].stride == 1) {
    const T zv = z[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i], y[i], zv);
  } else {
    const int64_t sx = a[0].stride, sy = a[1].stride, sz = a[2].stride;
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i * sx], y[i * sy], z[i * sz]);
  }
}

// x * scale + bias, the constants rounded to T first (the scale kernel's rule).
template <typename T>
void Scale(const TileArg* a, void* out, int64_t n, const double* params) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  T* __restrict o = static_cast<T*>(out);
  const T s = static_cast<T>(params[0]);
  const T b = static_cast<T>(params[1]);
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = s * x[i] + b;
  } else {
    std::fill(o, o + n, s * x[0] + b);
  }
}

template <typename To, typename From>
void Cast(const TileArg* a, void* out, int64_t n, const double*) {
  const From* __restrict x = static_cast<const From*>(a[0].data);
  To* __restrict o = static_cast<To*>(out);
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<To>(x[i]);
  } else {
    std::fill(o, o + n, static_cast<To>(x[0]));
  }
}

struct NegFn {
  template <typename T>
  T operator()(T x) const {
    return -x;
  }
};
struct CopyFn {
  template <typename T>
  T operator()(T x) const {
    return x;
  }
};
// sgd's update: p - lr * g.
struct SgdFn {
  template <typename T>
  T operator()(T p, T g, T lr) const {
    return p - lr * g;
  }
};

template <typename T>
TilePrimitive Find(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd:
      return &Binary<T, ew::AddFn>;
    case ExprOp::kSub:
      return &Binary<T, ew::SubFn>;
    case ExprOp::kMul:
      return &Binary<T, ew::MulFn>;
    case ExprOp::kDiv:
      return &Binary<T, ew::DivFn>;
    case ExprOp::kMax:
      return &Binary<T, ew::MaxFn>;
    case ExprOp::kMin:
      return &Binary<T, ew::MinFn>;
    case ExprOp::kRelu:
      return &Unary<T, ew::ReluFn>;
    case ExprOp::kSigmoid:
      return &Unary<T, ew::SigmoidFn>;
    case ExprOp::kTanh:
      return &Unary<T, ew::TanhFn>;
    case ExprOp::kExp:
      return &Unary<T, ew::ExpFn>;
    case ExprOp::kLog:
      return &Unary<T, ew::LogFn>;
    case ExprOp::kSqrt:
      return &Sqrt<T>;
    case ExprOp::kSquare:
      return &Unary<T, ew::SquareFn>;
    case ExprOp::kNeg:
      return &Unary<T, NegFn>;
    case ExprOp::kCopy:
      return &Unary<T, CopyFn>;
    case ExprOp::kScale:
      return &Scale<T>;
    case ExprOp::kCast:
      return nullptr;  // FindTilePrimitive
    case ExprOp::kReluGrad:
      return &Binary<T, ew::ReluGradFn>;
    case ExprOp::kSigmoidGrad:
      return &Binary<T, ew::SigmoidGradFn>;
    case ExprOp::kTanhGrad:
      return &Binary<T, ew::TanhGradFn>;
    case ExprOp::kExpGrad:
      return &Binary<T, ew::ExpGradFn>;
    case ExprOp::kLogGrad:
      return &Binary<T, ew::LogGradFn>;
    case ExprOp::kSqrtGrad:
      return &Binary<T, ew::SqrtGradFn>;
    case ExprOp::kSquareGrad:
      return &Binary<T, ew::SquareGradFn>;
    case ExprOp::kDivGradY:
      return &Ternary<T, ew::GradDivY>;
    case ExprOp::kMaxGradX:
      return &Ternary<T, ew::GradMaxX>;
    case ExprOp::kMaxGradY:
      return &Ternary<T, ew::GradMaxY>;
    case ExprOp::kMinGradX:
      return &Ternary<T, ew::GradMinX>;
    case ExprOp::kMinGradY:
      return &Ternary<T, ew::GradMinY>;
    case ExprOp::kSgd:
      return &Ternary<T, SgdFn>;
  }
  return nullptr;
}

}  // namespace

TilePrimitive FindTilePrimitive(ExprOp op, DataType dtype, DataType arg_dtype) {
  if (op == ExprOp::kCast) {
    if (dtype == DataType::kF32 && arg_dtype == DataType::kF64) return &Cast<float, double>;
    if (dtype == DataType::kF64 && arg_dtype == DataType::kF32) return &Cast<double, float>;
    if (dtype == DataType::kF32 && arg_dtype == DataType::kF32) return &Cast<float, float>;
    if (dtype == DataType::kF64 && arg_dtype == DataType::kF64) return &Cast<double, double>;
    return nullptr;
  }
  if (dtype != arg_dtype) return nullptr;
  if (dtype == DataType::kF32) return Find<float>(op);
  if (dtype == DataType::kF64) return Find<double>(op);
  return nullptr;
}

}  // namespace sluice::framework::compiler::cpu
