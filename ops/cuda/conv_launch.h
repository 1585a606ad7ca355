// Launchers of the conv family's CUDA kernels (ops/cuda/conv_kernels.cu), called by the
// OpKernels of ops/cuda/conv_op_kernels.cc once those have validated the operands with the
// geometry of ops/internal/conv_geometry.h. Like ops/cuda/cuda_launch.h, compiled by nvcc and
// by the host compiler alike: the CUDA runtime API and the standard library only.
//
// Every launcher enqueues its work on `stream` and returns cudaGetLastError() after the
// launch (cudaSuccess when there is nothing to do). T: float and double. Tensors are NCHW and
// contiguous; no output may alias an input.
#ifndef SLUICE_OPS_CUDA_CONV_LAUNCH_H_
#define SLUICE_OPS_CUDA_CONV_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::gpu {

// One spatial axis of a sliding window (conv::WindowAxis): output position o reads input
// positions o * stride - pad_begin + t * dilation for t in [0, kernel).
struct WindowDims {
  int64_t in = 0;
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
  int64_t dilation = 1;
  int64_t out = 0;
};

// conv2d: X [n, c, h.in, w.in], W [m, c / groups, h.kernel, w.kernel], Out [n, m, h.out,
// w.out].
struct ConvDims {
  int64_t n = 0;
  int64_t c = 0;
  int64_t m = 0;
  int64_t groups = 1;
  WindowDims h;
  WindowDims w;
};

// The pools: X [planes, h.in, w.in] -> Out [planes, h.out, w.out].
struct PoolDims {
  int64_t planes = 0;
  WindowDims h;
  WindowDims w;
  bool average = false;
  bool count_include_pad = false;
};

// Out = conv2d(X, W): a thread per output element, products fused (fma) in tap order.
template <typename T>
cudaError_t LaunchConv2d(const ConvDims& d, const T* x, const T* w, T* out, cudaStream_t stream);
// XGrad: a thread per input element, gathering OutGrad times W over the windows that read it.
template <typename T>
cudaError_t LaunchConv2dGradX(const ConvDims& d, const T* w, const T* g, T* dx,
                              cudaStream_t stream);
// WGrad: a block per weight element, its threads splitting the (image, position) sum and a
// shared-memory tree adding their partial sums (a fixed order).
template <typename T>
cudaError_t LaunchConv2dGradW(const ConvDims& d, const T* x, const T* g, T* dw,
                              cudaStream_t stream);
// max_pool2d or avg_pool2d (d.average), a thread per output element, as the host kernels:
// the first arg-max inside the input (NaN wins), or the sum in double over the taps inside
// the input divided by the divisor count_include_pad chooses.
template <typename T>
cudaError_t LaunchPool2d(const PoolDims& d, const T* x, T* out, cudaStream_t stream);
// Their gradients: a thread per input element, gathering OutGrad from the windows whose
// arg-max it is (max) or that read it (average, OutGrad / divisor).
template <typename T>
cudaError_t LaunchPool2dGrad(const PoolDims& d, const T* x, const T* g, T* dx, cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_CONV_LAUNCH_H_
