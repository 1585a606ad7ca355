// CUDA kernels of the elementwise family (ops/elementwise_ops.cc): the broadcasting binary ops
// as maps over an IndexPlan, their gradients as maps (an input that was not broadcast) or
// deterministic sums over the broadcast dims (one thread or one block per gradient element),
// and the unary ops and their gradients as flat loops; max and min also run on i32 and i64.
// The element functions are those of the host kernels (ops/cpu/elementwise_kernels.cc); exp,
// log, tanh and sigmoid use CUDA's math library, whose f32 results may differ from the
// host's in the last bits.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

// ---- Binary ops ----

// The host kernels' MaxTakesX / MinTakesX (ops/cpu/elementwise_functions.h): max and min
// return X on a tie and whenever X is NaN, else Y, so a NaN in either argument propagates;
// their gradients go to the argument returned. Integers have no NaN.
template <typename T>
__device__ __forceinline__ bool IsNan(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}
template <typename T>
__device__ __forceinline__ bool MaxTakesX(T x, T y) {
  return (x >= y) | IsNan(x);
}
template <typename T>
__device__ __forceinline__ bool MinTakesX(T x, T y) {
  return (x <= y) | IsNan(x);
}

template <BinaryOp kOp>
struct BinaryFn {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    if constexpr (kOp == BinaryOp::kAdd) {
      return x + y;
    } else if constexpr (kOp == BinaryOp::kSub) {
      return x - y;
    } else if constexpr (kOp == BinaryOp::kMul) {
      return x * y;
    } else if constexpr (kOp == BinaryOp::kDiv) {
      return x / y;
    } else if constexpr (kOp == BinaryOp::kMax) {
      return MaxTakesX(x, y) ? x : y;
    } else {
      return MinTakesX(x, y) ? x : y;
    }
  }
};

template <BinaryGradOp kOp>
struct GradFn {
  template <typename T>
  __device__ T operator()(T x, T y, T g) const {
    if constexpr (kOp == BinaryGradOp::kG) {
      return g;
    } else if constexpr (kOp == BinaryGradOp::kNegG) {
      return -g;
    } else if constexpr (kOp == BinaryGradOp::kMulX) {
      return g * y;
    } else if constexpr (kOp == BinaryGradOp::kMulY) {
      return g * x;
    } else if constexpr (kOp == BinaryGradOp::kDivX) {
      return g / y;
    } else if constexpr (kOp == BinaryGradOp::kDivY) {  // -g x / y^2 without overflowing y^2
      return -(g / y) * (x / y);
    } else if constexpr (kOp == BinaryGradOp::kMaxX) {  // to the argument max returned
      return MaxTakesX(x, y) ? g : T(0);
    } else if constexpr (kOp == BinaryGradOp::kMaxY) {
      return MaxTakesX(x, y) ? T(0) : g;
    } else if constexpr (kOp == BinaryGradOp::kMinX) {
      return MinTakesX(x, y) ? g : T(0);
    } else {
      return MinTakesX(x, y) ? T(0) : g;
    }
  }
};

template <typename T, BinaryOp kOp>
cudaError_t RunBinary(const IndexPlan& plan, const T* x, const T* y, T* out, cudaStream_t stream) {
  Operands<T> in;
  in.p[0] = x;
  in.p[1] = y;
  return RunPlan<T, T, 2>(plan, in, out, T(1), BinaryFn<kOp>{}, stream);
}

template <typename T, BinaryGradOp kOp>
cudaError_t RunGrad(const IndexPlan& plan, const T* x, const T* y, const T* g, T* target,
                    cudaStream_t stream) {
  Operands<T> in;
  in.p[0] = x;
  in.p[1] = y;
  in.p[2] = g;
  return RunPlan<T, T, 3>(plan, in, target, T(1), GradFn<kOp>{}, stream);
}

// ---- Unary ops ----

template <UnaryOp kOp>
struct UnaryFn {
  template <typename T>
  __device__ T operator()(T x) const {
    if constexpr (kOp == UnaryOp::kRelu) {  // NaN stays NaN
      return x < T(0) ? T(0) : x;
    } else if constexpr (kOp == UnaryOp::kSigmoid) {  // e / (1 + e) for x < 0: no overflow
      const T e = Exp(-Abs(x));
      return (x >= T(0) ? T(1) : e) / (T(1) + e);
    } else if constexpr (kOp == UnaryOp::kTanh) {
      return Tanh(x);
    } else if constexpr (kOp == UnaryOp::kExp) {
      return Exp(x);
    } else if constexpr (kOp == UnaryOp::kLog) {
      return Log(x);
    } else if constexpr (kOp == UnaryOp::kSqrt) {
      return Sqrt(x);
    } else if constexpr (kOp == UnaryOp::kAbs) {  // NaN stays NaN
      return Abs(x);
    } else if constexpr (kOp == UnaryOp::kNeg) {
      return -x;
    } else {
      return x * x;
    }
  }
};

// f'(v, g), v being Out (relu, sigmoid, tanh, exp, sqrt) or X (log, square, abs). neg has no
// grad op (its gradient is neg of the output's): its case is never launched.
template <UnaryOp kOp>
struct UnaryGradFn {
  template <typename T>
  __device__ T operator()(T v, T g) const {
    if constexpr (kOp == UnaryOp::kRelu) {
      return v > T(0) ? g : T(0);
    } else if constexpr (kOp == UnaryOp::kSigmoid) {
      return g * v * (T(1) - v);
    } else if constexpr (kOp == UnaryOp::kTanh) {
      return g * (T(1) - v * v);
    } else if constexpr (kOp == UnaryOp::kExp) {
      return g * v;
    } else if constexpr (kOp == UnaryOp::kLog) {
      return g / v;
    } else if constexpr (kOp == UnaryOp::kSqrt) {
      return T(0.5) * g / v;
    } else if constexpr (kOp == UnaryOp::kAbs) {  // 0 at X = 0, NaN where X is NaN
      return v > T(0) ? g : (v < T(0) ? -g : (v == T(0) ? T(0) : v));
    } else if constexpr (kOp == UnaryOp::kNeg) {
      return -g;
    } else {
      return T(2) * v * g;
    }
  }
};

template <typename T, typename F>
__global__ void UnaryKernel(const T* x, T* out, int64_t n, F f) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = f(x[i]);
}

template <typename T, typename F>
__global__ void UnaryGradKernel(const T* v, const T* g, T* dx, int64_t n, F f) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dx[i] = f(v[i], g[i]);
}

template <typename T, UnaryOp kOp>
cudaError_t RunUnary(const T* x, T* out, int64_t n, cudaStream_t stream) {
  UnaryKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, UnaryFn<kOp>{});
  return cudaGetLastError();
}

template <typename T, UnaryOp kOp>
cudaError_t RunUnaryGrad(const T* v, const T* g, T* dx, int64_t n, cudaStream_t stream) {
  UnaryGradKernel<T><<<GridFor(n), kBlock, 0, stream>>>(v, g, dx, n, UnaryGradFn<kOp>{});
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchBinary(BinaryOp op, const IndexPlan& plan, const T* x, const T* y, T* out,
                         cudaStream_t stream) {
  switch (op) {
    case BinaryOp::kAdd:
      return RunBinary<T, BinaryOp::kAdd>(plan, x, y, out, stream);
    case BinaryOp::kSub:
      return RunBinary<T, BinaryOp::kSub>(plan, x, y, out, stream);
    case BinaryOp::kMul:
      return RunBinary<T, BinaryOp::kMul>(plan, x, y, out, stream);
    case BinaryOp::kDiv:
      return RunBinary<T, BinaryOp::kDiv>(plan, x, y, out, stream);
    case BinaryOp::kMax:
      return RunBinary<T, BinaryOp::kMax>(plan, x, y, out, stream);
    case BinaryOp::kMin:
      return RunBinary<T, BinaryOp::kMin>(plan, x, y, out, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchBinaryGrad(BinaryGradOp op, const IndexPlan& plan, const T* x, const T* y,
                             const T* g, T* target, cudaStream_t stream) {
  switch (op) {
    case BinaryGradOp::kG:
      return RunGrad<T, BinaryGradOp::kG>(plan, x, y, g, target, stream);
    case BinaryGradOp::kNegG:
      return RunGrad<T, BinaryGradOp::kNegG>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMulX:
      return RunGrad<T, BinaryGradOp::kMulX>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMulY:
      return RunGrad<T, BinaryGradOp::kMulY>(plan, x, y, g, target, stream);
    case BinaryGradOp::kDivX:
      return RunGrad<T, BinaryGradOp::kDivX>(plan, x, y, g, target, stream);
    case BinaryGradOp::kDivY:
      return RunGrad<T, BinaryGradOp::kDivY>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMaxX:
      return RunGrad<T, BinaryGradOp::kMaxX>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMaxY:
      return RunGrad<T, BinaryGradOp::kMaxY>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMinX:
      return RunGrad<T, BinaryGradOp::kMinX>(plan, x, y, g, target, stream);
    case BinaryGradOp::kMinY:
      return RunGrad<T, BinaryGradOp::kMinY>(plan, x, y, g, target, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchUnary(UnaryOp op, const T* x, T* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::kRelu:
      return RunUnary<T, UnaryOp::kRelu>(x, out, n, stream);
    case UnaryOp::kSigmoid:
      return RunUnary<T, UnaryOp::kSigmoid>(x, out, n, stream);
    case UnaryOp::kTanh:
      return RunUnary<T, UnaryOp::kTanh>(x, out, n, stream);
    case UnaryOp::kExp:
      return RunUnary<T, UnaryOp::kExp>(x, out, n, stream);
    case UnaryOp::kLog:
      return RunUnary<T, UnaryOp::kLog>(x, out, n, stream);
    case UnaryOp::kSqrt:
      return RunUnary<T, UnaryOp::kSqrt>(x, out, n, stream);
    case UnaryOp::kSquare:
      return RunUnary<T, UnaryOp::kSquare>(x, out, n, stream);
    case UnaryOp::kAbs:
      return RunUnary<T, UnaryOp::kAbs>(x, out, n, stream);
    case UnaryOp::kNeg:
      return RunUnary<T, UnaryOp::kNeg>(x, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchUnaryGrad(UnaryOp op, const T* v, const T* g, T* dx, int64_t n,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::kRelu:
      return RunUnaryGrad<T, UnaryOp::kRelu>(v, g, dx, n, stream);
    case UnaryOp::kSigmoid:
      return RunUnaryGrad<T, UnaryOp::kSigmoid>(v, g, dx, n, stream);
    case UnaryOp::kTanh:
      return RunUnaryGrad<T, UnaryOp::kTanh>(v, g, dx, n, stream);
    case UnaryOp::kExp:
      return RunUnaryGrad<T, UnaryOp::kExp>(v, g, dx, n, stream);
    case UnaryOp::kLog:
      return RunUnaryGrad<T, UnaryOp::kLog>(v, g, dx, n, stream);
    case UnaryOp::kSqrt:
      return RunUnaryGrad<T, UnaryOp::kSqrt>(v, g, dx, n, stream);
    case UnaryOp::kSquare:
      return RunUnaryGrad<T, UnaryOp::kSquare>(v, g, dx, n, stream);
    case UnaryOp::kAbs:
      return RunUnaryGrad<T, UnaryOp::kAbs>(v, g, dx, n, stream);
    case UnaryOp::kNeg:
      return RunUnaryGrad<T, UnaryOp::kNeg>(v, g, dx, n, stream);
  }
  return cudaErrorInvalidValue;
}

// clip as the host's ClipFn / ClipGradFn (ops/cpu/elementwise_functions.h): through
// MaxTakesX and MinTakesX, so a NaN x is returned and receives the gradient.
template <typename T>
struct ClipFn {
  T lo;
  T hi;
  __device__ __forceinline__ T operator()(T x) const {
    const T m = MaxTakesX(x, lo) ? x : lo;
    return MinTakesX(m, hi) ? m : hi;
  }
};
template <typename T>
struct ClipGradFn {
  T lo;
  T hi;
  __device__ __forceinline__ T operator()(T x, T g) const {
    return (MaxTakesX(x, lo) & MinTakesX(x, hi)) ? g : T(0);
  }
};

template <typename T>
cudaError_t LaunchClip(const T* x, T* out, int64_t n, T lo, T hi, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, ClipFn<T>{lo, hi});
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchClipGrad(const T* x, const T* g, T* dx, int64_t n, T lo, T hi,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryGradKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, g, dx, n, ClipGradFn<T>{lo, hi});
  return cudaGetLastError();
}

template <typename T>
struct PowFn {
  T factor;
  __device__ __forceinline__ T operator()(T x) const { return pow(x, factor); }
};
template <typename T>
struct PowGradFn {
  T factor;
  __device__ __forceinline__ T operator()(T x, T g) const {  // as the host's: 0 for factor 0
    return factor == T(0) ? T(0) : factor * pow(x, factor - T(1)) * g;
  }
};

template <typename T>
cudaError_t LaunchPow(const T* x, T* out, int64_t n, T factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, PowFn<T>{factor});
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchPowGrad(const T* x, const T* g, T* dx, int64_t n, T factor, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryGradKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, g, dx, n, PowGradFn<T>{factor});
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_ELEMENTWISE(T)                                                          \
  template cudaError_t LaunchBinary<T>(BinaryOp, const IndexPlan&, const T*, const T*, T*,         \
                                       cudaStream_t);                                              \
  template cudaError_t LaunchBinaryGrad<T>(BinaryGradOp, const IndexPlan&, const T*, const T*,     \
                                           const T*, T*, cudaStream_t);                            \
  template cudaError_t LaunchUnary<T>(UnaryOp, const T*, T*, int64_t, cudaStream_t);               \
  template cudaError_t LaunchUnaryGrad<T>(UnaryOp, const T*, const T*, T*, int64_t, cudaStream_t); \
  template cudaError_t LaunchClipGrad<T>(const T*, const T*, T*, int64_t, T, T, cudaStream_t);     \
  template cudaError_t LaunchPow<T>(const T*, T*, int64_t, T, cudaStream_t);                       \
  template cudaError_t LaunchPowGrad<T>(const T*, const T*, T*, int64_t, T, cudaStream_t);
SLUICE_INSTANTIATE_ELEMENTWISE(float)
SLUICE_INSTANTIATE_ELEMENTWISE(double)
// max and min of i32 and i64 (the only integer ops of the family; see cuda_launch.h).
template cudaError_t LaunchBinary<int32_t>(BinaryOp, const IndexPlan&, const int32_t*,
                                           const int32_t*, int32_t*, cudaStream_t);
template cudaError_t LaunchBinary<int64_t>(BinaryOp, const IndexPlan&, const int64_t*,
                                           const int64_t*, int64_t*, cudaStream_t);
// clip of every dtype it takes.
template cudaError_t LaunchClip<float>(const float*, float*, int64_t, float, float, cudaStream_t);
template cudaError_t LaunchClip<double>(const double*, double*, int64_t, double, double,
                                        cudaStream_t);
template cudaError_t LaunchClip<int32_t>(const int32_t*, int32_t*, int64_t, int32_t, int32_t,
                                         cudaStream_t);
template cudaError_t LaunchClip<int64_t>(const int64_t*, int64_t*, int64_t, int64_t, int64_t,
                                         cudaStream_t);

}  // namespace sluice::ops::gpu
