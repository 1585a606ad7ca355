// The unary math family (ops/unary_math_ops.cc, ops/cpu/unary_math_kernels.cc) on cpu and sim:
// every op's values in f32 and f64 equal the C library's on fixed-seed inputs and on edge
// values (signed zeros, +-1 at the ends of asin, acos and atanh, halves for round, NaN, +-inf,
// arguments outside the domain), a few of them against constants written out; the grad ops
// against the derivative formulas in f32 and f64; every op's gradient against central
// differences in f64 (zero for floor, ceil and round); and the operands refused.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::unary_math_ops_test {
namespace {

using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

constexpr double kInf = std::numeric_limits<double>::infinity();

// An op, its C library function in float and in double, its derivative (nullptr: none) and
// the range its random inputs come from (inside the domain, where the derivative is finite).
struct MathCase {
  const char* op;
  float (*f32)(float);
  double (*f64)(double);
  double (*derivative)(double);
  double lo;
  double hi;
};

const std::vector<MathCase>& Cases() {
  static const auto* const cases = new std::vector<MathCase>{
      {"sin", std::sin, std::sin, [](double x) { return std::cos(x); }, -4, 4},
      {"cos", std::cos, std::cos, [](double x) { return -std::sin(x); }, -4, 4},
      {"tan", std::tan, std::tan, [](double x) { return 1 / (std::cos(x) * std::cos(x)); }, -1.4,
       1.4},
      {"asin", std::asin, std::asin, [](double x) { return 1 / std::sqrt(1 - x * x); }, -0.95,
       0.95},
      {"acos", std::acos, std::acos, [](double x) { return -1 / std::sqrt(1 - x * x); }, -0.95,
       0.95},
      {"atan", std::atan, std::atan, [](double x) { return 1 / (1 + x * x); }, -4, 4},
      {"sinh", std::sinh, std::sinh, [](double x) { return std::cosh(x); }, -3, 3},
      {"cosh", std::cosh, std::cosh, [](double x) { return std::sinh(x); }, -3, 3},
      {"asinh", std::asinh, std::asinh, [](double x) { return 1 / std::sqrt(x * x + 1); }, -4, 4},
      {"acosh", std::acosh, std::acosh, [](double x) { return 1 / std::sqrt(x * x - 1); }, 1.05, 4},
      {"atanh", std::atanh, std::atanh, [](double x) { return 1 / (1 - x * x); }, -0.95, 0.95},
      {"floor", std::floor, std::floor, nullptr, -4, 4},
      {"ceil", std::ceil, std::ceil, nullptr, -4, 4},
      {"round", std::nearbyint, std::nearbyint, nullptr, -4, 4},
  };
  return *cases;
}

// Edge values every op sees: signed zeros, the ends of [-1, 1], halves (round), values
// outside every inverse's domain, huge ones, NaN and the infinities.
std::vector<double> EdgeValues() {
  return {0.0, -0.0, 1.0,  -1.0,  0.5,  -0.5,  1.5,          2.5,  -2.5,
          3.5, 2.0,  -2.0, 1e-30, 1e30, 100.0, std::nan(""), kInf, -kInf};
}

class UnaryMathOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  std::vector<double> RunOne(absl::string_view op, DataType dtype, const Shape& shape,
                             const std::vector<std::vector<double>>& inputs) {
    SlotBlobs slots;
    for (const std::vector<double>& v : inputs)
      slots.push_back({h.Upload(device(), dtype, shape, v)});
    absl::StatusOr<SlotBlobs> out = h.Run(op, slots, {}, device());
    EXPECT_TRUE(out.ok()) << op << ": " << out.status();
    return out.ok() ? h.Download((*out)[0][0]) : std::vector<double>{};
  }

  OpsHarness h;
};

TEST_P(UnaryMathOpsTest, ValuesEqualTheStandardLibrary) {
  uint64_t seed = 20260310;
  for (const MathCase& c : Cases()) {
    std::vector<double> x = RandomValues(40, seed++, c.lo, c.hi);
    for (double v : EdgeValues()) x.push_back(v);
    const Shape shape({static_cast<int64_t>(x.size())});
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const bool f32 = dtype == DataType::kF32;
      const std::vector<double> got = RunOne(c.op, dtype, shape, {x});
      ASSERT_EQ(got.size(), x.size()) << c.op;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want =
            f32 ? static_cast<double>(c.f32(static_cast<float>(x[i]))) : c.f64(x[i]);
        const std::string what = absl::StrCat(DataTypeName(dtype), " ", c.op, "(", x[i], ")");
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i])) << what << " = " << got[i];
          continue;
        }
        EXPECT_EQ(got[i], want) << what;
        EXPECT_EQ(std::signbit(got[i]), std::signbit(want)) << what;
      }
    }
  }
}

// The library's answers at the points the ONNX and C rules fix, written out, so that a
// kernel and the reference cannot agree on a wrong rule.
TEST_P(UnaryMathOpsTest, FixedPointsOfTheRules) {
  struct Point {
    const char* op;
    double x;
    double want;  // NaN: NaN
  };
  const double nan = std::nan("");
  const Point points[] = {
      {"round", 0.5, 0.0},   {"round", 1.5, 2.0},      {"round", 2.5, 2.0},
      {"round", -2.5, -2.0}, {"round", -0.5, -0.0},    {"round", 2.6, 3.0},
      {"floor", -0.5, -1.0}, {"floor", 2.0, 2.0},      {"ceil", -0.5, -0.0},
      {"ceil", 2.1, 3.0},    {"asin", 1.0, M_PI / 2},  {"asin", 1.5, nan},
      {"acos", -1.0, M_PI},  {"acos", -2.0, nan},      {"acosh", 1.0, 0.0},
      {"acosh", 0.5, nan},   {"atanh", 1.0, kInf},     {"atanh", -1.0, -kInf},
      {"atanh", 2.0, nan},   {"sin", kInf, nan},       {"cos", -kInf, nan},
      {"tan", kInf, nan},    {"atan", kInf, M_PI / 2}, {"sinh", -kInf, -kInf},
      {"cosh", -kInf, kInf}, {"asinh", -kInf, -kInf},  {"floor", nan, nan},
  };
  for (const Point& p : points) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const std::vector<double> got = RunOne(p.op, dtype, Shape({1}), {{p.x}});
      ASSERT_EQ(got.size(), 1u);
      const std::string what = absl::StrCat(DataTypeName(dtype), " ", p.op, "(", p.x, ")");
      if (std::isnan(p.want)) {
        EXPECT_TRUE(std::isnan(got[0])) << what << " = " << got[0];
        continue;
      }
      const double want = dtype == DataType::kF32 ? static_cast<float>(p.want) : p.want;
      EXPECT_EQ(got[0], want) << what;
      EXPECT_EQ(std::signbit(got[0]), std::signbit(want)) << what;
    }
  }
}

TEST_P(UnaryMathOpsTest, GradOpsGiveTheDerivativeTimesOutGrad) {
  uint64_t seed = 20260311;
  for (const MathCase& c : Cases()) {
    if (c.derivative == nullptr) continue;
    std::vector<double> x = RandomValues(40, seed++, c.lo, c.hi);
    for (double v : {0.0, 0.5, -0.5}) {
      if (v >= c.lo && v <= c.hi) x.push_back(v);
    }
    // Outside the domain the derivative is NaN; at NaN too.
    x.push_back(c.lo < 0 ? -100.0 : 0.5);
    x.push_back(std::nan(""));
    const Shape shape({static_cast<int64_t>(x.size())});
    const std::vector<double> g = RandomValues(x.size(), seed++, -2, 2);
    const std::string grad_op = absl::StrCat(c.op, "_grad");
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      const bool f32 = dtype == DataType::kF32;
      const std::vector<double> got = RunOne(grad_op, dtype, shape, {x, g});
      ASSERT_EQ(got.size(), x.size()) << grad_op;
      for (size_t i = 0; i < x.size(); ++i) {
        const double xv = f32 ? static_cast<float>(x[i]) : x[i];
        const double gv = f32 ? static_cast<float>(g[i]) : g[i];
        // In f32 the derivative overflows as the kernel's does (cosh(100) is inf).
        const double want = f32 ? static_cast<float>(static_cast<float>(c.derivative(xv)) * gv)
                                : c.derivative(xv) * gv;
        const std::string what = absl::StrCat(DataTypeName(dtype), " ", grad_op, "(", xv, ")");
        if (std::isnan(want) || std::isinf(want)) {
          EXPECT_EQ(std::isnan(got[i]), std::isnan(want)) << what << " = " << got[i];
          if (std::isinf(want)) {
            EXPECT_EQ(got[i], want) << what;
          }
          continue;
        }
        EXPECT_NEAR(got[i], want, (f32 ? 2e-6 : 1e-14) * (1 + std::abs(want))) << what;
      }
    }
  }
}

TEST_P(UnaryMathOpsTest, GradientsMatchCentralDifferences) {
  uint64_t seed = 20260312;
  for (const MathCase& c : Cases()) {
    std::vector<double> x = RandomValues(6, seed++, c.lo, c.hi);
    if (c.derivative == nullptr) {
      // Away from the jumps (integers; halves for round), where the difference is zero.
      for (double& v : x) v = std::floor(v) + 0.2 + 0.2 * (v - std::floor(v));
    }
    testing::ExpectGradientsMatch(h, c.op, {{GradInput{Shape({2, 3}), x}}}, {}, device());
  }
}

TEST_P(UnaryMathOpsTest, WritesOverItsInput) {
  const std::vector<double> x = RandomValues(8, 5, -0.9, 0.9);
  vm::BlobRef blob = h.Upload(device(), DataType::kF64, Shape({8}), x);
  DispatchOptions options;
  options.default_device = device();
  const absl::Status written = h.dispatcher->CallInto("asin", {{blob}}, {{blob}}, {}, options);
  ASSERT_TRUE(written.ok()) << written;
  const std::vector<double> got = h.Download(blob);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], std::asin(x[i])) << i;
}

INSTANTIATE_TEST_SUITE_P(Devices, UnaryMathOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

TEST(UnaryMathOpsErrorTest, NonFloatAndMismatchedOperandsAreRefused) {
  OpsHarness h;
  vm::BlobRef xi = h.Upload(kCpu, DataType::kI32, Shape({3}), {1, 2, 3});
  vm::BlobRef x = h.Upload(kCpu, DataType::kF32, Shape({3}), {0.1, 0.2, 0.3});
  vm::BlobRef g64 = h.Upload(kCpu, DataType::kF64, Shape({3}), {1, 1, 1});
  vm::BlobRef g2 = h.Upload(kCpu, DataType::kF32, Shape({2}), {1, 1});
  absl::StatusOr<SlotBlobs> out = h.Run("sin", {{xi}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("op 'sin'"));
  EXPECT_THAT(out.status().message(), HasSubstr("input X"));
  out = h.Run("round", {{xi}});
  EXPECT_FALSE(out.ok());
  for (const vm::BlobRef& g : {g64, g2}) {
    out = h.Run("atanh_grad", {{x}, {g}});
    ASSERT_FALSE(out.ok());
    EXPECT_THAT(out.status().message(), HasSubstr("op 'atanh_grad': input OutGrad is"));
  }
  EXPECT_FALSE(h.registry.FindSchema("floor_grad").ok()) << "floor's gradient is zeros, no op";
}

}  // namespace
}  // namespace sluice::ops::unary_math_ops_test
