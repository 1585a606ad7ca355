// Launchers of the index family's CUDA kernels (gather, slice, where, erf and their grads;
// ops/index_ops.cc): plain functions over device pointers and small descriptor structs,
// defined in ops/cuda/index_kernels.cu and called by ops/cuda/index_op_kernels.cc once the
// operands are validated. Compiled by nvcc and by the host compiler alike: the CUDA runtime
// API and the standard library only, as ops/cuda/cuda_launch.h (whose IndexPlan it uses).
//
// Every launcher enqueues its work on `stream` and returns cudaGetLastError() after the last
// launch (cudaSuccess when there is nothing to do). Sums run in a fixed order, so a result
// does not change from run to run.
#ifndef SLUICE_OPS_CUDA_INDEX_LAUNCH_H_
#define SLUICE_OPS_CUDA_INDEX_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/cuda/cuda_launch.h"

namespace sluice::ops::gpu {

// gather's view of X as [outer, size, inner] around the axis, and Index's element count.
struct GatherGeometry {
  int64_t outer = 1;
  int64_t size = 0;
  int64_t inner = 1;
  int64_t count = 0;
};

// out[o, k, i] = x[o, row(index[k]), i] for elements of `element_bytes` bytes (1, 4 or 8: any
// dtype), index i64 when `index_i64` else i32, row(v) = v + size for v in [-size, 0). `bad` is
// device memory of two 64-bit words the caller sets to all ones: an index outside [-size,
// size) writes zeros, and afterwards bad[0] holds the first such position k and bad[1] its
// value (bad[0] stays all ones when every index is valid). `out` must not alias `x`.
cudaError_t LaunchGatherRows(const void* x, const void* index, bool index_i64, void* out,
                             int element_bytes, const GatherGeometry& g, uint64_t* bad,
                             cudaStream_t stream);
// gather_grad: dx = 0, then dx[o, row(index[k]), i] += g[o, k, i] for k in order (one thread
// per (o, i) walks Index, so a repeated index sums in Index's order, as the host does). Bad
// indices are skipped and recorded in `bad` as above. T: float, double.
template <typename T>
cudaError_t LaunchGatherRowsGrad(const void* index, bool index_i64, const T* g, T* dx,
                                 const GatherGeometry& geometry, uint64_t* bad,
                                 cudaStream_t stream);

// slice's walk: Out's element j (row-major over dims) reads X at base + sum of c_d strides[d]
// (c the multi-index of j; strides may be negative). Dims of size 1 are dropped and
// neighbours merged by the caller, so `rank` <= kMaxDims.
struct SliceGeometry {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t base = 0;
  int64_t count = 0;  // Out's elements
};
// out[j] = x[offset(j)] for elements of `element_bytes` bytes (1, 4 or 8). `out` must not
// alias `x`.
cudaError_t LaunchSlice(const void* x, void* out, int element_bytes, const SliceGeometry& s,
                        cudaStream_t stream);
// slice_grad: dx = 0 (dx_count elements), then dx[offset(j)] = g[j] (each place written at
// most once). T: float, double.
template <typename T>
cudaError_t LaunchSliceGrad(const T* g, T* dx, int64_t dx_count, const SliceGeometry& s,
                            cudaStream_t stream);

// where: out[j] = cond[...] ? x[...] : y[...] over a map plan (operands 0: cond, 1: x, 2: y),
// for elements of `element_bytes` bytes (1, 4 or 8); cond bytes are true when nonzero. `out`
// may be x or y when that input has the output's layout.
cudaError_t LaunchWhere(const IndexPlan& plan, const uint8_t* cond, const void* x, const void* y,
                        void* out, int element_bytes, cudaStream_t stream);
// where_grad's share of one input: target[j] = sum over the plan's reduced dims of (cond[...]
// == take_true ? g[...] : 0) (operands 0: g, 1: cond), the target contiguous over the kept
// dims. The target must not alias an operand. T: float, double.
template <typename T>
cudaError_t LaunchWhereGrad(const IndexPlan& plan, const T* g, const uint8_t* cond, bool take_true,
                            T* target, cudaStream_t stream);

// erf: out[i] = erf(x[i]) (CUDA's erff / erf); out may be x. erf_grad: dx[i] = 2 / sqrt(pi)
// exp(-x[i]^2) g[i]; dx may be x or g. T: float, double.
template <typename T>
cudaError_t LaunchErf(const T* x, T* out, int64_t n, cudaStream_t stream);
template <typename T>
cudaError_t LaunchErfGrad(const T* x, const T* g, T* dx, int64_t n, cudaStream_t stream);

}  // namespace sluice::ops::gpu

#endif  // SLUICE_OPS_CUDA_INDEX_LAUNCH_H_
