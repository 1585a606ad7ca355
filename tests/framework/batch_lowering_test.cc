// The back ends on small programs taken through the passes by hand (no Interpreter):
// LowerToBatch turns every plan item into one instruction and every plan edge into a batch
// edge, lists operands only when asked, and the batch runs to the right values on cpu and
// on sim across copy streams; LowerToLanes makes one sequence per stream with the waits
// inside and runs to the same values as the batch.
#include "framework/interpreter/batch_lowering.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/gc_plan.h"
#include "framework/interpreter/lane_lowering.h"
#include "framework/interpreter/list_schedule.h"
#include "framework/interpreter/op_resolution.h"
#include "framework/interpreter/placement.h"
#include "framework/interpreter/segments.h"
#include "framework/interpreter/stream_analysis.h"
#include "framework/interpreter/var_table.h"
#include "framework/interpreter/vm_binding.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"

namespace sluice::framework::batch_lowering_test {
namespace {

using program_test::AddVar;
using program_test::Fill;
using program_test::kCpu;
using program_test::kSim;
using program_test::Op;
using program_test::ScaleBy;
using program_test::Var;

const Shape kSquare({4, 4});

// One block taken through every pass before the back end.
struct Lowered {
  VarTable vars;
  PlacedBlock placed;
  std::vector<Node> nodes;
  std::vector<Segment> segments;
  StreamPlan plan;
  StreamTable streams;
  vm::PrecomputedBatch batch;
  std::vector<std::unique_ptr<vm::StepSequence>> sequences;
  ReleaseCounts counts;
  LoweringStats stats;
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> ops_run{0};
  std::atomic<uint32_t> run_number{0};

  LoweringInput In() const {
    return LoweringInput{vars, placed.funcs, nodes, segments, plan, streams.streams};
  }
  LoweringOutput Out() {
    return LoweringOutput{batch, sequences, counts, stats, {&cancel, &ops_run, &run_number}};
  }
};

void Prepare(vm::VirtualMachine& vm, const ops::OpRegistry& registry, const ir::BlockDesc& block,
             const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
             const InterpreterOptions& options, Lowered& out) {
  Scope scope;
  absl::StatusOr<VarTable> vars = CollectVars(block, feeds, fetches, options.device, scope);
  ASSERT_TRUE(vars.ok()) << vars.status();
  out.vars = *std::move(vars);
  const ResolvedBlock resolved = ResolveOps(block, registry, out.vars, fetches);
  ASSERT_TRUE(resolved.error.ok()) << resolved.error;
  out.placed = PlaceOps(resolved, registry, options.device, out.vars);
  ASSERT_TRUE(out.placed.error.ok()) << out.placed.error;
  ASSERT_TRUE(ChooseKernels(registry, out.vars, out.placed.funcs).ok());
  std::vector<OpAccess> accesses;
  for (const OpFunc& f : out.placed.funcs) accesses.push_back({f.inputs, f.outputs, f.random});
  const DependencyGraph deps = BuildDependencies(accesses, out.vars.size());
  const std::vector<double> start = AssignStreams(
      out.placed.funcs, deps, {options.device, options.compute_streams, options.cross_stream_cost});
  absl::StatusOr<StreamTable> streams = BindStreams(vm, out.placed.funcs);
  ASSERT_TRUE(streams.ok()) << streams.status();
  out.streams = *std::move(streams);
  ASSERT_TRUE(BindBlobs(vm, scope, out.vars).ok());
  const std::vector<StreamInfo> infos = DescribeStreams(vm, out.streams.streams);
  std::vector<bool> host_stream;
  for (const StreamInfo& info : infos) host_stream.push_back(info.synchronous);
  out.nodes = PlanNodes(out.placed.funcs, out.vars, deps, out.streams.func_stream,
                        options.release_temporaries, host_stream);
  out.segments = FormSegments(out.nodes, options.fuse);
  out.plan = AnalyzeStreams(out.nodes, out.segments, start, infos, options.skip_stream_analysis);
}

void Feed(const Lowered& lowered, const std::string& name, float value) {
  const vm::BlobRef& blob = lowered.vars.slots[lowered.vars.index_of.at(name)].blob;
  std::vector<float> data(kSquare.NumElements(), value);
  std::memcpy(blob->storage()->data(), data.data(), data.size() * sizeof(float));
}

std::vector<float> Fetched(const Lowered& lowered, int fetch) {
  const vm::Blob& blob = *lowered.vars.slots[lowered.placed.fetch_slots[fetch]].blob;
  EXPECT_NE(blob.storage(), nullptr);
  if (blob.storage() == nullptr) return {};
  std::vector<float> values(kSquare.NumElements());
  std::memcpy(values.data(), blob.storage()->data(), values.size() * sizeof(float));
  return values;
}

int CountItems(const StreamPlan& plan, StreamItem::Kind kind) {
  return static_cast<int>(std::count_if(plan.items.begin(), plan.items.end(),
                                        [&](const StreamItem& i) { return i.kind == kind; }));
}

// x (fed) → relu → a; fill → b; y = a + b, scaled; z = exp(b).
ir::ProgramDesc Small() {
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  for (const char* name : {"x", "a", "b", "s", "y", "z"}) AddVar(b, Var(name, kSquare));
  b.AppendOp(Op("relu", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("fill_constant", {}, {{"Out", {"b"}}}, Fill(kSquare, 0.5)));
  b.AppendOp(Op("add", {{"X", {"a"}}, {"Y", {"b"}}}, {{"Out", {"s"}}}));
  b.AppendOp(Op("scale", {{"X", {"s"}}}, {{"Out", {"y"}}}, ScaleBy(2.0)));
  b.AppendOp(Op("exp", {{"X", {"b"}}}, {{"Out", {"z"}}}));
  return p;
}

class BackEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_ = program_test::NewContext(/*sim_devices=*/1);
    ASSERT_NE(context_, nullptr);
  }

  void Run(Lowered& lowered) {
    lowered.run_number.fetch_add(1);
    ASSERT_TRUE(lowered.batch.Submit(context_->vm()).ok());
    ASSERT_TRUE(context_->vm()->Sync().ok());
  }

  void ExpectSmallValues(const Lowered& lowered) {
    const std::vector<float> y = Fetched(lowered, 0);
    const std::vector<float> z = Fetched(lowered, 1);
    ASSERT_EQ(y.size(), 16u);
    ASSERT_EQ(z.size(), 16u);
    for (float v : y) EXPECT_NEAR(v, 2 * (1.5f + 0.5f), 1e-6);
    for (float v : z) EXPECT_NEAR(v, std::exp(0.5f), 1e-6);
  }

  std::unique_ptr<eager::Context> context_;
};

TEST_F(BackEndTest, BatchHasAnInstructionPerItemAndAnEdgePerPlanEdge) {
  InterpreterOptions options;
  options.device = kSim;
  Lowered lowered;
  ASSERT_NO_FATAL_FAILURE(Prepare(*context_->vm(), context_->registry(), Small().global_block(),
                                  {"x"}, {"y", "z"}, options, lowered));
  LoweringOutput out = lowered.Out();
  ASSERT_TRUE(LowerToBatch(lowered.In(), /*list_operands=*/false, out).ok());
  EXPECT_EQ(lowered.batch.size(), static_cast<int>(lowered.plan.items.size()));
  EXPECT_EQ(lowered.stats.instructions, lowered.batch.size());
  EXPECT_EQ(lowered.stats.edges, static_cast<int64_t>(lowered.plan.edges.size()));
  EXPECT_EQ(lowered.stats.op_sequences, CountItems(lowered.plan, StreamItem::Kind::kSequence));
  EXPECT_EQ(lowered.sequences.size(), static_cast<size_t>(lowered.stats.op_sequences));
  EXPECT_EQ(lowered.streams.streams.size(), 3u);  // h2d, compute, d2h
  EXPECT_GT(lowered.plan.stream_waits, 0);
  // Every op func appears once among the sequences' steps; releases besides.
  int steps = 0;
  for (const auto& sequence : lowered.sequences) steps += sequence->size();
  EXPECT_EQ(steps, static_cast<int>(lowered.nodes.size()));
  for (int run = 0; run < 2; ++run) {
    Feed(lowered, "x", 1.5f);
    Run(lowered);
    ExpectSmallValues(lowered);
  }
  EXPECT_EQ(lowered.ops_run.load(), 2 * static_cast<int64_t>(lowered.placed.funcs.size()));
}

TEST_F(BackEndTest, BatchWithoutFusionOnCpuIsAChain) {
  InterpreterOptions options;
  options.fuse = false;
  options.release_temporaries = false;
  Lowered lowered;
  ASSERT_NO_FATAL_FAILURE(Prepare(*context_->vm(), context_->registry(), Small().global_block(),
                                  {"x"}, {"y", "z"}, options, lowered));
  LoweringOutput out = lowered.Out();
  ASSERT_TRUE(LowerToBatch(lowered.In(), /*list_operands=*/true, out).ok());
  EXPECT_EQ(lowered.batch.size(), 5);
  EXPECT_EQ(lowered.stats.edges, 4);  // the stream chain only
  EXPECT_EQ(lowered.plan.stream_waits + lowered.plan.record_events, 0);
  Feed(lowered, "x", 1.5f);
  Run(lowered);
  ExpectSmallValues(lowered);
}

TEST_F(BackEndTest, LanesRunEachStreamAsOneSequence) {
  // A cpu-only VM without observers: every compute stream has a worker of its own.
  std::unique_ptr<eager::Context> cpu_only = program_test::NewContext(/*sim_devices=*/0);
  ASSERT_NE(cpu_only, nullptr);
  context_ = std::move(cpu_only);
  InterpreterOptions options;
  options.compute_streams = 2;
  options.cross_stream_cost = 0;
  Lowered lowered;
  ASSERT_NO_FATAL_FAILURE(Prepare(*context_->vm(), context_->registry(), Small().global_block(),
                                  {"x"}, {"y", "z"}, options, lowered));
  ASSERT_EQ(lowered.streams.streams.size(), 2u);
  const LaneSupport support = QueryLaneSupport(*context_->vm(), lowered.streams.streams);
  EXPECT_TRUE(support.host_lanes);
  EXPECT_FALSE(support.observed);
  ASSERT_TRUE(UseLaneLowering(support, options, 2));
  EXPECT_EQ(CountItems(lowered.plan, StreamItem::Kind::kRecordEvent), 0);
  LoweringOutput out = lowered.Out();
  LowerToLanes(lowered.In(), out);
  EXPECT_EQ(lowered.batch.size(), 2);
  EXPECT_EQ(lowered.stats.lane_sequences, 2);
  EXPECT_EQ(lowered.stats.instructions, 2);
  EXPECT_EQ(lowered.stats.edges, 0);
  ASSERT_EQ(lowered.sequences.size(), 2u);
  int waits = 0, steps = 0;
  for (const auto& lane : lowered.sequences) {
    waits += lane->waits();
    steps += lane->size();
  }
  EXPECT_EQ(waits, lowered.plan.stream_waits);
  EXPECT_GT(waits, 0);
  EXPECT_EQ(steps, static_cast<int>(lowered.nodes.size()));
  for (int run = 0; run < 3; ++run) {
    Feed(lowered, "x", 1.5f);
    Run(lowered);
    ExpectSmallValues(lowered);
  }
}

TEST_F(BackEndTest, LaneSupportFollowsTheVm) {
  // Sim streams are asynchronous; a sync checker is an observer.
  std::unique_ptr<eager::Context> checked = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(checked, nullptr);
  vm::VirtualMachine& vm = *checked->vm();
  absl::StatusOr<vm::Stream*> cpu0 = vm.GetStream(StreamKey{kCpu, StreamType::kCompute, 0});
  absl::StatusOr<vm::Stream*> cpu1 = vm.GetStream(StreamKey{kCpu, StreamType::kCompute, 1});
  absl::StatusOr<vm::Stream*> sim0 = vm.GetStream(StreamKey{kSim, StreamType::kCompute, 0});
  ASSERT_TRUE(cpu0.ok() && cpu1.ok() && sim0.ok());
  EXPECT_TRUE(QueryLaneSupport(vm, {*cpu0, *cpu1}).observed);
  EXPECT_TRUE(QueryLaneSupport(vm, {*cpu0, *cpu1}).host_lanes);
  EXPECT_FALSE(QueryLaneSupport(vm, {*cpu0, *sim0}).host_lanes);
  EXPECT_FALSE(QueryLaneSupport(vm, {*cpu0, *cpu0}).host_lanes);  // one worker, two lanes

  LaneSupport yes{/*host_lanes=*/true, /*observed=*/false};
  InterpreterOptions options;
  EXPECT_TRUE(UseLaneLowering(yes, options, 2));
  EXPECT_FALSE(UseLaneLowering(yes, options, 1));
  // Observers see inside lanes (step-level checking and recording): no reason to step aside.
  EXPECT_TRUE(UseLaneLowering(LaneSupport{true, true}, options, 2));
  EXPECT_FALSE(UseLaneLowering(LaneSupport{false, false}, options, 2));
  options.fuse = false;
  EXPECT_FALSE(UseLaneLowering(yes, options, 2));
  options.fuse = true;
  options.skip_stream_analysis = true;
  EXPECT_FALSE(UseLaneLowering(yes, options, 2));
  options.skip_stream_analysis = false;
  options.lane_sequences = false;
  EXPECT_FALSE(UseLaneLowering(yes, options, 2));
}

}  // namespace
}  // namespace sluice::framework::batch_lowering_test
