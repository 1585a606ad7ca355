// framework/autodiff/backward.h: the structure AppendBackward gives (grad ops in reverse
// order, sums where a variable is used more than once, pruning by stop_gradient and
// no_grad_set, zeros for an unused split output, the optional SoftmaxGrad left out) and
// its numbers: gradients run by the reference runner against central finite differences
// of the forward program, in f64.
#include <cmath>

#include "absl/strings/match.h"
#include "core/status.h"
#include "framework/autodiff/backward.h"
#include "framework/builder/functional.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_reference_runner.h"

namespace sluice::framework::autodiff_backward_test {
namespace {

using reference::Feed;
using reference::Fetch;
using reference::RunProgram;
using reference::Scope;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ParamGrads = std::vector<std::pair<Var, Var>>;

std::vector<double> Values(int64_t n, double scale, double phase) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(1.3 * static_cast<double>(i) + phase);
  return v;
}

nn::LinearOptions F64() {
  nn::LinearOptions options;
  options.dtype = DataType::kF64;
  return options;
}

class AutodiffTest : public ::testing::Test {
 protected:
  AutodiffTest() : ctx_(reference::NewCpuContext()), main_(&registry_), startup_(&registry_) {
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  const std::vector<ir::OpDesc>& Ops() const { return main_.desc().global_block().ops(); }
  std::vector<std::string> OpTypes(size_t from) const {
    std::vector<std::string> types;
    for (size_t i = from; i < Ops().size(); ++i) types.push_back(Ops()[i].type);
    return types;
  }
  bool HasVar(absl::string_view name) const { return main_.desc().global_block().HasVar(name); }
  std::vector<std::string> Names(const ParamGrads& pairs) const {
    std::vector<std::string> names;
    for (const auto& [param, grad] : pairs) {
      EXPECT_EQ(grad.name(), param.name() + "@GRAD");
      EXPECT_EQ(grad.shape(), param.shape());
      EXPECT_EQ(grad.dtype(), param.dtype());
      names.push_back(param.name());
    }
    return names;
  }

  // Appends backward, runs startup then main on `feeds`, and checks every parameter
  // gradient against central differences of the loss computed by the forward program.
  void CheckGradients(const Var& loss, Scope feeds, ParamGrads* out = nullptr) {
    const ir::ProgramDesc forward = main_.desc();
    absl::StatusOr<ParamGrads> pairs = AppendBackward(loss);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    ASSERT_FALSE(pairs->empty());
    Scope scope = std::move(feeds);
    ASSERT_TRUE(RunProgram(ctx_, startup_.desc(), &scope).ok());
    absl::Status run = RunProgram(ctx_, main_.desc(), &scope);
    ASSERT_TRUE(run.ok()) << run;
    constexpr double kStep = 1e-6;
    for (const auto& [param, grad] : *pairs) {
      const std::vector<double> analytic = Fetch<double>(scope, grad.name()).value();
      const std::vector<double> base = Fetch<double>(scope, param.name()).value();
      ASSERT_EQ(analytic.size(), base.size());
      double largest = 0;
      for (size_t j = 0; j < base.size(); ++j) {
        double loss_at[2];
        for (int side = 0; side < 2; ++side) {
          std::vector<double> moved = base;
          moved[j] += side == 0 ? kStep : -kStep;
          Scope probe = scope;
          ASSERT_TRUE(Feed(ctx_, &probe, param.name(), moved, param.shape()).ok());
          ASSERT_TRUE(RunProgram(ctx_, forward, &probe).ok());
          loss_at[side] = Fetch<double>(probe, loss.name()).value()[0];
        }
        const double numeric = (loss_at[0] - loss_at[1]) / (2 * kStep);
        EXPECT_NEAR(analytic[j], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
            << param.name() << "[" << j << "]";
        largest = std::max(largest, std::abs(analytic[j]));
      }
      EXPECT_GT(largest, 1e-3) << "gradient of " << param.name() << " is all but zero";
    }
    if (out != nullptr) *out = *pairs;
  }

  Scope FeedsF64(std::initializer_list<std::pair<std::string, Shape>> feeds) {
    Scope scope;
    double phase = 0.3;
    for (const auto& [name, shape] : feeds) {
      SLUICE_CHECK(Feed(ctx_, &scope, name, Values(shape.NumElements(), 1.0, phase), shape).ok());
      phase += 0.7;
    }
    return scope;
  }

  ops::OpRegistry registry_;
  eager::Context ctx_;
  Program main_;
  Program startup_;
};

TEST_F(AutodiffTest, GradOpsFollowTheForwardOpsInReverse) {
  ProgramGuard guard(main_, startup_);
  Var x = Data("x", Shape({4, 3})).value();
  Var label = Data("label", Shape({4, 2})).value();
  nn::Linear linear = nn::Linear::Create(3, 2).value();
  Var h = fn::Relu(linear(x).value()).value().var();
  Var loss = nn::MseLoss(h, label).value();
  const size_t forward_ops = Ops().size();
  ASSERT_EQ(forward_ops, 6u);

  absl::StatusOr<ParamGrads> pairs = AppendBackward(loss);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_THAT(Names(*pairs), ElementsAre("linear_0.w", "linear_0.b"));
  EXPECT_THAT(OpTypes(forward_ops),
              ElementsAre("fill_constant", "reduce_mean_grad", "square_grad", "sub_grad",
                          "relu_grad", "add_grad", "matmul_grad"));
  const ir::OpDesc& seed = Ops()[forward_ops];
  EXPECT_THAT(seed.Output("Out"), ElementsAre(loss.name() + "@GRAD"));
  EXPECT_EQ(seed.attrs.GetFloat("value").value(), 1.0);
  EXPECT_EQ(seed.attrs.GetString("dtype").value(), "f32");
  const Shape loss_shape = loss.shape();
  const std::vector<int64_t> loss_dims(loss_shape.dims().begin(), loss_shape.dims().end());
  EXPECT_EQ(seed.attrs.GetInts("shape").value(), loss_dims);

  // Data vars get no gradient: their grad-op outputs go to scratch variables.
  EXPECT_FALSE(HasVar("x@GRAD"));
  EXPECT_FALSE(HasVar("label@GRAD"));
  EXPECT_THAT(Ops().back().Output("XGrad")[0], StartsWith("x@GRAD@UNUSED"));
  EXPECT_THAT(Ops()[forward_ops + 3].Output("YGrad")[0], StartsWith("label@GRAD@UNUSED"));
  // Intermediate gradients take their forward variable's meta.
  Var h_grad(&main_, h.name() + "@GRAD");
  EXPECT_EQ(h_grad.shape(), h.shape());
  EXPECT_EQ(h_grad.dtype(), DataType::kF32);
  EXPECT_TRUE(main_.desc().Validate().ok());
}

TEST_F(AutodiffTest, GradientsOfAVarUsedThriceAreSummed) {
  Var loss;
  std::string h_name;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({3, 2}), DataType::kF64).value();
    nn::Linear linear = nn::Linear::Create(2, 3, F64()).value();
    Var h = linear(x).value();
    h_name = h.name();
    Value hh = fn::Mul(h, h).value();
    Value y = fn::Add(hh, h).value();
    loss = fn::ReduceMean(y).value().var();
  }
  const size_t forward_ops = Ops().size();
  ParamGrads pairs;
  CheckGradients(loss, FeedsF64({{"x", Shape({3, 2})}}), &pairs);
  EXPECT_THAT(Names(pairs), ElementsAre("linear_0.w", "linear_0.b"));
  EXPECT_THAT(OpTypes(forward_ops), ElementsAre("fill_constant", "reduce_mean_grad", "add_grad",
                                                "mul_grad", "sum", "add_grad", "matmul_grad"));
  const std::string grad = h_name + "@GRAD";
  const ir::OpDesc& sum = Ops()[forward_ops + 4];
  EXPECT_THAT(sum.Input("X"),
              ElementsAre(grad + "@RENAME@0", grad + "@RENAME@1", grad + "@RENAME@2"));
  EXPECT_THAT(sum.Output("Out"), ElementsAre(grad));
  EXPECT_THAT(Ops()[forward_ops + 2].Output("YGrad"), ElementsAre(grad + "@RENAME@0"));
  EXPECT_THAT(Ops()[forward_ops + 3].Output("XGrad"), ElementsAre(grad + "@RENAME@1"));
  EXPECT_THAT(Ops()[forward_ops + 3].Output("YGrad"), ElementsAre(grad + "@RENAME@2"));
  EXPECT_THAT(Ops()[forward_ops + 5].Input("OutGrad"), ElementsAre(grad));
}

class AutodiffPruneTest : public AutodiffTest {
 protected:
  // x -> linear_0 -> relu -> linear_1 -> mse(label).
  void Build() {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({4, 3})).value();
    Var label = Data("label", Shape({4, 2})).value();
    nn::Linear l1 = nn::Linear::Create(3, 5).value();
    nn::Linear l2 = nn::Linear::Create(5, 2).value();
    hidden_ = fn::Relu(l1(x).value()).value().var();
    loss_ = nn::MseLoss(l2(hidden_).value(), label).value();
    forward_ops_ = Ops().size();
  }

  Var hidden_;
  Var loss_;
  size_t forward_ops_ = 0;
};

TEST_F(AutodiffPruneTest, StopGradientCutsTheGraph) {
  Build();
  hidden_.set_stop_gradient(true);
  absl::StatusOr<ParamGrads> pairs = AppendBackward(loss_);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_THAT(Names(*pairs), ElementsAre("linear_1.w", "linear_1.b"));
  EXPECT_THAT(OpTypes(forward_ops_), ElementsAre("fill_constant", "reduce_mean_grad", "square_grad",
                                                 "sub_grad", "add_grad", "matmul_grad"));
  EXPECT_FALSE(HasVar(hidden_.name() + "@GRAD"));
  EXPECT_FALSE(HasVar("linear_0.w@GRAD"));
}

TEST_F(AutodiffPruneTest, NoGradSetDropsOutputsAndOpsLeftWithNothing) {
  Build();
  absl::StatusOr<ParamGrads> pairs = AppendBackward(loss_, {"linear_0.w"});
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_THAT(Names(*pairs), ElementsAre("linear_0.b", "linear_1.w", "linear_1.b"));
  // linear_0's matmul_grad would only write x's and linear_0.w's gradients: dropped.
  EXPECT_THAT(OpTypes(forward_ops_),
              ElementsAre("fill_constant", "reduce_mean_grad", "square_grad", "sub_grad",
                          "add_grad", "matmul_grad", "relu_grad", "add_grad"));
  EXPECT_FALSE(HasVar("linear_0.w@GRAD"));
  EXPECT_TRUE(HasVar("linear_0.b@GRAD"));
}

TEST_F(AutodiffTest, UnusedSplitOutputGetsZeros) {
  Var loss;
  std::string unused;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({4, 4}), DataType::kF64).value();
    nn::Linear linear = nn::Linear::Create(4, 4, F64()).value();
    Var h = linear(x).value();
    auto parts = AppendOp(main_, "split", {{h}},
                          vm::AttrMap().Set("num", int64_t{2}).Set("axis", int64_t{1}));
    ASSERT_TRUE(parts.ok()) << parts.status();
    unused = (*parts)[0][1].name();
    loss = fn::ReduceMean(fn::Square((*parts)[0][0]).value()).value().var();
  }
  const size_t forward_ops = Ops().size();
  CheckGradients(loss, FeedsF64({{"x", Shape({4, 4})}}));
  EXPECT_THAT(OpTypes(forward_ops),
              ElementsAre("fill_constant", "reduce_mean_grad", "square_grad", "fill_zeros_like",
                          "concat", "add_grad", "matmul_grad"));
  const ir::OpDesc& zeros = Ops()[forward_ops + 3];
  EXPECT_THAT(zeros.Input("X"), ElementsAre(unused));
  EXPECT_THAT(zeros.Output("Out"), ElementsAre(unused + "@GRAD"));
  EXPECT_EQ(Ops()[forward_ops + 4].Input("X").size(), 2u);
}

TEST_F(AutodiffTest, SoftmaxCrossEntropyGradientsMatchFiniteDifferences) {
  Var loss;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({5, 3}), DataType::kF64).value();
    Var label = Data("label", Shape({5, 1}), DataType::kI64).value();
    nn::Linear linear = nn::Linear::Create(3, 4, F64()).value();
    loss = nn::SoftmaxCrossEntropyLoss(linear(x).value(), label).value();
  }
  const size_t forward_ops = Ops().size();
  Scope feeds = FeedsF64({{"x", Shape({5, 3})}});
  ASSERT_TRUE(Feed(ctx_, &feeds, "label", std::vector<int64_t>{0, 3, 1, 2, 3}, Shape({5, 1})).ok());
  CheckGradients(loss, std::move(feeds));
  // The softmax output is unused: its optional gradient input is left out, not zero-filled.
  EXPECT_THAT(OpTypes(forward_ops),
              ElementsAre("fill_constant", "reduce_mean_grad", "softmax_with_cross_entropy_grad",
                          "add_grad", "matmul_grad"));
  EXPECT_THAT(Ops()[forward_ops + 2].Input("SoftmaxGrad"), IsEmpty());
  EXPECT_THAT(Ops()[forward_ops + 2].Input("LossGrad"), ::testing::SizeIs(1));
}

TEST_F(AutodiffTest, TwoLayerReluMseGradientsMatchFiniteDifferences) {
  Var loss;
  {
    ProgramGuard guard(main_, startup_);
    Var x = Data("x", Shape({5, 3}), DataType::kF64).value();
    Var label = Data("label", Shape({5, 2}), DataType::kF64).value();
    nn::Linear l1 = nn::Linear::Create(3, 4, F64()).value();
    nn::Linear l2 = nn::Linear::Create(4, 2, F64()).value();
    Var h = fn::Relu(l1(x).value()).value().var();
    loss = nn::MseLoss(l2(h).value(), label).value();
  }
  ParamGrads pairs;
  CheckGradients(loss, FeedsF64({{"x", Shape({5, 3})}, {"label", Shape({5, 2})}}), &pairs);
  EXPECT_THAT(Names(pairs), ElementsAre("linear_0.w", "linear_0.b", "linear_1.w", "linear_1.b"));
}

TEST_F(AutodiffTest, GradOpsRunOnTheirForwardOpsStream) {
  ProgramGuard guard(main_, startup_);
  Var x = Data("x", Shape({4, 3})).value();
  nn::Linear linear = nn::Linear::Create(3, 2).value();
  Var h = linear(x).value();
  const vm::AttrMap on_side = vm::AttrMap().Set("stream", std::string("compute:1"));
  Var r = AppendOp(main_, "relu", {{h}}, on_side).value()[0][0];
  Var loss = fn::ReduceMean(r).value().var();
  const size_t forward_ops = Ops().size();
  ASSERT_TRUE(AppendBackward(loss).ok());
  ASSERT_THAT(OpTypes(forward_ops), ElementsAre("fill_constant", "reduce_mean_grad", "relu_grad",
                                                "add_grad", "matmul_grad"));
  EXPECT_EQ(Ops()[forward_ops + 2].attrs.GetString("stream").value(), "compute:1");
  EXPECT_FALSE(Ops()[forward_ops + 1].attrs.GetString("stream").ok());
  EXPECT_FALSE(Ops()[forward_ops + 3].attrs.GetString("stream").ok());
}

TEST_F(AutodiffTest, ErrorsLeaveTheProgramUnchanged) {
  ProgramGuard guard(main_, startup_);
  Var x = Data("x", Shape({4, 3})).value();
  nn::Linear linear = nn::Linear::Create(3, 2).value();
  Var h = linear(x).value();
  const ir::ProgramDesc before = main_.desc();

  absl::StatusOr<ParamGrads> not_scalar = AppendBackward(h);
  EXPECT_EQ(not_scalar.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_scalar.status().message(), HasSubstr(h.name()));
  EXPECT_EQ(main_.desc(), before);

  // fill_zeros_like has no grad maker.
  Var zeros = AppendOp(main_, "fill_zeros_like", {{h}}).value()[0][0];
  Var loss = fn::ReduceMean(zeros).value().var();
  const ir::ProgramDesc with_zeros = main_.desc();
  absl::StatusOr<ParamGrads> no_maker = AppendBackward(loss);
  EXPECT_EQ(no_maker.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(no_maker.status().message(), HasSubstr("'fill_zeros_like'"));
  EXPECT_EQ(main_.desc(), with_zeros);
}

TEST_F(AutodiffTest, SecondBackwardOfOneLossIsAlreadyExists) {
  ProgramGuard guard(main_, startup_);
  Var x = Data("x", Shape({4, 3})).value();
  nn::Linear linear = nn::Linear::Create(3, 1).value();
  Var loss = fn::ReduceMean(linear(x).value()).value().var();
  ASSERT_TRUE(AppendBackward(loss).ok());
  const ir::ProgramDesc once = main_.desc();
  absl::StatusOr<ParamGrads> twice = AppendBackward(loss);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(twice.status().message(), HasSubstr("@GRAD"));
  EXPECT_EQ(main_.desc(), once);
}

TEST_F(AutodiffTest, NothingToDifferentiateAppendsNothing) {
  ProgramGuard guard(main_, startup_);
  Var x = Data("x", Shape({4, 3})).value();
  Var loss = fn::ReduceMean(fn::Square(x).value()).value().var();
  const ir::ProgramDesc before = main_.desc();
  absl::StatusOr<ParamGrads> pairs = AppendBackward(loss);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_TRUE(pairs->empty());
  EXPECT_EQ(main_.desc(), before);
}

}  // namespace
}  // namespace sluice::framework::autodiff_backward_test
