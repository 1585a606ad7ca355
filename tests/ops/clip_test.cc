// clip and clip_grad (ops/elementwise_ops.cc) on cpu and sim: values inside, below and above
// the bounds, NaN in X stays NaN, infinities go to the bounds, min == max, in place; i32 and
// i64 with negative values and bounds rounded inwards and saturated; the gradient at the
// bounds, outside them and at NaN; refused attributes and dtypes. Expected values come from
// a reference written here (or spelled out), not from the kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::clip_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// NumPy's clip for lo <= hi: NaN stays NaN, else x moved into [lo, hi].
double ReferenceClip(double x, double lo, double hi) {
  if (std::isnan(x)) return kNan;
  if (x < lo) return lo;
  if (x > hi) return hi;
  return x;
}

// Element i of `got` equals `want` (NaN where `want` is NaN).
void ExpectSameValues(const std::vector<double>& got, const std::vector<double>& want,
                      absl::string_view what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": got " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
}

vm::AttrMap Bounds(double lo, double hi) {
  vm::AttrMap attrs;
  attrs.Set("min", lo).Set("max", hi);
  return attrs;
}

class ClipTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const std::vector<double>& values) {
    return h.Upload(device(), dtype, Shape({static_cast<int64_t>(values.size())}), values);
  }
  absl::StatusOr<std::vector<double>> Clip(DataType dtype, const std::vector<double>& x, double lo,
                                           double hi) {
    SLUICE_ASSIGN_OR_RETURN(SlotBlobs out,
                            h.Run("clip", {{Upload(dtype, x)}}, Bounds(lo, hi), device()));
    EXPECT_EQ(out[0][0]->dtype(), dtype);
    EXPECT_EQ(out[0][0]->shape(), Shape({static_cast<int64_t>(x.size())}));
    return h.Download(out[0][0]);
  }
  absl::StatusOr<std::vector<double>> ClipGrad(DataType dtype, const std::vector<double>& x,
                                               const std::vector<double>& g, double lo, double hi) {
    SLUICE_ASSIGN_OR_RETURN(
        SlotBlobs out,
        h.Run("clip_grad", {{Upload(dtype, x)}, {Upload(dtype, g)}}, Bounds(lo, hi), device()));
    return h.Download(out[0][0]);
  }

  OpsHarness h;
};

TEST_P(ClipTest, ValuesInsideBelowAndAboveTheBounds) {
  const std::vector<double> x = {-3, -1.5, -1, 0, 0.25, 2, 2.5, 7, -0.0};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = ReferenceClip(x[i], -1, 2);
    absl::StatusOr<std::vector<double>> got = Clip(dtype, x, -1, 2);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, want, "clip(x, -1, 2)");
    // The reference spelled out once.
    EXPECT_EQ(want, std::vector<double>({-1, -1, -1, 0, 0.25, 2, 2, 2, 0}));
  }
}

TEST_P(ClipTest, NanStaysNanAndInfinitiesGoToTheBounds) {
  const std::vector<double> x = {kNan, kInf, -kInf, 1, kNan, -kNan};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    absl::StatusOr<std::vector<double>> got = Clip(dtype, x, -2, 3);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, {kNan, 3, -2, 1, kNan, kNan}, "finite bounds");
    // Infinite bounds clip nothing but keep NaN NaN.
    got = Clip(dtype, x, -kInf, kInf);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, x, "infinite bounds");
    // One-sided: a ReLU-like clip at 0.
    got = Clip(dtype, {-5, kNan, 5, -kInf}, 0, kInf);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, {0, kNan, 5, 0}, "[0, inf]");
  }
}

TEST_P(ClipTest, EqualBoundsGiveThatValueExceptForNan) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    absl::StatusOr<std::vector<double>> got = Clip(dtype, {-4, 0.5, 9, kNan, kInf}, 0.5, 0.5);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameValues(*got, {0.5, 0.5, 0.5, kNan, 0.5}, "clip(x, 0.5, 0.5)");
  }
}

// Out written into X's tensor.
TEST_P(ClipTest, InPlace) {
  for (DataType dtype : {DataType::kF32, DataType::kF64, DataType::kI32}) {
    SCOPED_TRACE(DataTypeName(dtype));
    vm::BlobRef x = Upload(dtype, {-9, -1, 4, 12});
    const absl::Status status = h.dispatcher->CallInto("clip", {{x}}, {{x}}, Bounds(-2, 10));
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(h.Download(x), std::vector<double>({-2, -1, 4, 10}));
  }
}

// Integers: negative values, fractional bounds rounded inwards (min up, max down), bounds
// past the dtype's range saturated, infinite bounds as no bound.
TEST_P(ClipTest, IntegersRoundTheBoundsInwards) {
  for (DataType dtype : {DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double lowest = dtype == DataType::kI32 ? -2147483648.0 : -0x1p63;
    const double top = dtype == DataType::kI32 ? 2147483647.0 : 0x1p62;
    const std::vector<double> x = {-100, -7, -3, -2, 0, 3, 4, 100, lowest, top};
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = ReferenceClip(x[i], -3, 4);
    // [-3.5, 4.9] holds the integers -3..4.
    absl::StatusOr<std::vector<double>> got = Clip(dtype, x, -3.5, 4.9);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
    EXPECT_EQ(want, std::vector<double>({-3, -3, -3, -2, 0, 3, 4, 4, -3, 4}));
    // Negative bounds only.
    got = Clip(dtype, {-10, -6, -5, 0}, -7, -5.5);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, std::vector<double>({-7, -6, -6, -6}));
    // Infinite bounds and bounds far past the dtype's range leave every value alone.
    for (const auto& [lo, hi] : {std::pair<double, double>{-kInf, kInf}, {-1e300, 1e300}}) {
      got = Clip(dtype, x, lo, hi);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, x) << "[" << lo << ", " << hi << "]";
    }
    // Equal integral bounds.
    got = Clip(dtype, {-1, 2, 5}, 2, 2);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, std::vector<double>({2, 2, 2}));
  }
}

// XGrad is OutGrad where Out was X itself: inside the bounds, on them (a tie goes to X, as
// in max and min), and where X is NaN; 0 where X was clipped, infinities included.
TEST_P(ClipTest, GradPassesInsideOnTheBoundsAndAtNan) {
  const std::vector<double> x = {-5, -1, 0, 2, 3, kNan, kInf, -kInf};
  const std::vector<double> g = {1, 2, 4, 8, 16, 32, 64, 128};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const bool returned_x = std::isnan(x[i]) || (-1 <= x[i] && x[i] <= 2);
      want[i] = returned_x ? g[i] : 0;
    }
    EXPECT_EQ(want, std::vector<double>({0, 2, 4, 8, 0, 32, 0, 0}));
    absl::StatusOr<std::vector<double>> got = ClipGrad(dtype, x, g, -1, 2);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want);
    // min == max: only X equal to it (and NaN) gets the gradient.
    got = ClipGrad(dtype, {0, 1, 2, kNan}, {1, 2, 4, 8}, 1, 1);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, std::vector<double>({0, 2, 0, 8}));
  }
}

// The grad maker's clip_grad against central differences, away from the bounds (where the
// function has kinks).
TEST_P(ClipTest, GradMatchesFiniteDifferences) {
  ExpectGradientsMatch(h, "clip", {{GradInput{Shape({2, 3}), {-3, -0.5, 0.1, 0.7, 1.9, 4}}}},
                       Bounds(-1, 1.5), device());
}

TEST_P(ClipTest, GradMakerPassesTheBounds) {
  const OpSchema* schema = h.registry.FindSchema("clip").value();
  ASSERT_TRUE(schema->has_grad());
  const vm::AttrMap attrs = Bounds(-0.25, 8);
  const GradContext ctx({{"X", {"x"}}}, {{"Out", {"out"}}}, &attrs);
  const std::vector<GradOpDesc> ops = schema->grad_maker()(ctx);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].type, "clip_grad");
  EXPECT_EQ(ops[0].attrs.GetFloat("min").value(), -0.25);
  EXPECT_EQ(ops[0].attrs.GetFloat("max").value(), 8);
}

INSTANTIATE_TEST_SUITE_P(Devices, ClipTest, ::testing::Values(kCpu, kSim0), [](const auto& info) {
  return std::string(DeviceTypeName(info.param.type()));
});

// min > max (NumPy would answer max everywhere) and NaN bounds are refused, naming both
// attributes; so are integer bounds with no integer between them, missing bounds, bool X,
// and an integer clip_grad.
TEST(ClipAttrTest, BadBoundsAndDtypesAreRefused) {
  OpsHarness h;
  vm::BlobRef f32 = h.Upload(kCpu, DataType::kF32, Shape({2}), {1, -2});
  vm::BlobRef i32 = h.Upload(kCpu, DataType::kI32, Shape({2}), {1, -2});
  vm::BlobRef b = h.Upload(kCpu, DataType::kBool, Shape({2}), {1, 0});

  absl::StatusOr<SlotBlobs> out = h.Run("clip", {{f32}}, Bounds(3, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("op 'clip'"));
  EXPECT_THAT(out.status().message(), HasSubstr("'min' (3)"));
  EXPECT_THAT(out.status().message(), HasSubstr("'max' (1)"));
  EXPECT_THAT(out.status().message(), HasSubstr("'min' is greater than 'max'"));

  out = h.Run("clip_grad", {{f32}, {f32}}, Bounds(3, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("'min' is greater than 'max'"));

  for (const auto& [lo, hi] : {std::pair<double, double>{kNan, 1}, {0, kNan}}) {
    out = h.Run("clip", {{f32}}, Bounds(lo, hi));
    ASSERT_FALSE(out.ok()) << lo << ", " << hi;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("a bound is NaN"));
  }

  // Fine for floats, empty for integers.
  EXPECT_TRUE(h.Run("clip", {{f32}}, Bounds(0.2, 0.8)).ok());
  out = h.Run("clip", {{i32}}, Bounds(0.2, 0.8));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("no i32 value lies between them"));

  vm::AttrMap only_min;
  only_min.Set("min", 0.0);
  out = h.Run("clip", {{f32}}, only_min);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("max"));

  out = h.Run("clip", {{b}}, Bounds(0, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("it must be f32, f64, i32 or i64"));

  out = h.Run("clip_grad", {{i32}, {i32}}, Bounds(0, 1));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("it must be f32 or f64"));
}

}  // namespace
}  // namespace sluice::ops::clip_test
