// CUDA kernels of the norm family (ops/norm_ops.cc): batch_norm_infer as a flat map, its
// gradient's per-channel sums one block per channel, layer_norm one block per row, and
// layer_norm_grad's column sums one thread per column. Every sum is in double and in a fixed
// order (ops/cuda/norm_launch.h), so a result does not change between runs.
#include <cstdint>

#include "ops/cuda/device_util.h"
#include "ops/cuda/norm_launch.h"

namespace sluice::ops::gpu {
namespace {

// The sum of every thread's `v` in the block (blockDim.x == kBlock), added in a fixed tree
// order; every thread gets it. `shared` holds kBlock doubles and is free again on return.
__device__ inline double BlockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // everyone has read shared[0] before the next call overwrites it
  return total;
}

// ---- batch_norm_infer ----

template <typename T>
__global__ void BatchNormKernel(const T* x, const T* scale, const T* bias, const T* mean,
                                const T* var, T* out, ChannelView v, T epsilon) {
  const int64_t n = v.outer * v.channels * v.inner;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int64_t c = (i / v.inner) % v.channels;
    out[i] = (x[i] - mean[c]) / Sqrt(var[c] + epsilon) * scale[c] + bias[c];
  }
}

// The per-channel gradients: block b takes channels b, b + gridDim.x, ...
template <typename T>
__global__ void BatchNormGradSumsKernel(const T* x, const T* scale, const T* mean, const T* var,
                                        const T* g, T* dscale, T* dbias, T* dmean, T* dvar,
                                        ChannelView v, T epsilon) {
  __shared__ double shared[kBlock];
  const int64_t per_channel = v.outer * v.inner;
  for (int64_t c = blockIdx.x; c < v.channels; c += gridDim.x) {
    const T m = mean[c];
    double sum_g = 0, sum_gx = 0;
    for (int64_t k = threadIdx.x; k < per_channel; k += blockDim.x) {
      const int64_t i = ((k / v.inner) * v.channels + c) * v.inner + k % v.inner;
      const double gi = g[i];
      sum_g += gi;
      sum_gx += gi * static_cast<double>(x[i] - m);
    }
    sum_g = BlockSum(sum_g, shared);
    sum_gx = BlockSum(sum_gx, shared);
    if (threadIdx.x == 0) {
      const double s = static_cast<double>(Sqrt(var[c] + epsilon));
      const double k = scale[c];
      dscale[c] = static_cast<T>(sum_gx / s);
      dbias[c] = static_cast<T>(sum_g);
      dmean[c] = static_cast<T>(-sum_g * (k / s));
      dvar[c] = static_cast<T>(-0.5 * k * sum_gx / (s * s * s));
    }
  }
}

template <typename T>
__global__ void BatchNormGradXKernel(const T* scale, const T* var, const T* g, T* dx, ChannelView v,
                                     T epsilon) {
  const int64_t n = v.outer * v.channels * v.inner;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int64_t c = (i / v.inner) % v.channels;
    const double factor =
        static_cast<double>(scale[c]) / static_cast<double>(Sqrt(var[c] + epsilon));
    dx[i] = static_cast<T>(static_cast<double>(g[i]) * factor);
  }
}

// ---- layer_norm ----

template <typename T>
__global__ void LayerNormKernel(const T* x, const T* scale, const T* bias, T* out, T* mean_out,
                                T* inv_out, int64_t rows, int64_t cols, double epsilon) {
  __shared__ double shared[kBlock];
  const double n = static_cast<double>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += xr[j];
    const double mean = BlockSum(sum, shared) / n;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double diff = static_cast<double>(xr[j]) - mean;
      sq += diff * diff;
    }
    const double var = BlockSum(sq, shared) / n;
    const T m = static_cast<T>(mean);
    const T inv = static_cast<T>(1.0 / sqrt(var + epsilon));
    T* yr = out + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const T y = (xr[j] - m) * inv * scale[j];
      yr[j] = bias != nullptr ? y + bias[j] : y;
    }
    if (threadIdx.x == 0) {
      mean_out[r] = m;
      inv_out[r] = inv;
    }
  }
}

template <typename T>
__global__ void LayerNormGradColumnsKernel(const T* x, const T* mean, const T* inv, const T* g,
                                           T* dscale, T* dbias, int64_t rows, int64_t cols) {
  for (int64_t j = GlobalIndex(); j < cols; j += GlobalStride()) {
    double sum_gx = 0, sum_g = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r * cols + j;
      const double xhat = static_cast<double>(x[i] - mean[r]) * static_cast<double>(inv[r]);
      sum_gx += static_cast<double>(g[i]) * xhat;
      sum_g += g[i];
    }
    dscale[j] = static_cast<T>(sum_gx);
    if (dbias != nullptr) dbias[j] = static_cast<T>(sum_g);
  }
}

template <typename T>
__global__ void LayerNormGradRowsKernel(const T* x, const T* scale, const T* mean, const T* inv,
                                        const T* g, T* dx, int64_t rows, int64_t cols) {
  __shared__ double shared[kBlock];
  const double n = static_cast<double>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    const double m = mean[r], s = inv[r];
    double sum_d = 0, sum_dx = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double dj = static_cast<double>(g[base + j]) * static_cast<double>(scale[j]);
      sum_d += dj;
      sum_dx += dj * ((static_cast<double>(x[base + j]) - m) * s);
    }
    const double mean_d = BlockSum(sum_d, shared) / n;
    const double mean_dx = BlockSum(sum_dx, shared) / n;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double dj = static_cast<double>(g[base + j]) * static_cast<double>(scale[j]);
      const double xhat = (static_cast<double>(x[base + j]) - m) * s;
      dx[base + j] = static_cast<T>(s * (dj - mean_d - xhat * mean_dx));
    }
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchBatchNorm(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                            T* out, ChannelView view, T epsilon, cudaStream_t stream) {
  const int64_t n = view.outer * view.channels * view.inner;
  if (n == 0) return cudaSuccess;
  BatchNormKernel<T>
      <<<GridFor(n), kBlock, 0, stream>>>(x, scale, bias, mean, var, out, view, epsilon);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchBatchNormGrad(const T* x, const T* scale, const T* mean, const T* var, const T* g,
                                T* dx, T* dscale, T* dbias, T* dmean, T* dvar, ChannelView view,
                                T epsilon, cudaStream_t stream) {
  if (view.channels == 0) return cudaSuccess;
  BatchNormGradSumsKernel<T><<<GridFor(view.channels, 1), kBlock, 0, stream>>>(
      x, scale, mean, var, g, dscale, dbias, dmean, dvar, view, epsilon);
  const int64_t n = view.outer * view.channels * view.inner;
  if (n > 0) {
    BatchNormGradXKernel<T><<<GridFor(n), kBlock, 0, stream>>>(scale, var, g, dx, view, epsilon);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLayerNorm(const T* x, const T* scale, const T* bias, T* out, T* mean, T* inv_std,
                            int64_t rows, int64_t cols, double epsilon, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  LayerNormKernel<T><<<GridFor(rows, 1), kBlock, 0, stream>>>(x, scale, bias, out, mean, inv_std,
                                                              rows, cols, epsilon);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchLayerNormGrad(const T* x, const T* scale, const T* mean, const T* inv_std,
                                const T* g, T* dx, T* dscale, T* dbias, int64_t rows, int64_t cols,
                                cudaStream_t stream) {
  if (cols > 0) {
    LayerNormGradColumnsKernel<T>
        <<<GridFor(cols), kBlock, 0, stream>>>(x, mean, inv_std, g, dscale, dbias, rows, cols);
  }
  if (rows > 0 && cols > 0) {
    LayerNormGradRowsKernel<T>
        <<<GridFor(rows, 1), kBlock, 0, stream>>>(x, scale, mean, inv_std, g, dx, rows, cols);
  }
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_NORM(T)                                                               \
  template cudaError_t LaunchBatchNorm<T>(const T*, const T*, const T*, const T*, const T*, T*,  \
                                          ChannelView, T, cudaStream_t);                         \
  template cudaError_t LaunchBatchNormGrad<T>(const T*, const T*, const T*, const T*, const T*,  \
                                              T*, T*, T*, T*, T*, ChannelView, T, cudaStream_t); \
  template cudaError_t LaunchLayerNorm<T>(const T*, const T*, const T*, T*, T*, T*, int64_t,     \
                                          int64_t, double, cudaStream_t);                        \
  template cudaError_t LaunchLayerNormGrad<T>(const T*, const T*, const T*, const T*, const T*,  \
                                              T*, T*, T*, int64_t, int64_t, cudaStream_t);
SLUICE_INSTANTIATE_NORM(float)
SLUICE_INSTANTIATE_NORM(double)

}  // namespace sluice::ops::gpu
