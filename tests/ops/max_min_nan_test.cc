// NaN and integer semantics of max and min (ops/elementwise_ops.cc) on cpu and sim: a NaN in
// either argument gives NaN whatever the order (as NumPy's maximum/minimum), with and
// without broadcasting and in place; max_grad and min_grad send each element's gradient to
// the argument the forward op returned (X on a tie and where X is NaN, Y where only Y is
// NaN); i32 and i64 max and min with negative values, extremes and broadcasting. Expected
// values come from a reference written here, not from the kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::max_min_nan_test {
namespace {

using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// NumPy's maximum / minimum: NaN if either argument is NaN, else the larger / smaller.
double ReferenceMax(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return kNan;
  return x < y ? y : x;
}
double ReferenceMin(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return kNan;
  return y < x ? y : x;
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

class MaxMinNanTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  // Out of `op` (X, Y), downloaded.
  std::vector<double> RunBinary(const char* op, DataType dtype, const Shape& xs,
                                const std::vector<double>& x, const Shape& ys,
                                const std::vector<double>& y) {
    absl::StatusOr<SlotBlobs> out =
        h.Run(op, {{Upload(dtype, xs, x)}, {Upload(dtype, ys, y)}}, {}, device());
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    EXPECT_EQ((*out)[0][0]->dtype(), dtype);
    return h.Download((*out)[0][0]);
  }

  OpsHarness h;
};

// Every pairing of NaN with a number, an infinity and another NaN, in both orders.
TEST_P(MaxMinNanTest, NanInEitherArgumentPropagates) {
  const Shape shape({10});
  const std::vector<double> x = {kNan, 1, kNan, kNan, -kInf, kInf, kNan, 2, -3, 0};
  const std::vector<double> y = {1, kNan, kNan, -kInf, kNan, kNan, kInf, -3, 2, -0.0};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    std::vector<double> want_max(x.size()), want_min(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      want_max[i] = ReferenceMax(x[i], y[i]);
      want_min[i] = ReferenceMin(x[i], y[i]);
    }
    ExpectSameValues(RunBinary("max", dtype, shape, x, shape, y), want_max, "max(x, y)");
    ExpectSameValues(RunBinary("max", dtype, shape, y, shape, x), want_max, "max(y, x)");
    ExpectSameValues(RunBinary("min", dtype, shape, x, shape, y), want_min, "min(x, y)");
    ExpectSameValues(RunBinary("min", dtype, shape, y, shape, x), want_min, "min(y, x)");
  }
}

// A broadcast NaN scalar, a NaN in a broadcast row, and a NaN in the full operand: the
// broadcast loops (a constant operand, rows of the collapsed output) propagate as well.
TEST_P(MaxMinNanTest, NanPropagatesThroughBroadcasting) {
  const Shape full({2, 3});
  const std::vector<double> a = {1, -2, kNan, 4, 5, -6};
  const std::vector<double> row = {kNan, 0, 3};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    for (const char* op : {"max", "min"}) {
      SCOPED_TRACE(op);
      auto ref = std::string(op) == "max" ? ReferenceMax : ReferenceMin;
      // Scalar NaN on either side: every element is NaN.
      const std::vector<double> all_nan(6, kNan);
      ExpectSameValues(RunBinary(op, dtype, full, a, Shape(), {kNan}), all_nan, "a, NaN");
      ExpectSameValues(RunBinary(op, dtype, Shape(), {kNan}, full, a), all_nan, "NaN, a");
      // A finite scalar: NaN only where a has one.
      std::vector<double> want(6);
      for (int i = 0; i < 6; ++i) want[i] = ref(a[i], 2.5);
      ExpectSameValues(RunBinary(op, dtype, full, a, Shape(), {2.5}), want, "a, 2.5");
      ExpectSameValues(RunBinary(op, dtype, Shape(), {2.5}, full, a), want, "2.5, a");
      // A row broadcast over a's rows: NaN in column 0 (row) and at a[2].
      for (int i = 0; i < 6; ++i) want[i] = ref(a[i], row[i % 3]);
      ExpectSameValues(RunBinary(op, dtype, full, a, Shape({3}), row), want, "a, row");
      ExpectSameValues(RunBinary(op, dtype, Shape({3}), row, full, a), want, "row, a");
      // A column [2, 1] against a row [1, 3]: an outer broadcast of both.
      const std::vector<double> col = {kNan, -1};
      for (int i = 0; i < 6; ++i) want[i] = ref(col[i / 3], row[i % 3]);
      ExpectSameValues(RunBinary(op, dtype, Shape({2, 1}), col, Shape({1, 3}), row), want,
                       "col, row");
    }
  }
}

// Out written into X's or Y's tensor (the aliasing loops).
TEST_P(MaxMinNanTest, NanPropagatesInPlace) {
  const Shape shape({4});
  const std::vector<double> x = {kNan, 1, 5, kNan};
  const std::vector<double> y = {2, kNan, 3, kNan};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    for (const char* op : {"max", "min"}) {
      SCOPED_TRACE(absl::StrCat(op, " ", DataTypeName(dtype)));
      auto ref = std::string(op) == "max" ? ReferenceMax : ReferenceMin;
      std::vector<double> want(4);
      for (int i = 0; i < 4; ++i) want[i] = ref(x[i], y[i]);
      for (int into = 0; into < 2; ++into) {
        vm::BlobRef bx = Upload(dtype, shape, x);
        vm::BlobRef by = Upload(dtype, shape, y);
        const absl::Status status =
            h.dispatcher->CallInto(op, {{bx}, {by}}, {{into == 0 ? bx : by}}, {});
        ASSERT_TRUE(status.ok()) << status;
        ExpectSameValues(h.Download(into == 0 ? bx : by), want, into == 0 ? "into X" : "into Y");
      }
    }
  }
}

// The gradient goes to the argument the forward op returned: X on a tie and where X is NaN
// (also when both are), Y where Y wins or only Y is NaN. XGrad + YGrad is OutGrad.
TEST_P(MaxMinNanTest, GradGoesToTheArgumentReturned) {
  const Shape shape({7});
  const std::vector<double> x = {kNan, 1, kNan, 2, 1, 3, kNan};
  const std::vector<double> y = {1, kNan, kNan, 1, 2, 3, -kInf};
  const std::vector<double> g = {10, 20, 30, 40, 50, 60, 70};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    auto run = [&](const char* op) {
      absl::StatusOr<SlotBlobs> out = h.Run(
          op, {{Upload(dtype, shape, x)}, {Upload(dtype, shape, y)}, {Upload(dtype, shape, g)}}, {},
          device());
      EXPECT_TRUE(out.ok()) << out.status();
      return std::make_pair(h.Download((*out)[0][0]), h.Download((*out)[1][0]));
    };
    const auto [max_dx, max_dy] = run("max_grad");
    EXPECT_EQ(max_dx, std::vector<double>({10, 0, 30, 40, 0, 60, 70}));
    EXPECT_EQ(max_dy, std::vector<double>({0, 20, 0, 0, 50, 0, 0}));
    const auto [min_dx, min_dy] = run("min_grad");
    EXPECT_EQ(min_dx, std::vector<double>({10, 0, 30, 0, 50, 60, 70}));
    EXPECT_EQ(min_dy, std::vector<double>({0, 20, 0, 40, 0, 0, 0}));
  }
}

// A broadcast Y with a NaN: YGrad sums, over the broadcast rows, the elements Y won.
TEST_P(MaxMinNanTest, GradWithNanSumsOverBroadcastDims) {
  const Shape xs({3, 2});
  const std::vector<double> x = {kNan, 0, 1, kNan, -1, 4};
  const std::vector<double> y = {kNan, 2};  // shape [2]
  const std::vector<double> g = {1, 2, 4, 8, 16, 32};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    for (const char* op : {"max_grad", "min_grad"}) {
      SCOPED_TRACE(absl::StrCat(op, " ", DataTypeName(dtype)));
      const bool is_max = std::string(op) == "max_grad";
      // Which argument the forward op returns, written out from the rule.
      std::vector<double> want_dx(6, 0.0), want_dy(2, 0.0);
      for (int i = 0; i < 6; ++i) {
        const double xv = x[i], yv = y[i % 2];
        const bool takes_x = std::isnan(xv) || (!std::isnan(yv) && (is_max ? xv >= yv : xv <= yv));
        if (takes_x) {
          want_dx[i] = g[i];
        } else {
          want_dy[i % 2] += g[i];
        }
      }
      absl::StatusOr<SlotBlobs> out = h.Run(
          op, {{Upload(dtype, xs, x)}, {Upload(dtype, Shape({2}), y)}, {Upload(dtype, xs, g)}}, {},
          device());
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(h.Download((*out)[0][0]), want_dx);
      EXPECT_EQ(h.Download((*out)[1][0]), want_dy);
    }
  }
  // Spelled out for max. Column 0 (Y NaN): X is NaN in row 0 and gets g = 1; Y gets rows 1
  // and 2 (4 + 16). Column 1 (Y = 2): Y wins over 0 in row 0 (2); X is NaN in row 1 (8) and
  // X = 4 wins in row 2 (32).
  absl::StatusOr<SlotBlobs> out = h.Run("max_grad",
                                        {{Upload(DataType::kF64, xs, x)},
                                         {Upload(DataType::kF64, Shape({2}), y)},
                                         {Upload(DataType::kF64, xs, g)}},
                                        {}, device());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(h.Download((*out)[0][0]), std::vector<double>({1, 0, 0, 8, 0, 32}));
  EXPECT_EQ(h.Download((*out)[1][0]), std::vector<double>({20, 2}));
}

// i32 and i64: negative values, the dtype's extremes, ties, and broadcasting both ways.
TEST_P(MaxMinNanTest, IntegerMaxMinWithBroadcasting) {
  for (DataType dtype : {DataType::kI32, DataType::kI64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const double lo = dtype == DataType::kI32 ? -2147483648.0 : -0x1p62;
    const double hi = dtype == DataType::kI32 ? 2147483647.0 : 0x1p62;
    const Shape xs({2, 4});
    const std::vector<double> x = {-5, 3, -1, lo, 0, -7, hi, -2};
    const std::vector<double> y = {-2, -2, 4, -1};  // shape [4]: broadcast over x's rows
    std::vector<double> want_max(8), want_min(8);
    for (int i = 0; i < 8; ++i) {
      want_max[i] = ReferenceMax(x[i], y[i % 4]);
      want_min[i] = ReferenceMin(x[i], y[i % 4]);
    }
    EXPECT_EQ(RunBinary("max", dtype, xs, x, Shape({4}), y), want_max);
    EXPECT_EQ(RunBinary("max", dtype, Shape({4}), y, xs, x), want_max);
    EXPECT_EQ(RunBinary("min", dtype, xs, x, Shape({4}), y), want_min);
    EXPECT_EQ(RunBinary("min", dtype, Shape({4}), y, xs, x), want_min);
    // Spelled out, so that the reference itself is checked once.
    EXPECT_EQ(want_max, std::vector<double>({-2, 3, 4, -1, 0, -2, hi, -1}));
    EXPECT_EQ(want_min, std::vector<double>({-5, -2, -1, lo, -2, -7, 4, -2}));
    // A scalar, and one shape without broadcasting.
    EXPECT_EQ(RunBinary("max", dtype, xs, x, Shape(), {-3}),
              std::vector<double>({-3, 3, -1, -3, 0, -3, hi, -2}));
    EXPECT_EQ(RunBinary("min", dtype, Shape({3}), {lo, -9, 7}, Shape({3}), {hi, -10, 7}),
              std::vector<double>({lo, -10, 7}));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MaxMinNanTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

// The dtypes the schemas take: max and min f32, f64, i32, i64 (Out of X's dtype); not bool;
// the grad ops stay floating.
TEST(MaxMinDtypeTest, SchemasTakeIntegersButNotTheirGradients) {
  OpsHarness h;
  vm::BlobRef i32 = h.Upload(kCpu, DataType::kI32, Shape({2}), {1, -2});
  vm::BlobRef i64 = h.Upload(kCpu, DataType::kI64, Shape({2}), {1, -2});
  vm::BlobRef b = h.Upload(kCpu, DataType::kBool, Shape({2}), {1, 0});
  for (const char* op : {"max", "min"}) {
    for (const vm::BlobRef& t : {i32, i64}) {
      absl::StatusOr<SlotBlobs> out = h.Run(op, {{t}, {t}});
      ASSERT_TRUE(out.ok()) << op << ": " << out.status();
      EXPECT_EQ((*out)[0][0]->dtype(), t->dtype());
    }
    absl::StatusOr<SlotBlobs> mixed = h.Run(op, {{i32}, {i64}});
    ASSERT_FALSE(mixed.ok());
    EXPECT_THAT(mixed.status().message(), HasSubstr("X and Y must have one dtype"));
    absl::StatusOr<SlotBlobs> boolean = h.Run(op, {{b}, {b}});
    ASSERT_FALSE(boolean.ok());
    EXPECT_THAT(boolean.status().message(), HasSubstr("it must be f32, f64, i32 or i64"));
  }
  // The other arithmetic ops take integers too (tests/ops/integer_arith_test.cc); their
  // gradients, like max's and min's, do not.
  for (const char* op : {"add_grad", "div_grad"}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, {{i32}, {i32}, {i32}});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr("it must be f32 or f64"));
  }
  for (const char* op : {"max_grad", "min_grad"}) {
    absl::StatusOr<SlotBlobs> out = h.Run(op, {{i32}, {i32}, {i32}});
    ASSERT_FALSE(out.ok()) << op;
    EXPECT_THAT(out.status().message(), HasSubstr("it must be f32 or f64"));
  }
}

}  // namespace
}  // namespace sluice::ops::max_min_nan_test
