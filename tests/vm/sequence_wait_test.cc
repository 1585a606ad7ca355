// Cross-sequence waits (StepSequence::AddWait): two sequences on cpu streams of two workers,
// submitted together with no edge between them. Proven here: a wait holds its step until the
// source passed the awaited step, while the steps before it run at once; without the wait
// the same step runs early and reads the old value (so the first test can fail); a
// ping-pong resubmitted for many runs gives the sequential result (a run's waits are not
// satisfied by the previous run's progress), also across the run number's wrap-around; a
// VM cancelling its work ends a wait for a sequence that will never run, instead of hanging
// the shutdown, and a sequence that gave up waiting does not let its own waiters run on
// what it skipped. Both scheduling modes.
#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/step_sequence.h"

namespace sluice::vm::sequence_wait_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::kHangGuard;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
using testing::Shared;
using testing::SlowKernel;
using testing::Tag;
using testing::VmHarness;
using testing::WaitForShutdownBarrier;
using Scheduling = VmOptions::Scheduling;

constexpr char kCpu0[] = "cpu";
constexpr char kCpu1[] = "cpu/compute:1";

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  return options;
}

class SequenceWaitTest : public ::testing::TestWithParam<Scheduling> {
 protected:
  SequenceWaitTest() : h_(Options(GetParam())) {
    a_.set_run_counter(&run_);
    b_.set_run_counter(&run_);
  }
  ~SequenceWaitTest() override {
    gate_.Open();
    held_.Open();
    if (shutter_.joinable()) shutter_.join();
  }

  // A blob on cpu holding 4 x `value`, written and synced.
  BlobRef Written(float value) {
    BlobRef blob = h_.NewF32(kCpu0, 4);
    EXPECT_TRUE(h_.Write(blob, std::vector<float>(4, value)).ok());
    EXPECT_TRUE(h_.vm->Sync().ok());
    return blob;
  }
  // One run: the next run number, then `b_` on cpu/compute:1 and `a_` on cpu, no edges.
  // `a_` last: in caller-thread mode a chain whose last instruction's worker is busy is
  // scheduled by that worker when it finishes, and the cancel test keeps `b_`'s busy.
  absl::Status SubmitRun() {
    run_.fetch_add(1, std::memory_order_relaxed);
    if (batch_.size() == 0) {
      batch_.AddOpCall(b_, {}, {}, nullptr, h_.S(kCpu1));
      batch_.AddOpCall(a_, {}, {}, nullptr, h_.S(kCpu0));
    }
    return batch_.Submit(h_.vm.get());
  }
  // x starts at 1; b_ writes 2 into it behind the gate; a_ runs A0, then (with `wait`)
  // waits for b_'s write, then C reads x.
  void BuildGatedPair(bool wait) {
    x_ = Written(1);
    b_.AddCall(gated_, {}, {x_.get()}, Shared(Tag("B", 2)));
    a_.AddCall(logger_, {}, {}, Shared(Tag("A0")));
    if (wait) a_.AddWait(&b_, 1);
    a_.AddCall(logger_, {x_.get()}, {}, Shared(Tag("C")));
  }

  // Shuts the VM down with cancellation from another thread and returns once the VM has
  // raised its cancel flag (Shutdown's final barrier is submitted after it).
  void StartCancellingShutdown() {
    const int64_t barriers = h_.vm->stats().barriers;
    shutter_ = std::thread([this] { shut_.set_value(h_.vm->Shutdown(ShutdownMode::kCancel)); });
    ASSERT_TRUE(WaitForShutdownBarrier(h_.vm.get(), barriers));
  }
  // Waits for that shutdown (a hang is fatal: a hung VM cannot be joined).
  absl::Status FinishShutdown() {
    std::future<absl::Status> status = shut_.get_future();
    if (status.wait_for(absl::ToChronoMilliseconds(kHangGuard)) != std::future_status::ready) {
      ADD_FAILURE() << "Shutdown(kCancel) hung on a cross-sequence wait\n" << log_.ToString();
      std::abort();
    }
    shutter_.join();
    return status.get();
  }

  // Declared before the VM, so they outlive it (its shutdown finishes their work) ...
  Gate gate_;
  Gate held_;
  OrderLog log_;
  GateKernel gated_{&gate_, &log_};
  GateKernel holder_{&held_, &log_};
  LogKernel logger_{&log_};
  std::atomic<uint32_t> run_{0};
  StepSequence a_;
  StepSequence b_;
  VmHarness h_;
  // ... and these after it, so they go first.
  PrecomputedBatch batch_;
  BlobRef x_;
  std::thread shutter_;
  std::promise<absl::Status> shut_;
};

TEST_P(SequenceWaitTest, WaitHoldsTheStepUntilTheSourcePassedIt) {
  BuildGatedPair(/*wait=*/true);
  SLUICE_ASSERT_OK(SubmitRun());
  ASSERT_TRUE(log_.WaitFor("A0:end")) << log_.ToString();  // before the wait: at once
  ASSERT_TRUE(log_.WaitFor("B:start")) << log_.ToString();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_EQ(log_.IndexOf("C:launch"), -1) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_.vm->Sync());
  EXPECT_LT(log_.IndexOf("B:end"), log_.IndexOf("C:launch")) << log_.ToString();
  EXPECT_TRUE(log_.Contains("C:saw=2")) << log_.ToString();
}

// The control for the test above: without the wait, C runs while B is still held.
TEST_P(SequenceWaitTest, WithoutTheWaitTheStepRunsEarly) {
  BuildGatedPair(/*wait=*/false);
  SLUICE_ASSERT_OK(SubmitRun());
  ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
  EXPECT_TRUE(log_.Contains("C:saw=1")) << log_.ToString();
  EXPECT_EQ(log_.IndexOf("B:end"), -1) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_.vm->Sync());
}

TEST_P(SequenceWaitTest, PingPongOverManyRunsGivesTheSequentialResult) {
  // Each run: p = q + 1 on a_, q = p + 1 on b_, kRounds times, every step waiting for the
  // other sequence's previous one. q grows by 2 * kRounds per run; a wait satisfied by the
  // previous run's progress would read q or p early and lose increments.
  constexpr int kRounds = 16;
  constexpr int kRuns = 60;
  BlobRef one = Written(1);
  BlobRef p = Written(0);
  BlobRef q = Written(0);
  const OpKernel& add = h_.K("add");
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) a_.AddWait(&b_, b_.size());
    a_.AddCall(add, {q.get(), one.get()}, {p.get()}, nullptr);
    b_.AddWait(&a_, a_.size());
    b_.AddCall(add, {p.get(), one.get()}, {q.get()}, nullptr);
  }
  EXPECT_EQ(a_.waits() + b_.waits(), 2 * kRounds - 1);
  for (int run = 0; run < kRuns; ++run) {
    SLUICE_ASSERT_OK(SubmitRun());
    // The producer's contract (as the executor keeps it): one run of a graph at a time.
    SLUICE_ASSERT_OK(h_.vm->Sync());
  }
  absl::StatusOr<std::vector<float>> got = h_.Read(q);
  SLUICE_ASSERT_OK(got);
  EXPECT_EQ(*got, std::vector<float>(4, 2.0f * kRounds * kRuns));
}

TEST_P(SequenceWaitTest, RunNumberWrapsAround) {
  // The run before the wrap leaves b_'s progress tagged 0xFFFFFFFF, numerically above any
  // tag of the run after it: the wait must still hold C until B (slow) has written x.
  SlowKernel slow(absl::Milliseconds(50), &log_);
  x_ = Written(1);
  b_.AddCall(slow, {}, {x_.get()}, Shared(Tag("B", 2)));
  a_.AddWait(&b_, 1);
  a_.AddCall(logger_, {x_.get()}, {}, Shared(Tag("C")));
  run_.store(0xFFFFFFFEu);
  for (int run = 0; run < 3; ++run) {  // tags 0xFFFFFFFF, 0, 1
    SLUICE_ASSERT_OK(h_.Write(x_, std::vector<float>(4, 1)));
    SLUICE_ASSERT_OK(SubmitRun());
    SLUICE_ASSERT_OK(h_.vm->Sync());
  }
  std::vector<std::string> saw;
  for (const std::string& entry : log_.Entries()) {
    if (entry.rfind("C:saw=", 0) == 0) saw.push_back(entry);
  }
  EXPECT_EQ(saw, std::vector<std::string>(3, "C:saw=2")) << log_.ToString();
}

TEST_P(SequenceWaitTest, VmCancelEndsAWaitForASequenceThatNeverRuns) {
  // b_'s worker is held by a gated call submitted before the run, so b_ has not launched
  // when Shutdown(kCancel) comes, and is then skipped: a_ must stop waiting for it.
  BlobRef y = Written(0);
  SLUICE_ASSERT_OK(h_.builder->Call(holder_, {}, {y}, Tag("hold", 3), h_.S(kCpu1)));
  ASSERT_TRUE(log_.WaitFor("hold:start")) << log_.ToString();
  b_.AddCall(logger_, {}, {}, Shared(Tag("B")));
  a_.AddCall(logger_, {}, {}, Shared(Tag("A0")));
  a_.AddWait(&b_, 1);
  a_.AddCall(logger_, {}, {}, Shared(Tag("C")));
  SLUICE_ASSERT_OK(SubmitRun());
  ASSERT_TRUE(log_.WaitFor("A0:end")) << log_.ToString();
  StartCancellingShutdown();
  held_.Open();  // launched work finishes; b_ comes up next and is skipped
  SLUICE_EXPECT_OK(FinishShutdown());
  EXPECT_EQ(log_.IndexOf("B:launch"), -1) << log_.ToString();
  EXPECT_EQ(log_.IndexOf("C:launch"), -1) << log_.ToString();
}

TEST_P(SequenceWaitTest, AGiveUpIsNotPassedOn) {
  // a_ waits for B (held), then writes y = 7; b_ then waits for that write and reads y.
  // Cancelled while a_ waits: a_ gives up and skips its write, but still announces its
  // steps (so nothing waits forever); b_ must not take that for the write and read y.
  BlobRef y = Written(1);
  b_.AddCall(gated_, {}, {}, Shared(Tag("B")));
  a_.AddCall(logger_, {}, {}, Shared(Tag("A0")));
  a_.AddWait(&b_, 1);
  a_.AddCall(logger_, {}, {y.get()}, Shared(Tag("A1", 7)));
  b_.AddWait(&a_, 2);
  b_.AddCall(logger_, {y.get()}, {}, Shared(Tag("Y")));
  SLUICE_ASSERT_OK(SubmitRun());
  ASSERT_TRUE(log_.WaitFor("A0:end")) << log_.ToString();
  ASSERT_TRUE(log_.WaitFor("B:start")) << log_.ToString();
  StartCancellingShutdown();
  gate_.Open();  // B (launched) finishes
  SLUICE_EXPECT_OK(FinishShutdown());
  EXPECT_EQ(log_.IndexOf("A1:launch"), -1) << log_.ToString();
  EXPECT_EQ(log_.IndexOf("Y:launch"), -1) << log_.ToString();
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(SequenceWaitTest);

}  // namespace
}  // namespace sluice::vm::sequence_wait_test
