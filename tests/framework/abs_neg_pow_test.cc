// abs, neg and pow through the framework, on cpu and sim (the sync checker on): eager values
// against std::abs / unary minus / std::pow on fixed-seed random inputs and the special
// values (0, -0, NaN, infinities); eager autograd against each op's documented gradient and,
// in f64, against central differences of the loss, so the gradient rule itself is checked;
// static autodiff (AppendBackward, Executor) gives the eager gradients bit for bit.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/autodiff/backward.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/scope.h"
#include "gtest/gtest.h"
#include "ops/op_schema.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::abs_neg_pow_test {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// One op under test: how to call it, its value and its derivative at x.
struct UnaryCase {
  std::string name;
  std::function<absl::StatusOr<fn::Value>(const fn::Value&)> call;
  std::function<double(double)> value;
  std::function<double(double)> derivative;
};

std::vector<UnaryCase> Cases() {
  std::vector<UnaryCase> cases = {
      {"abs", [](const fn::Value& x) { return fn::Abs(x); }, [](double x) { return std::abs(x); },
       [](double x) { return std::isnan(x) ? x : (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0)); }},
      {"neg", [](const fn::Value& x) { return fn::Neg(x); }, [](double x) { return -x; },
       [](double) { return -1.0; }},
  };
  for (const double factor : {2.0, 3.0, 0.5, -1.0}) {
    cases.push_back({absl::StrCat("pow", factor),
                     [factor](const fn::Value& x) { return fn::Pow(x, factor); },
                     [factor](double x) { return std::pow(x, factor); },
                     [factor](double x) { return factor * std::pow(x, factor - 1); }});
  }
  return cases;
}

// Fixed-seed values in [-3, 3] (positive only for fractional powers, where a negative base
// is NaN by definition), then the special values.
std::vector<double> Inputs(bool positive, bool specials) {
  std::mt19937 rng(20261202);
  std::uniform_real_distribution<double> dist(positive ? 0.25 : -3.0, 3.0);
  std::vector<double> x(29);
  for (double& v : x) v = dist(rng);
  if (specials) {
    for (double v : {0.0, -0.0, kNan, kInf, -kInf}) x.push_back(v);
  }
  return x;
}

std::vector<double> Weights(size_t n) {
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = 1.0 + static_cast<double>(i % 7);
  return w;
}

std::vector<double> ToDoubles(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<double> values(bytes->size() / sizeof(double));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << what << " element " << i;
    }
  }
}

class AbsNegPowTest : public ::testing::TestWithParam<Device> {
 protected:
  AbsNegPowTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  absl::StatusOr<eager::Tensor> Make(const std::vector<double>& values) {
    return context_->FromVector(values, Shape({static_cast<int64_t>(values.size())}), GetParam());
  }

  // sum(op(x) * w) and its gradient with respect to x, eagerly.
  void EagerLossAndGrad(const UnaryCase& c, const std::vector<double>& x,
                        const std::vector<double>& w, double* loss_out,
                        std::vector<double>* grad_out) {
    absl::StatusOr<eager::Tensor> xt = Make(x);
    absl::StatusOr<eager::Tensor> wt = Make(w);
    ASSERT_TRUE(xt.ok() && wt.ok());
    ASSERT_TRUE(autograd::SetRequiresGrad(*xt).ok());
    absl::StatusOr<fn::Value> y = c.call(*xt);
    ASSERT_TRUE(y.ok()) << y.status();
    absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(fn::Mul(y->tensor(), *wt).value());
    ASSERT_TRUE(loss.ok()) << loss.status();
    *loss_out = ToDoubles(*loss).at(0);
    ASSERT_TRUE(autograd::Backward(*loss).ok());
    *grad_out = ToDoubles(autograd::GradOf(*xt));
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_P(AbsNegPowTest, EagerValuesMatchTheReference) {
  for (const UnaryCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<double> x = Inputs(false, true);
    absl::StatusOr<eager::Tensor> xt = Make(x);
    ASSERT_TRUE(xt.ok());
    absl::StatusOr<fn::Value> y = c.call(*xt);
    ASSERT_TRUE(y.ok()) << y.status();
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = c.value(x[i]);
    ExpectNear(ToDoubles(y->tensor()), want, 1e-15, "forward");
  }
}

TEST_P(AbsNegPowTest, EagerGradientsFollowTheRuleAndTheDifferences) {
  for (const UnaryCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const bool fractional = c.name == "pow0.5";
    const std::vector<double> x = Inputs(fractional || c.name == "pow-1", false);
    const std::vector<double> w = Weights(x.size());
    double loss = 0;
    std::vector<double> grad;
    ASSERT_NO_FATAL_FAILURE(EagerLossAndGrad(c, x, w, &loss, &grad));
    std::vector<double> rule(x.size());
    for (size_t i = 0; i < x.size(); ++i) rule[i] = w[i] * c.derivative(x[i]);
    ExpectNear(grad, rule, 1e-13, "against the rule");
    // Central differences of the loss, one element at a time.
    std::vector<double> numeric(x.size());
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<double> plus = x, minus = x;
      plus[i] += h;
      minus[i] -= h;
      double up = 0, down = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        up += c.value(plus[j]) * w[j];
        down += c.value(minus[j]) * w[j];
      }
      numeric[i] = (up - down) / (2 * h);
    }
    ExpectNear(grad, numeric, 1e-5, "against central differences");
  }
}

TEST_P(AbsNegPowTest, AbsGradientAtZeroAndNan) {
  const UnaryCase abs = Cases()[0];
  const std::vector<double> x = {0.0, -0.0, kNan, 2.0, -2.0};
  double loss = 0;
  std::vector<double> grad;
  ASSERT_NO_FATAL_FAILURE(EagerLossAndGrad(abs, x, {1, 1, 1, 1, 1}, &loss, &grad));
  ASSERT_EQ(grad.size(), 5u);
  EXPECT_EQ(grad[0], 0.0);
  EXPECT_EQ(grad[1], 0.0);
  EXPECT_TRUE(std::isnan(grad[2]));
  EXPECT_EQ(grad[3], 1.0);
  EXPECT_EQ(grad[4], -1.0);
}

// x^0 is 1 everywhere: its gradient is 0, also at 0 (where factor * x^(factor - 1) would
// be 0 * inf) and at infinity; NaN stays NaN in the value only.
TEST_P(AbsNegPowTest, PowZeroHasAZeroGradientEverywhere) {
  const UnaryCase pow0{"pow0", [](const fn::Value& x) { return fn::Pow(x, 0.0); },
                       [](double) { return 1.0; }, [](double) { return 0.0; }};
  const std::vector<double> x = {0.0, -0.0, 2.0, -3.0, kInf};
  double loss = 0;
  std::vector<double> grad;
  ASSERT_NO_FATAL_FAILURE(EagerLossAndGrad(pow0, x, {1, 1, 1, 1, 1}, &loss, &grad));
  ASSERT_EQ(grad.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(grad[i], 0.0) << "x = " << x[i];
  EXPECT_EQ(loss, 5.0);
}

TEST_P(AbsNegPowTest, StaticAutodiffGivesTheEagerGradients) {
  for (const UnaryCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<double> x = Inputs(c.name == "pow0.5" || c.name == "pow-1", false);
    const std::vector<double> w = Weights(x.size());
    double eager_loss = 0;
    std::vector<double> eager_grad;
    ASSERT_NO_FATAL_FAILURE(EagerLossAndGrad(c, x, w, &eager_loss, &eager_grad));

    const Shape shape({static_cast<int64_t>(x.size())});
    Program main(&context_->registry());
    Program startup(&context_->registry());
    {
      ProgramGuard guard(main, startup);
      absl::StatusOr<Var> xv = Data("x", shape, DataType::kF64);
      absl::StatusOr<Var> wv = Data("w", shape, DataType::kF64);
      ASSERT_TRUE(xv.ok() && wv.ok());
      xv->set_stop_gradient(false);
      absl::StatusOr<fn::Value> y = c.call(*xv);
      ASSERT_TRUE(y.ok()) << y.status();
      absl::StatusOr<fn::Value> loss = fn::ReduceSum(fn::Mul(*y, *wv).value());
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE(AppendBackward(loss->var()).ok());
    }
    const Feeds feeds = {{"x", HostTensor::FromVector(x, shape)},
                         {"w", HostTensor::FromVector(w, shape)}};
    ExecutorOptions options;
    options.interpreter.device = GetParam();
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> run =
        executor.Run(main.desc(), feeds, {ops::GradContext::GradName("x")}, &scope);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->fetches[0].ToVector<double>(), eager_grad);
  }
}

// abs and neg take integers (tests/ops/integer_arith_test.cc); pow does not, and no op here
// takes bool.
TEST_P(AbsNegPowTest, OtherOperandsAreRefusedNamingTheOp) {
  absl::StatusOr<eager::Tensor> x =
      context_->FromVector(std::vector<int32_t>{1, -2}, Shape({2}), GetParam());
  ASSERT_TRUE(x.ok());
  const uint8_t bits[] = {1, 0};
  absl::StatusOr<eager::Tensor> b =
      context_->FromBytes(DataType::kBool, Shape({2}), absl::MakeConstSpan(bits), GetParam());
  ASSERT_TRUE(b.ok()) << b.status();
  for (const auto& [name, result] :
       {std::pair<std::string, absl::StatusOr<eager::Tensor>>{"abs", fn::Abs(*b)},
        {"neg", fn::Neg(*b)},
        {"pow", fn::Pow(*x, 2.0)}}) {
    ASSERT_FALSE(result.ok()) << name;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(result.status().message().find(absl::StrCat("'", name, "'")), absl::string_view::npos)
        << result.status();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AbsNegPowTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::framework::abs_neg_pow_test
