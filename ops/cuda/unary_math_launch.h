// Launchers of the unary math family's CUDA kernels (ops/unary_math_ops.cc), defined in
// ops/cuda/unary_math_kernels.cu and called by ops/cuda/unary_math_op_kernels.cc once the
// operands are validated. Compiled by nvcc and by the host compiler alike: the CUDA runtime
// API and the standard library only. A function is named by its number, `fn`: the value of
// its internal::UnaryMathFn (ops/internal/unary_math.h, which a public header may not
// include).
//
// Every launcher enqueues its work on `stream` and returns cudaGetLastError() after the
// launch (cudaSuccess when there is nothing to do).
#ifndef SLUICE_OPS_CUDA_UNARY_MATH_LAUNCH_H_
#define SLUICE_OPS_CUDA_UNARY_MATH_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::gpu {

// out[i] = f(x[i]) with CUDA's sinf / sin, ... (round: rintf / rint, halves to even); out may
// be x. T: float, double.
template <typename T>
cudaError_t LaunchUnaryMath(int fn, const T* x, T* out, int64_t n, cudaStream_t stream);

// dx[i] = f'(x[i]) g[i], f' as in ops/unary_math_ops.cc; dx may be x or g. `fn` must be one of
// the first internal::kNumDifferentiableUnaryMath functions. T: float, double.
template <typename T>
cudaError_t LaunchUnaryMathGrad(int fn, const T* x, const T* g, T* dx, int64_t n,
                                cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_UNARY_MATH_LAUNCH_H_
