// Host kernels (cpu and sim) of the conv family (ops/conv_ops.cc), f32 and f64.
//
// conv2d: per image and group, im2col (the window taps of the group's channels as the rows
// of a [C/groups * kH * kW, oH * oW] matrix; a 1 x 1 kernel with unit strides and no padding
// reads X itself) and one product on the blocked GEMM of ops/cpu/nn_gemm.h, W's group rows
// times the columns. Images split across the intra-op pool (a single image splits its
// GEMMs' rows instead). conv2d_grad: XGrad as W^T times OutGrad scattered back (col2im),
// images in parallel; WGrad as OutGrad times the columns transposed, images summed in
// order (so the bits do not depend on the thread count).
//
// The pools: direct loops over each output's window, planes (image, channel) in parallel;
// sums in double. Their gradients recompute the window's arg-max or divisor from X.
// Every kernel re-checks its operands with the geometry of ops/internal/conv_geometry.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/cpu/nn_gemm.h"
#include "ops/internal/conv_geometry.h"
#include "ops/internal/op_families.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {
namespace {

using conv::Conv2dDims;
using conv::Pool2dDims;
using conv::WindowAxis;

// A conv2d of fewer multiply-adds than this runs on its worker alone (nn_gemm.h's rule).
constexpr int64_t kParallelWork = 4 * nn::kGemmParallelMacs;
// The fewest window taps a chunk of a split pool gets (scalar loads and compares, about
// 50 us of one core's work), and the fewest a pool needs to split at all.
constexpr int64_t kPoolChunkTaps = int64_t{1} << 16;
constexpr int64_t kPoolParallelTaps = 4 * kPoolChunkTaps;

// ---------------------------------------------------------------------------------------
// im2col and col2im

// The output positions [lo, hi) along `a` whose input index o * stride + offset lies in
// [0, a.in).
void ValidRange(const WindowAxis& a, int64_t offset, int64_t* lo, int64_t* hi) {
  const int64_t first = offset >= 0 ? 0 : (-offset + a.stride - 1) / a.stride;
  const int64_t end = a.in - offset <= 0 ? 0 : (a.in - offset + a.stride - 1) / a.stride;
  *lo = std::min(first, a.out);
  *hi = std::max(*lo, std::min(end, a.out));
}

// col [channels * kh * kw, oh * ow] = the taps of x [channels, h, w], padding as 0.
template <typename T>
void Im2Col(const T* x, int64_t channels, const WindowAxis& h, const WindowAxis& w, T* col) {
  const int64_t p = h.out * w.out;
  for (int64_t c = 0; c < channels; ++c) {
    const T* xc = x + c * h.in * w.in;
    for (int64_t i = 0; i < h.kernel; ++i) {
      for (int64_t j = 0; j < w.kernel; ++j) {
        T* row = col + ((c * h.kernel + i) * w.kernel + j) * p;
        const int64_t offset = j * w.dilation - w.pad_begin;
        int64_t lo = 0, hi = 0;
        ValidRange(w, offset, &lo, &hi);
        for (int64_t oh = 0; oh < h.out; ++oh) {
          T* dst = row + oh * w.out;
          const int64_t ih = h.Start(oh) + i * h.dilation;
          if (ih < 0 || ih >= h.in) {
            std::fill(dst, dst + w.out, T(0));
            continue;
          }
          const T* src = xc + ih * w.in + offset;
          std::fill(dst, dst + lo, T(0));
          if (w.stride == 1) {
            std::copy(src + lo, src + hi, dst + lo);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * w.stride];
          }
          std::fill(dst + hi, dst + w.out, T(0));
        }
      }
    }
  }
}

// x [channels, h, w] += the taps of col (Im2Col's layout) at their input positions.
template <typename T>
void Col2ImAdd(const T* col, int64_t channels, const WindowAxis& h, const WindowAxis& w, T* x) {
  const int64_t p = h.out * w.out;
  for (int64_t c = 0; c < channels; ++c) {
    T* xc = x + c * h.in * w.in;
    for (int64_t i = 0; i < h.kernel; ++i) {
      for (int64_t j = 0; j < w.kernel; ++j) {
        const T* row = col + ((c * h.kernel + i) * w.kernel + j) * p;
        const int64_t offset = j * w.dilation - w.pad_begin;
        int64_t lo = 0, hi = 0;
        ValidRange(w, offset, &lo, &hi);
        for (int64_t oh = 0; oh < h.out; ++oh) {
          const int64_t ih = h.Start(oh) + i * h.dilation;
          if (ih < 0 || ih >= h.in) continue;
          const T* src = row + oh * w.out;
          T* dst = xc + ih * w.in + offset;
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow * w.stride] += src[ow];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// conv2d and conv2d_grad

// The products of one conv2d: per group, [mg, k] = W's rows times [k, p] = the columns.
struct ConvPlan {
  Conv2dDims d;
  int64_t cg = 0;       // input channels per group
  int64_t mg = 0;       // output channels per group
  int64_t k = 0;        // cg * kh * kw
  int64_t p = 0;        // oh * ow
  bool direct = false;  // 1 x 1, unit strides, no padding: the columns are X itself

  int64_t image_macs() const { return d.m * k * p; }
};

ConvPlan MakePlan(const Conv2dDims& d) {
  ConvPlan s;
  s.d = d;
  s.cg = d.c_per_group();
  s.mg = d.m_per_group();
  s.k = s.cg * d.h.kernel * d.w.kernel;
  s.p = d.h.out * d.w.out;
  s.direct = d.h.kernel == 1 && d.w.kernel == 1 && d.h.stride == 1 && d.w.stride == 1 &&
             d.h.pad_begin == 0 && d.h.pad_end == 0 && d.w.pad_begin == 0 && d.w.pad_end == 0;
  return s;
}

absl::StatusOr<ConvPlan> SetupConv(absl::string_view op, const HostArgs& a) {
  SLUICE_ASSIGN_OR_RETURN(
      Conv2dDims d,
      InOp(op, conv::Conv2dShapes(MetaOf(a.inputs[0]), MetaOf(a.inputs[1]), *a.attrs)));
  return MakePlan(d);
}

// The columns of image n's group g: X itself (direct) or Im2Col into `buffer`.
template <typename T>
const T* Columns(const ConvPlan& s, const T* x, int64_t n, int64_t g, T* buffer) {
  const Conv2dDims& d = s.d;
  const T* xg = x + (n * d.c + g * s.cg) * d.h.in * d.w.in;
  if (s.direct) return xg;
  Im2Col(xg, s.cg, d.h, d.w, buffer);
  return buffer;
}

// Out for images [n0, n1); `parallel` splits each GEMM's rows (a scope without a pool: none).
template <typename T>
absl::Status ConvImages(const ConvPlan& s, const T* x, const T* w, T* out, int64_t n0, int64_t n1,
                        const ParallelScope& parallel) {
  std::vector<T> col(s.direct ? 0 : static_cast<size_t>(s.k * s.p));
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t g = 0; g < s.d.groups; ++g) {
      const T* b = Columns(s, x, n, g, col.data());
      T* c = out + (n * s.d.m + g * s.mg) * s.p;
      SLUICE_RETURN_IF_ERROR(nn::ParallelGemm<T>(parallel, s.mg, s.p, s.k,
                                                 {w + g * s.mg * s.k, s.k, false}, {b, s.p, false},
                                                 c, s.p, /*accumulate=*/false));
    }
  }
  return absl::OkStatus();
}

// fn(n0, n1, gemm_scope) over every image: images split across `parallel`'s threads (each
// chunk's GEMMs on its thread), or, for one image, its GEMMs split.
template <typename Fn>
absl::Status ForImages(const ParallelScope& parallel, int64_t images, int64_t image_work,
                       const char* what, Fn fn) {
  if (images <= 1 || parallel.pool() == nullptr) return fn(0, images, parallel);
  const int64_t grain =
      std::max<int64_t>(1, nn::kGemmParallelMacs / std::max<int64_t>(1, image_work));
  absl::Status first;
  absl::Mutex mu;
  SLUICE_RETURN_IF_ERROR(parallel.For(
      images, grain,
      [&](int64_t n0, int64_t n1) {
        absl::Status status = fn(n0, n1, ParallelScope());
        if (!status.ok()) {
          absl::MutexLock lock(&mu);
          if (first.ok()) first = status;
        }
      },
      what));
  return first;
}

template <typename T>
absl::StatusOr<HostWork> PrepareConv(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(ConvPlan s, SetupConv(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), s.d.out}));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  const bool large = s.d.n * s.image_macs() >= kParallelWork;
  return HostWork([s, x = a.inputs[0].as<const T>(), w = a.inputs[1].as<const T>(),
                   out = a.outputs[0].as<T>(),
                   parallel = large ? a.parallel() : ParallelScope()]() -> absl::Status {
    return ForImages(parallel, s.d.n, s.image_macs(), "conv2d",
                     [&](int64_t n0, int64_t n1, const ParallelScope& inner) {
                       return ConvImages(s, x, w, out, n0, n1, inner);
                     });
  });
}

// XGrad for images [n0, n1): per group, the columns' gradient W_g^T G_g, scattered back.
template <typename T>
absl::Status ConvXGrad(const ConvPlan& s, const T* w, const T* g, T* dx, int64_t n0, int64_t n1,
                       const ParallelScope& parallel) {
  const Conv2dDims& d = s.d;
  const int64_t plane = d.h.in * d.w.in;
  std::vector<T> col(s.direct ? 0 : static_cast<size_t>(s.k * s.p));
  for (int64_t n = n0; n < n1; ++n) {
    T* dxn = dx + n * d.c * plane;
    if (!s.direct) std::fill(dxn, dxn + d.c * plane, T(0));
    for (int64_t gr = 0; gr < d.groups; ++gr) {
      const T* gg = g + (n * d.m + gr * s.mg) * s.p;
      T* dxg = dxn + gr * s.cg * plane;
      T* target = s.direct ? dxg : col.data();
      SLUICE_RETURN_IF_ERROR(nn::ParallelGemm<T>(parallel, s.k, s.p, s.mg,
                                                 {w + gr * s.mg * s.k, s.k, true}, {gg, s.p, false},
                                                 target, s.p, /*accumulate=*/false));
      if (!s.direct) Col2ImAdd(col.data(), s.cg, d.h, d.w, dxg);
    }
  }
  return absl::OkStatus();
}

// WGrad = sum over images, in order, of G_g times the columns transposed.
template <typename T>
absl::Status ConvWGrad(const ConvPlan& s, const T* x, const T* g, T* dw,
                       const ParallelScope& parallel) {
  const Conv2dDims& d = s.d;
  std::fill(dw, dw + d.m * s.k, T(0));
  std::vector<T> col(s.direct ? 0 : static_cast<size_t>(s.k * s.p));
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t gr = 0; gr < d.groups; ++gr) {
      const T* b = Columns(s, x, n, gr, col.data());
      const T* gg = g + (n * d.m + gr * s.mg) * s.p;
      SLUICE_RETURN_IF_ERROR(nn::ParallelGemm<T>(parallel, s.mg, s.k, s.p, {gg, s.p, false},
                                                 {b, s.p, true}, dw + gr * s.mg * s.k, s.k,
                                                 /*accumulate=*/true));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<HostWork> PrepareConvGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 3, 3, 2));
  SLUICE_ASSIGN_OR_RETURN(ConvPlan s, SetupConv(op, a));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {DataTypeOf<T>(), s.d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, MetaOf(a.inputs[1])));
  if (a.outputs[0].size == 0 && a.outputs[1].size == 0) return HostWork(nullptr);
  const bool large = s.d.n * s.image_macs() >= kParallelWork;
  return HostWork([s, x = a.inputs[0].as<const T>(), w = a.inputs[1].as<const T>(),
                   g = a.inputs[2].as<const T>(), dx = a.outputs[0].as<T>(),
                   dw = a.outputs[1].as<T>(), dx_size = a.outputs[0].size,
                   parallel = large ? a.parallel() : ParallelScope()]() -> absl::Status {
    if (s.d.out.NumElements() == 0) {  // nothing flows back: zero gradients
      std::fill(dx, dx + dx_size, T(0));
      std::fill(dw, dw + s.d.m * s.k, T(0));
      return absl::OkStatus();
    }
    SLUICE_RETURN_IF_ERROR(ForImages(parallel, s.d.n, s.image_macs(), "conv2d_grad",
                                     [&](int64_t n0, int64_t n1, const ParallelScope& inner) {
                                       return ConvXGrad(s, w, g, dx, n0, n1, inner);
                                     }));
    return ConvWGrad(s, x, g, dw, parallel);
  });
}

// ---------------------------------------------------------------------------------------
// max_pool2d, avg_pool2d and their grads

// Per output position along one axis, computed once per launch: the window's taps that fall
// inside the input, [lo, hi), the input index of its tap 0, and its factor of an average
// pool's divisor. The loops then visit only those taps, without bounds checks.
struct AxisTaps {
  std::vector<int64_t> lo;
  std::vector<int64_t> hi;
  std::vector<int64_t> start;
  std::vector<int64_t> divisor;
};

AxisTaps MakeAxisTaps(const WindowAxis& a, bool include_pad) {
  AxisTaps t;
  for (int64_t o = 0; o < a.out; ++o) {
    const int64_t start = a.Start(o);
    const int64_t lo = start >= 0 ? 0 : (-start + a.dilation - 1) / a.dilation;
    const int64_t end = a.in - start <= 0 ? 0 : (a.in - start + a.dilation - 1) / a.dilation;
    t.lo.push_back(std::min(lo, a.kernel));
    t.hi.push_back(std::max(t.lo.back(), std::min(end, a.kernel)));
    t.start.push_back(start);
    t.divisor.push_back(a.Taps(o, include_pad));
  }
  return t;
}

struct PoolPlan {
  Pool2dDims d;
  AxisTaps h;
  AxisTaps w;
  // Per tap j along the width: the output columns [first, second) whose tap j is inside the
  // input (the forward kernels walk a whole output row per tap, a vectorizable loop).
  std::vector<std::pair<int64_t, int64_t>> w_columns;
};

// Calls fn(input index, tap index in window order) for output (oh, ow)'s taps inside the
// input, in window order (row-major over the kernel).
template <typename Fn>
inline void ForTaps(const PoolPlan& s, int64_t oh, int64_t ow, Fn fn) {
  const int64_t in_w = s.d.w.in, dh = s.d.h.dilation, dw = s.d.w.dilation;
  const int64_t w0 = s.w.start[ow], j0 = s.w.lo[ow], j1 = s.w.hi[ow];
  for (int64_t i = s.h.lo[oh]; i < s.h.hi[oh]; ++i) {
    const int64_t row = (s.h.start[oh] + i * dh) * in_w + w0;
    for (int64_t j = j0; j < j1; ++j) fn(row + j * dw);
  }
}

// Calls fn(plane) for every (image, channel) plane, split across `parallel` when large.
template <typename Fn>
absl::Status ForPlanes(const ParallelScope& parallel, const Pool2dDims& d, const char* what,
                       Fn fn) {
  const int64_t planes = d.n * d.c;
  const int64_t plane_work = std::max<int64_t>(1, d.h.out * d.w.out * d.h.kernel * d.w.kernel);
  return parallel.For(
      planes, std::max<int64_t>(1, kPoolChunkTaps / plane_work),
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) fn(p);
      },
      what);
}

ParallelScope PoolScope(const HostArgs& a, const Pool2dDims& d) {
  const int64_t work = d.out.NumElements() * d.h.kernel * d.w.kernel;
  return work >= kPoolParallelTaps ? a.parallel() : ParallelScope();
}

int64_t Divisor(const PoolPlan& s, int64_t oh, int64_t ow) {
  return s.h.divisor[oh] * s.w.divisor[ow];
}

// One plane's pool, an output row at a time: for each tap row inside the input, each tap
// column j adds its input to the accumulators of the columns w_columns[j] (taps in window
// order, so an average sums as ForTaps would). A max keeps NaN once one is seen.
template <typename T, bool kAverage>
void PoolPlane(const PoolPlan& s, const T* xp, T* out) {
  using Acc = std::conditional_t<kAverage, double, T>;
  const Pool2dDims& d = s.d;
  const int64_t ow_count = d.w.out, stride = d.w.stride;
  std::vector<Acc> acc(static_cast<size_t>(ow_count));
  for (int64_t oh = 0; oh < d.h.out; ++oh) {
    std::fill(acc.begin(), acc.end(), kAverage ? Acc(0) : -std::numeric_limits<Acc>::infinity());
    for (int64_t i = s.h.lo[oh]; i < s.h.hi[oh]; ++i) {
      const T* row = xp + (s.h.start[oh] + i * d.h.dilation) * d.w.in;
      for (int64_t j = 0; j < d.w.kernel; ++j) {
        const T* src = row + j * d.w.dilation - d.w.pad_begin;
        const auto [lo, hi] = s.w_columns[j];
        Acc* a = acc.data();
        for (int64_t ow = lo; ow < hi; ++ow) {
          const T v = src[ow * stride];
          if constexpr (kAverage) {
            a[ow] += v;
          } else {
            a[ow] = (v > a[ow] || v != v) ? v : a[ow];
          }
        }
      }
    }
    T* out_row = out + oh * ow_count;
    for (int64_t ow = 0; ow < ow_count; ++ow) {
      if constexpr (kAverage) {
        out_row[ow] = static_cast<T>(acc[ow] / static_cast<double>(Divisor(s, oh, ow)));
      } else {
        out_row[ow] = acc[ow];
      }
    }
  }
}

// Whether a pool is the common 2x2 window at stride 2 with neither padding nor dilation, every
// window inside the input: MaxPlane2x2 computes it.
bool IsPlain2x2(const Pool2dDims& d) {
  auto plain = [](const WindowAxis& a) {
    return a.kernel == 2 && a.stride == 2 && a.dilation == 1 && a.pad_begin == 0 &&
           a.pad_end == 0 && 2 * a.out <= a.in;
  };
  return plain(d.h) && plain(d.w);
}

// PoolPlane<T, false> for IsPlain2x2 pools: each output reads its four taps in window order
// with the same update (a NaN tap wins, else the larger), so the bits are PoolPlane's; the
// taps are two contiguous pairs, a loop the compiler vectorizes, and no accumulator row.
template <typename T>
void MaxPlane2x2(const Pool2dDims& d, const T* xp, T* out) {
  const int64_t ow_count = d.w.out, in_w = d.w.in;
  auto take = [](T v, T m) { return (v > m || v != v) ? v : m; };
  for (int64_t oh = 0; oh < d.h.out; ++oh) {
    const T* r0 = xp + 2 * oh * in_w;
    const T* r1 = r0 + in_w;
    T* o = out + oh * ow_count;
    for (int64_t ow = 0; ow < ow_count; ++ow) {
      T m = r0[2 * ow];
      m = take(r0[2 * ow + 1], m);
      m = take(r1[2 * ow], m);
      o[ow] = take(r1[2 * ow + 1], m);
    }
  }
}

// The flat index in its plane of output (oh, ow)'s first arg-max among the window's taps
// inside the input (NaN beats any number, and the first NaN stays), or -1 when none is.
template <typename T>
int64_t ArgMax(const T* x, const PoolPlan& s, int64_t oh, int64_t ow) {
  int64_t best = -1;
  T best_value = T(0);
  ForTaps(s, oh, ow, [&](int64_t i) {
    const T v = x[i];
    if (best < 0 || v > best_value || (v != v && best_value == best_value)) {
      best = i;
      best_value = v;
    }
  });
  return best;
}

absl::StatusOr<PoolPlan> SetupPool(absl::string_view op, const HostArgs& a, bool average) {
  PoolPlan s;
  SLUICE_ASSIGN_OR_RETURN(s.d,
                          InOp(op, conv::Pool2dShapes(MetaOf(a.inputs[0]), *a.attrs, average)));
  s.h = MakeAxisTaps(s.d.h, s.d.count_include_pad);
  s.w = MakeAxisTaps(s.d.w, s.d.count_include_pad);
  for (int64_t j = 0; j < s.d.w.kernel; ++j) {
    int64_t lo = 0, hi = 0;
    ValidRange(s.d.w, j * s.d.w.dilation - s.d.w.pad_begin, &lo, &hi);
    s.w_columns.emplace_back(lo, hi);
  }
  return s;
}

template <typename T, bool kAverage>
absl::StatusOr<HostWork> PreparePool(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 1, 1, 1));
  SLUICE_ASSIGN_OR_RETURN(PoolPlan s, SetupPool(op, a, kAverage));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {DataTypeOf<T>(), s.d.out}));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  ParallelScope parallel = PoolScope(a, s.d);
  return HostWork([s = std::move(s), x = a.inputs[0].as<const T>(), out = a.outputs[0].as<T>(),
                   parallel]() -> absl::Status {
    const Pool2dDims& d = s.d;
    const int64_t in_plane = d.h.in * d.w.in, out_plane = d.h.out * d.w.out;
    const bool plain_2x2 = IsPlain2x2(d);
    return ForPlanes(parallel, d, kAverage ? "avg_pool2d" : "max_pool2d", [&](int64_t p) {
      if (!kAverage && plain_2x2) {
        MaxPlane2x2<T>(d, x + p * in_plane, out + p * out_plane);
      } else {
        PoolPlane<T, kAverage>(s, x + p * in_plane, out + p * out_plane);
      }
    });
  });
}

template <typename T, bool kAverage>
absl::StatusOr<HostWork> PreparePoolGrad(const std::string& op, const HostArgs& a) {
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, 2, 2, 1));
  SLUICE_ASSIGN_OR_RETURN(PoolPlan s, SetupPool(op, a, kAverage));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, {DataTypeOf<T>(), s.d.out}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(a.inputs[0])));
  if (a.outputs[0].size == 0) return HostWork(nullptr);
  ParallelScope parallel = PoolScope(a, s.d);
  return HostWork([s = std::move(s), x = a.inputs[0].as<const T>(), g = a.inputs[1].as<const T>(),
                   dx = a.outputs[0].as<T>(), parallel]() -> absl::Status {
    const Pool2dDims& d = s.d;
    const int64_t in_plane = d.h.in * d.w.in, out_plane = d.h.out * d.w.out;
    return ForPlanes(parallel, d, kAverage ? "avg_pool2d_grad" : "max_pool2d_grad", [&](int64_t p) {
      const T* xp = x + p * in_plane;
      const T* gp = g + p * out_plane;
      T* dxp = dx + p * in_plane;
      std::fill(dxp, dxp + in_plane, T(0));
      for (int64_t oh = 0; oh < d.h.out; ++oh) {
        for (int64_t ow = 0; ow < d.w.out; ++ow) {
          const T go = gp[oh * d.w.out + ow];
          if constexpr (kAverage) {
            const T share = go / static_cast<T>(Divisor(s, oh, ow));
            ForTaps(s, oh, ow, [&](int64_t i) { dxp[i] += share; });
          } else {
            const int64_t i = ArgMax(xp, s, oh, ow);
            if (i >= 0) dxp[i] += go;
          }
        }
      }
    });
  });
}

// ---------------------------------------------------------------------------------------

}  // namespace

absl::Status RegisterConvHostKernels(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(
      RegisterFloatHostKernels(registry, "conv2d", PrepareConv<float>, PrepareConv<double>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "conv2d_grad", PrepareConvGrad<float>,
                                                  PrepareConvGrad<double>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "max_pool2d", PreparePool<float, false>,
                                                  PreparePool<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(registry, "avg_pool2d", PreparePool<float, true>,
                                                  PreparePool<double, true>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(
      registry, "max_pool2d_grad", PreparePoolGrad<float, false>, PreparePoolGrad<double, false>));
  SLUICE_RETURN_IF_ERROR(RegisterFloatHostKernels(
      registry, "avg_pool2d_grad", PreparePoolGrad<float, true>, PreparePoolGrad<double, true>));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
