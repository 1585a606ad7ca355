// The norm op family (ops/norm_ops.cc, ops/cpu/norm_kernels.cc) on cpu and sim against plain
// loops in double: batch_norm_infer and layer_norm over fixed-seed random shapes (every axis,
// with and without Bias, Scale with leading 1s added or dropped), their grad ops against the
// same loops and against central differences, empty dims, results independent of the
// intra-op thread count, and errors that name the op and the operand.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::norm_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

std::vector<double> Rounded(std::vector<double> v, DataType dtype) {
  if (dtype == DataType::kF32) {
    for (double& x : v) x = static_cast<float>(x);
  }
  return v;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

// A random shape of `rank` dims in [1, 5] from `rng`.
Shape RandomShape(std::mt19937_64& rng, int rank) {
  Shape::Dims dims;
  for (int i = 0; i < rank; ++i) dims.push_back(1 + static_cast<int64_t>(rng() % 5));
  return Shape(absl::MakeConstSpan(dims));
}

// Out = (x - mean) / sqrt(var + eps) * scale + bias per channel (dim 1; one channel at rank 1).
std::vector<double> RefBatchNorm(const std::vector<double>& x, const Shape& s,
                                 const std::vector<double>& scale, const std::vector<double>& bias,
                                 const std::vector<double>& mean, const std::vector<double>& var,
                                 double eps) {
  const int64_t c = s.rank() >= 2 ? s.dim(1) : 1;
  const int64_t inner = s.rank() >= 2 ? s.NumElements() / (s.dim(0) * c) : 1;
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int64_t ch = (static_cast<int64_t>(i) / inner) % c;
    out[i] = (x[i] - mean[ch]) / std::sqrt(var[ch] + eps) * scale[ch] + bias[ch];
  }
  return out;
}

struct LayerNormRef {
  std::vector<double> out, mean, inv;
};

LayerNormRef RefLayerNorm(const std::vector<double>& x, int64_t rows, int64_t cols,
                          const std::vector<double>& scale, const std::vector<double>* bias,
                          double eps) {
  LayerNormRef r;
  r.out.resize(x.size());
  for (int64_t row = 0; row < rows; ++row) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < cols; ++j) m += x[row * cols + j];
    m /= static_cast<double>(cols);
    for (int64_t j = 0; j < cols; ++j) v += (x[row * cols + j] - m) * (x[row * cols + j] - m);
    v /= static_cast<double>(cols);
    const double inv = 1 / std::sqrt(v + eps);
    for (int64_t j = 0; j < cols; ++j) {
      r.out[row * cols + j] =
          (x[row * cols + j] - m) * inv * scale[j] + (bias != nullptr ? (*bias)[j] : 0.0);
    }
    r.mean.push_back(m);
    r.inv.push_back(inv);
  }
  return r;
}

class NormOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  SlotBlobs Run(absl::string_view op, const SlotBlobs& inputs, const vm::AttrMap& attrs = {}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? *out : SlotBlobs{};
  }
  absl::Status Fails(absl::string_view op, const SlotBlobs& inputs, const vm::AttrMap& attrs = {}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_FALSE(out.ok()) << op << " accepted its operands";
    return out.ok() ? absl::OkStatus() : out.status();
  }

  OpsHarness h;
};

TEST_P(NormOpsTest, BatchNormMatchesLoopsOnRandomShapes) {
  std::mt19937_64 rng(20261208);
  uint64_t seed = 1;
  for (int trial = 0; trial < 12; ++trial) {
    const Shape shape = RandomShape(rng, 1 + trial % 5);
    const int64_t c = shape.rank() >= 2 ? shape.dim(1) : 1;
    const double eps = trial % 2 == 0 ? 1e-5 : 0.5;
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::string what = absl::StrCat(DataTypeName(dtype), shape.ToString(), " eps ", eps);
      const std::vector<double> x =
          Rounded(RandomValues(shape.NumElements(), ++seed, -3, 3), dtype);
      const std::vector<double> scale = Rounded(RandomValues(c, ++seed, -2, 2), dtype);
      const std::vector<double> bias = Rounded(RandomValues(c, ++seed), dtype);
      const std::vector<double> mean = Rounded(RandomValues(c, ++seed), dtype);
      const std::vector<double> var = Rounded(RandomValues(c, ++seed, 0, 2), dtype);
      SlotBlobs out = Run("batch_norm_infer",
                          {{Upload(dtype, shape, x)},
                           {Upload(dtype, {c}, scale)},
                           {Upload(dtype, {c}, bias)},
                           {Upload(dtype, {c}, mean)},
                           {Upload(dtype, {c}, var)}},
                          vm::AttrMap().Set("epsilon", eps));
      ASSERT_EQ(out.size(), 1u) << what;
      EXPECT_EQ(out[0][0]->shape(), shape);
      EXPECT_EQ(out[0][0]->dtype(), dtype);
      ExpectNear(h.Download(out[0][0]), RefBatchNorm(x, shape, scale, bias, mean, var, eps),
                 dtype == DataType::kF32 ? 2e-6 : 1e-14, what);
    }
  }
}

TEST_P(NormOpsTest, LayerNormMatchesLoopsOnEveryAxis) {
  std::mt19937_64 rng(7);
  uint64_t seed = 50;
  for (int rank = 1; rank <= 4; ++rank) {
    const Shape shape = RandomShape(rng, rank);
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
      int64_t rows = 1, cols = 1;
      for (int d = 0; d < rank; ++d) (d < a ? rows : cols) *= shape.dim(d);
      const Shape normalized(shape.dims().subspan(a));
      for (DataType dtype : {DataType::kF32, DataType::kF64}) {
        for (bool with_bias : {true, false}) {
          const std::string what = absl::StrCat(DataTypeName(dtype), shape.ToString(), " axis ",
                                                axis, with_bias ? " with" : " without", " Bias");
          const std::vector<double> x =
              Rounded(RandomValues(shape.NumElements(), ++seed, -2, 4), dtype);
          const std::vector<double> scale = Rounded(RandomValues(cols, ++seed, -2, 2), dtype);
          const std::vector<double> bias = Rounded(RandomValues(cols, ++seed), dtype);
          SlotBlobs inputs = {{Upload(dtype, shape, x)}, {Upload(dtype, normalized, scale)}, {}};
          if (with_bias) inputs[2].push_back(Upload(dtype, normalized, bias));
          SlotBlobs out = Run("layer_norm", inputs, vm::AttrMap().Set("axis", axis));
          ASSERT_EQ(out.size(), 3u) << what;
          Shape::Dims stats;
          for (int d = 0; d < rank; ++d) stats.push_back(d < a ? shape.dim(d) : 1);
          EXPECT_EQ(out[0][0]->shape(), shape) << what;
          EXPECT_EQ(out[1][0]->shape(), Shape(absl::MakeConstSpan(stats))) << what;
          EXPECT_EQ(out[2][0]->shape(), Shape(absl::MakeConstSpan(stats))) << what;
          const LayerNormRef want =
              RefLayerNorm(x, rows, cols, scale, with_bias ? &bias : nullptr, 1e-5);
          const double tol = dtype == DataType::kF32 ? 4e-6 : 1e-12;
          ExpectNear(h.Download(out[0][0]), want.out, tol, what + " Out");
          ExpectNear(h.Download(out[1][0]), want.mean, tol, what + " Mean");
          ExpectNear(h.Download(out[2][0]), want.inv, tol, what + " InvStdDev");
        }
      }
    }
  }
}

TEST_P(NormOpsTest, LayerNormScaleMayAddOrDropLeadingOnes) {
  const std::vector<double> x = RandomValues(12, 3);
  const std::vector<double> scale = RandomValues(4, 4);
  const vm::BlobRef xb = Upload(DataType::kF64, {3, 1, 4}, x);
  const LayerNormRef want = RefLayerNorm(x, 3, 4, scale, nullptr, 1e-5);
  for (const Shape& scale_shape : {Shape({4}), Shape({1, 4}), Shape({1, 1, 4})}) {
    SlotBlobs out = Run("layer_norm", {{xb}, {Upload(DataType::kF64, scale_shape, scale)}, {}},
                        vm::AttrMap().Set("axis", int64_t{1}));
    ASSERT_EQ(out.size(), 3u) << scale_shape.ToString();
    ExpectNear(h.Download(out[0][0]), want.out, 1e-13, scale_shape.ToString());
  }
}

TEST_P(NormOpsTest, GradOpsMatchLoops) {
  // layer_norm_grad: rows of 7 in a [2, 3, 7] X, f64, against the formula written out.
  const int64_t rows = 6, cols = 7;
  const std::vector<double> x = RandomValues(rows * cols, 11, -2, 2);
  const std::vector<double> scale = RandomValues(cols, 12);
  const std::vector<double> g = RandomValues(rows * cols, 13);
  const LayerNormRef fwd = RefLayerNorm(x, rows, cols, scale, nullptr, 1e-5);
  std::vector<double> dx(x.size()), dscale(cols, 0.0), dbias(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double md = 0, mdx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (x[r * cols + j] - fwd.mean[r]) * fwd.inv[r];
      md += g[r * cols + j] * scale[j] / cols;
      mdx += g[r * cols + j] * scale[j] * xhat / cols;
      dscale[j] += g[r * cols + j] * xhat;
      dbias[j] += g[r * cols + j];
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double xhat = (x[r * cols + j] - fwd.mean[r]) * fwd.inv[r];
      dx[r * cols + j] = fwd.inv[r] * (g[r * cols + j] * scale[j] - md - xhat * mdx);
    }
  }
  const DataType f64 = DataType::kF64;
  SlotBlobs grads = Run("layer_norm_grad", {{Upload(f64, {2, 3, 7}, x)},
                                            {Upload(f64, {7}, scale)},
                                            {Upload(f64, {2, 3, 1}, fwd.mean)},
                                            {Upload(f64, {2, 3, 1}, fwd.inv)},
                                            {Upload(f64, {2, 3, 7}, g)}});
  ASSERT_EQ(grads.size(), 3u);
  ExpectNear(h.Download(grads[0][0]), dx, 1e-12, "XGrad");
  ExpectNear(h.Download(grads[1][0]), dscale, 1e-12, "ScaleGrad");
  ExpectNear(h.Download(grads[2][0]), dbias, 1e-12, "BiasGrad");

  // batch_norm_infer_grad on [2, 3, 4].
  const std::vector<double> bx = RandomValues(24, 21), bg = RandomValues(24, 22);
  const std::vector<double> bs = RandomValues(3, 23), bm = RandomValues(3, 24);
  const std::vector<double> bv = RandomValues(3, 25, 0.5, 2);
  SlotBlobs bgrads = Run("batch_norm_infer_grad",
                         {{Upload(f64, {2, 3, 4}, bx)},
                          {Upload(f64, {3}, bs)},
                          {Upload(f64, {3}, bm)},
                          {Upload(f64, {3}, bv)},
                          {Upload(f64, {2, 3, 4}, bg)}},
                         vm::AttrMap().Set("epsilon", 0.25));
  ASSERT_EQ(bgrads.size(), 5u);
  std::vector<double> want_dx(24), sum_g(3, 0.0), sum_gx(3, 0.0);
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t c = (i / 4) % 3;
    const double s = std::sqrt(bv[c] + 0.25);
    want_dx[i] = bg[i] * bs[c] / s;
    sum_g[c] += bg[i];
    sum_gx[c] += bg[i] * (bx[i] - bm[c]);
  }
  std::vector<double> want_scale(3), want_mean(3), want_var(3);
  for (int c = 0; c < 3; ++c) {
    const double s = std::sqrt(bv[c] + 0.25);
    want_scale[c] = sum_gx[c] / s;
    want_mean[c] = -sum_g[c] * bs[c] / s;
    want_var[c] = -0.5 * bs[c] * sum_gx[c] / (s * s * s);
  }
  ExpectNear(h.Download(bgrads[0][0]), want_dx, 1e-13, "XGrad");
  ExpectNear(h.Download(bgrads[1][0]), want_scale, 1e-13, "ScaleGrad");
  ExpectNear(h.Download(bgrads[2][0]), sum_g, 1e-13, "BiasGrad");
  ExpectNear(h.Download(bgrads[3][0]), want_mean, 1e-13, "MeanGrad");
  ExpectNear(h.Download(bgrads[4][0]), want_var, 1e-13, "VarGrad");
}

TEST_P(NormOpsTest, BatchNormGradientsMatchCentralDifferences) {
  const auto in = [](Shape shape, uint64_t seed, double lo = -1, double hi = 1) {
    return GradInput{shape, RandomValues(shape.NumElements(), seed, lo, hi)};
  };
  ExpectGradientsMatch(
      h, "batch_norm_infer",
      {{in({2, 3, 2}, 1)}, {in({3}, 2)}, {in({3}, 3)}, {in({3}, 4)}, {in({3}, 5, 0.5, 1.5)}},
      vm::AttrMap().Set("epsilon", 0.1), device());
  // layer_norm's check is tests/framework/norm_grad_test.cc: this one would weigh Mean and
  // InvStdDev into the loss, and no gradient flows back through them (ops/norm_ops.cc).
}

TEST_P(NormOpsTest, EmptyDims) {
  const DataType f32 = DataType::kF32;
  // No rows: empty outputs.
  SlotBlobs out =
      Run("layer_norm", {{Upload(f32, {0, 4}, {})}, {Upload(f32, {4}, {1, 1, 1, 1})}, {}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1][0]->shape(), Shape({0, 1}));
  // Empty rows: the mean of nothing is NaN, as reduce_mean's.
  out = Run("layer_norm", {{Upload(f32, {2, 0}, {})}, {Upload(f32, {0}, {})}, {}});
  ASSERT_EQ(out.size(), 3u);
  for (double v : h.Download(out[1][0])) EXPECT_TRUE(std::isnan(v)) << v;
  // Empty batch norm, and a grad with no elements: zero sums.
  out = Run("batch_norm_infer", {{Upload(f32, {0, 2}, {})},
                                 {Upload(f32, {2}, {1, 1})},
                                 {Upload(f32, {2}, {0, 0})},
                                 {Upload(f32, {2}, {0, 0})},
                                 {Upload(f32, {2}, {1, 1})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0]->shape(), Shape({0, 2}));
  out = Run("batch_norm_infer_grad", {{Upload(f32, {0, 2}, {})},
                                      {Upload(f32, {2}, {1, 1})},
                                      {Upload(f32, {2}, {0, 0})},
                                      {Upload(f32, {2}, {1, 1})},
                                      {Upload(f32, {0, 2}, {})}});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(h.Download(out[2][0]), std::vector<double>({0, 0}));
}

TEST_P(NormOpsTest, ErrorsNameTheOpAndTheOperand) {
  const DataType f32 = DataType::kF32;
  const vm::BlobRef x = Upload(f32, {2, 3, 4}, RandomValues(24, 1));
  const vm::BlobRef c3 = Upload(f32, {3}, {1, 2, 3});
  const vm::BlobRef c4 = Upload(f32, {4}, {1, 2, 3, 4});
  const vm::BlobRef d3 = Upload(DataType::kF64, {3}, {1, 2, 3});
  const vm::BlobRef i = Upload(DataType::kI32, {2, 3, 4}, std::vector<double>(24, 1));
  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    std::vector<const char*> messages;
  };
  const std::vector<Case> cases = {
      {"batch_norm_infer",
       {{x}, {c4}, {c3}, {c3}, {c3}},
       {},
       {"op 'batch_norm_infer'", "input Scale f32[4] must be f32[3]", "per channel"}},
      {"batch_norm_infer", {{x}, {c3}, {c3}, {d3}, {c3}}, {}, {"input Mean f64[3] must be f32[3]"}},
      {"batch_norm_infer", {{x}, {c3}, {c3}, {c3}, {c4}}, {}, {"input Var f32[4]"}},
      {"batch_norm_infer", {{i}, {c3}, {c3}, {c3}, {c3}}, {}, {"input X i32[2, 3, 4] must be f32"}},
      {"layer_norm", {{x}, {c3}, {}}, {}, {"op 'layer_norm'", "input Scale f32[3] must be f32[4]"}},
      {"layer_norm", {{x}, {c4}, {c3}}, {}, {"input Bias f32[3] must be f32[4] (Scale's)"}},
      {"layer_norm",
       {{x}, {c4}, {}},
       vm::AttrMap().Set("axis", int64_t{3}),
       {"attribute 'axis' is 3", "[-3, 3)"}},
      {"layer_norm",
       {{x}, {c4}, {}},
       vm::AttrMap().Set("axis", int64_t{1}),
       {"must be f32[3, 4]", "from axis 1"}},
      {"layer_norm_grad", {{x}, {c4}, {c3}, {c3}, {x}}, {}, {"op 'layer_norm_grad'", "input Mean"}},
  };
  for (const Case& c : cases) {
    const absl::Status status = Fails(c.op, c.inputs, c.attrs);
    for (const char* message : c.messages) {
      EXPECT_THAT(status.message(), HasSubstr(message)) << c.op;
    }
  }
}

// Sums in a fixed order: one intra-op thread and many give the same bits, and so do two runs.
TEST(NormOpsDeterminismTest, ThreadCountDoesNotChangeResults) {
  const Shape shape({96, 700});
  const std::vector<double> x = RandomValues(shape.NumElements(), 5, -3, 3);
  const std::vector<double> scale = RandomValues(700, 6);
  const std::vector<double> g = RandomValues(shape.NumElements(), 7);
  std::vector<std::vector<double>> results[2];
  for (int threads : {1, 0}) {
    OpsHarness h(threads);
    auto& r = results[threads == 1 ? 0 : 1];
    const DataType f32 = DataType::kF32;
    absl::StatusOr<SlotBlobs> out = h.Run(
        "layer_norm", {{h.Upload(kCpu, f32, shape, x)}, {h.Upload(kCpu, f32, {700}, scale)}, {}});
    ASSERT_TRUE(out.ok()) << out.status();
    for (const auto& slot : *out) r.push_back(h.Download(slot[0]));
    absl::StatusOr<SlotBlobs> grads = h.Run("layer_norm_grad", {{h.Upload(kCpu, f32, shape, x)},
                                                                {h.Upload(kCpu, f32, {700}, scale)},
                                                                {(*out)[1][0]},
                                                                {(*out)[2][0]},
                                                                {h.Upload(kCpu, f32, shape, g)}});
    ASSERT_TRUE(grads.ok()) << grads.status();
    for (const auto& slot : *grads) r.push_back(h.Download(slot[0]));
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t k = 0; k < results[0].size(); ++k) {
    EXPECT_EQ(results[0][k], results[1][k]) << "result " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, NormOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::ops::norm_ops_test
