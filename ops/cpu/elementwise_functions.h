// The element functions of the elementwise ops (ops/elementwise_ops.cc): the forward ops, the
// gradient contributions of the binary ops, and the unary ops' gradients. Shared by the host
// kernels (ops/cpu/elementwise_kernels.cc) and by the subgraph compiler's cpu back end, so a
// compiled op rounds exactly as the op does unfused. Stateless; thread-safe.
#ifndef SLUICE_OPS_CPU_ELEMENTWISE_FUNCTIONS_H_
#define SLUICE_OPS_CPU_ELEMENTWISE_FUNCTIONS_H_

#include <cmath>
#include <type_traits>

#include "ops/cpu/elementwise_loops.h"

namespace sluice::ops::internal::elementwise {

// ---- Element functions ----

struct AddFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return x + y;
  }
};
struct SubFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return x - y;
  }
};
struct MulFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return x * y;
  }
};
struct DivFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return x / y;
  }
};
// Which argument max and min return, and so which one their gradient goes to: X on a tie
// and X whenever X is NaN; Y when Y wins or only Y is NaN. A NaN in either argument is
// therefore the result (NumPy's maximum/minimum, ONNX Max/Min), whatever the argument order,
// and exactly one argument receives each element's gradient. Integers have no NaN, so
// integer max/min are the plain comparison. Bitwise `|` rather than `||`: no branch for the
// vectorizer to keep.
template <typename T>
SLUICE_ELEMENTWISE_INLINE bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}
template <typename T>
SLUICE_ELEMENTWISE_INLINE bool MaxTakesX(T x, T y) {
  return (x >= y) | IsNan(x);
}
template <typename T>
SLUICE_ELEMENTWISE_INLINE bool MinTakesX(T x, T y) {
  return (x <= y) | IsNan(x);
}

struct MaxFn {  // NaN propagates (MaxTakesX)
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return MaxTakesX(x, y) ? x : y;
  }
};
struct MinFn {  // NaN propagates (MinTakesX)
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y) const {
    return MinTakesX(x, y) ? x : y;
  }
};

// clip: min(max(x, lo), hi) through MaxTakesX and MinTakesX, so a NaN x stays NaN (the
// bounds are never NaN: ops/internal/clip_bounds.h refuses them) and x on a bound is x.
template <typename T>
struct ClipFn {
  T lo;
  T hi;
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    const T m = MaxTakesX(x, lo) ? x : lo;
    return MinTakesX(m, hi) ? m : hi;
  }
};
// clip_grad: g where clip returned x itself (both max and min took x: lo <= x <= hi, or x is
// NaN), else 0.
template <typename T>
struct ClipGradFn {
  T lo;
  T hi;
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T g) const {
    return (MaxTakesX(x, lo) & MinTakesX(x, hi)) ? g : T(0);
  }
};

// Gradient contributions c(x, y, g) of one output element to XGrad and YGrad.
struct GradG {  // d(x + y)/dx, d(x - y)/dx, d(x + y)/dy
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T, T, T g) const {
    return g;
  }
};
struct GradNegG {  // d(x - y)/dy
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T, T, T g) const {
    return -g;
  }
};
struct GradMulX {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T, T y, T g) const {
    return g * y;
  }
};
struct GradMulY {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T, T g) const {
    return g * x;
  }
};
struct GradDivX {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T, T y, T g) const {
    return g / y;
  }
};
struct GradDivY {  // -g x / y^2, as (g / y) (x / y): no overflow of y^2
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y, T g) const {
    return -(g / y) * (x / y);
  }
};
// max and min route g to the argument the forward op returned (MaxTakesX / MinTakesX): X
// on a tie and when X is NaN, Y when only Y is NaN.
struct GradMaxX {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y, T g) const {
    return MaxTakesX(x, y) ? g : T(0);
  }
};
struct GradMaxY {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y, T g) const {
    return MaxTakesX(x, y) ? T(0) : g;
  }
};
struct GradMinX {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y, T g) const {
    return MinTakesX(x, y) ? g : T(0);
  }
};
struct GradMinY {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T y, T g) const {
    return MinTakesX(x, y) ? T(0) : g;
  }
};

struct ReluFn {  // NaN stays NaN
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct SigmoidFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return Sigmoid(x);
  }
};
struct TanhFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return Tanh(x);
  }
};
struct ExpFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return Exp(x);
  }
};
struct LogFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return Log(x);
  }
};
struct SqrtFn {};  // RunSqrt
struct SquareFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return x * x;
  }
};
struct AbsFn {  // NaN stays NaN; |-0| = +0
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return std::abs(x);
  }
};
struct NegFn {
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const {
    return -x;
  }
};
// pow's factor is an attribute: the functor carries it.
template <typename T>
struct PowFn {
  T factor;
  SLUICE_ELEMENTWISE_INLINE T operator()(T x) const { return std::pow(x, factor); }
};

// Unary gradients fn(v, g), v being Out or X as the grad op's schema says.
struct ReluGradFn {  // v = Out
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T out, T g) const {
    return out > T(0) ? g : T(0);
  }
};
struct SigmoidGradFn {  // v = Out
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T out, T g) const {
    return g * out * (T(1) - out);
  }
};
struct TanhGradFn {  // v = Out
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T out, T g) const {
    return g * (T(1) - out * out);
  }
};
struct ExpGradFn {  // v = Out
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T out, T g) const {
    return g * out;
  }
};
struct LogGradFn {  // v = X
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T g) const {
    return g / x;
  }
};
struct SqrtGradFn {  // v = Out
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T out, T g) const {
    return T(0.5) * g / out;
  }
};
struct SquareGradFn {  // v = X
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T g) const {
    return T(2) * x * g;
  }
};
struct AbsGradFn {  // v = X: sign(X) g, 0 at X = 0, NaN where X is NaN
  template <typename T>
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T g) const {
    return x > T(0) ? g : (x < T(0) ? -g : (x == T(0) ? T(0) : x));
  }
};
template <typename T>
struct PowGradFn {  // v = X: factor X^(factor-1) g, and 0 for factor 0 (X^0 is constant,
                    // also at X = 0, where the formula would give 0 * inf)
  T factor;
  SLUICE_ELEMENTWISE_INLINE T operator()(T x, T g) const {
    return factor == T(0) ? T(0) : factor * std::pow(x, factor - T(1)) * g;
  }
};

}  // namespace sluice::ops::internal::elementwise

#endif  // SLUICE_OPS_CPU_ELEMENTWISE_FUNCTIONS_H_
