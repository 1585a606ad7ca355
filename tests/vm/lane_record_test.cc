// Recording and replaying lane sequences (StepSequences with cross-sequence waits on cpu
// streams of their own workers, enclosing instructions listing no operands). Proven here:
// the record (format 2) carries each wait as `waits=SEQ:STEPS` on the step after it, with
// the lines ordered so that every wait points backward; a replay rebuilds the lanes with
// their waits and, with the sync checker on, is clean and reproduces the checksums; so does
// a replay of the steps as instructions with the waits turned into edges; a record whose
// waits were removed is reported by the checker (the waits are what orders the lanes);
// malformed waits name their line.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/read_file.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/record_reader.h"
#include "vm/recorder.h"
#include "vm/replayer.h"
#include "vm/step_sequence.h"
#include "vm/sync_checker.h"

namespace sluice::vm::lane_record_test {
namespace {

using ::sluice::testing::ReadFile;
using ::testing::HasSubstr;
using testing::VmHarness;

// Declares its operands and touches no memory (for replays whose order is broken on
// purpose: the checker judges declared accesses, no bytes race).
class DeclareKernel final : public OpKernel {
 public:
  absl::string_view name() const override { return "declare"; }
  absl::Status Launch(KernelContext&) const override { return absl::OkStatus(); }
};

// Records two runs of a ping-pong between two lanes: lane B (cpu/compute:1) computes
// y = x + 1 and then, after A's first write, w = z + y; lane A (cpu) first computes z = 1 + 1
// (no wait), then waits for B's first step and computes z = z + y, then waits for B's
// second step and computes x = w + z. Each lane waits for the other, so a record in
// submission order (B's steps, then A's) would have B wait for a line written after it.
std::string RecordLanes(const std::string& name) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/lane_record_", name, ".rec");
  VmOptions options;
  options.record_path = path;
  options.check_sync = true;
  std::atomic<uint32_t> run{0};
  StepSequence a;
  StepSequence b;
  a.set_run_counter(&run);
  b.set_run_counter(&run);
  VmHarness h(options);
  BlobRef one = h.NewF32("cpu", 8, "one");
  BlobRef x = h.NewF32("cpu", 8, "x");
  BlobRef y = h.NewF32("cpu", 8, "y");
  BlobRef z = h.NewF32("cpu", 8, "z");
  BlobRef w = h.NewF32("cpu", 8, "w");
  EXPECT_TRUE(h.Write(one, std::vector<float>(8, 1)).ok());
  EXPECT_TRUE(h.Write(x, std::vector<float>(8, 3)).ok());
  EXPECT_TRUE(h.vm->Sync().ok());
  const OpKernel& add = h.K("add");
  b.AddCall(add, {x.get(), one.get()}, {y.get()}, nullptr);
  a.AddCall(add, {one.get(), one.get()}, {z.get()}, nullptr);
  a.AddWait(&b, 1);
  a.AddCall(add, {z.get(), y.get()}, {z.get()}, nullptr);
  b.AddWait(&a, 2);
  b.AddCall(add, {z.get(), y.get()}, {w.get()}, nullptr);
  a.AddWait(&b, 2);
  a.AddCall(add, {w.get(), z.get()}, {x.get()}, nullptr);
  PrecomputedBatch batch;
  batch.AddOpCall(b, {}, {}, nullptr, h.S("cpu/compute:1"));
  batch.AddOpCall(a, {}, {}, nullptr, h.S("cpu"));
  for (int r = 0; r < 2; ++r) {
    run.fetch_add(1, std::memory_order_relaxed);
    EXPECT_TRUE(batch.Submit(h.vm.get()).ok());
    EXPECT_TRUE(h.vm->Sync().ok());
  }
  // Run 1: y = 4, z = 2 + 4 = 6, w = 10, x = 16. Run 2: y = 17, z = 19, w = 36, x = 55.
  absl::StatusOr<std::vector<float>> got = h.Read(x);
  EXPECT_TRUE(got.ok());
  if (got.ok()) {
    EXPECT_EQ(*got, std::vector<float>(8, 55.0f));
  }
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0);
  EXPECT_TRUE(h.vm->Shutdown().ok());
  return path;
}

struct Replayed {
  absl::StatusOr<ReplayResult> result;
  int64_t violations = -1;
  std::string first_violation;
};

Replayed Replay(const RecordedProgram& program, ReplayOptions options, bool declare_only) {
  VmOptions vm_options;
  vm_options.check_sync = true;
  VmHarness h(vm_options);
  DeclareKernel declare;
  KernelLookup lookup = [&](absl::string_view op, const StreamKey&,
                            DataType) -> absl::StatusOr<const OpKernel*> {
    if (declare_only) return &declare;
    return h.kernels.Find(op);
  };
  Replayed out;
  absl::StatusOr<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(h.vm.get(), &program, lookup, std::move(options));
  if (!replayer.ok()) {
    out.result = replayer.status();
    return out;
  }
  out.result = (*replayer)->Run(/*verify=*/!declare_only);
  out.violations = h.vm->sync_checker()->violation_count();
  if (out.violations > 0) out.first_violation = h.vm->sync_checker()->violations()[0].ToString();
  return out;
}

TEST(LaneRecordTest, RecordCarriesTheWaitsInAnOrderWherePointsBackward) {
  const std::string text = ReadFile(RecordLanes("format"));
  EXPECT_THAT(text, ::testing::StartsWith(
                        absl::StrCat("sluice-instructions ", Recorder::kFormatVersion, "\n")));
  // The batch: A0 (no wait) may come first or after B0, but B's second step follows A's
  // second, which follows B's first.
  std::vector<std::string> batch;
  bool in_batch = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "batch ")) {
      if (!batch.empty()) break;  // the first run's batch only
      in_batch = true;
      continue;
    }
    if (in_batch && absl::StartsWith(line, "op ")) batch.emplace_back(line);
  }
  ASSERT_EQ(batch.size(), 5u) << text;
  int waits = 0;
  for (const std::string& line : batch) waits += line.find(" waits=") != std::string::npos;
  EXPECT_EQ(waits, 3) << text;
  absl::StatusOr<RecordedProgram> program = ParseRecord(text, "lanes");
  ASSERT_TRUE(program.ok()) << program.status();
  int parsed_waits = 0;
  for (const RecordedInstruction& r : program->instructions) {
    for (const RecordedInstruction::Wait& wait : r.waits) {
      ++parsed_waits;
      EXPECT_GT(wait.steps, 0);
      EXPECT_NE(wait.source_seq, r.seq);
    }
  }
  EXPECT_EQ(parsed_waits, 6);  // two runs
}

TEST(LaneRecordTest, ReplayRebuildsTheLanesCleanAndMatching) {
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(RecordLanes("replay"));
  ASSERT_TRUE(program.ok()) << program.status();
  for (const bool rebuild : {true, false}) {
    ReplayOptions options;
    options.rebuild_lanes = rebuild;
    Replayed replayed = Replay(*program, options, /*declare_only=*/false);
    ASSERT_TRUE(replayed.result.ok()) << replayed.result.status();
    const ReplayResult& result = *replayed.result;
    SLUICE_EXPECT_OK(result.op_error);
    EXPECT_EQ(result.lane_sequences, rebuild ? 4 : 0);  // two lanes, two runs
    EXPECT_GE(result.checksums_compared, 5);
    EXPECT_TRUE(result.mismatches.empty()) << "rebuild " << rebuild;
    EXPECT_EQ(replayed.violations, 0) << "rebuild " << rebuild << ": " << replayed.first_violation;
  }
}

TEST(LaneRecordTest, ReplayOnSimOrdersTheStepsWithDeviceWaits) {
  // sim streams cannot run lanes (their work does not run on the worker): each step is an
  // instruction and each wait a StreamWait between the two sim streams. An engine edge
  // alone would order only the launches, and the checker would say so.
  absl::StatusOr<RecordedProgram> program = ReadRecordFile(RecordLanes("sim"));
  ASSERT_TRUE(program.ok()) << program.status();
  ReplayOptions options;
  SLUICE_ASSERT_OK(AddDeviceMapping("cpu=sim:0", &options.device_map));
  Replayed replayed = Replay(*program, options, /*declare_only=*/false);
  ASSERT_TRUE(replayed.result.ok()) << replayed.result.status();
  SLUICE_EXPECT_OK(replayed.result->op_error);
  EXPECT_EQ(replayed.result->lane_sequences, 0);
  EXPECT_GE(replayed.result->checksums_compared, 5);
  EXPECT_TRUE(replayed.result->mismatches.empty());
  EXPECT_EQ(replayed.violations, 0) << replayed.first_violation;
}

TEST(LaneRecordTest, WithoutItsWaitsTheReplayIsReported) {
  // The control for the test above: the same record with every `waits=` removed orders
  // nothing between the lanes, and the checker says so. Declared accesses only.
  std::string text = ReadFile(RecordLanes("nowaits"));
  std::string stripped;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields;
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      if (!absl::StartsWith(field, "waits=")) fields.emplace_back(field);
    }
    absl::StrAppend(&stripped, absl::StrJoin(fields, " "), "\n");
  }
  ASSERT_NE(stripped, text);
  for (const bool with_waits : {true, false}) {
    absl::StatusOr<RecordedProgram> program = ParseRecord(with_waits ? text : stripped, "lanes");
    ASSERT_TRUE(program.ok()) << program.status();
    Replayed replayed = Replay(*program, ReplayOptions(), /*declare_only=*/true);
    ASSERT_TRUE(replayed.result.ok()) << replayed.result.status();
    EXPECT_EQ(replayed.result->lane_sequences, with_waits ? 4 : 0);
    if (with_waits) {
      EXPECT_EQ(replayed.violations, 0) << replayed.first_violation;
    } else {
      EXPECT_GE(replayed.violations, 1);
      EXPECT_THAT(replayed.first_violation, HasSubstr("blob #"));
    }
  }
}

TEST(LaneRecordTest, MalformedWaitsNameTheLine) {
  const std::string head =
      "sluice-instructions 2\n"
      "blob 1 cpu f32 4 cpu/compute x\n"
      "batch 2\n"
      "op 5 cpu/compute:1 fill in= out=1 after= attrs=\n";
  struct Case {
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"op 6 cpu/compute fill in= out=1 after= waits=5:2 attrs=\n",
       "r:5: wait for 2 step(s) of #5, which has 1"},
      {"op 6 cpu/compute fill in= out=1 after= waits=9:1 attrs=\n",
       "r:5: wait for 1 step(s) of #9, which has 0"},
      {"op 5 cpu/compute:1 fill in= out=1 after=0 waits=5:1 attrs=\n", "r:5: wait for 1"},
      {"op 6 cpu/compute fill in= out=1 after= waits=5 attrs=\n", "r:5: bad wait '5'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<RecordedProgram> program = ParseRecord(head + c.line + "end\n", "r");
    ASSERT_FALSE(program.ok()) << c.line;
    EXPECT_THAT(program.status().message(), HasSubstr(c.message)) << c.line;
  }
  // Version 1 has no waits: the field is not taken.
  std::string v1 = head + "op 6 cpu/compute fill in= out=1 after= waits=5:1 attrs=\nend\n";
  v1.replace(v1.find(" 2\n"), 3, " 1\n");
  absl::StatusOr<RecordedProgram> old = ParseRecord(v1, "r");
  ASSERT_FALSE(old.ok());
  EXPECT_THAT(old.status().message(), HasSubstr("expected 'attrs=...'"));
  // A well-formed wait.
  absl::StatusOr<RecordedProgram> good =
      ParseRecord(head + "op 6 cpu/compute fill in= out=1 after= waits=5:1 attrs=\nend\n", "r");
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->instructions[1].waits.size(), 1u);
  EXPECT_EQ(good->instructions[1].waits[0].source_seq, 5u);
  EXPECT_EQ(good->instructions[1].waits[0].steps, 1);
  EXPECT_EQ(good->instructions[1].waits[0].source_position, 0);
}

}  // namespace
}  // namespace sluice::vm::lane_record_test
