// CUDA kernels of the integer forms of add, sub, mul, div, neg, abs and relu: the binary ops as
// maps over an IndexPlan, the unary ones as flat loops, and the divisor scan that finds the
// first zero. Arithmetic that may overflow is done in the unsigned type of the same width, so
// it wraps (ops/cuda/integer_arith_launch.h).
#include <cstdint>
#include <type_traits>

#include "ops/cuda/device_util.h"
#include "ops/cuda/integer_arith_launch.h"

namespace sluice::ops::gpu {
namespace {

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

template <typename T>
__device__ __forceinline__ T WrapNeg(T x) {
  return static_cast<T>(Unsigned<T>{0} - static_cast<Unsigned<T>>(x));
}

template <IntegerBinaryOp kOp>
struct IntegerBinaryFn {
  template <typename T>
  __device__ T operator()(T x, T y) const {
    using U = Unsigned<T>;
    if constexpr (kOp == IntegerBinaryOp::kAdd) {
      return static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
    } else if constexpr (kOp == IntegerBinaryOp::kSub) {
      return static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
    } else if constexpr (kOp == IntegerBinaryOp::kMul) {
      return static_cast<T>(static_cast<U>(x) * static_cast<U>(y));
    } else {  // truncates toward zero; -1 as negation (the one quotient that overflows)
      return y == T{0} ? T{0} : (y == T{-1} ? WrapNeg(x) : static_cast<T>(x / y));
    }
  }
};

template <IntegerUnaryOp kOp>
struct IntegerUnaryFn {
  template <typename T>
  __device__ T operator()(T x) const {
    if constexpr (kOp == IntegerUnaryOp::kNeg) {
      return WrapNeg(x);
    } else if constexpr (kOp == IntegerUnaryOp::kAbs) {
      return x < T{0} ? WrapNeg(x) : x;
    } else {
      return x < T{0} ? T{0} : x;
    }
  }
};

template <typename T, typename F>
__global__ void IntegerUnaryKernel(const T* x, T* out, int64_t n, F f) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = f(x[i]);
}

template <typename T>
__global__ void FindZeroKernel(const T* y, int64_t n, uint64_t* record) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if (y[i] == T{0}) {
      atomicMin(reinterpret_cast<unsigned long long*>(record), static_cast<unsigned long long>(i));
    }
  }
}

template <typename T, IntegerBinaryOp kOp>
cudaError_t RunBinary(const IndexPlan& plan, const T* x, const T* y, T* out, cudaStream_t stream) {
  Operands<T> in;
  in.p[0] = x;
  in.p[1] = y;
  return RunPlan<T, T, 2>(plan, in, out, T(1), IntegerBinaryFn<kOp>{}, stream);
}

template <typename T, IntegerUnaryOp kOp>
cudaError_t RunUnary(const T* x, T* out, int64_t n, cudaStream_t stream) {
  IntegerUnaryKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, IntegerUnaryFn<kOp>{});
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t LaunchIntegerBinary(IntegerBinaryOp op, const IndexPlan& plan, const T* x, const T* y,
                                T* out, cudaStream_t stream) {
  switch (op) {
    case IntegerBinaryOp::kAdd:
      return RunBinary<T, IntegerBinaryOp::kAdd>(plan, x, y, out, stream);
    case IntegerBinaryOp::kSub:
      return RunBinary<T, IntegerBinaryOp::kSub>(plan, x, y, out, stream);
    case IntegerBinaryOp::kMul:
      return RunBinary<T, IntegerBinaryOp::kMul>(plan, x, y, out, stream);
    case IntegerBinaryOp::kDiv:
      return RunBinary<T, IntegerBinaryOp::kDiv>(plan, x, y, out, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchIntegerUnary(IntegerUnaryOp op, const T* x, T* out, int64_t n,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case IntegerUnaryOp::kNeg:
      return RunUnary<T, IntegerUnaryOp::kNeg>(x, out, n, stream);
    case IntegerUnaryOp::kAbs:
      return RunUnary<T, IntegerUnaryOp::kAbs>(x, out, n, stream);
    case IntegerUnaryOp::kRelu:
      return RunUnary<T, IntegerUnaryOp::kRelu>(x, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchFindZero(const T* y, int64_t n, uint64_t* record, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FindZeroKernel<T><<<GridFor(n), kBlock, 0, stream>>>(y, n, record);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_INTEGER_ARITH(T)                                                        \
  template cudaError_t LaunchIntegerBinary<T>(IntegerBinaryOp, const IndexPlan&, const T*,         \
                                              const T*, T*, cudaStream_t);                         \
  template cudaError_t LaunchIntegerUnary<T>(IntegerUnaryOp, const T*, T*, int64_t, cudaStream_t); \
  template cudaError_t LaunchFindZero<T>(const T*, int64_t, uint64_t*, cudaStream_t);
SLUICE_INSTANTIATE_INTEGER_ARITH(int32_t)
SLUICE_INSTANTIATE_INTEGER_ARITH(int64_t)

}  // namespace sluice::ops::gpu
