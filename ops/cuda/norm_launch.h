// Launchers of the norm family's CUDA kernels (ops/cuda/norm_kernels.cu), called by the
// OpKernels of ops/cuda/norm_op_kernels.cc once those have validated the operands. As
// ops/cuda/cuda_launch.h: plain functions over device pointers, compiled by nvcc and the host
// compiler alike, each enqueueing on `stream` and returning cudaGetLastError() (cudaSuccess
// for nothing to do). T is float or double. Sums are taken in double, each in a fixed order
// (a block's threads take strided elements, then a shared-memory tree adds their partial
// sums), so results do not change from run to run; they may differ from the host kernels'
// in the last bits.
#ifndef SLUICE_OPS_CUDA_NORM_LAUNCH_H_
#define SLUICE_OPS_CUDA_NORM_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::gpu {

// X viewed as [outer, channels, inner] (ops/internal/norm_shapes.h, BatchNormDims).
struct ChannelView {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
};

// batch_norm_infer: out = (x - mean) / sqrt(var + epsilon) * scale + bias per channel, in T as
// the host computes it (correctly rounded sqrt and division, no fused multiply-add: the same
// bits).
template <typename T>
cudaError_t LaunchBatchNorm(const T* x, const T* scale, const T* bias, const T* mean, const T* var,
                            T* out, ChannelView view, T epsilon, cudaStream_t stream);
// batch_norm_infer_grad: the five gradients of ops/norm_ops.cc; one block per channel for
// the sums.
template <typename T>
cudaError_t LaunchBatchNormGrad(const T* x, const T* scale, const T* mean, const T* var, const T* g,
                                T* dx, T* dscale, T* dbias, T* dmean, T* dvar, ChannelView view,
                                T epsilon, cudaStream_t stream);

// layer_norm over `rows` rows of `cols` elements: one block per row. `bias` may be null.
template <typename T>
cudaError_t LaunchLayerNorm(const T* x, const T* scale, const T* bias, T* out, T* mean, T* inv_std,
                            int64_t rows, int64_t cols, double epsilon, cudaStream_t stream);
// layer_norm_grad: dscale and dbias (dbias may be null) by column, one thread per column
// summing the rows in order; dx by row, one block per row.
template <typename T>
cudaError_t LaunchLayerNormGrad(const T* x, const T* scale, const T* mean, const T* inv_std,
                                const T* g, T* dx, T* dscale, T* dbias, int64_t rows, int64_t cols,
                                cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_NORM_LAUNCH_H_
