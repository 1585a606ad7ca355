// Soft sync in InstructionsBuilder::Call. The decision table over every ordered pair of
// streams among cpu, streams of sim:0 and streams of sim:1 (exact sync counts, the value
// read back, a clean sync checker, one pooled event per sync); operands sharing a last
// stream share one sync and operands from different last streams get one each; repeated use
// on one stream adds none; events are pooled; single-stream chains create no events; with
// soft sync off nothing is emitted.
#include <cctype>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/vm_test_util.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"

namespace sluice::vm::soft_sync_test {
namespace {

using testing::VmHarness;

constexpr int64_t kN = 257;

VmOptions CheckedOptions(VmOptions::Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  // These tests count the instructions soft sync emits, one per call or sync; fusion would
  // join calls into runs depending on the scheduler's timing (fusion_test.cc covers it).
  options.max_fused_steps = 0;
  return options;
}

// Counter deltas between two snapshots.
struct SyncDelta {
  int64_t instructions;
  int64_t op_calls;
  int64_t stream_waits;
  int64_t record_events;
};

SyncDelta Delta(const VmStats& before, const VmStats& after) {
  return SyncDelta{after.instructions - before.instructions, after.op_calls - before.op_calls,
                   after.stream_waits - before.stream_waits,
                   after.record_events - before.record_events};
}

std::string CheckerReport(VirtualMachine& vm) {
  return std::string(vm.sync_checker()->status().message());
}

absl::Status Scale(VmHarness& h, const BlobRef& x, const BlobRef& y, double alpha, double beta,
                   absl::string_view stream) {
  return h.builder->Call(h.K("scale"), {x}, {y}, AttrMap().Set("alpha", alpha).Set("beta", beta),
                         h.S(stream));
}

void ExpectAll(const std::vector<float>& values, float expected, size_t size) {
  ASSERT_EQ(values.size(), size);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], expected) << "element " << i;
  }
}

// --- The decision table. ---

// A stream of the table with the facts the rule depends on, written out by hand rather than
// asked of the VM: which device it belongs to (-1 for cpu, the host; otherwise the sim
// device index, sim devices being asynchronous).
struct TableStream {
  const char* key;
  int sim_device;
};

constexpr TableStream kTableStreams[] = {
    {"cpu", -1},      {"sim:0/compute", 0}, {"sim:0/compute:1", 0}, {"sim:0/h2d", 0},
    {"sim:0/d2h", 0}, {"sim:1/compute", 1}, {"sim:1/h2d", 1},       {"sim:1/d2h", 1},
};

void PrintTo(const TableStream& stream, std::ostream* os) { *os << stream.key; }

enum class ExpectedSync { kNone, kStreamWait, kRecordEvent };

// The rule of the issue: nothing on the same stream; a StreamWait between two streams of one
// asynchronous device; a RecordEvent when cpu is involved or the devices differ.
ExpectedSync Expected(const TableStream& producer, const TableStream& consumer) {
  if (absl::string_view(producer.key) == consumer.key) return ExpectedSync::kNone;
  if (producer.sim_device >= 0 && producer.sim_device == consumer.sim_device) {
    return ExpectedSync::kStreamWait;
  }
  return ExpectedSync::kRecordEvent;
}

using TableParam = std::tuple<TableStream, TableStream, VmOptions::Scheduling>;

class SoftSyncTableTest : public ::testing::TestWithParam<TableParam> {};

// Produce x on the first stream, consume it on the second: exactly the sync the rule asks
// for, a correct value, one pooled event per sync and nothing for the checker to report.
TEST_P(SoftSyncTableTest, ProduceThenConsume) {
  const auto& [producer, consumer, scheduling] = GetParam();
  const ExpectedSync expected = Expected(producer, consumer);
  const int64_t expected_waits = expected == ExpectedSync::kStreamWait ? 1 : 0;
  const int64_t expected_records = expected == ExpectedSync::kRecordEvent ? 1 : 0;

  VmHarness h(CheckedOptions(scheduling));
  BlobRef x = h.NewF32(producer.key, kN, "x");
  BlobRef y = h.NewF32(consumer.key, kN, "y");
  // x was allocated on the producer's stream, y on the consumer's: only x needs a sync.
  ASSERT_TRUE(h.Fill(x, 3.0, producer.key).ok());
  const VmStats before = h.vm->stats();
  EXPECT_EQ(before.stream_waits, 0);
  EXPECT_EQ(before.record_events, 0);

  ASSERT_TRUE(Scale(h, x, y, 2.0, 1.0, consumer.key).ok());
  const SyncDelta delta = Delta(before, h.vm->stats());
  EXPECT_EQ(delta.stream_waits, expected_waits);
  EXPECT_EQ(delta.record_events, expected_records);
  EXPECT_EQ(delta.op_calls, 1);
  EXPECT_EQ(delta.instructions, 1 + expected_waits + expected_records);

  absl::StatusOr<std::vector<float>> got = h.Read(y);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectAll(*got, 7.0f, kN);
  ASSERT_TRUE(h.vm->Sync().ok());

  // Reads and syncs of the host add no syncs; each sync instruction borrowed one event and
  // nothing else did.
  const VmStats end = h.vm->stats();
  EXPECT_EQ(end.stream_waits, expected_waits);
  EXPECT_EQ(end.record_events, expected_records);
  EXPECT_EQ(end.events_created + end.events_reused, expected_waits + expected_records)
      << end.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << CheckerReport(*h.vm);
}

std::string Identifier(absl::string_view key) {
  std::string out;
  for (char c : key) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

std::string TableName(const ::testing::TestParamInfo<TableParam>& info) {
  const auto& [producer, consumer, scheduling] = info.param;
  return absl::StrCat(Identifier(producer.key), "_to_", Identifier(consumer.key),
                      scheduling == VmOptions::Scheduling::kDedicatedThread ? "" : "_caller");
}

INSTANTIATE_TEST_SUITE_P(
    EveryPair, SoftSyncTableTest,
    ::testing::Combine(::testing::ValuesIn(kTableStreams), ::testing::ValuesIn(kTableStreams),
                       ::testing::Values(VmOptions::Scheduling::kDedicatedThread,
                                         VmOptions::Scheduling::kCallerThread)),
    TableName);

// --- Several operands. ---

class SoftSyncTest : public ::testing::Test {
 protected:
  SoftSyncTest() : h_(CheckedOptions(VmOptions::Scheduling::kDedicatedThread)) {}

  void ExpectCleanChecker() {
    ASSERT_TRUE(h_.vm->Sync().ok());
    EXPECT_EQ(h_.vm->sync_checker()->violation_count(), 0) << CheckerReport(*h_.vm);
  }

  VmHarness h_;
};

// Inputs and the output all last used on sim:0/h2d, the op on sim:0/compute: one StreamWait
// orders all three.
TEST_F(SoftSyncTest, OperandsSharingALastStreamShareOneStreamWait) {
  BlobRef a = h_.NewF32("sim:0/h2d", kN, "a"), b = h_.NewF32("sim:0/h2d", kN, "b");
  BlobRef y = h_.NewF32("sim:0/h2d", kN, "y");
  ASSERT_TRUE(h_.Fill(a, 1.0, "sim:0/h2d").ok());
  ASSERT_TRUE(h_.Fill(b, 2.0, "sim:0/h2d").ok());
  ASSERT_TRUE(h_.Fill(y, -1.0, "sim:0/h2d").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.Add(a, b, y, "sim:0/compute").ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 1);
  EXPECT_EQ(delta.record_events, 0);
  EXPECT_EQ(delta.instructions, 2);
  ExpectAll(h_.Read(y).value(), 3.0f, kN);
  ExpectCleanChecker();
}

// The same on another device: one RecordEvent for three operands of sim:0/compute.
TEST_F(SoftSyncTest, OperandsSharingALastStreamShareOneRecordEvent) {
  BlobRef a = h_.NewF32("sim:0/compute", kN, "a"), b = h_.NewF32("sim:0/compute", kN, "b");
  BlobRef y = h_.NewF32("sim:0/compute", kN, "y");
  ASSERT_TRUE(h_.Fill(a, 1.5, "sim:0/compute").ok());
  ASSERT_TRUE(h_.Fill(b, 2.5, "sim:0/compute").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.Add(a, b, y, "sim:1/compute").ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 0);
  EXPECT_EQ(delta.record_events, 1);
  EXPECT_EQ(delta.instructions, 2);
  ExpectAll(h_.Read(y).value(), 4.0f, kN);
  ExpectCleanChecker();
}

// One blob as both inputs and the output of one op counts once.
TEST_F(SoftSyncTest, BlobUsedAsSeveralOperandsGetsOneSync) {
  BlobRef x = h_.NewF32("cpu", kN, "x");
  ASSERT_TRUE(h_.Fill(x, 4.0, "cpu").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.Add(x, x, x, "sim:0/compute").ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 0);
  EXPECT_EQ(delta.record_events, 1);
  EXPECT_EQ(delta.instructions, 2);
  ExpectAll(h_.Read(x).value(), 8.0f, kN);
  ExpectCleanChecker();
}

// Inputs last used on two different streams: one sync for each, of the kind each pair needs.
TEST_F(SoftSyncTest, OperandsFromTwoLastStreamsGetTwoSyncs) {
  BlobRef a = h_.NewF32("sim:0/h2d", kN, "a"), b = h_.NewF32("sim:1/compute", kN, "b");
  BlobRef y = h_.NewF32("sim:0/compute", kN, "y");
  ASSERT_TRUE(h_.Fill(a, 1.0, "sim:0/h2d").ok());
  ASSERT_TRUE(h_.Fill(b, 10.0, "sim:1/compute").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.Add(a, b, y, "sim:0/compute").ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 1);   // sim:0/h2d -> sim:0/compute
  EXPECT_EQ(delta.record_events, 1);  // sim:1/compute
  EXPECT_EQ(delta.instructions, 3);
  ExpectAll(h_.Read(y).value(), 11.0f, kN);
  ExpectCleanChecker();
}

// Two inputs and the output on three different last streams: three syncs. The output counts
// like an input (its previous users must be done before it is overwritten).
TEST_F(SoftSyncTest, InputsAndOutputFromThreeLastStreamsGetThreeSyncs) {
  BlobRef a = h_.NewF32("cpu", kN, "a"), b = h_.NewF32("sim:1/compute", kN, "b");
  BlobRef y = h_.NewF32("sim:0/d2h", kN, "y");
  ASSERT_TRUE(h_.Fill(a, 2.0, "cpu").ok());
  ASSERT_TRUE(h_.Fill(b, 3.0, "sim:1/compute").ok());
  ASSERT_TRUE(h_.Fill(y, -1.0, "sim:0/d2h").ok());
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.builder->Call(h_.K("mul"), {a, b}, {y}, AttrMap(), h_.S("sim:0/compute")).ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 1);   // y: sim:0/d2h -> sim:0/compute
  EXPECT_EQ(delta.record_events, 2);  // a on cpu, b on sim:1
  EXPECT_EQ(delta.instructions, 4);
  ExpectAll(h_.Read(y).value(), 6.0f, kN);
  ExpectCleanChecker();
}

// A fresh blob's last use is the stream it was allocated on (its memory is ordered there), so
// writing it on another stream of the device needs a StreamWait.
TEST_F(SoftSyncTest, AllocationStreamCountsAsLastUse) {
  BlobRef y = h_.NewF32("sim:0/compute", kN, "y");
  const VmStats before = h_.vm->stats();
  ASSERT_TRUE(h_.Fill(y, 5.0, "sim:0/h2d").ok());
  const SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 1);
  EXPECT_EQ(delta.record_events, 0);
  EXPECT_EQ(delta.instructions, 2);
  ExpectAll(h_.Read(y).value(), 5.0f, kN);
  ExpectCleanChecker();
}

// After the first use on a stream, further uses there add nothing; moving back to the
// producer's stream syncs again, once.
TEST_F(SoftSyncTest, RepeatedUseOnTheSameStreamAddsNoSync) {
  BlobRef x = h_.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h_.NewF32("sim:1/compute", kN, "y");
  ASSERT_TRUE(h_.Fill(x, 1.0, "sim:0/compute").ok());
  VmStats before = h_.vm->stats();
  ASSERT_TRUE(Scale(h_, x, y, 1.0, 0.0, "sim:1/compute").ok());
  SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.record_events, 1);
  EXPECT_EQ(delta.stream_waits, 0);

  constexpr int kUses = 20;
  before = h_.vm->stats();
  for (int i = 0; i < kUses; ++i) ASSERT_TRUE(h_.Add(x, y, y, "sim:1/compute").ok());
  delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.record_events, 0);
  EXPECT_EQ(delta.stream_waits, 0);
  EXPECT_EQ(delta.instructions, kUses);

  // x's last use is now sim:1/compute: writing it on sim:0 again needs one RecordEvent.
  before = h_.vm->stats();
  ASSERT_TRUE(h_.Fill(x, 2.0, "sim:0/compute").ok());
  ASSERT_TRUE(h_.Fill(x, 3.0, "sim:0/compute").ok());
  delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.record_events, 1);
  EXPECT_EQ(delta.stream_waits, 0);
  EXPECT_EQ(delta.instructions, 3);

  ExpectAll(h_.Read(y).value(), 1.0f + kUses, kN);
  ExpectAll(h_.Read(x).value(), 3.0f, kN);
  ExpectCleanChecker();
}

// --- Events. ---

struct PingPongParam {
  const char* a;
  const char* b;
  ExpectedSync sync;
  // Bound on events created, with the reason it holds.
  int64_t max_events_created;
};

void PrintTo(const PingPongParam& p, std::ostream* os) { *os << p.a << " <-> " << p.b; }

// One blob bounces between two streams, each hop a sync. A RecordEvent keeps its event
// until it retires, and the next op (which must wait for that retirement, a completion edge)
// is dispatched only after it, so at most one event of the chain is borrowed at a time;
// each device has its own pool, so at most one is created per device: 2. A StreamWait
// returns its event as soon as the wait is enqueued, on the one sim worker: 1.
class SoftSyncEventPoolTest : public ::testing::TestWithParam<PingPongParam> {};

TEST_P(SoftSyncEventPoolTest, EventsAreReusedAcrossManySyncs) {
  const PingPongParam& p = GetParam();
  VmHarness h(CheckedOptions(VmOptions::Scheduling::kDedicatedThread));
  BlobRef x = h.NewF32(p.a, kN, "x");
  ASSERT_TRUE(h.Fill(x, 0.0, p.a).ok());
  constexpr int kHops = 200;
  for (int i = 0; i < kHops; ++i) {
    ASSERT_TRUE(Scale(h, x, x, 1.0, 1.0, i % 2 == 0 ? p.b : p.a).ok());
  }
  ExpectAll(h.Read(x).value(), static_cast<float>(kHops), kN);
  ASSERT_TRUE(h.vm->Sync().ok());

  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.stream_waits, p.sync == ExpectedSync::kStreamWait ? kHops : 0);
  EXPECT_EQ(stats.record_events, p.sync == ExpectedSync::kRecordEvent ? kHops : 0);
  EXPECT_EQ(stats.events_created + stats.events_reused, kHops) << stats.ToString();
  EXPECT_GE(stats.events_created, 1) << stats.ToString();
  EXPECT_LE(stats.events_created, p.max_events_created) << stats.ToString();
  EXPECT_GT(stats.events_reused, 0) << stats.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << CheckerReport(*h.vm);
}

INSTANTIATE_TEST_SUITE_P(
    PingPong, SoftSyncEventPoolTest,
    ::testing::Values(PingPongParam{"sim:0/compute", "sim:1/compute", ExpectedSync::kRecordEvent,
                                    2},
                      PingPongParam{"cpu", "sim:0/compute", ExpectedSync::kRecordEvent, 2},
                      PingPongParam{"sim:0/compute", "sim:0/h2d", ExpectedSync::kStreamWait, 1}),
    [](const ::testing::TestParamInfo<PingPongParam>& info) {
      return absl::StrCat(Identifier(info.param.a), "_and_", Identifier(info.param.b));
    });

// Completion is known without an event per instruction: a long chain on one stream borrows
// no event at all, on an asynchronous stream as on cpu.
TEST_F(SoftSyncTest, SameStreamChainCreatesNoEvents) {
  for (const char* stream : {"sim:0/compute", "cpu"}) {
    SCOPED_TRACE(stream);
    BlobRef x = h_.NewF32(stream, kN, "x");
    const VmStats before = h_.vm->stats();
    ASSERT_TRUE(h_.Fill(x, 0.0, stream).ok());
    constexpr int kOps = 1000;
    for (int i = 0; i < kOps; ++i) ASSERT_TRUE(Scale(h_, x, x, 1.0, 1.0, stream).ok());
    const SyncDelta delta = Delta(before, h_.vm->stats());
    EXPECT_EQ(delta.instructions, kOps + 1);
    EXPECT_EQ(delta.stream_waits, 0);
    EXPECT_EQ(delta.record_events, 0);
    ExpectAll(h_.Read(x).value(), static_cast<float>(kOps), kN);
    ASSERT_TRUE(h_.vm->Sync().ok());
    const VmStats after = h_.vm->stats();
    EXPECT_EQ(after.events_created, 0) << after.ToString();
    EXPECT_EQ(after.events_reused, 0) << after.ToString();
  }
  ExpectCleanChecker();
}

// --- Soft sync off. ---

// With soft sync off a chain that changes stream at every op emits no sync instruction and
// borrows no event, and the checker sees the unordered accesses that result. Switched back
// on, the same chain gets one sync per change of stream. The ops are no-ops, so the
// unordered run races on no memory.
TEST_F(SoftSyncTest, SoftSyncOffEmitsNoSyncs) {
  const std::vector<const char*> streams = {"sim:0/compute", "sim:0/h2d", "sim:1/compute",
                                            "cpu",           "sim:1/d2h", "sim:0/compute"};
  const OpKernel& noop = h_.K("noop");
  BlobRef x = h_.NewF32(streams.front(), kN, "x");

  h_.builder->set_soft_sync(false);
  EXPECT_FALSE(h_.builder->soft_sync());
  VmStats before = h_.vm->stats();
  for (const char* stream : streams) {
    ASSERT_TRUE(h_.builder->Call(noop, {x}, {x}, AttrMap(), h_.S(stream)).ok());
  }
  SyncDelta delta = Delta(before, h_.vm->stats());
  EXPECT_EQ(delta.stream_waits, 0);
  EXPECT_EQ(delta.record_events, 0);
  EXPECT_EQ(delta.op_calls, static_cast<int64_t>(streams.size()));
  EXPECT_EQ(delta.instructions, static_cast<int64_t>(streams.size()));
  ASSERT_TRUE(h_.vm->Sync().ok());
  const VmStats after = h_.vm->stats();
  EXPECT_EQ(after.events_created + after.events_reused, 0) << after.ToString();
  EXPECT_GT(h_.vm->sync_checker()->violation_count(), 0);

  // x's last use is sim:0/compute (the last op above): the chain now syncs at each change.
  h_.builder->set_soft_sync(true);
  before = h_.vm->stats();
  for (const char* stream : streams) {
    ASSERT_TRUE(h_.builder->Call(noop, {x}, {x}, AttrMap(), h_.S(stream)).ok());
  }
  delta = Delta(before, h_.vm->stats());
  // compute (none), h2d (wait), sim:1 (record), cpu (record), sim:1/d2h (record),
  // sim:0/compute (record).
  EXPECT_EQ(delta.stream_waits, 1);
  EXPECT_EQ(delta.record_events, 4);
  EXPECT_EQ(delta.instructions, static_cast<int64_t>(streams.size()) + 5);
  ASSERT_TRUE(h_.vm->Sync().ok());
}

}  // namespace
}  // namespace sluice::vm::soft_sync_test
