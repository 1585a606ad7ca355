// One front end for training: a model written once against fn:: ops trains eagerly
// (autograd) and, inside a ProgramGuard, builds the Program that AppendBackward
// differentiates, with the same gradients bit for bit on cpu (fn::Gradients in both
// modes); and the demo model (framework/models/linear_regression) trained eagerly from
// `sluice demo`'s initial values gives its losses.
#include <string>
#include <vector>

#include "framework/autograd/autograd.h"
#include "framework/autograd/gradients.h"
#include "framework/builder/functional.h"
#include "framework/builder/layers.h"
#include "framework/builder/losses.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"
#include "gtest/gtest.h"
#include "tests/framework/demo_test_util.h"

namespace sluice::framework::one_front_end_test {
namespace {

// The model, once: tanh(x w1 + b1) w2 + b2, mean squared error against y.
absl::StatusOr<Value> Model(const Value& x, const Value& y, const std::vector<Value>& p) {
  SLUICE_ASSIGN_OR_RETURN(Value h, fn::Matmul(x, p[0]));
  SLUICE_ASSIGN_OR_RETURN(h, fn::Add(h, p[1]));
  SLUICE_ASSIGN_OR_RETURN(h, fn::Tanh(h));
  SLUICE_ASSIGN_OR_RETURN(Value out, fn::Matmul(h, p[2]));
  SLUICE_ASSIGN_OR_RETURN(out, fn::Add(out, p[3]));
  return nn::MseLoss(out, y);
}

HostTensor Ramp(Shape shape, float scale) {
  std::vector<float> values(static_cast<size_t>(shape.NumElements()));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = scale * std::sin(0.7f * static_cast<float>(k));
  return HostTensor::FromVector(values, shape);
}

TEST(OneFrontEndTest, AModelWrittenOnceGetsTheSameGradientsInBothModes) {
  eager::ContextOptions options;
  options.runtime.enable_cuda = false;
  eager::Context context = eager::Context::Create(options).value();
  const HostTensor x = Ramp(Shape({8, 4}), 1.0f), y = Ramp(Shape({8, 2}), 0.5f);

  // Static: parameters from nn::Linear layers (their startup initializes them).
  Program main(&context.registry()), startup(&context.registry());
  std::vector<std::string> param_names, grad_names;
  {
    ProgramGuard guard(main, startup);
    const Var xv = Data("x", Shape({8, 4})).value();
    const Var yv = Data("y", Shape({8, 2})).value();
    nn::LinearOptions first, second;
    first.seed = 5;
    second.seed = 6;
    const nn::Linear l1 = nn::Linear::Create(4, 3, first).value();
    const nn::Linear l2 = nn::Linear::Create(3, 2, second).value();
    const std::vector<Value> params = {l1.weight(), l1.bias(), l2.weight(), l2.bias()};
    const Value loss = Model(xv, yv, params).value();
    absl::StatusOr<std::vector<Value>> grads = fn::Gradients(loss, params);
    ASSERT_TRUE(grads.ok()) << grads.status();
    for (const Value& p : params) param_names.push_back(p.var().name());
    for (const Value& g : *grads) grad_names.push_back(g.var().name());
  }
  Executor executor(&context.registry(), context.vm(), ExecutorOptions());
  Scope scope;
  absl::StatusOr<RunResult> init = executor.Run(startup.desc(), {}, param_names, &scope);
  ASSERT_TRUE(init.ok()) << init.status();
  absl::StatusOr<RunResult> ran =
      executor.Run(main.desc(), {{"x", x}, {"y", y}}, grad_names, &scope);
  ASSERT_TRUE(ran.ok()) << ran.status();

  // Eager: the same function on tensors holding the static initial values.
  std::vector<Value> params;
  for (const HostTensor& value : init->fetches) {
    eager::Tensor t =
        context.FromBytes(value.dtype, value.shape, value.bytes, Device::Cpu()).value();
    ASSERT_TRUE(autograd::SetRequiresGrad(t).ok());
    params.emplace_back(t);
  }
  const Value xe = context.FromBytes(x.dtype, x.shape, x.bytes, Device::Cpu()).value();
  const Value ye = context.FromBytes(y.dtype, y.shape, y.bytes, Device::Cpu()).value();
  const Value loss = Model(xe, ye, params).value();
  absl::StatusOr<std::vector<Value>> grads = fn::Gradients(loss, params);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), ran->fetches.size());
  for (size_t i = 0; i < grads->size(); ++i) {
    EXPECT_EQ((*grads)[i].tensor().ToBytes().value(), ran->fetches[i].bytes) << param_names[i];
  }
  // Mixed modes are refused, naming the param.
  absl::StatusOr<std::vector<Value>> mixed = fn::Gradients(loss, {Value(Var())});
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
}

// The demo model, trained eagerly from the static program's initial values with the same
// Adam, gives the same losses step after step.
TEST(OneFrontEndTest, TheDemoModelTrainedEagerlyGivesTheDemosLosses) {
  constexpr int kSteps = 30;
  eager::ContextOptions options;
  DemoSetup demo(options, Device::Cpu(), 1);
  LinearRegression& model = demo.model;
  absl::StatusOr<RunResult> init =
      demo.executor.Run(model.startup->desc(), {}, {model.weight, model.bias}, &demo.scope);
  ASSERT_TRUE(init.ok()) << init.status();
  std::vector<float> static_losses;
  for (int step = 0; step < kSteps; ++step) {
    absl::StatusOr<RunResult> result =
        demo.executor.Run(model.main->desc(), demo.feeds(), {model.loss}, &demo.scope);
    ASSERT_TRUE(result.ok()) << result.status();
    static_losses.push_back(result->fetches[0].ToVector<float>()[0]);
  }

  eager::Context& ctx = demo.context;
  auto tensor = [&](const HostTensor& h) {
    return ctx.FromBytes(h.dtype, h.shape, h.bytes, Device::Cpu()).value();
  };
  eager::nn::Linear linear =
      eager::nn::Linear::FromParameters(tensor(init->fetches[0]), tensor(init->fetches[1])).value();
  eager::AdamOptions adam_options;
  adam_options.learning_rate = 0.01;
  eager::Adam adam = eager::Adam::Create(linear.parameters(), adam_options).value();
  const eager::Tensor x = tensor(LinearRegressionInput()), y = tensor(LinearRegressionTarget());
  std::vector<float> eager_losses;
  for (int step = 0; step < kSteps; ++step) {
    const eager::Tensor prediction = linear(x).value();
    const Value loss = nn::MseLoss(Value(prediction), Value(y)).value();
    ASSERT_TRUE(autograd::Backward(loss.tensor()).ok());
    ASSERT_TRUE(adam.Step().ok());
    adam.ZeroGrad();
    eager_losses.push_back(loss.tensor().ToVector<float>().value()[0]);
  }
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(eager_losses[step], static_losses[step], 1e-6) << step;
  }
  EXPECT_EQ(eager_losses, static_losses);  // the same kernels in the same order: bit for bit
}

}  // namespace
}  // namespace sluice::framework::one_front_end_test
