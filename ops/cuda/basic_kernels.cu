// CUDA kernels of the basic family (ops/basic_ops.cc): fill, cast, scale, sum and the
// counter-based random tensors. The copies (assign, memcpy_*) and fill_zeros_like need no
// kernel: ops/cuda/basic_op_kernels.cc enqueues cudaMemcpyAsync / cudaMemsetAsync.
#include <cstdint>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"
#include "ops/internal/counter_rng.h"

namespace sluice::ops::gpu {
namespace {

template <typename T>
__global__ void FillKernel(T* out, int64_t n, T value) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = value;
}

template <typename In, typename Out>
__global__ void CastKernel(const In* in, Out* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = static_cast<Out>(in[i]);
}

template <typename T>
__global__ void ScaleKernel(const T* x, T* out, int64_t n, T scale, T bias) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = scale * x[i] + bias;
}

// One pass of sum: up to kSumInputsPerPass inputs, added to `out` unless `first`.
template <typename T>
struct SumPass {
  const T* x[kSumInputsPerPass];
  int count;
  bool first;
};

template <typename T>
__global__ void SumKernel(const __grid_constant__ SumPass<T> pass, T* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    T acc = pass.first ? pass.x[0][i] : out[i];
    for (int k = pass.first ? 1 : 0; k < pass.count; ++k) acc += pass.x[k][i];
    out[i] = acc;
  }
}

template <typename T>
__global__ void UniformKernel(T* out, int64_t n, double lo, double hi, uint64_t seed) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = static_cast<T>(lo + (hi - lo) * internal::CounterUniform(seed, i));
  }
}

template <typename T>
__global__ void GaussianKernel(T* out, int64_t n, double mean, double std, uint64_t seed) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    out[i] = static_cast<T>(mean + std * internal::CounterNormal(seed, i));
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchFill(T* out, int64_t n, T value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<T><<<GridFor(n), kBlock, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

template <typename In, typename Out>
cudaError_t LaunchCast(const In* in, Out* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  CastKernel<In, Out><<<GridFor(n), kBlock, 0, stream>>>(in, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchScale(const T* x, T* out, int64_t n, T scale, T bias, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n, scale, bias);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchSum(const T* const* xs, int count, T* out, int64_t n, cudaStream_t stream) {
  if (n == 0 || count <= 0) return cudaSuccess;
  for (int start = 0; start < count; start += kSumInputsPerPass) {
    SumPass<T> pass{};
    pass.count = count - start < kSumInputsPerPass ? count - start : kSumInputsPerPass;
    pass.first = start == 0;
    for (int k = 0; k < pass.count; ++k) pass.x[k] = xs[start + k];
    SumKernel<T><<<GridFor(n), kBlock, 0, stream>>>(pass, out, n);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t LaunchUniform(T* out, int64_t n, double min, double max, uint64_t seed,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UniformKernel<T><<<GridFor(n), kBlock, 0, stream>>>(out, n, min, max, seed);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchGaussian(T* out, int64_t n, double mean, double std, uint64_t seed,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  GaussianKernel<T><<<GridFor(n), kBlock, 0, stream>>>(out, n, mean, std, seed);
  return cudaGetLastError();
}

#define SLUICE_FOR_ALL_TYPES(X) X(float) X(double) X(int32_t) X(int64_t) X(bool)

#define SLUICE_INSTANTIATE_FILL(T) template cudaError_t LaunchFill<T>(T*, int64_t, T, cudaStream_t);
SLUICE_FOR_ALL_TYPES(SLUICE_INSTANTIATE_FILL)

#define SLUICE_INSTANTIATE_CAST(In, Out) \
  template cudaError_t LaunchCast<In, Out>(const In*, Out*, int64_t, cudaStream_t)
#define SLUICE_INSTANTIATE_CASTS_FROM(In) \
  SLUICE_INSTANTIATE_CAST(In, float);     \
  SLUICE_INSTANTIATE_CAST(In, double);    \
  SLUICE_INSTANTIATE_CAST(In, int32_t);   \
  SLUICE_INSTANTIATE_CAST(In, int64_t);   \
  SLUICE_INSTANTIATE_CAST(In, bool);
SLUICE_FOR_ALL_TYPES(SLUICE_INSTANTIATE_CASTS_FROM)

#define SLUICE_INSTANTIATE_SUM(T) \
  template cudaError_t LaunchSum<T>(const T* const*, int, T*, int64_t, cudaStream_t);
SLUICE_INSTANTIATE_SUM(float)
SLUICE_INSTANTIATE_SUM(double)
SLUICE_INSTANTIATE_SUM(int32_t)
SLUICE_INSTANTIATE_SUM(int64_t)

#define SLUICE_INSTANTIATE_FLOAT(T)                                                           \
  template cudaError_t LaunchScale<T>(const T*, T*, int64_t, T, T, cudaStream_t);             \
  template cudaError_t LaunchUniform<T>(T*, int64_t, double, double, uint64_t, cudaStream_t); \
  template cudaError_t LaunchGaussian<T>(T*, int64_t, double, double, uint64_t, cudaStream_t);
SLUICE_INSTANTIATE_FLOAT(float)
SLUICE_INSTANTIATE_FLOAT(double)

}  // namespace sluice::ops::gpu
