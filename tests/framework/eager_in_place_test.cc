// The eager in-place functions the op table writes (fn::AddInPlace, MulInPlace, ScaleInPlace,
// ReluInPlace; docs/ops.md, `in_place`): the same values as the out-of-place op, written into
// the first operand's own storage (one kernel, no copy back), on cpu and sim under the sync
// checker; refused while the operand requires a gradient and gradients are recorded; and a
// gradient that saved the old value fails at Backward through the version counter.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "vm/sync_checker.h"

namespace sluice::framework::eager_in_place_test {
namespace {

using eager::Tensor;
using ::testing::HasSubstr;

class EagerInPlaceTest : public ::testing::TestWithParam<Device> {
 protected:
  EagerInPlaceTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 5;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
  }
  ~EagerInPlaceTest() override {
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0)
        << context_->vm()->sync_checker()->status();
  }

  Tensor Vec(const std::vector<float>& values) {
    return context_->FromVector(values, Shape({static_cast<int64_t>(values.size())}), GetParam())
        .value();
  }
  static std::vector<float> Values(const Tensor& t) { return t.ToVector<float>().value(); }
  int64_t OpCalls() { return context_->vm()->stats().op_calls; }

  std::optional<eager::Context> context_;
};

// Each in-place function gives the out-of-place op's bits, in the operand itself (a second
// handle to it sees them), with exactly one op call: the schema's pair lets the kernel write
// the operand's storage, so no fresh output and no copy back.
TEST_P(EagerInPlaceTest, InPlaceGivesTheOutOfPlaceValuesInOneKernel) {
  const std::vector<float> start = {1.5f, -2.25f, 0.0f, 3.0f, -0.5f};
  const Tensor y = Vec({0.5f, 4.0f, -1.0f, 2.0f, 8.0f});
  struct Case {
    const char* name;
    absl::StatusOr<Tensor> (*out_of_place)(const Tensor&, const Tensor&);
    absl::Status (*in_place)(const Tensor&, const Tensor&);
  };
  const Case binary[] = {
      {"add", [](const Tensor& a, const Tensor& b) { return fn::Add(a, b); },
       [](const Tensor& a, const Tensor& b) { return fn::AddInPlace(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return fn::Mul(a, b); },
       [](const Tensor& a, const Tensor& b) { return fn::MulInPlace(a, b); }},
      {"scale", [](const Tensor& a, const Tensor&) { return fn::Scale(a, -3.0, 0.25); },
       [](const Tensor& a, const Tensor&) { return fn::ScaleInPlace(a, -3.0, 0.25); }},
      {"relu", [](const Tensor& a, const Tensor&) { return fn::Relu(a); },
       [](const Tensor& a, const Tensor&) { return fn::ReluInPlace(a); }},
  };
  for (const Case& c : binary) {
    const Tensor x = Vec(start);
    const Tensor alias = x;  // the same tensor: must see the write
    const std::vector<float> want = Values(c.out_of_place(x, y).value());
    ASSERT_EQ(Values(x), start) << c.name << ": the out-of-place op changed its operand";
    const int64_t before = OpCalls();
    const absl::Status status = c.in_place(x, y);
    ASSERT_TRUE(status.ok()) << c.name << ": " << status;
    EXPECT_EQ(OpCalls() - before, 1) << c.name << ": written through a copy";
    EXPECT_EQ(Values(alias), want) << c.name;
    EXPECT_EQ(Values(y), (std::vector<float>{0.5f, 4.0f, -1.0f, 2.0f, 8.0f})) << c.name;
  }
  // The count can fail: matmul declares no pair in place, so writing its first operand takes
  // a fresh output and an `assign` back (the aliasing rule): two op calls.
  const Tensor m =
      context_->FromVector(std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}, Shape({2, 2}), GetParam())
          .value();
  const int64_t before = OpCalls();
  ASSERT_TRUE(
      context_
          ->CallInto("matmul", {{m}, {m}}, {{m}},
                     vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0}))
          .ok());
  EXPECT_EQ(OpCalls() - before, 2);
  EXPECT_EQ(Values(m), (std::vector<float>{7.0f, 10.0f, 15.0f, 22.0f}));
  // An operand in place of itself: x += x.
  const Tensor x = Vec(start);
  ASSERT_TRUE(fn::AddInPlace(x, x).ok());
  EXPECT_EQ(Values(x), (std::vector<float>{3.0f, -4.5f, 0.0f, 6.0f, -1.0f}));
}

// An operand that requires a gradient is refused while gradients are recorded, naming the op,
// and nothing is written; under NoGradGuard the same call updates it.
TEST_P(EagerInPlaceTest, RefusedOnATensorThatRequiresAGradient) {
  const Tensor w = Vec({1.0f, -1.0f});
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  const absl::Status refused = fn::ReluInPlace(w);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("op 'relu' writes in place"));
  EXPECT_EQ(Values(w), (std::vector<float>{1.0f, -1.0f}));
  {
    autograd::NoGradGuard no_grad;
    ASSERT_TRUE(fn::ReluInPlace(w).ok());
  }
  EXPECT_EQ(Values(w), (std::vector<float>{1.0f, 0.0f}));
}

// An in-place call is not recorded: one that reads a tensor requiring a gradient while
// gradients are recorded is refused (its gradient would be lost), naming the op and the
// input, and nothing is written; under NoGradGuard it runs.
TEST_P(EagerInPlaceTest, RefusedWhenItReadsATensorThatRequiresAGradient) {
  const Tensor x = Vec({1.0f, 2.0f});
  const Tensor w = Vec({0.5f, -0.5f});
  ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
  const absl::Status refused = fn::AddInPlace(x, w);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("op 'add' writes in place and reads input 1"));
  EXPECT_EQ(Values(x), (std::vector<float>{1.0f, 2.0f}));
  {
    autograd::NoGradGuard no_grad;
    ASSERT_TRUE(fn::AddInPlace(x, w).ok());
  }
  EXPECT_EQ(Values(x), (std::vector<float>{1.5f, 1.5f}));
}

// A tensor that a gradient saved, then changed in place, makes Backward fail naming the op
// and the operand (the version counter); without the in-place call the same Backward passes,
// so the failure is the write's.
TEST_P(EagerInPlaceTest, ASavedOperandChangedInPlaceFailsBackward) {
  for (const bool modify : {false, true}) {
    const Tensor x = Vec({2.0f, 3.0f});
    const Tensor w = Vec({0.5f, 0.25f});
    ASSERT_TRUE(autograd::SetRequiresGrad(w).ok());
    const Tensor loss = fn::ReduceSum(fn::Mul(x, w).value()).value();  // dw = x: x is saved
    if (modify) ASSERT_TRUE(fn::AddInPlace(x, Vec({1.0f, 1.0f})).ok());
    const absl::Status status = autograd::Backward(loss);
    if (!modify) {
      EXPECT_TRUE(status.ok()) << status;
      continue;
    }
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("backward through op 'mul': its input 0 was modified in place"));
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, EagerInPlaceTest,
                         ::testing::Values(Device::Cpu(), Device(DeviceType::kSim, 0)),
                         [](const auto& info) {
                           return info.param.type() == DeviceType::kCpu ? std::string("cpu")
                                                                        : std::string("sim");
                         });

}  // namespace
}  // namespace sluice::framework::eager_in_place_test
