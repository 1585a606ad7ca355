// Eager training (framework/training/): Sgd and Adam update parameters in place as their
// formulas say, refuse parameters that cannot be trained, and a small MLP trained eagerly
// (nn::Linear, autograd::Backward, Sgd) lowers its loss; over 100 steps nothing
// accumulates (live tensors stay put, the allocator's bytes per step stay bounded); two threads
// training two models on one context get the losses each gets alone; and training on two
// sim streams with the checker on gives the cpu's losses.
#include <algorithm>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/eager/stream_scope.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"

namespace sluice::eager::eager_training_test {
namespace {

using ::testing::HasSubstr;

class EagerTrainingTest : public ::testing::Test {
 protected:
  EagerTrainingTest() {
    ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 5;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(Context::Create(options).value());
  }

  Tensor Vec(const std::vector<float>& values, Device device = Device::Cpu()) {
    return context_->FromVector(values, Shape({static_cast<int64_t>(values.size())}), device)
        .value();
  }
  static std::vector<float> Values(const Tensor& t) { return t.ToVector<float>().value(); }

  // A 4-16-16-1 tanh MLP from fixed seeds fit to a linear target for `steps` SGD steps on
  // `device` (the middle layer on compute stream 1 when `two_streams`); the losses.
  std::vector<float> TrainMlp(Device device, int steps, bool two_streams = false,
                              int64_t seed = 1) {
    std::vector<float> xs, ys;
    for (int p = 0; p < 16; ++p) {
      for (int k = 0; k < 4; ++k) xs.push_back(std::sin(0.3f * static_cast<float>(p * 4 + k)));
      const float* row = &xs[xs.size() - 4];
      ys.push_back(0.5f * row[0] - 0.25f * row[2] + 0.3f);
    }
    Tensor x = context_->FromVector(xs, Shape({16, 4}), device).value();
    Tensor y = context_->FromVector(ys, Shape({16, 1}), device).value();
    std::vector<nn::Linear> layers;
    nn::LinearOptions options;
    options.device = device;
    for (auto [in, out] : {std::pair<int64_t, int64_t>{4, 16}, {16, 16}, {16, 1}}) {
      options.seed = seed++;
      layers.push_back(nn::Linear::Create(*context_, in, out, options).value());
    }
    std::vector<Tensor> params;
    for (const nn::Linear& layer : layers) {
      for (const Tensor& p : layer.parameters()) params.push_back(p);
    }
    Sgd sgd = Sgd::Create(params, 0.1).value();
    std::vector<float> losses;
    for (int step = 0; step < steps; ++step) {
      Tensor h = x;
      for (size_t l = 0; l < layers.size(); ++l) {
        std::optional<StreamScope> side;
        if (two_streams && l == 1) side.emplace(StreamKey{device, StreamType::kCompute, 1});
        h = layers[l](h).value();
        if (l + 1 < layers.size()) h = fn::Tanh(h).value();
      }
      Tensor loss = fn::ReduceMean(fn::Square(fn::Sub(h, y).value()).value()).value();
      EXPECT_TRUE(autograd::Backward(loss).ok());
      EXPECT_TRUE(sgd.Step().ok());
      sgd.ZeroGrad();
      losses.push_back(Values(loss)[0]);
    }
    return losses;
  }

  std::optional<Context> context_;
};

TEST_F(EagerTrainingTest, SgdStepsByTheLearningRateTimesTheGradient) {
  Tensor w = Vec({1.0f, -2.0f});
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  Sgd sgd = Sgd::Create({w}, 0.5).value();
  // loss = sum(w * w): grad 2w.
  ASSERT_TRUE(autograd::Backward(fn::ReduceSum(fn::Mul(w, w).value()).value()).ok());
  ASSERT_TRUE(sgd.Step().ok());
  EXPECT_THAT(Values(w), ::testing::ElementsAre(0.0f, 0.0f));  // w - 0.5 * 2w
  sgd.ZeroGrad();
  EXPECT_FALSE(autograd::GradOf(w).valid());
  ASSERT_TRUE(sgd.Step().ok());  // no gradient: nothing moves
  EXPECT_THAT(Values(w), ::testing::ElementsAre(0.0f, 0.0f));
}

TEST_F(EagerTrainingTest, AdamTakesItsFirstStepOfSizeLearningRate) {
  Tensor w = Vec({1.0f, -2.0f, 0.5f});
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  AdamOptions options;
  options.learning_rate = 0.1;
  Adam adam = Adam::Create({w}, options).value();
  ASSERT_TRUE(autograd::Backward(fn::ReduceSum(fn::Mul(w, w).value()).value()).ok());
  ASSERT_TRUE(adam.Step().ok());
  // With bias correction, Adam's first step is lr * sign(grad) (up to epsilon).
  const std::vector<float> after = Values(w);
  EXPECT_NEAR(after[0], 0.9f, 1e-5);
  EXPECT_NEAR(after[1], -1.9f, 1e-5);
  EXPECT_NEAR(after[2], 0.4f, 1e-5);
}

TEST_F(EagerTrainingTest, OptimizersRefuseParametersThatCannotTrain) {
  Tensor plain = Vec({1.0f});
  absl::StatusOr<Sgd> sgd = Sgd::Create({plain}, 0.1);
  EXPECT_EQ(sgd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sgd.status().message()), HasSubstr("parameter 0 is not a leaf"));
  EXPECT_EQ(Adam::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  Tensor w = Vec({1.0f});
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  Tensor derived = fn::Scale(w, 2.0).value();
  EXPECT_EQ(Sgd::Create({w, derived}, 0.1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EagerTrainingTest, AnMlpLearns) {
  const std::vector<float> losses = TrainMlp(Device::Cpu(), 60);
  EXPECT_LT(losses.back(), losses.front() / 4) << losses.front() << " -> " << losses.back();
}

// Trains `steps` steps of a small layer; after each, the live tensors, the step's peak
// bytes, and the bytes in use once the VM freed its parked blobs. `keep_every_loss`: the caller
// keeps each step's loss (what a leak of one small tensor per step looks like).
struct StepMemory {
  std::vector<int64_t> live, peak, in_use;
};
StepMemory TrainAndCount(eager::Context& context, int steps, bool keep_every_loss) {
  StepMemory out;
  Tensor x = context.FromVector(std::vector<float>(64, 0.5f), Shape({4, 16})).value();
  nn::LinearOptions options;
  options.seed = 3;
  nn::Linear layer = nn::Linear::Create(context, 16, 16, options).value();
  Sgd sgd = Sgd::Create(layer.parameters(), 0.01).value();
  Allocator& allocator = context.runtime()->GetDevice(Device::Cpu()).value()->allocator();
  std::vector<Tensor> kept;
  for (int step = 0; step < steps; ++step) {
    allocator.ResetPeakBytes();  // from the previous step's end: nothing parked
    Tensor loss = fn::ReduceMean(fn::Square(fn::Tanh(layer(x).value()).value()).value()).value();
    EXPECT_TRUE(autograd::Backward(loss).ok());
    EXPECT_TRUE(sgd.Step().ok());
    sgd.ZeroGrad();
    EXPECT_TRUE(loss.ToVector<float>().ok());
    if (keep_every_loss) kept.push_back(loss);
    loss = Tensor();
    EXPECT_TRUE(context.Sync().ok());
    // Dead small blobs wait, storage and all, for a new one of their shape (parked; how
    // many depends on how far the VM lagged this thread): free them, and the allocator
    // counts exactly what the live tensors hold.
    EXPECT_TRUE(context.vm()->FreeParkedBlobs().ok());
    out.live.push_back(context.LiveTensors());
    out.peak.push_back(allocator.stats().peak_bytes_in_use);
    out.in_use.push_back(allocator.stats().bytes_in_use);
  }
  return out;
}

// 100 steps: live tensors are the same at every step's end, and so are the bytes in use,
// to the byte.
TEST_F(EagerTrainingTest, NothingAccumulatesOverAHundredSteps) {
  const StepMemory memory = TrainAndCount(*context_, 100, /*keep_every_loss=*/false);
  // x, the weight, the bias and the two learning rates: nothing else of the steps survives
  // them.
  for (int step = 0; step < 100; ++step) {
    EXPECT_EQ(memory.live[static_cast<size_t>(step)], 5) << step;
    EXPECT_EQ(memory.in_use[static_cast<size_t>(step)], memory.in_use[0]) << step;
  }
  // A step's peak depends on how far the VM lagged the issuing thread (frees run as work
  // completes), but does not grow: every step's stays within twice the largest of the
  // first ten.
  const int64_t early_peak = *std::max_element(memory.peak.begin(), memory.peak.begin() + 10);
  for (int step = 10; step < 100; ++step) {
    EXPECT_LE(memory.peak[static_cast<size_t>(step)], 2 * early_peak) << step;
  }
}

// The counts above see one scalar kept per step: the check can fail.
TEST_F(EagerTrainingTest, TheStepCountsSeeOneTensorKeptPerStep) {
  const StepMemory memory = TrainAndCount(*context_, 10, /*keep_every_loss=*/true);
  for (int step = 1; step < 10; ++step) {
    EXPECT_EQ(memory.live[static_cast<size_t>(step)], 6 + step) << step;
    EXPECT_GT(memory.in_use[static_cast<size_t>(step)], memory.in_use[step - 1]) << step;
  }
}

// FreeParkedBlobs leaves parking on: the next steps recycle again.
TEST_F(EagerTrainingTest, ParkingGoesOnAfterTheParkedBlobsAreFreed) {
  TrainAndCount(*context_, 3, /*keep_every_loss=*/false);
  // The training's own tensors (the input, the layer, the optimizer) died as it returned,
  // after its last FreeParkedBlobs: the VM parks them as it gets to their releases, so how
  // many are parked now depends on timing (one was, once, under ASan). Free them too.
  ASSERT_TRUE(context_->vm()->FreeParkedBlobs().ok());
  EXPECT_EQ(context_->vm()->stats().parked_blobs, 0);
  const int64_t recycled = context_->vm()->stats().recycled_blobs;
  Tensor a =
      fn::Tanh(context_->FromVector(std::vector<float>(64, 0.5f), Shape({4, 16})).value()).value();
  a = Tensor();
  // Two syncs, as FreeParkedBlobs waits two barriers: a fused run's private blobs die at
  // the end of the scheduler pass its barrier fired in.
  ASSERT_TRUE(context_->Sync().ok());
  ASSERT_TRUE(context_->Sync().ok());
  for (int i = 0; i < 20; ++i) {
    Tensor b = fn::Tanh(context_->FromVector(std::vector<float>(64, 0.5f), Shape({4, 16})).value())
                   .value();
    ASSERT_TRUE(b.ToVector<float>().ok());
  }
  EXPECT_GT(context_->vm()->stats().recycled_blobs, recycled);
}

// Two threads train two models on one context (one VM) at once: each gets the losses it
// gets alone, and the checker sees every access ordered.
TEST_F(EagerTrainingTest, TwoThreadsTrainTwoModelsOnOneContext) {
  const std::vector<float> alone_a = TrainMlp(Device::Cpu(), 20, false, 1);
  const std::vector<float> alone_b = TrainMlp(Device(DeviceType::kSim, 0), 20, false, 11);
  std::vector<float> a, b;
  std::thread first([&] { a = TrainMlp(Device::Cpu(), 20, false, 1); });
  std::thread second([&] { b = TrainMlp(Device(DeviceType::kSim, 0), 20, false, 11); });
  first.join();
  second.join();
  EXPECT_EQ(a, alone_a);
  EXPECT_EQ(b, alone_b);
  EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
}

// Training with the middle layer on a second sim stream (jitter on) gives the cpu's losses
// within 1e-6, with no sync error.
TEST_F(EagerTrainingTest, TwoSimStreamsGiveTheCpuLosses) {
  const std::vector<float> cpu = TrainMlp(Device::Cpu(), 30);
  const std::vector<float> sim = TrainMlp(Device(DeviceType::kSim, 0), 30, true);
  ASSERT_EQ(cpu.size(), sim.size());
  for (size_t k = 0; k < cpu.size(); ++k) EXPECT_NEAR(sim[k], cpu[k], 1e-6) << k;
  EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
}

}  // namespace
}  // namespace sluice::eager::eager_training_test
