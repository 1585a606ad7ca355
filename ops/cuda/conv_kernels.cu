// CUDA kernels of the conv family (ops/conv_ops.cc): direct convolution (a thread per output
// element), its input gradient (a thread per input element) and weight gradient (a block per
// weight element with a fixed-order tree sum), and the max and average pools with their
// gradients (a thread per element, gathering, so no atomics and no order that depends on
// scheduling). Results differ from the host's only by summation order.
#include <cstdint>

#include "ops/cuda/conv_launch.h"
#include "ops/cuda/device_util.h"

namespace sluice::ops::gpu {
namespace {

// The output position along `a` whose window reads input position `i` through tap `t`, or
// -1 when none does.
__device__ inline int64_t OutputOf(const WindowDims& a, int64_t i, int64_t t) {
  const int64_t shifted = i + a.pad_begin - t * a.dilation;
  if (shifted < 0 || shifted % a.stride != 0) return -1;
  const int64_t o = shifted / a.stride;
  return o < a.out ? o : -1;
}

__device__ inline int64_t InputOf(const WindowDims& a, int64_t o, int64_t t) {
  return o * a.stride - a.pad_begin + t * a.dilation;
}

// conv::WindowAxis::Taps.
__device__ inline int64_t Taps(const WindowDims& a, int64_t o, bool include_pad) {
  const int64_t lo = include_pad ? -a.pad_begin : 0;
  const int64_t hi = include_pad ? a.in + a.pad_end : a.in;
  int64_t taps = 0;
  for (int64_t t = 0; t < a.kernel; ++t) {
    const int64_t i = InputOf(a, o, t);
    taps += i >= lo && i < hi ? 1 : 0;
  }
  return taps;
}

template <typename T>
__global__ void ConvKernel(const ConvDims d, const T* x, const T* w, T* out) {
  const int64_t cg = d.c / d.groups, mg = d.m / d.groups;
  const int64_t total = d.n * d.m * d.h.out * d.w.out;
  for (int64_t e = GlobalIndex(); e < total; e += GlobalStride()) {
    const int64_t ow = e % d.w.out;
    const int64_t oh = e / d.w.out % d.h.out;
    const int64_t m = e / (d.w.out * d.h.out) % d.m;
    const int64_t n = e / (d.w.out * d.h.out * d.m);
    const int64_t c0 = m / mg * cg;
    T acc = 0;
    for (int64_t c = 0; c < cg; ++c) {
      const T* xc = x + (n * d.c + c0 + c) * d.h.in * d.w.in;
      const T* wc = w + (m * cg + c) * d.h.kernel * d.w.kernel;
      for (int64_t i = 0; i < d.h.kernel; ++i) {
        const int64_t ih = InputOf(d.h, oh, i);
        if (ih < 0 || ih >= d.h.in) continue;
        for (int64_t j = 0; j < d.w.kernel; ++j) {
          const int64_t iw = InputOf(d.w, ow, j);
          if (iw >= 0 && iw < d.w.in) acc = Fma(xc[ih * d.w.in + iw], wc[i * d.w.kernel + j], acc);
        }
      }
    }
    out[e] = acc;
  }
}

template <typename T>
__global__ void ConvGradXKernel(const ConvDims d, const T* w, const T* g, T* dx) {
  const int64_t cg = d.c / d.groups, mg = d.m / d.groups;
  const int64_t total = d.n * d.c * d.h.in * d.w.in;
  for (int64_t e = GlobalIndex(); e < total; e += GlobalStride()) {
    const int64_t iw = e % d.w.in;
    const int64_t ih = e / d.w.in % d.h.in;
    const int64_t c = e / (d.w.in * d.h.in) % d.c;
    const int64_t n = e / (d.w.in * d.h.in * d.c);
    const int64_t group = c / cg;
    const int64_t cc = c - group * cg;
    T acc = 0;
    for (int64_t m = group * mg; m < (group + 1) * mg; ++m) {
      const T* gm = g + (n * d.m + m) * d.h.out * d.w.out;
      const T* wm = w + (m * cg + cc) * d.h.kernel * d.w.kernel;
      for (int64_t i = 0; i < d.h.kernel; ++i) {
        const int64_t oh = OutputOf(d.h, ih, i);
        if (oh < 0) continue;
        for (int64_t j = 0; j < d.w.kernel; ++j) {
          const int64_t ow = OutputOf(d.w, iw, j);
          if (ow >= 0) acc = Fma(gm[oh * d.w.out + ow], wm[i * d.w.kernel + j], acc);
        }
      }
    }
    dx[e] = acc;
  }
}

template <typename T>
__global__ void ConvGradWKernel(const ConvDims d, const T* x, const T* g, T* dw) {
  __shared__ T partial[kBlock];
  const int64_t cg = d.c / d.groups, mg = d.m / d.groups;
  const int64_t kernel = d.h.kernel * d.w.kernel;
  const int64_t weights = d.m * cg * kernel;
  const int64_t positions = d.h.out * d.w.out;
  const int64_t terms = d.n * positions;
  for (int64_t e = blockIdx.x; e < weights; e += gridDim.x) {
    const int64_t j = e % d.w.kernel;
    const int64_t i = e / d.w.kernel % d.h.kernel;
    const int64_t cc = e / kernel % cg;
    const int64_t m = e / (kernel * cg);
    const int64_t c = m / mg * cg + cc;
    T acc = 0;
    for (int64_t r = threadIdx.x; r < terms; r += blockDim.x) {
      const int64_t n = r / positions;
      const int64_t oh = r % positions / d.w.out;
      const int64_t ow = r % d.w.out;
      const int64_t ih = InputOf(d.h, oh, i);
      const int64_t iw = InputOf(d.w, ow, j);
      if (ih < 0 || ih >= d.h.in || iw < 0 || iw >= d.w.in) continue;
      acc = Fma(g[(n * d.m + m) * positions + r % positions],
                x[((n * d.c + c) * d.h.in + ih) * d.w.in + iw], acc);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) dw[e] = partial[0];
    __syncthreads();  // partial[0] is read before the next weight overwrites it
  }
}

// The flat index in its plane of window (oh, ow)'s first arg-max inside the input (NaN
// wins, the first NaN stays), or -1 when no tap is inside.
template <typename T>
__device__ int64_t ArgMax(const PoolDims& d, const T* xp, int64_t oh, int64_t ow) {
  int64_t best = -1;
  T best_value = 0;
  for (int64_t i = 0; i < d.h.kernel; ++i) {
    const int64_t ih = InputOf(d.h, oh, i);
    if (ih < 0 || ih >= d.h.in) continue;
    for (int64_t j = 0; j < d.w.kernel; ++j) {
      const int64_t iw = InputOf(d.w, ow, j);
      if (iw < 0 || iw >= d.w.in) continue;
      const T v = xp[ih * d.w.in + iw];
      const bool v_nan = v != v;
      const bool best_nan = best_value != best_value;
      if (best < 0 || v > best_value || (v_nan && !best_nan)) {
        best = ih * d.w.in + iw;
        best_value = v;
      }
    }
  }
  return best;
}

__device__ inline int64_t Divisor(const PoolDims& d, int64_t oh, int64_t ow) {
  return Taps(d.h, oh, d.count_include_pad) * Taps(d.w, ow, d.count_include_pad);
}

template <typename T>
__global__ void PoolKernel(const PoolDims d, const T* x, T* out) {
  const int64_t total = d.planes * d.h.out * d.w.out;
  for (int64_t e = GlobalIndex(); e < total; e += GlobalStride()) {
    const int64_t ow = e % d.w.out;
    const int64_t oh = e / d.w.out % d.h.out;
    const T* xp = x + e / (d.w.out * d.h.out) * d.h.in * d.w.in;
    if (d.average) {
      double sum = 0;
      for (int64_t i = 0; i < d.h.kernel; ++i) {
        const int64_t ih = InputOf(d.h, oh, i);
        if (ih < 0 || ih >= d.h.in) continue;
        for (int64_t j = 0; j < d.w.kernel; ++j) {
          const int64_t iw = InputOf(d.w, ow, j);
          if (iw >= 0 && iw < d.w.in) sum += static_cast<double>(xp[ih * d.w.in + iw]);
        }
      }
      out[e] = static_cast<T>(sum / static_cast<double>(Divisor(d, oh, ow)));
    } else {
      const int64_t best = ArgMax(d, xp, oh, ow);
      out[e] = best < 0 ? -static_cast<T>(INFINITY) : xp[best];
    }
  }
}

template <typename T>
__global__ void PoolGradKernel(const PoolDims d, const T* x, const T* g, T* dx) {
  const int64_t total = d.planes * d.h.in * d.w.in;
  for (int64_t e = GlobalIndex(); e < total; e += GlobalStride()) {
    const int64_t iw = e % d.w.in;
    const int64_t ih = e / d.w.in % d.h.in;
    const int64_t plane = e / (d.w.in * d.h.in);
    const T* xp = x + plane * d.h.in * d.w.in;
    const T* gp = g + plane * d.h.out * d.w.out;
    T acc = 0;
    for (int64_t i = 0; i < d.h.kernel; ++i) {
      const int64_t oh = OutputOf(d.h, ih, i);
      if (oh < 0) continue;
      for (int64_t j = 0; j < d.w.kernel; ++j) {
        const int64_t ow = OutputOf(d.w, iw, j);
        if (ow < 0) continue;
        const T go = gp[oh * d.w.out + ow];
        if (d.average) {
          acc += go / static_cast<T>(Divisor(d, oh, ow));
        } else if (ArgMax(d, xp, oh, ow) == ih * d.w.in + iw) {
          acc += go;
        }
      }
    }
    dx[e] = acc;
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchConv2d(const ConvDims& d, const T* x, const T* w, T* out, cudaStream_t stream) {
  const int64_t total = d.n * d.m * d.h.out * d.w.out;
  if (total == 0) return cudaSuccess;
  ConvKernel<T><<<GridFor(total), kBlock, 0, stream>>>(d, x, w, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchConv2dGradX(const ConvDims& d, const T* w, const T* g, T* dx,
                              cudaStream_t stream) {
  const int64_t total = d.n * d.c * d.h.in * d.w.in;
  if (total == 0) return cudaSuccess;
  ConvGradXKernel<T><<<GridFor(total), kBlock, 0, stream>>>(d, w, g, dx);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchConv2dGradW(const ConvDims& d, const T* x, const T* g, T* dw,
                              cudaStream_t stream) {
  const int64_t weights = d.m * (d.groups > 0 ? d.c / d.groups : 0) * d.h.kernel * d.w.kernel;
  if (weights == 0) return cudaSuccess;
  ConvGradWKernel<T><<<GridFor(weights, 1), kBlock, 0, stream>>>(d, x, g, dw);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchPool2d(const PoolDims& d, const T* x, T* out, cudaStream_t stream) {
  const int64_t total = d.planes * d.h.out * d.w.out;
  if (total == 0) return cudaSuccess;
  PoolKernel<T><<<GridFor(total), kBlock, 0, stream>>>(d, x, out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchPool2dGrad(const PoolDims& d, const T* x, const T* g, T* dx,
                             cudaStream_t stream) {
  const int64_t total = d.planes * d.h.in * d.w.in;
  if (total == 0) return cudaSuccess;
  PoolGradKernel<T><<<GridFor(total), kBlock, 0, stream>>>(d, x, g, dx);
  return cudaGetLastError();
}

#define SLUICE_CONV_INSTANTIATE(T)                                                             \
  template cudaError_t LaunchConv2d<T>(const ConvDims&, const T*, const T*, T*, cudaStream_t); \
  template cudaError_t LaunchConv2dGradX<T>(const ConvDims&, const T*, const T*, T*,           \
                                            cudaStream_t);                                     \
  template cudaError_t LaunchConv2dGradW<T>(const ConvDims&, const T*, const T*, T*,           \
                                            cudaStream_t);                                     \
  template cudaError_t LaunchPool2d<T>(const PoolDims&, const T*, T*, cudaStream_t);           \
  template cudaError_t LaunchPool2dGrad<T>(const PoolDims&, const T*, const T*, T*, cudaStream_t);
SLUICE_CONV_INSTANTIATE(float)
SLUICE_CONV_INSTANTIATE(double)
#undef SLUICE_CONV_INSTANTIATE

}  // namespace sluice::ops::gpu
