// The index op family (ops/index_ops.cc, ops/cpu/index_kernels.cc) on cpu and sim against
// plain loops in the test: gather (every axis, negative indices, i32 and i64 indices of rank 0
// to 2, every dtype), slice (random starts, ends and steps of both signs past the bounds,
// default and negative axes), where (broadcasting over all three operands), erf (special
// values), and the grad ops' kernels (gather_grad summing repeated indices, slice_grad,
// where_grad over broadcast dims, erf_grad); shapes and values from fixed seeds. Then the
// errors: refused before enqueue naming the operand, and gather's out-of-range index at sync.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::index_ops_test {
namespace {

using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;
using Ints = std::vector<int64_t>;

constexpr DataType kAllDtypes[] = {DataType::kF32, DataType::kF64, DataType::kI32, DataType::kI64,
                                   DataType::kBool};

// Values that survive the upload to `dtype` unchanged.
std::vector<double> ValuesFor(DataType dtype, int64_t n, uint64_t seed) {
  std::vector<double> v = RandomValues(n, seed, -4, 4);
  for (double& x : v) {
    if (dtype == DataType::kF32) x = static_cast<float>(x);
    if (dtype == DataType::kI32 || dtype == DataType::kI64) x = std::round(x * 10);
    if (dtype == DataType::kBool) x = x > 0 ? 1 : 0;
  }
  return v;
}

Ints Unravel(int64_t i, const Shape& s) {
  Ints idx(s.rank());
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[d] = i % s.dim(d);
    i /= s.dim(d);
  }
  return idx;
}

int64_t Ravel(const Ints& idx, const Shape& s) {
  int64_t i = 0;
  for (int d = 0; d < s.rank(); ++d) i = i * s.dim(d) + idx[d];
  return i;
}

// The element of `from` (broadcast to `to`) read at `to`'s multi-index.
int64_t BroadcastSource(const Ints& idx, const Shape& from, const Shape& to) {
  int64_t i = 0;
  const int lead = to.rank() - from.rank();
  for (int d = 0; d < from.rank(); ++d)
    i = i * from.dim(d) + (from.dim(d) == 1 ? 0 : idx[lead + d]);
  return i;
}

Shape RandomShape(std::mt19937_64& rng, int min_rank, int max_rank, int64_t max_dim) {
  const int rank = std::uniform_int_distribution<int>(min_rank, max_rank)(rng);
  Shape::Dims dims;
  for (int d = 0; d < rank; ++d)
    dims.push_back(std::uniform_int_distribution<int64_t>(1, max_dim)(rng));
  return Shape(absl::MakeConstSpan(dims));
}

class IndexOpsTest : public ::testing::TestWithParam<Device> {
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

  OpsHarness h;
};

// ---- gather ----

// Out = X.shape[:axis] + Index.shape + X.shape[axis+1:], straight from the definition.
std::vector<double> RefGather(const std::vector<double>& x, const Shape& xs,
                              const std::vector<double>& index, const Shape& is, int axis,
                              Shape* out_shape) {
  Shape::Dims dims(xs.dims().begin(), xs.dims().begin() + axis);
  dims.insert(dims.end(), is.dims().begin(), is.dims().end());
  dims.insert(dims.end(), xs.dims().begin() + axis + 1, xs.dims().end());
  *out_shape = Shape(absl::MakeConstSpan(dims));
  std::vector<double> out(out_shape->NumElements());
  for (int64_t j = 0; j < out_shape->NumElements(); ++j) {
    const Ints o = Unravel(j, *out_shape);
    Ints src(o.begin(), o.begin() + axis);
    const Ints k(o.begin() + axis, o.begin() + axis + is.rank());
    int64_t v = static_cast<int64_t>(index[Ravel(k, is)]);
    if (v < 0) v += xs.dim(axis);
    src.push_back(v);
    src.insert(src.end(), o.begin() + axis + is.rank(), o.end());
    out[j] = x[Ravel(src, xs)];
  }
  return out;
}

TEST_P(IndexOpsTest, GatherMatchesTheLoopsForEveryAxisAndDtype) {
  std::mt19937_64 rng(20260301);
  int cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const DataType dtype = kAllDtypes[trial % 5];
    const DataType index_dtype = trial % 2 == 0 ? DataType::kI64 : DataType::kI32;
    const Shape xs = RandomShape(rng, 1, 4, 4);
    const Shape is = RandomShape(rng, 0, 2, 3);
    const int axis = std::uniform_int_distribution<int>(0, xs.rank() - 1)(rng);
    const int64_t size = xs.dim(axis);
    std::vector<double> index(is.NumElements());
    for (double& v : index) v = std::uniform_int_distribution<int64_t>(-size, size - 1)(rng);
    const std::vector<double> x = ValuesFor(dtype, xs.NumElements(), trial);
    // The attribute as given: negative half the time.
    const int64_t axis_attr = trial % 3 == 0 ? axis - xs.rank() : axis;
    const std::string what =
        absl::StrCat(DataTypeName(dtype), " X", xs.ToString(), " Index", is.ToString(), " axis ",
                     axis_attr, " indices [", absl::StrJoin(index, ", "), "]");
    SlotBlobs out = Run("gather", {{Upload(dtype, xs, x)}, {Upload(index_dtype, is, index)}},
                        vm::AttrMap().Set("axis", axis_attr));
    ASSERT_EQ(out.size(), 1u) << what;
    Shape want_shape;
    const std::vector<double> want = RefGather(x, xs, index, is, axis, &want_shape);
    EXPECT_EQ(out[0][0]->shape(), want_shape) << what;
    EXPECT_EQ(out[0][0]->dtype(), dtype) << what;
    EXPECT_EQ(h.Download(out[0][0]), want) << what;
    ++cases;
  }
  EXPECT_EQ(cases, 40);
}

TEST_P(IndexOpsTest, GatherGradSumsRepeatedIndicesInOrder) {
  // X [3, 4] along axis 0 with Index [[2, -1], [0, 2]]: row 2 is named three times.
  const Shape xs({3, 4});
  const Shape is({2, 2});
  const std::vector<double> index = {2, -1, 0, 2};
  const Shape gs({2, 2, 4});
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const std::vector<double> g = ValuesFor(dtype, gs.NumElements(), 7);
    SlotBlobs out = Run("gather_grad",
                        {{Upload(dtype, xs, std::vector<double>(12, 0.0))},
                         {Upload(DataType::kI64, is, index)},
                         {Upload(dtype, gs, g)}},
                        vm::AttrMap().Set("axis", int64_t{0}));
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> want(12, 0.0);
    for (int k = 0; k < 4; ++k) {
      const int64_t row = static_cast<int64_t>(index[k]) < 0 ? 3 + index[k] : index[k];
      for (int i = 0; i < 4; ++i) {
        want[row * 4 + i] = dtype == DataType::kF32
                                ? static_cast<float>(want[row * 4 + i] + g[k * 4 + i])
                                : want[row * 4 + i] + g[k * 4 + i];
      }
    }
    EXPECT_EQ(h.Download(out[0][0]), want) << DataTypeName(dtype);
  }
}

TEST_P(IndexOpsTest, GatherIndexOutOfRangeFailsAtSyncNamingIt) {
  vm::BlobRef x = Upload(DataType::kF32, {5, 2}, RandomValues(10, 1));
  for (double bad : {5.0, -6.0}) {
    for (const char* op : {"gather", "gather_grad"}) {
      vm::BlobRef index = Upload(DataType::kI32, {3}, {0, bad, 4});
      SlotBlobs inputs = {{x}, {index}};
      if (std::string(op) == "gather_grad") {
        inputs.push_back({Upload(DataType::kF32, {3, 2}, RandomValues(6, 2))});
      }
      absl::StatusOr<SlotBlobs> out = h.Run(op, inputs, {}, device());
      ASSERT_TRUE(out.ok()) << "the range check is the kernel's, at run time: " << out.status();
      const absl::Status synced = h.vm->Sync();
      EXPECT_EQ(synced.code(), absl::StatusCode::kInvalidArgument) << synced;
      EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("op '", op, "'")));
      EXPECT_THAT(synced.message(), HasSubstr(absl::StrCat("Index[1] = ", bad)));
      EXPECT_THAT(synced.message(), HasSubstr("out of range [-5, 5) for axis 0 of X"));
    }
  }
  // The harness still works afterwards.
  SlotBlobs out = Run("gather", {{x}, {Upload(DataType::kI64, {}, {-5})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0]->shape(), Shape({2}));
  EXPECT_TRUE(h.vm->Sync().ok());
}

// ---- slice ----

// The positions one axis of size `dim` keeps, by ONNX's rules, walked one step at a time.
Ints RefSliceAxis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, std::max<int64_t>(dim - 1, 0));
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  Ints kept;
  for (int64_t i = start; dim > 0 && (step > 0 ? i < end : i > end); i += step) kept.push_back(i);
  return kept;
}

TEST_P(IndexOpsTest, SliceMatchesTheLoops) {
  std::mt19937_64 rng(20260302);
  std::uniform_int_distribution<int64_t> bound(-7, 7);
  for (int trial = 0; trial < 40; ++trial) {
    const DataType dtype = kAllDtypes[trial % 5];
    const Shape xs = RandomShape(rng, 1, 4, 5);
    const int rank = xs.rank();
    // A random subset of the axes in a random order, named negative half the time.
    Ints order(rank);
    for (int d = 0; d < rank; ++d) order[d] = d;
    std::shuffle(order.begin(), order.end(), rng);
    const int n = std::uniform_int_distribution<int>(1, rank)(rng);
    const bool default_axes = trial % 4 == 0;
    Ints starts, ends, axes, steps;
    for (int i = 0; i < n; ++i) {
      const int64_t axis = default_axes ? i : order[i];
      axes.push_back(trial % 2 == 0 ? axis - rank : axis);
      starts.push_back(bound(rng));
      ends.push_back(trial % 7 == 0 ? std::numeric_limits<int64_t>::max() : bound(rng));
      int64_t step = std::uniform_int_distribution<int64_t>(1, 3)(rng);
      steps.push_back(trial % 3 == 0 ? -step : step);
    }
    vm::AttrMap attrs = vm::AttrMap().Set("starts", starts).Set("ends", ends);
    if (!default_axes) attrs.Set("axes", axes);
    if (trial % 5 != 1) attrs.Set("steps", steps);
    // Per axis of X: the positions read.
    std::vector<Ints> kept(rank);
    for (int d = 0; d < rank; ++d) {
      for (int64_t i = 0; i < xs.dim(d); ++i) kept[d].push_back(i);
    }
    for (int i = 0; i < n; ++i) {
      const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
      kept[axis] = RefSliceAxis(xs.dim(axis), starts[i], ends[i], trial % 5 != 1 ? steps[i] : 1);
    }
    Shape::Dims dims;
    for (const Ints& k : kept) dims.push_back(static_cast<int64_t>(k.size()));
    const Shape want_shape(absl::MakeConstSpan(dims));
    const std::vector<double> x = ValuesFor(dtype, xs.NumElements(), trial + 100);
    std::vector<double> want(want_shape.NumElements());
    for (int64_t j = 0; j < want_shape.NumElements(); ++j) {
      Ints idx = Unravel(j, want_shape);
      for (int d = 0; d < rank; ++d) idx[d] = kept[d][idx[d]];
      want[j] = x[Ravel(idx, xs)];
    }
    const std::string what =
        absl::StrCat(DataTypeName(dtype), " X", xs.ToString(), " starts [",
                     absl::StrJoin(starts, ", "), "] ends [", absl::StrJoin(ends, ", "), "] axes [",
                     absl::StrJoin(axes, ", "), "] steps [", absl::StrJoin(steps, ", "), "]");
    SlotBlobs out = Run("slice", {{Upload(dtype, xs, x)}}, attrs);
    ASSERT_EQ(out.size(), 1u) << what;
    EXPECT_EQ(out[0][0]->shape(), want_shape) << what;
    EXPECT_EQ(h.Download(out[0][0]), want) << what;

    // slice_grad: OutGrad back in place, zeros elsewhere.
    if (dtype != DataType::kF64) continue;
    const std::vector<double> g = ValuesFor(dtype, want_shape.NumElements(), trial + 200);
    SlotBlobs grad =
        Run("slice_grad", {{Upload(dtype, xs, x)}, {Upload(dtype, want_shape, g)}}, attrs);
    ASSERT_EQ(grad.size(), 1u) << what;
    std::vector<double> want_grad(xs.NumElements(), 0.0);
    for (int64_t j = 0; j < want_shape.NumElements(); ++j) {
      Ints idx = Unravel(j, want_shape);
      for (int d = 0; d < rank; ++d) idx[d] = kept[d][idx[d]];
      want_grad[Ravel(idx, xs)] = g[j];
    }
    EXPECT_EQ(h.Download(grad[0][0]), want_grad) << what << " (slice_grad)";
  }
}

TEST_P(IndexOpsTest, SliceOfTheWholeRangeBackwardReverses) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  SlotBlobs out = Run("slice", {{Upload(DataType::kF32, {2, 3}, x)}},
                      vm::AttrMap()
                          .Set("starts", Ints{-1})
                          .Set("ends", Ints{std::numeric_limits<int64_t>::min()})
                          .Set("axes", Ints{-1})
                          .Set("steps", Ints{-1}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0][0]->shape(), Shape({2, 3}));
  EXPECT_EQ(h.Download(out[0][0]), (std::vector<double>{3, 2, 1, 6, 5, 4}));
}

// ---- where ----

TEST_P(IndexOpsTest, WhereBroadcastsAllThreeOperands) {
  std::mt19937_64 rng(20260303);
  for (int trial = 0; trial < 40; ++trial) {
    const DataType dtype = kAllDtypes[trial % 5];
    // A broadcast shape, then each operand a suffix of it with some dims set to 1.
    const Shape full = RandomShape(rng, 0, 4, 3);
    auto operand = [&]() {
      const int rank = std::uniform_int_distribution<int>(0, full.rank())(rng);
      Shape::Dims dims(full.dims().end() - rank, full.dims().end());
      for (int64_t& d : dims) {
        if (rng() % 3 == 0) d = 1;
      }
      return Shape(absl::MakeConstSpan(dims));
    };
    const Shape cs = operand(), xs = operand(), ys = operand();
    const Shape out_shape = BroadcastShapes(BroadcastShapes(cs, xs).value(), ys).value();
    const std::vector<double> c = ValuesFor(DataType::kBool, cs.NumElements(), trial);
    const std::vector<double> x = ValuesFor(dtype, xs.NumElements(), trial + 1000);
    const std::vector<double> y = ValuesFor(dtype, ys.NumElements(), trial + 2000);
    std::vector<double> want(out_shape.NumElements());
    for (int64_t j = 0; j < out_shape.NumElements(); ++j) {
      const Ints idx = Unravel(j, out_shape);
      want[j] = c[BroadcastSource(idx, cs, out_shape)] != 0
                    ? x[BroadcastSource(idx, xs, out_shape)]
                    : y[BroadcastSource(idx, ys, out_shape)];
    }
    const std::string what = absl::StrCat(DataTypeName(dtype), " Cond", cs.ToString(), " X",
                                          xs.ToString(), " Y", ys.ToString());
    SlotBlobs out =
        Run("where",
            {{Upload(DataType::kBool, cs, c)}, {Upload(dtype, xs, x)}, {Upload(dtype, ys, y)}});
    ASSERT_EQ(out.size(), 1u) << what;
    EXPECT_EQ(out[0][0]->shape(), out_shape) << what;
    EXPECT_EQ(out[0][0]->dtype(), dtype) << what;
    EXPECT_EQ(h.Download(out[0][0]), want) << what;

    // where_grad: OutGrad to X where Cond, to Y where not, summed over broadcast dims.
    if (dtype != DataType::kF64) continue;
    const std::vector<double> g = ValuesFor(dtype, out_shape.NumElements(), trial + 3000);
    std::vector<double> want_x(xs.NumElements(), 0.0), want_y(ys.NumElements(), 0.0);
    for (int64_t j = 0; j < out_shape.NumElements(); ++j) {
      const Ints idx = Unravel(j, out_shape);
      if (c[BroadcastSource(idx, cs, out_shape)] != 0) {
        want_x[BroadcastSource(idx, xs, out_shape)] += g[j];
      } else {
        want_y[BroadcastSource(idx, ys, out_shape)] += g[j];
      }
    }
    SlotBlobs grad = Run("where_grad", {{Upload(dtype, out_shape, g)},
                                        {Upload(DataType::kBool, cs, c)},
                                        {Upload(dtype, xs, x)},
                                        {Upload(dtype, ys, y)}});
    ASSERT_EQ(grad.size(), 2u) << what;
    EXPECT_EQ(h.Download(grad[0][0]), want_x) << what << " XGrad";
    EXPECT_EQ(h.Download(grad[1][0]), want_y) << what << " YGrad";
  }
}

// ---- erf ----

TEST_P(IndexOpsTest, ErfAndItsGradientMatchTheStandardLibrary) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> x = RandomValues(29, 11, -3, 3);
  for (double v : {0.0, -0.0, kInf, -kInf, std::nan(""), 1e-30, 6.0}) x.push_back(v);
  const Shape shape({static_cast<int64_t>(x.size())});
  const std::vector<double> g = RandomValues(x.size(), 12);
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const bool f32 = dtype == DataType::kF32;
    SlotBlobs out = Run("erf", {{Upload(dtype, shape, x)}});
    SlotBlobs grad = Run("erf_grad", {{Upload(dtype, shape, x)}, {Upload(dtype, shape, g)}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(grad.size(), 1u);
    const std::vector<double> got = h.Download(out[0][0]);
    const std::vector<double> got_grad = h.Download(grad[0][0]);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = f32 ? static_cast<float>(x[i]) : x[i];
      const double gv = f32 ? static_cast<float>(g[i]) : g[i];
      const double want = f32 ? std::erf(static_cast<float>(v)) : std::erf(v);
      const double want_grad = 2 / std::sqrt(M_PI) * std::exp(-v * v) * gv;
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(got[i])) << i;
        EXPECT_TRUE(std::isnan(got_grad[i])) << i;
        continue;
      }
      EXPECT_EQ(got[i], want) << DataTypeName(dtype) << " erf(" << v << ")";
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << "erf(" << v << ")";
      EXPECT_NEAR(got_grad[i], want_grad, (f32 ? 1e-6 : 1e-15) * (1 + std::abs(want_grad)))
          << DataTypeName(dtype) << " erf'(" << v << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, IndexOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

// ---- errors ----

TEST(IndexOpsErrorTest, BadOperandsAreRefusedBeforeEnqueueNamingThem) {
  OpsHarness h;
  auto make = [&](DataType dtype, Shape s) {
    return h.Upload(kCpu, dtype, s, ValuesFor(dtype, s.NumElements(), 1));
  };
  vm::BlobRef x = make(DataType::kF32, {2, 3});
  vm::BlobRef x64 = make(DataType::kF64, {2, 3});
  vm::BlobRef xi = make(DataType::kI32, {2, 3});
  vm::BlobRef scalar = make(DataType::kF32, {});
  vm::BlobRef index = h.Upload(kCpu, DataType::kI64, {2}, {0, 1});
  vm::BlobRef findex = make(DataType::kF32, {2});
  vm::BlobRef cond = make(DataType::kBool, {2, 3});
  vm::BlobRef cond4 = make(DataType::kBool, {4});
  vm::BlobRef g = make(DataType::kF32, {2, 2});
  const int64_t uploads = h.vm->stats().instructions;

  struct Case {
    const char* op;
    SlotBlobs inputs;
    vm::AttrMap attrs;
    std::vector<const char*> messages;
  };
  auto slice = [](Ints starts, Ints ends, Ints axes = {}, Ints steps = {}) {
    return vm::AttrMap()
        .Set("starts", std::move(starts))
        .Set("ends", std::move(ends))
        .Set("axes", std::move(axes))
        .Set("steps", std::move(steps));
  };
  const std::vector<Case> cases = {
      {"gather", {{x}, {findex}}, {}, {"op 'gather'", "Index f32[2] must hold i32 or i64"}},
      {"gather",
       {{x}, {index}},
       vm::AttrMap().Set("axis", int64_t{2}),
       {"attribute axis 2 is out of range for X f32[2, 3] of rank 2"}},
      {"gather", {{x}, {index}}, vm::AttrMap().Set("axis", int64_t{-3}), {"attribute axis -3"}},
      {"gather", {{scalar}, {index}}, {}, {"X f32[] is a scalar"}},
      {"gather_grad", {{xi}, {index}, {g}}, {}, {"op 'gather_grad'", "input X is i32[2, 3]"}},
      {"gather_grad",
       {{x}, {index}, {g}},
       {},
       {"input OutGrad is f32[2, 2] but the output of gather is f32[2, 3]"}},
      {"slice", {{x}}, slice({0}, {1}, {}, {0}), {"op 'slice'", "the step of axis 0 is 0"}},
      {"slice", {{x}}, slice({0, 0}, {1, 1}, {1, -1}), {"names axis 1 twice", "X f32[2, 3]"}},
      {"slice", {{x}}, slice({0}, {1, 2}), {"must have one length"}},
      {"slice", {{x}}, slice({0}, {1}, {2}), {"axis 2 is out of range for X f32[2, 3]"}},
      {"slice", {{x}}, vm::AttrMap().Set("starts", Ints{0}), {"op 'slice'", "'ends'"}},
      {"slice_grad", {{x}, {x}}, slice({0}, {1}), {"input OutGrad is f32[2, 3]", "f32[1, 3]"}},
      {"where", {{x}, {x}, {x}}, {}, {"op 'where'", "Cond f32[2, 3] must be bool"}},
      {"where", {{cond}, {x}, {x64}}, {}, {"X f32[2, 3] and Y f64[2, 3] must have one dtype"}},
      {"where", {{cond4}, {x}, {x}}, {}, {"Cond bool[4]", "do not broadcast"}},
      {"where_grad",
       {{g}, {cond}, {x}, {x}},
       {},
       {"op 'where_grad'", "input OutGrad is f32[2, 2] but the output of where is f32[2, 3]"}},
      {"erf", {{xi}}, {}, {"op 'erf'", "input X is i32[2, 3]; it must be f32 or f64"}},
      {"erf_grad", {{x}, {x64}}, {}, {"input OutGrad is f64[2, 3] but input X is f32[2, 3]"}},
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

TEST(IndexOpsErrorTest, SchemasFlagTheElementwiseOpsAndTheirInPlacePairs) {
  OpRegistry registry;
  ASSERT_TRUE(RegisterStandardOps(&registry).ok());
  for (const char* op : {"where", "erf"}) {
    EXPECT_TRUE(registry.FindSchema(op).value()->has_flag(kOpElementwise)) << op;
  }
  for (const char* op : {"gather", "gather_grad", "slice", "slice_grad", "where_grad"}) {
    const OpSchema* schema = registry.FindSchema(op).value();
    EXPECT_FALSE(schema->has_flag(kOpElementwise)) << op;
    EXPECT_FALSE(schema->InPlaceSafe(0, 0)) << op;
  }
  // where's kernels are keyed by Cond's bool; the rest by their float or data dtype.
  EXPECT_TRUE(registry.HasKernel("where", DeviceType::kCpu, DataType::kBool));
  EXPECT_FALSE(registry.HasKernel("where", DeviceType::kCpu, DataType::kF32));
  for (DataType dtype : kAllDtypes) {
    EXPECT_TRUE(registry.HasKernel("gather", DeviceType::kSim, dtype)) << DataTypeName(dtype);
    EXPECT_TRUE(registry.HasKernel("slice", DeviceType::kSim, dtype)) << DataTypeName(dtype);
    EXPECT_EQ(registry.HasKernel("where_grad", DeviceType::kCpu, dtype), IsFloating(dtype));
  }
}

}  // namespace
}  // namespace sluice::ops::index_ops_test
