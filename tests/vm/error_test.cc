// Error tests: a kernel failing (at launch or in its host work, on cpu or sim) poisons its
// outputs, its dependents are skipped while independent work runs, the first error surfaces
// at the next Sync naming the op and the next Sync is clean, reads of poisoned blobs return
// the error, and the VM keeps running new work correctly afterwards. Also bad API use:
// every misuse returns InvalidArgument naming the culprit and submits nothing.
#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::error_test {
namespace {

using testing::FailKernel;
using testing::Gate;
using testing::GateKernel;
using ::testing::HasSubstr;
using testing::LogKernel;
using ::testing::Not;
using testing::OrderLog;
using testing::SchedulingName;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;
using When = FailKernel::When;

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  return options;
}

std::vector<float> Filled(int64_t n, float value) { return std::vector<float>(n, value); }

// --- A failing kernel, by scheduling mode, failure point and stream. ---

class FailureTest : public ::testing::TestWithParam<std::tuple<Scheduling, When, const char*>> {};

TEST_P(FailureTest, DependentsAreSkippedIndependentWorkRunsErrorSurfacesOnce) {
  const auto [scheduling, when, stream] = GetParam();
  const bool async = std::string(stream) != "cpu";
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  FailKernel fail(when, absl::DataLossError("boom"), "explode");
  LogKernel dependent(&log, "dependent");
  VmHarness h(Options(scheduling));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef g = h.NewF32(stream, 16, "g");
  BlobRef x = h.NewF32(stream, 16, "x");
  BlobRef y = h.NewF32(stream, 16, "y");
  BlobRef z = h.NewF32("sim:1/compute", 16, "z");
  BlobRef u = h.NewF32("sim:1/compute", 16, "u");
  BlobRef w = h.NewF32("sim:1/compute", 16, "w");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const VmStats before = h.vm->stats();

  // The stream is held by a gated op (on another blob) while the failing op and its
  // same-stream dependent are handed to it, so that on sim the dependent is launched before
  // the failing op's host work has run.
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {g}, Tag("G", 0), h.S(stream)));
  ASSERT_TRUE(log.WaitFor("G:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(fail, {}, {x}, AttrMap(), h.S(stream)));
  // Dependents: on the failing op's stream, and on another device behind a sync.
  SLUICE_ASSERT_OK(h.builder->Call(dependent, {x}, {y}, Tag("D1", 5), h.S(stream)));
  SLUICE_ASSERT_OK(h.builder->Call(dependent, {y}, {z}, Tag("D2", 6), h.S("sim:1/compute")));
  // Independent work.
  SLUICE_ASSERT_OK(h.Fill(u, 4, "sim:1/compute"));
  SLUICE_ASSERT_OK(
      h.builder->Call(h.K("scale"), {u}, {w}, AttrMap().Set("alpha", 2.0), h.S("sim:1/compute")));
  if (async) {
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return log.Contains("D1:launch") || h.vm->stats().skipped > before.skipped; }));
  }
  gate.Open();

  const absl::Status error = h.vm->Sync();
  EXPECT_EQ(error.code(), absl::StatusCode::kDataLoss) << error;
  EXPECT_THAT(error.message(), HasSubstr("op 'explode'"));
  EXPECT_THAT(error.message(), HasSubstr(absl::StrCat("on ", h.S(stream)->name())));
  EXPECT_THAT(error.message(), HasSubstr("boom"));
  const VmStats after = h.vm->stats();
  EXPECT_EQ(after.errors - before.errors, 1) << after.ToString();
  EXPECT_EQ(after.skipped - before.skipped, 2) << after.ToString() << "; log: " << log.ToString();
  EXPECT_EQ(dependent.starts(), 0) << log.ToString();
  EXPECT_EQ(h.Read(w).value(), Filled(16, 8));
  EXPECT_TRUE(x->poisoned() && y->poisoned() && z->poisoned());
  EXPECT_FALSE(g->poisoned() || u->poisoned() || w->poisoned());

  // The error was surfaced once; the VM runs new work on the same blobs.
  SLUICE_EXPECT_OK(h.vm->Sync());
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 3)));
  SLUICE_ASSERT_OK(h.Add(x, x, y, stream));
  SLUICE_ASSERT_OK(
      h.builder->Call(h.K("scale"), {y}, {z}, AttrMap().Set("alpha", 0.5), h.S("sim:1/compute")));
  EXPECT_EQ(h.Read(y).value(), Filled(16, 6));
  EXPECT_EQ(h.Read(z).value(), Filled(16, 3));
  SLUICE_EXPECT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->stats().skipped, after.skipped);
}

std::string FailureTestName(
    const ::testing::TestParamInfo<std::tuple<Scheduling, When, const char*>>& info) {
  const auto [scheduling, when, stream] = info.param;
  return absl::StrCat(SchedulingName(scheduling), "_",
                      when == When::kLaunch ? "AtLaunch" : "InHostWork", "_",
                      std::string(stream) == "cpu" ? "Cpu" : "Sim");
}

INSTANTIATE_TEST_SUITE_P(All, FailureTest,
                         ::testing::Combine(::testing::Values(Scheduling::kDedicatedThread,
                                                              Scheduling::kCallerThread),
                                            ::testing::Values(When::kLaunch, When::kHostWork),
                                            ::testing::Values("cpu", "sim:0/compute")),
                         FailureTestName);

// --- By scheduling mode. ---

class ErrorTest : public ::testing::TestWithParam<Scheduling> {};

TEST_P(ErrorTest, ReadOfPoisonedBlobReturnsTheError) {
  FailKernel fail(When::kHostWork, absl::InternalError("bad bits"), "corrupt");
  VmHarness h(Options(GetParam()));
  BlobRef x = h.NewF32("sim:0/compute", 8, "x");
  BlobRef y = h.NewF32("sim:0/compute", 8, "y");
  BlobRef ok = h.NewF32("sim:0/compute", 8, "ok");
  SLUICE_ASSERT_OK(h.builder->Call(fail, {}, {x}, AttrMap(), h.S("sim:0/compute")));
  SLUICE_ASSERT_OK(h.Add(x, x, y, "sim:0/compute"));  // skipped: y inherits the error
  SLUICE_ASSERT_OK(h.Fill(ok, 1, "sim:0/compute"));
  for (const BlobRef& poisoned : {x, y}) {
    const absl::StatusOr<std::vector<float>> read = h.Read(poisoned);
    ASSERT_FALSE(read.ok()) << poisoned->DebugName();
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInternal) << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr("op 'corrupt'"));
    EXPECT_THAT(read.status().message(), HasSubstr("bad bits"));
  }
  EXPECT_EQ(h.Read(ok).value(), Filled(8, 1));
  // The reads surfaced the error; whether they also consumed it is left open.
  h.vm->Sync().IgnoreError();
  SLUICE_EXPECT_OK(h.vm->Sync());
  // Still poisoned until rewritten; a write clears it.
  EXPECT_FALSE(h.Read(x).ok());
  SLUICE_ASSERT_OK(h.Write(x, Filled(8, 2)));
  EXPECT_EQ(h.Read(x).value(), Filled(8, 2));
  SLUICE_ASSERT_OK(h.Add(x, x, y, "sim:0/compute"));
  EXPECT_EQ(h.Read(y).value(), Filled(8, 4));
  SLUICE_EXPECT_OK(h.vm->Sync());
}

TEST_P(ErrorTest, FirstErrorIsSurfacedLaterOnesAreCounted) {
  FailKernel first(When::kLaunch, absl::AbortedError("first failure"), "first");
  FailKernel second(When::kHostWork, absl::UnknownError("second failure"), "second");
  VmHarness h(Options(GetParam()));
  BlobRef a = h.NewF32("cpu", 4, "a");
  BlobRef b = h.NewF32("cpu", 4, "b");
  // One stream: `second` runs after `first`.
  SLUICE_ASSERT_OK(h.builder->Call(first, {}, {a}, AttrMap(), h.S("cpu")));
  SLUICE_ASSERT_OK(h.builder->Call(second, {}, {b}, AttrMap(), h.S("cpu")));
  const absl::Status error = h.vm->Sync();
  EXPECT_EQ(error.code(), absl::StatusCode::kAborted) << error;
  EXPECT_THAT(error.message(), HasSubstr("op 'first'"));
  EXPECT_THAT(error.message(), Not(HasSubstr("second")));
  EXPECT_EQ(h.vm->stats().errors, 2);
  SLUICE_EXPECT_OK(h.vm->Sync());
  EXPECT_THAT(h.Read(b).status().message(), HasSubstr("op 'second'"));
}

TEST_P(ErrorTest, KernelOperandErrorNamesTheOpAndOperand) {
  VmHarness h(Options(GetParam()));
  BlobRef a = h.NewF32("sim:0/compute", 4, "a");
  BlobRef b = h.NewF32("sim:0/compute", 5, "b");
  BlobRef y = h.NewF32("sim:0/compute", 4, "y");
  SLUICE_ASSERT_OK(h.Fill(a, 1, "sim:0/compute"));
  SLUICE_ASSERT_OK(h.Fill(b, 1, "sim:0/compute"));
  SLUICE_ASSERT_OK(h.Add(a, b, y, "sim:0/compute"));  // accepted; the kernel rejects it
  const absl::Status error = h.vm->Sync();
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument) << error;
  EXPECT_THAT(error.message(), HasSubstr("op 'add'"));
  EXPECT_THAT(error.message(), HasSubstr("shape mismatch"));
  EXPECT_THAT(error.message(), HasSubstr("'b'"));
  SLUICE_EXPECT_OK(h.vm->Sync());
  SLUICE_ASSERT_OK(h.Add(a, a, y, "sim:0/compute"));
  EXPECT_EQ(h.Read(y).value(), Filled(4, 2));
}

// After a failure, a blob rewritten by an op on an asynchronous stream is usable at once by
// the next op in program order, even when the rewrite has been launched but has not run yet
// (the stream is busy with earlier work). The reader must see the new contents, not the
// stale poison.
TEST_P(ErrorTest, RewriteAfterFailureIsUsableAtOnceOnAsyncStream) {
  for (const char* reader_stream : {"sim:0/compute", "sim:0/h2d"}) {
    SCOPED_TRACE(reader_stream);
    Gate gate;
    OrderLog log;
    FailKernel fail(When::kLaunch, absl::DataLossError("boom"), "explode");
    GateKernel gated(&gate, &log);
    LogKernel reader(&log, "reader");
    VmHarness h(Options(GetParam()));
    absl::Cleanup open_gate = [&gate] { gate.Open(); };
    BlobRef x = h.NewF32("sim:0/compute", 8, "x");
    BlobRef g = h.NewF32("sim:0/compute", 8, "g");
    BlobRef y = h.NewF32(reader_stream, 8, "y");
    SLUICE_ASSERT_OK(h.builder->Call(fail, {}, {x}, AttrMap(), h.S("sim:0/compute")));
    EXPECT_THAT(h.vm->Sync().message(), HasSubstr("op 'explode'"));
    ASSERT_TRUE(x->poisoned());
    const VmStats before = h.vm->stats();

    // The stream is held by a gated op while the rewrite and its reader are launched.
    SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {g}, Tag("G", 0), h.S("sim:0/compute")));
    ASSERT_TRUE(log.WaitFor("G:start")) << log.ToString();
    SLUICE_ASSERT_OK(h.Fill(x, 1, "sim:0/compute"));
    SLUICE_ASSERT_OK(h.builder->Call(reader, {x}, {y}, Tag("R", 7), h.S(reader_stream)));
    // The reader is handled (launched or skipped) while the gate holds the stream.
    ASSERT_TRUE(testing::WaitUntil(
        [&] { return log.Contains("R:launch") || h.vm->stats().skipped > before.skipped; }));
    gate.Open();

    SLUICE_EXPECT_OK(h.vm->Sync());
    EXPECT_EQ(h.vm->stats().skipped - before.skipped, 0) << log.ToString();
    EXPECT_TRUE(log.Contains("R:saw=1")) << log.ToString();
    const absl::StatusOr<std::vector<float>> read = h.Read(y);
    SLUICE_EXPECT_OK(read);
    if (read.ok()) {
      EXPECT_EQ(*read, Filled(8, 7));
    }
  }
}

// A write launched earlier (its host work still queued on the stream) must not clear the
// poison of a later write to the same blob that was skipped for a poisoned input: the blob's
// last writer did not run, so reading it returns the error.
TEST_P(ErrorTest, SkippedWriteStaysPoisonedAfterAnEarlierWriteRuns) {
  Gate gate;
  OrderLog log;
  FailKernel fail(When::kLaunch, absl::DataLossError("boom"), "explode");
  GateKernel gated(&gate, &log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:0/compute", 8, "x");
  BlobRef g = h.NewF32("sim:0/compute", 8, "g");
  BlobRef d = h.NewF32("sim:0/compute", 8, "d");
  SLUICE_ASSERT_OK(h.builder->Call(fail, {}, {x}, AttrMap(), h.S("sim:0/compute")));
  EXPECT_THAT(h.vm->Sync().message(), HasSubstr("op 'explode'"));
  ASSERT_TRUE(x->poisoned());
  const VmStats before = h.vm->stats();

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {g}, Tag("G", 0), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("G:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.Fill(d, 1, "sim:0/compute"));    // launched, runs after G
  SLUICE_ASSERT_OK(h.Add(x, x, d, "sim:0/compute"));  // skipped: x is poisoned
  // Poison settles in stream order, so the skip itself happens after G; the window only
  // lets an implementation that poisons at launch (and lets G's fill of d clear it
  // afterwards) misbehave.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(h.vm->stats().skipped, before.skipped) << "skipped before the stream got there";
  gate.Open();

  SLUICE_EXPECT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->stats().skipped - before.skipped, 1);
  const absl::StatusOr<std::vector<float>> read = h.Read(d);
  EXPECT_FALSE(read.ok()) << "d's last writer was skipped, yet d reads as " << (*read)[0];
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_THAT(read.status().message(), HasSubstr("op 'explode'"));
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(ErrorTest);

// --- Bad API use: InvalidArgument naming the culprit, nothing submitted. ---

class ApiMisuseTest : public ::testing::Test {
 protected:
  void ExpectInvalid(const absl::Status& status, absl::string_view culprit) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(culprit)) << status;
  }
  VmHarness h_;
};

TEST_F(ApiMisuseTest, NullStreamAndNullBlob) {
  BlobRef x = h_.NewF32("cpu", 4, "x");
  const int64_t before = h_.vm->stats().instructions;
  ExpectInvalid(h_.builder->Call(h_.K("add"), {x, x}, {x}, AttrMap(), nullptr), "op 'add'");
  ExpectInvalid(h_.builder->Call(h_.K("add"), {x, x}, {x}, AttrMap(), nullptr), "null stream");
  ExpectInvalid(h_.builder->Call(h_.K("add"), {x, nullptr}, {x}, AttrMap(), h_.S("cpu")),
                "null blob");
  ExpectInvalid(h_.builder->Call(h_.K("fill"), {}, {nullptr}, AttrMap(), h_.S("cpu")),
                "op 'fill' output");
  ExpectInvalid(h_.builder->RecordEvent({x}, nullptr), "null stream");
  ExpectInvalid(h_.builder->StreamWait({x}, nullptr, h_.S("sim:0/h2d")), "null stream");
  ExpectInvalid(h_.vm->NewBlob(nullptr, DataType::kF32, Shape({4})).status(), "null stream");
  EXPECT_EQ(h_.vm->stats().instructions, before);
  SLUICE_EXPECT_OK(h_.vm->Sync());
}

TEST_F(ApiMisuseTest, ReleasedBlob) {
  BlobRef x = h_.NewF32("sim:0/compute", 4, "weights");
  BlobRef y = h_.NewF32("sim:0/compute", 4, "y");
  SLUICE_ASSERT_OK(h_.Fill(x, 1, "sim:0/compute"));
  SLUICE_ASSERT_OK(h_.builder->Release(x));
  const int64_t before = h_.vm->stats().instructions;
  const std::string name = x->DebugName();
  EXPECT_THAT(name, HasSubstr("'weights'"));
  ExpectInvalid(h_.builder->Call(h_.K("copy"), {x}, {y}, AttrMap(), h_.S("sim:0/compute")), name);
  ExpectInvalid(h_.builder->Call(h_.K("copy"), {x}, {y}, AttrMap(), h_.S("sim:0/compute")),
                "was released");
  ExpectInvalid(
      h_.builder->Call(h_.K("fill"), {}, {x}, AttrMap().Set("value", 1.0), h_.S("sim:0/compute")),
      name);
  ExpectInvalid(h_.builder->Release(x), name);
  ExpectInvalid(h_.builder->ReadBlob(x).status(), name);
  ExpectInvalid(h_.Write(x, {1, 2, 3, 4}), name);
  ExpectInvalid(h_.builder->RecordEvent({x}, h_.S("sim:0/compute")), name);
  ExpectInvalid(h_.builder->StreamWait({x}, h_.S("sim:0/compute"), h_.S("sim:0/h2d")), name);
  EXPECT_EQ(h_.vm->stats().instructions, before);
  SLUICE_EXPECT_OK(h_.vm->Sync());
  EXPECT_EQ(x->storage(), nullptr);
}

TEST_F(ApiMisuseTest, StreamWaitNeedsTwoStreamsOfOneAsyncDevice) {
  BlobRef x = h_.NewF32("sim:0/compute", 4, "x");
  const int64_t before = h_.vm->stats().instructions;
  ExpectInvalid(h_.builder->StreamWait({x}, h_.S("sim:0/compute"), h_.S("sim:1/compute")),
                "sim:0/compute -> sim:1/compute");
  ExpectInvalid(h_.builder->StreamWait({x}, h_.S("sim:0/compute"), h_.S("sim:0/compute")),
                "sim:0/compute -> sim:0/compute");
  ExpectInvalid(h_.builder->StreamWait({x}, h_.S("cpu"), h_.S("sim:0/compute")),
                "cpu/compute -> sim:0/compute");
  EXPECT_EQ(h_.vm->stats().instructions, before);

  PrecomputedBatch batch;
  batch.AddOpCall(h_.K("fill"), {}, {x},
                  std::make_shared<const AttrMap>(AttrMap().Set("value", 1.0)),
                  h_.S("sim:0/compute"));
  batch.AddStreamWait({x}, h_.S("sim:0/compute"), h_.S("sim:1/compute"));
  ExpectInvalid(batch.Submit(h_.vm.get()), "batch node 1");
  EXPECT_EQ(h_.vm->stats().instructions, before);
  SLUICE_EXPECT_OK(h_.vm->Sync());
}

TEST_F(ApiMisuseTest, WriteBlobSizeMismatch) {
  BlobRef x = h_.NewF32("sim:1/compute", 4, "x");
  const int64_t before = h_.vm->stats().instructions;
  const absl::Status status = h_.Write(x, {1, 2, 3});
  ExpectInvalid(status, x->DebugName());
  EXPECT_THAT(status.message(), HasSubstr("16"));
  EXPECT_THAT(status.message(), HasSubstr("12"));
  EXPECT_EQ(h_.vm->stats().instructions, before);
  SLUICE_EXPECT_OK(h_.Write(x, {1, 2, 3, 4}));
  EXPECT_EQ(h_.Read(x).value(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(ApiMisuseTest, BadStreamStrings) {
  for (const char* text : {"gpu:0", "sim:x", "sim:0/bogus", "cpu:1", ""}) {
    ExpectInvalid(h_.vm->GetStream(text).status(), absl::StrCat("'", text));
  }
  const absl::Status missing = h_.vm->GetStream("sim:9").status();
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("sim:9"));
  ExpectInvalid(h_.vm->GetStream(StreamId()).status(), "stream id");
  SLUICE_EXPECT_OK(h_.vm->GetStream("sim:1/d2h"));
}

TEST_F(ApiMisuseTest, BadPrecomputedBatches) {
  BlobRef x = h_.NewF32("cpu", 4, "x");
  PrecomputedBatch batch;
  const int a = batch.AddOpCall(h_.K("noop"), {x}, {}, nullptr, h_.S("cpu"));
  const int b = batch.AddOpCall(h_.K("noop"), {}, {x}, nullptr, nullptr);
  ExpectInvalid(batch.AddEdge(b, a), "edge 1 -> 0");
  ExpectInvalid(batch.AddEdge(a, a), "edge 0 -> 0");
  ExpectInvalid(batch.AddEdge(a, 5), "edge 0 -> 5");
  EXPECT_EQ(batch.edges(), 0);
  ExpectInvalid(batch.Submit(h_.vm.get()), "batch node 1: null stream");
  PrecomputedBatch nulls;
  nulls.AddOpCall(h_.K("noop"), {nullptr}, {}, nullptr, h_.S("cpu"));
  ExpectInvalid(nulls.Submit(h_.vm.get()), "batch node 0: null blob");
  EXPECT_EQ(h_.vm->stats().instructions, 0);
}

TEST(VmCreateTest, BadOptions) {
  std::unique_ptr<ep::Runtime> runtime =
      ep::Runtime::Create(ep::RuntimeOptions{.enable_cuda = false}).value();
  VmOptions zero;
  zero.max_in_flight = 0;
  const absl::Status bound = VirtualMachine::Create(runtime.get(), zero).status();
  EXPECT_EQ(bound.code(), absl::StatusCode::kInvalidArgument) << bound;
  EXPECT_THAT(bound.message(), HasSubstr("max_in_flight"));
  VmOptions spin;
  spin.spin = std::chrono::nanoseconds(-1);
  EXPECT_EQ(VirtualMachine::Create(runtime.get(), spin).status().code(),
            absl::StatusCode::kInvalidArgument);
  VmOptions idle_spin;
  idle_spin.idle_spin = std::chrono::nanoseconds(-1);
  const absl::Status idle = VirtualMachine::Create(runtime.get(), idle_spin).status();
  EXPECT_EQ(idle.code(), absl::StatusCode::kInvalidArgument) << idle;
  EXPECT_THAT(idle.message(), HasSubstr("idle_spin"));
  const absl::Status null = VirtualMachine::Create(nullptr).status();
  EXPECT_EQ(null.code(), absl::StatusCode::kInvalidArgument) << null;
  EXPECT_THAT(null.message(), HasSubstr("runtime"));
}

}  // namespace
}  // namespace sluice::vm::error_test
