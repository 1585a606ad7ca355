// CUDA kernels of the index family (ops/index_ops.cc; launchers in ops/cuda/index_launch.h).
// gather, slice and where move elements as 1-, 4- or 8-byte words, whatever the dtype;
// gather_grad and slice_grad zero their output and then write it from one thread per place
// (no atomics on values, so sums keep the host's order); where_grad reduces over broadcast
// dims one thread per output element (or one block, for few outputs with long sums, in a
// fixed tree order). Bad gather indices are recorded with an atomicMin on their position,
// which does not depend on the order threads run in.
#include <cstdint>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"
#include "ops/cuda/index_launch.h"

namespace sluice::ops::gpu {
namespace {

constexpr uint64_t kNoBadIndex = ~uint64_t{0};

// ---- gather ----

__device__ inline int64_t LoadIndexAt(const void* index, bool index_i64, int64_t k) {
  return index_i64 ? static_cast<const int64_t*>(index)[k]
                   : static_cast<int64_t>(static_cast<const int32_t*>(index)[k]);
}

// The row an index names, or -1 when it is outside [-size, size).
__device__ inline int64_t RowOf(int64_t value, int64_t size) {
  if (value < -size || value >= size) return -1;
  return value < 0 ? value + size : value;
}

__device__ inline void ReportBadIndex(uint64_t* bad, int64_t k) {
  atomicMin(reinterpret_cast<unsigned long long*>(bad), static_cast<unsigned long long>(k));
}

// After the gather kernels: bad[1] = the value of the first bad index, if any.
__global__ void BadIndexValueKernel(const void* index, bool index_i64, uint64_t* bad) {
  if (bad[0] != kNoBadIndex) {
    bad[1] = static_cast<uint64_t>(LoadIndexAt(index, index_i64, static_cast<int64_t>(bad[0])));
  }
}

template <typename E>
__global__ void GatherRowsKernel(const E* x, const void* index, bool index_i64, E* out,
                                 GatherGeometry g, uint64_t* bad) {
  const int64_t n = g.outer * g.count * g.inner;
  for (int64_t j = GlobalIndex(); j < n; j += GlobalStride()) {
    const int64_t i = j % g.inner;
    const int64_t k = (j / g.inner) % g.count;
    const int64_t o = j / (g.inner * g.count);
    const int64_t row = RowOf(LoadIndexAt(index, index_i64, k), g.size);
    if (row < 0) {
      out[j] = E(0);
      if (o == 0 && i == 0) ReportBadIndex(bad, k);
    } else {
      out[j] = x[(o * g.size + row) * g.inner + i];
    }
  }
}

// One thread per (o, i): dx[o, row, i] for every row is this thread's alone.
template <typename T>
__global__ void GatherRowsGradKernel(const void* index, bool index_i64, const T* g, T* dx,
                                     GatherGeometry geo, uint64_t* bad) {
  const int64_t n = geo.outer * geo.inner;
  for (int64_t j = GlobalIndex(); j < n; j += GlobalStride()) {
    const int64_t i = j % geo.inner;
    const int64_t o = j / geo.inner;
    const T* src = g + o * geo.count * geo.inner + i;
    T* dst = dx + o * geo.size * geo.inner + i;
    for (int64_t k = 0; k < geo.count; ++k) {
      const int64_t row = RowOf(LoadIndexAt(index, index_i64, k), geo.size);
      if (row < 0) {
        if (j == 0) ReportBadIndex(bad, k);
        continue;
      }
      dst[row * geo.inner] += src[k * geo.inner];
    }
  }
}

// ---- slice ----

__device__ inline int64_t SliceOffset(const SliceGeometry& s, int64_t j) {
  int64_t offset = s.base;
  for (int d = s.rank - 1; d >= 0; --d) {
    offset += (j % s.dims[d]) * s.strides[d];
    j /= s.dims[d];
  }
  return offset;
}

template <typename E>
__global__ void SliceKernel(const E* x, E* out, const __grid_constant__ SliceGeometry s) {
  for (int64_t j = GlobalIndex(); j < s.count; j += GlobalStride()) out[j] = x[SliceOffset(s, j)];
}

template <typename T>
__global__ void SliceGradKernel(const T* g, T* dx, const __grid_constant__ SliceGeometry s) {
  for (int64_t j = GlobalIndex(); j < s.count; j += GlobalStride()) dx[SliceOffset(s, j)] = g[j];
}

// ---- where ----

template <typename E>
__global__ void WhereKernel(const __grid_constant__ IndexPlan p, const uint8_t* cond, const E* x,
                            const E* y, E* out) {
  for (int64_t j = GlobalIndex(); j < p.kept_count; j += GlobalStride()) {
    int64_t off[3];
    KeptOffsets<3>(p, j, off);
    out[j] = cond[off[0]] != 0 ? x[off[1]] : y[off[2]];
  }
}

template <typename T>
__device__ inline T Picked(const T* g, const uint8_t* cond, bool take_true,
                           const int64_t (&off)[2]) {
  return (cond[off[1]] != 0) == take_true ? g[off[0]] : T(0);
}

// One thread per output element, walking the reduced dims in row-major order (the host's
// order of the same terms).
template <typename T>
__global__ void WhereGradByThreadKernel(const __grid_constant__ IndexPlan p, const T* g,
                                        const uint8_t* cond, bool take_true, T* out) {
  for (int64_t j = GlobalIndex(); j < p.kept_count; j += GlobalStride()) {
    int64_t off[2];
    KeptOffsets<2>(p, j, off);
    int64_t counter[kMaxDims] = {};
    T acc = 0;
    for (int64_t r = 0; r < p.red_count; ++r) {
      acc += Picked(g, cond, take_true, off);
      for (int d = p.red_rank - 1; d >= 0; --d) {  // odometer step
        for (int k = 0; k < 2; ++k) off[k] += p.red_strides[k][d];
        if (++counter[d] < p.red_dims[d]) break;
        for (int k = 0; k < 2; ++k) off[k] -= p.red_strides[k][d] * p.red_dims[d];
        counter[d] = 0;
      }
    }
    out[j] = acc;
  }
}

// One block per output element: strided partial sums, then a shared-memory tree.
template <typename T>
__global__ void WhereGradByBlockKernel(const __grid_constant__ IndexPlan p, const T* g,
                                       const uint8_t* cond, bool take_true, T* out) {
  __shared__ T partial[kBlock];
  for (int64_t j = blockIdx.x; j < p.kept_count; j += gridDim.x) {
    int64_t base[2];
    KeptOffsets<2>(p, j, base);
    T acc = 0;
    for (int64_t r = threadIdx.x; r < p.red_count; r += blockDim.x) {
      int64_t off[2];
      ReducedOffsets<2>(p, r, off);
      for (int k = 0; k < 2; ++k) off[k] += base[k];
      acc += Picked(g, cond, take_true, off);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) out[j] = partial[0];
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

// ---- erf ----

__device__ inline float Erf(float x) { return erff(x); }
__device__ inline double Erf(double x) { return erf(x); }

template <typename T>
__global__ void ErfKernel(const T* x, T* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = Erf(x[i]);
}

template <typename T>
__global__ void ErfGradKernel(const T* x, const T* g, T* dx, int64_t n) {
  const T two_over_sqrt_pi = T(1.12837916709551257390);
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const T v = x[i];
    dx[i] = two_over_sqrt_pi * Exp(-(v * v)) * g[i];
  }
}

template <typename E>
cudaError_t RunGatherRows(const void* x, const void* index, bool index_i64, void* out,
                          const GatherGeometry& g, uint64_t* bad, cudaStream_t stream) {
  const int64_t n = g.outer * g.count * g.inner;
  GatherRowsKernel<E><<<GridFor(n), kBlock, 0, stream>>>(static_cast<const E*>(x), index, index_i64,
                                                         static_cast<E*>(out), g, bad);
  BadIndexValueKernel<<<1, 1, 0, stream>>>(index, index_i64, bad);
  return cudaGetLastError();
}

template <typename E>
cudaError_t RunSlice(const void* x, void* out, const SliceGeometry& s, cudaStream_t stream) {
  SliceKernel<E>
      <<<GridFor(s.count), kBlock, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(out), s);
  return cudaGetLastError();
}

template <typename E>
cudaError_t RunWhere(const IndexPlan& plan, const uint8_t* cond, const void* x, const void* y,
                     void* out, cudaStream_t stream) {
  WhereKernel<E><<<GridFor(plan.kept_count), kBlock, 0, stream>>>(
      plan, cond, static_cast<const E*>(x), static_cast<const E*>(y), static_cast<E*>(out));
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGatherRows(const void* x, const void* index, bool index_i64, void* out,
                             int element_bytes, const GatherGeometry& g, uint64_t* bad,
                             cudaStream_t stream) {
  if (g.outer * g.count * g.inner == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1:
      return RunGatherRows<uint8_t>(x, index, index_i64, out, g, bad, stream);
    case 4:
      return RunGatherRows<uint32_t>(x, index, index_i64, out, g, bad, stream);
    default:
      return RunGatherRows<uint64_t>(x, index, index_i64, out, g, bad, stream);
  }
}

template <typename T>
cudaError_t LaunchGatherRowsGrad(const void* index, bool index_i64, const T* g, T* dx,
                                 const GatherGeometry& geometry, uint64_t* bad,
                                 cudaStream_t stream) {
  const int64_t n = geometry.outer * geometry.size * geometry.inner;
  if (n == 0) return cudaSuccess;
  const cudaError_t zeroed = cudaMemsetAsync(dx, 0, static_cast<size_t>(n) * sizeof(T), stream);
  if (zeroed != cudaSuccess) return zeroed;
  const int64_t columns = geometry.outer * geometry.inner;
  GatherRowsGradKernel<T>
      <<<GridFor(columns), kBlock, 0, stream>>>(index, index_i64, g, dx, geometry, bad);
  BadIndexValueKernel<<<1, 1, 0, stream>>>(index, index_i64, bad);
  return cudaGetLastError();
}

cudaError_t LaunchSlice(const void* x, void* out, int element_bytes, const SliceGeometry& s,
                        cudaStream_t stream) {
  if (s.count == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1:
      return RunSlice<uint8_t>(x, out, s, stream);
    case 4:
      return RunSlice<uint32_t>(x, out, s, stream);
    default:
      return RunSlice<uint64_t>(x, out, s, stream);
  }
}

template <typename T>
cudaError_t LaunchSliceGrad(const T* g, T* dx, int64_t dx_count, const SliceGeometry& s,
                            cudaStream_t stream) {
  if (dx_count == 0) return cudaSuccess;
  const cudaError_t zeroed =
      cudaMemsetAsync(dx, 0, static_cast<size_t>(dx_count) * sizeof(T), stream);
  if (zeroed != cudaSuccess || s.count == 0) return zeroed;
  SliceGradKernel<T><<<GridFor(s.count), kBlock, 0, stream>>>(g, dx, s);
  return cudaGetLastError();
}

cudaError_t LaunchWhere(const IndexPlan& plan, const uint8_t* cond, const void* x, const void* y,
                        void* out, int element_bytes, cudaStream_t stream) {
  if (plan.kept_count == 0) return cudaSuccess;
  switch (element_bytes) {
    case 1:
      return RunWhere<uint8_t>(plan, cond, x, y, out, stream);
    case 4:
      return RunWhere<uint32_t>(plan, cond, x, y, out, stream);
    default:
      return RunWhere<uint64_t>(plan, cond, x, y, out, stream);
  }
}

template <typename T>
cudaError_t LaunchWhereGrad(const IndexPlan& plan, const T* g, const uint8_t* cond, bool take_true,
                            T* target, cudaStream_t stream) {
  if (plan.kept_count == 0) return cudaSuccess;
  if (plan.red_count >= 128 && plan.kept_count < 8192) {
    WhereGradByBlockKernel<T>
        <<<GridFor(plan.kept_count, 1), kBlock, 0, stream>>>(plan, g, cond, take_true, target);
  } else {
    WhereGradByThreadKernel<T>
        <<<GridFor(plan.kept_count), kBlock, 0, stream>>>(plan, g, cond, take_true, target);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchErf(const T* x, T* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ErfKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchErfGrad(const T* x, const T* g, T* dx, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ErfGradKernel<T><<<GridFor(n), kBlock, 0, stream>>>(x, g, dx, n);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_INDEX(T)                                                             \
  template cudaError_t LaunchGatherRowsGrad<T>(const void*, bool, const T*, T*,                 \
                                               const GatherGeometry&, uint64_t*, cudaStream_t); \
  template cudaError_t LaunchSliceGrad<T>(const T*, T*, int64_t, const SliceGeometry&,          \
                                          cudaStream_t);                                        \
  template cudaError_t LaunchWhereGrad<T>(const IndexPlan&, const T*, const uint8_t*, bool, T*, \
                                          cudaStream_t);                                        \
  template cudaError_t LaunchErf<T>(const T*, T*, int64_t, cudaStream_t);                       \
  template cudaError_t LaunchErfGrad<T>(const T*, const T*, T*, int64_t, cudaStream_t);
SLUICE_INSTANTIATE_INDEX(float)
SLUICE_INSTANTIATE_INDEX(double)
#undef SLUICE_INSTANTIATE_INDEX

}  // namespace sluice::ops::gpu
