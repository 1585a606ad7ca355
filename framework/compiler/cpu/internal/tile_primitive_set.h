// The tile primitives' templates (framework/compiler/cpu/tile_primitives.h, over the calling
// convention of tile_arg.h), instantiated once per instruction set: tile_primitives.cc for
// the baseline, tile_primitives_avx2.cc built with -mavx2 (never with FMA: the primitives
// must not contract). Every template takes the set's tag type `Isa` first, so each build's
// instantiations are distinct symbols, and everything they call is inlined
// (SLUICE_ELEMENTWISE_INLINE): no out-of-line code built for one set can be linked into
// another's callers. Include only from those two files.
#ifndef SLUICE_FRAMEWORK_COMPILER_CPU_INTERNAL_TILE_PRIMITIVE_SET_H_
#define SLUICE_FRAMEWORK_COMPILER_CPU_INTERNAL_TILE_PRIMITIVE_SET_H_

#include <cstdint>

#include "core/data_type.h"
#include "framework/compiler/cpu/tile_arg.h"
#include "framework/compiler/subgraph.h"
#include "ops/cpu/elementwise_functions.h"
#include "ops/cpu/elementwise_loops.h"

namespace sluice::framework::compiler::cpu::internal {

namespace ew = ::sluice::ops::internal::elementwise;

// out[0..n) = v. A plain loop, always inlined, rather than std::fill: a library template
// instantiated in the AVX2 build could be shared with baseline callers.
template <typename T>
SLUICE_ELEMENTWISE_INLINE void Fill(T* out, int64_t n, T v) {
  for (int64_t i = 0; i < n; ++i) out[i] = v;
}

// out[i] = fn(x[i]); a broadcast argument is one value.
template <typename Isa, typename T, typename Fn>
void Unary(const TileArg* a, void* out, int64_t n, const double*) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  T* __restrict o = static_cast<T*>(out);
  const Fn fn;
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = fn(x[i]);
  } else {
    Fill(o, n, fn(x[0]));
  }
}

// The sqrt kernel's own loop (explicit SIMD square roots).
template <typename Isa, typename T>
void Sqrt(const TileArg* a, void* out, int64_t n, const double*) {
  const T* x = static_cast<const T*>(a[0].data);
  T* o = static_cast<T*>(out);
  if (a[0].stride == 1) {
    ew::RunSqrt(x, o, n);
  } else {
    T v;
    ew::RunSqrt(x, &v, 1);
    Fill(o, n, v);
  }
}

// out[i] = fn(x[i], y[i]), each argument contiguous or broadcast.
template <typename Isa, typename T, typename Fn>
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
    Fill(o, n, fn(x[0], y[0]));
  }
}

// out[i] = fn(x[i], y[i], z[i]).
template <typename Isa, typename T, typename Fn>
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
template <typename Isa, typename T>
void Scale(const TileArg* a, void* out, int64_t n, const double* params) {
  const T* __restrict x = static_cast<const T*>(a[0].data);
  T* __restrict o = static_cast<T*>(out);
  const T s = static_cast<T>(params[0]);
  const T b = static_cast<T>(params[1]);
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = s * x[i] + b;
  } else {
    Fill(o, n, s * x[0] + b);
  }
}

template <typename Isa, typename To, typename From>
void Cast(const TileArg* a, void* out, int64_t n, const double*) {
  const From* __restrict x = static_cast<const From*>(a[0].data);
  To* __restrict o = static_cast<To*>(out);
  if (a[0].stride == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<To>(x[i]);
  } else {
    Fill(o, n, static_cast<To>(x[0]));
  }
}

struct NegFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return -x;
  }
};
struct CopyFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return x;
  }
};
// sgd's update: p - lr * g.
struct SgdFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T p, T g, T lr) const {
    return p - lr * g;
  }
};

template <typename Isa, typename T>
TilePrimitive Find(ExprOp op) {
  switch (op) {
    case ExprOp::kAdd:
      return &Binary<Isa, T, ew::AddFn>;
    case ExprOp::kSub:
      return &Binary<Isa, T, ew::SubFn>;
    case ExprOp::kMul:
      return &Binary<Isa, T, ew::MulFn>;
    case ExprOp::kDiv:
      return &Binary<Isa, T, ew::DivFn>;
    case ExprOp::kMax:
      return &Binary<Isa, T, ew::MaxFn>;
    case ExprOp::kMin:
      return &Binary<Isa, T, ew::MinFn>;
    case ExprOp::kRelu:
      return &Unary<Isa, T, ew::ReluFn>;
    case ExprOp::kSigmoid:
      return &Unary<Isa, T, ew::SigmoidFn>;
    case ExprOp::kTanh:
      return &Unary<Isa, T, ew::TanhFn>;
    case ExprOp::kExp:
      return &Unary<Isa, T, ew::ExpFn>;
    case ExprOp::kLog:
      return &Unary<Isa, T, ew::LogFn>;
    case ExprOp::kSqrt:
      return &Sqrt<Isa, T>;
    case ExprOp::kSquare:
      return &Unary<Isa, T, ew::SquareFn>;
    case ExprOp::kNeg:
      return &Unary<Isa, T, NegFn>;
    case ExprOp::kCopy:
      return &Unary<Isa, T, CopyFn>;
    case ExprOp::kScale:
      return &Scale<Isa, T>;
    case ExprOp::kCast:
      return nullptr;  // FindTilePrimitive
    case ExprOp::kReluGrad:
      return &Binary<Isa, T, ew::ReluGradFn>;
    case ExprOp::kSigmoidGrad:
      return &Binary<Isa, T, ew::SigmoidGradFn>;
    case ExprOp::kTanhGrad:
      return &Binary<Isa, T, ew::TanhGradFn>;
    case ExprOp::kExpGrad:
      return &Binary<Isa, T, ew::ExpGradFn>;
    case ExprOp::kLogGrad:
      return &Binary<Isa, T, ew::LogGradFn>;
    case ExprOp::kSqrtGrad:
      return &Binary<Isa, T, ew::SqrtGradFn>;
    case ExprOp::kSquareGrad:
      return &Binary<Isa, T, ew::SquareGradFn>;
    case ExprOp::kDivGradY:
      return &Ternary<Isa, T, ew::GradDivY>;
    case ExprOp::kMaxGradX:
      return &Ternary<Isa, T, ew::GradMaxX>;
    case ExprOp::kMaxGradY:
      return &Ternary<Isa, T, ew::GradMaxY>;
    case ExprOp::kMinGradX:
      return &Ternary<Isa, T, ew::GradMinX>;
    case ExprOp::kMinGradY:
      return &Ternary<Isa, T, ew::GradMinY>;
    case ExprOp::kSgd:
      return &Ternary<Isa, T, SgdFn>;
  }
  return nullptr;
}

template <typename Isa>
TilePrimitive FindForSet(ExprOp op, DataType dtype, DataType arg_dtype) {
  if (op == ExprOp::kCast) {
    if (dtype == DataType::kF32 && arg_dtype == DataType::kF64) return &Cast<Isa, float, double>;
    if (dtype == DataType::kF64 && arg_dtype == DataType::kF32) return &Cast<Isa, double, float>;
    if (dtype == DataType::kF32 && arg_dtype == DataType::kF32) return &Cast<Isa, float, float>;
    if (dtype == DataType::kF64 && arg_dtype == DataType::kF64) return &Cast<Isa, double, double>;
    return nullptr;
  }
  if (dtype != arg_dtype) return nullptr;
  if (dtype == DataType::kF32) return Find<Isa, float>(op);
  if (dtype == DataType::kF64) return Find<Isa, double>(op);
  return nullptr;
}

// The AVX2 build's FindForSet (tile_primitives_avx2.cc); null where it is not built.
TilePrimitive FindAvx2TilePrimitive(ExprOp op, DataType dtype, DataType arg_dtype);

}  // namespace sluice::framework::compiler::cpu::internal

#endif  // SLUICE_FRAMEWORK_COMPILER_CPU_INTERNAL_TILE_PRIMITIVE_SET_H_
