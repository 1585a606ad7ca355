// The conv op family (ops/conv_ops.cc, ops/cpu/conv_kernels.cc) on cpu and sim against plain
// loops in double: conv2d and conv2d_grad over random shapes from a fixed seed (groups,
// strides, pads, dilations, the 1 x 1 path, sizes that split across threads), max_pool2d
// and avg_pool2d and their grads (ceil_mode, count_include_pad, dilations, the default
// strides), padding that never wins a max, NaN; split kernels against one thread bit for
// bit; and the errors, each naming the operand or attribute at fault.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::conv_ops_test {
namespace {

using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;
using Ints = std::vector<int64_t>;

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> Rounded(std::vector<double> v, DataType dtype) {
  if (dtype == DataType::kF32) {
    for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

// One convolution's shapes and attributes.
struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, groups;
  Ints strides, pads, dilations;

  int64_t Out(int axis) const {
    const int64_t in = axis == 0 ? h : w, k = axis == 0 ? kh : kw;
    const int64_t span = in + pads[axis] + pads[axis + 2] - dilations[axis] * (k - 1) - 1;
    return span < 0 ? -1 : span / strides[axis] + 1;
  }
  Shape x_shape() const { return Shape({n, c, h, w}); }
  Shape w_shape() const { return Shape({m, c / groups, kh, kw}); }
  Shape out_shape() const { return Shape({n, m, Out(0), Out(1)}); }
  vm::AttrMap attrs() const {
    return vm::AttrMap()
        .Set("strides", strides)
        .Set("pads", pads)
        .Set("dilations", dilations)
        .Set("groups", groups);
  }
  std::string ToString() const {
    return absl::StrCat("X ", x_shape().ToString(), " W ", w_shape().ToString(), " groups ", groups,
                        " strides [", absl::StrJoin(strides, ","), "] pads [",
                        absl::StrJoin(pads, ","), "] dilations [", absl::StrJoin(dilations, ","),
                        "]");
  }
};

// Calls fn(out_index, x_index, w_index) for every product of the convolution.
template <typename Fn>
void ForEachProduct(const ConvCase& k, Fn fn) {
  const int64_t oh = k.Out(0), ow = k.Out(1), cg = k.c / k.groups, mg = k.m / k.groups;
  for (int64_t n = 0; n < k.n; ++n) {
    for (int64_t m = 0; m < k.m; ++m) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t out = ((n * k.m + m) * oh + y) * ow + x;
          for (int64_t cc = 0; cc < cg; ++cc) {
            const int64_t c = m / mg * cg + cc;
            for (int64_t i = 0; i < k.kh; ++i) {
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t ih = y * k.strides[0] - k.pads[0] + i * k.dilations[0];
                const int64_t iw = x * k.strides[1] - k.pads[1] + j * k.dilations[1];
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                fn(out, ((n * k.c + c) * k.h + ih) * k.w + iw,
                   ((m * cg + cc) * k.kh + i) * k.kw + j);
              }
            }
          }
        }
      }
    }
  }
}

// One pool's shapes and attributes; strides empty: the kernel.
struct PoolCase {
  int64_t n, c, h, w;
  Ints kernel, strides, pads, dilations;
  bool ceil_mode = false;
  bool count_include_pad = false;

  int64_t Stride(int axis) const { return strides.empty() ? kernel[axis] : strides[axis]; }
  // The output size straight from ONNX's formula (and its ceil_mode rule).
  int64_t Out(int axis) const {
    const int64_t in = axis == 0 ? h : w;
    const double size = static_cast<double>(in + pads[axis] + pads[axis + 2] -
                                            dilations[axis] * (kernel[axis] - 1) - 1) /
                            static_cast<double>(Stride(axis)) +
                        1;
    int64_t out = static_cast<int64_t>(ceil_mode ? std::ceil(size) : std::floor(size));
    if (ceil_mode && (out - 1) * Stride(axis) >= in + pads[axis]) --out;
    return out;
  }
  Shape x_shape() const { return Shape({n, c, h, w}); }
  Shape out_shape() const { return Shape({n, c, Out(0), Out(1)}); }
  vm::AttrMap attrs(bool average) const {
    vm::AttrMap a = vm::AttrMap()
                        .Set("kernel", kernel)
                        .Set("strides", strides)
                        .Set("pads", pads)
                        .Set("dilations", dilations)
                        .Set("ceil_mode", int64_t{ceil_mode});
    if (average) a.Set("count_include_pad", int64_t{count_include_pad});
    return a;
  }
  std::string ToString() const {
    return absl::StrCat("X ", x_shape().ToString(), " kernel [", absl::StrJoin(kernel, ","),
                        "] strides [", absl::StrJoin(strides, ","), "] pads [",
                        absl::StrJoin(pads, ","), "] dilations [", absl::StrJoin(dilations, ","),
                        "] ceil_mode ", ceil_mode, " count_include_pad ", count_include_pad);
  }
};

// The reference pools: per output, the taps inside the input (flat indices, in window
// order) and the average's divisor.
struct Window {
  std::vector<int64_t> taps;
  int64_t divisor = 0;
};

Window WindowOf(const PoolCase& p, int64_t plane, int64_t y, int64_t x) {
  Window win;
  int64_t rows = 0, cols = 0;
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    const int64_t ih = y * p.Stride(0) - p.pads[0] + i * p.dilations[0];
    rows +=
        p.count_include_pad ? (ih >= -p.pads[0] && ih < p.h + p.pads[2]) : (ih >= 0 && ih < p.h);
  }
  for (int64_t j = 0; j < p.kernel[1]; ++j) {
    const int64_t iw = x * p.Stride(1) - p.pads[1] + j * p.dilations[1];
    cols +=
        p.count_include_pad ? (iw >= -p.pads[1] && iw < p.w + p.pads[3]) : (iw >= 0 && iw < p.w);
  }
  win.divisor = rows * cols;
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      const int64_t ih = y * p.Stride(0) - p.pads[0] + i * p.dilations[0];
      const int64_t iw = x * p.Stride(1) - p.pads[1] + j * p.dilations[1];
      if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w)
        win.taps.push_back((plane * p.h + ih) * p.w + iw);
    }
  }
  return win;
}

// Calls fn(out_index, window) for every output of the pool.
template <typename Fn>
void ForEachWindow(const PoolCase& p, Fn fn) {
  const int64_t oh = p.Out(0), ow = p.Out(1);
  for (int64_t plane = 0; plane < p.n * p.c; ++plane) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t x = 0; x < ow; ++x) fn((plane * oh + y) * ow + x, WindowOf(p, plane, y, x));
    }
  }
}

// The first tap holding the window's maximum (NaN beats numbers; -1 for no tap).
int64_t RefArgMax(const std::vector<double>& x, const Window& win) {
  int64_t best = -1;
  for (int64_t t : win.taps) {
    if (best < 0 || x[t] > x[best] || (std::isnan(x[t]) && !std::isnan(x[best]))) best = t;
  }
  return best;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(got[i])) << what << " element " << i << ": got " << got[i];
    } else if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << what << " element " << i;
    } else {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
    }
  }
}

// Random convolutions that fit: small shapes, every attribute varied.
std::vector<ConvCase> RandomConvCases(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<ConvCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    ConvCase k;
    k.groups = pick(1, 3);
    k.n = pick(1, 3);
    k.c = k.groups * pick(1, 3);
    k.m = k.groups * pick(1, 3);
    k.h = pick(1, 9);
    k.w = pick(1, 9);
    k.kh = pick(1, 4);
    k.kw = pick(1, 4);
    k.strides = {pick(1, 3), pick(1, 3)};
    k.pads = {pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
    k.dilations = {pick(1, 2), pick(1, 2)};
    if (k.Out(0) >= 1 && k.Out(1) >= 1) cases.push_back(k);
  }
  // The 1 x 1 path (X read as the columns), and a larger one (more GEMM blocks).
  cases.push_back({2, 6, 5, 7, 4, 1, 1, 2, {1, 1}, {0, 0, 0, 0}, {1, 1}});
  cases.push_back({3, 8, 12, 12, 8, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}});
  return cases;
}

std::vector<PoolCase> RandomPoolCases(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<PoolCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    PoolCase p;
    p.n = pick(1, 2);
    p.c = pick(1, 3);
    p.h = pick(1, 9);
    p.w = pick(1, 9);
    p.kernel = {pick(1, 4), pick(1, 4)};
    if (pick(0, 3) > 0) p.strides = {pick(1, 3), pick(1, 3)};  // else the kernel
    p.pads = {pick(0, p.kernel[0] - 1), pick(0, p.kernel[1] - 1), pick(0, p.kernel[0] - 1),
              pick(0, p.kernel[1] - 1)};
    p.dilations = {pick(0, 3) == 0 ? 2 : 1, pick(0, 3) == 0 ? 2 : 1};
    p.ceil_mode = pick(0, 1) == 1;
    p.count_include_pad = pick(0, 1) == 1;
    const int64_t span0 = p.h + p.pads[0] + p.pads[2] - p.dilations[0] * (p.kernel[0] - 1) - 1;
    const int64_t span1 = p.w + p.pads[1] + p.pads[3] - p.dilations[1] * (p.kernel[1] - 1) - 1;
    if (span0 >= 0 && span1 >= 0) cases.push_back(p);
  }
  cases.push_back({4, 16, 40, 40, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true});
  return cases;
}

class ConvOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  SlotBlobs Run(absl::string_view op, const SlotBlobs& inputs, const vm::AttrMap& attrs) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? *out : SlotBlobs{};
  }
  static double Tol(DataType dtype, int64_t terms) {
    return dtype == DataType::kF32 ? 4e-7 * static_cast<double>(terms + 4) : 1e-13 * (terms + 4);
  }

  OpsHarness h;
};

TEST_P(ConvOpsTest, Conv2dMatchesLoops) {
  uint64_t seed = 100;
  for (const ConvCase& k : RandomConvCases(24, 7)) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", k.ToString());
      const std::vector<double> x = Rounded(RandomValues(k.x_shape().NumElements(), ++seed), dtype);
      const std::vector<double> w = Rounded(RandomValues(k.w_shape().NumElements(), ++seed), dtype);
      std::vector<double> want(k.out_shape().NumElements(), 0.0);
      ForEachProduct(k, [&](int64_t o, int64_t xi, int64_t wi) { want[o] += x[xi] * w[wi]; });
      SlotBlobs out = Run(
          "conv2d", {{Upload(dtype, k.x_shape(), x)}, {Upload(dtype, k.w_shape(), w)}}, k.attrs());
      ASSERT_EQ(out.size(), 1u) << what;
      ASSERT_EQ(out[0][0]->shape(), k.out_shape()) << what;
      ExpectNear(h.Download(out[0][0]), want, Tol(dtype, k.c / k.groups * k.kh * k.kw), what);
    }
  }
}

TEST_P(ConvOpsTest, Conv2dGradMatchesLoops) {
  uint64_t seed = 500;
  for (const ConvCase& k : RandomConvCases(16, 8)) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", k.ToString());
      const std::vector<double> x = Rounded(RandomValues(k.x_shape().NumElements(), ++seed), dtype);
      const std::vector<double> w = Rounded(RandomValues(k.w_shape().NumElements(), ++seed), dtype);
      const std::vector<double> g =
          Rounded(RandomValues(k.out_shape().NumElements(), ++seed), dtype);
      std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0);
      ForEachProduct(k, [&](int64_t o, int64_t xi, int64_t wi) {
        dx[xi] += g[o] * w[wi];
        dw[wi] += g[o] * x[xi];
      });
      SlotBlobs out = Run("conv2d_grad",
                          {{Upload(dtype, k.x_shape(), x)},
                           {Upload(dtype, k.w_shape(), w)},
                           {Upload(dtype, k.out_shape(), g)}},
                          k.attrs());
      ASSERT_EQ(out.size(), 2u) << what;
      const int64_t positions = k.n * k.Out(0) * k.Out(1);
      ExpectNear(h.Download(out[0][0]), dx, Tol(dtype, k.m * k.kh * k.kw), "XGrad " + what);
      ExpectNear(h.Download(out[1][0]), dw, Tol(dtype, positions), "WGrad " + what);
    }
  }
}

TEST_P(ConvOpsTest, PoolsMatchLoops) {
  uint64_t seed = 900;
  for (const PoolCase& p : RandomPoolCases(40, 9)) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", p.ToString());
      const std::vector<double> x = Rounded(RandomValues(p.x_shape().NumElements(), ++seed), dtype);
      std::vector<double> max(p.out_shape().NumElements()), avg(max.size());
      ForEachWindow(p, [&](int64_t o, const Window& win) {
        const int64_t best = RefArgMax(x, win);
        max[o] = best < 0 ? -kInf : x[best];
        double sum = 0;
        for (int64_t t : win.taps) sum += x[t];
        avg[o] = sum / static_cast<double>(win.divisor);
      });
      const vm::BlobRef xb = Upload(dtype, p.x_shape(), x);
      SlotBlobs got_max = Run("max_pool2d", {{xb}}, p.attrs(false));
      SlotBlobs got_avg = Run("avg_pool2d", {{xb}}, p.attrs(true));
      ASSERT_FALSE(got_max.empty() || got_avg.empty()) << what;
      ASSERT_EQ(got_max[0][0]->shape(), p.out_shape()) << what;
      ASSERT_EQ(got_avg[0][0]->shape(), p.out_shape()) << what;
      ExpectNear(h.Download(got_max[0][0]), max, 0, "max " + what);
      ExpectNear(h.Download(got_avg[0][0]), avg, Tol(dtype, 1), "avg " + what);
    }
  }
}

TEST_P(ConvOpsTest, PoolGradsMatchLoops) {
  uint64_t seed = 1300;
  for (const PoolCase& p : RandomPoolCases(30, 10)) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", p.ToString());
      std::vector<double> x = Rounded(RandomValues(p.x_shape().NumElements(), ++seed), dtype);
      // Ties: every other element rounded to a few values, so windows hold equal maxima and
      // the first one in window order must take the gradient.
      for (size_t i = 0; i < x.size(); i += 2) x[i] = std::round(x[i] * 2) / 2;
      const std::vector<double> g =
          Rounded(RandomValues(p.out_shape().NumElements(), ++seed), dtype);
      std::vector<double> dmax(x.size(), 0.0), davg(x.size(), 0.0);
      ForEachWindow(p, [&](int64_t o, const Window& win) {
        const int64_t best = RefArgMax(x, win);
        if (best >= 0) dmax[best] += g[o];
        for (int64_t t : win.taps) davg[t] += g[o] / static_cast<double>(win.divisor);
      });
      const vm::BlobRef xb = Upload(dtype, p.x_shape(), x);
      const vm::BlobRef gb = Upload(dtype, p.out_shape(), g);
      SlotBlobs got_max = Run("max_pool2d_grad", {{xb}, {gb}}, p.attrs(false));
      SlotBlobs got_avg = Run("avg_pool2d_grad", {{xb}, {gb}}, p.attrs(true));
      ASSERT_FALSE(got_max.empty() || got_avg.empty()) << what;
      const int64_t overlap = p.kernel[0] * p.kernel[1];
      ExpectNear(h.Download(got_max[0][0]), dmax, Tol(dtype, overlap), "max grad " + what);
      ExpectNear(h.Download(got_avg[0][0]), davg, Tol(dtype, overlap), "avg grad " + what);
    }
  }
}

// ONNX's pads read as -inf for a max: an all-negative image keeps its values at the border,
// and a window's NaN is its maximum.
TEST_P(ConvOpsTest, MaxPoolPaddingNeverWinsAndNanPropagates) {
  const PoolCase p{1, 1, 2, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}};
  const std::vector<double> x = {-5, -4, -3, -2, -6, -1};
  SlotBlobs out = Run("max_pool2d", {{Upload(DataType::kF32, p.x_shape(), x)}}, p.attrs(false));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(h.Download(out[0][0]), (std::vector<double>{-2, -1, -1, -2, -1, -1}));

  const std::vector<double> with_nan = {1, std::nan(""), 3, 4, 5, 6};
  out = Run("max_pool2d", {{Upload(DataType::kF64, p.x_shape(), with_nan)}}, p.attrs(false));
  ASSERT_FALSE(out.empty());
  const std::vector<double> got = h.Download(out[0][0]);
  ASSERT_EQ(got.size(), 6u);
  for (double v : got) EXPECT_TRUE(std::isnan(v)) << "every window reads the NaN";
}

// The plain 2x2 window at stride 2 (its own loop, MaxPlane2x2) against the loops: odd sizes
// (the last row and column dropped), -inf, and NaN in each of a window's four positions.
TEST_P(ConvOpsTest, PlainTwoByTwoMaxPoolMatchesLoops) {
  for (const PoolCase& p : {PoolCase{2, 3, 6, 8, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
                            PoolCase{1, 2, 7, 5, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}}}) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", p.ToString());
      std::vector<double> x = Rounded(RandomValues(p.x_shape().NumElements(), 77), dtype);
      // NaN in window (0, 0) tap 0, (0, 1) tap 1, (0, 2) tap 2 and (1, 0) tap 3 of the
      // 6 x 8 image (elsewhere in the 7 x 5 one); -inf in window (1, 1).
      x[0] = std::nan("");
      x[3] = std::nan("");
      x[p.w + 4] = std::nan("");
      x[3 * p.w + 1] = std::nan("");
      x[2 * p.w + 2] = -kInf;
      std::vector<double> want(p.out_shape().NumElements());
      ForEachWindow(p, [&](int64_t o, const Window& win) {
        const int64_t best = RefArgMax(x, win);
        want[o] = best < 0 ? -kInf : x[best];
      });
      SlotBlobs got = Run("max_pool2d", {{Upload(dtype, p.x_shape(), x)}}, p.attrs(false));
      ASSERT_FALSE(got.empty()) << what;
      ASSERT_EQ(got[0][0]->shape(), p.out_shape()) << what;
      ExpectNear(h.Download(got[0][0]), want, 0, what);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ConvOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

// conv2d, conv2d_grad and the pools large enough to split across the cpu device's intra-op
// threads give the same bits as on one thread.
TEST(ConvOpsParallelTest, SplitKernelsMatchOneThreadBitForBit) {
  auto run = [](int threads, int64_t* regions) {
    OpsHarness h(threads);
    std::vector<std::vector<double>> values;
    auto keep = [&](const absl::StatusOr<SlotBlobs>& out) {
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return;
      for (const auto& slot : *out) {
        for (const vm::BlobRef& blob : slot) values.push_back(h.Download(blob));
      }
    };
    const ConvCase k{8, 16, 24, 24, 16, 3, 3, 2, {1, 1}, {1, 1, 1, 1}, {1, 1}};
    const vm::BlobRef x =
        h.Upload(kCpu, DataType::kF32, k.x_shape(), RandomValues(k.x_shape().NumElements(), 1));
    const vm::BlobRef w =
        h.Upload(kCpu, DataType::kF32, k.w_shape(), RandomValues(k.w_shape().NumElements(), 2));
    const vm::BlobRef g =
        h.Upload(kCpu, DataType::kF32, k.out_shape(), RandomValues(k.out_shape().NumElements(), 3));
    keep(h.Run("conv2d", {{x}, {w}}, k.attrs()));
    keep(h.Run("conv2d_grad", {{x}, {w}, {g}}, k.attrs()));
    const PoolCase p{8, 16, 24, 24, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, false, true};
    keep(h.Run("max_pool2d", {{x}}, p.attrs(false)));
    keep(h.Run("avg_pool2d", {{x}}, p.attrs(true)));
    keep(h.Run("max_pool2d_grad", {{x}, {x}}, p.attrs(false)));
    keep(h.Run("avg_pool2d_grad", {{x}, {x}}, p.attrs(true)));
    *regions = h.vm->stats().parallel_regions;
    return values;
  };
  int64_t split_regions = 0, alone_regions = 0;
  const std::vector<std::vector<double>> split = run(3, &split_regions);
  const std::vector<std::vector<double>> alone = run(1, &alone_regions);
  ASSERT_EQ(split.size(), alone.size());
  for (size_t i = 0; i < split.size(); ++i) {
    ASSERT_EQ(split[i], alone[i]) << "output " << i;
  }
  EXPECT_GE(split_regions, 6);
  EXPECT_EQ(alone_regions, 0);
}

TEST(ConvOpsErrorTest, BadOperandsAreRejectedNamingTheCulprit) {
  OpsHarness h;
  auto f32 = [&](Shape s) {
    return h.Upload(kCpu, DataType::kF32, s, RandomValues(s.NumElements(), 1));
  };
  const vm::BlobRef x = f32({1, 4, 5, 5});
  const vm::BlobRef x3 = f32({4, 5, 5});
  const vm::BlobRef w = f32({6, 2, 3, 3});
  const vm::BlobRef w_big = f32({6, 4, 7, 7});
  const vm::BlobRef wd = h.Upload(kCpu, DataType::kF64, {6, 4, 3, 3}, RandomValues(216, 2));
  const vm::BlobRef xi = h.Upload(kCpu, DataType::kI32, {1, 1, 2, 2}, {1, 2, 3, 4});
  const vm::BlobRef g_bad = f32({1, 6, 4, 4});
  const int64_t uploads = h.vm->stats().instructions;
  const vm::AttrMap two_groups = vm::AttrMap().Set("groups", int64_t{2});
  const vm::AttrMap pool = vm::AttrMap().Set("kernel", Ints{2, 2});

  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    std::vector<const char*> messages;
  };
  const std::vector<Case> cases = {
      {"conv2d", {{x}, {w}}, {}, {"op 'conv2d'", "W f32[6, 2, 3, 3]", "C / groups = 4"}},
      {"conv2d", {{x3}, {w}}, two_groups, {"X f32[4, 5, 5] must have rank 4"}},
      {"conv2d", {{x}, {wd}}, {}, {"W f64[6, 4, 3, 3] must be f32"}},
      {"conv2d", {{xi}, {w}}, {}, {"X i32[1, 1, 2, 2] must be f32 or f64"}},
      {"conv2d",
       {{x}, {w}},
       vm::AttrMap().Set("groups", int64_t{4}),
       {"groups=4 must divide", "W f32[6, 2, 3, 3]"}},
      {"conv2d", {{x}, {w_big}}, {}, {"X f32[1, 4, 5, 5] padded to [5, 5]", "W's dilated kernel"}},
      {"conv2d",
       {{x}, {w}},
       vm::AttrMap().Set("groups", int64_t{2}).Set("pads", Ints{1, 1}),
       {"attribute 'pads' must hold 4 non-negative ints, got [1, 1]"}},
      {"conv2d",
       {{x}, {w}},
       vm::AttrMap().Set("groups", int64_t{2}).Set("strides", Ints{0, 1}),
       {"attribute 'strides' must hold 2 positive ints"}},
      {"conv2d",
       {{x}, {w}},
       vm::AttrMap().Set("groups", int64_t{2}).Set("dilations", Ints{1}),
       {"attribute 'dilations'"}},
      {"conv2d_grad",
       {{x}, {w}, {g_bad}},
       two_groups,
       {"op 'conv2d_grad'", "OutGrad f32[1, 6, 4, 4] must be f32[1, 6, 3, 3]"}},
      {"max_pool2d", {{x3}}, pool, {"op 'max_pool2d'", "X f32[4, 5, 5] must have rank 4"}},
      {"max_pool2d",
       {{x}},
       vm::AttrMap().Set("kernel", Ints{2, 2}).Set("pads", Ints{2, 0, 0, 0}),
       {"attribute 'pads' [2, 0, 0, 0] must be smaller than the kernel [2, 2]"}},
      {"avg_pool2d",
       {{x}},
       vm::AttrMap().Set("kernel", Ints{6, 2}),
       {"op 'avg_pool2d'", "X f32[1, 4, 5, 5] padded to [5, 5]", "dilated kernel [6, 2]"}},
      {"avg_pool2d",
       {{x}},
       vm::AttrMap().Set("kernel", Ints{2, 2}).Set("count_include_pad", int64_t{2}),
       {"'count_include_pad' must be 0 or 1"}},
      {"max_pool2d", {{x}}, vm::AttrMap().Set("kernel", Ints{2}), {"attribute 'kernel'"}},
      {"max_pool2d", {{x}}, {}, {"kernel"}},
      {"max_pool2d_grad", {{x}, {x}}, pool, {"OutGrad f32[1, 4, 5, 5] must be f32[1, 4, 2, 2]"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs, c.attrs);
    ASSERT_FALSE(out.ok()) << c.op << " " << c.messages[0];
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    for (const char* message : c.messages) {
      EXPECT_THAT(out.status().message(), HasSubstr(message)) << c.op;
    }
  }
  EXPECT_EQ(h.vm->stats().instructions, uploads) << "a rejected call enqueued work";
}

}  // namespace
}  // namespace sluice::ops::conv_ops_test
