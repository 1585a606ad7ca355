// framework/builder/layers.h and losses.h: Linear declares its parameters in both programs
// with initializers only in startup (deterministic, Glorot-bounded), appends matmul + add
// when called, and the losses give one-element results equal in both modes.
#include <cmath>

#include "core/status.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_reference_runner.h"

namespace sluice::framework::builder_layers_test {
namespace {

using reference::Feed;
using reference::Fetch;
using reference::RunProgram;
using reference::Scope;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BuilderLayersTest : public ::testing::Test {
 protected:
  BuilderLayersTest() : ctx_(reference::NewCpuContext()) {
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  std::vector<std::string> OpTypes(const Program& p) const {
    std::vector<std::string> types;
    for (const ir::OpDesc& op : p.desc().global_block().ops()) types.push_back(op.type);
    return types;
  }

  ops::OpRegistry registry_;
  eager::Context ctx_;
};

TEST_F(BuilderLayersTest, LinearParametersLiveInBothProgramsInitializedInStartup) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  absl::StatusOr<nn::Linear> linear = nn::Linear::Create(16, 4);
  ASSERT_TRUE(linear.ok()) << linear.status();
  EXPECT_EQ(linear->weight().name(), "linear_0.w");
  EXPECT_EQ(linear->bias().name(), "linear_0.b");
  EXPECT_EQ(linear->weight().program(), &main);

  for (const Program* p : {&main, &startup}) {
    const ir::VarDesc* w = p->desc().global_block().FindVar("linear_0.w");
    const ir::VarDesc* b = p->desc().global_block().FindVar("linear_0.b");
    ASSERT_NE(w, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(w->shape, Shape({16, 4}));
    EXPECT_EQ(b->shape, Shape({4}));
    EXPECT_TRUE(w->persistable && w->is_parameter && !w->stop_gradient);
    EXPECT_TRUE(b->persistable && b->is_parameter && !b->stop_gradient);
  }
  EXPECT_TRUE(main.desc().global_block().ops().empty());
  ASSERT_THAT(OpTypes(startup), ElementsAre("uniform_random", "fill_constant"));
  const ir::OpDesc& init_w = startup.desc().global_block().ops()[0];
  EXPECT_THAT(init_w.Output("Out"), ElementsAre("linear_0.w"));
  const double limit = std::sqrt(6.0 / 20.0);
  EXPECT_DOUBLE_EQ(init_w.attrs.GetFloat("max").value(), limit);
  EXPECT_DOUBLE_EQ(init_w.attrs.GetFloat("min").value(), -limit);
  EXPECT_THAT(startup.desc().global_block().ops()[1].Output("Out"), ElementsAre("linear_0.b"));

  Var x = Data("x", Shape({8, 16})).value();
  absl::StatusOr<Var> y = (*linear)(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->shape(), Shape({8, 4}));
  EXPECT_THAT(OpTypes(main), ElementsAre("matmul", "add"));
  EXPECT_THAT(OpTypes(startup), ElementsAre("uniform_random", "fill_constant"));

  absl::StatusOr<nn::Linear> second = nn::Linear::Create(4, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->weight().name(), "linear_1.w");
}

TEST_F(BuilderLayersTest, LinearInitializationIsDeterministicAndBounded) {
  auto build = [&](Program& main, Program& startup, std::optional<int64_t> seed) {
    ProgramGuard guard(main, startup);
    nn::LinearOptions options;
    options.seed = seed;
    nn::Linear a = nn::Linear::Create(8, 6, options).value();
    nn::Linear b = nn::Linear::Create(8, 6, options).value();
    return std::make_pair(a, b);
  };
  Program main1(&registry_), startup1(&registry_), main2(&registry_), startup2(&registry_);
  auto [a1, b1] = build(main1, startup1, std::nullopt);
  auto [a2, b2] = build(main2, startup2, std::nullopt);
  EXPECT_EQ(startup1.desc(), startup2.desc());

  Scope s1, s2;
  ASSERT_TRUE(RunProgram(ctx_, startup1.desc(), &s1).ok());
  ASSERT_TRUE(RunProgram(ctx_, startup2.desc(), &s2).ok());
  std::vector<float> w_a = Fetch<float>(s1, a1.weight().name()).value();
  EXPECT_EQ(w_a, Fetch<float>(s2, a2.weight().name()).value());
  // Two layers of one program do not start alike.
  EXPECT_NE(w_a, Fetch<float>(s1, b1.weight().name()).value());
  const float limit = static_cast<float>(std::sqrt(6.0 / 14.0));
  float lo = 0, hi = 0;
  for (float v : w_a) {
    EXPECT_LE(std::abs(v), limit);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -limit / 4);  // spread over the range, not a constant
  EXPECT_GT(hi, limit / 4);
  EXPECT_EQ(Fetch<float>(s1, a1.bias().name()).value(), std::vector<float>(6, 0.0f));

  // An explicit seed is the initializer's seed.
  Program main3(&registry_), startup3(&registry_);
  build(main3, startup3, 1234);
  EXPECT_EQ(startup3.desc().global_block().ops()[0].attrs.GetInt("seed").value(), 1234);
}

TEST_F(BuilderLayersTest, LinearComputesXTimesWPlusB) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  nn::LinearOptions options;
  options.dtype = DataType::kF64;
  nn::Linear linear = nn::Linear::Create(3, 2, options).value();
  Var x = Data("x", Shape({2, 3}), DataType::kF64).value();
  Var y = linear(x).value();

  Scope scope;
  ASSERT_TRUE(RunProgram(ctx_, startup.desc(), &scope).ok());
  ASSERT_TRUE(
      Feed(ctx_, &scope, linear.bias().name(), std::vector<double>{0.5, -1.0}, Shape({2})).ok());
  const std::vector<double> xv = {1, 2, 3, -1, 0, 2};
  ASSERT_TRUE(Feed(ctx_, &scope, "x", xv, Shape({2, 3})).ok());
  ASSERT_TRUE(RunProgram(ctx_, main.desc(), &scope).ok());
  const std::vector<double> w = Fetch<double>(scope, linear.weight().name()).value();
  const std::vector<double> got = Fetch<double>(scope, y.name()).value();
  const double b[2] = {0.5, -1.0};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      double want = b[j];
      for (int k = 0; k < 3; ++k) want += xv[i * 3 + k] * w[k * 2 + j];
      EXPECT_NEAR(got[i * 2 + j], want, 1e-12);
    }
  }
}

TEST_F(BuilderLayersTest, LinearErrors) {
  absl::StatusOr<nn::Linear> outside = nn::Linear::Create(2, 2);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);

  Program main(&registry_), startup(&registry_), other(&registry_), other_startup(&registry_);
  Var foreign;
  {
    ProgramGuard guard(other, other_startup);
    foreign = Data("x", Shape({1, 2})).value();
  }
  ProgramGuard guard(main, startup);
  EXPECT_EQ(nn::Linear::Create(0, 2).status().code(), absl::StatusCode::kInvalidArgument);
  nn::LinearOptions ints;
  ints.dtype = DataType::kI32;
  EXPECT_EQ(nn::Linear::Create(2, 2, ints).status().code(), absl::StatusCode::kInvalidArgument);
  nn::Linear linear = nn::Linear::Create(2, 2).value();
  absl::StatusOr<Var> y = linear(foreign);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(y.status().message(), HasSubstr("another Program"));
  Var wrong = Data("wrong", Shape({1, 3})).value();
  absl::StatusOr<Var> bad = linear(wrong);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("matmul"));
}

TEST_F(BuilderLayersTest, LossesAreScalarsAndAgreeAcrossModes) {
  const std::vector<float> pred = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.5f};
  const std::vector<float> target = {1.0f, -1.5f, 1.0f, 0.0f, 1.0f, 0.5f};
  const std::vector<int64_t> classes = {2, 0};

  Program main(&registry_), startup(&registry_);
  Var mse, xent;
  {
    ProgramGuard guard(main, startup);
    Var p = Data("p", Shape({2, 3})).value();
    Var t = Data("t", Shape({2, 3})).value();
    Var c = Data("c", Shape({2, 1}), DataType::kI64).value();
    mse = nn::MseLoss(p, t).value();
    xent = nn::SoftmaxCrossEntropyLoss(p, c).value();
  }
  EXPECT_EQ(mse.shape().NumElements(), 1);
  EXPECT_EQ(xent.shape().NumElements(), 1);
  Scope scope;
  ASSERT_TRUE(Feed(ctx_, &scope, "p", pred, Shape({2, 3})).ok());
  ASSERT_TRUE(Feed(ctx_, &scope, "t", target, Shape({2, 3})).ok());
  ASSERT_TRUE(Feed(ctx_, &scope, "c", classes, Shape({2, 1})).ok());
  ASSERT_TRUE(RunProgram(ctx_, main.desc(), &scope).ok());
  const float static_mse = Fetch<float>(scope, mse.name()).value()[0];
  const float static_xent = Fetch<float>(scope, xent.name()).value()[0];

  double want_mse = 0;
  for (size_t i = 0; i < pred.size(); ++i)
    want_mse += (pred[i] - target[i]) * (pred[i] - target[i]);
  want_mse /= pred.size();
  EXPECT_NEAR(static_mse, want_mse, 1e-6);
  double want_xent = 0;
  for (int r = 0; r < 2; ++r) {
    double z = 0;
    for (int k = 0; k < 3; ++k) z += std::exp(pred[r * 3 + k]);
    want_xent += std::log(z) - pred[r * 3 + classes[r]];
  }
  want_xent /= 2;
  EXPECT_NEAR(static_xent, want_xent, 1e-6);

  eager::Tensor p = ctx_.FromVector(pred, Shape({2, 3})).value();
  eager::Tensor t = ctx_.FromVector(target, Shape({2, 3})).value();
  eager::Tensor c = ctx_.FromVector(classes, Shape({2, 1})).value();
  Value eager_mse = nn::MseLoss(Value(p), Value(t)).value();
  Value eager_xent = nn::SoftmaxCrossEntropyLoss(Value(p), Value(c)).value();
  EXPECT_EQ(eager_mse.tensor().ToVector<float>().value()[0], static_mse);
  EXPECT_EQ(eager_xent.tensor().ToVector<float>().value()[0], static_xent);
}

}  // namespace
}  // namespace sluice::framework::builder_layers_test
