// The nn op family (ops/nn_ops.cc, ops/cpu/nn_kernels.cc) on cpu and sim against plain
// reference loops in double: matmul (transposes, broadcast batches, sizes around the GEMM
// block sizes, empty dims), reductions, softmax / log_softmax, softmax with cross entropy;
// their gradients against finite differences; and the errors, before enqueue and at sync.
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::nn_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

// Values rounded through `dtype` (what the op sees after upload).
std::vector<double> Rounded(std::vector<double> v, DataType dtype) {
  if (dtype == DataType::kF32) {
    for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

// Row-major multi-index helpers for the references.
std::vector<int64_t> Unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = i % s.dim(d);
    i /= s.dim(d);
  }
  return idx;
}

// Out = op(X) op(Y) with numpy batch broadcasting, straight from the definition.
std::vector<double> RefMatmul(const std::vector<double>& x, const Shape& xs,
                              const std::vector<double>& y, const Shape& ys, bool tx, bool ty,
                              const Shape& out_shape) {
  const int r = out_shape.rank();
  const int64_t m = out_shape.dim(r - 2), n = out_shape.dim(r - 1);
  const int64_t k = tx ? xs.dim(xs.rank() - 2) : xs.dim(xs.rank() - 1);
  const Shape batch(out_shape.dims().subspan(0, r - 2));
  // Index of an operand's matrix for an output batch multi-index.
  auto matrix = [&](const Shape& s, const std::vector<int64_t>& bidx) {
    int64_t index = 0;
    const int br = s.rank() - 2;
    for (int d = 0; d < br; ++d) {
      const int64_t i = s.dim(d) == 1 ? 0 : bidx[batch.rank() - br + d];
      index = index * s.dim(d) + i;
    }
    return index;
  };
  std::vector<double> out(out_shape.NumElements());
  for (int64_t b = 0; b < batch.NumElements(); ++b) {
    const std::vector<int64_t> bidx = Unravel(b, batch);
    const double* xb = x.data() + matrix(xs, bidx) * m * k;
    const double* yb = y.data() + matrix(ys, bidx) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += (tx ? xb[p * m + i] : xb[i * k + p]) * (ty ? yb[j * k + p] : yb[p * n + j]);
        }
        out[b * m * n + i * n + j] = acc;
      }
    }
  }
  return out;
}

// Sum or mean over `axes` (empty: all), reduced dims removed; NaN for the mean of nothing.
std::vector<double> RefReduce(const std::vector<double>& x, const Shape& s,
                              std::vector<int64_t> axes, bool mean, Shape* out_shape) {
  std::vector<bool> reduced(s.rank(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + s.rank() : a] = true;
  Shape::Dims dims;
  int64_t count = 1;
  for (int d = 0; d < s.rank(); ++d) {
    if (reduced[d]) count *= s.dim(d);
    if (!reduced[d]) dims.push_back(s.dim(d));
  }
  *out_shape = Shape(absl::MakeConstSpan(dims));
  std::vector<double> out(out_shape->NumElements(), 0.0);
  for (int64_t i = 0; i < s.NumElements(); ++i) {
    const std::vector<int64_t> idx = Unravel(i, s);
    int64_t o = 0;
    for (int d = 0; d < s.rank(); ++d) {
      if (!reduced[d]) o = o * s.dim(d) + idx[d];
    }
    out[o] += x[i];
  }
  if (mean) {
    for (double& v : out) v = count == 0 ? std::nan("") : v / count;
  }
  return out;
}

// softmax or log_softmax along `axis` (the naive form: fine for moderate inputs).
std::vector<double> RefSoftmax(const std::vector<double>& x, const Shape& s, int axis, bool log) {
  std::vector<double> out(x.size());
  const Shape::Dims strides = s.Strides();
  for (int64_t i = 0; i < s.NumElements(); ++i) {
    const std::vector<int64_t> idx = Unravel(i, s);
    const int64_t first = i - idx[axis] * strides[axis];
    double mx = -INFINITY;
    for (int64_t c = 0; c < s.dim(axis); ++c) mx = std::max(mx, x[first + c * strides[axis]]);
    double sum = 0;
    for (int64_t c = 0; c < s.dim(axis); ++c) sum += std::exp(x[first + c * strides[axis]] - mx);
    out[i] = log ? x[i] - mx - std::log(sum) : std::exp(x[i] - mx) / sum;
  }
  return out;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

class NnOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }

  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  // Runs `op` and returns its output blobs, failing the test on an error.
  SlotBlobs Run(absl::string_view op, const SlotBlobs& inputs, const vm::AttrMap& attrs = {}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? *out : SlotBlobs{};
  }

  // One matmul in `dtype` checked against RefMatmul.
  void CheckMatmul(DataType dtype, const Shape& xs, const Shape& ys, bool tx, bool ty,
                   const Shape& want_shape, uint64_t seed) {
    const std::string what = absl::StrCat(DataTypeName(dtype), " ", xs.ToString(), " x ",
                                          ys.ToString(), " tx=", tx, " ty=", ty);
    const std::vector<double> x = Rounded(RandomValues(xs.NumElements(), seed), dtype);
    const std::vector<double> y = Rounded(RandomValues(ys.NumElements(), seed + 1), dtype);
    SlotBlobs out =
        Run("matmul", {{Upload(dtype, xs, x)}, {Upload(dtype, ys, y)}},
            vm::AttrMap().Set("transpose_x", int64_t{tx}).Set("transpose_y", int64_t{ty}));
    ASSERT_EQ(out.size(), 1u) << what;
    const vm::BlobRef& o = out[0][0];
    ASSERT_EQ(o->shape(), want_shape) << what;
    EXPECT_EQ(o->dtype(), dtype) << what;
    const int64_t k = tx ? xs.dim(xs.rank() - 2) : xs.dim(xs.rank() - 1);
    const double tol = dtype == DataType::kF32 ? 2e-6 * (k + 1) : 1e-12 * (k + 1);
    ExpectNear(h.Download(o), RefMatmul(x, xs, y, ys, tx, ty, want_shape), tol, what);
  }

  OpsHarness h;
};

TEST_P(NnOpsTest, MatmulAllTransposesAndBlockEdges) {
  // m, k, n: tiny, not multiples of the micro-tile, past the m block (96), the k block
  // (256) and the n block (2048).
  const std::vector<std::array<int64_t, 3>> sizes = {{1, 1, 1},     {7, 13, 5},    {65, 33, 17},
                                                     {128, 96, 80}, {100, 300, 9}, {3, 5, 2100}};
  uint64_t seed = 10;
  for (const auto& [m, k, n] : sizes) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      for (int tx = 0; tx < 2; ++tx) {
        for (int ty = 0; ty < 2; ++ty) {
          const Shape xs = tx ? Shape({k, m}) : Shape({m, k});
          const Shape ys = ty ? Shape({n, k}) : Shape({k, n});
          CheckMatmul(dtype, xs, ys, tx, ty, Shape({m, n}), seed += 2);
        }
      }
    }
  }
}

TEST_P(NnOpsTest, MatmulBroadcastsBatchDims) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    CheckMatmul(dtype, {2, 1, 3, 4}, {5, 4, 2}, false, false, {2, 5, 3, 2}, 1);
    CheckMatmul(dtype, {2, 1, 4, 3}, {5, 2, 4}, true, true, {2, 5, 3, 2}, 3);
    CheckMatmul(dtype, {3, 4}, {2, 4, 5}, false, false, {2, 3, 5}, 5);       // X unbatched
    CheckMatmul(dtype, {2, 3, 6, 4}, {6, 5}, true, false, {2, 3, 4, 5}, 7);  // Y unbatched
    CheckMatmul(dtype, {1, 3, 4}, {2, 1, 5, 4}, false, true, {2, 1, 3, 5}, 9);
  }
}

TEST_P(NnOpsTest, MatmulEmptyDims) {
  // k = 0: zeros.
  SlotBlobs out =
      Run("matmul", {{Upload(DataType::kF32, {3, 0}, {})}, {Upload(DataType::kF32, {0, 4}, {})}});
  ASSERT_EQ(out[0][0]->shape(), Shape({3, 4}));
  EXPECT_EQ(h.Download(out[0][0]), std::vector<double>(12, 0.0));
  // m = 0, n = 0 and an empty batch: empty outputs.
  out = Run("matmul", {{Upload(DataType::kF64, {0, 5}, {})},
                       {Upload(DataType::kF64, {5, 2}, RandomValues(10, 1))}});
  EXPECT_EQ(out[0][0]->shape(), Shape({0, 2}));
  out = Run("matmul", {{Upload(DataType::kF64, {2, 5}, RandomValues(10, 2))},
                       {Upload(DataType::kF64, {5, 0}, {})}});
  EXPECT_EQ(out[0][0]->shape(), Shape({2, 0}));
  out = Run("matmul", {{Upload(DataType::kF32, {0, 2, 3}, {})},
                       {Upload(DataType::kF32, {3, 4}, RandomValues(12, 3))}});
  EXPECT_EQ(out[0][0]->shape(), Shape({0, 2, 4}));
  EXPECT_TRUE(h.Download(out[0][0]).empty());
  // The grad with m = 0: XGrad is empty and YGrad zeros.
  out = Run("matmul_grad", {{Upload(DataType::kF64, {0, 3}, {})},
                            {Upload(DataType::kF64, {3, 2}, RandomValues(6, 4))},
                            {Upload(DataType::kF64, {0, 2}, {})}});
  EXPECT_EQ(out[1][0]->shape(), Shape({3, 2}));
  EXPECT_EQ(h.Download(out[1][0]), std::vector<double>(6, 0.0));
}

TEST_P(NnOpsTest, ReductionsOverAxes) {
  struct Case {
    Shape shape;
    std::vector<int64_t> axes;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {}},
      {{2, 3, 4}, {0}},
      {{2, 3, 4}, {1}},
      {{2, 3, 4}, {2}},
      {{2, 3, 4}, {-1}},
      {{2, 3, 4}, {0, 2}},
      {{2, 3, 4}, {-3, -1}},
      {{2, 3, 4}, {2, 1}},
      {{3, 1, 5, 2}, {1, 3}},
      {{3, 1, 5, 2}, {0, 1}},
      {{17, 33, 9}, {1}},
      {{17, 33, 9}, {0, 2}},
      {{5}, {0}},
      {{}, {}},
      {{1000}, {}},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::vector<double> x = Rounded(RandomValues(c.shape.NumElements(), ++seed), dtype);
      vm::BlobRef xb = Upload(dtype, c.shape, x);
      for (const char* op : {"reduce_sum", "reduce_mean"}) {
        Shape want_shape;
        const std::vector<double> want =
            RefReduce(x, c.shape, c.axes, std::string(op) == "reduce_mean", &want_shape);
        for (int64_t keepdim : {0, 1}) {
          const std::string what =
              absl::StrCat(op, " ", DataTypeName(dtype), c.shape.ToString(), " axes [",
                           absl::StrJoin(c.axes, ","), "] keepdim=", keepdim);
          SlotBlobs out =
              Run(op, {{xb}}, vm::AttrMap().Set("axes", c.axes).Set("keepdim", keepdim));
          ASSERT_EQ(out.size(), 1u) << what;
          Shape::Dims kept;
          for (int d = 0; d < c.shape.rank(); ++d) {
            bool r = c.axes.empty();
            for (int64_t a : c.axes) r |= (a < 0 ? a + c.shape.rank() : a) == d;
            if (!r || keepdim) kept.push_back(r ? 1 : c.shape.dim(d));
          }
          EXPECT_EQ(out[0][0]->shape(), keepdim ? Shape(absl::MakeConstSpan(kept)) : want_shape)
              << what;
          ExpectNear(h.Download(out[0][0]), want, dtype == DataType::kF32 ? 1e-6 : 1e-13, what);
        }
      }
    }
  }
}

TEST_P(NnOpsTest, ReductionsOfEmptyTensors) {
  vm::BlobRef x = Upload(DataType::kF32, {0, 3}, {});
  auto reduce = [&](const char* op, std::vector<int64_t> axes) {
    SlotBlobs out = Run(op, {{x}}, vm::AttrMap().Set("axes", axes));
    return out.empty() ? std::vector<double>{} : h.Download(out[0][0]);
  };
  EXPECT_EQ(reduce("reduce_sum", {0}), std::vector<double>(3, 0.0));  // sum of nothing: 0
  EXPECT_EQ(reduce("reduce_sum", {}), std::vector<double>({0.0}));
  EXPECT_TRUE(reduce("reduce_sum", {1}).empty());  // shape [0]
  for (double v : reduce("reduce_mean", {0})) EXPECT_TRUE(std::isnan(v)) << v;
  const std::vector<double> all = reduce("reduce_mean", {});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(std::isnan(all[0])) << "the mean of no elements is NaN";
  // Gradients of empty inputs are empty.
  SlotBlobs g = Run("reduce_mean_grad", {{x}, {Upload(DataType::kF32, {3}, {1, 2, 3})}},
                    vm::AttrMap().Set("axes", std::vector<int64_t>{0}));
  EXPECT_EQ(g[0][0]->shape(), Shape({0, 3}));
}

TEST_P(NnOpsTest, SoftmaxAndLogSoftmaxAlongEachAxis) {
  const Shape shape({3, 4, 5});
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const std::vector<double> x = Rounded(RandomValues(60, 7, -3, 3), dtype);
    vm::BlobRef xb = Upload(dtype, shape, x);
    for (const char* op : {"softmax", "log_softmax"}) {
      for (int64_t axis : {0, 1, 2, -1, -3}) {
        const std::string what = absl::StrCat(op, " ", DataTypeName(dtype), " axis ", axis);
        SlotBlobs out = Run(op, {{xb}}, vm::AttrMap().Set("axis", axis));
        ASSERT_EQ(out.size(), 1u) << what;
        EXPECT_EQ(out[0][0]->shape(), shape);
        const int a = static_cast<int>(axis < 0 ? axis + 3 : axis);
        ExpectNear(h.Download(out[0][0]), RefSoftmax(x, shape, a, std::string(op) == "log_softmax"),
                   dtype == DataType::kF32 ? 1e-6 : 1e-14, what);
      }
    }
  }
}

TEST_P(NnOpsTest, SoftmaxIsStableForLargeInputs) {
  // Inputs around +-1000: exp overflows without subtracting the max.
  const std::vector<double> x = {1000, 999,   998,  1000.5, -1000, -1001,
                                 -999, -1000, 1000, -1000,  0,     500};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    vm::BlobRef xb = Upload(dtype, {3, 4}, x);
    for (const char* op : {"softmax", "log_softmax"}) {
      const std::vector<double> got = h.Download(Run(op, {{xb}})[0][0]);
      for (double v : got) ASSERT_TRUE(std::isfinite(v)) << op << " gave " << v;
      ExpectNear(got, RefSoftmax(x, {3, 4}, 1, std::string(op) == "log_softmax"), 1e-6, op);
    }
  }
}

// Loss = logsumexp(row) - row[label], computed with the max subtracted.
std::vector<double> RefCrossEntropy(const std::vector<double>& x, const std::vector<double>& label,
                                    int64_t c) {
  std::vector<double> loss;
  for (size_t r = 0; r < label.size(); ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x[r * c + j]);
    for (int64_t j = 0; j < c; ++j) sum += std::exp(x[r * c + j] - mx);
    loss.push_back(mx + std::log(sum) - x[r * c + static_cast<int64_t>(label[r])]);
  }
  return loss;
}

TEST_P(NnOpsTest, SoftmaxWithCrossEntropy) {
  struct Case {
    Shape logits, label;
    double scale;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5}, {2, 3, 1}, 2.0}, {{4, 7}, {4, 1}, 1000.0}, {{6}, {1}, 1.0}};
  uint64_t seed = 40;
  for (const Case& c : cases) {
    const int64_t classes = c.logits.dim(c.logits.rank() - 1);
    const int64_t rows = c.label.NumElements();
    std::vector<double> labels;
    for (double v : RandomValues(rows, ++seed, 0, classes)) labels.push_back(std::floor(v));
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), c.logits.ToString());
      const std::vector<double> x =
          Rounded(RandomValues(c.logits.NumElements(), ++seed, -c.scale, c.scale), dtype);
      SlotBlobs out =
          Run("softmax_with_cross_entropy",
              {{Upload(dtype, c.logits, x)}, {Upload(DataType::kI64, c.label, labels)}});
      ASSERT_EQ(out.size(), 2u) << what;
      EXPECT_EQ(out[1][0]->shape(), c.label);
      const double tol = dtype == DataType::kF32 ? 1e-6 : 1e-13;
      const std::vector<double> softmax = h.Download(out[0][0]);
      const std::vector<double> loss = h.Download(out[1][0]);
      for (double v : loss) ASSERT_TRUE(std::isfinite(v)) << what;
      ExpectNear(softmax, RefSoftmax(x, {rows, classes}, 1, false), tol, what);
      ExpectNear(loss, RefCrossEntropy(x, labels, classes), tol, what);
      // The grad op without SoftmaxGrad: LossGrad * (softmax - onehot(label)).
      const std::vector<double> lg = RandomValues(rows, ++seed);
      SlotBlobs grad =
          Run("softmax_with_cross_entropy_grad", {{out[0][0]},
                                                  {Upload(DataType::kI64, c.label, labels)},
                                                  {Upload(dtype, c.label, Rounded(lg, dtype))},
                                                  {}});
      ASSERT_EQ(grad.size(), 1u) << what;
      std::vector<double> want = softmax;
      for (int64_t r = 0; r < rows; ++r) {
        want[r * classes + static_cast<int64_t>(labels[r])] -= 1;
        for (int64_t j = 0; j < classes; ++j) want[r * classes + j] *= Rounded(lg, dtype)[r];
      }
      ExpectNear(h.Download(grad[0][0]), want, tol, what + " grad");
    }
  }
}

TEST_P(NnOpsTest, LabelOutOfRangeFailsAtSync) {
  vm::BlobRef logits = Upload(DataType::kF32, {3, 5}, RandomValues(15, 1));
  for (double bad : {5.0, -1.0}) {
    vm::BlobRef label = Upload(DataType::kI64, {3, 1}, {0, bad, 4});
    absl::StatusOr<SlotBlobs> out =
        h.Run("softmax_with_cross_entropy", {{logits}, {label}}, {}, device());
    ASSERT_TRUE(out.ok()) << "the range check is the kernel's, at run time: " << out.status();
    const absl::Status synced = h.vm->Sync();
    EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
    EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("Label[1] = ", bad)));
    EXPECT_THAT(synced.message(), HasSubstr("out of range [0, 5)"));
  }
  // The harness still works afterwards.
  vm::BlobRef label = Upload(DataType::kI64, {3, 1}, {0, 2, 4});
  SlotBlobs out = Run("softmax_with_cross_entropy", {{logits}, {label}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(h.Download(out[1][0]).size(), 3u);
  EXPECT_TRUE(h.vm->Sync().ok());
}

TEST_P(NnOpsTest, Gradients) {
  auto in = [](Shape shape, uint64_t seed) {
    return GradInput{shape, RandomValues(shape.NumElements(), seed)};
  };
  const Device d = device();
  for (int64_t tx = 0; tx < 2; ++tx) {
    for (int64_t ty = 0; ty < 2; ++ty) {
      const vm::AttrMap attrs = vm::AttrMap().Set("transpose_x", tx).Set("transpose_y", ty);
      ExpectGradientsMatch(h, "matmul",
                           {{in(tx ? Shape({3, 2}) : Shape({2, 3}), 1)},
                            {in(ty ? Shape({4, 3}) : Shape({3, 4}), 2)}},
                           attrs, d);
      // Broadcast batches: X's batch [2, 1] and Y's [3] meet as [2, 3].
      ExpectGradientsMatch(h, "matmul",
                           {{in(tx ? Shape({2, 1, 3, 2}) : Shape({2, 1, 2, 3}), 3)},
                            {in(ty ? Shape({3, 2, 3}) : Shape({3, 3, 2}), 4)}},
                           attrs, d);
    }
  }
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{}, {1}, {0, -1}}) {
      for (int64_t keepdim : {0, 1}) {
        ExpectGradientsMatch(h, op, {{in({2, 3, 4}, 5)}},
                             vm::AttrMap().Set("axes", axes).Set("keepdim", keepdim), d);
      }
    }
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    for (int64_t axis : {0, -1}) {
      ExpectGradientsMatch(h, op, {{in({3, 4}, 6)}}, vm::AttrMap().Set("axis", axis), d);
    }
    ExpectGradientsMatch(h, op, {{in({2, 3, 2}, 7)}}, vm::AttrMap().Set("axis", int64_t{1}), d);
  }
  ExpectGradientsMatch(h, "softmax_with_cross_entropy",
                       {{in({2, 2, 5}, 8)}, {GradInput{{2, 2, 1}, {4, 0, 2, 3}, DataType::kI64}}},
                       {}, d);
}

INSTANTIATE_TEST_SUITE_P(Devices, NnOpsTest, ::testing::Values(kCpu, kSim0), [](const auto& info) {
  return std::string(DeviceTypeName(info.param.type()));
});

// Kernels large enough to split across the cpu device's intra-op threads (matmul, its
// gradient, same-shape binary and unary elementwise loops, in place too) give the same bits
// as the same kernels on one thread, and the VM's statistics see the split regions.
TEST(NnOpsParallelTest, SplitKernelsMatchOneThreadBitForBit) {
  struct Run {
    std::vector<std::vector<double>> values;
    vm::VmStats stats;
  };
  auto run = [](int threads) {
    OpsHarness h(threads);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    auto upload = [&](const Shape& shape) {
      std::vector<double> v(static_cast<size_t>(shape.NumElements()));
      for (double& e : v) e = dist(rng);
      return h.Upload(kCpu, DataType::kF32, shape, v);
    };
    Run result;
    auto keep = [&](const absl::StatusOr<SlotBlobs>& out) {
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return;
      for (const auto& slot : *out) {
        for (const vm::BlobRef& blob : slot) result.values.push_back(h.Download(blob));
      }
    };
    const vm::BlobRef x = upload({200, 170}), y = upload({170, 150}), g = upload({200, 150});
    const vm::AttrMap plain =
        vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0});
    keep(h.Run("matmul", {{x}, {y}}, plain));
    keep(h.Run("matmul", {{y}, {x}},
               vm::AttrMap().Set("transpose_x", int64_t{1}).Set("transpose_y", int64_t{1})));
    keep(h.Run("matmul_grad", {{x}, {y}, {g}}, plain));
    const vm::BlobRef a = upload({300000}), b = upload({300000});
    keep(h.Run("add", {{a}, {b}}));
    keep(h.Run("tanh", {{a}}));
    // In place: Out is X's blob (add declares the pair).
    DispatchOptions in_place;
    in_place.default_device = kCpu;
    const absl::Status added = h.dispatcher->CallInto("add", {{a}, {b}}, {{a}}, {}, in_place);
    EXPECT_TRUE(added.ok()) << added;
    result.values.push_back(h.Download(a));
    result.stats = h.vm->stats();
    return result;
  };
  const Run split = run(3);
  const Run alone = run(1);
  ASSERT_EQ(split.values.size(), alone.values.size());
  for (size_t i = 0; i < split.values.size(); ++i) {
    ASSERT_EQ(split.values[i].size(), alone.values[i].size()) << "output " << i;
    for (size_t j = 0; j < split.values[i].size(); ++j) {
      ASSERT_EQ(split.values[i][j], alone.values[i][j]) << "output " << i << " element " << j;
    }
  }
  EXPECT_GE(split.stats.parallel_regions, 6) << split.stats.ToString();
  EXPECT_GT(split.stats.parallel_helped_chunks, 0) << split.stats.ToString();
  EXPECT_EQ(split.stats.parallel_skipped_chunks, 0);
  EXPECT_EQ(alone.stats.parallel_regions, 0) << alone.stats.ToString();
}

TEST(NnOpsErrorTest, BadInputIsRejectedBeforeEnqueue) {
  OpsHarness h;
  auto f32 = [&](Shape s) {
    return h.Upload(kCpu, DataType::kF32, s, RandomValues(s.NumElements(), 1));
  };
  vm::BlobRef a = f32({2, 3});
  vm::BlobRef b = f32({4, 5});
  vm::BlobRef v = f32({3});
  vm::BlobRef batched = f32({2, 3, 4});
  vm::BlobRef other_batch = f32({3, 4, 2});
  vm::BlobRef d = h.Upload(kCpu, DataType::kF64, {3, 2}, RandomValues(6, 2));
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, {2, 3}, {1, 2, 3, 4, 5, 6});
  vm::BlobRef label = h.Upload(kCpu, DataType::kI64, {2, 1}, {0, 1});
  vm::BlobRef label32 = h.Upload(kCpu, DataType::kI32, {2, 1}, {0, 1});
  vm::BlobRef label_wide = h.Upload(kCpu, DataType::kI64, {2, 3}, {0, 1, 2, 0, 1, 2});
  const int64_t uploads = h.vm->stats().instructions;

  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    std::vector<const char*> messages;
  };
  using Axes = std::vector<int64_t>;
  const std::vector<Case> cases = {
      {"matmul",
       {{a}, {b}},
       {},
       {"op 'matmul'", "X f32[2, 3]", "Y f32[4, 5]", "X gives k=3 but Y gives k=4"}},
      {"matmul",
       {{a}, {b}},
       vm::AttrMap().Set("transpose_x", int64_t{1}),
       {"(transpose_x=1)", "X gives k=2 but Y gives k=4"}},
      {"matmul", {{a}, {v}}, {}, {"Y f32[3]", "rank >= 2"}},
      {"matmul",
       {{batched}, {other_batch}},
       {},
       {"X f32[2, 3, 4]", "Y f32[3, 4, 2]", "batch dims"}},
      {"matmul", {{a}, {d}}, {}, {"f32[2, 3]", "f64[3, 2]", "different dtypes"}},
      {"matmul",
       {{a}, {a}},
       vm::AttrMap().Set("transpose_y", int64_t{2}),
       {"'transpose_y' must be 0 or 1"}},
      {"matmul_grad", {{a}, {d}, {a}}, {}, {"different dtypes"}},
      {"reduce_sum",
       {{a}},
       vm::AttrMap().Set("axes", Axes{2}),
       {"op 'reduce_sum'", "axis 2", "f32[2, 3]", "rank 2"}},
      {"reduce_mean", {{a}}, vm::AttrMap().Set("axes", Axes{-3}), {"axis -3", "rank 2"}},
      {"reduce_sum",
       {{a}},
       vm::AttrMap().Set("axes", Axes{1, -1}),
       {"axis 1 appears twice", "rank 2"}},
      {"reduce_sum", {{a}}, vm::AttrMap().Set("keepdim", int64_t{3}), {"'keepdim' must be 0 or 1"}},
      {"reduce_sum", {{i}}, {}, {"i32[2, 3]; it must be f32 or f64"}},
      {"reduce_sum_grad",
       {{a}, {a}},
       vm::AttrMap().Set("axes", Axes{0}),
       {"OutGrad f32[2, 3] must be f32[3]"}},
      {"softmax",
       {{a}},
       vm::AttrMap().Set("axis", int64_t{2}),
       {"op 'softmax'", "axis 2", "X f32[2, 3]"}},
      {"log_softmax_grad", {{a}, {d}}, {}, {"OutGrad f64[3, 2] must be f32[2, 3]"}},
      {"softmax_with_cross_entropy",
       {{a}, {label32}},
       {},
       {"Label i32[2, 1] must be i64", "Logits f32[2, 3]"}},
      {"softmax_with_cross_entropy",
       {{a}, {label_wide}},
       {},
       {"Label i64[2, 3] must have shape [2, 1]"}},
      {"softmax_with_cross_entropy",
       {{a}, {label}},
       vm::AttrMap().Set("axis", int64_t{0}),
       {"only the last axis"}},
      {"softmax_with_cross_entropy", {{i}, {label}}, {}, {"Logits i32[2, 3] must be f32 or f64"}},
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
}  // namespace sluice::ops::nn_ops_test
