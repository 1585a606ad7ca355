// The demo program end to end: its first Adam step matches a hand computation, its loss
// falls every step for 100 steps, and the same numbers come out on cpu, on sim, and with
// ops spread over two sim compute streams under the sync checker (no reports).
#include <cmath>

#include "gtest/gtest.h"
#include "tests/framework/demo_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::demo_test {
namespace {

struct Trained {
  std::vector<float> losses;
  std::vector<float> w0, b0, w1, b1;  // parameters before and after step 1
  int64_t violations = 0;
};

Trained Train(Device device, int streams, bool check_sync, int steps = 100) {
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 1;
  context_options.vm.check_sync = check_sync;
  DemoSetup demo(context_options, device, streams);
  LinearRegression& model = demo.model;
  Trained out;
  absl::StatusOr<RunResult> init =
      demo.executor.Run(model.startup->desc(), {}, {model.weight, model.bias}, &demo.scope);
  EXPECT_TRUE(init.ok()) << init.status();
  if (!init.ok()) return out;
  out.w0 = init->fetches[0].ToVector<float>();
  out.b0 = init->fetches[1].ToVector<float>();
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<RunResult> result = demo.executor.Run(
        model.main->desc(), demo.feeds(), {model.loss, model.weight, model.bias}, &demo.scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return out;
    out.losses.push_back(result->fetches[0].ToVector<float>()[0]);
    if (step == 0) {
      out.w1 = result->fetches[1].ToVector<float>();
      out.b1 = result->fetches[2].ToVector<float>();
    }
  }
  if (check_sync) out.violations = demo.context.vm()->sync_checker()->violation_count();
  return out;
}

TEST(DemoTest, FirstAdamStepMatchesHandComputation) {
  const Trained cpu = Train(Device(DeviceType::kCpu, 0), 1, false, 1);
  ASSERT_EQ(cpu.w0.size(), 16u);
  ASSERT_EQ(cpu.b0.size(), 1u);
  const std::vector<float> x = LinearRegressionInput().ToVector<float>();
  const std::vector<float> y = LinearRegressionTarget().ToVector<float>();
  // Forward and gradient in double: loss = mean((x w + b - y)^2).
  std::vector<double> residual(16);
  double loss = 0;
  for (int i = 0; i < 16; ++i) {
    double pred = cpu.b0[0];
    for (int j = 0; j < 16; ++j) pred += static_cast<double>(x[i * 16 + j]) * cpu.w0[j];
    residual[i] = pred - y[i];
    loss += residual[i] * residual[i] / 16.0;
  }
  EXPECT_NEAR(cpu.losses[0], loss, 1e-6 * std::max(1.0, loss));
  // Adam's first step: m = (1-b1) g, v = (1-b2) g^2, lr_t = lr sqrt(1-b2)/(1-b1),
  // p -= lr_t m / (sqrt(v) + eps): about lr * sign(g).
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  auto step = [&](double param, double g) {
    const double m = (1 - b1) * g, v = (1 - b2) * g * g;
    const double lr_t = lr * std::sqrt(1 - b2) / (1 - b1);
    return param - lr_t * m / (std::sqrt(v) + eps);
  };
  for (int j = 0; j < 16; ++j) {
    double g = 0;
    for (int i = 0; i < 16; ++i) g += 2.0 / 16.0 * residual[i] * x[i * 16 + j];
    EXPECT_NEAR(cpu.w1[j], step(cpu.w0[j], g), 1e-6) << "weight " << j;
  }
  double gb = 0;
  for (int i = 0; i < 16; ++i) gb += 2.0 / 16.0 * residual[i];
  EXPECT_NEAR(cpu.b1[0], step(cpu.b0[0], gb), 1e-6);
}

TEST(DemoTest, LossFallsAndMatchesAcrossDevicesAndStreams) {
  const Trained cpu = Train(Device(DeviceType::kCpu, 0), 1, false);
  ASSERT_EQ(cpu.losses.size(), 100u);
  for (size_t i = 1; i < cpu.losses.size(); ++i) {
    EXPECT_LT(cpu.losses[i], cpu.losses[i - 1]) << "step " << i;
  }
  EXPECT_LT(cpu.losses.back(), 0.5 * cpu.losses.front());
  const Trained sim = Train(Device(DeviceType::kSim, 0), 1, true);
  const Trained two = Train(Device(DeviceType::kSim, 0), 2, true);
  ASSERT_EQ(sim.losses.size(), cpu.losses.size());
  ASSERT_EQ(two.losses.size(), cpu.losses.size());
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    EXPECT_NEAR(sim.losses[i], cpu.losses[i], 1e-6) << "step " << i;
    EXPECT_NEAR(two.losses[i], cpu.losses[i], 1e-6) << "step " << i;
  }
  EXPECT_EQ(sim.violations, 0);
  EXPECT_EQ(two.violations, 0);
}

}  // namespace
}  // namespace sluice::framework::demo_test
