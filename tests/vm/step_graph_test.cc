// StepGraph (vm/step_graph.h): a team of host workers running one graph of tasks by
// dependence counting. Proven here:
//  - random graphs (fixed seeds) over 2 and 3 members, run several times each, with and
//    without a busy core beside them: every task runs once per run and starts after each of
//    its predecessors ended;
//  - a member that cannot start (its worker held by a gate) holds nothing up: the other
//    member runs every task, and the late one leaves at once;
//  - the sync checker sees the graph's edges: an edge that orders a write before a read is
//    clean and the reader sees the value; the same pair without the edge is reported, with
//    the blob (so the check can fail).
// Both scheduling modes.
#include "vm/step_graph.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/busy_core.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/sync_checker.h"

namespace sluice::vm::step_graph_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::LogKernel;
using testing::OrderLog;
using testing::Shared;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;

constexpr const char* kCpu[] = {"cpu", "cpu/compute:1", "cpu/compute:2"};

// Takes a ticket as it starts and as it ends (one counter for the whole run), and notes
// which stream ran it. Spins a few microseconds in between, so members overlap.
class TicketKernel final : public OpKernel {
 public:
  TicketKernel(std::atomic<int64_t>* clock, int64_t* start, int64_t* end, const ep::Stream** ran,
               int spin_us)
      : clock_(clock), start_(start), end_(end), ran_(ran), spin_us_(spin_us) {}
  absl::string_view name() const override { return "ticket"; }
  absl::Status Launch(KernelContext& ctx) const override {
    *start_ = clock_->fetch_add(1, std::memory_order_acq_rel);
    *ran_ = ctx.stream();
    const absl::Time until = absl::Now() + absl::Microseconds(spin_us_);
    while (absl::Now() < until) {
    }
    *end_ = clock_->fetch_add(1, std::memory_order_acq_rel);
    return absl::OkStatus();
  }

 private:
  std::atomic<int64_t>* const clock_;
  int64_t* const start_;
  int64_t* const end_;
  const ep::Stream** const ran_;
  const int spin_us_;
};

// A random graph of `n` tasks, each one TicketKernel call; task i depends on 0-3 of the 16
// tasks before it.
struct TicketGraph {
  TicketGraph(int n, uint64_t seed) : start(n), end(n), ran(n), preds(n) {
    std::mt19937_64 rng(seed);
    graph = std::make_unique<StepGraph>(&run);
    for (int i = 0; i < n; ++i) {
      const int window = std::min(i, 16);
      const int count = window == 0 ? 0 : static_cast<int>(rng() % 4);
      for (int k = 0; k < count; ++k) preds[i].push_back(i - 1 - static_cast<int>(rng() % window));
      kernels.push_back(std::make_unique<TicketKernel>(&clock, &start[i], &end[i], &ran[i],
                                                       static_cast<int>(rng() % 20)));
      auto task = std::make_unique<StepSequence>();
      task->set_run_counter(&run);
      task->AddCall(*kernels.back(), {}, {}, nullptr);
      task->Close();
      EXPECT_EQ(graph->AddTask(std::move(task), preds[i]), i);
    }
  }
  std::atomic<uint32_t> run{0};
  std::atomic<int64_t> clock{0};
  std::vector<int64_t> start, end;
  std::vector<const ep::Stream*> ran;
  std::vector<std::vector<int>> preds;
  std::vector<std::unique_ptr<TicketKernel>> kernels;
  std::unique_ptr<StepGraph> graph;
};

class StepGraphTest : public ::testing::TestWithParam<Scheduling> {
 protected:
  static VmOptions Options(bool check) {
    VmOptions options;
    options.scheduling = GetParam();
    options.check_sync = check;
    return options;
  }
  // One run of `graph`: a member per stream of kCpu[0..members), in one batch.
  static absl::Status SubmitRun(VmHarness& h, StepGraph& graph, std::atomic<uint32_t>& run,
                                int members) {
    run.fetch_add(1, std::memory_order_relaxed);
    PrecomputedBatch batch;
    for (int m = 0; m < members; ++m)
      batch.AddOpCall(graph.member(m), {}, {}, nullptr, h.S(kCpu[m]));
    return batch.Submit(h.vm.get());
  }
};

TEST_P(StepGraphTest, RandomGraphsRunEveryTaskAfterItsPredecessors) {
  for (bool loaded : {false, true}) {
    std::optional<sluice::testing::BusyCore> load;
    if (loaded) load.emplace();
    for (int members : {2, 3}) {
      for (uint64_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(absl::StrCat("loaded ", loaded, ", members ", members, ", seed ", seed));
        VmHarness h(Options(/*check=*/false));
        TicketGraph g(120, seed);
        g.graph->Close(members);
        for (int r = 0; r < 3; ++r) {
          std::fill(g.start.begin(), g.start.end(), -1);
          std::fill(g.end.begin(), g.end.end(), -1);
          SLUICE_ASSERT_OK(SubmitRun(h, *g.graph, g.run, members));
          SLUICE_ASSERT_OK(h.vm->Sync());
          for (size_t t = 0; t < g.start.size(); ++t) {
            ASSERT_GE(g.start[t], 0) << "task " << t << " did not run in run " << r;
            for (int p : g.preds[t]) {
              ASSERT_LT(g.end[p], g.start[t])
                  << "task " << t << " started before " << p << " ended";
            }
          }
        }
      }
    }
  }
}

TEST_P(StepGraphTest, AMemberThatCannotStartHoldsNothingUp) {
  VmHarness h(Options(/*check=*/false));
  TicketGraph g(60, 9);
  g.graph->Close(2);
  Gate gate;
  GateKernel held(&gate);
  std::fill(g.end.begin(), g.end.end(), -1);
  g.run.fetch_add(1, std::memory_order_relaxed);
  PrecomputedBatch batch;
  const int hold = batch.AddOpCall(held, {}, {}, nullptr, h.S(kCpu[1]));
  const int late = batch.AddOpCall(g.graph->member(1), {}, {}, nullptr, h.S(kCpu[1]));
  SLUICE_ASSERT_OK(batch.AddEdge(hold, late));
  batch.AddOpCall(g.graph->member(0), {}, {}, nullptr, h.S(kCpu[0]));
  SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
  // Member 0 finishes the whole graph while member 1's worker is still held.
  // (The tickets are plain memory: read them only once every task has been seen to end,
  // through the clock, which each task bumps after writing its slots.)
  ASSERT_TRUE(testing::WaitUntil([&] {
    return g.clock.load(std::memory_order_acquire) == 2 * static_cast<int64_t>(g.end.size());
  }));
  const ep::Stream* first = h.S(kCpu[0])->ep_stream();
  EXPECT_TRUE(
      std::all_of(g.ran.begin(), g.ran.end(), [&](const ep::Stream* s) { return s == first; }));
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
}

// Waits (up to the hang guard) until `log` holds `entry`, then does nothing.
class AwaitLogKernel final : public OpKernel {
 public:
  AwaitLogKernel(OrderLog* log, std::string entry) : log_(log), entry_(std::move(entry)) {}
  absl::string_view name() const override { return "await_log"; }
  absl::Status Launch(KernelContext&) const override {
    return log_->WaitFor(entry_) ? absl::OkStatus()
                                 : absl::DeadlineExceededError("never logged: " + entry_);
  }

 private:
  OrderLog* const log_;
  const std::string entry_;
};

// Task 0 holds its member at a gate, then writes 2 into x; task 1 waits until the gate
// holds a member, then reads x. With the edge the reader's task waits for the writer's;
// without it the other member reads while the first is held (never the same member: one
// member cannot be in both places).
std::string RunGatedPair(Scheduling scheduling, bool edge, OrderLog& log, int* violations) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  VmHarness h(options);
  BlobRef x = h.NewF32(kCpu[0], 4, "x");
  EXPECT_TRUE(h.Write(x, std::vector<float>(4, 1.0f)).ok());
  EXPECT_TRUE(h.vm->Sync().ok());
  Gate gate;
  GateKernel held(&gate, &log, "hold");
  LogKernel producer(&log, "produce");
  LogKernel consumer(&log, "consume");
  std::atomic<uint32_t> run{0};
  StepGraph graph(&run);
  auto writer = std::make_unique<StepSequence>();
  writer->set_run_counter(&run);
  writer->AddCall(held, {}, {}, Shared(Tag("hold")));
  writer->AddCall(producer, {}, {x.get()}, Shared(Tag("W", 2)));
  writer->Close();
  AwaitLogKernel held_somewhere(&log, "hold:start");
  auto reader = std::make_unique<StepSequence>();
  reader->set_run_counter(&run);
  reader->AddCall(held_somewhere, {}, {}, nullptr);
  reader->AddCall(consumer, {x.get()}, {}, Shared(Tag("R")));
  reader->Close();
  graph.AddTask(std::move(writer), {});
  std::vector<int> preds;
  if (edge) preds.push_back(0);
  graph.AddTask(std::move(reader), preds);
  graph.Close(2);
  run.fetch_add(1, std::memory_order_relaxed);
  PrecomputedBatch batch;
  batch.AddOpCall(graph.member(0), {}, {}, nullptr, h.S(kCpu[0]));
  batch.AddOpCall(graph.member(1), {}, {}, nullptr, h.S(kCpu[1]));
  EXPECT_TRUE(batch.Submit(h.vm.get()).ok());
  if (!edge) EXPECT_TRUE(log.WaitFor("R:end")) << log.ToString();
  gate.Open();
  EXPECT_TRUE(h.vm->Sync().ok());
  *violations = h.vm->sync_checker()->violation_count();
  std::string text;
  for (const SyncViolation& v : h.vm->sync_checker()->violations()) {
    absl::StrAppend(&text, v.ToString(), "\n");
  }
  return text;
}

TEST_P(StepGraphTest, TheCheckerSeesTheGraphsEdges) {
  OrderLog log;
  int violations = -1;
  const std::string text = RunGatedPair(GetParam(), /*edge=*/true, log, &violations);
  EXPECT_EQ(violations, 0) << text;
  EXPECT_TRUE(log.Contains("R:saw=2")) << log.ToString();
}

TEST_P(StepGraphTest, AMissingEdgeIsReportedWithTheBlob) {
  OrderLog log;
  int violations = -1;
  const std::string text = RunGatedPair(GetParam(), /*edge=*/false, log, &violations);
  EXPECT_GE(violations, 1);
  EXPECT_NE(text.find("'x'"), std::string::npos) << text;
  EXPECT_TRUE(log.Contains("R:saw=1")) << log.ToString();
}

INSTANTIATE_TEST_SUITE_P(BothSchedulings, StepGraphTest,
                         ::testing::Values(Scheduling::kDedicatedThread, Scheduling::kCallerThread),
                         [](const auto& info) {
                           return info.param == Scheduling::kDedicatedThread ? "Dedicated"
                                                                             : "CallerThread";
                         });

}  // namespace
}  // namespace sluice::vm::step_graph_test
