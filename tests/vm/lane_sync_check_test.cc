// The sync checker inside lane sequences (StepSequence with cross-sequence waits, one per cpu
// stream, each stream with a worker of its own, the enclosing instructions listing no
// operands): each step is checked as it launches and a wait that passed orders the steps
// after it. Proven here: correct waits give no violation; the same pair with its wait
// dropped is reported, naming the blob and both steps (so the check can fail); a host read
// after Sync is ordered after every step; random lane programs over 2-3 streams with waits
// derived from their conflicts are clean, and removing a wait that was the only ordering of
// a conflict is reported, with and without a busy core beside them. Sequences that list their
// operands (outside lane mode) are judged by step too: an engine edge carries the writer's clock
// after its last step, and a missing edge is reported naming the step. Also the VM's capability
// queries. Both scheduling modes.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/busy_core.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/step_sequence.h"
#include "vm/sync_checker.h"

namespace sluice::vm::lane_sync_check_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using ::testing::HasSubstr;
using testing::LogKernel;
using testing::OrderLog;
using testing::Shared;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;

constexpr const char* kCpu[] = {"cpu", "cpu/compute:1", "cpu/compute:2"};

VmOptions Checked(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  return options;
}

// Declares its operands and touches no memory: the checker judges declared accesses, so a
// program missing a wait shows it without racing on real bytes.
class DeclareKernel final : public OpKernel {
 public:
  absl::string_view name() const override { return "declare"; }
  absl::Status Launch(KernelContext&) const override { return absl::OkStatus(); }
};

std::string Violations(const SyncChecker& checker) {
  std::string text;
  for (const SyncViolation& v : checker.violations()) absl::StrAppend(&text, v.ToString(), "\n");
  return text;
}

class LaneSyncCheckTest : public ::testing::TestWithParam<Scheduling> {
 protected:
  LaneSyncCheckTest() : h_(Checked(GetParam())) {
    a_.set_run_counter(&run_);
    b_.set_run_counter(&run_);
  }
  ~LaneSyncCheckTest() override { gate_.Open(); }

  BlobRef Written(float value, const std::string& name) {
    BlobRef blob = h_.NewF32(kCpu[0], 4, name);
    EXPECT_TRUE(h_.Write(blob, std::vector<float>(4, value)).ok());
    EXPECT_TRUE(h_.vm->Sync().ok());
    return blob;
  }
  // b_ on cpu/compute:1, a_ on cpu, in one batch with no edges and no operands.
  absl::Status SubmitRun() {
    run_.fetch_add(1, std::memory_order_relaxed);
    PrecomputedBatch batch;
    batch.AddOpCall(b_, {}, {}, nullptr, h_.S(kCpu[1]));
    batch.AddOpCall(a_, {}, {}, nullptr, h_.S(kCpu[0]));
    return batch.Submit(h_.vm.get());
  }
  // b_ holds its worker at the gate, then B writes 2 into x; a_ runs A0, then (with
  // `wait`) waits for B, then C reads x. The gate comes before B is launched, so without
  // the wait C is launched (and checked) first.
  void BuildGatedPair(bool wait) {
    x_ = Written(1, "x");
    b_.AddCall(gated_, {}, {}, Shared(Tag("hold")));
    b_.AddCall(producer_, {}, {x_.get()}, Shared(Tag("B", 2)));
    a_.AddCall(consumer_, {}, {}, Shared(Tag("A0")));
    if (wait) a_.AddWait(&b_, 2);
    a_.AddCall(consumer_, {x_.get()}, {}, Shared(Tag("C")));
  }

  Gate gate_;
  OrderLog log_;
  GateKernel gated_{&gate_, &log_, "hold"};
  LogKernel producer_{&log_, "produce"};
  LogKernel consumer_{&log_, "consume"};
  std::atomic<uint32_t> run_{0};
  StepSequence a_;
  StepSequence b_;
  VmHarness h_;
  BlobRef x_;
};

TEST_P(LaneSyncCheckTest, CorrectWaitsAreClean) {
  BuildGatedPair(/*wait=*/true);
  for (int run = 0; run < 3; ++run) {
    SLUICE_ASSERT_OK(SubmitRun());
    gate_.Open();
    SLUICE_ASSERT_OK(h_.vm->Sync());
  }
  EXPECT_TRUE(log_.Contains("C:saw=2")) << log_.ToString();
  // Read after the Sync: ordered after every step through the Barrier, although the lane
  // instructions list no operands.
  absl::StatusOr<std::vector<float>> got = h_.Read(x_);
  SLUICE_ASSERT_OK(got);
  EXPECT_EQ(*got, std::vector<float>(4, 2.0f));
  EXPECT_EQ(h_.vm->sync_checker()->violation_count(), 0) << Violations(*h_.vm->sync_checker());
}

TEST_P(LaneSyncCheckTest, DroppedWaitIsReportedWithTheBlob) {
  BuildGatedPair(/*wait=*/false);
  SLUICE_ASSERT_OK(SubmitRun());
  // Without the wait C reads x while b_ is held before B: the read comes first, and B's
  // write is then not ordered after it (nor would it be in any order the run could take).
  ASSERT_TRUE(log_.WaitFor("C:end")) << log_.ToString();
  EXPECT_EQ(log_.IndexOf("B:launch"), -1) << log_.ToString();
  gate_.Open();
  SLUICE_ASSERT_OK(h_.vm->Sync());
  const SyncChecker& checker = *h_.vm->sync_checker();
  ASSERT_GE(checker.violation_count(), 1);
  const SyncViolation v = checker.violations().front();
  EXPECT_THAT(v.blob, HasSubstr("'x'"));
  EXPECT_THAT(v.first, HasSubstr("op 'consume'"));
  EXPECT_THAT(v.first, HasSubstr("on cpu/compute (read)"));
  EXPECT_THAT(v.second, HasSubstr("op 'produce'"));
  EXPECT_THAT(v.second, HasSubstr("on cpu/compute:1 (write)"));
  EXPECT_THAT(std::string(checker.status().message()), HasSubstr("blob"));
}

// A random lane program: ops in one global order, each on a random lane, reading one or two
// random blobs and writing one. Waits are derived from the conflicts (read after write,
// write after read, write after write) as the interpreter derives them from its edges: a
// conflict already ordered through earlier waits adds none.
struct LaneProgram {
  struct Op {
    int lane;
    std::vector<int> reads;
    int write;
  };
  struct Wait {
    int lane;
    int before_step;  // in its lane
    int source;       // lane
    int steps;
  };
  int lanes = 0;
  int blobs = 0;
  std::vector<Op> ops;
  std::vector<Wait> waits;

  // Per op: its lane step and its clock (steps of each lane it is ordered after,
  // including itself), given `waits` minus the one numbered `skip`.
  std::vector<std::vector<int>> Clocks(int skip = -1) const {
    std::vector<std::vector<int>> clock(ops.size(), std::vector<int>(lanes, 0));
    std::vector<std::vector<int>> lane_ops(lanes);  // op indices per lane
    for (size_t o = 0; o < ops.size(); ++o) {
      const int lane = ops[o].lane;
      const int step = static_cast<int>(lane_ops[lane].size());
      if (step > 0) clock[o] = clock[lane_ops[lane].back()];
      for (size_t w = 0; w < waits.size(); ++w) {
        const Wait& wait = waits[w];
        if (static_cast<int>(w) == skip || wait.lane != lane || wait.before_step != step) continue;
        const std::vector<int>& from = clock[lane_ops[wait.source][wait.steps - 1]];
        for (int l = 0; l < lanes; ++l) clock[o][l] = std::max(clock[o][l], from[l]);
      }
      clock[o][lane] = step + 1;
      lane_ops[lane].push_back(static_cast<int>(o));
    }
    return clock;
  }
  // Conflicting pairs (earlier, later) on different lanes, with the blob.
  std::vector<std::pair<std::pair<int, int>, int>> Conflicts() const {
    std::vector<std::pair<std::pair<int, int>, int>> pairs;
    for (size_t j = 0; j < ops.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (ops[i].lane == ops[j].lane) continue;
        const Op& a = ops[i];
        const Op& b = ops[j];
        auto reads = [](const Op& op, int blob) {
          return std::find(op.reads.begin(), op.reads.end(), blob) != op.reads.end();
        };
        int blob = -1;
        if (reads(b, a.write) || a.write == b.write) blob = a.write;
        if (reads(a, b.write)) blob = b.write;
        if (blob >= 0) pairs.push_back({{static_cast<int>(i), static_cast<int>(j)}, blob});
      }
    }
    return pairs;
  }
  // Blobs of conflicts left unordered without wait `skip` (none: all ordered).
  std::set<int> Unordered(int skip = -1) const {
    const std::vector<std::vector<int>> clock = Clocks(skip);
    std::set<int> blobs_left;
    for (const auto& [pair, blob] : Conflicts()) {
      const auto [i, j] = pair;
      if (clock[j][ops[i].lane] < clock[i][ops[i].lane]) blobs_left.insert(blob);
    }
    return blobs_left;
  }

  static LaneProgram Random(std::mt19937& rng) {
    LaneProgram p;
    p.lanes = std::uniform_int_distribution<int>(2, 3)(rng);
    p.blobs = std::uniform_int_distribution<int>(2, 5)(rng);
    const int n = std::uniform_int_distribution<int>(4, 14)(rng);
    std::uniform_int_distribution<int> lane(0, p.lanes - 1);
    std::uniform_int_distribution<int> blob(0, p.blobs - 1);
    for (int o = 0; o < n; ++o) {
      Op op{lane(rng), {blob(rng)}, blob(rng)};
      if (rng() % 2 == 0) op.reads.push_back(blob(rng));
      p.ops.push_back(op);
      // Order it after each conflicting op of another lane not yet ordered before it.
      const std::vector<int> lane_step = [&] {
        std::vector<int> s(p.ops.size());
        std::vector<int> count(p.lanes, 0);
        for (size_t i = 0; i < p.ops.size(); ++i) s[i] = count[p.ops[i].lane]++;
        return s;
      }();
      for (const auto& [pair, b] : p.Conflicts()) {
        const auto [i, j] = pair;
        if (j != o) continue;
        const std::vector<std::vector<int>> clock = p.Clocks();
        if (clock[j][p.ops[i].lane] >= lane_step[i] + 1) continue;
        p.waits.push_back({op.lane, lane_step[j], p.ops[i].lane, lane_step[i] + 1});
      }
    }
    return p;
  }
};

TEST_P(LaneSyncCheckTest, RandomLaneProgramsWithDerivedWaitsAreCleanAndMissingOnesReported) {
  std::mt19937 rng(20261125);
  DeclareKernel declare;
  int reported_programs = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const LaneProgram program = LaneProgram::Random(rng);
    ASSERT_TRUE(program.Unordered().empty()) << "trial " << trial;
    // A wait whose removal leaves a conflict unordered (-1: run the full program only).
    std::vector<int> essential;
    for (size_t w = 0; w < program.waits.size(); ++w) {
      if (!program.Unordered(static_cast<int>(w)).empty()) essential.push_back(w);
    }
    const int dropped =
        essential.empty() ? -1 : essential[rng() % static_cast<uint32_t>(essential.size())];
    std::vector<int> runs = {-1};
    if (dropped >= 0) runs.push_back(dropped);
    // Every other trial runs beside a busy core (workers preempted mid-lane, waits that
    // park and wake late): the verdicts must not change.
    std::optional<::sluice::testing::BusyCore> load;
    if (trial % 2 == 1) load.emplace();
    for (const int skip : runs) {
      VmHarness h(Checked(GetParam()));
      std::vector<BlobRef> blobs;
      for (int b = 0; b < program.blobs; ++b) {
        blobs.push_back(h.NewF32(kCpu[0], 4, absl::StrCat("t", b)));
        SLUICE_ASSERT_OK(h.Write(blobs.back(), std::vector<float>(4, 0)));
      }
      SLUICE_ASSERT_OK(h.vm->Sync());
      std::atomic<uint32_t> run{1};
      std::vector<std::unique_ptr<StepSequence>> lanes;
      for (int l = 0; l < program.lanes; ++l) {
        lanes.push_back(std::make_unique<StepSequence>());
        lanes.back()->set_run_counter(&run);
      }
      std::vector<int> step(program.lanes, 0);
      for (const LaneProgram::Op& op : program.ops) {
        for (size_t w = 0; w < program.waits.size(); ++w) {
          const LaneProgram::Wait& wait = program.waits[w];
          if (static_cast<int>(w) == skip || wait.lane != op.lane ||
              wait.before_step != step[op.lane]) {
            continue;
          }
          lanes[op.lane]->AddWait(lanes[wait.source].get(), wait.steps);
        }
        BlobPtrs reads;
        for (int b : op.reads) reads.push_back(blobs[b].get());
        lanes[op.lane]->AddCall(declare, std::move(reads), {blobs[op.write].get()}, nullptr);
        ++step[op.lane];
      }
      PrecomputedBatch batch;
      for (int l = program.lanes - 1; l >= 0; --l) {
        if (lanes[l]->size() > 0) batch.AddOpCall(*lanes[l], {}, {}, nullptr, h.S(kCpu[l]));
      }
      SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
      SLUICE_ASSERT_OK(h.vm->Sync());
      const SyncChecker& checker = *h.vm->sync_checker();
      if (skip == -1) {
        EXPECT_EQ(checker.violation_count(), 0) << "trial " << trial << "\n" << Violations(checker);
        continue;
      }
      ++reported_programs;
      ASSERT_GE(checker.violation_count(), 1) << "trial " << trial << " without wait " << skip;
      std::vector<std::string> names;
      for (int b : program.Unordered(skip)) names.push_back(absl::StrCat("'t", b, "'"));
      bool named = false;
      for (const SyncViolation& v : checker.violations()) {
        for (const std::string& name : names)
          named = named || v.blob.find(name) != std::string::npos;
      }
      EXPECT_TRUE(named) << "trial " << trial << "\n" << Violations(checker);
    }
  }
  // The generator must exercise the failing side, not only the clean one.
  EXPECT_GE(reported_programs, 10);
}

TEST_P(LaneSyncCheckTest, SequencesListingOperandsAreCheckedByStep) {
  // Outside lane mode a sequence's instruction lists its steps' operands and engine edges
  // order the sequences; the checker still judges the steps. With the edge: clean (the
  // edge carries the writer's clock after its last step). Without it: the step is named.
  DeclareKernel declare;
  for (const bool edge : {true, false}) {
    VmHarness h(Checked(GetParam()));
    BlobRef x = h.NewF32(kCpu[0], 4, "x");
    BlobRef y = h.NewF32(kCpu[0], 4, "y");
    SLUICE_ASSERT_OK(h.Write(x, std::vector<float>(4, 0)));
    SLUICE_ASSERT_OK(h.Write(y, std::vector<float>(4, 0)));
    SLUICE_ASSERT_OK(h.vm->Sync());
    StepSequence writer;
    StepSequence reader;
    writer.AddCall(declare, {y.get()}, {x.get()}, nullptr);
    writer.AddCall(declare, {}, {y.get()}, nullptr);
    reader.AddCall(declare, {x.get()}, {y.get()}, nullptr);
    PrecomputedBatch batch;
    const int w = batch.AddOpCall(writer, {y}, {x, y}, nullptr, h.S(kCpu[0]));
    const int r = batch.AddOpCall(reader, {x}, {y}, nullptr, h.S(kCpu[1]));
    if (edge) SLUICE_ASSERT_OK(batch.AddEdge(w, r));
    SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
    SLUICE_ASSERT_OK(h.vm->Sync());
    const SyncChecker& checker = *h.vm->sync_checker();
    if (edge) {
      EXPECT_EQ(checker.violation_count(), 0) << Violations(checker);
      continue;
    }
    ASSERT_GE(checker.violation_count(), 1);
    const std::string text = Violations(checker);
    EXPECT_THAT(text, HasSubstr("'x'"));
    EXPECT_THAT(text, HasSubstr("op 'declare'"));
    EXPECT_THAT(text, ::testing::Not(HasSubstr("step_sequence"))) << text;
  }
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(LaneSyncCheckTest);

TEST(VmCapabilityTest, WorkersHostStreamsAndObservers) {
  VmHarness h;
  std::vector<Stream*> two_cpu = {h.S("cpu"), h.S("cpu/compute:1")};
  EXPECT_TRUE(h.vm->HasOwnWorkers(two_cpu));
  EXPECT_TRUE(h.vm->CanRunLanes(two_cpu));
  std::vector<Stream*> twice = {h.S("cpu"), h.S("cpu")};
  EXPECT_FALSE(h.vm->HasOwnWorkers(twice));
  EXPECT_FALSE(h.vm->CanRunLanes(twice));
  // One worker serves every stream of a sim device; sim streams do not run on the host.
  std::vector<Stream*> sim = {h.S("sim:0"), h.S("sim:0/compute:1")};
  EXPECT_FALSE(h.vm->HasOwnWorkers(sim));
  EXPECT_TRUE(VirtualMachine::RunsOnHost(*h.S("cpu")));
  EXPECT_FALSE(VirtualMachine::RunsOnHost(*h.S("sim:0")));
  std::vector<Stream*> mixed = {h.S("cpu"), h.S("sim:0")};
  EXPECT_TRUE(h.vm->HasOwnWorkers(mixed));
  EXPECT_FALSE(h.vm->CanRunLanes(mixed));
  EXPECT_FALSE(h.vm->ObservesSteps());

  VmOptions checked;
  checked.check_sync = true;
  EXPECT_TRUE(VmHarness(checked).vm->ObservesSteps());
  VmOptions recorded;
  recorded.record_path = absl::StrCat(::testing::TempDir(), "/lane_capability.rec");
  EXPECT_TRUE(VmHarness(recorded).vm->ObservesSteps());
}

}  // namespace
}  // namespace sluice::vm::lane_sync_check_test
