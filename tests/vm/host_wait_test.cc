// Host waits: cpu compute streams past the first run on workers of their own, and a
// StreamWait from one to another makes the consumer's worker wait on the host until the
// source stream has run it. Proven here: the streams really run side by side; the consumer
// runs after the producer while earlier work of its stream does not wait; the sync checker
// accepts the wait and catches its absence; a ping-pong batch resubmitted many times gives
// the sequential result (no lost or early wake-up); a bad StreamWait is refused.
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/stream.h"
#include "vm/sync_checker.h"
#include "vm/thread_ctx.h"

namespace sluice::vm {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
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

std::shared_ptr<const AttrMap> Shared(AttrMap attrs) {
  return std::make_shared<const AttrMap>(std::move(attrs));
}

class HostWaitTest : public ::testing::TestWithParam<Scheduling> {};

TEST_P(HostWaitTest, CpuComputeStreamsHaveWorkersOfTheirOwn) {
  VmHarness h(Options(GetParam()));
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
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32(kCpu0, 4, "x"), y = h.NewF32(kCpu1, 4, "y");
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 1), h.S(kCpu0)));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {}, {y}, Tag("B", 2), h.S(kCpu1)));
  ASSERT_TRUE(log.WaitFor("B:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("A:end")) << log.ToString();
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
}

// producer (cpu, gated) -> StreamWait cpu -> cpu/compute:1 -> consumer (cpu/compute:1). The
// consumer is dispatched with the StreamWait, but its worker holds it until the producer's
// stream has run the StreamWait; work queued before it on its stream does not wait.
TEST_P(HostWaitTest, ConsumerRunsAfterProducerEarlierWorkDoesNot) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32(kCpu0, 4, "x"), z = h.NewF32(kCpu1, 4, "z");
  SLUICE_ASSERT_OK(h.Write(x, std::vector<float>(4, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  PrecomputedBatch batch;
  const int a = batch.AddOpCall(gated, {}, {x}, Shared(Tag("A", 2)), h.S(kCpu0));
  const int b = batch.AddOpCall(logger, {}, {z}, Shared(Tag("B", 3)), h.S(kCpu1));
  const int wait = batch.AddStreamWait({x}, h.S(kCpu0), h.S(kCpu1));
  const int c = batch.AddOpCall(logger, {x}, {}, Shared(Tag("C")), h.S(kCpu1));
  SLUICE_ASSERT_OK(batch.AddEdge(a, wait));
  SLUICE_ASSERT_OK(batch.AddEdge(wait, c));
  SLUICE_ASSERT_OK(batch.AddEdge(b, c));  // the stream chain
  SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));

  ASSERT_TRUE(log.WaitFor("B:end")) << log.ToString();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log.Contains("C:launch")) << "consumer ran before its producer: " << log.ToString();
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("C:launch")) << log.ToString();
  EXPECT_TRUE(log.Contains("C:saw=2")) << log.ToString();
  EXPECT_EQ(h.vm->stats().stream_waits, 1);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

// Eager: the StreamWait is dispatched (with the gated producer, on its stream) long before
// the consumer arrives; the consumer must still get its host wait.
TEST_P(HostWaitTest, ConsumerArrivingAfterTheStreamWaitWasDispatchedStillWaits) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  h.builder->set_soft_sync(false);  // the explicit StreamWait is the only order
  BlobRef x = h.NewF32(kCpu0, 4, "x");
  SLUICE_ASSERT_OK(h.Write(x, std::vector<float>(4, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 2), h.S(kCpu0)));
  SLUICE_ASSERT_OK(h.builder->StreamWait({x}, h.S(kCpu0), h.S(kCpu1)));
  ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
  absl::SleepFor(kMisbehaveWindow);  // the StreamWait is dispatched by now
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("C"), h.S(kCpu1)));
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log.Contains("C:launch")) << "consumer ran before its producer: " << log.ToString();
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("C:launch")) << log.ToString();
  EXPECT_TRUE(log.Contains("C:saw=2")) << log.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

// The same pair without the StreamWait: nothing orders the consumer after the producer, and
// the checker says so. (The consumer finishes before the gate opens, and the log's and gate's
// locks order its read before the producer's write, so the run itself has no data race.)
TEST_P(HostWaitTest, CheckerReportsAMissingHostWait) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32(kCpu0, 4, "x");
  SLUICE_ASSERT_OK(h.Write(x, std::vector<float>(4, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  PrecomputedBatch batch;
  batch.AddOpCall(gated, {}, {x}, Shared(Tag("A", 2)), h.S(kCpu0));
  batch.AddOpCall(logger, {x}, {}, Shared(Tag("C")), h.S(kCpu1));
  SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
  ASSERT_TRUE(log.WaitFor("C:end")) << log.ToString();
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 1) << log.ToString();
}

// Two values bounce between the streams through host waits: step i on stream i % 2 computes
// a = a + b (stream 0) or b = a + b (stream 1), each after a StreamWait from the other
// stream. Resubmitted, the batch must give the sequential Fibonacci-like result every time.
TEST_P(HostWaitTest, PingPongBatchMatchesSequentialAcrossResubmissions) {
  VmHarness h(Options(GetParam()));
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
  VmHarness h(Options(GetParam()));
  const absl::Status status = h.builder->StreamWait({}, h.S(kCpu0), h.S("cpu/h2d"));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cpu streams of two workers"), std::string::npos) << status;
  PrecomputedBatch batch;
  batch.AddStreamWait({}, h.S(kCpu0), h.S("cpu/h2d"));
  EXPECT_EQ(batch.Submit(h.vm.get()).code(), absl::StatusCode::kInvalidArgument);
  SLUICE_EXPECT_OK(h.builder->StreamWait({}, h.S(kCpu0), h.S(kCpu1)));
  SLUICE_EXPECT_OK(h.vm->Sync());
}

INSTANTIATE_TEST_SUITE_P(Scheduling, HostWaitTest,
                         ::testing::Values(Scheduling::kDedicatedThread, Scheduling::kCallerThread),
                         [](const ::testing::TestParamInfo<Scheduling>& info) {
                           return info.param == Scheduling::kDedicatedThread ? "DedicatedThread"
                                                                             : "CallerThread";
                         });

}  // namespace
}  // namespace sluice::vm
