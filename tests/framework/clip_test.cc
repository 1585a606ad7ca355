// clip through the framework: eager autograd and static autodiff give clip's gradient (the
// output's gradient where Out was X itself: inside the bounds, on them, and at NaN), on cpu
// and sim; a program with f32 and i32 clip between fusible ops gives the same values with
// subgraph compilation on and off. The compiler does not fuse clip (op_lowering.cc has no
// rule for it), so the ops around it compile as separate groups and clip runs unfused.
// Expected values are computed here.
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

namespace sluice::framework::clip_test {
namespace {

using program_test::Op;
using program_test::Var;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLo = -1.0f;
constexpr float kHi = 2.0f;

// Below, on and inside the bounds, above, NaN and infinities.
const std::vector<float> kX = {-3, -1, 0.5f, 2, 5, kNan, kInf, -kInf};
// Weights of the loss sum(clip(X) * W): each element's gradient is its weight or 0.
const std::vector<float> kW = {1, 2, 4, 8, 16, 32, 64, 128};

float ReferenceClip(float x, float lo, float hi) {
  if (std::isnan(x)) return kNan;
  return x < lo ? lo : (x > hi ? hi : x);
}

// W where clip returned X itself (lo <= X <= hi, or X is NaN), else 0.
std::vector<float> ReferenceGrad() {
  std::vector<float> dx(kX.size(), 0.0f);
  for (size_t i = 0; i < kX.size(); ++i) {
    if (std::isnan(kX[i]) || (kLo <= kX[i] && kX[i] <= kHi)) dx[i] = kW[i];
  }
  return dx;
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

TEST(ClipGradRuleTest, ReferenceIsTheDocumentedRule) {
  EXPECT_EQ(ReferenceGrad(), std::vector<float>({0, 2, 4, 8, 0, 32, 0, 0}));
}

class ClipFrameworkTest : public ::testing::TestWithParam<Device> {
 protected:
  ClipFrameworkTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}

  std::unique_ptr<eager::Context> context_;
};

TEST_P(ClipFrameworkTest, EagerAutogradFollowsTheRule) {
  const Shape shape({static_cast<int64_t>(kX.size())});
  absl::StatusOr<eager::Tensor> x = context_->FromVector(kX, shape, GetParam());
  absl::StatusOr<eager::Tensor> w = context_->FromVector(kW, shape, GetParam());
  ASSERT_TRUE(x.ok() && w.ok());
  ASSERT_TRUE(autograd::SetRequiresGrad(*x).ok());
  absl::StatusOr<eager::Tensor> out = fn::Clip(*x, kLo, kHi);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) want[i] = ReferenceClip(kX[i], kLo, kHi);
  ExpectSameFloats(ToFloats(*out), want, "forward");
  absl::StatusOr<eager::Tensor> product = fn::Mul(*out, *w);
  ASSERT_TRUE(product.ok()) << product.status();
  absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(*product);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const absl::Status backward = autograd::Backward(*loss);
  ASSERT_TRUE(backward.ok()) << backward;
  EXPECT_EQ(ToFloats(autograd::GradOf(*x)), ReferenceGrad());

  // Reversed bounds are refused, naming both.
  absl::StatusOr<eager::Tensor> reversed = fn::Clip(*x, 3, 1);
  ASSERT_FALSE(reversed.ok());
  EXPECT_EQ(reversed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reversed.status().message().find("'min' (3)"), absl::string_view::npos)
      << reversed.status();
  EXPECT_NE(reversed.status().message().find("'max' (1)"), absl::string_view::npos)
      << reversed.status();
}

// The same loss built as a program with fn::Clip, AppendBackward, run with compilation off
// and on.
TEST_P(ClipFrameworkTest, StaticAutodiffFollowsTheRuleCompiledAndNot) {
  const Shape shape({static_cast<int64_t>(kX.size())});
  Program main(&context_->registry());
  Program startup(&context_->registry());
  std::string out_name;
  {
    ProgramGuard guard(main, startup);
    absl::StatusOr<framework::Var> x = Data("x", shape);
    absl::StatusOr<framework::Var> w = Data("w", shape);
    ASSERT_TRUE(x.ok() && w.ok());
    x->set_stop_gradient(false);
    absl::StatusOr<fn::Value> out = fn::Clip(*x, kLo, kHi);
    ASSERT_TRUE(out.ok()) << out.status();
    out_name = out->var().name();
    auto product = AppendOp(main, "mul", {{out->var()}, {*w}});
    ASSERT_TRUE(product.ok()) << product.status();
    auto loss = AppendOp(main, "reduce_sum", {{(*product)[0][0]}});
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(AppendBackward((*loss)[0][0]).ok());
  }
  const Feeds feeds = {{"x", HostTensor::FromVector(kX, shape)},
                       {"w", HostTensor::FromVector(kW, shape)}};
  const std::vector<std::string> fetches = {out_name, ops::GradContext::GradName("x")};
  std::vector<float> want(kX.size());
  for (size_t i = 0; i < kX.size(); ++i) want[i] = ReferenceClip(kX[i], kLo, kHi);
  for (const bool compile : {false, true}) {
    SCOPED_TRACE(compile ? "compiled" : "unfused");
    ExecutorOptions options;
    options.interpreter.device = GetParam();
    options.interpreter.compile_subgraphs = compile;
    Executor executor(&context_->registry(), context_->vm(), options);
    Scope scope;
    absl::StatusOr<RunResult> run = executor.Run(main.desc(), feeds, fetches, &scope);
    ASSERT_TRUE(run.ok()) << run.status();
    ExpectSameFloats(run->fetches[0].ToVector<float>(), want, "forward");
    EXPECT_EQ(run->fetches[1].ToVector<float>(), ReferenceGrad());
    if (compile) {
      EXPECT_EQ(executor.LastLowering().value().compile_fallbacks, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, ClipFrameworkTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

// f32 clip between two fusible pairs (mul + scale before, scale + add after), and an i32
// clip, with compilation off and on: the same values, and clip is never fused.
TEST(ClipCompiledTest, SameValuesCompiledAndNotAndClipStaysUnfused) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(context, nullptr);
  ir::ProgramDesc main;
  ir::BlockDesc& b = main.mutable_global_block();
  const Shape shape({2, 4});
  const DataType i32 = DataType::kI32;
  for (const ir::VarDesc& v :
       {Var("x", shape), Var("m", shape), Var("s", shape), Var("c", shape), Var("t", shape),
        Var("u", shape), Var("a", shape, false, i32), Var("ac", shape, false, i32)}) {
    program_test::AddVar(b, v);
  }
  vm::AttrMap bounds;
  bounds.Set("min", -1.0).Set("max", 4.0);
  vm::AttrMap int_bounds;
  int_bounds.Set("min", -2.5).Set("max", 3.5);
  b.AppendOp(Op("mul", {{"X", {"x"}}, {"Y", {"x"}}}, {{"Out", {"m"}}}));
  b.AppendOp(Op("scale", {{"X", {"m"}}}, {{"Out", {"s"}}}, program_test::ScaleBy(1.0, -2.0)));
  b.AppendOp(Op("clip", {{"X", {"s"}}}, {{"Out", {"c"}}}, bounds));
  b.AppendOp(Op("scale", {{"X", {"c"}}}, {{"Out", {"t"}}}, program_test::ScaleBy(2.0)));
  b.AppendOp(Op("add", {{"X", {"t"}}, {"Y", {"t"}}}, {{"Out", {"u"}}}));
  b.AppendOp(Op("clip", {{"X", {"a"}}}, {{"Out", {"ac"}}}, int_bounds));

  const std::vector<float> x = {kNan, 0, 1, -1.5f, 3, kInf, 0.5f, -kInf};
  const std::vector<int32_t> a = {-5, -2, 0, 3, 4, INT32_MIN, INT32_MAX, -3};
  const Feeds feeds = {{"x", HostTensor::FromVector(x, shape)},
                       {"a", HostTensor::FromVector(a, shape)}};
  std::vector<float> want_c(8), want_u(8);
  std::vector<int32_t> want_ac(8);
  for (size_t i = 0; i < 8; ++i) {
    want_c[i] = ReferenceClip(x[i] * x[i] - 2.0f, -1.0f, 4.0f);
    want_u[i] = 2.0f * want_c[i] + 2.0f * want_c[i];
    // Integers take the integers in [-2.5, 3.5]: -2..3.
    want_ac[i] = a[i] < -2 ? -2 : (a[i] > 3 ? 3 : a[i]);
  }
  EXPECT_EQ(want_ac, std::vector<int32_t>({-2, -2, 0, 3, 3, -2, 3, -2}));

  for (const Device& device : {program_test::kCpu, program_test::kSim}) {
    for (const bool compile : {false, true}) {
      SCOPED_TRACE(absl::StrCat(device.ToString(), compile ? " compiled" : " unfused"));
      ExecutorOptions options;
      options.interpreter.device = device;
      options.interpreter.compile_subgraphs = compile;
      Executor executor(&context->registry(), context->vm(), options);
      Scope scope;
      absl::StatusOr<RunResult> run = executor.Run(main, feeds, {"c", "u", "ac"}, &scope);
      ASSERT_TRUE(run.ok()) << run.status();
      ExpectSameFloats(run->fetches[0].ToVector<float>(), want_c, "clip");
      ExpectSameFloats(run->fetches[1].ToVector<float>(), want_u, "after clip");
      EXPECT_EQ(run->fetches[2].dtype, DataType::kI32);
      EXPECT_EQ(run->fetches[2].ToVector<int32_t>(), want_ac);
      if (compile) {
        const LoweringStats lowering = executor.LastLowering().value();
        EXPECT_EQ(lowering.compiled_subgraphs, 2);  // mul + scale, scale + add
        EXPECT_EQ(lowering.fused_ops, 4);           // neither clip
        EXPECT_EQ(lowering.compile_fallbacks, 0);
      }
    }
  }
}

}  // namespace
}  // namespace sluice::framework::clip_test
