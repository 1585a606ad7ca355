// Loops of the elementwise host kernels (ops/cpu/elementwise_kernels.cc): branch-free f32
// exp/log/tanh/sigmoid that g++ vectorizes, the broadcast plan (the output's dimensions
// collapsed to the fewest runs of rows), and row loops over __restrict pointers with
// compile-time input strides (0: a broadcast scalar, 1: contiguous) for the forward ops and
// the gradient passes (elementwise, accumulated into a row, reduced over a row).
//
// Aliasing: an output may be the same tensor as an input (in-place use); such an input then
// has the output's shape and layout, so element i of the output is computed from element i of
// that input. The forward loops take that into account (the *MayAlias variants); the
// gradient kernels copy aliased inputs first.
#ifndef SLUICE_OPS_CPU_ELEMENTWISE_LOOPS_H_
#define SLUICE_OPS_CPU_ELEMENTWISE_LOOPS_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/inlined_vector.h"
#include "core/shape.h"

// The element math is always inlined: the subgraph compiler builds its tile primitives for
// several instruction sets from these functions, and an out-of-line copy built for one set
// must never be what a caller built for another ends up calling.
#define SLUICE_ELEMENTWISE_INLINE inline __attribute__((always_inline))

namespace sluice::ops::internal::elementwise {

// ---------------------------------------------------------------------------------------
// f32 math. The libm functions are scalar calls, so a loop of them does not vectorize; these
// are the Cephes single-precision algorithms written without branches (selects through bit
// masks, which the optimizer cannot turn back into branches around the arithmetic). Max
// error over all 2^32 f32 inputs, against the exact result: exp 0.99 ulp, log 0.83 ulp, tanh
// 1.51 ulp, sigmoid 2.40 ulp; special values (inf, NaN, 0, negative log) as libm. f64 uses
// libm (not vectorized).
// ---------------------------------------------------------------------------------------

// c ? a : b, computed with bit masks.
SLUICE_ELEMENTWISE_INLINE float Select(bool c, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & mask) |
                              (std::bit_cast<uint32_t>(b) & ~mask));
}

// e^x: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two parts so n * hi is exact), a
// degree-6 polynomial for e^r, and 2^n applied as two factors so that results in the
// subnormal range are rounded once. Outside [-104, 89] the result is 0 or inf.
SLUICE_ELEMENTWISE_INLINE float ExpF32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: t = v + kShifter rounds v to an int
  const float t = x * kLog2e + kShifter;
  const float nf = t - kShifter;
  // n from t's low mantissa bits; meaningless (but harmless) outside the range kept below.
  const int32_t n =
      static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kShifter));
  float r = x - nf * kLn2Hi;
  r = r - nf * kLn2Lo;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  float result = p * s1 * s2;
  result = Select(x > 89.0f, std::numeric_limits<float>::infinity(), result);
  result = Select(x < -104.0f, 0.0f, result);
  return Select(x != x, x, result);
}

// log(x): x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9 polynomial for log(m), and e
// ln2 added in two parts. Subnormal x are scaled into the normal range first.
SLUICE_ELEMENTWISE_INLINE float LogF32(float x) {
  const bool subnormal = x < 0x1p-126f;  // also x <= 0, replaced below
  const float xs = x * Select(subnormal, 0x1p23f, 1.0f);
  const uint32_t bits = std::bit_cast<uint32_t>(xs);
  int32_t e =
      static_cast<int32_t>((bits >> 23) & 0xffu) - 126 - 23 * static_cast<int32_t>(subnormal);
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);  // [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e -= static_cast<int32_t>(low);
  m = m * Select(low, 2.0f, 1.0f) - 1.0f;  // exact
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  const float ef = static_cast<float>(e);
  y += -2.12194440e-4f * ef;
  y += -0.5f * z;
  float result = m + y;
  result += 0.693359375f * ef;
  result = Select(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), result);
  result = Select(x == 0.0f, -std::numeric_limits<float>::infinity(), result);
  result = Select(x == std::numeric_limits<float>::infinity(), x, result);
  return Select(x != x, x, result);
}

// tanh(x): an odd polynomial for |x| < 0.625, else (1 - e) / (1 + e) with e = e^(-2|x|).
SLUICE_ELEMENTWISE_INLINE float TanhF32(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float e = ExpF32(-2.0f * ax);
  const float large = std::copysign((1.0f - e) / (1.0f + e), x);
  return Select(ax < 0.625f, small, large);
}

// 1 / (1 + e^-x), as e / (1 + e) with e = e^x for x < 0: no overflow, and accurate where the
// result is tiny.
SLUICE_ELEMENTWISE_INLINE float SigmoidF32(float x) {
  const float e = ExpF32(-std::fabs(x));
  return Select(x >= 0.0f, 1.0f, e) / (1.0f + e);
}

template <typename T>
SLUICE_ELEMENTWISE_INLINE T Exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return ExpF32(x);
  } else {
    return std::exp(x);
  }
}
template <typename T>
SLUICE_ELEMENTWISE_INLINE T Log(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return LogF32(x);
  } else {
    return std::log(x);
  }
}
template <typename T>
SLUICE_ELEMENTWISE_INLINE T Tanh(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return TanhF32(x);
  } else {
    return std::tanh(x);
  }
}
template <typename T>
SLUICE_ELEMENTWISE_INLINE T Sigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return SigmoidF32(x);
  } else {
    const T e = std::exp(-std::fabs(x));
    return (x >= T(0) ? T(1) : e) / (T(1) + e);
  }
}

// ---------------------------------------------------------------------------------------
// Broadcast plan.
// ---------------------------------------------------------------------------------------

// The output of a broadcasting binary op as rows: its dimensions with size-1 dimensions
// dropped and neighbours merged wherever X and Y are both contiguous across them, with the
// element strides of X and Y per dimension (0 where broadcast). At least one dimension; the
// innermost strides are 0 or 1. Same shapes give one row of everything; a scalar X gives one
// row with X stride 0. Value type.
struct BroadcastPlan {
  absl::InlinedVector<int64_t, 6> dims;
  absl::InlinedVector<int64_t, 6> x_strides;
  absl::InlinedVector<int64_t, 6> y_strides;
  int64_t size = 0;  // elements of the output

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t row_length() const { return dims.back(); }
  int64_t x_inner() const { return x_strides.back(); }
  int64_t y_inner() const { return y_strides.back(); }
};

// `out` must be the broadcast of `x` and `y`.
inline BroadcastPlan MakeBroadcastPlan(const Shape& x, const Shape& y, const Shape& out) {
  const Shape::Dims sx = BroadcastStrides(x, out);
  const Shape::Dims sy = BroadcastStrides(y, out);
  BroadcastPlan plan;
  plan.size = out.NumElements();
  for (int d = 0; d < out.rank(); ++d) {
    const int64_t n = out.dim(d);
    if (n == 1) continue;
    if (!plan.dims.empty() && plan.x_strides.back() == sx[d] * n &&
        plan.y_strides.back() == sy[d] * n) {
      plan.dims.back() *= n;
      plan.x_strides.back() = sx[d];
      plan.y_strides.back() = sy[d];
      continue;
    }
    plan.dims.push_back(n);
    plan.x_strides.push_back(sx[d]);
    plan.y_strides.push_back(sy[d]);
  }
  if (plan.dims.empty()) {  // one element
    plan.dims.push_back(1);
    plan.x_strides.push_back(0);
    plan.y_strides.push_back(0);
  }
  return plan;
}

// Calls row(x_offset, y_offset, out_offset) for each row of the plan, in order; rows are
// plan.row_length() elements long and out_offset advances by that much.
template <typename RowFn>
inline void ForEachRow(const BroadcastPlan& plan, RowFn&& row) {
  const int outer_rank = plan.rank() - 1;
  const int64_t n = plan.row_length();
  if (outer_rank == 0) {
    row(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  int64_t rows = 1;
  for (int d = 0; d < outer_rank; ++d) rows *= plan.dims[d];
  absl::InlinedVector<int64_t, 6> index(outer_rank, 0);
  int64_t xo = 0, yo = 0;
  for (int64_t r = 0; r < rows; ++r) {
    row(xo, yo, r * n);
    for (int d = outer_rank - 1; d >= 0; --d) {
      xo += plan.x_strides[d];
      yo += plan.y_strides[d];
      if (++index[d] < plan.dims[d]) break;
      xo -= plan.x_strides[d] * plan.dims[d];
      yo -= plan.y_strides[d] * plan.dims[d];
      index[d] = 0;
    }
  }
}

// Calls fn(std::integral_constant<int, SX>{}, std::integral_constant<int, SY>{}) for the
// plan's innermost strides.
template <typename Fn>
inline void DispatchInnerStrides(const BroadcastPlan& plan, Fn&& fn) {
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  const bool x1 = plan.x_inner() != 0;
  const bool y1 = plan.y_inner() != 0;
  if (x1 && y1) {
    fn(One{}, One{});
  } else if (x1) {
    fn(One{}, Zero{});
  } else if (y1) {
    fn(Zero{}, One{});
  } else {
    fn(Zero{}, Zero{});
  }
}

// ---------------------------------------------------------------------------------------
// Forward rows: out[i] = op(x[i * SX], y[i * SY]) for i < n, SX and SY in {0, 1}.
// ---------------------------------------------------------------------------------------

template <int SX, int SY, typename T, typename Op>
inline void BinaryRow(const T* __restrict x, const T* __restrict y, T* __restrict out, int64_t n,
                      Op op) {
  if constexpr (SX == 0 && SY == 0) {
    const T v = op(x[0], y[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  } else if constexpr (SX == 0) {
    const T a = x[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(a, y[i]);
  } else if constexpr (SY == 0) {
    const T b = y[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(x[i], b);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = op(x[i], y[i]);
  }
}

// The same for `out` being X or Y (then that input has stride 1 and element i is read
// before out[i] is written; the broadcast scalar is read before the loop).
template <int SX, int SY, typename T, typename Op>
inline void BinaryRowMayAlias(const T* x, const T* y, T* out, int64_t n, Op op) {
  if constexpr (SX == 0 && SY == 0) {
    const T v = op(x[0], y[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  } else if constexpr (SX == 0) {
    const T a = x[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(a, y[i]);
  } else if constexpr (SY == 0) {
    const T b = y[0];
    for (int64_t i = 0; i < n; ++i) out[i] = op(x[i], b);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = op(x[i], y[i]);
  }
}

template <typename T, typename Op>
inline void RunBinary(const BroadcastPlan& plan, const T* x, const T* y, T* out, Op op) {
  const int64_t n = plan.row_length();
  const bool alias = out == x || out == y;
  DispatchInnerStrides(plan, [&](auto sx, auto sy) {
    constexpr int SX = decltype(sx)::value;
    constexpr int SY = decltype(sy)::value;
    if (alias) {
      ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
        BinaryRowMayAlias<SX, SY>(x + xo, y + yo, out + oo, n, op);
      });
    } else {
      ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
        BinaryRow<SX, SY>(x + xo, y + yo, out + oo, n, op);
      });
    }
  });
}

// Operands of one shape: a single contiguous row, no plan needed.
template <typename T, typename Op>
inline void RunBinarySameShape(const T* x, const T* y, T* out, int64_t n, Op op) {
  if (out == x || out == y) {
    BinaryRowMayAlias<1, 1>(x, y, out, n, op);
  } else {
    BinaryRow<1, 1>(x, y, out, n, op);
  }
}

// ---------------------------------------------------------------------------------------
// Unary loops.
// ---------------------------------------------------------------------------------------

template <typename T, typename Fn>
inline void UnaryLoop(const T* __restrict x, T* __restrict out, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i) out[i] = fn(x[i]);
}
template <typename T, typename Fn>
inline void UnaryLoopInPlace(T* data, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i) data[i] = fn(data[i]);
}
template <typename T, typename Fn>
inline void RunUnary(const T* x, T* out, int64_t n, Fn fn) {
  if (x == out) {
    UnaryLoopInPlace(out, n, fn);
  } else {
    UnaryLoop(x, out, n, fn);
  }
}

// sqrt: std::sqrt sets errno for negative inputs, which keeps g++ from vectorizing it unless
// the whole build uses -fno-math-errno; SSE2 has the instruction. Safe for out == x.
SLUICE_ELEMENTWISE_INLINE void RunSqrt(const float* x, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(out + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) out[i] = std::sqrt(x[i]);
}
SLUICE_ELEMENTWISE_INLINE void RunSqrt(const double* x, double* out, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 2 <= n; i += 2) _mm_storeu_pd(out + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
#endif
  for (; i < n; ++i) out[i] = std::sqrt(x[i]);
}

// XGrad[i] = fn(v[i], g[i]) (v is X or Out); XGrad may be either input.
template <typename T, typename Fn>
inline void UnaryGradLoop(const T* __restrict v, const T* __restrict g, T* __restrict dx, int64_t n,
                          Fn fn) {
  for (int64_t i = 0; i < n; ++i) dx[i] = fn(v[i], g[i]);
}
template <typename T, typename Fn>
inline void UnaryGradLoopMayAlias(const T* v, const T* g, T* dx, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i) dx[i] = fn(v[i], g[i]);
}
// dx[i] += fn(v[i], g[i]) (add-to: vm::kAddToAttr). The sum is dx + fn(...) in T, as a
// `sum` op of the two would add them, so the result is bit-identical.
template <typename T, typename Fn>
inline void UnaryGradAddLoop(const T* v, const T* g, T* dx, int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i) {
    const T term = fn(v[i], g[i]);
    dx[i] = dx[i] + term;
  }
}
template <typename T, typename Fn>
inline void RunUnaryGrad(const T* v, const T* g, T* dx, int64_t n, Fn fn) {
  if (dx == v || dx == g) {
    UnaryGradLoopMayAlias(v, g, dx, n, fn);
  } else {
    UnaryGradLoop(v, g, dx, n, fn);
  }
}

// ---------------------------------------------------------------------------------------
// Gradient rows of the binary ops. A pass computes the gradient of one input, `target`
// (XGrad or YGrad), from per-element contributions c(x, y, g) over the output's elements,
// summed over the dimensions where that input was broadcast. Inputs and target must not
// alias (the kernels copy aliased inputs first).
// ---------------------------------------------------------------------------------------

// target[i] = c(...): the input was not broadcast, the target has the output's layout.
template <int SX, int SY, typename T, typename C>
inline void GradAssignRow(const T* __restrict x, const T* __restrict y, const T* __restrict g,
                          T* __restrict target, int64_t n, C c) {
  if constexpr (SX == 0 && SY == 0) {
    const T a = x[0], b = y[0];
    for (int64_t i = 0; i < n; ++i) target[i] = c(a, b, g[i]);
  } else if constexpr (SX == 0) {
    const T a = x[0];
    for (int64_t i = 0; i < n; ++i) target[i] = c(a, y[i], g[i]);
  } else if constexpr (SY == 0) {
    const T b = y[0];
    for (int64_t i = 0; i < n; ++i) target[i] = c(x[i], b, g[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) target[i] = c(x[i], y[i], g[i]);
  }
}

// target[i] += c(...): the target is contiguous along the row and broadcast over an outer
// dimension (a bias-like gradient: rows add up).
template <int SX, int SY, typename T, typename C>
inline void GradAccumulateRow(const T* __restrict x, const T* __restrict y, const T* __restrict g,
                              T* __restrict target, int64_t n, C c) {
  if constexpr (SX == 0 && SY == 0) {
    const T a = x[0], b = y[0];
    for (int64_t i = 0; i < n; ++i) target[i] += c(a, b, g[i]);
  } else if constexpr (SX == 0) {
    const T a = x[0];
    for (int64_t i = 0; i < n; ++i) target[i] += c(a, y[i], g[i]);
  } else if constexpr (SY == 0) {
    const T b = y[0];
    for (int64_t i = 0; i < n; ++i) target[i] += c(x[i], b, g[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) target[i] += c(x[i], y[i], g[i]);
  }
}

// The sum of c(...) over a row (the target was broadcast along it). The contributions of a
// block go to a buffer first (an elementwise loop, vectorized whatever c is), which is then
// summed in independent partial sums per lane: a vectorized sum without reassociation, in a
// fixed order.
template <int SX, int SY, typename T, typename C>
inline T GradReduceRow(const T* __restrict x, const T* __restrict y, const T* __restrict g,
                       int64_t n, C c) {
  constexpr int64_t kBlock = 256;
  constexpr int kLanes = 32 / sizeof(T);
  T part[kLanes] = {};
  T tail = 0;
  T buffer[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t m = std::min(kBlock, n - start);
    GradAssignRow<SX, SY>(x + start * SX, y + start * SY, g + start, buffer, m, c);
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes) {
      for (int k = 0; k < kLanes; ++k) part[k] += buffer[i + k];
    }
    for (; i < m; ++i) tail += buffer[i];
  }
  T sum = tail;
  for (int k = 0; k < kLanes; ++k) sum += part[k];
  return sum;
}

// Writes the gradient of X (kOfX) or Y into `target`, which has `target_size` elements and
// the shape of that input.
template <bool kOfX, typename T, typename C>
inline void RunGradPass(const BroadcastPlan& plan, const T* x, const T* y, const T* g, T* target,
                        int64_t target_size, C c) {
  const int64_t n = plan.row_length();
  if (target_size == plan.size) {  // not broadcast: the target has the output's layout
    DispatchInnerStrides(plan, [&](auto sx, auto sy) {
      constexpr int SX = decltype(sx)::value;
      constexpr int SY = decltype(sy)::value;
      ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
        GradAssignRow<SX, SY>(x + xo, y + yo, g + oo, target + oo, n, c);
      });
    });
    return;
  }
  for (int64_t i = 0; i < target_size; ++i) target[i] = T(0);
  if (plan.size == 0) return;
  const bool reduce_rows = (kOfX ? plan.x_inner() : plan.y_inner()) == 0;
  DispatchInnerStrides(plan, [&](auto sx, auto sy) {
    constexpr int SX = decltype(sx)::value;
    constexpr int SY = decltype(sy)::value;
    if (reduce_rows) {
      ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
        target[kOfX ? xo : yo] += GradReduceRow<SX, SY>(x + xo, y + yo, g + oo, n, c);
      });
    } else {
      if constexpr ((kOfX ? SX : SY) == 1) {
        ForEachRow(plan, [&](int64_t xo, int64_t yo, int64_t oo) {
          GradAccumulateRow<SX, SY>(x + xo, y + yo, g + oo, target + (kOfX ? xo : yo), n, c);
        });
      }
    }
  });
}

}  // namespace sluice::ops::internal::elementwise

#endif  // SLUICE_OPS_CPU_ELEMENTWISE_LOOPS_H_
