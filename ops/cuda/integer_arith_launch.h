// Launchers of the integer forms of add, sub, mul, div, neg, abs and relu on cuda
// (ops/cuda/integer_arith_kernels.cu), called by ops/cuda/integer_arith_op_kernels.cc. As
// ops/cuda/cuda_launch.h: plain functions over device pointers, compiled by nvcc and the host
// compiler alike, each enqueueing on `stream` and returning cudaGetLastError(). T is int32_t
// or int64_t. The element rules are the host kernels' (ops/cpu/integer_arith_kernels.cc):
// +, -, * and negation wrap around, div truncates toward zero and lowest / -1 wraps.
#ifndef SLUICE_OPS_CUDA_INTEGER_ARITH_LAUNCH_H_
#define SLUICE_OPS_CUDA_INTEGER_ARITH_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/cuda_launch.h"

namespace sluice::ops::gpu {

enum class IntegerBinaryOp : int { kAdd, kSub, kMul, kDiv };
enum class IntegerUnaryOp : int { kNeg, kAbs, kRelu };

// out[j] = op(x[...], y[...]) over a map plan (operands 0: x, 1: y). `out` may be x or y when
// that input has the output's layout. kDiv writes 0 where y is 0 (LaunchFindZero reports it).
template <typename T>
cudaError_t LaunchIntegerBinary(IntegerBinaryOp op, const IndexPlan& plan, const T* x, const T* y,
                                T* out, cudaStream_t stream);
// out[i] = op(x[i]); out may be x.
template <typename T>
cudaError_t LaunchIntegerUnary(IntegerUnaryOp op, const T* x, T* out, int64_t n,
                               cudaStream_t stream);
// record[0] = the lowest i < n with y[i] == 0, if any (record[0] must be all ones before).
template <typename T>
cudaError_t LaunchFindZero(const T* y, int64_t n, uint64_t* record, cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_INTEGER_ARITH_LAUNCH_H_
