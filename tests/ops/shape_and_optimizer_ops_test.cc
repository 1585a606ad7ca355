// The shape and optimizer op family (ops/shape_and_optimizer_ops.cc,
// ops/cpu/shape_and_optimizer_kernels.cc) on cpu and sim: reshape, transpose, concat and split
// against index-by-index reference loops for every dtype, sgd and adam updated in place over
// several steps against a double-precision reference, the gradients of the shape ops against
// finite differences, and the errors returned before anything is enqueued.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::shape_and_optimizer_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

using Ints = std::vector<int64_t>;

constexpr DataType kAllDtypes[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                   DataType::kBool};

// Values every dtype holds exactly: a shuffle of distinct integers around 0 (random 0/1 for
// bool), so that a misplaced element shows.
std::vector<double> Values(int64_t n, uint64_t seed, DataType dtype) {
  std::mt19937_64 rng(seed);
  std::vector<double> values(n);
  if (dtype == DataType::kBool) {
    for (double& v : values) v = static_cast<double>(rng() % 2);
    return values;
  }
  std::iota(values.begin(), values.end(), -static_cast<double>(n / 2));
  std::shuffle(values.begin(), values.end(), rng);
  return values;
}

int64_t Count(const Ints& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<int64_t>());
}

Ints Strides(const Ints& dims) {
  Ints strides(dims.size(), 1);
  for (int d = static_cast<int>(dims.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * dims[d + 1];
  }
  return strides;
}

// The coordinates of row-major element `i` of `dims`.
Ints Coords(int64_t i, const Ints& dims) {
  Ints coords(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    coords[d] = i % dims[d];
    i /= dims[d];
  }
  return coords;
}

int64_t Offset(const Ints& coords, const Ints& dims) {
  const Ints strides = Strides(dims);
  int64_t offset = 0;
  for (size_t d = 0; d < dims.size(); ++d) offset += coords[d] * strides[d];
  return offset;
}

// out[c] = x[c permuted back]: out coordinate k is x coordinate perm[k].
std::vector<double> RefTranspose(const Ints& dims, const Ints& perm, const std::vector<double>& x) {
  Ints out_dims;
  for (int64_t p : perm) out_dims.push_back(dims[p]);
  std::vector<double> out(x.size());
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
    const Ints oc = Coords(i, out_dims);
    Ints ic(dims.size());
    for (size_t k = 0; k < perm.size(); ++k) ic[perm[k]] = oc[k];
    out[i] = x[Offset(ic, dims)];
  }
  return out;
}

// Where each element of the concat of `parts` (their dims) along `axis` comes from.
struct Source {
  int part;
  int64_t index;
};
std::vector<Source> RefConcatSources(const std::vector<Ints>& parts, int axis) {
  Ints out_dims = parts[0];
  out_dims[axis] = 0;
  for (const Ints& p : parts) out_dims[axis] += p[axis];
  std::vector<Source> sources(Count(out_dims));
  for (int64_t i = 0; i < static_cast<int64_t>(sources.size()); ++i) {
    Ints c = Coords(i, out_dims);
    int part = 0;
    while (c[axis] >= parts[part][axis]) c[axis] -= parts[part++][axis];
    sources[i] = {part, Offset(c, parts[part])};
  }
  return sources;
}

vm::AttrMap PermAttr(const Ints& perm) { return vm::AttrMap().Set("perm", perm); }
vm::AttrMap ShapeAttr(const Ints& shape) { return vm::AttrMap().Set("shape", shape); }
vm::AttrMap AxisAttr(int64_t axis) { return vm::AttrMap().Set("axis", axis); }

class ShapeAndOptimizerOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }

  // Runs a one-output op and returns its output (null on failure, with a test failure).
  vm::BlobRef RunOne(absl::string_view op, const SlotBlobs& inputs, const vm::AttrMap& attrs) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, attrs, device());
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return nullptr;
    EXPECT_EQ((*out)[0].size(), 1u);
    EXPECT_EQ((*out)[0][0]->device(), device());
    return (*out)[0][0];
  }

  void CheckTranspose(DataType dtype, const Ints& dims, const Ints& perm, uint64_t seed) {
    SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), Shape(dims).ToString(), " perm [",
                              absl::StrJoin(perm, ", "), "]"));
    const std::vector<double> xs = Values(Count(dims), seed, dtype);
    vm::BlobRef x = h.Upload(device(), dtype, Shape(dims), xs);
    vm::BlobRef y = RunOne("transpose", {{x}}, PermAttr(perm));
    ASSERT_NE(y, nullptr);
    Ints out_dims;
    for (int64_t p : perm) out_dims.push_back(dims[p]);
    EXPECT_EQ(y->shape(), Shape(out_dims));
    EXPECT_EQ(y->dtype(), dtype);
    EXPECT_EQ(h.Download(y), RefTranspose(dims, perm, xs));
  }

  OpsHarness h;
};

TEST_P(ShapeAndOptimizerOpsTest, ReshapeInfersAndCopiesDims) {
  const Ints dims = {2, 3, 4};
  struct Case {
    Ints attr;
    Shape want;
  };
  const std::vector<Case> cases = {
      {{0, -1}, Shape({2, 12})},     {{-1, 4}, Shape({6, 4})},
      {{4, 0, 2}, Shape({4, 3, 2})}, {{24}, Shape({24})},
      {{0, 0, 0}, Shape({2, 3, 4})}, {{0, 1, -1, 1}, Shape({2, 1, 12, 1})},
      {{-1}, Shape({24})},
  };
  for (DataType dtype : kAllDtypes) {
    const std::vector<double> xs = Values(24, 11, dtype);
    vm::BlobRef x = h.Upload(device(), dtype, Shape(dims), xs);
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " shape [", absl::StrJoin(c.attr, ", "), "]"));
      vm::BlobRef y = RunOne("reshape", {{x}}, ShapeAttr(c.attr));
      ASSERT_NE(y, nullptr);
      EXPECT_EQ(y->shape(), c.want);
      EXPECT_EQ(y->dtype(), dtype);
      EXPECT_EQ(h.Download(y), xs);
    }
  }
  // A scalar and back.
  vm::BlobRef s = h.Upload(device(), DataType::kF64, Shape(), {4.25});
  vm::BlobRef one = RunOne("reshape", {{s}}, ShapeAttr({1, -1}));
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->shape(), Shape({1, 1}));
  vm::BlobRef back = RunOne("reshape", {{one}}, ShapeAttr({}));
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->shape(), Shape());
  EXPECT_EQ(h.Download(back), std::vector<double>({4.25}));
}

TEST_P(ShapeAndOptimizerOpsTest, ReshapeEmptyTensor) {
  vm::BlobRef x = h.Upload(device(), DataType::kF32, Shape({0, 4}), {});
  for (const auto& [attr, want] :
       std::vector<std::pair<Ints, Shape>>{{{-1, 2}, Shape({0, 2})},
                                           {{0, 2, 2}, Shape({0, 2, 2})},
                                           {{4, 0, -1}, Shape({4, 4, 0})}}) {
    vm::BlobRef y = RunOne("reshape", {{x}}, ShapeAttr(attr));
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(y->shape(), want);
    EXPECT_TRUE(h.Download(y).empty());
  }
}

TEST_P(ShapeAndOptimizerOpsTest, ReshapeInPlaceAndIntoAnotherTensor) {
  const std::vector<double> xs = Values(12, 5, DataType::kF64);
  vm::BlobRef x = h.Upload(device(), DataType::kF64, Shape({3, 4}), xs);
  DispatchOptions options;
  options.default_device = device();
  // Out is X: nothing moves.
  const absl::Status in_place =
      h.dispatcher->CallInto("reshape", {{x}}, {{x}}, ShapeAttr({0, -1}), options);
  ASSERT_TRUE(in_place.ok()) << in_place;
  EXPECT_EQ(h.Download(x), xs);
  // Out is a tensor the caller allocated.
  vm::BlobRef y = h.Upload(device(), DataType::kF64, Shape({2, 6}), std::vector<double>(12, 0.0));
  const absl::Status into =
      h.dispatcher->CallInto("reshape", {{x}}, {{y}}, ShapeAttr({2, -1}), options);
  ASSERT_TRUE(into.ok()) << into;
  EXPECT_EQ(h.Download(y), xs);
  // reshape_grad: OutGrad's elements in X's shape.
  vm::BlobRef g = RunOne("reshape_grad", {{y}, {x}}, {});
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->shape(), Shape({3, 4}));
  EXPECT_EQ(h.Download(g), xs);
}

TEST_P(ShapeAndOptimizerOpsTest, Transpose2D) {
  for (DataType dtype : kAllDtypes) CheckTranspose(dtype, {33, 65}, {1, 0}, 1);
  for (const Ints& dims : std::vector<Ints>{{1, 70}, {70, 1}, {64, 96}, {7, 3}, {1, 1}, {0, 5}}) {
    CheckTranspose(DataType::kF32, dims, {1, 0}, 2);
  }
  CheckTranspose(DataType::kI64, {33, 65}, {0, 1}, 3);
}

TEST_P(ShapeAndOptimizerOpsTest, TransposeEveryPermutationIn3DAnd4D) {
  for (const Ints& dims : std::vector<Ints>{{2, 3, 4}, {2, 3, 4, 5}, {3, 1, 4, 2}, {1, 5, 1, 6}}) {
    Ints perm(dims.size());
    std::iota(perm.begin(), perm.end(), 0);
    do {  // starts with the identity
      CheckTranspose(DataType::kF64, dims, perm, 4);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  // Batched 2-D transposes with sizes that are not multiples of the tile, in each dtype.
  for (DataType dtype : kAllDtypes) CheckTranspose(dtype, {3, 33, 17}, {0, 2, 1}, 5);
  CheckTranspose(DataType::kI32, {5, 40, 3, 2}, {3, 1, 2, 0}, 6);
  // A scalar, with the empty perm.
  CheckTranspose(DataType::kF32, {}, {}, 7);
}

TEST_P(ShapeAndOptimizerOpsTest, TransposeInPlace) {
  const std::vector<double> xs = Values(25, 8, DataType::kF32);
  vm::BlobRef x = h.Upload(device(), DataType::kF32, Shape({5, 5}), xs);
  DispatchOptions options;
  options.default_device = device();
  const absl::Status status =
      h.dispatcher->CallInto("transpose", {{x}}, {{x}}, PermAttr({1, 0}), options);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(h.Download(x), RefTranspose({5, 5}, {1, 0}, xs));
}

TEST_P(ShapeAndOptimizerOpsTest, ConcatAlongEachAxis) {
  const Ints base = {2, 3, 4};
  for (DataType dtype : {DataType::kF32, DataType::kI64, DataType::kBool}) {
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      const int ax = static_cast<int>(axis < 0 ? axis + 3 : axis);
      SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " axis ", axis));
      std::vector<Ints> dims;
      vm::BlobList xs;
      std::vector<std::vector<double>> values;
      for (int64_t size : {2, 0, 3, 1}) {  // one input is empty along the axis
        Ints d = base;
        d[ax] = size;
        dims.push_back(d);
        values.push_back(Values(Count(d), 20 + values.size(), dtype));
        xs.push_back(h.Upload(device(), dtype, Shape(d), values.back()));
      }
      vm::BlobRef y = RunOne("concat", {xs}, AxisAttr(axis));
      ASSERT_NE(y, nullptr);
      Ints want = base;
      want[ax] = 6;
      EXPECT_EQ(y->shape(), Shape(want));
      std::vector<double> expected;
      for (const Source& s : RefConcatSources(dims, ax))
        expected.push_back(values[s.part][s.index]);
      EXPECT_EQ(h.Download(y), expected);
    }
  }
  // A single input; inputs empty along another axis.
  const std::vector<double> vs = Values(6, 30, DataType::kF64);
  vm::BlobRef x = h.Upload(device(), DataType::kF64, Shape({2, 3}), vs);
  vm::BlobRef single = RunOne("concat", {{x}}, AxisAttr(1));
  ASSERT_NE(single, nullptr);
  EXPECT_EQ(single->shape(), Shape({2, 3}));
  EXPECT_EQ(h.Download(single), vs);
  vm::BlobRef e = h.Upload(device(), DataType::kF64, Shape({0, 3}), {});
  vm::BlobRef empty = RunOne("concat", {{e, e}}, AxisAttr(1));
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->shape(), Shape({0, 6}));
}

TEST_P(ShapeAndOptimizerOpsTest, SplitByNumAndSections) {
  const Ints dims = {4, 6, 3};
  struct Case {
    vm::AttrMap attrs;
    int axis;
    Ints sizes;
  };
  const std::vector<Case> cases = {
      {vm::AttrMap().Set("num", int64_t{2}), 0, {2, 2}},
      {vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{1}), 1, {2, 2, 2}},
      {vm::AttrMap().Set("sections", Ints{1, -1, 2}).Set("axis", int64_t{-2}), 1, {1, 3, 2}},
      {vm::AttrMap().Set("sections", Ints{0, -1}).Set("axis", int64_t{-1}), 2, {0, 3}},
      {vm::AttrMap().Set("sections", Ints{3}).Set("axis", int64_t{2}), 2, {3}},
      {vm::AttrMap().Set("sections", Ints{1, 2, 1}), 0, {1, 2, 1}},
      {vm::AttrMap().Set("num", int64_t{1}).Set("axis", int64_t{-3}), 0, {4}},
  };
  for (DataType dtype : {DataType::kF64, DataType::kI32, DataType::kBool}) {
    const std::vector<double> xs = Values(Count(dims), 40, dtype);
    vm::BlobRef x = h.Upload(device(), dtype, Shape(dims), xs);
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " ", c.attrs.ToString()));
      absl::StatusOr<SlotBlobs> out = h.Run("split", {{x}}, c.attrs, device());
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ((*out)[0].size(), c.sizes.size());
      std::vector<Ints> parts;
      std::vector<std::vector<double>> got;
      for (size_t i = 0; i < c.sizes.size(); ++i) {
        Ints d = dims;
        d[c.axis] = c.sizes[i];
        parts.push_back(d);
        EXPECT_EQ((*out)[0][i]->shape(), Shape(d)) << "output " << i;
        got.push_back(h.Download((*out)[0][i]));
      }
      // Every element of X lands where the concat of the outputs would read it.
      const std::vector<Source> sources = RefConcatSources(parts, c.axis);
      ASSERT_EQ(sources.size(), xs.size());
      for (size_t i = 0; i < xs.size(); ++i) {
        ASSERT_LT(sources[i].index, static_cast<int64_t>(got[sources[i].part].size()));
        EXPECT_EQ(got[sources[i].part][sources[i].index], xs[i]) << "element " << i;
      }
      // And concat undoes split.
      vm::BlobRef joined = RunOne("concat", {(*out)[0]}, AxisAttr(c.axis));
      ASSERT_NE(joined, nullptr);
      EXPECT_EQ(h.Download(joined), xs);
    }
  }
}

TEST_P(ShapeAndOptimizerOpsTest, ConcatGradCutsOutGradIntoInputShapes) {
  vm::BlobRef a = h.Upload(device(), DataType::kF32, Shape({2, 1}), {0, 0});
  vm::BlobRef b = h.Upload(device(), DataType::kF32, Shape({2, 3}), std::vector<double>(6, 0));
  const std::vector<double> gs = Values(8, 50, DataType::kF32);
  vm::BlobRef g = h.Upload(device(), DataType::kF32, Shape({2, 4}), gs);
  absl::StatusOr<SlotBlobs> out = h.Run("concat_grad", {{g}, {a, b}}, AxisAttr(-1), device());
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].size(), 2u);
  EXPECT_EQ((*out)[0][0]->shape(), Shape({2, 1}));
  EXPECT_EQ((*out)[0][1]->shape(), Shape({2, 3}));
  EXPECT_EQ(h.Download((*out)[0][0]), std::vector<double>({gs[0], gs[4]}));
  EXPECT_EQ(h.Download((*out)[0][1]),
            std::vector<double>({gs[1], gs[2], gs[3], gs[5], gs[6], gs[7]}));
}

// Rounds to the tensor's dtype, as the device stores it.
double Round(DataType dtype, double v) {
  return dtype == DataType::kF32 ? static_cast<double>(static_cast<float>(v)) : v;
}

TEST_P(ShapeAndOptimizerOpsTest, SgdStepsInPlace) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const Shape shape({3, 5});
    std::vector<double> ref = RandomValues(15, 60);
    for (double& v : ref) v = Round(dtype, v);
    vm::BlobRef param = h.Upload(device(), dtype, shape, ref);
    // LearningRate [1] for f32, a scalar for f64.
    const Shape lr_shape = dtype == DataType::kF32 ? Shape({1}) : Shape();
    const double lr = Round(dtype, 0.05);
    vm::BlobRef rate = h.Upload(device(), dtype, lr_shape, {lr});
    DispatchOptions options;
    options.default_device = device();
    for (int step = 0; step < 4; ++step) {
      std::vector<double> gs = RandomValues(15, 70 + step, -2, 2);
      for (double& v : gs) v = Round(dtype, v);
      vm::BlobRef grad = h.Upload(device(), dtype, shape, gs);
      const absl::Status status =
          h.dispatcher->CallInto("sgd", {{param}, {grad}, {rate}}, {{param}}, {}, options);
      ASSERT_TRUE(status.ok()) << status;
      for (int i = 0; i < 15; ++i) ref[i] -= lr * gs[i];
    }
    const std::vector<double> got = h.Download(param);
    const double tol = dtype == DataType::kF32 ? 2e-6 : 1e-14;
    for (int i = 0; i < 15; ++i) EXPECT_NEAR(got[i], ref[i], tol) << "element " << i;
    // Without CallInto it produces a new tensor and leaves Param alone.
    vm::BlobRef ones = h.Upload(device(), dtype, shape, std::vector<double>(15, 1.0));
    vm::BlobRef moved = RunOne("sgd", {{param}, {ones}, {rate}}, {});
    ASSERT_NE(moved, nullptr);
    EXPECT_EQ(h.Download(param), got);
    const std::vector<double> after = h.Download(moved);
    for (int i = 0; i < 15; ++i) EXPECT_NEAR(after[i], got[i] - lr, tol) << "element " << i;
  }
}

// Paddle's adam step in double (see ops/shape_and_optimizer_ops.cc).
struct AdamRef {
  std::vector<double> p, m1, m2;
  double b1p, b2p;
  void Step(const std::vector<double>& g, double lr, double beta1, double beta2, double eps) {
    const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (size_t i = 0; i < p.size(); ++i) {
      m1[i] = beta1 * m1[i] + (1 - beta1) * g[i];
      m2[i] = beta2 * m2[i] + (1 - beta2) * g[i] * g[i];
      p[i] -= lr_t * m1[i] / (std::sqrt(m2[i]) + eps * std::sqrt(1 - b2p));
    }
    b1p *= beta1;
    b2p *= beta2;
  }
};

TEST_P(ShapeAndOptimizerOpsTest, AdamStepsInPlace) {
  struct Config {
    DataType dtype;
    vm::AttrMap attrs;
    double beta1, beta2, eps;
  };
  const std::vector<Config> configs = {
      {DataType::kF64, {}, 0.9, 0.999, 1e-8},
      {DataType::kF32, {}, 0.9, 0.999, 1e-8},
      {DataType::kF64, vm::AttrMap().Set("beta1", 0.5).Set("beta2", 0.75).Set("epsilon", 0.1), 0.5,
       0.75, 0.1},
      {DataType::kF32, vm::AttrMap().Set("beta1", 0.5).Set("beta2", 0.75).Set("epsilon", 0.1), 0.5,
       0.75, 0.1},
  };
  for (const Config& c : configs) {
    const DataType dtype = c.dtype;
    SCOPED_TRACE(absl::StrCat(DataTypeName(dtype), " ", c.attrs.ToString()));
    const Shape shape({4, 6});
    const int64_t n = 24;
    AdamRef ref;
    ref.p = RandomValues(n, 80);
    ref.m1 = RandomValues(n, 81, -0.1, 0.1);
    ref.m2 = RandomValues(n, 82, 0.0, 0.1);
    for (auto* v : {&ref.p, &ref.m1, &ref.m2}) {
      for (double& x : *v) x = Round(dtype, x);
    }
    ref.b1p = Round(dtype, c.beta1);
    ref.b2p = Round(dtype, c.beta2);
    const double lr = Round(dtype, 0.01);
    vm::BlobRef p = h.Upload(device(), dtype, shape, ref.p);
    vm::BlobRef m1 = h.Upload(device(), dtype, shape, ref.m1);
    vm::BlobRef m2 = h.Upload(device(), dtype, shape, ref.m2);
    vm::BlobRef b1p = h.Upload(device(), dtype, Shape({1}), {ref.b1p});
    vm::BlobRef b2p = h.Upload(device(), dtype, Shape(), {ref.b2p});
    vm::BlobRef rate = h.Upload(device(), dtype, Shape({1}), {lr});
    DispatchOptions options;
    options.default_device = device();
    for (int step = 0; step < 5; ++step) {
      std::vector<double> gs = RandomValues(n, 90 + step, -1, 1);
      for (double& v : gs) v = Round(dtype, v);
      vm::BlobRef grad = h.Upload(device(), dtype, shape, gs);
      const absl::Status status =
          h.dispatcher->CallInto("adam", {{p}, {grad}, {rate}, {m1}, {m2}, {b1p}, {b2p}},
                                 {{p}, {m1}, {m2}, {b1p}, {b2p}}, c.attrs, options);
      ASSERT_TRUE(status.ok()) << status;
      ref.Step(gs, lr, c.beta1, c.beta2, c.eps);
    }
    const double tol = dtype == DataType::kF32 ? 1e-5 : 1e-12;
    auto expect_near = [&](const vm::BlobRef& blob, const std::vector<double>& want,
                           absl::string_view what) {
      const std::vector<double> got = h.Download(blob);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
            << what << " element " << i;
      }
    };
    expect_near(p, ref.p, "ParamOut");
    expect_near(m1, ref.m1, "Moment1Out");
    expect_near(m2, ref.m2, "Moment2Out");
    expect_near(b1p, {ref.b1p}, "Beta1PowOut");
    expect_near(b2p, {ref.b2p}, "Beta2PowOut");
  }
}

TEST_P(ShapeAndOptimizerOpsTest, Gradients) {
  auto input = [](const Ints& dims, uint64_t seed) {
    return GradInput{Shape(dims), RandomValues(Count(dims), seed)};
  };
  ExpectGradientsMatch(h, "reshape", {{input({2, 3, 4}, 1)}}, ShapeAttr({0, -1}), device());
  ExpectGradientsMatch(h, "reshape", {{input({3, 4}, 2)}}, ShapeAttr({2, -1, 3}), device());
  ExpectGradientsMatch(h, "transpose", {{input({2, 3, 4}, 3)}}, PermAttr({2, 0, 1}), device());
  ExpectGradientsMatch(h, "transpose", {{input({3, 5}, 4)}}, PermAttr({1, 0}), device());
  ExpectGradientsMatch(h, "concat",
                       {{input({2, 1, 3}, 5), input({2, 2, 3}, 6), input({2, 0, 3}, 7)}},
                       AxisAttr(1), device());
  ExpectGradientsMatch(h, "concat", {{input({2, 3}, 8), input({1, 3}, 9)}}, AxisAttr(-2), device());
  ExpectGradientsMatch(h, "split", {{input({4, 3}, 10)}},
                       vm::AttrMap().Set("sections", Ints{1, -1}), device());
  ExpectGradientsMatch(h, "split", {{input({2, 6}, 11)}},
                       vm::AttrMap().Set("num", int64_t{3}).Set("axis", int64_t{-1}), device());
}

INSTANTIATE_TEST_SUITE_P(Devices, ShapeAndOptimizerOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

TEST(ShapeAndOptimizerSchemaTest, FlagsAndGradMakers) {
  OpsHarness h;
  for (const char* op : {"reshape", "transpose", "concat", "split"}) {
    const OpSchema* schema = h.registry.FindSchema(op).value();
    EXPECT_TRUE(schema->has_grad()) << op;
    EXPECT_FALSE(schema->has_flag(kOpSideEffects)) << op;
  }
  for (const char* op : {"sgd", "adam"}) {
    const OpSchema* schema = h.registry.FindSchema(op).value();
    EXPECT_FALSE(schema->has_grad()) << op;
    EXPECT_TRUE(schema->has_flag(kOpSideEffects)) << op;
  }
  // transpose's grad is the inverse permutation.
  const vm::AttrMap attrs = PermAttr({2, 0, 3, 1});
  const GradContext g({{"X", {"x"}}}, {{"Out", {"y"}}}, &attrs);
  const std::vector<GradOpDesc> ops = h.registry.FindSchema("transpose").value()->grad_maker()(g);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, "transpose");
  EXPECT_EQ(ops[0].attrs.GetInts("perm").value(), Ints({1, 3, 0, 2}));
}

TEST(ShapeAndOptimizerErrorTest, BadShapesAndAttrsAreRejectedBeforeEnqueue) {
  OpsHarness h;
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 1));
  vm::BlobRef b = h.Upload(kCpu, DataType::kF32, Shape({3, 2}), RandomValues(6, 2));
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  vm::BlobRef e = h.Upload(kCpu, DataType::kF32, Shape({0, 4}), {});
  vm::BlobRef s = h.Upload(kCpu, DataType::kF32, Shape(), {1});
  vm::BlobRef lr = h.Upload(kCpu, DataType::kF32, Shape({1}), {0.1});
  vm::BlobRef lr2 = h.Upload(kCpu, DataType::kF32, Shape({2}), {0.1, 0.1});
  vm::BlobRef lr64 = h.Upload(kCpu, DataType::kF64, Shape({1}), {0.1});
  vm::BlobRef pi = h.Upload(kCpu, DataType::kI32, Shape({1}), {1});
  const int64_t uploads = h.vm->stats().instructions;

  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    const char* message;
  };
  const vm::AttrMap no_attrs;
  const std::vector<Case> cases = {
      {"reshape", {{a}}, no_attrs, "required attribute 'shape'"},
      {"reshape",
       {{a}},
       ShapeAttr({4, 2}),
       "cannot reshape X f32[2, 3] (6 elements) to [4, 2] (8 elements"},
      {"reshape", {{a}}, ShapeAttr({-1, -1}), "shape [-1, -1] for X f32[2, 3]: more than one -1"},
      {"reshape", {{a}}, ShapeAttr({0, 0, 0}), "dim 2 is 0 (copy X's dim 2) but X has rank 2"},
      {"reshape", {{a}}, ShapeAttr({4, -1}), "X has 6 elements, not a multiple of"},
      {"reshape", {{a}}, ShapeAttr({2, -3}), "dim 1 is -3"},
      {"reshape", {{e}}, ShapeAttr({0, -1}), "cannot infer the -1"},
      {"reshape_grad", {{a}, {e}}, no_attrs, "OutGrad f32[2, 3] and X f32[0, 4]"},
      {"transpose",
       {{a}},
       PermAttr({0, 0}),
       "attribute perm [0, 0] is not a permutation of 0..1 for X f32[2, 3] of rank 2"},
      {"transpose", {{a}}, PermAttr({1, 0, 2}), "perm [1, 0, 2] is not a permutation of 0..1"},
      {"transpose", {{a}}, PermAttr({0, 2}), "perm [0, 2] is not a permutation"},
      {"transpose", {{a}}, PermAttr({-1, 0}), "perm [-1, 0] is not a permutation"},
      {"concat",
       {{a, a, b}},
       no_attrs,
       "input X[2] is f32[3, 2] but X[0] is f32[2, 3]; concat inputs agree"},
      {"concat", {{a, i}}, AxisAttr(1), "input X[1] is i32[2, 3] but X[0] is f32[2, 3]"},
      {"concat", {{a, b}}, AxisAttr(2), "attribute axis 2 is out of range for X[0] f32[2, 3]"},
      {"concat", {{s, s}}, no_attrs, "X[0] is f32[], a scalar"},
      {"concat", {{}}, no_attrs, "takes one or more tensors, got 0"},
      {"concat_grad",
       {{b}, {a, a}},
       no_attrs,
       "OutGrad is f32[3, 2] but the concat of X is f32[4, 3]"},
      {"split",
       {{a}},
       vm::AttrMap().Set("num", int64_t{2}).Set("sections", Ints{1, -1}),
       "exactly one of attributes num and sections must be set; got num 2 and sections [1, -1]"},
      {"split", {{a}}, no_attrs, "got num 0 and sections []"},
      {"split",
       {{a}},
       vm::AttrMap().Set("num", int64_t{4}),
       "cannot split X f32[2, 3] along axis 0 (size 2) into num 4 equal parts"},
      {"split",
       {{a}},
       vm::AttrMap().Set("sections", Ints{1, 1}).Set("axis", int64_t{-1}),
       "along axis 1 (size 3) into sections [1, 1] (they sum to 2)"},
      {"split",
       {{a}},
       vm::AttrMap().Set("sections", Ints{-1, -1}).Set("axis", int64_t{1}),
       "sections [-1, -1]: sizes are >= 0 with one -1 at most"},
      {"split",
       {{a}},
       vm::AttrMap().Set("sections", Ints{2, 2, -1}).Set("axis", int64_t{1}),
       "into sections [2, 2, -1] (they sum to 4)"},
      {"sgd",
       {{a}, {a}, {lr2}},
       no_attrs,
       "LearningRate is f32[2]; it must be f32[1] or a f32 scalar"},
      {"sgd", {{a}, {a}, {lr64}}, no_attrs, "LearningRate is f64[1]; it must be f32[1]"},
      {"sgd", {{a}, {b}, {lr}}, no_attrs, "Grad is f32[3, 2] but Param is f32[2, 3]"},
      {"sgd", {{i}, {i}, {pi}}, no_attrs, "Param is i32[2, 3]; it must be f32 or f64"},
      {"adam",
       {{a}, {a}, {lr}, {a}, {a}, {lr2}, {lr}},
       no_attrs,
       "Beta1Pow is f32[2]; it must be f32[1] or a f32 scalar"},
      {"adam", {{a}, {a}, {lr}, {a}, {b}, {lr}, {lr}}, no_attrs, "Moment2 is f32[3, 2] but Param"},
      {"adam",
       {{a}, {a}, {lr64}, {a}, {a}, {lr}, {lr}},
       no_attrs,
       "LearningRate is f64[1]; it must be f32[1]"},
      {"adam",
       {{a}, {a}, {lr}, {a}, {a}, {lr}, {lr}},
       vm::AttrMap().Set("beta1", 1.5),
       "attribute beta1 is 1.5; it must be in [0, 1)"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs, c.attrs);
    ASSERT_FALSE(out.ok()) << c.op << ": " << c.message;
    EXPECT_THAT(out.status().message(), HasSubstr(absl::StrCat("op '", c.op, "'"))) << c.message;
    EXPECT_THAT(out.status().message(), HasSubstr(c.message)) << c.op;
  }
  // A caller that expects a different number of split outputs.
  DispatchOptions options;
  options.default_device = kCpu;
  options.output_counts = {3};
  absl::StatusOr<SlotBlobs> split =
      h.dispatcher->Call("split", {{a}}, vm::AttrMap().Set("num", int64_t{2}), options);
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("gives 2 outputs, the caller expects 3"));
  // sgd into an output of another shape.
  const absl::Status into = h.dispatcher->CallInto("sgd", {{a}, {a}, {lr}}, {{b}}, {});
  EXPECT_THAT(into.message(), HasSubstr("output 'ParamOut'"));
  EXPECT_EQ(h.vm->stats().instructions, uploads) << "a rejected call enqueued work";
}

}  // namespace
}  // namespace sluice::ops::shape_and_optimizer_ops_test
