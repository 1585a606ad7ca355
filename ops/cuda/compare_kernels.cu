// CUDA kernels of the compare family (ops/compare_ops.cc): the comparisons and the binary
// logical ops as maps over an IndexPlan writing bool, logical_not and increment as flat
// loops. The element functions are those of the host kernels (ops/cpu/compare_kernels.cc):
// comparisons are exact, so cuda and host results agree bit for bit.
#include <cstdint>
#include <type_traits>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

template <CompareOp kOp>
struct CompareFn {
  template <typename T>
  __device__ bool operator()(T x, T y) const {
    if constexpr (kOp == CompareOp::kLess) {
      return x < y;
    } else if constexpr (kOp == CompareOp::kLessEqual) {
      return x <= y;
    } else if constexpr (kOp == CompareOp::kGreater) {
      return x > y;
    } else if constexpr (kOp == CompareOp::kGreaterEqual) {
      return x >= y;
    } else if constexpr (kOp == CompareOp::kEqual) {
      return x == y;
    } else {
      return x != y;
    }
  }
};

template <LogicalOp kOp>
struct LogicalFn {
  __device__ bool operator()(uint8_t x, uint8_t y) const {
    if constexpr (kOp == LogicalOp::kAnd) {
      return (x != 0) & (y != 0);
    } else if constexpr (kOp == LogicalOp::kOr) {
      return (x != 0) | (y != 0);
    } else {
      return (x != 0) != (y != 0);
    }
  }
};

// out[j] = f(x[...], y[...]) over a map plan (operands 0: x, 1: y). Each thread reads the
// input elements of the output elements it writes, so `out` may be an input of its layout.
template <typename T, typename F>
__global__ void BoolMapKernel(const __grid_constant__ IndexPlan p, const T* x, const T* y,
                              bool* out, F f) {
  for (int64_t j = GlobalIndex(); j < p.kept_count; j += GlobalStride()) {
    int64_t off[2];
    KeptOffsets<2>(p, j, off);
    out[j] = f(x[off[0]], y[off[1]]);
  }
}

template <typename T, typename F>
cudaError_t RunBoolMap(const IndexPlan& plan, const T* x, const T* y, bool* out, F f,
                       cudaStream_t stream) {
  if (plan.kept_count == 0) return cudaSuccess;
  BoolMapKernel<T, F><<<GridFor(plan.kept_count), kBlock, 0, stream>>>(plan, x, y, out, f);
  return cudaGetLastError();
}

__global__ void LogicalNotKernel(const uint8_t* x, bool* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = x[i] == 0;
}

// x + value; integers in unsigned arithmetic, where overflow wraps around.
template <typename T>
__device__ inline T Increment(T x, T value) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(x) + static_cast<U>(value));
  } else {
    return x + value;
  }
}

template <typename T>
__global__ void IncrementKernel(const T* x, T* out, int64_t n, T value) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = Increment(x[i], value);
}

}  // namespace

template <typename T>
cudaError_t LaunchCompare(CompareOp op, const IndexPlan& plan, const T* x, const T* y, bool* out,
                          cudaStream_t stream) {
  switch (op) {
    case CompareOp::kLess:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kLess>{}, stream);
    case CompareOp::kLessEqual:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kLessEqual>{}, stream);
    case CompareOp::kGreater:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kGreater>{}, stream);
    case CompareOp::kGreaterEqual:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kGreaterEqual>{}, stream);
    case CompareOp::kEqual:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kEqual>{}, stream);
    case CompareOp::kNotEqual:
      return RunBoolMap(plan, x, y, out, CompareFn<CompareOp::kNotEqual>{}, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchLogical(LogicalOp op, const IndexPlan& plan, const uint8_t* x, const uint8_t* y,
                          bool* out, cudaStream_t stream) {
  switch (op) {
    case LogicalOp::kAnd:
      return RunBoolMap(plan, x, y, out, LogicalFn<LogicalOp::kAnd>{}, stream);
    case LogicalOp::kOr:
      return RunBoolMap(plan, x, y, out, LogicalFn<LogicalOp::kOr>{}, stream);
    case LogicalOp::kXor:
      return RunBoolMap(plan, x, y, out, LogicalFn<LogicalOp::kXor>{}, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchLogicalNot(const uint8_t* x, bool* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  LogicalNotKernel<<<GridFor(n), kBlock, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchIncrement(const T* x, T* out, int64_t n, T value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  IncrementKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, value);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_COMPARE(T)                                                           \
  template cudaError_t LaunchCompare<T>(CompareOp, const IndexPlan&, const T*, const T*, bool*, \
                                        cudaStream_t);                                          \
  template cudaError_t LaunchIncrement<T>(const T*, T*, int64_t, T, cudaStream_t);
SLUICE_INSTANTIATE_COMPARE(float)
SLUICE_INSTANTIATE_COMPARE(double)
SLUICE_INSTANTIATE_COMPARE(int32_t)
SLUICE_INSTANTIATE_COMPARE(int64_t)

}  // namespace sluice::ops::gpu
