// The elementwise op family (ops/elementwise_ops.cc, ops/cpu/elementwise_kernels.cc) on cpu
// and sim: every op against a plain reference loop in double for f32 and f64, with NumPy
// broadcasting edge cases and in-place use; the errors returned before anything is enqueued;
// every grad op against finite differences (ExpectGradientsMatch) and, for f32 and f64 and
// larger broadcasts, against reference sums.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ops/op_test_util.h"

namespace sluice::ops::elementwise_ops_test {
namespace {

using testing::ExpectGradientsMatch;
using testing::GradInput;
using ::testing::HasSubstr;
using testing::kCpu;
using testing::kSim0;
using testing::OpsHarness;
using testing::RandomValues;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// ---- Reference helpers, independent of core/shape's broadcasting ----

Shape RefBroadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    dims[i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

// The element of `in` that output element `linear` of `out` reads.
int64_t RefSource(const Shape& in, const Shape& out, int64_t linear) {
  int64_t index = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int64_t coord = linear % out.dim(d);
    linear /= out.dim(d);
    const int din = d - (out.rank() - in.rank());
    if (din < 0) continue;
    if (in.dim(din) != 1) index += coord * stride;
    stride *= in.dim(din);
  }
  return index;
}

// Values as the dtype stores them.
std::vector<double> Rounded(std::vector<double> values, DataType dtype) {
  if (dtype == DataType::kF32) {
    for (double& v : values) v = static_cast<float>(v);
  }
  return values;
}

// Magnitudes in [0.5, 2], random signs: safe divisors.
std::vector<double> AwayFromZero(int64_t n, uint64_t seed) {
  std::vector<double> values = RandomValues(n, seed, 0.5, 2.0);
  const std::vector<double> signs = RandomValues(n, seed + 1000);
  for (int64_t i = 0; i < n; ++i) {
    if (signs[i] < 0) values[i] = -values[i];
  }
  return values;
}

// For max/min: X from odd and Y from even multiples of 0.1 (plus < 0.02), so any X and Y
// differ by more than 0.08: no ties, even after a finite-difference step.
std::vector<double> Separated(int64_t n, uint64_t seed, bool odd) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> k(-4, 4);
  std::uniform_real_distribution<double> jitter(0.0, 0.02);
  std::vector<double> values(n);
  for (double& v : values) v = 0.1 * (2 * k(rng) + (odd ? 1 : 0)) + jitter(rng);
  return values;
}

// |got - want| <= rel |want| + abs, per element; NaN and infinities must match exactly.
void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, DataType dtype,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double rel = dtype == DataType::kF32 ? 1e-6 : 1e-14;
  const double abs = dtype == DataType::kF32 ? 0x1p-148 : 1e-300;
  int failures = 0;
  for (size_t i = 0; i < got.size() && failures < 5; ++i) {
    bool ok;
    if (std::isnan(want[i])) {
      ok = std::isnan(got[i]);
    } else if (std::isinf(want[i])) {
      ok = got[i] == want[i];
    } else {
      ok = std::abs(got[i] - want[i]) <= rel * std::abs(want[i]) + abs;
    }
    if (!ok) ++failures;
    EXPECT_TRUE(ok) << what << " element " << i << ": got " << got[i] << ", want " << want[i];
  }
}

struct BinaryOp {
  const char* name;
  double (*fn)(double, double);
};
const BinaryOp kBinaryOps[] = {
    {"add", [](double x, double y) { return x + y; }},
    {"sub", [](double x, double y) { return x - y; }},
    {"mul", [](double x, double y) { return x * y; }},
    {"div", [](double x, double y) { return x / y; }},
    {"max", [](double x, double y) { return x >= y ? x : y; }},
    {"min", [](double x, double y) { return x <= y ? x : y; }},
};

struct UnaryOp {
  const char* name;
  double (*fn)(double);
  double lo, hi;  // test inputs
};
const UnaryOp kUnaryOps[] = {
    {"relu", [](double x) { return x < 0 ? 0.0 : x; }, -4, 4},
    {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -12, 12},
    {"tanh", [](double x) { return std::tanh(x); }, -5, 5},
    {"exp", [](double x) { return std::exp(x); }, -20, 20},
    {"log", [](double x) { return std::log(x); }, 1e-3, 50},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0, 50},
    {"square", [](double x) { return x * x; }, -4, 4},
};

struct ShapePair {
  Shape x, y;
};

std::string Describe(const char* op, DataType dtype, const ShapePair& s) {
  return absl::StrCat(op, " ", DataTypeName(dtype), " ", s.x.ToString(), " with ", s.y.ToString());
}

// Reference of a binary op over the broadcast.
std::vector<double> RefBinary(const BinaryOp& op, const ShapePair& s, const std::vector<double>& x,
                              const std::vector<double>& y) {
  const Shape out = RefBroadcast(s.x, s.y);
  std::vector<double> want(out.NumElements());
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    want[i] = op.fn(x[RefSource(s.x, out, i)], y[RefSource(s.y, out, i)]);
  }
  return want;
}

class ElementwiseOpsTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  vm::BlobRef Upload(DataType dtype, const Shape& shape, const std::vector<double>& values) {
    return h.Upload(device(), dtype, shape, values);
  }
  OpsHarness h;
};

TEST_P(ElementwiseOpsTest, BinaryOpsMatchReferenceWithBroadcasting) {
  const std::vector<ShapePair> shapes = {
      {Shape(), Shape({2, 3})},                 // scalar with tensor
      {Shape({2, 3}), Shape()},                 // tensor with scalar
      {Shape({3, 1}), Shape({1, 4})},           // outer product
      {Shape({2, 3, 4}), Shape({4})},           // row broadcast
      {Shape({4}), Shape({2, 3, 4})},           // the same, X broadcast
      {Shape({2, 1, 4}), Shape({3, 1})},        // both broadcast, ranks differ
      {Shape({0, 3}), Shape({1, 3})},           // size-0 dimension
      {Shape({5, 7}), Shape({5, 7})},           // identical
      {Shape({67}), Shape({67})},               // vector body and tail
      {Shape({5, 37}), Shape({37})},            //
      {Shape({37, 1}), Shape({1, 19})},         //
      {Shape({3, 1, 17}), Shape({3, 5, 1})},    //
      {Shape({2, 3, 1, 5}), Shape({3, 4, 1})},  //
      {Shape({1}), Shape()},                    // one element
      {Shape({100}), Shape({1})},               // one-element Y
      {Shape({1, 1, 9}), Shape({4, 1, 1, 1})},  // size-1 dimensions everywhere
  };
  uint64_t seed = 1;
  for (const BinaryOp& op : kBinaryOps) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      for (const ShapePair& s : shapes) {
        SCOPED_TRACE(Describe(op.name, dtype, s));
        const std::vector<double> x =
            Rounded(RandomValues(s.x.NumElements(), seed++, -3, 3), dtype);
        const std::vector<double> y =
            Rounded(std::string(op.name) == "div" ? AwayFromZero(s.y.NumElements(), seed++)
                                                  : RandomValues(s.y.NumElements(), seed++, -3, 3),
                    dtype);
        absl::StatusOr<SlotBlobs> out =
            h.Run(op.name, {{Upload(dtype, s.x, x)}, {Upload(dtype, s.y, y)}}, {}, device());
        ASSERT_TRUE(out.ok()) << out.status();
        const vm::BlobRef& result = (*out)[0][0];
        EXPECT_EQ(result->dtype(), dtype);
        EXPECT_EQ(result->shape(), RefBroadcast(s.x, s.y));
        EXPECT_EQ(result->device(), device());
        ExpectClose(h.Download(result), RefBinary(op, s, x, y), dtype, "Out");
      }
    }
  }
}

TEST_P(ElementwiseOpsTest, BinaryOpsInPlace) {
  uint64_t seed = 100;
  for (const BinaryOp& op : kBinaryOps) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(op.name, " ", DataTypeName(dtype)));
      const bool div = std::string(op.name) == "div";
      // Out is X (Y broadcast), then Out is Y (X broadcast).
      for (const ShapePair& s :
           {ShapePair{Shape({3, 33}), Shape({33})}, ShapePair{Shape({33}), Shape({3, 33})},
            ShapePair{Shape({3, 1}), Shape({3, 1})}}) {
        const std::vector<double> x = Rounded(RandomValues(s.x.NumElements(), seed++), dtype);
        const std::vector<double> y = Rounded(
            div ? AwayFromZero(s.y.NumElements(), seed++) : RandomValues(s.y.NumElements(), seed++),
            dtype);
        vm::BlobRef bx = Upload(dtype, s.x, x);
        vm::BlobRef by = Upload(dtype, s.y, y);
        vm::BlobRef target = s.x.NumElements() >= s.y.NumElements() ? bx : by;
        DispatchOptions options;
        options.default_device = device();
        const absl::Status status =
            h.dispatcher->CallInto(op.name, {{bx}, {by}}, {{target}}, {}, options);
        ASSERT_TRUE(status.ok()) << status;
        ExpectClose(h.Download(target), RefBinary(op, s, x, y), dtype,
                    absl::StrCat("in place ", Describe(op.name, dtype, s)));
      }
      // Out is X and Y: op(x, x) into x.
      const std::vector<double> x =
          Rounded(div ? AwayFromZero(40, seed++) : RandomValues(40, seed++), dtype);
      vm::BlobRef bx = Upload(dtype, Shape({40}), x);
      ASSERT_TRUE(h.dispatcher->CallInto(op.name, {{bx}, {bx}}, {{bx}}, {}).ok());
      ExpectClose(h.Download(bx), RefBinary(op, {Shape({40}), Shape({40})}, x, x), dtype,
                  "op(x, x) into x");
    }
  }
}

TEST_P(ElementwiseOpsTest, UnaryOpsMatchReference) {
  uint64_t seed = 200;
  for (const UnaryOp& op : kUnaryOps) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      for (const Shape& shape :
           {Shape(), Shape({0}), Shape({67}), Shape({3, 5}), Shape({2, 0, 3}), Shape({2, 3, 7})}) {
        SCOPED_TRACE(absl::StrCat(op.name, " ", DataTypeName(dtype), shape.ToString()));
        const std::vector<double> x =
            Rounded(RandomValues(shape.NumElements(), seed++, op.lo, op.hi), dtype);
        absl::StatusOr<SlotBlobs> out = h.Run(op.name, {{Upload(dtype, shape, x)}}, {}, device());
        ASSERT_TRUE(out.ok()) << out.status();
        const vm::BlobRef& result = (*out)[0][0];
        EXPECT_EQ(result->dtype(), dtype);
        EXPECT_EQ(result->shape(), shape);
        std::vector<double> want(x.size());
        for (size_t i = 0; i < x.size(); ++i) want[i] = op.fn(x[i]);
        ExpectClose(h.Download(result), want, dtype, "Out");
      }
    }
  }
}

// Dense sweeps over the f32 ranges where exp, log, tanh and sigmoid change regime (overflow,
// subnormal results and inputs, polynomial/exp switch), and the special values.
TEST_P(ElementwiseOpsTest, UnaryOpsWideRangesAndSpecialValues) {
  auto sweep = [](double lo, double hi, int n, bool geometric) {
    std::vector<double> values(n);
    for (int i = 0; i < n; ++i) {
      const double t = static_cast<double>(i) / (n - 1);
      values[i] = geometric ? lo * std::pow(hi / lo, t) : lo + (hi - lo) * t;
    }
    return values;
  };
  const std::vector<double> specials = {0.0, -0.0, kInf, -kInf, kNan, 1.0, -1.0, 1e-40, -1e-40};
  struct Case {
    const char* op;
    std::vector<double> inputs;
  };
  std::vector<Case> cases = {
      {"exp", sweep(-110, 95, 4001, false)},      {"log", sweep(1e-45, 3e38, 4001, true)},
      {"log", sweep(0.5, 2, 1001, false)},        {"tanh", sweep(-12, 12, 4001, false)},
      {"tanh", sweep(-0.7, 0.7, 1001, false)},    {"sigmoid", sweep(-110, 110, 4001, false)},
      {"sqrt", sweep(1e-44, 3e38, 1001, true)},   {"relu", sweep(-5, 5, 101, false)},
      {"square", sweep(-1e19, 1e19, 101, false)},
  };
  for (const char* op : {"exp", "log", "tanh", "sigmoid", "sqrt", "relu", "square"}) {
    cases.push_back({op, specials});
  }
  for (const Case& c : cases) {
    const UnaryOp* op = nullptr;
    for (const UnaryOp& u : kUnaryOps) {
      if (std::string(u.name) == c.op) op = &u;
    }
    ASSERT_NE(op, nullptr);
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(c.op, " ", DataTypeName(dtype), " over ", c.inputs.size(),
                                " values from ", c.inputs.front()));
      const std::vector<double> x = Rounded(c.inputs, dtype);
      const Shape shape({static_cast<int64_t>(x.size())});
      absl::StatusOr<SlotBlobs> out = h.Run(c.op, {{Upload(dtype, shape, x)}}, {}, device());
      ASSERT_TRUE(out.ok()) << out.status();
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = Rounded({op->fn(x[i])}, dtype)[0];
      ExpectClose(h.Download((*out)[0][0]), want, dtype, "Out");
    }
  }
}

TEST_P(ElementwiseOpsTest, UnaryOpsInPlace) {
  uint64_t seed = 300;
  for (const UnaryOp& op : kUnaryOps) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(op.name, " ", DataTypeName(dtype)));
      const std::vector<double> x = Rounded(RandomValues(41, seed++, op.lo, op.hi), dtype);
      vm::BlobRef bx = Upload(dtype, Shape({41}), x);
      ASSERT_TRUE(h.dispatcher->CallInto(op.name, {{bx}}, {{bx}}, {}).ok());
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = op.fn(x[i]);
      ExpectClose(h.Download(bx), want, dtype, "in place");
    }
  }
}

// ---- Gradients ----

struct BinaryGradRef {
  const char* op;
  // d Out / d X and d Out / d Y at (x, y).
  double (*dx)(double, double);
  double (*dy)(double, double);
};
const BinaryGradRef kBinaryGrads[] = {
    {"add", [](double, double) { return 1.0; }, [](double, double) { return 1.0; }},
    {"sub", [](double, double) { return 1.0; }, [](double, double) { return -1.0; }},
    {"mul", [](double, double y) { return y; }, [](double x, double) { return x; }},
    {"div", [](double, double y) { return 1 / y; },
     [](double x, double y) { return -x / (y * y); }},
    {"max", [](double x, double y) { return x >= y ? 1.0 : 0.0; },
     [](double x, double y) { return x >= y ? 0.0 : 1.0; }},
    {"min", [](double x, double y) { return x <= y ? 1.0 : 0.0; },
     [](double x, double y) { return x <= y ? 0.0 : 1.0; }},
};

// Inputs of a binary op's gradient check or grad kernel: Y a safe divisor for div, X and Y
// apart for max/min.
std::pair<std::vector<double>, std::vector<double>> GradValues(const std::string& op,
                                                               const ShapePair& s, uint64_t seed) {
  const int64_t nx = s.x.NumElements(), ny = s.y.NumElements();
  if (op == "div") return {RandomValues(nx, seed), AwayFromZero(ny, seed + 1)};
  if (op == "max" || op == "min")
    return {Separated(nx, seed, true), Separated(ny, seed + 1, false)};
  return {RandomValues(nx, seed), RandomValues(ny, seed + 1)};
}

TEST_P(ElementwiseOpsTest, BinaryGradientsMatchFiniteDifferences) {
  const std::vector<ShapePair> shapes = {
      {Shape({2, 3}), Shape({2, 3})}, {Shape({2, 3}), Shape({3})},
      {Shape({2, 3}), Shape({1})},    {Shape(), Shape({2, 3})},
      {Shape({3, 1}), Shape({1, 4})}, {Shape({2, 1, 4}), Shape({3, 1})},
  };
  uint64_t seed = 400;
  for (const BinaryGradRef& g : kBinaryGrads) {
    for (const ShapePair& s : shapes) {
      SCOPED_TRACE(Describe(g.op, DataType::kF64, s));
      const auto [x, y] = GradValues(g.op, s, seed);
      seed += 2;
      ExpectGradientsMatch(h, g.op, {{GradInput{s.x, x}}, {GradInput{s.y, y}}}, {}, device());
    }
  }
}

TEST_P(ElementwiseOpsTest, UnaryGradientsMatchFiniteDifferences) {
  const Shape shape({2, 3});
  uint64_t seed = 500;
  for (const UnaryOp& op : kUnaryOps) {
    SCOPED_TRACE(op.name);
    const std::string name = op.name;
    std::vector<double> x;
    if (name == "log" || name == "sqrt") {
      x = RandomValues(6, seed++, 0.5, 2.0);
    } else if (name == "relu") {
      x = AwayFromZero(6, seed++);  // no kink within a finite-difference step
    } else {
      x = RandomValues(6, seed++, -1.5, 1.5);
    }
    ExpectGradientsMatch(h, op.name, {{GradInput{shape, x}}}, {}, device());
  }
}

// The binary grad kernels in f32 and f64 on larger broadcasts (rows reduced in blocks,
// rows accumulated, both) against sums in double. Tolerances scale with the sum of the
// magnitudes of the terms.
TEST_P(ElementwiseOpsTest, BinaryGradKernelsMatchReferenceSums) {
  const std::vector<ShapePair> shapes = {
      {Shape({64, 33}), Shape({33})},
      {Shape({64, 33}), Shape({64, 1})},
      {Shape({300}), Shape()},
      {Shape(), Shape({300})},
      {Shape({2, 600}), Shape({2, 1})},
      {Shape({3, 1, 40}), Shape({1, 5, 1})},
      {Shape({2, 7, 5}), Shape({2, 1, 5})},
      {Shape({7, 9}), Shape({7, 9})},
      {Shape({3, 1}), Shape({1, 4})},
  };
  uint64_t seed = 600;
  for (const BinaryGradRef& ref : kBinaryGrads) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      for (const ShapePair& s : shapes) {
        SCOPED_TRACE(Describe(ref.op, dtype, s));
        auto [x, y] = GradValues(ref.op, s, seed);
        seed += 3;
        x = Rounded(x, dtype);
        y = Rounded(y, dtype);
        const Shape out = RefBroadcast(s.x, s.y);
        const std::vector<double> g = Rounded(RandomValues(out.NumElements(), seed++), dtype);
        std::vector<double> want_x(x.size(), 0.0), want_y(y.size(), 0.0);
        std::vector<double> mag_x(x.size(), 0.0), mag_y(y.size(), 0.0);
        for (int64_t i = 0; i < out.NumElements(); ++i) {
          const int64_t ix = RefSource(s.x, out, i), iy = RefSource(s.y, out, i);
          const double cx = g[i] * ref.dx(x[ix], y[iy]);
          const double cy = g[i] * ref.dy(x[ix], y[iy]);
          want_x[ix] += cx;
          mag_x[ix] += std::abs(cx);
          want_y[iy] += cy;
          mag_y[iy] += std::abs(cy);
        }
        absl::StatusOr<SlotBlobs> grads =
            h.Run(absl::StrCat(ref.op, "_grad"),
                  {{Upload(dtype, s.x, x)}, {Upload(dtype, s.y, y)}, {Upload(dtype, out, g)}}, {},
                  device());
        ASSERT_TRUE(grads.ok()) << grads.status();
        ASSERT_EQ((*grads)[0][0]->shape(), s.x);
        ASSERT_EQ((*grads)[1][0]->shape(), s.y);
        const double rel = dtype == DataType::kF32 ? 1e-6 : 1e-13;
        const std::vector<double> got_x = h.Download((*grads)[0][0]);
        const std::vector<double> got_y = h.Download((*grads)[1][0]);
        for (size_t i = 0; i < x.size(); ++i) {
          EXPECT_NEAR(got_x[i], want_x[i], rel * mag_x[i] + 1e-30) << "XGrad element " << i;
        }
        for (size_t i = 0; i < y.size(); ++i) {
          EXPECT_NEAR(got_y[i], want_y[i], rel * mag_y[i] + 1e-30) << "YGrad element " << i;
        }
      }
    }
  }
}

TEST_P(ElementwiseOpsTest, UnaryGradKernelsMatchReference) {
  struct Case {
    const char* op;
    double lo, hi;
    double (*grad)(double v, double g);  // v: the grad op's first input (X or Out)
  };
  const Case cases[] = {
      {"relu_grad", -2, 2, [](double out, double g) { return out > 0 ? g : 0.0; }},
      {"sigmoid_grad", 0, 1, [](double out, double g) { return g * out * (1 - out); }},
      {"tanh_grad", -1, 1, [](double out, double g) { return g * (1 - out * out); }},
      {"exp_grad", 0, 5, [](double out, double g) { return g * out; }},
      {"log_grad", 0.1, 5, [](double x, double g) { return g / x; }},
      {"sqrt_grad", 0.1, 5, [](double out, double g) { return g / (2 * out); }},
      {"square_grad", -3, 3, [](double x, double g) { return 2 * x * g; }},
  };
  uint64_t seed = 700;
  for (const Case& c : cases) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(c.op, " ", DataTypeName(dtype)));
      const Shape shape({5, 13});
      std::vector<double> v = Rounded(RandomValues(65, seed++, c.lo, c.hi), dtype);
      if (std::string(c.op) == "relu_grad") v[0] = 0.0;  // the kink: gradient 0
      const std::vector<double> g = Rounded(RandomValues(65, seed++), dtype);
      absl::StatusOr<SlotBlobs> out =
          h.Run(c.op, {{Upload(dtype, shape, v)}, {Upload(dtype, shape, g)}}, {}, device());
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ((*out)[0][0]->shape(), shape);
      std::vector<double> want(65);
      for (int i = 0; i < 65; ++i) want[i] = c.grad(v[i], g[i]);
      // f32: a few roundings, and cancellation in 1 - Out (sigmoid) or 1 - Out^2 (tanh): the
      // tolerance scales with the terms.
      const double rel = dtype == DataType::kF32 ? 1e-6 : 1e-14;
      auto tolerance = [&](int i) {
        return rel * (std::abs(want[i]) + std::abs(g[i]) * (1 + v[i] * v[i]));
      };
      std::vector<double> got = h.Download((*out)[0][0]);
      for (int i = 0; i < 65; ++i) {
        EXPECT_NEAR(got[i], want[i], tolerance(i)) << "element " << i;
      }
      // In place: XGrad is OutGrad.
      vm::BlobRef bg = Upload(dtype, shape, g);
      ASSERT_TRUE(h.dispatcher->CallInto(c.op, {{Upload(dtype, shape, v)}, {bg}}, {{bg}}, {}).ok());
      got = h.Download(bg);
      for (int i = 0; i < 65; ++i) {
        EXPECT_NEAR(got[i], want[i], tolerance(i)) << "in place, element " << i;
      }
    }
  }
}

// On a tie X gets the whole gradient, for max and for min.
TEST_P(ElementwiseOpsTest, MaxMinGradTieRule) {
  const Shape shape({4});
  const std::vector<double> x = {1, 2, 3, -1};
  const std::vector<double> y = {1, 0, 5, -1};
  const std::vector<double> g = {10, 20, 30, 40};
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    auto run = [&](const char* op) {
      absl::StatusOr<SlotBlobs> out = h.Run(
          op, {{Upload(dtype, shape, x)}, {Upload(dtype, shape, y)}, {Upload(dtype, shape, g)}}, {},
          device());
      EXPECT_TRUE(out.ok()) << out.status();
      return std::make_pair(h.Download((*out)[0][0]), h.Download((*out)[1][0]));
    };
    const auto [max_dx, max_dy] = run("max_grad");
    EXPECT_EQ(max_dx, std::vector<double>({10, 20, 0, 40}));
    EXPECT_EQ(max_dy, std::vector<double>({0, 0, 30, 0}));
    const auto [min_dx, min_dy] = run("min_grad");
    EXPECT_EQ(min_dx, std::vector<double>({10, 0, 30, 40}));
    EXPECT_EQ(min_dy, std::vector<double>({0, 20, 0, 0}));
  }
}

// A grad op writing XGrad into OutGrad's tensor: YGrad must still see the original OutGrad.
TEST_P(ElementwiseOpsTest, BinaryGradInPlace) {
  for (DataType dtype : {DataType::kF32, DataType::kF64}) {
    const ShapePair s{Shape({4, 5}), Shape({5})};
    const std::vector<double> x = Rounded(RandomValues(20, 801), dtype);
    const std::vector<double> y = Rounded(RandomValues(5, 802), dtype);
    const std::vector<double> g = Rounded(RandomValues(20, 803), dtype);
    vm::BlobRef bg = Upload(dtype, s.x, g);
    vm::BlobRef dy = Upload(dtype, s.y, std::vector<double>(5, 0.0));
    ASSERT_TRUE(h.dispatcher
                    ->CallInto("mul_grad", {{Upload(dtype, s.x, x)}, {Upload(dtype, s.y, y)}, {bg}},
                               {{bg}, {dy}}, {})
                    .ok());
    std::vector<double> want_x(20), want_y(5, 0.0);
    for (int i = 0; i < 20; ++i) {
      want_x[i] = g[i] * y[i % 5];
      want_y[i % 5] += g[i] * x[i];
    }
    const std::vector<double> got_x = h.Download(bg);
    const std::vector<double> got_y = h.Download(dy);
    for (int i = 0; i < 20; ++i) EXPECT_NEAR(got_x[i], want_x[i], 1e-6) << DataTypeName(dtype);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(got_y[i], want_y[i], 1e-5) << DataTypeName(dtype);
  }
}

// An empty output broadcast from a non-empty input: that input's gradient is zeros (written
// into tensors that held other values).
TEST_P(ElementwiseOpsTest, GradOfEmptyBroadcastIsZero) {
  for (const char* op : {"add_grad", "mul_grad", "max_grad"}) {
    for (DataType dtype : {DataType::kF32, DataType::kF64}) {
      SCOPED_TRACE(absl::StrCat(op, " ", DataTypeName(dtype)));
      vm::BlobRef x = Upload(dtype, Shape({1, 3}), {1, 2, 3});
      vm::BlobRef y = Upload(dtype, Shape({0, 3}), {});
      vm::BlobRef g = Upload(dtype, Shape({0, 3}), {});
      vm::BlobRef dx = Upload(dtype, Shape({1, 3}), {7, 7, 7});
      vm::BlobRef dy = Upload(dtype, Shape({0, 3}), {});
      const absl::Status status = h.dispatcher->CallInto(op, {{x}, {y}, {g}}, {{dx}, {dy}}, {});
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(h.Download(dx), std::vector<double>({0, 0, 0}));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ElementwiseOpsTest, ::testing::Values(kCpu, kSim0),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

TEST(ElementwiseOpsSchemaTest, FlagsAndGradOps) {
  OpsHarness h;
  for (const char* op : {"add", "sub", "mul", "div", "max", "min", "relu", "sigmoid", "tanh", "exp",
                         "log", "sqrt", "square"}) {
    const OpSchema* schema = h.registry.FindSchema(op).value();
    EXPECT_TRUE(schema->has_flag(kOpElementwise)) << op;
    EXPECT_TRUE(schema->has_grad()) << op;
    const OpSchema* grad = h.registry.FindSchema(absl::StrCat(op, "_grad")).value();
    EXPECT_EQ(grad->outputs().back().name, schema->inputs().size() == 2 ? "YGrad" : "XGrad");
    // Binary grads reduce over broadcast dimensions; unary grads are elementwise.
    EXPECT_EQ(grad->has_flag(kOpElementwise), schema->inputs().size() == 1) << op;
  }
  // What each unary grad op reads besides OutGrad.
  const std::pair<const char*, const char*> reads[] = {
      {"relu_grad", "Out"}, {"sigmoid_grad", "Out"}, {"tanh_grad", "Out"}, {"exp_grad", "Out"},
      {"log_grad", "X"},    {"sqrt_grad", "Out"},    {"square_grad", "X"},
  };
  for (const auto& [op, slot] : reads) {
    EXPECT_EQ(h.registry.FindSchema(op).value()->inputs()[0].name, slot) << op;
  }
}

TEST(ElementwiseOpsErrorTest, BadInputsAreRejectedBeforeEnqueue) {
  OpsHarness h;
  vm::BlobRef a = h.Upload(kCpu, DataType::kF32, Shape({2, 3}), RandomValues(6, 1));
  vm::BlobRef b = h.Upload(kCpu, DataType::kF32, Shape({4}), RandomValues(4, 2));
  vm::BlobRef d = h.Upload(kCpu, DataType::kF64, Shape({2, 3}), RandomValues(6, 3));
  vm::BlobRef i = h.Upload(kCpu, DataType::kI32, Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  vm::BlobRef bits = h.Upload(kCpu, DataType::kBool, Shape({2, 3}), {1, 0, 1, 0, 1, 0});
  vm::BlobRef s = h.Upload(kSim0, DataType::kF32, Shape({2, 3}), RandomValues(6, 4));
  vm::BlobRef g34 = h.Upload(kCpu, DataType::kF32, Shape({3, 4}), RandomValues(12, 5));
  const int64_t uploads = h.vm->stats().instructions;

  struct Case {
    const char* op;
    SlotBlobs inputs;
    std::vector<const char*> messages;
  };
  const std::vector<Case> cases = {
      {"add", {{a}, {b}}, {"op 'add'", "[2, 3]", "[4]", "cannot broadcast"}},
      {"max", {{b}, {a}}, {"op 'max'", "[4]", "[2, 3]"}},
      {"mul", {{a}, {d}}, {"op 'mul'", "X is f32[2, 3] but Y is f64[2, 3]"}},
      {"div", {{d}, {a}}, {"op 'div'", "X is f64[2, 3] but Y is f32[2, 3]"}},
      {"sub", {{bits}, {bits}}, {"op 'sub'", "bool[2, 3]; it must be f32, f64, i32 or i64"}},
      {"add", {{a}, {s}}, {"op 'add'", "is on sim:0 but"}},
      {"relu", {{bits}}, {"op 'relu'", "bool[2, 3]; it must be f32, f64, i32 or i64"}},
      {"log", {{i}}, {"op 'log'", "i32[2, 3]; it must be f32 or f64"}},
      {"add_grad", {{a}, {a}, {g34}}, {"op 'add_grad'", "OutGrad is f32[3, 4]", "f32[2, 3]"}},
      {"add_grad", {{a}, {b}, {a}}, {"op 'add_grad'", "cannot broadcast"}},
      {"mul_grad", {{a}, {a}, {d}}, {"op 'mul_grad'", "OutGrad is f64[2, 3]"}},
      {"relu_grad", {{a}, {g34}}, {"op 'relu_grad'", "OutGrad is f32[3, 4] but Out is f32[2, 3]"}},
      {"log_grad", {{a}, {d}}, {"op 'log_grad'", "OutGrad is f64[2, 3] but X is f32[2, 3]"}},
      {"sqrt_grad", {{i}, {i}}, {"op 'sqrt_grad'", "i32[2, 3]; it must be f32 or f64"}},
      {"exp", {{a}, {a}}, {"has 1 input slot(s), got 2"}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SlotBlobs> out = h.Run(c.op, c.inputs);
    ASSERT_FALSE(out.ok()) << c.op << " " << c.messages[0];
    for (const char* message : c.messages) {
      EXPECT_THAT(out.status().message(), HasSubstr(message)) << c.op;
    }
  }
  // CallInto with an output of the wrong shape.
  const absl::Status into = h.dispatcher->CallInto("add", {{a}, {a}}, {{g34}}, {});
  EXPECT_THAT(into.message(), HasSubstr("the op produces f32[2, 3]"));
  EXPECT_EQ(h.vm->stats().instructions, uploads) << "a rejected call enqueued work";

  // The harness still works afterwards.
  absl::StatusOr<SlotBlobs> fine = h.Run("add", {{a}, {a}});
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(h.Download((*fine)[0][0]).size(), 6u);
}

}  // namespace
}  // namespace sluice::ops::elementwise_ops_test
