// Host waits: cpu compute streams past the first run on workers of their own, and a
// StreamWait from one to another makes the consumer's worker wait on the host until the
// source stream has run it. Proven here: the streams really run side by side; the consumer
// runs after the producer while earlier work of its stream does not wait; the sync checker
// accepts the wait and catches its absence; a ping-pong batch resubmitted many times gives
// the sequential result (no lost or early wake-up); a bad StreamWait is refused.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/internal/thread_ctx.h"
#include "vm/precomputed_batch.h"
#include "vm/stream.h"
#include "vm/sync_checker.h"

namespace sluice::vm::host_wait_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
using testing::Shared;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;

constexpr char kCpu0[] = "cpu";
constexpr char kCpu1[] = "cpu/compute:1";

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  return options;
}

// A VM over both scheduling modes with the sync checker on, a gated kernel (its host work
// blocks until the gate opens; opened at the end in any case) and a logging one.
class HostWaitTest : public ::testing::TestWithParam<Scheduling> {
 protected:
  HostWaitTest() : h_(Options(GetParam())) {}
  ~HostWaitTest() override { gate_.Open(); }

  // A blob on `stream` holding 4 x `value`, written and synced.
  BlobRef Written(const char* stream, const std::string& name, float value) {
    BlobRef blob = h_.NewF32(stream, 4, name);
    EXPECT_TRUE(h_.Write(blob, std::vector<float>(4, value)).ok());
    EXPECT_TRUE(h_.vm->Sync().ok());
    return blob;
  }
  // After the gate opened: A ended before C launched, C read A's 2, no violations.
  void ExpectConsumerAfterProducer() {
    gate_.Open();
    SLUICE_ASSERT_OK(h_.vm->Sync());
    EXPECT_LT(log_.IndexOf("A:end"), log_.IndexOf("C:launch")) << log_.ToString();
    EXPECT_TRUE(log_.Contains("C:saw=2")) << log_.ToString();
    EXPECT_EQ(h_.vm->sync_checker()->violation_count(), 0) << h_.vm->sync_checker()->status();
  }

  Gate gate_;
  OrderLog log_;
  GateKernel gated_{&gate_, &log_};
  LogKernel logger_{&log_};
  VmHarness h_;
};

TEST_P(HostWaitTest, CpuComputeStreamsHaveWorkersOfTheirOwn) {
  VmHarness& h = h_;
  EXPECT_NE(h.S(kCpu0)->thread_ctx(), h.S(kCpu1)->thread_ctx());
  EXPECT_NE(h.S(kCpu1)->thread_ctx(), h.S("cpu/compute:2")->thread_ctx());
  // Copy streams stay with compute stream 0; a sim device keeps one worker for all streams.
  EXPECT_EQ(h.S(kCpu0)->thread_ctx(), h.S("cpu/h2d")->thread_ctx());
  EXPECT_EQ(h.S("sim:0/compute")->thread_ctx(), h.S("sim:0/compute:1")->thread_ctx());
  EXPECT_TRUE(CanStreamWait(*h.S(kCpu0), *h.S(kCpu1)));
  EXPECT_FALSE(CanStreamWait(*h.S(kCpu0), *h.S("cpu/h2d")));  // one worker: nothing to wait
  EXPECT_FALSE(CanStreamWait(*h.S(kCpu0), *h.S(kCpu0)));
  EXPECT_FALSE(CanStreamWait(*h.S(kCpu0), *h.S("sim:0/compute")));
}

// Work on compute stream 1 runs to completion while work on stream 0 is blocked: on one
// worker it could not start.
TEST_P(HostWaitTest, TwoCpuStreamsRunSideBySide) {
  BlobRef x = h_.NewF32(kCpu0, 4, "x"), y = h_.NewF32(kCpu1, 4, "y");
  SLUICE_ASSERT_OK(h_.builder->Call(gated_, {}, {x}, Tag("A", 1), h_.S(kCpu0)));
  SLUICE_ASSERT_OK(h_.builder->Call(logger_, {}, {y}, Tag("B", 2), h_.S(kCpu1)));
  ASSERT_TRUE(log_.WaitFor("B:end")) << log_.ToString();
  EXPECT_FALSE(log_.Contains("A:end")) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_.vm->Sync());
}

// producer (cpu, gated) -> StreamWait cpu -> cpu/compute:1 -> consumer (cpu/compute:1). The
// consumer is dispatched with the StreamWait, but its worker holds it until the producer's
// stream has run the StreamWait; work queued before it on its stream does not wait.
TEST_P(HostWaitTest, ConsumerRunsAfterProducerEarlierWorkDoesNot) {
  BlobRef x = Written(kCpu0, "x", 1), z = h_.NewF32(kCpu1, 4, "z");
  PrecomputedBatch batch;
  const int a = batch.AddOpCall(gated_, {}, {x}, Shared(Tag("A", 2)), h_.S(kCpu0));
  const int b = batch.AddOpCall(logger_, {}, {z}, Shared(Tag("B", 3)), h_.S(kCpu1));
  const int wait = batch.AddStreamWait({x}, h_.S(kCpu0), h_.S(kCpu1));
  const int c = batch.AddOpCall(logger_, {x}, {}, Shared(Tag("C")), h_.S(kCpu1));
  SLUICE_ASSERT_OK(batch.AddEdge(a, wait));
  SLUICE_ASSERT_OK(batch.AddEdge(wait, c));
  SLUICE_ASSERT_OK(batch.AddEdge(b, c));  // the stream chain
  SLUICE_ASSERT_OK(batch.Submit(h_.vm.get()));

  ASSERT_TRUE(log_.WaitFor("B:end")) << log_.ToString();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log_.Contains("C:launch"))
      << "consumer ran before its producer: " << log_.ToString();
  ExpectConsumerAfterProducer();
  EXPECT_EQ(h_.vm->stats().stream_waits, 1);
}

// Eager: the StreamWait is dispatched (with the gated producer, on its stream) long before
// the consumer arrives; the consumer must still get its host wait.
TEST_P(HostWaitTest, ConsumerArrivingAfterTheStreamWaitWasDispatchedStillWaits) {
  h_.builder->set_soft_sync(false);  // the explicit StreamWait is the only order
  BlobRef x = Written(kCpu0, "x", 1);
  SLUICE_ASSERT_OK(h_.builder->Call(gated_, {}, {x}, Tag("A", 2), h_.S(kCpu0)));
  SLUICE_ASSERT_OK(h_.builder->StreamWait({x}, h_.S(kCpu0), h_.S(kCpu1)));
  ASSERT_TRUE(log_.WaitFor("A:start")) << log_.ToString();
  absl::SleepFor(kMisbehaveWindow);  // the StreamWait is dispatched by now
  SLUICE_ASSERT_OK(h_.builder->Call(logger_, {x}, {}, Tag("C"), h_.S(kCpu1)));
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log_.Contains("C:launch"))
      << "consumer ran before its producer: " << log_.ToString();
  ExpectConsumerAfterProducer();
}

// The same pair without the StreamWait: nothing orders the consumer after the producer, and
// the checker says so. (The consumer finishes before the gate opens, and the log's and gate's
// locks order its read before the producer's write, so the run itself has no data race.)
TEST_P(HostWaitTest, CheckerReportsAMissingHostWait) {
  BlobRef x = Written(kCpu0, "x", 1);
  PrecomputedBatch batch;
  batch.AddOpCall(gated_, {}, {x}, Shared(Tag("A", 2)), h_.S(kCpu0));
  batch.AddOpCall(logger_, {x}, {}, Shared(Tag("C")), h_.S(kCpu1));
  SLUICE_ASSERT_OK(batch.Submit(h_.vm.get()));
  ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_.vm->Sync());
  EXPECT_EQ(h_.vm->sync_checker()->violation_count(), 1) << log_.ToString();
}

// Two values bounce between the streams through host waits: step i on stream i % 2 computes
// a = a + b (stream 0) or b = a + b (stream 1), each after a StreamWait from the other
// stream. Resubmitted, the batch must give the sequential Fibonacci-like result every time.
TEST_P(HostWaitTest, PingPongBatchMatchesSequentialAcrossResubmissions) {
  VmHarness& h = h_;
  constexpr int kSteps = 60;
  constexpr int kRuns = 25;
  BlobRef a = h.NewF32(kCpu0, 1, "a"), b = h.NewF32(kCpu1, 1, "b");
  Stream* streams[2] = {h.S(kCpu0), h.S(kCpu1)};
  PrecomputedBatch batch;
  int last[2] = {-1, -1};
  for (int i = 0; i < kSteps; ++i) {
    const int s = i % 2;
    const int other = 1 - s;
    int wait = -1;
    if (last[other] >= 0) {
      wait = batch.AddStreamWait({s == 0 ? b : a}, streams[other], streams[s]);
      SLUICE_ASSERT_OK(batch.AddEdge(last[other], wait));
    }
    BlobRef out = s == 0 ? a : b;
    const int op = batch.AddOpCall(h.K("add"), {a, b}, {out}, nullptr, streams[s]);
    if (wait >= 0) SLUICE_ASSERT_OK(batch.AddEdge(wait, op));
    if (last[s] >= 0) SLUICE_ASSERT_OK(batch.AddEdge(last[s], op));
    last[s] = op;
  }
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE(run);
    SLUICE_ASSERT_OK(h.Write(a, {0.0f}));
    SLUICE_ASSERT_OK(h.Write(b, {1.0f}));
    SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
    SLUICE_ASSERT_OK(h.vm->Sync());
    // Sequential reference, with the kernel's float arithmetic in the same order.
    float ra = 0.0f, rb = 1.0f;
    for (int i = 0; i < kSteps; ++i) (i % 2 == 0 ? ra : rb) = ra + rb;
    EXPECT_EQ(h.Read(a).value(), std::vector<float>{ra});
    EXPECT_EQ(h.Read(b).value(), std::vector<float>{rb});
  }
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

TEST_P(HostWaitTest, StreamWaitBetweenStreamsOfOneWorkerIsRefused) {
  VmHarness& h = h_;
  const absl::Status status = h.builder->StreamWait({}, h.S(kCpu0), h.S("cpu/h2d"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cpu streams of two workers"), std::string::npos) << status;
  PrecomputedBatch batch;
  batch.AddStreamWait({}, h.S(kCpu0), h.S("cpu/h2d"));
  EXPECT_EQ(batch.Submit(h.vm.get()).code(), absl::StatusCode::kInvalidArgument);
  SLUICE_EXPECT_OK(h.builder->StreamWait({}, h.S(kCpu0), h.S(kCpu1)));
  SLUICE_EXPECT_OK(h.vm->Sync());
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(HostWaitTest);

}  // namespace
}  // namespace sluice::vm::host_wait_test
