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
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/eager/stream_scope.h"
#include "framework/training/eager_optimizers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"

namespace sluice::autograd::autograd_test {
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
  Tensor loss = fn::ReduceSum(fn::Tanh(fn::Mul(x, w).value()).value()).value();
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

// x used twice by one op and twice across ops: the gradients that meet are summed.
TEST_F(AutogradTest, ATensorUsedTwiceGetsTheSumOfItsGradients) {
  Tensor x = Leaf({1.0f, -2.0f, 3.0f});
  // loss = sum(x * x + 3 x): dloss/dx = 2x + 3.
  Tensor square = fn::Mul(x, x).value();
  Tensor loss = fn::ReduceSum(fn::Add(square, fn::Scale(x, 3.0).value()).value()).value();
  ASSERT_TRUE(Backward(loss).ok());
  EXPECT_THAT(Values(GradOf(x)), ElementsAre(5.0f, -1.0f, 9.0f));
}

// a = 2x and b = tanh(x) meet again in c = a * b: dc/dx = 2 tanh(x) + 2x (1 - tanh^2 x).
TEST_F(AutogradTest, ADiamondSumsBothPaths) {
  const std::vector<float> xv = {0.3f, -0.7f};
  Tensor x = Leaf(xv);
  Tensor a = fn::Scale(x, 2.0).value();
  Tensor b = fn::Tanh(x).value();
  Tensor loss = fn::ReduceSum(fn::Mul(a, b).value()).value();
  ASSERT_TRUE(Backward(loss).ok());
  const std::vector<float> dx = Values(GradOf(x));
  for (size_t k = 0; k < xv.size(); ++k) {
    const float t = std::tanh(xv[k]);
    EXPECT_NEAR(dx[k], 2 * t + 2 * xv[k] * (1 - t * t), 1e-6) << k;
  }
}

// retain_graph keeps the graph: two passes accumulate twice the gradient; a pass without
// it frees the graph, and the next one is an error naming the op.
TEST_F(AutogradTest, RetainGraphTwiceDoublesTheGradientAndAFreedGraphIsAnError) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor loss = fn::ReduceSum(fn::Tanh(x).value()).value();
  ASSERT_TRUE(Backward(loss, Tensor(), {.retain_graph = true}).ok());
  const std::vector<float> once = Values(GradOf(x));
  ASSERT_TRUE(Backward(loss, Tensor(), {.retain_graph = true}).ok());
  const std::vector<float> twice = Values(GradOf(x));
  for (size_t k = 0; k < once.size(); ++k) EXPECT_FLOAT_EQ(twice[k], 2 * once[k]);
  ASSERT_TRUE(Backward(loss).ok());  // frees the graph
  const absl::Status again = Backward(loss);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("a second time"));
  EXPECT_THAT(std::string(again.message()), HasSubstr("retain_graph"));
  // The failed pass changed nothing.
  const std::vector<float> thrice = Values(GradOf(x));
  for (size_t k = 0; k < once.size(); ++k) EXPECT_FLOAT_EQ(thrice[k], 3 * once[k]);
}

TEST_F(AutogradTest, NoGradGuardRecordsNothing) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor y;
  {
    NoGradGuard guard;
    y = fn::Tanh(x).value();
    { NoGradGuard nested; }
    EXPECT_FALSE(RequiresGrad(fn::Scale(x, 2.0).value()));  // still off after the nested one
  }
  EXPECT_FALSE(RequiresGrad(y));
  EXPECT_TRUE(RequiresGrad(fn::Tanh(x).value()));  // on again
  const absl::Status status = Backward(fn::ReduceSum(y).value());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("does not require a gradient"));
}

// Detach shares storage and drops history: ops on it record nothing, and a write to the
// storage shows through both handles.
TEST_F(AutogradTest, DetachSharesStorageWithoutHistory) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor y = fn::Tanh(x).value();
  Tensor d = Detach(y);
  EXPECT_FALSE(RequiresGrad(d));
  EXPECT_TRUE(IsLeaf(d));
  EXPECT_FALSE(RequiresGrad(fn::Scale(d, 2.0).value()));
  EXPECT_EQ(Values(d), Values(y));
  {
    NoGradGuard guard;
    // d -= 1 * ones: through the storage y and d share.
    ASSERT_TRUE(eager::SgdStep(d, Vec({1.0f, 1.0f}), Vec({1.0f})).ok());
  }
  EXPECT_FLOAT_EQ(Values(y)[0], std::tanh(1.0f) - 1.0f);
  // y's node saved y (tanh's gradient reads its output): the write shows as a modification.
  const absl::Status status = Backward(fn::ReduceSum(y).value());
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("backward through op 'tanh': its output 0 was modified in place"));
}

// A saved input modified in place after it was saved is an error naming the op; an
// in-place write to a tensor that requires a gradient is refused while recording.
TEST_F(AutogradTest, AModifiedSavedInputIsAnErrorNamingTheOp) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor w = Leaf({3.0f, 4.0f});
  Tensor loss = fn::ReduceSum(fn::Mul(x, w).value()).value();
  const absl::Status refused = eager::SgdStep(w, Vec({1.0f, 1.0f}), Vec({0.5f}));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("NoGradGuard"));
  {
    NoGradGuard guard;
    ASSERT_TRUE(eager::SgdStep(w, Vec({1.0f, 1.0f}), Vec({0.5f})).ok());
  }
  const absl::Status status = Backward(loss);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("backward through op 'mul': its input 1 was modified in place"));
}

TEST_F(AutogradTest, NonScalarRootsNeedAGradient) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor y = fn::Scale(x, 3.0).value();
  const absl::Status status = Backward(y);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("needs its gradient"));
  const absl::Status wrong = Backward(y, Vec({1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
  ASSERT_TRUE(Backward(y, Vec({1.0f, -2.0f})).ok());
  EXPECT_THAT(Values(GradOf(x)), ElementsAre(3.0f, -6.0f));
}

TEST_F(AutogradTest, IntegerTensorsHaveNoGradients) {
  Tensor i = context_->FromVector(std::vector<int64_t>{1, 2}, Shape({2})).value();
  const absl::Status status = SetRequiresGrad(i);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("i64"));
  EXPECT_FALSE(RequiresGrad(i));
  // A float leaf through a cast to an integer: the integer output carries no gradient.
  Tensor x = Leaf({1.5f, 2.5f});
  Tensor as_int = fn::Cast(x, DataType::kI64).value();
  EXPECT_FALSE(RequiresGrad(as_int));
}

// An op with no grad maker on the way from the root is an error naming it, at backward.
TEST_F(AutogradTest, AnOpWithoutAGradientIsAnErrorAtBackward) {
  Tensor x = Leaf({1.0f, 2.0f});
  Tensor zeros = fn::FillZerosLike(x).value();
  Tensor loss = fn::ReduceSum(fn::Add(zeros, x).value()).value();
  const absl::Status status = Backward(loss);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("backward through op 'fill_zeros_like': op 'fill_zeros_like' has no "
                        "gradient"))
      << status;
}

// RetainGrad keeps a non-leaf's gradient; others are not kept.
TEST_F(AutogradTest, RetainGradKeepsANonLeafsGradient) {
  Tensor x = Leaf({0.5f, -1.0f});
  Tensor h = fn::Tanh(x).value();
  Tensor h2 = fn::Mul(h, h).value();
  ASSERT_TRUE(RetainGrad(h).ok());
  ASSERT_TRUE(Backward(fn::ReduceSum(h2).value()).ok());
  const std::vector<float> hv = Values(h), dh = Values(GradOf(h));
  for (size_t k = 0; k < hv.size(); ++k) EXPECT_FLOAT_EQ(dh[k], 2 * hv[k]);
  EXPECT_FALSE(GradOf(h2).valid());
  EXPECT_EQ(RetainGrad(Vec({1.0f})).code(), absl::StatusCode::kFailedPrecondition);
}

// Grad returns gradients without touching the leaves' accumulated ones, for leaves and for
// intermediate tensors; an input the outputs do not depend on is an error naming it.
TEST_F(AutogradTest, GradReturnsWithoutAccumulating) {
  Tensor x = Leaf({0.5f, -1.0f});
  Tensor w = Leaf({2.0f, 3.0f});
  Tensor unrelated = Leaf({1.0f});
  Tensor h = fn::Mul(x, w).value();
  Tensor loss = fn::ReduceSum(fn::Tanh(h).value()).value();
  absl::StatusOr<std::vector<Tensor>> grads = Grad({loss}, {x, h}, {}, {.retain_graph = true});
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_FALSE(GradOf(x).valid());
  EXPECT_FALSE(GradOf(w).valid());
  ASSERT_TRUE(Backward(loss, Tensor(), {.retain_graph = true}).ok());
  EXPECT_EQ(Values((*grads)[0]), Values(GradOf(x)));
  const std::vector<float> hv = Values(h), dh = Values((*grads)[1]);
  for (size_t k = 0; k < hv.size(); ++k) {
    const float t = std::tanh(hv[k]);
    EXPECT_FLOAT_EQ(dh[k], 1 - t * t);
  }
  absl::StatusOr<std::vector<Tensor>> none = Grad({loss}, {unrelated});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("input 0 does not reach"));
}

// Forward ops on two sim streams (StreamScope) with jitter: each grad op runs on its
// forward op's stream, the gradients meeting at x come from both, and the checker sees
// every access ordered. Same values as on cpu.
TEST_F(AutogradTest, GradientsMeetingFromTwoStreamsAreOrdered) {
  const std::vector<float> xv = {0.25f, -0.5f, 1.0f, 2.0f}, wv = {1.0f, -1.0f, 0.5f, 0.25f};
  auto run = [&](Device device, bool two_streams) {
    Tensor x = Leaf(xv, device), w = Leaf(wv, device);
    Tensor a = fn::Mul(x, w).value();
    Tensor b;
    {
      std::optional<eager::StreamScope> side;
      if (two_streams) side.emplace(StreamKey{device, StreamType::kCompute, 1});
      b = fn::Tanh(fn::Scale(x, 0.5).value()).value();
    }
    Tensor loss = fn::ReduceSum(fn::Mul(a, b).value()).value();
    EXPECT_TRUE(Backward(loss).ok());
    return std::make_pair(Values(GradOf(x)), Values(GradOf(w)));
  };
  const auto want = run(Device::Cpu(), false);
  const vm::VmStats before = context_->vm()->stats();
  for (int k = 0; k < 20; ++k) {
    EXPECT_EQ(run(Device(DeviceType::kSim, 0), true), want) << k;
  }
  // The work did cross streams (soft sync ordered it), forward and backward.
  const vm::VmStats after = context_->vm()->stats();
  EXPECT_GE(after.stream_waits + after.record_events - before.stream_waits - before.record_events,
            20 * 2);
  EXPECT_EQ(violations(), 0);
}

// A backward pass frees what the graph saved: after it, only the user's tensors and the
// gradients are alive, pass after pass.
TEST_F(AutogradTest, SavedTensorsAreGoneAfterBackward) {
  Tensor w = Leaf({0.1f, 0.2f, 0.3f, 0.4f});
  Tensor x = Vec({1.0f, 2.0f, 3.0f, 4.0f});
  std::vector<int64_t> live;
  for (int step = 0; step < 5; ++step) {
    {
      Tensor h = fn::Tanh(fn::Mul(x, w).value()).value();
      Tensor loss = fn::ReduceSum(fn::Mul(h, h).value()).value();
      ASSERT_TRUE(Backward(loss).ok());
    }
    ZeroGrad(w);
    ASSERT_TRUE(context_->Sync().ok());
    live.push_back(context_->LiveTensors());
  }
  // w and x: nothing of the passes survives them.
  EXPECT_THAT(live, ElementsAre(2, 2, 2, 2, 2));
  // A forward pass whose backward never runs is freed with its tensors too (no cycles).
  {
    Tensor h = fn::Tanh(fn::Mul(x, w).value()).value();
    Tensor loss = fn::ReduceSum(fn::Mul(h, h).value()).value();
  }
  EXPECT_EQ(context_->LiveTensors(), 2);
}

// The chain's length: 3 x 10^5 in a plain build, 10^5 under a sanitizer, whose frames are
// several times larger, so that either overflows an 8 MiB stack if freeing recursed once a
// node (10^5 levels of a few hundred bytes each). Under TSan the 3 x 10^5 eager adds took 66 s.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kLongChain = 100000;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int kLongChain = 100000;
#else
constexpr int kLongChain = 300000;
#endif
#else
constexpr int kLongChain = 300000;
#endif

// A graph as long as a training loop's unrolled history (kLongChain dependent adds, each node
// saving the tensor before it) is freed without a recursion as deep as the chain, and a
// backward pass through it works.
TEST_F(AutogradTest, AVeryLongChainIsFreedAndDifferentiated) {
  Tensor x = Leaf({1.0f});
  Tensor one = Vec({1.0f});
  {
    Tensor acc = x;
    for (int i = 0; i < kLongChain; ++i) acc = fn::Add(acc, one).value();
  }  // dropped unused
  EXPECT_EQ(context_->LiveTensors(), 2);
  Tensor acc = x;
  for (int i = 0; i < 1000; ++i) acc = fn::Mul(acc, one).value();
  ASSERT_TRUE(Backward(acc).ok());
  EXPECT_THAT(Values(GradOf(x)), ElementsAre(1.0f));
}

// Grad computes what its inputs need and no more: it runs no grad op past them (so an op
// without a gradient below them is no error) and frees nothing it did not run, so a later
// Backward through the rest of the graph works.
TEST_F(AutogradTest, GradStopsAtItsInputs) {
  Tensor w = Leaf({1.0f, 2.0f});
  Tensor h = fn::Mul(w, w).value();
  Tensor l1 = fn::ReduceSum(h).value();
  Tensor l2 = fn::ReduceSum(fn::Scale(h, 3.0).value()).value();
  absl::StatusOr<std::vector<Tensor>> dh = Grad({l1}, {h});
  ASSERT_TRUE(dh.ok()) << dh.status();
  EXPECT_THAT(Values((*dh)[0]), ElementsAre(1.0f, 1.0f));
  ASSERT_TRUE(Backward(l2).ok());  // mul's node was not run, so not freed
  EXPECT_THAT(Values(GradOf(w)), ElementsAre(6.0f, 12.0f));

  Tensor x = Leaf({1.0f, 2.0f});
  Tensor sum = fn::Add(fn::FillZerosLike(x).value(), x).value();
  absl::StatusOr<std::vector<Tensor>> dsum = Grad({fn::ReduceSum(sum).value()}, {sum});
  ASSERT_TRUE(dsum.ok()) << dsum.status();  // fill_zeros_like's missing gradient is not needed
  EXPECT_THAT(Values((*dsum)[0]), ElementsAre(1.0f, 1.0f));
}

// A root's gradient that itself requires a gradient is taken detached: the leaf's
// accumulated gradient carries no history, and nothing is left alive in a cycle.
TEST_F(AutogradTest, ASeedThatRequiresAGradientLeavesNoCycle) {
  const int64_t before = context_->LiveTensors();
  {
    Tensor w = Leaf({1.0f, 2.0f});
    Tensor g = fn::Scale(w, 2.0).value();
    ASSERT_TRUE(Backward(w, g).ok());
    EXPECT_FALSE(RequiresGrad(GradOf(w)));
    EXPECT_THAT(Values(GradOf(w)), ElementsAre(2.0f, 4.0f));
    Tensor y = fn::Scale(w, 1.0).value();
    ASSERT_TRUE(RetainGrad(y).ok());
    ASSERT_TRUE(Backward(y, fn::Scale(y, 1.0).value()).ok());
    EXPECT_FALSE(RequiresGrad(GradOf(y)));
  }
  EXPECT_EQ(context_->LiveTensors(), before);
}

}  // namespace
}  // namespace sluice::autograd::autograd_test
