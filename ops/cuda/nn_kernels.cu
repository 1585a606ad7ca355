// CUDA kernels of the nn family (ops/nn_ops.cc): a batched shared-memory tiled matrix product
// (matmul and both halves of matmul_grad, broadcast batches summed in the kernel), the
// reductions and their gradients over IndexPlans, softmax / log_softmax and their grads (a
// warp per row when the axis is the innermost, a thread per column otherwise), and softmax with
// cross entropy (a warp per row) with its label check. Sums that the host takes in double are
// taken in double here too, so results differ from the host's only by summation order and by
// CUDA's exp/log.
#include <cstdint>

#include "ops/cuda/cuda_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

// ---- Matrix products ----

constexpr int kTile = 16;
constexpr int64_t kMaxGridYZ = 65535;

// One kTile x kTile tile of C per block and pass, each thread one element, with the k
// dimension walked in kTile-deep slices staged in shared memory. Tiles are loaded along the
// operand's contiguous direction so that neighbouring threads read neighbouring addresses.
template <typename T>
__global__ void GemmKernel(const __grid_constant__ GemmPlan p, const T* a, const T* b, T* c) {
  __shared__ T as[kTile][kTile + 1];
  __shared__ T bs[kTile][kTile + 1];
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t tiles_m = (p.m + kTile - 1) / kTile;
  const bool a_by_rows = p.a_col == 1 || p.a_row != 1;
  const bool b_by_rows = p.b_col == 1 || p.b_row != 1;
  for (int64_t t = blockIdx.z; t < p.batch.kept_count; t += gridDim.z) {
    int64_t base[2];
    KeptOffsets<2>(p.batch, t, base);
    T* ct = c + t * p.m * p.n;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      const int64_t i0 = tm * kTile;
      const int64_t j0 = static_cast<int64_t>(blockIdx.x) * kTile;
      T acc = 0;
      for (int64_t r = 0; r < p.batch.red_count; ++r) {
        int64_t off[2];
        ReducedOffsets<2>(p.batch, r, off);
        const T* ab = a + base[0] + off[0];
        const T* bb = b + base[1] + off[1];
        for (int64_t p0 = 0; p0 < p.k; p0 += kTile) {
          // as[row][col] = A(i0 + row, p0 + col); bs[row][col] = B(p0 + row, j0 + col).
          const int ar = a_by_rows ? ty : tx;
          const int ac = a_by_rows ? tx : ty;
          const int64_t ai = i0 + ar;
          const int64_t ap = p0 + ac;
          as[ar][ac] = ai < p.m && ap < p.k ? ab[ai * p.a_row + ap * p.a_col] : T(0);
          const int br = b_by_rows ? ty : tx;
          const int bc = b_by_rows ? tx : ty;
          const int64_t bp = p0 + br;
          const int64_t bj = j0 + bc;
          bs[br][bc] = bp < p.k && bj < p.n ? bb[bp * p.b_row + bj * p.b_col] : T(0);
          __syncthreads();
#pragma unroll
          for (int q = 0; q < kTile; ++q) acc = Fma(as[ty][q], bs[q][tx], acc);
          __syncthreads();
        }
      }
      const int64_t i = i0 + ty;
      const int64_t j = j0 + tx;
      if (i < p.m && j < p.n) ct[i * p.n + j] = acc;
    }
  }
}

// ---- Reductions ----

struct IdentityFn {
  template <typename T>
  __device__ T operator()(T x) const {
    return x;
  }
};

template <typename T>
struct ScaleFn {
  T scale;
  __device__ T operator()(T g) const { return g * scale; }
};

// ---- Softmax ----

// Rows of `c` contiguous elements, a warp per row. Sums in double, as on the host.
template <typename T, bool kLog>
__global__ void SoftmaxRowsKernel(const T* x, T* y, int64_t rows, int64_t c) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GlobalStride() / 32;
  for (int64_t r = GlobalIndex() / 32; r < rows; r += warps) {
    const T* xr = x + r * c;
    T* yr = y + r * c;
    T mx = xr[0];
    for (int64_t k = lane; k < c; k += 32) mx = mx < xr[k] ? xr[k] : mx;
    mx = WarpMax(mx);
    double sum = 0;
    for (int64_t k = lane; k < c; k += 32) sum += static_cast<double>(Exp(xr[k] - mx));
    sum = WarpSum(sum);
    if constexpr (kLog) {
      const double log_sum = log(sum);
      for (int64_t k = lane; k < c; k += 32) {
        yr[k] = static_cast<T>(static_cast<double>(xr[k] - mx) - log_sum);
      }
    } else {
      const double inv = 1.0 / sum;
      for (int64_t k = lane; k < c; k += 32) {
        yr[k] = static_cast<T>(static_cast<double>(Exp(xr[k] - mx)) * inv);
      }
    }
  }
}

// [outer, c, inner] with inner > 1: a thread per (outer, inner) column.
template <typename T, bool kLog>
__global__ void SoftmaxColumnsKernel(const T* x, T* y, AxisView v) {
  const int64_t columns = v.outer * v.inner;
  for (int64_t col = GlobalIndex(); col < columns; col += GlobalStride()) {
    const int64_t o = col / v.inner;
    const int64_t base = o * v.dim * v.inner + col % v.inner;
    const T* xc = x + base;
    T* yc = y + base;
    T mx = xc[0];
    for (int64_t k = 1; k < v.dim; ++k) mx = mx < xc[k * v.inner] ? xc[k * v.inner] : mx;
    double sum = 0;
    for (int64_t k = 0; k < v.dim; ++k) sum += static_cast<double>(Exp(xc[k * v.inner] - mx));
    if constexpr (kLog) {
      const double log_sum = log(sum);
      for (int64_t k = 0; k < v.dim; ++k) {
        yc[k * v.inner] = static_cast<T>(static_cast<double>(xc[k * v.inner] - mx) - log_sum);
      }
    } else {
      const double inv = 1.0 / sum;
      for (int64_t k = 0; k < v.dim; ++k) {
        yc[k * v.inner] = static_cast<T>(static_cast<double>(Exp(xc[k * v.inner] - mx)) * inv);
      }
    }
  }
}

// softmax_grad: dx = y (g - s), s = sum(g y); log_softmax_grad: dx = g - exp(y) s, s = sum(g).
template <typename T, bool kLog>
__device__ inline T SoftmaxGradAt(T y, T g, T s) {
  if constexpr (kLog) {
    return g - Exp(y) * s;
  } else {
    return y * (g - s);
  }
}

template <typename T, bool kLog>
__global__ void SoftmaxGradRowsKernel(const T* y, const T* g, T* dx, int64_t rows, int64_t c) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GlobalStride() / 32;
  for (int64_t r = GlobalIndex() / 32; r < rows; r += warps) {
    const T* yr = y + r * c;
    const T* gr = g + r * c;
    T* dr = dx + r * c;
    double acc = 0;
    for (int64_t k = lane; k < c; k += 32) {
      acc += kLog ? static_cast<double>(gr[k]) : static_cast<double>(gr[k] * yr[k]);
    }
    const T s = static_cast<T>(WarpSum(acc));
    for (int64_t k = lane; k < c; k += 32) dr[k] = SoftmaxGradAt<T, kLog>(yr[k], gr[k], s);
  }
}

template <typename T, bool kLog>
__global__ void SoftmaxGradColumnsKernel(const T* y, const T* g, T* dx, AxisView v) {
  const int64_t columns = v.outer * v.inner;
  for (int64_t col = GlobalIndex(); col < columns; col += GlobalStride()) {
    const int64_t base = (col / v.inner) * v.dim * v.inner + col % v.inner;
    double acc = 0;
    for (int64_t k = 0; k < v.dim; ++k) {
      const int64_t i = base + k * v.inner;
      acc += kLog ? static_cast<double>(g[i]) : static_cast<double>(g[i] * y[i]);
    }
    const T s = static_cast<T>(acc);
    for (int64_t k = 0; k < v.dim; ++k) {
      const int64_t i = base + k * v.inner;
      dx[i] = SoftmaxGradAt<T, kLog>(y[i], g[i], s);
    }
  }
}

template <typename T, bool kLog>
cudaError_t RunSoftmax(const T* x, T* y, AxisView v, cudaStream_t stream) {
  if (v.inner == 1) {
    const int64_t rows = v.outer;
    SoftmaxRowsKernel<T, kLog>
        <<<GridFor(rows, kBlock / 32), kBlock, 0, stream>>>(x, y, rows, v.dim);
  } else {
    SoftmaxColumnsKernel<T, kLog><<<GridFor(v.outer * v.inner), kBlock, 0, stream>>>(x, y, v);
  }
  return cudaGetLastError();
}

template <typename T, bool kLog>
cudaError_t RunSoftmaxGrad(const T* y, const T* g, T* dx, AxisView v, cudaStream_t stream) {
  if (v.inner == 1) {
    const int64_t rows = v.outer;
    SoftmaxGradRowsKernel<T, kLog>
        <<<GridFor(rows, kBlock / 32), kBlock, 0, stream>>>(y, g, dx, rows, v.dim);
  } else {
    SoftmaxGradColumnsKernel<T, kLog>
        <<<GridFor(v.outer * v.inner), kBlock, 0, stream>>>(y, g, dx, v);
  }
  return cudaGetLastError();
}

// ---- Cross entropy ----

constexpr uint64_t kNoBadRow = ~uint64_t{0};

__device__ inline void ReportBadRow(uint64_t* bad, int64_t row) {
  atomicMin(reinterpret_cast<unsigned long long*>(bad), static_cast<unsigned long long>(row));
}

// After the row kernels: bad[1] = the label of the first bad row, if any.
__global__ void BadLabelKernel(const int64_t* label, uint64_t* bad) {
  if (bad[0] != kNoBadRow) bad[1] = static_cast<uint64_t>(label[bad[0]]);
}

// A warp per row: p = exp(x - max) * T(1 / sum), loss = log(sum) - (x[label] - max), the sum
// in double (as the host computes them).
template <typename T>
__global__ void CrossEntropyKernel(const T* x, const int64_t* label, T* p, T* loss, int64_t rows,
                                   int64_t c, uint64_t* bad) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GlobalStride() / 32;
  for (int64_t r = GlobalIndex() / 32; r < rows; r += warps) {
    const int64_t l = label[r];
    const bool ok = l >= 0 && l < c;
    if (!ok && lane == 0) {
      loss[r] = NaN<T>();
      ReportBadRow(bad, r);
    }
    if (c == 0) continue;
    const T* xr = x + r * c;
    T* pr = p + r * c;
    T mx = xr[0];
    for (int64_t k = lane; k < c; k += 32) mx = mx < xr[k] ? xr[k] : mx;
    mx = WarpMax(mx);
    double sum = 0;
    for (int64_t k = lane; k < c; k += 32) sum += static_cast<double>(Exp(xr[k] - mx));
    sum = WarpSum(sum);
    // The label's logit is read before any lane writes the row (Softmax may be Logits).
    const T x_label = ok && lane == 0 ? xr[l] : T(0);
    __syncwarp();
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t k = lane; k < c; k += 32) pr[k] = Exp(xr[k] - mx) * inv;
    if (ok && lane == 0) loss[r] = static_cast<T>(log(sum) - static_cast<double>(x_label - mx));
  }
}

template <typename T>
__global__ void CrossEntropyGradKernel(const T* p, const int64_t* label, const T* lg, const T* sg,
                                       T* dx, int64_t rows, int64_t c, uint64_t* bad) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = GlobalStride() / 32;
  for (int64_t r = GlobalIndex() / 32; r < rows; r += warps) {
    const T* pr = p + r * c;
    T* dr = dx + r * c;
    const int64_t l = label[r];
    const bool ok = l >= 0 && l < c;
    if (!ok && lane == 0) ReportBadRow(bad, r);
    const T scale = lg[r];
    T dot = 0;
    if (sg != nullptr) {
      double acc = 0;
      for (int64_t k = lane; k < c; k += 32) {
        acc += static_cast<double>(sg[r * c + k]) * static_cast<double>(pr[k]);
      }
      dot = static_cast<T>(WarpSum(acc));
    }
    for (int64_t k = lane; k < c; k += 32) {
      T v = scale * pr[k];
      if (k == l) v -= scale;
      if (sg != nullptr) v += pr[k] * (sg[r * c + k] - dot);
      dr[k] = ok ? v : NaN<T>();
    }
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchGemm(const GemmPlan& plan, const T* a, const T* b, T* c, cudaStream_t stream) {
  if (plan.m == 0 || plan.n == 0 || plan.batch.kept_count == 0) return cudaSuccess;
  const int64_t tiles_m = (plan.m + kTile - 1) / kTile;
  const int64_t tiles_n = (plan.n + kTile - 1) / kTile;
  const dim3 grid(static_cast<unsigned>(tiles_n),
                  static_cast<unsigned>(tiles_m < kMaxGridYZ ? tiles_m : kMaxGridYZ),
                  static_cast<unsigned>(plan.batch.kept_count < kMaxGridYZ ? plan.batch.kept_count
                                                                           : kMaxGridYZ));
  GemmKernel<T><<<grid, dim3(kTile, kTile), 0, stream>>>(plan, a, b, c);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchReduceSum(const IndexPlan& plan, const T* x, T* out, double scale,
                            cudaStream_t stream) {
  Operands<T> in;
  in.p[0] = x;
  return RunPlan<T, double, 1>(plan, in, out, scale, IdentityFn{}, stream);
}

template <typename T>
cudaError_t LaunchBroadcastScaled(const IndexPlan& plan, const T* g, T* out, T scale,
                                  cudaStream_t stream) {
  Operands<T> in;
  in.p[0] = g;
  return RunPlan<T, T, 1>(plan, in, out, T(1), ScaleFn<T>{scale}, stream);
}

template <typename T>
cudaError_t LaunchSoftmax(const T* x, T* y, AxisView view, bool log, cudaStream_t stream) {
  if (view.outer * view.dim * view.inner == 0) return cudaSuccess;
  return log ? RunSoftmax<T, true>(x, y, view, stream) : RunSoftmax<T, false>(x, y, view, stream);
}

template <typename T>
cudaError_t LaunchSoftmaxGrad(const T* y, const T* g, T* dx, AxisView view, bool log,
                              cudaStream_t stream) {
  if (view.outer * view.dim * view.inner == 0) return cudaSuccess;
  return log ? RunSoftmaxGrad<T, true>(y, g, dx, view, stream)
             : RunSoftmaxGrad<T, false>(y, g, dx, view, stream);
}

template <typename T>
cudaError_t LaunchCrossEntropy(const T* logits, const int64_t* label, T* softmax, T* loss,
                               int64_t rows, int64_t classes, uint64_t* bad, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CrossEntropyKernel<T><<<GridFor(rows, kBlock / 32), kBlock, 0, stream>>>(
      logits, label, softmax, loss, rows, classes, bad);
  BadLabelKernel<<<1, 1, 0, stream>>>(label, bad);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchCrossEntropyGrad(const T* softmax, const int64_t* label, const T* loss_grad,
                                   const T* softmax_grad, T* dx, int64_t rows, int64_t classes,
                                   uint64_t* bad, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  CrossEntropyGradKernel<T><<<GridFor(rows, kBlock / 32), kBlock, 0, stream>>>(
      softmax, label, loss_grad, softmax_grad, dx, rows, classes, bad);
  BadLabelKernel<<<1, 1, 0, stream>>>(label, bad);
  return cudaGetLastError();
}

#define SLUICE_INSTANTIATE_NN(T)                                                                   \
  template cudaError_t LaunchGemm<T>(const GemmPlan&, const T*, const T*, T*, cudaStream_t);       \
  template cudaError_t LaunchReduceSum<T>(const IndexPlan&, const T*, T*, double, cudaStream_t);   \
  template cudaError_t LaunchBroadcastScaled<T>(const IndexPlan&, const T*, T*, T, cudaStream_t);  \
  template cudaError_t LaunchSoftmax<T>(const T*, T*, AxisView, bool, cudaStream_t);               \
  template cudaError_t LaunchSoftmaxGrad<T>(const T*, const T*, T*, AxisView, bool, cudaStream_t); \
  template cudaError_t LaunchCrossEntropy<T>(const T*, const int64_t*, T*, T*, int64_t, int64_t,   \
                                             uint64_t*, cudaStream_t);                             \
  template cudaError_t LaunchCrossEntropyGrad<T>(const T*, const int64_t*, const T*, const T*, T*, \
                                                 int64_t, int64_t, uint64_t*, cudaStream_t);
SLUICE_INSTANTIATE_NN(float)
SLUICE_INSTANTIATE_NN(double)

}  // namespace sluice::ops::gpu
