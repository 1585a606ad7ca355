// Device-side helpers of the ops' CUDA kernels, included only by ops/cuda/*.cu: launch
// geometry for grid-stride loops, the offset arithmetic of an IndexPlan, warp reductions, the
// generic map and reduce kernels over an IndexPlan, and the math functions per element type.
#ifndef SLUICE_OPS_CUDA_DEVICE_UTIL_H_
#define SLUICE_OPS_CUDA_DEVICE_UTIL_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/cuda_launch.h"

namespace sluice::ops::gpu {

inline constexpr int kBlock = 256;
inline constexpr int64_t kMaxGrid = int64_t{1} << 20;  // grid-stride loops cover the rest

// Blocks for `n` items of `per_block` each (at least 1, at most kMaxGrid).
inline unsigned GridFor(int64_t n, int64_t per_block = kBlock) {
  int64_t blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > kMaxGrid) blocks = kMaxGrid;
  return static_cast<unsigned>(blocks);
}

__device__ inline int64_t GlobalIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// ---- IndexPlan offsets ----

// off[k] = offset of operand k for kept element j.
template <int N>
__device__ inline void KeptOffsets(const IndexPlan& p, int64_t j, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = p.kept_rank - 1; d >= 0; --d) {
    const int64_t c = d == 0 ? j : j % p.kept_dims[d];
    if (d > 0) j /= p.kept_dims[d];
    for (int k = 0; k < N; ++k) off[k] += c * p.kept_strides[k][d];
  }
}

// off[k] = offset of operand k for reduced element r.
template <int N>
__device__ inline void ReducedOffsets(const IndexPlan& p, int64_t r, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = p.red_rank - 1; d >= 0; --d) {
    const int64_t c = d == 0 ? r : r % p.red_dims[d];
    if (d > 0) r /= p.red_dims[d];
    for (int k = 0; k < N; ++k) off[k] += c * p.red_strides[k][d];
  }
}

// Up to kMaxOperands typed operands.
template <typename T>
struct Operands {
  const T* p[kMaxOperands] = {nullptr, nullptr, nullptr};
};

// f applied to the elements of the first N operands at `off`.
template <int N, typename T, typename F>
__device__ inline T ApplyAt(const F& f, const Operands<T>& in, const int64_t (&off)[N]) {
  if constexpr (N == 1) {
    return f(in.p[0][off[0]]);
  } else if constexpr (N == 2) {
    return f(in.p[0][off[0]], in.p[1][off[1]]);
  } else {
    return f(in.p[0][off[0]], in.p[1][off[1]], in.p[2][off[2]]);
  }
}

// out[j] = f(operands at j): a map plan (no reduced dims).
template <typename T, int N, typename F>
__global__ void MapKernel(const __grid_constant__ IndexPlan p, Operands<T> in, T* out, F f) {
  for (int64_t j = GlobalIndex(); j < p.kept_count; j += GlobalStride()) {
    int64_t off[N];
    KeptOffsets<N>(p, j, off);
    out[j] = ApplyAt<N>(f, in, off);
  }
}

// out[j] = T(scale * sum over r of Acc(f(operands at j, r))), one thread per output element
// walking the reduced dims in row-major order.
template <typename T, typename Acc, int N, typename F>
__global__ void ReduceByThreadKernel(const __grid_constant__ IndexPlan p, Operands<T> in, T* out,
                                     Acc scale, F f) {
  for (int64_t j = GlobalIndex(); j < p.kept_count; j += GlobalStride()) {
    int64_t base[N];
    KeptOffsets<N>(p, j, base);
    int64_t index[kMaxDims] = {};
    int64_t off[N];
    for (int k = 0; k < N; ++k) off[k] = base[k];
    Acc acc = 0;
    for (int64_t r = 0; r < p.red_count; ++r) {
      acc += static_cast<Acc>(ApplyAt<N>(f, in, off));
      for (int d = p.red_rank - 1; d >= 0; --d) {  // odometer step
        for (int k = 0; k < N; ++k) off[k] += p.red_strides[k][d];
        if (++index[d] < p.red_dims[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= p.red_strides[k][d] * p.red_dims[d];
        index[d] = 0;
      }
    }
    out[j] = static_cast<T>(acc * scale);
  }
}

// The same with one block per output element: the block's threads take every kBlock-th
// reduced element and a shared-memory tree adds their partial sums (a fixed order).
template <typename T, typename Acc, int N, typename F>
__global__ void ReduceByBlockKernel(const __grid_constant__ IndexPlan p, Operands<T> in, T* out,
                                    Acc scale, F f) {
  __shared__ Acc partial[kBlock];
  for (int64_t j = blockIdx.x; j < p.kept_count; j += gridDim.x) {
    int64_t base[N];
    KeptOffsets<N>(p, j, base);
    Acc acc = 0;
    for (int64_t r = threadIdx.x; r < p.red_count; r += blockDim.x) {
      int64_t off[N];
      ReducedOffsets<N>(p, r, off);
      for (int k = 0; k < N; ++k) off[k] += base[k];
      acc += static_cast<Acc>(ApplyAt<N>(f, in, off));
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[j] = static_cast<T>(partial[0] * scale);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

// Runs f over a plan: a map when nothing is reduced, else a reduction (by block when there
// are few outputs with long sums, by thread otherwise).
template <typename T, typename Acc, int N, typename F>
cudaError_t RunPlan(const IndexPlan& p, Operands<T> in, T* out, Acc scale, F f,
                    cudaStream_t stream) {
  if (p.kept_count == 0) return cudaSuccess;
  if (p.red_rank == 0 && p.red_count == 1) {
    MapKernel<T, N, F><<<GridFor(p.kept_count), kBlock, 0, stream>>>(p, in, out, f);
  } else if (p.red_count >= 128 && p.kept_count < 8192) {
    ReduceByBlockKernel<T, Acc, N, F>
        <<<GridFor(p.kept_count, 1), kBlock, 0, stream>>>(p, in, out, scale, f);
  } else {
    ReduceByThreadKernel<T, Acc, N, F>
        <<<GridFor(p.kept_count), kBlock, 0, stream>>>(p, in, out, scale, f);
  }
  return cudaGetLastError();
}

// ---- Warp reductions (all 32 lanes take part) ----

template <typename T>
__device__ inline T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T>
__device__ inline T WarpMax(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = v < other ? other : v;
  }
  return v;
}

// ---- Math per element type ----

__device__ inline float Exp(float x) { return expf(x); }
__device__ inline double Exp(double x) { return exp(x); }
__device__ inline float Log(float x) { return logf(x); }
__device__ inline double Log(double x) { return log(x); }
__device__ inline float Tanh(float x) { return tanhf(x); }
__device__ inline double Tanh(double x) { return tanh(x); }
__device__ inline float Sqrt(float x) { return sqrtf(x); }
__device__ inline double Sqrt(double x) { return sqrt(x); }
__device__ inline float Abs(float x) { return fabsf(x); }
__device__ inline double Abs(double x) { return fabs(x); }
__device__ inline float Fma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ inline double Fma(double a, double b, double c) { return fma(a, b, c); }

template <typename T>
__device__ inline T NaN() {
  if constexpr (sizeof(T) == 4) {
    return __int_as_float(0x7fc00000);
  } else {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
}

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_DEVICE_UTIL_H_
