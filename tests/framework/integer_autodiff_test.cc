// Integer arithmetic (i64 add, sub, mul, div, neg, abs, relu; ops/elementwise_ops.cc) inside
// programs that are differentiated, on cpu and sim: integer results are constants to eager
// autograd and to static autodiff (they differentiate floats only), so an index computed in
// integers and cast to f64 scales the gradient of a float operand, and nothing asks for the
// integer ops' gradients.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

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

namespace sluice::framework::integer_autodiff_test {
namespace {

const Shape kShape({2, 3});
const std::vector<int64_t> kInts = {-7, 3, 0, 5, -2, 9};
const std::vector<double> kX = {0.5, -1.0, 2.0, 0.25, 3.0, -0.75};

// ((i + i) * i - i) / 2 -> relu(neg(abs(..)) + 10), all in i64, as the reference computes it.
std::vector<double> Factor() {
  std::vector<double> f;
  for (int64_t i : kInts) {
    int64_t v = ((i + i) * i - i) / 2;
    v = -(v < 0 ? -v : v) + 10;
    f.push_back(static_cast<double>(v < 0 ? 0 : v));
  }
  return f;
}

// The integer chain above over `i` (a Value of either mode).
absl::StatusOr<fn::Value> IntegerChain(const fn::Value& i, const fn::Value& two,
                                       const fn::Value& ten) {
  absl::StatusOr<fn::Value> v = fn::Add(i, i);
  if (v.ok()) v = fn::Mul(*v, i);
  if (v.ok()) v = fn::Sub(*v, i);
  if (v.ok()) v = fn::Div(*v, two);
  if (v.ok()) v = fn::Abs(*v);
  if (v.ok()) v = fn::Neg(*v);
  if (v.ok()) v = fn::Add(*v, ten);
  if (v.ok()) v = fn::Relu(*v);
  if (v.ok()) v = fn::Cast(*v, DataType::kF64);
  return v;
}

class IntegerAutodiffTest : public ::testing::TestWithParam<Device> {
 protected:
  IntegerAutodiffTest() : context_(program_test::NewContext(1, /*check_sync=*/true)) {}
  std::unique_ptr<eager::Context> context_;
};

TEST_P(IntegerAutodiffTest, EagerAutogradTreatsIntegerResultsAsConstants) {
  absl::StatusOr<eager::Tensor> i = context_->FromVector(kInts, kShape, GetParam());
  absl::StatusOr<eager::Tensor> two =
      context_->FromVector(std::vector<int64_t>{2}, Shape({1}), GetParam());
  absl::StatusOr<eager::Tensor> ten =
      context_->FromVector(std::vector<int64_t>{10}, Shape({}), GetParam());
  absl::StatusOr<eager::Tensor> x = context_->FromVector(kX, kShape, GetParam());
  ASSERT_TRUE(i.ok() && two.ok() && ten.ok() && x.ok());
  ASSERT_TRUE(autograd::SetRequiresGrad(*x).ok());
  absl::StatusOr<fn::Value> factor = IntegerChain(*i, *two, *ten);
  ASSERT_TRUE(factor.ok()) << factor.status();
  absl::StatusOr<eager::Tensor> loss = fn::ReduceSum(fn::Mul(*x, factor->tensor()).value());
  ASSERT_TRUE(loss.ok()) << loss.status();
  const absl::Status backward = autograd::Backward(*loss);
  ASSERT_TRUE(backward.ok()) << backward;
  absl::StatusOr<std::vector<uint8_t>> bytes = autograd::GradOf(*x).ToBytes();
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::vector<double> grad(bytes->size() / sizeof(double));
  std::memcpy(grad.data(), bytes->data(), bytes->size());
  EXPECT_EQ(grad, Factor());
}

TEST_P(IntegerAutodiffTest, StaticAutodiffSkipsTheIntegerOps) {
  Program main(&context_->registry());
  Program startup(&context_->registry());
  {
    ProgramGuard guard(main, startup);
    absl::StatusOr<Var> i = Data("i", kShape, DataType::kI64);
    absl::StatusOr<Var> two = Data("two", Shape({1}), DataType::kI64);
    absl::StatusOr<Var> ten = Data("ten", Shape({}), DataType::kI64);
    absl::StatusOr<Var> x = Data("x", kShape, DataType::kF64);
    ASSERT_TRUE(i.ok() && two.ok() && ten.ok() && x.ok());
    x->set_stop_gradient(false);
    i->set_stop_gradient(false);  // asked for, but an integer has no gradient
    absl::StatusOr<fn::Value> factor = IntegerChain(*i, *two, *ten);
    ASSERT_TRUE(factor.ok()) << factor.status();
    absl::StatusOr<fn::Value> loss = fn::ReduceSum(fn::Mul(*x, *factor).value());
    ASSERT_TRUE(loss.ok()) << loss.status();
    const absl::Status backward = AppendBackward(loss->var()).status();
    ASSERT_TRUE(backward.ok()) << backward;
  }
  // The backward part: reduce_sum's and the float mul's grad ops only.
  int mul_grads = 0, negs = 0;
  for (const ir::OpDesc& op : main.desc().block(0).ops()) {
    for (const char* type : {"add_grad", "sub_grad", "div_grad", "abs_grad", "relu_grad"}) {
      EXPECT_NE(op.type, type);
    }
    mul_grads += op.type == "mul_grad";
    negs += op.type == "neg";
  }
  EXPECT_EQ(mul_grads, 1) << "x * factor's, not (i + i) * i's";
  EXPECT_EQ(negs, 1) << "the forward neg only (neg's gradient is a neg)";
  const Feeds feeds = {{"i", HostTensor::FromVector(kInts, kShape)},
                       {"two", HostTensor::FromVector(std::vector<int64_t>{2}, Shape({1}))},
                       {"ten", HostTensor::FromVector(std::vector<int64_t>{10}, Shape({}))},
                       {"x", HostTensor::FromVector(kX, kShape)}};
  ExecutorOptions options;
  options.interpreter.device = GetParam();
  Executor executor(&context_->registry(), context_->vm(), options);
  Scope scope;
  absl::StatusOr<RunResult> run =
      executor.Run(main.desc(), feeds, {ops::GradContext::GradName("x")}, &scope);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->fetches[0].ToVector<double>(), Factor());
}

INSTANTIATE_TEST_SUITE_P(Devices, IntegerAutodiffTest,
                         ::testing::Values(program_test::kCpu, program_test::kSim),
                         [](const auto& info) {
                           return std::string(DeviceTypeName(info.param.type()));
                         });

}  // namespace
}  // namespace sluice::framework::integer_autodiff_test
