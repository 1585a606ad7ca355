// Eager autograd (framework/autograd/autograd.h): recording and backward on small eager
// programs whose gradients are known in closed form; accumulation (a tensor used twice, a
// diamond, two passes with retain_graph, gradients meeting from two streams); NoGradGuard,
// Detach, RetainGrad, Grad without accumulation; and the errors (a saved tensor modified
// in place, a second pass through a freed graph, a non-scalar root without a gradient,
// integer tensors, an op without a gradient).
#include "framework/autograd/autograd.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/eager/functional.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"

namespace sluice::autograd {
namespace {

using eager::Tensor;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AutogradTest : public ::testing::Test {
 protected:
  AutogradTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 10;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
  }

  Tensor Vec(const std::vector<float>& values, Device device = Device::Cpu()) {
    return context_->FromVector(values, Shape({static_cast<int64_t>(values.size())}), device)
        .value();
  }
  Tensor Leaf(const std::vector<float>& values, Device device = Device::Cpu()) {
    Tensor t = Vec(values, device);
    EXPECT_TRUE(SetRequiresGrad(t).ok());
    return t;
  }
  static std::vector<float> Values(const Tensor& t) { return t.ToVector<float>().value(); }

  int64_t violations() const { return context_->vm()->sync_checker()->violation_count(); }

  std::optional<eager::Context> context_;
};

// loss = sum(tanh(x * w)): dloss/dx = w (1 - tanh^2(x w)), dloss/dw = x (1 - tanh^2(x w)).
TEST_F(AutogradTest, TanhOfAProductHasTheClosedFormGradient) {
  const std::vector<float> xv = {0.5f, -1.0f, 2.0f}, wv = {1.5f, 0.25f, -0.5f};
  Tensor x = Leaf(xv), w = Leaf(wv);
  Tensor loss = eager::ReduceSum(eager::Tanh(eager::Mul(x, w).value()).value()).value();
  EXPECT_TRUE(RequiresGrad(loss));
  EXPECT_FALSE(IsLeaf(loss));
  ASSERT_TRUE(Backward(loss).ok());
  const std::vector<float> dx = Values(GradOf(x)), dw = Values(GradOf(w));
  for (size_t k = 0; k < xv.size(); ++k) {
    const float t = std::tanh(xv[k] * wv[k]);
    EXPECT_FLOAT_EQ(dx[k], wv[k] * (1 - t * t)) << k;
    EXPECT_FLOAT_EQ(dw[k], xv[k] * (1 - t * t)) << k;
  }
  EXPECT_EQ(violations(), 0);
}

}  // namespace
}  // namespace sluice::autograd
