// In-order streams: a ccl stream launches its instructions in the order they were submitted,
// even independent ones (every rank must issue its collectives in one order). The engine
// chains each instruction received on such a stream to the stream's previous unretired one
// (Stream::last_in_order) and clears the link when that one retires. Proven here, on cpu and
// sim ccl streams and in both scheduling modes: a later independent call (eager or in a
// precomputed batch) waits for an earlier one held back by its input; a plain compute stream
// lets it go first; a batch of ccl nodes without edges gives the sequential result; thousands
// of instructions retire and recycle and new ones still run; cpu ccl streams have a worker of
// their own. The sync checker is on throughout and must see no violation.
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/internal/thread_ctx.h"
#include "vm/precomputed_batch.h"
#include "vm/stream.h"
#include "vm/sync_checker.h"

namespace sluice::vm::in_order_stream_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::LogKernel;
using testing::OrderLog;
using testing::Shared;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;

enum class Target { kCpu, kSim };

// The streams a test uses on one target.
struct Streams {
  const char* ccl;    // the in-order stream
  const char* plain;  // a compute stream that is not in order
  const char* side;   // an unrelated stream, to learn when the engine has received a call
  // A producer whose consumer on `ccl` or `plain` is held on the host until the producer
  // completes (a completion edge): nothing else lets the consumer launch before that.
  const char* far_producer;
  // The compute stream of `ccl`'s own device (for sim: a device-side StreamWait).
  const char* near_producer;
};

Streams StreamsOf(Target target) {
  if (target == Target::kCpu) {
    return {"cpu/ccl", "cpu/compute:1", "cpu/compute:2", "cpu", "cpu"};
  }
  return {"sim:0/ccl", "sim:0/compute:1", "sim:0/compute:2", "sim:1/compute", "sim:0/compute"};
}

using Param = std::tuple<Scheduling, Target>;

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return testing::SchedulingName(std::get<0>(info.param)) +
         (std::get<1>(info.param) == Target::kCpu ? "Cpu" : "Sim");
}

// A gated kernel (its host work blocks until the gate opens; opened at the end in any case),
// a logging one, and a VM made by Start() with the sync checker on.
class InOrderStreamTest : public ::testing::TestWithParam<Param> {
 protected:
  ~InOrderStreamTest() override {
    gate_.Open();
    x_.reset();  // blobs go before their runtime
    y_.reset();
    z_.reset();
    h_.reset();
  }

  // `fusion`: eager fusion on (VmOptions::max_fused_steps) or off (every call one
  // instruction, so that the engine's ordering is what the test sees).
  void Start(bool fusion) {
    VmOptions options;
    options.scheduling = std::get<0>(GetParam());
    options.check_sync = true;
    options.max_fused_steps = fusion ? 64 : 0;
    h_ = std::make_unique<VmHarness>(options);
  }
  const Streams streams_ = StreamsOf(std::get<1>(GetParam()));
  Stream* S(const char* key) { return h_->S(key); }

  // Eagerly: G (gated, on `producer`) writes 2 into x; A on `stream` reads x; B on `stream`,
  // independent of both, writes 5 into y; C on the side stream, independent of everything,
  // writes 7 into z.
  void SubmitEager(const char* stream, const char* producer) {
    x_ = h_->NewF32(producer, 4, "x");
    y_ = h_->NewF32(stream, 4, "y");
    z_ = h_->NewF32(streams_.side, 4, "z");
    SLUICE_ASSERT_OK(h_->builder->Call(gated_, {}, {x_}, Tag("G", 2), S(producer)));
    SLUICE_ASSERT_OK(h_->builder->Call(logger_, {x_}, {}, Tag("A"), S(stream)));
    SLUICE_ASSERT_OK(h_->builder->Call(logger_, {}, {y_}, Tag("B", 5), S(stream)));
    SLUICE_ASSERT_OK(h_->builder->Call(logger_, {}, {z_}, Tag("C", 7), S(streams_.side)));
  }

  // After C ended the engine has received B (it receives in submission order), so B, were
  // it free, would have been dispatched to its worker ahead of A, which cannot be dispatched
  // before G completes. A ccl stream must hold B back until A is dispatched.
  void ExpectLaterCallHeldUntilGateOpens() {
    ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
    EXPECT_FALSE(log_.Contains("A:launch")) << log_.ToString();
    EXPECT_FALSE(log_.Contains("B:launch"))
        << "a later independent call overtook an earlier one on an in-order stream: "
        << log_.ToString();
  }

  // After the gate opened: A launched before B, A read G's value, B wrote its own.
  void ExpectSubmissionOrder() {
    gate_.Open();
    SLUICE_ASSERT_OK(h_->vm->Sync());
    const int a = log_.IndexOf("A:launch"), b = log_.IndexOf("B:launch");
    ASSERT_GE(a, 0) << log_.ToString();
    ASSERT_GE(b, 0) << log_.ToString();
    EXPECT_LT(a, b) << log_.ToString();
    EXPECT_LT(log_.IndexOf("A:end"), log_.IndexOf("B:start")) << log_.ToString();
    EXPECT_TRUE(log_.Contains("A:saw=2")) << log_.ToString();
    EXPECT_EQ(h_->Read(y_).value(), std::vector<float>(4, 5.0f));
    ExpectNoViolation();
  }

  void ExpectNoViolation() {
    EXPECT_EQ(h_->vm->sync_checker()->violation_count(), 0) << h_->vm->sync_checker()->status();
  }

  Gate gate_;
  OrderLog log_;
  GateKernel gated_{&gate_, &log_};
  LogKernel logger_{&log_};
  std::unique_ptr<VmHarness> h_;
  BlobRef x_, y_, z_;
};

TEST_P(InOrderStreamTest, OnlyCclStreamsAreInOrder) {
  Start(/*fusion=*/false);
  EXPECT_TRUE(S(streams_.ccl)->in_order());
  EXPECT_FALSE(S(streams_.plain)->in_order());
  EXPECT_FALSE(S(streams_.near_producer)->in_order());
  EXPECT_FALSE(S(streams_.far_producer)->in_order());
  EXPECT_EQ(S(streams_.ccl)->last_in_order, nullptr);  // nothing submitted yet
}

TEST_P(InOrderStreamTest, EagerLaterIndependentCallWaitsForEarlierOne) {
  Start(/*fusion=*/false);
  SubmitEager(streams_.ccl, streams_.far_producer);
  ExpectLaterCallHeldUntilGateOpens();
  ExpectSubmissionOrder();
}

// With eager fusion B may join A's run instead: the order must hold all the same.
TEST_P(InOrderStreamTest, EagerLaterIndependentCallWaitsForEarlierOneWithFusion) {
  Start(/*fusion=*/true);
  SubmitEager(streams_.ccl, streams_.far_producer);
  ExpectLaterCallHeldUntilGateOpens();
  ExpectSubmissionOrder();
}

// A producer on the ccl stream's own device: on sim, A is released at once behind a
// device-side StreamWait; on cpu it waits on the host as above. B still comes after A.
TEST_P(InOrderStreamTest, EagerOrderHoldsWithAProducerOnTheSameDevice) {
  Start(/*fusion=*/false);
  SubmitEager(streams_.ccl, streams_.near_producer);
  ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
  EXPECT_FALSE(log_.Contains("B:start")) << log_.ToString();  // B runs after A, which waits
  ExpectSubmissionOrder();
}

// The same calls in a precomputed batch: no edge between A and B, and none derived from
// blobs (batches skip that); only the in-order chain orders them.
TEST_P(InOrderStreamTest, BatchLaterIndependentNodeWaitsForEarlierOne) {
  Start(/*fusion=*/false);
  const char* producer = streams_.far_producer;
  x_ = h_->NewF32(producer, 4, "x");
  y_ = h_->NewF32(streams_.ccl, 4, "y");
  z_ = h_->NewF32(streams_.side, 4, "z");
  PrecomputedBatch batch;
  const int g = batch.AddOpCall(gated_, {}, {x_}, Shared(Tag("G", 2)), S(producer));
  const int event = batch.AddRecordEvent({x_}, S(producer));
  const int a = batch.AddOpCall(logger_, {x_}, {}, Shared(Tag("A")), S(streams_.ccl));
  batch.AddOpCall(logger_, {}, {y_}, Shared(Tag("B", 5)), S(streams_.ccl));
  batch.AddOpCall(logger_, {}, {z_}, Shared(Tag("C", 7)), S(streams_.side));
  SLUICE_ASSERT_OK(batch.AddEdge(g, event));
  SLUICE_ASSERT_OK(batch.AddEdge(event, a));
  SLUICE_ASSERT_OK(batch.Submit(h_->vm.get()));
  ExpectLaterCallHeldUntilGateOpens();
  ExpectSubmissionOrder();
}

// Contrast: on a compute stream that is not in order, B is free as soon as it arrives and
// runs to completion while A still waits for G.
TEST_P(InOrderStreamTest, PlainComputeStreamLetsTheLaterIndependentCallGoFirst) {
  Start(/*fusion=*/false);
  SubmitEager(streams_.plain, streams_.far_producer);
  ASSERT_TRUE(log_.WaitFor("B:end")) << log_.ToString();
  EXPECT_FALSE(log_.Contains("A:launch")) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_->vm->Sync());
  EXPECT_LT(log_.IndexOf("B:launch"), log_.IndexOf("A:launch")) << log_.ToString();
  EXPECT_TRUE(log_.Contains("A:saw=2")) << log_.ToString();
  ExpectNoViolation();
}

// Nodes of a batch on the ccl stream that all update one blob, without a single edge
// between them: the in-order chain alone must run them in submission order. Node A sets
// acc = -x, where x comes from G (gated in the first run, on the far producer, behind a
// completion edge); then each node i computes acc = -acc + (i % 7) (exact in f32, and any
// reordering changes the result). Over three parts (PrecomputedBatch::kPartSize),
// resubmitted.
TEST_P(InOrderStreamTest, BatchNodesWithoutEdgesRunInSubmissionOrder) {
  Start(/*fusion=*/false);
  constexpr int kNodes = 3 * static_cast<int>(PrecomputedBatch::kPartSize) - 5;
  constexpr int kRuns = 8;
  const char* producer = streams_.far_producer;
  x_ = h_->NewF32(producer, 4, "x");
  z_ = h_->NewF32(streams_.side, 4, "z");
  BlobRef acc = h_->NewF32(streams_.ccl, 4, "acc");
  PrecomputedBatch batch;
  const int g = batch.AddOpCall(gated_, {}, {x_}, Shared(Tag("G", 3)), S(producer));
  const int event = batch.AddRecordEvent({x_}, S(producer));
  const int a = batch.AddOpCall(h_->K("scale"), {x_}, {acc}, Shared(AttrMap().Set("alpha", -1.0)),
                                S(streams_.ccl));
  SLUICE_ASSERT_OK(batch.AddEdge(g, event));
  SLUICE_ASSERT_OK(batch.AddEdge(event, a));
  for (int i = 0; i < kNodes; ++i) {
    batch.AddOpCall(h_->K("scale"), {acc}, {acc},
                    Shared(AttrMap().Set("alpha", -1.0).Set("beta", static_cast<double>(i % 7))),
                    S(streams_.ccl));
  }
  batch.AddOpCall(logger_, {}, {z_}, Shared(Tag("C", 7)), S(streams_.side));
  float expected = -3.0f;
  for (int i = 0; i < kNodes; ++i) expected = -expected + static_cast<float>(i % 7);
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE(run);
    SLUICE_ASSERT_OK(h_->Write(acc, std::vector<float>(4, 100.0f)));
    SLUICE_ASSERT_OK(batch.Submit(h_->vm.get()));
    if (run == 0) {
      // Every node is received (C is the last); none may launch before A, held by G.
      ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
      EXPECT_FALSE(log_.Contains("G:end")) << log_.ToString();
      gate_.Open();
    }
    SLUICE_ASSERT_OK(h_->vm->Sync());
    EXPECT_EQ(S(streams_.ccl)->last_in_order, nullptr);  // every node retired
    EXPECT_EQ(h_->Read(acc).value(), std::vector<float>(4, expected));
  }
  ExpectNoViolation();
}

// Thousands of eager instructions on the ccl stream (interleaved with work on a plain
// stream, so that retired instructions are recycled for either), synced only every few
// rounds: each retirement must clear the stream's link to it, or a later call would be
// chained to a recycled instruction. Every count must come out exact.
TEST_P(InOrderStreamTest, ManyRetiredInstructionsLeaveNoStaleLink) {
  Start(/*fusion=*/false);
  constexpr int kRounds = 30;
  constexpr int kPerRound = 100;
  BlobRef acc = h_->NewF32(streams_.ccl, 1, "acc"), one = h_->NewF32(streams_.ccl, 1, "one");
  BlobRef acc2 = h_->NewF32(streams_.plain, 1, "acc2"),
          one2 = h_->NewF32(streams_.plain, 1, "one2");
  SLUICE_ASSERT_OK(h_->Write(acc, {0.0f}));
  SLUICE_ASSERT_OK(h_->Write(one, {1.0f}));
  SLUICE_ASSERT_OK(h_->Write(acc2, {0.0f}));
  SLUICE_ASSERT_OK(h_->Write(one2, {1.0f}));
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kPerRound; ++i) {
      SLUICE_ASSERT_OK(h_->Add(acc, one, acc, streams_.ccl));
      SLUICE_ASSERT_OK(h_->Add(acc2, one2, acc2, streams_.plain));
    }
    if (round % 3 == 2) {
      SCOPED_TRACE(round);
      SLUICE_ASSERT_OK(h_->vm->Sync());
      EXPECT_EQ(S(streams_.ccl)->last_in_order, nullptr);  // its last instruction retired
      // A read of acc is one more instruction on the ccl stream (its last use).
      EXPECT_EQ(h_->Read(acc).value(),
                std::vector<float>{static_cast<float>((round + 1) * kPerRound)});
    }
  }
  SLUICE_ASSERT_OK(h_->vm->Sync());
  EXPECT_EQ(h_->Read(acc).value(), std::vector<float>{static_cast<float>(kRounds * kPerRound)});
  EXPECT_EQ(h_->Read(acc2).value(), std::vector<float>{static_cast<float>(kRounds * kPerRound)});
  EXPECT_GE(h_->vm->stats().op_calls, 2 * kRounds * kPerRound);
  ExpectNoViolation();
}

// The prefix keeps every name under --gtest_filter='InOrder*'.
INSTANTIATE_TEST_SUITE_P(InOrder, InOrderStreamTest,
                         ::testing::Combine(::testing::Values(Scheduling::kDedicatedThread,
                                                              Scheduling::kCallerThread),
                                            ::testing::Values(Target::kCpu, Target::kSim)),
                         ParamName);

// A host collective blocks its worker until every rank joins: cpu ccl streams get a worker
// (ThreadCtx) of their own, so work on them runs while the compute stream's worker is busy,
// and values handed between the two are ordered (the checker sees no violation).
class InOrderCpuCclWorkerTest : public ::testing::TestWithParam<Scheduling> {
 protected:
  static VmOptions Options(Scheduling scheduling) {
    VmOptions options;
    options.scheduling = scheduling;
    options.check_sync = true;
    return options;
  }
  InOrderCpuCclWorkerTest() : h_(Options(GetParam())) {}
  ~InOrderCpuCclWorkerTest() override { gate_.Open(); }

  Gate gate_;
  OrderLog log_;
  GateKernel gated_{&gate_, &log_};
  LogKernel logger_{&log_};
  VmHarness h_;
};

TEST_P(InOrderCpuCclWorkerTest, CpuCclStreamHasAWorkerOfItsOwn) {
  VmHarness& h = h_;
  EXPECT_NE(h.S("cpu/ccl")->thread_ctx(), h.S("cpu")->thread_ctx());
  EXPECT_NE(h.S("cpu/ccl")->thread_ctx(), h.S("cpu/compute:1")->thread_ctx());
  EXPECT_NE(h.S("cpu/ccl")->thread_ctx(), h.S("cpu/h2d")->thread_ctx());

  // Work on cpu/ccl finishes while the cpu worker is blocked.
  BlobRef x = h.NewF32("cpu", 4, "x"), y = h.NewF32("cpu/ccl", 4, "y");
  SLUICE_ASSERT_OK(h.builder->Call(gated_, {}, {x}, Tag("A", 3), h.S("cpu")));
  SLUICE_ASSERT_OK(h.builder->Call(logger_, {}, {y}, Tag("B", 4), h.S("cpu/ccl")));
  ASSERT_TRUE(log_.WaitFor("B:end")) << log_.ToString();
  EXPECT_FALSE(log_.Contains("A:end")) << log_.ToString();
  gate_.Open();

  // Values cross between the two workers both ways: z = x + y on cpu/ccl, then
  // w = z + x on cpu.
  BlobRef z = h.NewF32("cpu/ccl", 4, "z"), w = h.NewF32("cpu", 4, "w");
  SLUICE_ASSERT_OK(h.Add(x, y, z, "cpu/ccl"));
  SLUICE_ASSERT_OK(h.Add(z, x, w, "cpu"));
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.Read(z).value(), std::vector<float>(4, 7.0f));
  EXPECT_EQ(h.Read(w).value(), std::vector<float>(4, 10.0f));
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

INSTANTIATE_TEST_SUITE_P(InOrder, InOrderCpuCclWorkerTest,
                         ::testing::Values(Scheduling::kDedicatedThread, Scheduling::kCallerThread),
                         [](const ::testing::TestParamInfo<Scheduling>& info) {
                           return testing::SchedulingName(info.param);
                         });

}  // namespace
}  // namespace sluice::vm::in_order_stream_test
