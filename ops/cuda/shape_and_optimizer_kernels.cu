// CUDA kernels of the shape and optimizer family (ops/shape_and_optimizer_ops.cc): transpose
// as a gather over an IndexPlan (by element size, so one kernel serves every dtype), and the
// sgd and adam updates. reshape, concat and split need no kernel:
// ops/cuda/shape_and_optimizer_op_kernels.cc enqueues (2-D) cudaMemcpyAsync copies.
#include <cstdint>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

struct CopyFn {
  template <typename T>
  __device__ T operator()(T x) const {
    return x;
  }
};

template <typename T>
cudaError_t RunGather(const IndexPlan& plan, const void* in, void* out, cudaStream_t stream) {
  Operands<T> operands;
  operands.p[0] = static_cast<const T*>(in);
  return RunPlan<T, T, 1>(plan, operands, static_cast<T*>(out), T(0), CopyFn{}, stream);
}

template <typename T>
__global__ void SgdKernel(const T* param, const T* grad, const T* lr, T* out, int64_t n) {
  const T rate = lr[0];
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = param[i] - rate * grad[i];
}

// The elementwise part of adam. The one-element inputs are read here and written only by
// AdamPowsKernel afterwards, so updating them in place is safe.
template <typename T>
__global__ void AdamKernel(const AdamOperands<T> o, int64_t n, double beta1, double beta2,
                           double epsilon) {
  const T b1p = o.beta1_pow[0];
  const T b2p = o.beta2_pow[0];
  const double correction = sqrt(1.0 - static_cast<double>(b2p));
  const T rate =
      static_cast<T>(static_cast<double>(o.lr[0]) * correction / (1.0 - static_cast<double>(b1p)));
  const T eps = static_cast<T>(epsilon * correction);
  const T b1 = static_cast<T>(beta1);
  const T b2 = static_cast<T>(beta2);
  const T one_minus_b1 = static_cast<T>(1.0 - beta1);
  const T one_minus_b2 = static_cast<T>(1.0 - beta2);
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const T g = o.grad[i];
    const T m1 = b1 * o.moment1[i] + one_minus_b1 * g;
    const T m2 = b2 * o.moment2[i] + one_minus_b2 * g * g;
    const T p = o.param[i] - rate * m1 / (Sqrt(m2) + eps);
    o.moment1_out[i] = m1;
    o.moment2_out[i] = m2;
    o.param_out[i] = p;
  }
}

template <typename T>
__global__ void AdamPowsKernel(const AdamOperands<T> o, double beta1, double beta2) {
  const T b1p = o.beta1_pow[0];
  const T b2p = o.beta2_pow[0];
  o.beta1_pow_out[0] = b1p * static_cast<T>(beta1);
  o.beta2_pow_out[0] = b2p * static_cast<T>(beta2);
}

}  // namespace

cudaError_t LaunchGather(const IndexPlan& plan, const void* in, void* out, int element_bytes,
                         cudaStream_t stream) {
  switch (element_bytes) {
    case 1:
      return RunGather<uint8_t>(plan, in, out, stream);
    case 4:
      return RunGather<uint32_t>(plan, in, out, stream);
    case 8:
      return RunGather<uint64_t>(plan, in, out, stream);
  }
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t LaunchSgd(const T* param, const T* grad, const T* lr, T* out, int64_t n,
                      cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SgdKernel<T><<<GridFor(n), kBlock, 0, stream>>>(param, grad, lr, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchAdam(const AdamOperands<T>& o, int64_t n, double beta1, double beta2,
                       double epsilon, cudaStream_t stream) {
  if (n > 0) {
    AdamKernel<T><<<GridFor(n), kBlock, 0, stream>>>(o, n, beta1, beta2, epsilon);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) return error;
  }
  AdamPowsKernel<T><<<1, 1, 0, stream>>>(o, beta1, beta2);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_OPTIMIZERS(T)                                                      \
  template cudaError_t LaunchSgd<T>(const T*, const T*, const T*, T*, int64_t, cudaStream_t); \
  template cudaError_t LaunchAdam<T>(const AdamOperands<T>&, int64_t, double, double, double, \
                                     cudaStream_t);
SLUICE_INSTANTIATE_OPTIMIZERS(float)
SLUICE_INSTANTIATE_OPTIMIZERS(double)

}  // namespace sluice::ops::gpu
