// The sync checker (VmOptions::check_sync): hand-made missing waits are reported with the
// blob, both instructions, their streams and read/write, whether the program comes from an
// InstructionsBuilder with soft sync off or from a PrecomputedBatch without its sync; the
// reports do not depend on the order the run happened to take; write-after-read and
// write-after-write are caught as well as read-after-write; reads on different streams are
// not a conflict; properly synced programs (soft sync, explicit StreamWait/RecordEvent, host
// syncs through Sync, ReadBlob and WriteBlob) are clean. Also: edges between two cpu streams
// and a Barrier that fires while later work is already launched.
//
// Unordered programs here run TestKernels, which declare operands but touch no memory: the
// checker judges declared accesses, so those runs show the missing wait without racing on
// real bytes.
#include "vm/sync_checker.h"

#include <cctype>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"

namespace sluice::vm::sync_checker_test {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;
using testing::VmHarness;

constexpr int64_t kN = 64;

VmOptions Checked(VmOptions::Scheduling scheduling = VmOptions::Scheduling::kDedicatedThread) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  return options;
}

// What a TestKernel does besides declaring operands. When `launched` is set it is notified as
// the worker launches the op; when `gate` or `ran` is set, the op enqueues host work that
// waits for `gate` (blocking its stream, or the cpu worker) and then notifies `ran`. Each
// notification may serve one launch only.
struct Hooks {
  absl::Notification* launched = nullptr;
  absl::Notification* gate = nullptr;
  absl::Notification* ran = nullptr;
};

// A test-only kernel: declares whatever operands it is given and touches no memory.
class TestKernel final : public OpKernel {
 public:
  explicit TestKernel(std::string name, Hooks hooks = {}) : name_(std::move(name)), hooks_(hooks) {}

  absl::string_view name() const override { return name_; }
  absl::Status Launch(KernelContext& ctx) const override {
    if (hooks_.launched != nullptr) hooks_.launched->Notify();
    if (hooks_.gate == nullptr && hooks_.ran == nullptr) return absl::OkStatus();
    return ctx.LaunchHostWork([hooks = hooks_] {
      if (hooks.gate != nullptr) hooks.gate->WaitForNotification();
      if (hooks.ran != nullptr) hooks.ran->Notify();
      return absl::OkStatus();
    });
  }

 private:
  const std::string name_;
  const Hooks hooks_;
};

// Opens a gate when it goes out of scope, so that a failing assertion cannot leave a stream
// blocked while the VM shuts down. Declare it after the VmHarness.
class GateOpener {
 public:
  explicit GateOpener(absl::Notification* gate) : gate_(gate) {}
  ~GateOpener() {
    if (!gate_->HasBeenNotified()) gate_->Notify();
  }

 private:
  absl::Notification* const gate_;
};

// How the checker names one access: "op 'NAME' #SEQ on STREAM (write)".
::testing::Matcher<const std::string&> Access(absl::string_view op, absl::string_view stream,
                                              bool write) {
  return AllOf(StartsWith(absl::StrCat("op '", op, "' #")),
               EndsWith(absl::StrCat(" on ", stream, write ? " (write)" : " (read)")));
}

std::vector<std::string> Pair(const SyncViolation& v) { return {v.first, v.second}; }

std::string Report(VirtualMachine& vm) {
  return std::string(vm.sync_checker()->status().message());
}

absl::Status Call(VmHarness& h, const OpKernel& kernel, BlobList inputs, BlobList outputs,
                  absl::string_view stream) {
  return h.builder->Call(kernel, std::move(inputs), std::move(outputs), AttrMap(), h.S(stream));
}

absl::Status Scale(VmHarness& h, const BlobRef& x, const BlobRef& y, absl::string_view stream) {
  return h.builder->Call(h.K("scale"), {x}, {y}, AttrMap().Set("alpha", 2.0).Set("beta", 1.0),
                         h.S(stream));
}

std::shared_ptr<const AttrMap> ScaleAttrs() {
  return std::make_shared<const AttrMap>(AttrMap().Set("alpha", 2.0).Set("beta", 1.0));
}
std::shared_ptr<const AttrMap> FillAttrs(double value) {
  return std::make_shared<const AttrMap>(AttrMap().Set("value", value));
}

void ExpectAll(const absl::StatusOr<std::vector<float>>& values, float expected) {
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->size(), static_cast<size_t>(kN));
  for (size_t i = 0; i < values->size(); ++i) ASSERT_EQ((*values)[i], expected) << "element " << i;
}

// --- A producer on sim:0/compute, a consumer elsewhere, and the wait between them. ---

struct ConsumerStream {
  const char* key;
  const char* name;  // as the checker prints it
  // True when producer and consumer launch on one ThreadCtx worker, in dispatch order: the
  // producer is then always the first access of the report. On another worker the consumer
  // may launch first, and the same pair is reported the other way round.
  bool same_worker;
  // The sync soft sync emits for this pair.
  bool stream_wait;
};

void PrintTo(const ConsumerStream& s, std::ostream* os) { *os << s.key; }

constexpr ConsumerStream kConsumers[] = {
    {"sim:1/compute", "sim:1/compute", true, false},
    {"sim:0/h2d", "sim:0/h2d", true, true},
    {"cpu", "cpu/compute", false, false},
};

std::string ConsumerName(const ::testing::TestParamInfo<ConsumerStream>& info) {
  std::string out;
  for (const char* c = info.param.key; *c != '\0'; ++c)
    out.push_back(std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_');
  return out;
}

void ExpectProducerConsumerViolation(VirtualMachine& vm, const BlobRef& x,
                                     const ConsumerStream& consumer) {
  SyncChecker* checker = vm.sync_checker();
  EXPECT_EQ(checker->violation_count(), 1) << Report(vm);
  const std::vector<SyncViolation> violations = checker->violations();
  ASSERT_EQ(violations.size(), 1u);
  const SyncViolation& v = violations[0];
  EXPECT_EQ(v.blob, x->DebugName());
  EXPECT_THAT(v.blob, HasSubstr("'x'"));
  EXPECT_THAT(Pair(v), UnorderedElementsAre(Access("producer", "sim:0/compute", /*write=*/true),
                                            Access("consumer", consumer.name, /*write=*/false)));
  if (consumer.same_worker) {
    EXPECT_THAT(v.first, Access("producer", "sim:0/compute", /*write=*/true));
  }
  const absl::Status status = checker->status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("1 unordered access"), HasSubstr("'x'"),
                                      HasSubstr("op 'producer'"), HasSubstr("op 'consumer'")));
  EXPECT_THAT(v.ToString(), AllOf(HasSubstr(x->DebugName()), HasSubstr("is not ordered after")));
}

class SyncCheckerMissingWaitTest : public ::testing::TestWithParam<ConsumerStream> {};

// Soft sync off: the builder emits no wait between producer and consumer.
TEST_P(SyncCheckerMissingWaitTest, BuilderWithoutSoftSync) {
  const ConsumerStream& consumer_stream = GetParam();
  VmHarness h(Checked());
  h.builder->set_soft_sync(false);
  TestKernel producer("producer"), consumer("consumer");
  BlobRef x = h.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h.NewF32(consumer_stream.key, kN, "y");
  ASSERT_TRUE(Call(h, producer, {}, {x}, "sim:0/compute").ok());
  ASSERT_TRUE(Call(h, consumer, {x}, {y}, consumer_stream.key).ok());
  ASSERT_TRUE(h.vm->Sync().ok());
  const VmStats stats = h.vm->stats();
  ASSERT_EQ(stats.stream_waits + stats.record_events, 0) << stats.ToString();
  ExpectProducerConsumerViolation(*h.vm, x, consumer_stream);
}

// The same program with soft sync on is clean, and computes the right value.
TEST_P(SyncCheckerMissingWaitTest, SameProgramWithSoftSyncIsClean) {
  const ConsumerStream& consumer_stream = GetParam();
  VmHarness h(Checked());
  BlobRef x = h.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h.NewF32(consumer_stream.key, kN, "y");
  ASSERT_TRUE(h.Fill(x, 3.0, "sim:0/compute").ok());
  ASSERT_TRUE(Scale(h, x, y, consumer_stream.key).ok());
  ExpectAll(h.Read(y), 7.0f);
  ASSERT_TRUE(h.vm->Sync().ok());
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.stream_waits + stats.record_events, 1) << stats.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << Report(*h.vm);
  EXPECT_TRUE(h.vm->sync_checker()->status().ok());
}

// A PrecomputedBatch whose producer -> consumer edge has no sync instruction on it.
TEST_P(SyncCheckerMissingWaitTest, BatchWithoutSyncInstruction) {
  const ConsumerStream& consumer_stream = GetParam();
  VmHarness h(Checked());
  TestKernel producer("producer"), consumer("consumer");
  BlobRef x = h.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h.NewF32(consumer_stream.key, kN, "y");
  PrecomputedBatch batch;
  const int p = batch.AddOpCall(producer, {}, {x}, nullptr, h.S("sim:0/compute"));
  const int c = batch.AddOpCall(consumer, {x}, {y}, nullptr, h.S(consumer_stream.key));
  ASSERT_TRUE(batch.AddEdge(p, c).ok());
  ASSERT_TRUE(batch.Submit(h.vm.get()).ok());
  ASSERT_TRUE(h.vm->Sync().ok());
  ExpectProducerConsumerViolation(*h.vm, x, consumer_stream);
}

// The same batch with the sync instruction (StreamWait within sim:0, RecordEvent otherwise)
// and its edges: clean, and the value is right.
TEST_P(SyncCheckerMissingWaitTest, BatchWithSyncInstructionIsClean) {
  const ConsumerStream& consumer_stream = GetParam();
  VmHarness h(Checked());
  BlobRef x = h.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h.NewF32(consumer_stream.key, kN, "y");
  Stream* producer_stream = h.S("sim:0/compute");
  PrecomputedBatch batch;
  const int p = batch.AddOpCall(h.K("fill"), {}, {x}, FillAttrs(3.0), producer_stream);
  const int sync = consumer_stream.stream_wait
                       ? batch.AddStreamWait({x}, producer_stream, h.S(consumer_stream.key))
                       : batch.AddRecordEvent({x}, producer_stream);
  const int c = batch.AddOpCall(h.K("scale"), {x}, {y}, ScaleAttrs(), h.S(consumer_stream.key));
  ASSERT_TRUE(batch.AddEdge(p, sync).ok());
  ASSERT_TRUE(batch.AddEdge(sync, c).ok());
  ASSERT_TRUE(batch.Submit(h.vm.get()).ok());
  // Batch instructions take no part in eager dependence tracking: sync before reading.
  ASSERT_TRUE(h.vm->Sync().ok());
  ExpectAll(h.Read(y), 7.0f);
  ASSERT_TRUE(h.vm->Sync().ok());
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << Report(*h.vm);
}

INSTANTIATE_TEST_SUITE_P(Consumers, SyncCheckerMissingWaitTest, ::testing::ValuesIn(kConsumers),
                         ConsumerName);

// --- Single scenarios. ---

class SyncCheckerTest : public ::testing::Test {
 protected:
  SyncCheckerTest() : h_(Checked()) {}

  SyncChecker& checker() { return *h_.vm->sync_checker(); }

  VmHarness h_;
};

// The checker judges the order the VM guarantees, not the order of the run: here the
// producer's work has provably finished before the consumer is even submitted, and the
// missing wait is still reported.
TEST_F(SyncCheckerTest, ReportsMissingWaitEvenWhenTheRunWasInOrder) {
  h_.builder->set_soft_sync(false);
  absl::Notification ran;
  TestKernel producer("producer", {.ran = &ran}), consumer("consumer");
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x"), y = h_.NewF32("sim:1/compute", kN, "y");
  ASSERT_TRUE(Call(h_, producer, {}, {x}, "sim:0/compute").ok());
  ran.WaitForNotification();
  ASSERT_TRUE(Call(h_, consumer, {x}, {y}, "sim:1/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_THAT(violations[0].first, Access("producer", "sim:0/compute", /*write=*/true));
  EXPECT_THAT(violations[0].second, Access("consumer", "sim:1/compute", /*write=*/false));
}

// A StreamWait in the batch, after the producer, but the consumer has no edge from it: the
// consumer has no predecessor and comes before the wait in the batch, so it is dispatched
// ahead of the wait (ready instructions go out in batch order) and is not ordered after it.
TEST_F(SyncCheckerTest, BatchStreamWaitWithoutEdgeToConsumerIsCaught) {
  TestKernel producer("producer"), consumer("consumer");
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x"), y = h_.NewF32("sim:0/h2d", kN, "y");
  PrecomputedBatch batch;
  const int p = batch.AddOpCall(producer, {}, {x}, nullptr, h_.S("sim:0/compute"));
  batch.AddOpCall(consumer, {x}, {y}, nullptr, h_.S("sim:0/h2d"));
  const int wait = batch.AddStreamWait({x}, h_.S("sim:0/compute"), h_.S("sim:0/h2d"));
  ASSERT_TRUE(batch.AddEdge(p, wait).ok());
  ASSERT_TRUE(batch.Submit(h_.vm.get()).ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].blob, x->DebugName());
  EXPECT_THAT(violations[0].first, Access("producer", "sim:0/compute", /*write=*/true));
  EXPECT_THAT(violations[0].second, Access("consumer", "sim:0/h2d", /*write=*/false));
}

// Write after read: x is read on sim:0/compute, then overwritten on sim:1/compute with no
// wait. x's initial contents come from a blocking WriteBlob, which the host waited for, so
// the only unordered pair is the read and the second write.
TEST_F(SyncCheckerTest, WriteAfterReadIsCaught) {
  h_.builder->set_soft_sync(false);
  TestKernel reader("reader"), writer("writer");
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x"), r = h_.NewF32("sim:0/compute", kN, "r");
  ASSERT_TRUE(h_.Write(x, std::vector<float>(kN, 1.0f)).ok());
  ASSERT_TRUE(Call(h_, reader, {x}, {r}, "sim:0/compute").ok());
  ASSERT_TRUE(Call(h_, writer, {}, {x}, "sim:1/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].blob, x->DebugName());
  EXPECT_THAT(violations[0].first, Access("reader", "sim:0/compute", /*write=*/false));
  EXPECT_THAT(violations[0].second, Access("writer", "sim:1/compute", /*write=*/true));

  // With soft sync on, the same pattern on another blob adds nothing.
  h_.builder->set_soft_sync(true);
  BlobRef x2 = h_.NewF32("sim:0/compute", kN, "x2");
  ASSERT_TRUE(h_.Write(x2, std::vector<float>(kN, 1.0f)).ok());
  ASSERT_TRUE(Call(h_, reader, {x2}, {r}, "sim:0/compute").ok());
  ASSERT_TRUE(Call(h_, writer, {}, {x2}, "sim:1/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
}

// Write after write between two streams of one device, with no StreamWait.
TEST_F(SyncCheckerTest, WriteAfterWriteIsCaught) {
  h_.builder->set_soft_sync(false);
  TestKernel first("first_writer"), second("second_writer");
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x");
  ASSERT_TRUE(Call(h_, first, {}, {x}, "sim:0/compute").ok());
  ASSERT_TRUE(Call(h_, second, {}, {x}, "sim:0/h2d").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].blob, x->DebugName());
  EXPECT_THAT(violations[0].first, Access("first_writer", "sim:0/compute", /*write=*/true));
  EXPECT_THAT(violations[0].second, Access("second_writer", "sim:0/h2d", /*write=*/true));

  // With soft sync on (a StreamWait), the same pattern on another blob adds nothing.
  h_.builder->set_soft_sync(true);
  BlobRef x2 = h_.NewF32("sim:0/compute", kN, "x2");
  ASSERT_TRUE(Call(h_, first, {}, {x2}, "sim:0/compute").ok());
  ASSERT_TRUE(Call(h_, second, {}, {x2}, "sim:0/h2d").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
}

// Reads on different streams with no sync between them do not conflict. A write after them
// on sim:1/compute does conflict with the reads on the other sim streams (launched there,
// never waited for); the cpu read is ordered by the engine (cpu work on another worker is a
// completion edge) and the sim:1 read by stream order.
TEST_F(SyncCheckerTest, ReadsOnDifferentStreamsAreNotAViolation) {
  h_.builder->set_soft_sync(false);
  const char* const kReaders[] = {"sim:0/compute", "sim:0/h2d", "sim:1/compute", "cpu"};
  TestKernel reader_c("reader_compute"), reader_h("reader_h2d"), reader_1("reader_sim1"),
      reader_cpu("reader_cpu");
  const TestKernel* readers[] = {&reader_c, &reader_h, &reader_1, &reader_cpu};
  std::vector<BlobRef> outs;
  for (const char* stream : kReaders) outs.push_back(h_.NewF32(stream, kN));

  BlobRef x = h_.NewF32("sim:0/compute", kN, "x");
  ASSERT_TRUE(h_.Write(x, std::vector<float>(kN, 1.0f)).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Call(h_, *readers[i], {x}, {outs[i]}, kReaders[i]).ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);

  BlobRef x2 = h_.NewF32("sim:0/compute", kN, "x2");
  ASSERT_TRUE(h_.Write(x2, std::vector<float>(kN, 1.0f)).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Call(h_, *readers[i], {x2}, {outs[i]}, kReaders[i]).ok());
  }
  TestKernel writer("writer");
  ASSERT_TRUE(Call(h_, writer, {}, {x2}, "sim:1/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 2) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 2u);
  EXPECT_THAT((std::vector<std::string>{violations[0].first, violations[1].first}),
              UnorderedElementsAre(Access("reader_compute", "sim:0/compute", /*write=*/false),
                                   Access("reader_h2d", "sim:0/h2d", /*write=*/false)));
  for (const SyncViolation& v : violations) {
    EXPECT_EQ(v.blob, x2->DebugName());
    EXPECT_THAT(v.second, Access("writer", "sim:1/compute", /*write=*/true));
  }
}

// Host syncs order work the builder did not sync: after Sync(), after a blocking ReadBlob of
// the producer's output, and after a blocking WriteBlob, a consumer elsewhere is ordered.
TEST_F(SyncCheckerTest, HostSyncsOrderUnsyncedWork) {
  h_.builder->set_soft_sync(false);
  // Sync() between producer and consumer.
  BlobRef x1 = h_.NewF32("sim:0/compute", kN, "x1"), y1 = h_.NewF32("sim:1/compute", kN, "y1");
  ASSERT_TRUE(h_.Fill(x1, 3.0, "sim:0/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  ASSERT_TRUE(Scale(h_, x1, y1, "sim:1/compute").ok());
  // A blocking read of the producer's output.
  BlobRef x2 = h_.NewF32("sim:0/compute", kN, "x2"), y2 = h_.NewF32("sim:0/h2d", kN, "y2");
  ASSERT_TRUE(h_.Fill(x2, 3.0, "sim:0/compute").ok());
  ExpectAll(h_.Read(x2), 3.0f);
  ASSERT_TRUE(Scale(h_, x2, y2, "sim:0/h2d").ok());
  // A blocking write.
  BlobRef x3 = h_.NewF32("sim:0/compute", kN, "x3"), y3 = h_.NewF32("cpu", kN, "y3");
  ASSERT_TRUE(h_.Write(x3, std::vector<float>(kN, 3.0f)).ok());
  ASSERT_TRUE(Scale(h_, x3, y3, "cpu").ok());

  ExpectAll(h_.Read(y1), 7.0f);
  ExpectAll(h_.Read(y2), 7.0f);
  ExpectAll(h_.Read(y3), 7.0f);
  ASSERT_TRUE(h_.vm->Sync().ok());
  const VmStats stats = h_.vm->stats();
  EXPECT_EQ(stats.stream_waits + stats.record_events, 0) << stats.ToString();
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);
}

// Hand-made syncs through the builder's StreamWait and RecordEvent order the consumer; a
// RecordEvent that names another blob does not.
TEST_F(SyncCheckerTest, ExplicitSyncsOrderOnlyTheBlobsTheyName) {
  h_.builder->set_soft_sync(false);
  Stream* compute = h_.S("sim:0/compute");
  BlobRef x1 = h_.NewF32("sim:0/compute", kN, "x1"), y1 = h_.NewF32("sim:0/h2d", kN, "y1");
  ASSERT_TRUE(h_.Fill(x1, 3.0, "sim:0/compute").ok());
  ASSERT_TRUE(h_.builder->StreamWait({x1}, compute, h_.S("sim:0/h2d")).ok());
  ASSERT_TRUE(Scale(h_, x1, y1, "sim:0/h2d").ok());
  BlobRef x2 = h_.NewF32("sim:0/compute", kN, "x2"), y2 = h_.NewF32("sim:1/compute", kN, "y2");
  ASSERT_TRUE(h_.Fill(x2, 3.0, "sim:0/compute").ok());
  ASSERT_TRUE(h_.builder->RecordEvent({x2}, compute).ok());
  ASSERT_TRUE(Scale(h_, x2, y2, "sim:1/compute").ok());
  BlobRef x3 = h_.NewF32("sim:0/compute", kN, "x3"), y3 = h_.NewF32("cpu", kN, "y3");
  ASSERT_TRUE(h_.Fill(x3, 3.0, "sim:0/compute").ok());
  ASSERT_TRUE(h_.builder->RecordEvent({x3}, compute).ok());
  ASSERT_TRUE(Scale(h_, x3, y3, "cpu").ok());
  ExpectAll(h_.Read(y1), 7.0f);
  ExpectAll(h_.Read(y2), 7.0f);
  ExpectAll(h_.Read(y3), 7.0f);
  ASSERT_TRUE(h_.vm->Sync().ok());
  const VmStats stats = h_.vm->stats();
  EXPECT_EQ(stats.stream_waits, 1);
  EXPECT_EQ(stats.record_events, 2);
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);

  TestKernel producer("producer"), consumer("consumer");
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x"), other = h_.NewF32("sim:0/compute", kN);
  BlobRef y = h_.NewF32("sim:1/compute", kN, "y");
  ASSERT_TRUE(Call(h_, producer, {}, {x}, "sim:0/compute").ok());
  ASSERT_TRUE(h_.builder->RecordEvent({other}, compute).ok());
  ASSERT_TRUE(Call(h_, consumer, {x}, {y}, "sim:1/compute").ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].blob, x->DebugName());
  EXPECT_THAT(violations[0].first, Access("producer", "sim:0/compute", /*write=*/true));
  EXPECT_THAT(violations[0].second, Access("consumer", "sim:1/compute", /*write=*/false));
}

// cpu work needs no sync before sim work: the engine waits for its completion (cpu work on
// another worker is a completion edge), and the checker credits that.
TEST_F(SyncCheckerTest, CpuProducerIsOrderedByTheEngine) {
  h_.builder->set_soft_sync(false);
  BlobRef x = h_.NewF32("cpu", kN, "x"), y = h_.NewF32("sim:0/compute", kN, "y");
  ASSERT_TRUE(h_.Fill(x, 3.0, "cpu").ok());
  ASSERT_TRUE(Scale(h_, x, y, "sim:0/compute").ok());
  ExpectAll(h_.Read(y), 7.0f);
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);
}

// --- A soft-synced pipeline over every kind of pair. ---

class SyncCheckerPipelineTest : public ::testing::TestWithParam<VmOptions::Scheduling> {};

// cpu -> sim:0/h2d -> sim:0/compute -> sim:1/compute -> sim:0/d2h -> cpu, with an in-place
// overwrite of a blob another stream has read (write after read) and the host reading back:
// exact syncs, right values, a clean checker.
TEST_P(SyncCheckerPipelineTest, SoftSyncedPipelineIsClean) {
  VmHarness h(Checked(GetParam()));
  BlobRef a = h.NewF32("cpu", kN, "a"), b = h.NewF32("sim:0/h2d", kN, "b");
  BlobRef c = h.NewF32("sim:0/compute", kN, "c"), d = h.NewF32("sim:1/compute", kN, "d");
  BlobRef e = h.NewF32("sim:0/d2h", kN, "e"), f = h.NewF32("cpu", kN, "f");
  const OpKernel& copy = h.K("copy");
  ASSERT_TRUE(h.Write(a, std::vector<float>(kN, 1.0f)).ok());
  ASSERT_TRUE(h.builder->Call(copy, {a}, {b}, AttrMap(), h.S("sim:0/h2d")).ok());  // record
  ASSERT_TRUE(Scale(h, b, c, "sim:0/compute").ok());                               // wait
  ASSERT_TRUE(h.Fill(b, 10.0, "sim:0/h2d").ok());     // overwrites what compute read: wait
  ASSERT_TRUE(h.Add(b, c, c, "sim:0/compute").ok());  // wait
  ASSERT_TRUE(h.builder->Call(copy, {c}, {d}, AttrMap(), h.S("sim:1/compute")).ok());  // record
  ASSERT_TRUE(h.Add(d, d, d, "sim:1/compute").ok());
  ASSERT_TRUE(h.builder->Call(copy, {d}, {e}, AttrMap(), h.S("sim:0/d2h")).ok());  // record
  ASSERT_TRUE(h.builder->Call(copy, {e}, {f}, AttrMap(), h.S("cpu")).ok());        // record
  ExpectAll(h.Read(f), 26.0f);  // ((1 * 2 + 1) + 10) * 2
  ASSERT_TRUE(h.vm->Sync().ok());
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.stream_waits, 3) << stats.ToString();
  EXPECT_EQ(stats.record_events, 4) << stats.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << Report(*h.vm);
}

INSTANTIATE_TEST_SUITE_P(Scheduling, SyncCheckerPipelineTest,
                         ::testing::Values(VmOptions::Scheduling::kDedicatedThread,
                                           VmOptions::Scheduling::kCallerThread));

// --- Edges the engine orders by dispatch between two cpu streams. ---

// Two streams of the cpu device run on the one cpu worker, synchronously, in dispatch order:
// the engine satisfies an edge between them at dispatch, which orders them for real. Soft
// sync emits a RecordEvent (cpu is involved) and the value is right; the checker must not
// report the pair. The producer is held back by a gate on the cpu worker until a probe on
// sim:0 shows that the engine has received the consumer, so the producer cannot have
// retired before then.
TEST_F(SyncCheckerTest, TwoCpuStreamsSyncedBySoftSyncAreClean) {
  absl::Notification gate, probe_launched;
  GateOpener opener(&gate);
  TestKernel gate_kernel("gate", {.gate = &gate});
  TestKernel probe("probe", {.launched = &probe_launched});
  BlobRef g = h_.NewF32("cpu", kN, "g"), p = h_.NewF32("sim:0/compute", kN, "p");
  BlobRef x = h_.NewF32("cpu", kN, "x"), y = h_.NewF32("cpu/compute:1", kN, "y");
  ASSERT_TRUE(Call(h_, gate_kernel, {}, {g}, "cpu").ok());
  ASSERT_TRUE(h_.Fill(x, 3.0, "cpu").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(Scale(h_, x, y, "cpu/compute:1").ok());
  const VmStats after = h_.vm->stats();
  EXPECT_EQ(after.record_events - before.record_events, 1);
  EXPECT_EQ(after.stream_waits - before.stream_waits, 0);
  ASSERT_TRUE(Call(h_, probe, {}, {p}, "sim:0/compute").ok());
  probe_launched.WaitForNotification();
  gate.Notify();
  ExpectAll(h_.Read(y), 7.0f);
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);
}

// The same between two cpu streams in a PrecomputedBatch with a RecordEvent and its edges.
TEST_F(SyncCheckerTest, BatchOnTwoCpuStreamsWithRecordEventIsClean) {
  BlobRef x = h_.NewF32("cpu", kN, "x"), y = h_.NewF32("cpu/compute:1", kN, "y");
  Stream* cpu = h_.S("cpu");
  PrecomputedBatch batch;
  const int p = batch.AddOpCall(h_.K("fill"), {}, {x}, FillAttrs(3.0), cpu);
  const int sync = batch.AddRecordEvent({x}, cpu);
  const int c = batch.AddOpCall(h_.K("scale"), {x}, {y}, ScaleAttrs(), h_.S("cpu/compute:1"));
  ASSERT_TRUE(batch.AddEdge(p, sync).ok());
  ASSERT_TRUE(batch.AddEdge(sync, c).ok());
  ASSERT_TRUE(batch.Submit(h_.vm.get()).ok());
  ASSERT_TRUE(h_.vm->Sync().ok());
  ExpectAll(h_.Read(y), 7.0f);
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(checker().violation_count(), 0) << Report(*h_.vm);
}

// --- A Barrier and work submitted after it. ---

// A Barrier certifies only what was submitted before it. Here the second writer of x is
// submitted after the Barrier and launched (blocked behind a gate on its stream) before the
// Barrier fires; a reader on sim:1 submitted after the Barrier fired, with no sync, is not
// ordered after that second write, which has provably not run yet. The checker must report
// the pair.
TEST_F(SyncCheckerTest, BarrierDoesNotCertifyWorkSubmittedAfterIt) {
  h_.builder->set_soft_sync(false);
  absl::Notification first_launched, first_gate, second_launched, second_gate, fired,
      reader_launched;
  GateOpener open_first(&first_gate), open_second(&second_gate);
  TestKernel first("first_writer", {.launched = &first_launched, .gate = &first_gate});
  TestKernel second("second_writer", {.launched = &second_launched, .gate = &second_gate});
  TestKernel reader("reader", {.launched = &reader_launched});
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x"), y = h_.NewF32("sim:1/compute", kN, "y");

  ASSERT_TRUE(Call(h_, first, {}, {x}, "sim:0/compute").ok());
  // Launched alone: its completion point does not wait for the second writer's work.
  first_launched.WaitForNotification();
  ASSERT_TRUE(h_.builder->Barrier([&fired] { fired.Notify(); }).ok());
  ASSERT_TRUE(Call(h_, second, {}, {x}, "sim:0/compute").ok());
  second_launched.WaitForNotification();
  first_gate.Notify();
  fired.WaitForNotification();  // the first writer is done; the second is blocked
  ASSERT_TRUE(Call(h_, reader, {x}, {y}, "sim:1/compute").ok());
  reader_launched.WaitForNotification();  // ran while the second write had not
  second_gate.Notify();
  ASSERT_TRUE(h_.vm->Sync().ok());

  EXPECT_EQ(checker().violation_count(), 1) << Report(*h_.vm);
  const std::vector<SyncViolation> violations = checker().violations();
  ASSERT_EQ(violations.size(), 1u);
  EXPECT_EQ(violations[0].blob, x->DebugName());
  EXPECT_THAT(violations[0].first, Access("second_writer", "sim:0/compute", /*write=*/true));
  EXPECT_THAT(violations[0].second, Access("reader", "sim:1/compute", /*write=*/false));
}

}  // namespace
}  // namespace sluice::vm::sync_checker_test
