// CUDA kernels of the unary math family (ops/unary_math_ops.cc; launchers in
// ops/cuda/unary_math_launch.h): one grid-stride kernel per function and direction, chosen
// through a table of kernel pointers indexed by the function, so that the element loop has no
// branch on it. The values are CUDA's math library (sinf / sin, ...; rintf / rint round halves
// to even), which follows C99 on NaN, infinities and arguments outside the domain (NaN); the
// derivatives are the schema's formulas, built without fused multiply-adds (--fmad=false,
// ops/CMakeLists.txt), as the host kernels round them.
#include <cstdint>
#include <utility>

#include "ops/cuda/device_util.h"
#include "ops/cuda/unary_math_launch.h"
#include "ops/internal/unary_math.h"

namespace sluice::ops::gpu {
namespace {

using internal::UnaryMathFn;

// Name(x) for float (the library's <fname>f) and double (<fname>).
#define SLUICE_DEVICE_MATH(Name, fname)                         \
  __device__ inline float Name(float x) { return fname##f(x); } \
  __device__ inline double Name(double x) { return fname(x); }
SLUICE_DEVICE_MATH(Sin, sin)
SLUICE_DEVICE_MATH(Cos, cos)
SLUICE_DEVICE_MATH(Tan, tan)
SLUICE_DEVICE_MATH(Asin, asin)
SLUICE_DEVICE_MATH(Acos, acos)
SLUICE_DEVICE_MATH(Atan, atan)
SLUICE_DEVICE_MATH(Sinh, sinh)
SLUICE_DEVICE_MATH(Cosh, cosh)
SLUICE_DEVICE_MATH(Asinh, asinh)
SLUICE_DEVICE_MATH(Acosh, acosh)
SLUICE_DEVICE_MATH(Atanh, atanh)
SLUICE_DEVICE_MATH(Floor, floor)
SLUICE_DEVICE_MATH(Ceil, ceil)
SLUICE_DEVICE_MATH(Rint, rint)
#undef SLUICE_DEVICE_MATH

template <UnaryMathFn F, typename T>
__device__ inline T Value(T x) {
  using F_ = UnaryMathFn;
  if constexpr (F == F_::kSin) return Sin(x);
  if constexpr (F == F_::kCos) return Cos(x);
  if constexpr (F == F_::kTan) return Tan(x);
  if constexpr (F == F_::kAsin) return Asin(x);
  if constexpr (F == F_::kAcos) return Acos(x);
  if constexpr (F == F_::kAtan) return Atan(x);
  if constexpr (F == F_::kSinh) return Sinh(x);
  if constexpr (F == F_::kCosh) return Cosh(x);
  if constexpr (F == F_::kAsinh) return Asinh(x);
  if constexpr (F == F_::kAcosh) return Acosh(x);
  if constexpr (F == F_::kAtanh) return Atanh(x);
  if constexpr (F == F_::kFloor) return Floor(x);
  if constexpr (F == F_::kCeil) return Ceil(x);
  if constexpr (F == F_::kRound) return Rint(x);
}

// f'(x), as ops/cpu/unary_math_kernels.cc computes it.
template <UnaryMathFn F, typename T>
__device__ inline T Derivative(T x) {
  using F_ = UnaryMathFn;
  const T one(1);
  if constexpr (F == F_::kSin) return Cos(x);
  if constexpr (F == F_::kCos) return -Sin(x);
  if constexpr (F == F_::kTan) {
    const T t = Tan(x);
    return one + t * t;
  }
  if constexpr (F == F_::kAsin) return one / Sqrt((one - x) * (one + x));
  if constexpr (F == F_::kAcos) return -one / Sqrt((one - x) * (one + x));
  if constexpr (F == F_::kAtan) return one / (one + x * x);
  if constexpr (F == F_::kSinh) return Cosh(x);
  if constexpr (F == F_::kCosh) return Sinh(x);
  if constexpr (F == F_::kAsinh) return one / Sqrt(x * x + one);
  if constexpr (F == F_::kAcosh) return one / Sqrt((x - one) * (x + one));
  if constexpr (F == F_::kAtanh) return one / ((one - x) * (one + x));
}

template <UnaryMathFn F, typename T>
__global__ void UnaryMathKernel(const T* x, T* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = Value<F>(x[i]);
}

template <UnaryMathFn F, typename T>
__global__ void UnaryMathGradKernel(const T* x, const T* g, T* dx, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dx[i] = Derivative<F>(x[i]) * g[i];
}

template <typename T>
using ForwardKernel = void (*)(const T*, T*, int64_t);
template <typename T>
using GradKernel = void (*)(const T*, const T*, T*, int64_t);

// The kernels of every function (of the differentiable ones, for the grads), by function.
template <typename T, int... I>
ForwardKernel<T> ForwardKernelOf(int fn, std::integer_sequence<int, I...>) {
  constexpr ForwardKernel<T> kKernels[] = {&UnaryMathKernel<static_cast<UnaryMathFn>(I), T>...};
  return kKernels[fn];
}
template <typename T, int... I>
GradKernel<T> GradKernelOf(int fn, std::integer_sequence<int, I...>) {
  constexpr GradKernel<T> kKernels[] = {&UnaryMathGradKernel<static_cast<UnaryMathFn>(I), T>...};
  return kKernels[fn];
}

}  // namespace

template <typename T>
cudaError_t LaunchUnaryMath(int fn, const T* x, T* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const ForwardKernel<T> kernel =
      ForwardKernelOf<T>(fn, std::make_integer_sequence<int, internal::kNumUnaryMath>{});
  kernel<<<GridFor(n), kBlock, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchUnaryMathGrad(int fn, const T* x, const T* g, T* dx, int64_t n,
                                cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const GradKernel<T> kernel =
      GradKernelOf<T>(fn, std::make_integer_sequence<int, internal::kNumDifferentiableUnaryMath>{});
  kernel<<<GridFor(n), kBlock, 0, stream>>>(x, g, dx, n);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_UNARY_MATH(T)                                             \
  template cudaError_t LaunchUnaryMath<T>(int, const T*, T*, int64_t, cudaStream_t); \
  template cudaError_t LaunchUnaryMathGrad<T>(int, const T*, const T*, T*, int64_t, cudaStream_t);
SLUICE_INSTANTIATE_UNARY_MATH(float)
SLUICE_INSTANTIATE_UNARY_MATH(double)
#undef SLUICE_INSTANTIATE_UNARY_MATH

}  // namespace sluice::ops::gpu
