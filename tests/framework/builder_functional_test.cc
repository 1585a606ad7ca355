// framework/builder/functional.h: one model function, written once over Values, gives the
// same numbers run eagerly on Tensors and built into a Program (run by the reference
// runner); mixing modes is an error naming the op; operand-less ops pick their mode from
// the guard.
#include <cmath>

#include "core/status.h"
#include "framework/builder/functional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_reference_runner.h"

namespace sluice::framework::builder_functional_test {
namespace {

using reference::Feed;
using reference::Fetch;
using reference::RunProgram;
using reference::Scope;
using ::testing::HasSubstr;

std::vector<float> Values(int64_t n, float scale, float phase) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.9f * static_cast<float>(i) + phase);
  return v;
}

// Touches every two-mode op; returns the values to compare.
absl::StatusOr<std::vector<Value>> Model(const Value& x, const Value& w, const Value& label) {
  SLUICE_ASSIGN_OR_RETURN(Value h0, fn::Matmul(x, w));  // [4, 5]
  SLUICE_ASSIGN_OR_RETURN(Value h1, fn::Scale(h0, 0.5, 0.1));
  SLUICE_ASSIGN_OR_RETURN(Value h, fn::Add(h0, h1));
  SLUICE_ASSIGN_OR_RETURN(Value a, fn::Relu(h));
  SLUICE_ASSIGN_OR_RETURN(Value s, fn::Sigmoid(h));
  SLUICE_ASSIGN_OR_RETURN(Value t, fn::Tanh(h));
  SLUICE_ASSIGN_OR_RETURN(Value e, fn::Exp(t));
  SLUICE_ASSIGN_OR_RETURN(Value es, fn::Add(e, s));
  SLUICE_ASSIGN_OR_RETURN(Value l, fn::Log(es));
  SLUICE_ASSIGN_OR_RETURN(Value h2, fn::Square(h));
  SLUICE_ASSIGN_OR_RETURN(Value h2e, fn::Add(h2, e));
  SLUICE_ASSIGN_OR_RETURN(Value q, fn::Sqrt(h2e));
  SLUICE_ASSIGN_OR_RETURN(Value aq, fn::Mul(a, q));
  SLUICE_ASSIGN_OR_RETURN(Value d, fn::Div(aq, e));
  SLUICE_ASSIGN_OR_RETURN(Value c, fn::Sub(d, l));  // [4, 5]
  SLUICE_ASSIGN_OR_RETURN(Value soft, fn::Softmax(c));
  SLUICE_ASSIGN_OR_RETURN(Value r, fn::Reshape(soft, {5, 4}));
  SLUICE_ASSIGN_OR_RETURN(Value tr, fn::Transpose(r, {1, 0}));  // [4, 5]
  SLUICE_ASSIGN_OR_RETURN(Value cat, fn::Concat({tr, c}, 1));   // [4, 10]
  SLUICE_ASSIGN_OR_RETURN(Value sum, fn::Sum({a, s, t}));
  SLUICE_ASSIGN_OR_RETURN(auto xent, fn::SoftmaxWithCrossEntropy(cat, label));
  SLUICE_ASSIGN_OR_RETURN(Value rs, fn::ReduceSum(cat, {1}, true));
  SLUICE_ASSIGN_OR_RETURN(Value rm, fn::ReduceMean(sum));
  SLUICE_ASSIGN_OR_RETURN(Value wx, fn::Matmul(w, x, true, true));  // [5, 4]
  return std::vector<Value>{cat, sum, xent.first, xent.second, rs, rm, wx};
}

class BuilderFunctionalTest : public ::testing::Test {
 protected:
  BuilderFunctionalTest() : ctx_(reference::NewCpuContext()) {
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  ops::OpRegistry registry_;
  eager::Context ctx_;
};

TEST_F(BuilderFunctionalTest, SameNumbersEagerlyAndThroughAProgram) {
  const std::vector<float> xv = Values(12, 1.0f, 0.2f);
  const std::vector<float> wv = Values(15, 0.7f, 1.1f);
  const std::vector<int64_t> labels = {0, 9, 3, 5};

  // Eager.
  eager::Tensor x = ctx_.FromVector(xv, Shape({4, 3})).value();
  eager::Tensor w = ctx_.FromVector(wv, Shape({3, 5})).value();
  eager::Tensor label = ctx_.FromVector(labels, Shape({4, 1})).value();
  absl::StatusOr<std::vector<Value>> eager_out = Model(x, w, label);
  ASSERT_TRUE(eager_out.ok()) << eager_out.status();

  // Static.
  Program main(&registry_), startup(&registry_);
  std::vector<Value> static_out;
  {
    ProgramGuard guard(main, startup);
    Var xs = Data("x", Shape({4, 3})).value();
    Var ws = Data("w", Shape({3, 5})).value();
    Var ls = Data("label", Shape({4, 1}), DataType::kI64).value();
    absl::StatusOr<std::vector<Value>> out = Model(xs, ws, ls);
    ASSERT_TRUE(out.ok()) << out.status();
    static_out = *out;
  }
  EXPECT_GE(main.desc().global_block().ops().size(), 20u);
  Scope scope;
  ASSERT_TRUE(Feed(ctx_, &scope, "x", xv, Shape({4, 3})).ok());
  ASSERT_TRUE(Feed(ctx_, &scope, "w", wv, Shape({3, 5})).ok());
  ASSERT_TRUE(Feed(ctx_, &scope, "label", labels, Shape({4, 1})).ok());
  absl::Status run = RunProgram(ctx_, main.desc(), &scope);
  ASSERT_TRUE(run.ok()) << run;

  ASSERT_EQ(eager_out->size(), static_out.size());
  for (size_t i = 0; i < static_out.size(); ++i) {
    ASSERT_TRUE(static_out[i].is_static());
    ASSERT_FALSE((*eager_out)[i].is_static());
    const eager::Tensor& t = (*eager_out)[i].tensor();
    EXPECT_EQ(t.shape(), static_out[i].var().shape()) << "output " << i;
    std::vector<float> want = t.ToVector<float>().value();
    absl::StatusOr<std::vector<float>> got = Fetch<float>(scope, static_out[i].var().name());
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size()) << "output " << i;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_TRUE(std::isfinite(want[k])) << "output " << i << "[" << k << "]";
      EXPECT_FLOAT_EQ((*got)[k], want[k]) << "output " << i << "[" << k << "]";
    }
  }
}

TEST_F(BuilderFunctionalTest, MixingModesFailsNamingTheOp) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({2})).value();
  eager::Tensor t = ctx_.FromVector(std::vector<float>{1, 2}, Shape({2})).value();
  absl::StatusOr<Value> sum = fn::Add(x, t);
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sum.status().message(), HasSubstr("'add'"));
  absl::StatusOr<Value> cat = fn::Concat({t, x});
  EXPECT_EQ(cat.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cat.status().message(), HasSubstr("'concat'"));
  EXPECT_EQ(fn::Sum(std::vector<Value>{}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(main.desc().global_block().ops().empty());
}

TEST_F(BuilderFunctionalTest, StaticErrorsComeFromAppendOp) {
  Program main(&registry_), startup(&registry_);
  ProgramGuard guard(main, startup);
  Var x = Data("x", Shape({2, 3})).value();
  absl::StatusOr<Value> bad = fn::Matmul(x, x);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("matmul"));
}

TEST_F(BuilderFunctionalTest, OperandlessOpsFollowTheGuard) {
  // Outside a guard without a context: nowhere to run.
  absl::StatusOr<Value> nowhere = fn::FillConstant(Shape({2}), 3.0);
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(nowhere.status().message(), HasSubstr("fill_constant"));

  // Outside a guard with a context: eager.
  absl::StatusOr<Value> eager_fill = fn::FillConstant(Shape({2, 2}), 3.0, DataType::kF64, &ctx_);
  ASSERT_TRUE(eager_fill.ok()) << eager_fill.status();
  ASSERT_FALSE(eager_fill->is_static());
  EXPECT_EQ(eager_fill->tensor().ToVector<double>().value(), std::vector<double>(4, 3.0));
  absl::StatusOr<Value> eager_rand =
      fn::UniformRandom(Shape({16}), -2.0, 2.0, /*seed=*/77, DataType::kF32, &ctx_);
  ASSERT_TRUE(eager_rand.ok()) << eager_rand.status();

  // Inside a guard: static, even with a context at hand.
  Program main(&registry_), startup(&registry_);
  Value fill = eager_fill.value(), rand = eager_rand.value();
  {
    ProgramGuard guard(main, startup);
    absl::StatusOr<Value> f = fn::FillConstant(Shape({2, 2}), 3.0, DataType::kF64, &ctx_);
    absl::StatusOr<Value> r = fn::UniformRandom(Shape({16}), -2.0, 2.0, /*seed=*/77);
    ASSERT_TRUE(f.ok() && r.ok());
    ASSERT_TRUE(f->is_static() && r->is_static());
    fill = *f;
    rand = *r;
  }
  ASSERT_EQ(main.desc().global_block().ops().size(), 2u);
  EXPECT_EQ(main.desc().global_block().ops()[0].type, "fill_constant");
  EXPECT_EQ(main.desc().global_block().ops()[1].attrs.GetInt("seed").value(), 77);
  Scope scope;
  ASSERT_TRUE(RunProgram(ctx_, main.desc(), &scope).ok());
  EXPECT_EQ(Fetch<double>(scope, fill.var().name()).value(), std::vector<double>(4, 3.0));
  // One seed, one tensor, in either mode.
  std::vector<float> static_rand = Fetch<float>(scope, rand.var().name()).value();
  EXPECT_EQ(static_rand, eager_rand->tensor().ToVector<float>().value());
  for (float v : static_rand) {
    EXPECT_GE(v, -2.0f);
    EXPECT_LE(v, 2.0f);
  }
}

TEST_F(BuilderFunctionalTest, UnseededStaticRandomIsReproducible) {
  auto build = [&](Program& main, Program& startup) {
    ProgramGuard guard(main, startup);
    Value a = fn::UniformRandom(Shape({8})).value();
    Value b = fn::UniformRandom(Shape({8})).value();
    return std::make_pair(a.var().name(), b.var().name());
  };
  Program main1(&registry_), startup1(&registry_), main2(&registry_), startup2(&registry_);
  auto names1 = build(main1, startup1);
  auto names2 = build(main2, startup2);
  EXPECT_EQ(main1.desc(), main2.desc());
  Scope scope;
  ASSERT_TRUE(RunProgram(ctx_, main1.desc(), &scope).ok());
  // Two ops of one program draw different numbers.
  EXPECT_NE(Fetch<float>(scope, names1.first).value(), Fetch<float>(scope, names1.second).value());
  (void)names2;
}

}  // namespace
}  // namespace sluice::framework::builder_functional_test
