// framework/optim/optimizer.h on the seed example (x [16, 16] -> Linear(16, 1) -> MSELoss):
// Minimize declares its state in both programs with initializers in startup and appends one
// in-place update per parameter; after startup and one step of main (reference runner) SGD
// moved each parameter by -lr * grad and Adam's first step matches a hand computation of
// the adam op's update; twenty Adam steps lower the loss.
#include <cmath>

#include "core/status.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "framework/optim/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_reference_runner.h"

namespace sluice::framework::optim_optimizer_test {
namespace {

using reference::Feed;
using reference::Fetch;
using reference::RunProgram;
using reference::Scope;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ParamGrads = std::vector<std::pair<Var, Var>>;

class OptimTest : public ::testing::Test {
 protected:
  OptimTest() : ctx_(reference::NewCpuContext()), main_(&registry_), startup_(&registry_) {
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  // The seed example's forward program; then `optimizer.Minimize(loss)`.
  ParamGrads BuildSeedExample(Optimizer& optimizer) {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({16, 16})).value();
    Var label = Data("label", Shape({16, 1})).value();
    nn::Linear linear = nn::Linear::Create(16, 1).value();
    loss_ = nn::MseLoss(linear(x).value(), label).value();
    absl::StatusOr<ParamGrads> pairs = optimizer.Minimize(loss_);
    SLUICE_CHECK(pairs.ok());
    return *pairs;
  }

  // Inputs that vary by row (the seed feeds ones; varied rows exercise every weight).
  void FeedSeedInputs(Scope* scope) {
    std::vector<float> x(16 * 16), label(16);
    for (int i = 0; i < 16 * 16; ++i) x[i] = 0.5f + 0.5f * std::sin(0.37f * i);
    for (int i = 0; i < 16; ++i) label[i] = 1.0f + 0.25f * std::cos(0.9f * i);
    SLUICE_CHECK(Feed(ctx_, scope, "x", x, Shape({16, 16})).ok());
    SLUICE_CHECK(Feed(ctx_, scope, "label", label, Shape({16, 1})).ok());
  }

  std::vector<std::string> OpTypes(const Program& p) const {
    std::vector<std::string> types;
    for (const ir::OpDesc& op : p.desc().global_block().ops()) types.push_back(op.type);
    return types;
  }

  ops::OpRegistry registry_;
  eager::Context ctx_;
  Program main_;
  Program startup_;
  Var loss_;
};

TEST_F(OptimTest, SgdStepMovesParametersByMinusLearningRateTimesGradient) {
  Sgd sgd(0.1);
  ParamGrads pairs = BuildSeedExample(sgd);
  ASSERT_EQ(pairs.size(), 2u);
  // Startup: the layer's initializers, then the learning rate.
  EXPECT_THAT(OpTypes(startup_), ElementsAre("uniform_random", "fill_constant", "fill_constant"));
  const ir::OpDesc& lr_init = startup_.desc().global_block().ops()[2];
  EXPECT_EQ(lr_init.attrs.GetFloat("value").value(), 0.1);
  const std::string lr = lr_init.Output("Out")[0];
  const ir::VarDesc* lr_main = main_.desc().global_block().FindVar(lr);
  ASSERT_NE(lr_main, nullptr);
  EXPECT_TRUE(lr_main->persistable);
  EXPECT_EQ(lr_main->shape, Shape({1}));
  // Main ends with one in-place sgd per parameter.
  const std::vector<ir::OpDesc>& ops = main_.desc().global_block().ops();
  ASSERT_GE(ops.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const ir::OpDesc& update = ops[ops.size() - 2 + k];
    EXPECT_EQ(update.type, "sgd");
    EXPECT_THAT(update.Input("Param"), ElementsAre(pairs[k].first.name()));
    EXPECT_THAT(update.Input("Grad"), ElementsAre(pairs[k].second.name()));
    EXPECT_THAT(update.Input("LearningRate"), ElementsAre(lr));
    EXPECT_THAT(update.Output("ParamOut"), ElementsAre(pairs[k].first.name()));
  }

  Scope scope;
  ASSERT_TRUE(RunProgram(ctx_, startup_.desc(), &scope).ok());
  std::vector<std::vector<float>> before;
  for (const auto& [param, grad] : pairs)
    before.push_back(Fetch<float>(scope, param.name()).value());
  FeedSeedInputs(&scope);
  absl::Status step = RunProgram(ctx_, main_.desc(), &scope);
  ASSERT_TRUE(step.ok()) << step;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const std::vector<float> after = Fetch<float>(scope, pairs[k].first.name()).value();
    const std::vector<float> grad = Fetch<float>(scope, pairs[k].second.name()).value();
    double norm = 0;
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_NEAR(after[i], before[k][i] - 0.1 * grad[i], 1e-6) << pairs[k].first.name() << i;
      norm += std::abs(grad[i]);
    }
    EXPECT_GT(norm, 1e-3);
  }
}

TEST_F(OptimTest, AdamFirstStepMatchesHandComputation) {
  constexpr double kLr = 0.01, kBeta1 = 0.8, kBeta2 = 0.95, kEps = 1e-6;
  Adam adam(kLr, kBeta1, kBeta2, kEps);
  ParamGrads pairs = BuildSeedExample(adam);
  ASSERT_EQ(pairs.size(), 2u);

  // Per parameter: moment1, moment2, beta1_pow, beta2_pow in both programs, persistable,
  // initialized in startup only.
  const std::vector<ir::OpDesc>& init = startup_.desc().global_block().ops();
  ASSERT_EQ(init.size(), 2u + 1u + 2u * 4u);
  const std::vector<ir::OpDesc>& ops = main_.desc().global_block().ops();
  for (size_t k = 0; k < 2; ++k) {
    const ir::OpDesc& update = ops[ops.size() - 2 + k];
    ASSERT_EQ(update.type, "adam");
    EXPECT_EQ(update.attrs.GetFloat("beta1").value(), kBeta1);
    EXPECT_EQ(update.attrs.GetFloat("epsilon").value(), kEps);
    const std::string& param = pairs[k].first.name();
    EXPECT_THAT(update.Output("ParamOut"), ElementsAre(param));
    for (const auto& [in, out, value] : std::vector<std::tuple<std::string, std::string, double>>{
             {"Moment1", "Moment1Out", 0.0},
             {"Moment2", "Moment2Out", 0.0},
             {"Beta1Pow", "Beta1PowOut", kBeta1},
             {"Beta2Pow", "Beta2PowOut", kBeta2}}) {
      ASSERT_EQ(update.Input(in).size(), 1u);
      const std::string& state = update.Input(in)[0];
      EXPECT_THAT(update.Output(out), ElementsAre(state));
      EXPECT_EQ(state.rfind(param + "_", 0), 0u) << state;
      for (const Program* p : {&main_, &startup_}) {
        const ir::VarDesc* var = p->desc().global_block().FindVar(state);
        ASSERT_NE(var, nullptr) << state;
        EXPECT_TRUE(var->persistable);
        EXPECT_FALSE(var->is_parameter);
      }
      int initializers = 0;
      for (const ir::OpDesc& op : init) {
        if (op.Output("Out") == std::vector<std::string>{state}) {
          ++initializers;
          EXPECT_EQ(op.type, "fill_constant");
          EXPECT_DOUBLE_EQ(op.attrs.GetFloat("value").value(), value) << state;
        }
      }
      EXPECT_EQ(initializers, 1) << state;
    }
  }

  Scope scope;
  ASSERT_TRUE(RunProgram(ctx_, startup_.desc(), &scope).ok());
  std::vector<std::vector<float>> before;
  for (const auto& [param, grad] : pairs)
    before.push_back(Fetch<float>(scope, param.name()).value());
  FeedSeedInputs(&scope);
  absl::Status step = RunProgram(ctx_, main_.desc(), &scope);
  ASSERT_TRUE(step.ok()) << step;

  const std::vector<ir::OpDesc>& main_ops = main_.desc().global_block().ops();
  for (size_t k = 0; k < pairs.size(); ++k) {
    const ir::OpDesc& update = main_ops[main_ops.size() - 2 + k];
    const std::vector<float> after = Fetch<float>(scope, pairs[k].first.name()).value();
    const std::vector<float> g = Fetch<float>(scope, pairs[k].second.name()).value();
    const std::vector<float> m1 = Fetch<float>(scope, update.Input("Moment1")[0]).value();
    const std::vector<float> m2 = Fetch<float>(scope, update.Input("Moment2")[0]).value();
    EXPECT_NEAR(Fetch<float>(scope, update.Input("Beta1Pow")[0]).value()[0], kBeta1 * kBeta1, 1e-6);
    EXPECT_NEAR(Fetch<float>(scope, update.Input("Beta2Pow")[0]).value()[0], kBeta2 * kBeta2, 1e-6);
    // Step t = 1: Beta1Pow = beta1, Beta2Pow = beta2.
    const double lr_t = kLr * std::sqrt(1 - kBeta2) / (1 - kBeta1);
    const double eps_t = kEps * std::sqrt(1 - kBeta2);
    for (size_t i = 0; i < after.size(); ++i) {
      const double want_m1 = (1 - kBeta1) * g[i];
      const double want_m2 = (1 - kBeta2) * g[i] * g[i];
      EXPECT_NEAR(m1[i], want_m1, 1e-6);
      EXPECT_NEAR(m2[i], want_m2, 1e-6);
      const double want = before[k][i] - lr_t * want_m1 / (std::sqrt(want_m2) + eps_t);
      EXPECT_NEAR(after[i], want, 1e-6) << pairs[k].first.name() << "[" << i << "]";
      // The first Adam step moves by about lr in the direction against the gradient.
      if (std::abs(g[i]) > 1e-3) {
        EXPECT_NEAR(std::abs(after[i] - before[k][i]), kLr, 1e-4);
        EXPECT_LT((after[i] - before[k][i]) * g[i], 0.0);
      }
    }
  }
}

TEST_F(OptimTest, AdamLowersTheSeedExampleLossOverTwentySteps) {
  Adam adam(0.01);
  BuildSeedExample(adam);
  // Row-varied inputs, then the seed's own feed (all ones).
  for (bool ones : {false, true}) {
    Scope scope;
    ASSERT_TRUE(RunProgram(ctx_, startup_.desc(), &scope).ok());
    if (ones) {
      ASSERT_TRUE(Feed(ctx_, &scope, "x", std::vector<float>(256, 1.0f), Shape({16, 16})).ok());
      ASSERT_TRUE(Feed(ctx_, &scope, "label", std::vector<float>(16, 1.0f), Shape({16, 1})).ok());
    } else {
      FeedSeedInputs(&scope);
    }
    std::vector<float> losses;
    for (int step = 0; step < 20; ++step) {
      absl::Status run = RunProgram(ctx_, main_.desc(), &scope);
      ASSERT_TRUE(run.ok()) << run;
      losses.push_back(Fetch<float>(scope, loss_.name()).value()[0]);
      ASSERT_TRUE(std::isfinite(losses.back()));
    }
    EXPECT_LT(losses.back(), 0.5f * losses.front()) << ::testing::PrintToString(losses);
    for (size_t i = 1; i < losses.size(); ++i) {
      EXPECT_LT(losses[i], losses[i - 1])
          << "step " << i << ": " << ::testing::PrintToString(losses);
    }
  }
}

TEST_F(OptimTest, MinimizeNeedsAGuardAndTheMainProgramsLoss) {
  Var loss;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({2, 3})).value();
    nn::Linear linear = nn::Linear::Create(3, 1).value();
    loss = fn::ReduceMean(linear(x).value()).value().var();
  }
  Sgd sgd(0.1);
  absl::StatusOr<ParamGrads> outside = sgd.Minimize(loss);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kFailedPrecondition);

  Program other(&registry_), other_startup(&registry_);
  ProgramGuard guard(other, other_startup);
  absl::StatusOr<ParamGrads> foreign = sgd.Minimize(loss);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(foreign.status().message(), HasSubstr(loss.name()));
}

TEST_F(OptimTest, FailedMinimizeLeavesBothProgramsUnchanged) {
  Var loss;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({2, 3})).value();
    nn::Linear linear = nn::Linear::Create(3, 1).value();
    loss = fn::ReduceMean(linear(x).value()).value().var();
  }
  const ir::ProgramDesc main_before = main_.desc();
  const ir::ProgramDesc startup_before = startup_.desc();
  ProgramGuard guard(main_, startup_);
  Adam bad(0.01, /*beta1=*/1.5);  // the adam op rejects beta1 outside [0, 1)
  absl::StatusOr<ParamGrads> result = bad.Minimize(loss);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("beta1"));
  EXPECT_EQ(main_.desc(), main_before);
  EXPECT_EQ(startup_.desc(), startup_before);
}

}  // namespace
}  // namespace sluice::framework::optim_optimizer_test
