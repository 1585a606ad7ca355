// The demo model trained for 100 steps in three forms from the same initial values: the
// static program through the executor (what `sluice demo` runs), eager autograd with
// eager::Adam, and the step as a graph called from eager (framework/models/
// linear_regression_graph.h). The losses agree within 1e-6 at every step, and the graph's
// eager parameters end where the static ones do — on cpu, and on sim with the checker on.
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/builder/losses.h"
#include "framework/eager/context.h"
#include "framework/graph/graph.h"
#include "framework/models/linear_regression.h"
#include "framework/models/linear_regression_graph.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/demo_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::graph_training_test {
namespace {

constexpr int kSteps = 100;

class GraphTrainingTest : public ::testing::TestWithParam<const char*> {
 protected:
  GraphTrainingTest() : setup_(Options(), Device::Parse(GetParam()).value(), 1) {
    initial_ = setup_.executor
                   .Run(setup_.model.startup->desc(), {}, {setup_.model.weight, setup_.model.bias},
                        &setup_.scope)
                   .value()
                   .fetches;
  }
  static eager::ContextOptions Options() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 2;
    options.vm.check_sync = true;
    return options;
  }
  Device device() const { return Device::Parse(GetParam()).value(); }
  eager::Tensor Upload(const HostTensor& h) {
    return setup_.context.FromBytes(h.dtype, h.shape, h.bytes, device()).value();
  }

  std::vector<float> StaticLosses() {
    std::vector<float> losses;
    for (int step = 0; step < kSteps; ++step) {
      RunResult result =
          setup_.executor
              .Run(setup_.model.main->desc(), setup_.feeds(), {setup_.model.loss}, &setup_.scope)
              .value();
      losses.push_back(result.fetches[0].ToVector<float>()[0]);
    }
    return losses;
  }

  using Batch = std::function<std::pair<eager::Tensor, eager::Tensor>(int step)>;
  // The losses of `steps` steps of eager autograd with eager::Adam on the batches `batch`
  // gives; `weight` and `bias` (optional) get the trained parameters.
  std::vector<float> EagerLosses(int steps, const Batch& batch,
                                 std::vector<float>* weight = nullptr,
                                 std::vector<float>* bias = nullptr) {
    eager::nn::Linear linear =
        eager::nn::Linear::FromParameters(Upload(initial_[0]), Upload(initial_[1])).value();
    eager::AdamOptions adam_options;
    adam_options.learning_rate = 0.01;
    eager::Adam adam = eager::Adam::Create(linear.parameters(), adam_options).value();
    std::vector<float> losses;
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = batch(step);
      eager::Tensor prediction = linear(x).value();
      Value loss = nn::MseLoss(Value(prediction), Value(y)).value();
      EXPECT_TRUE(autograd::Backward(loss.tensor()).ok());
      EXPECT_TRUE(adam.Step().ok());
      adam.ZeroGrad();
      losses.push_back(loss.tensor().ToVector<float>().value()[0]);
    }
    if (weight != nullptr) *weight = linear.weight().ToVector<float>().value();
    if (bias != nullptr) *bias = linear.bias().ToVector<float>().value();
    return losses;
  }

  // The graph's losses; `weight` and `bias` get the trained parameters.
  std::vector<float> GraphLosses(std::vector<float>* weight, std::vector<float>* bias) {
    eager::Tensor w = Upload(initial_[0]);
    eager::Tensor b = Upload(initial_[1]);
    graph::Graph step =
        graph::Graph::Create(setup_.context, LinearRegressionStep(w, b, 0.01), {.name = "step"})
            .value();
    eager::Tensor x = Upload(LinearRegressionInput());
    eager::Tensor y = Upload(LinearRegressionTarget());
    std::vector<eager::Tensor> losses;
    for (int step_index = 0; step_index < kSteps; ++step_index) {
      losses.push_back(step({x, y}).value()[0]);  // no read in between: calls queue up
    }
    std::vector<float> values;
    for (const eager::Tensor& loss : losses) values.push_back(loss.ToVector<float>().value()[0]);
    *weight = w.ToVector<float>().value();
    *bias = b.ToVector<float>().value();
    EXPECT_EQ(step.stats().traces, 1);
    return values;
  }

  DemoSetup setup_;
  std::vector<HostTensor> initial_;  // weight, bias
};

TEST_P(GraphTrainingTest, ThreeFormsGiveTheSameLosses) {
  std::vector<float> eager_weight, eager_bias, graph_weight, graph_bias;
  const eager::Tensor x = Upload(LinearRegressionInput());
  const eager::Tensor y = Upload(LinearRegressionTarget());
  const std::vector<float> eager = EagerLosses(
      kSteps, [&](int) { return std::make_pair(x, y); }, &eager_weight, &eager_bias);
  const std::vector<float> graph = GraphLosses(&graph_weight, &graph_bias);
  const std::vector<float> statics = StaticLosses();
  ASSERT_EQ(eager.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(graph.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(statics.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(graph[i], statics[i], 1e-6) << "step " << i;
    EXPECT_NEAR(eager[i], statics[i], 1e-6) << "step " << i;
  }
  EXPECT_LT(statics.back(), 0.5f * statics.front());  // it trains
  // The graph's in-place updates reached the eager parameters: they end where eager
  // training's do.
  ASSERT_EQ(graph_weight.size(), eager_weight.size());
  for (size_t i = 0; i < graph_weight.size(); ++i) {
    EXPECT_NEAR(graph_weight[i], eager_weight[i], 1e-6) << "weight " << i;
  }
  ASSERT_EQ(graph_bias.size(), 1u);
  EXPECT_NEAR(graph_bias[0], eager_bias[0], 1e-6);
  EXPECT_NE(graph_bias[0], initial_[1].ToVector<float>()[0]);
  EXPECT_EQ(setup_.context.vm()->sync_checker()->violation_count(), 0);
}

// Batches of 16 and 8 rows in turn: two specializations, one optimizer state. The graph's
// losses are eager Adam's on the same batches (a state per specialization would restart
// the moments at the first 8-row batch).
TEST_P(GraphTrainingTest, SpecializationsShareTheOptimizerState) {
  eager::Tensor x = Upload(LinearRegressionInput());
  eager::Tensor y = Upload(LinearRegressionTarget());
  // The first 8 rows: a matmul with a selector keeps it in eager ops the graph does not see.
  std::vector<float> pick(8 * 16, 0.0f);
  for (int r = 0; r < 8; ++r) pick[static_cast<size_t>(r * 16 + r)] = 1.0f;
  eager::Tensor selector = setup_.context.FromVector(pick, Shape({8, 16}), device()).value();
  eager::Tensor x_half = fn::Matmul(selector, x).value();
  eager::Tensor y_half = fn::Matmul(selector, y).value();
  auto batch = [&](int step) {
    return step % 2 == 0 ? std::make_pair(x, y) : std::make_pair(x_half, y_half);
  };
  constexpr int kMixed = 10;
  const std::vector<float> eager_losses = EagerLosses(kMixed, batch);
  // The graph.
  eager::Tensor w = Upload(initial_[0]);
  eager::Tensor b = Upload(initial_[1]);
  graph::Graph step =
      graph::Graph::Create(setup_.context, LinearRegressionStep(w, b, 0.01)).value();
  for (int i = 0; i < kMixed; ++i) {
    auto [bx, by] = batch(i);
    const float loss = step({bx, by}).value()[0].ToVector<float>().value()[0];
    EXPECT_NEAR(loss, eager_losses[static_cast<size_t>(i)], 1e-6) << "step " << i;
  }
  EXPECT_EQ(step.stats().traces, 2);
  EXPECT_EQ(setup_.context.vm()->sync_checker()->violation_count(), 0);
}

// An input whose producer failed poisons what the call updates (parameters, state); later
// calls cannot train (refused naming the state, or their loss reports the error), and
// ResetState with reloaded parameters starts afresh.
TEST_P(GraphTrainingTest, PoisonedStateIsRefusedUntilReset) {
  eager::Tensor w = Upload(initial_[0]);
  eager::Tensor b = Upload(initial_[1]);
  graph::Graph step =
      graph::Graph::Create(setup_.context, LinearRegressionStep(w, b, 0.01), {.name = "step"})
          .value();
  eager::Tensor x = Upload(LinearRegressionInput());
  eager::Tensor y = Upload(LinearRegressionTarget());
  ASSERT_TRUE(step({x, y}).ok());
  // A failing eager op: softmax_with_cross_entropy with a label out of range.
  std::vector<int64_t> labels(16, 99);
  eager::Tensor bad_labels = setup_.context.FromVector(labels, Shape({16, 1}), device()).value();
  std::vector<eager::Tensor> failed =
      setup_.context.Call("softmax_with_cross_entropy", {{x}, {bad_labels}}).value();
  ASSERT_TRUE(step({failed[0], y}).ok());  // submitted; the poison flows into the state
  EXPECT_FALSE(setup_.context.Sync().ok());
  // The failed call left the parameters poisoned, and the state too when its steps ran
  // (a launch whose input was already poisoned when it ran as a step of a fused run is
  // skipped whole, which leaves the state as it was). Either way the next call cannot
  // train: it is refused naming the state, or its loss reports the original error.
  absl::StatusOr<std::vector<eager::Tensor>> next = step({x, y});
  if (next.ok()) {
    absl::StatusOr<std::vector<float>> loss = (*next)[0].ToVector<float>();
    ASSERT_FALSE(loss.ok());
    EXPECT_THAT(loss.status().message(), ::testing::HasSubstr("softmax_with_cross_entropy"));
  } else {
    EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(next.status().message(), ::testing::HasSubstr("graph 'step': its state"));
    EXPECT_THAT(next.status().message(), ::testing::HasSubstr("ResetState"));
  }
  setup_.context.Sync().IgnoreError();
  step.ResetState();
  // The parameters were poisoned too (the failed update wrote them): reload them eagerly.
  ASSERT_TRUE(setup_.context.CallInto("assign", {{Upload(initial_[0])}}, {{w}}).ok());
  ASSERT_TRUE(setup_.context.CallInto("assign", {{Upload(initial_[1])}}, {{b}}).ok());
  absl::StatusOr<std::vector<eager::Tensor>> again = step({x, y});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)[0].ToVector<float>().ok());
  EXPECT_EQ(step.stats().traces, 2);
}

INSTANTIATE_TEST_SUITE_P(Devices, GraphTrainingTest, ::testing::Values("cpu", "sim:0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param == std::string("cpu") ? "Cpu" : "Sim");
                         });

}  // namespace
}  // namespace sluice::framework::graph_training_test
