// max and min with NaN through the framework: eager autograd and static autodiff route the
// gradient of each element to the argument the forward op returned (X on a tie and where X
// is NaN, Y where only Y is NaN), on cpu and sim; programs with max and min give NaN for a
// NaN in either argument with subgraph compilation on (fused) and off, and i32 max and min
// (not fused) give the same values both ways. Expected values are computed here.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/data_type.h"
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

namespace sluice::framework::max_min_nan_test {
namespace {

using program_test::Op;
using program_test::Var;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The inputs every test here uses: NaN in X only, in Y only, in both, ties, and each side
// winning, for both ops.
const std::vector<float> kX = {kNan, 1, kNan, 2, 1, 3, kNan, -4};
const std::vector<float> kY = {1, kNan, kNan, 1, 2, 3, -5, kNan};
// Weights of the loss sum(op(X, Y) * W): each element's gradient is its weight.
const std::vector<float> kW = {1, 2, 4, 8, 16, 32, 64, 128};

bool IsMax(absl::string_view op) { return op == "max"; }

// NumPy's maximum / minimum.
float Reference(absl::string_view op, float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return kNan;
  return IsMax(op) ? (x < y ? y : x) : (y < x ? y : x);
}

// The rule's gradients of sum(op(X, Y) * W): W goes to X where X is NaN or X wins or ties,
// else to Y.
void ReferenceGrads(absl::string_view op, std::vector<float>* dx, std::vector<float>* dy) {
  dx->assign(kX.size(), 0.0f);
  dy->assign(kX.size(), 0.0f);
  for (size_t i = 0; i < kX.size(); ++i) {
    const float x = kX[i], y = kY[i];
    const bool takes_x = std::isnan(x) || (!std::isnan(y) && (IsMax(op) ? x >= y : x <= y));
    (takes_x ? *dx : *dy)[i] = kW[i];
  }
}

void ExpectSameFloats(const std::vector<float>& got, const std::vector<float>& want,
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

std::vector<float> ToFloats(const eager::Tensor& t) {
  absl::StatusOr<std::vector<uint8_t>> bytes = t.ToBytes();
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  std::vector<float> values(bytes->size() / sizeof(float));
  std::memcpy(values.data(), bytes->data(), bytes->size());
  return values;
}

class MaxMinNanGradTest : public ::testing::TestWithParam<Device> {
 protected:
  MaxMinNanGradTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  std::unique_ptr<eager::Context> context_;
};

// The spelled-out rule once, so that ReferenceGrads is itself checked.
TEST(MaxMinNanGradRuleTest, ReferenceIsTheDocumentedRule) {
  std::vector<float> dx, dy;
  ReferenceGrads("max", &dx, &dy);
  EXPECT_EQ(dx, std::vector<float>({1, 0, 4, 8, 0, 32, 64, 0}));
  EXPECT_EQ(dy, std::vector<float>({0, 2, 0, 0, 16, 0, 0, 128}));
  ReferenceGrads("min", &dx, &dy);
  EXPECT_EQ(dx, std::vector<float>({1, 0, 4, 0, 16, 32, 64, 0}));
  EXPECT_EQ(dy, std::vector<float>({0, 2, 0, 8, 0, 0, 0, 128}));
}

TEST_P(MaxMinNanGradTest, EagerAutogradFollowsTheRule) {
  const Shape shape({static_cast<int64_t>(kX.size())});
  for (const char* op : {"max", "min"}) {
    SCOPED_TRACE(op);
    absl::StatusOr<eager::Tensor> x = context_->FromVector(kX, shape, GetParam());
    absl::StatusOr<eager::Tensor> y = context_->FromVector(kY, shape, GetParam());
    absl::StatusOr<eager::Tensor> w = context_->FromVector(kW, shape, GetParam());
    ASSERT_TRUE(x.ok() && y.ok() && w.ok());
    ASSERT_TRUE(autograd::SetRequiresGrad(*x).ok());
    ASSERT_TRUE(autograd::SetRequiresGrad(*y).ok());
    absl::StatusOr<eager::Tensor> out = IsMax(op) ? fn::Maximum(*x, *y) : fn::Minimum(*x, *y);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> want(kX.size());
    for (size_t i = 0; i < kX.size(); ++i) want[i] = Reference(op, kX[i], kY[i]);
    ExpectSameFloats(ToFloats(*out), want, "forward");
    absl::StatusOr<eager::Tensor> product = fn::Mul(*out, *w);
    ASSERT_TRUE(product.ok()) << product.status();
    absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(*product);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const absl::Status backward = autograd::Backward(*loss);
    ASSERT_TRUE(backward.ok()) << backward;
    std::vector<float> dx, dy;
    ReferenceGrads(op, &dx, &dy);
    EXPECT_EQ(ToFloats(autograd::GradOf(*x)), dx);
    EXPECT_EQ(ToFloats(autograd::GradOf(*y)), dy);
  }
}

// The same loss built as a program, AppendBackward, run with compilation off and on (the
// forward max/min and mul, and the backward mul_grad and max_grad/min_grad, fuse).
TEST_P(MaxMinNanGradTest, StaticAutodiffFollowsTheRuleCompiledAndNot) {
  const Shape shape({static_cast<int64_t>(kX.size())});
  for (const char* op : {"max", "min"}) {
    Program main(&context_->registry());
    Program startup(&context_->registry());
    std::string out_name;
    {
      ProgramGuard guard(main, startup);
      absl::StatusOr<framework::Var> x = Data("x", shape);
      absl::StatusOr<framework::Var> y = Data("y", shape);
      absl::StatusOr<framework::Var> w = Data("w", shape);
      ASSERT_TRUE(x.ok() && y.ok() && w.ok());
      x->set_stop_gradient(false);
      y->set_stop_gradient(false);
      auto out = AppendOp(main, op, {{*x}, {*y}});
      ASSERT_TRUE(out.ok()) << out.status();
      out_name = (*out)[0][0].name();
      auto product = AppendOp(main, "mul", {{(*out)[0][0]}, {*w}});
      ASSERT_TRUE(product.ok()) << product.status();
      auto loss = AppendOp(main, "reduce_sum", {{(*product)[0][0]}});
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE(AppendBackward((*loss)[0][0]).ok());
    }
    const Feeds feeds = {{"x", HostTensor::FromVector(kX, shape)},
                         {"y", HostTensor::FromVector(kY, shape)},
                         {"w", HostTensor::FromVector(kW, shape)}};
    const std::vector<std::string> fetches = {out_name, ops::GradContext::GradName("x"),
                                              ops::GradContext::GradName("y")};
    std::vector<float> want(kX.size());
    for (size_t i = 0; i < kX.size(); ++i) want[i] = Reference(op, kX[i], kY[i]);
    std::vector<float> dx, dy;
    ReferenceGrads(op, &dx, &dy);
    for (const bool compile : {false, true}) {
      SCOPED_TRACE(absl::StrCat(op, compile ? " compiled" : " unfused"));
      ExecutorOptions options;
      options.interpreter.device = GetParam();
      options.interpreter.compile_subgraphs = compile;
      Executor executor(&context_->registry(), context_->vm(), options);
      Scope scope;
      absl::StatusOr<RunResult> run = executor.Run(main.desc(), feeds, fetches, &scope);
      ASSERT_TRUE(run.ok()) << run.status();
      ExpectSameFloats(run->fetches[0].ToVector<float>(), want, "forward");
      EXPECT_EQ(run->fetches[1].ToVector<float>(), dx);
      EXPECT_EQ(run->fetches[2].ToVector<float>(), dy);
      if (compile) {
        const LoweringStats lowering = executor.LastLowering().value();
        EXPECT_GE(lowering.compiled_subgraphs, 1);
        EXPECT_EQ(lowering.compile_fallbacks, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, MaxMinNanGradTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

// A program of f32 max and min over broadcast operands with NaNs, each followed by a scale
// (two fused groups, so both ops are compiled), and i32 max and min (which the compiler
// leaves unfused), run with compilation off and on.
TEST(MaxMinCompiledTest, NanAndIntegersGiveTheSameValuesCompiledAndNot) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(context, nullptr);
  ir::ProgramDesc main;
  ir::BlockDesc& b = main.mutable_global_block();
  const Shape full({2, 4}), row({4});
  const DataType i32 = DataType::kI32;
  for (const ir::VarDesc& v :
       {Var("x", full), Var("y", row), Var("m", full), Var("n", full), Var("s", full),
        Var("t", full), Var("a", full, false, i32), Var("c", row, false, i32),
        Var("am", full, false, i32), Var("an", full, false, i32)}) {
    program_test::AddVar(b, v);
  }
  b.AppendOp(Op("max", {{"X", {"x"}}, {"Y", {"y"}}}, {{"Out", {"m"}}}));
  b.AppendOp(Op("min", {{"X", {"y"}}, {"Y", {"x"}}}, {{"Out", {"n"}}}));
  b.AppendOp(Op("scale", {{"X", {"m"}}}, {{"Out", {"s"}}}, program_test::ScaleBy(2.0)));
  b.AppendOp(Op("scale", {{"X", {"n"}}}, {{"Out", {"t"}}}, program_test::ScaleBy(2.0)));
  b.AppendOp(Op("max", {{"X", {"a"}}, {"Y", {"c"}}}, {{"Out", {"am"}}}));
  b.AppendOp(Op("min", {{"X", {"c"}}, {"Y", {"a"}}}, {{"Out", {"an"}}}));

  const std::vector<float> x = {kNan, 1, -2, 5, 0, kNan, 3, -1};
  const std::vector<float> y = {2, kNan, -3, 4};
  const std::vector<int32_t> a = {-5, 3, -1, INT32_MIN, 0, -7, INT32_MAX, -2};
  const std::vector<int32_t> c = {-2, -2, 4, -1};
  const Feeds feeds = {{"x", HostTensor::FromVector(x, full)},
                       {"y", HostTensor::FromVector(y, row)},
                       {"a", HostTensor::FromVector(a, full)},
                       {"c", HostTensor::FromVector(c, row)}};
  std::vector<float> want_m(8), want_n(8), want_s(8), want_t(8);
  std::vector<int32_t> want_am(8), want_an(8);
  for (size_t i = 0; i < 8; ++i) {
    want_m[i] = Reference("max", x[i], y[i % 4]);
    want_n[i] = Reference("min", x[i], y[i % 4]);
    want_s[i] = 2.0f * want_m[i];
    want_t[i] = 2.0f * want_n[i];
    want_am[i] = a[i] < c[i % 4] ? c[i % 4] : a[i];
    want_an[i] = c[i % 4] < a[i] ? c[i % 4] : a[i];
  }
  // The integer reference spelled out once.
  EXPECT_EQ(want_am, std::vector<int32_t>({-2, 3, 4, -1, 0, -2, INT32_MAX, -1}));
  EXPECT_EQ(want_an, std::vector<int32_t>({-5, -2, -1, INT32_MIN, -2, -7, 4, -2}));

  for (const Device& device : {program_test::kCpu, program_test::kSim}) {
    for (const bool compile : {false, true}) {
      SCOPED_TRACE(absl::StrCat(device.ToString(), compile ? " compiled" : " unfused"));
      ExecutorOptions options;
      options.interpreter.device = device;
      options.interpreter.compile_subgraphs = compile;
      Executor executor(&context->registry(), context->vm(), options);
      Scope scope;
      absl::StatusOr<RunResult> run =
          executor.Run(main, feeds, {"m", "n", "s", "t", "am", "an"}, &scope);
      ASSERT_TRUE(run.ok()) << run.status();
      ExpectSameFloats(run->fetches[0].ToVector<float>(), want_m, "max");
      ExpectSameFloats(run->fetches[1].ToVector<float>(), want_n, "min");
      ExpectSameFloats(run->fetches[2].ToVector<float>(), want_s, "2 max");
      ExpectSameFloats(run->fetches[3].ToVector<float>(), want_t, "2 min");
      EXPECT_EQ(run->fetches[4].dtype, DataType::kI32);
      EXPECT_EQ(run->fetches[4].ToVector<int32_t>(), want_am);
      EXPECT_EQ(run->fetches[5].ToVector<int32_t>(), want_an);
      if (compile) {
        const LoweringStats lowering = executor.LastLowering().value();
        EXPECT_EQ(lowering.compiled_subgraphs, 2);  // max + scale, min + scale
        EXPECT_EQ(lowering.fused_ops, 4);           // not the i32 ops
        EXPECT_EQ(lowering.compile_fallbacks, 0);
      }
    }
  }
}

}  // namespace
}  // namespace sluice::framework::max_min_nan_test
