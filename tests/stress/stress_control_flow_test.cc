// `sluice stress --control-flow` in parts: the generator (stress/stress_control_flow.h) is
// deterministic and makes valid programs with cond, while and pinned streams; the reference
// (stress/stress_reference.h) gives a loop's closed form and refuses ops outside its subset;
// the reference agrees with runs on cpu with one stream; a handful of seeds run clean on sim
// with jitter across streams; without the stream analysis the checker reports errors; a
// run past the timeout counts as a hang and is cancelled.
#include "stress/stress_control_flow.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/ir/control_flow.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "stress/stress_control_flow_runner.h"
#include "stress/stress_reference.h"

namespace sluice::stress::stress_control_flow_test {
namespace {

using framework::HostTensor;
using ::testing::HasSubstr;

class StressControlFlowTest : public ::testing::Test {
 protected:
  StressControlFlowTest() { SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok()); }
  ops::OpRegistry registry_;
};

TEST_F(StressControlFlowTest, GeneratorIsDeterministicInTheSeed) {
  ControlFlowShape shape;
  const ControlFlowProgram a = GenerateControlFlowProgram(registry_, shape, 42).value();
  const ControlFlowProgram b = GenerateControlFlowProgram(registry_, shape, 42).value();
  const ControlFlowProgram c = GenerateControlFlowProgram(registry_, shape, 43).value();
  EXPECT_EQ(a.program.ToText(), b.program.ToText());
  EXPECT_EQ(a.fetches, b.fetches);
  ASSERT_EQ(a.feed_sets.size(), b.feed_sets.size());
  for (size_t s = 0; s < a.feed_sets.size(); ++s) {
    for (size_t i = 0; i < a.feed_sets[s].size(); ++i) {
      EXPECT_EQ(a.feed_sets[s][i].second.bytes, b.feed_sets[s][i].second.bytes);
    }
  }
  EXPECT_NE(a.program.ToText(), c.program.ToText());
}

// Over a few seeds: valid programs, conds and whiles (some nested in a sub-block), block 0
// ops pinned to each stream, the control-flow ops among them.
TEST_F(StressControlFlowTest, GeneratorMakesValidProgramsWithControlFlowAcrossStreams) {
  ControlFlowShape shape;
  shape.streams = 3;
  int conds = 0, whiles = 0, nested = 0, pinned_control = 0;
  std::vector<int> pinned(shape.streams, 0);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const ControlFlowProgram p = GenerateControlFlowProgram(registry_, shape, seed).value();
    ASSERT_TRUE(p.program.Validate().ok()) << p.program.Validate();
    EXPECT_FALSE(p.fetches.empty());
    EXPECT_EQ(p.feed_sets.size(), 2u);
    conds += p.conds;
    whiles += p.whiles;
    for (int b = 1; b < p.program.num_blocks(); ++b) {
      for (const framework::ir::OpDesc& op : p.program.block(b).ops()) {
        nested += framework::ir::IsControlFlowOp(op) ? 1 : 0;
      }
    }
    for (const framework::ir::OpDesc& op : p.program.block(0).ops()) {
      const absl::StatusOr<std::string> stream = op.attrs.GetString(framework::ir::kStreamAttr);
      if (!stream.ok()) continue;
      for (int s = 0; s < shape.streams; ++s) {
        if (*stream == "compute:" + std::to_string(s)) ++pinned[s];
      }
      pinned_control += framework::ir::IsControlFlowOp(op) ? 1 : 0;
    }
  }
  EXPECT_GT(conds, 0);
  EXPECT_GT(whiles, 0);
  EXPECT_GT(nested, 0);
  EXPECT_GT(pinned_control, 0);
  for (int s = 0; s < shape.streams; ++s) EXPECT_GT(pinned[s], 0) << "compute:" << s;
}

// while i < 3 { i += 1; x = 0.5 x + 0.25 }, then a cond on i >= 3: the closed form.
TEST_F(StressControlFlowTest, ReferenceEvaluatesLoopsAndConds) {
  framework::Program main(&registry_), startup(&registry_);
  std::vector<std::string> fetches;
  {
    framework::ProgramGuard guard(main, startup);
    const framework::Var x = framework::Data("x", Shape({2})).value();
    const framework::Value i0 = fn::FillConstant(Shape(), 0.0).value();
    const framework::Value n = fn::FillConstant(Shape(), 3.0).value();
    const std::vector<framework::Value> loop =
        fn::WhileLoop([&](const std::vector<framework::Value>& v) { return fn::LessThan(v[0], n); },
                      [](const std::vector<framework::Value>& v)
                          -> absl::StatusOr<std::vector<framework::Value>> {
                        SLUICE_ASSIGN_OR_RETURN(framework::Value i, fn::Increment(v[0]));
                        SLUICE_ASSIGN_OR_RETURN(framework::Value y, fn::Scale(v[1], 0.5, 0.25));
                        return std::vector<framework::Value>{i, y};
                      },
                      {i0, x})
            .value();
    const framework::Value done = fn::GreaterEqual(loop[0], n).value();
    const std::vector<framework::Value> picked =
        fn::Cond(
            done,
            [&]() -> absl::StatusOr<std::vector<framework::Value>> {
              SLUICE_ASSIGN_OR_RETURN(framework::Value y, fn::Scale(loop[1], -1.0));
              return std::vector<framework::Value>{y};
            },
            [&]() -> absl::StatusOr<std::vector<framework::Value>> {
              return std::vector<framework::Value>{loop[1]};
            })
            .value();
    fetches = {loop[0].var().name(), picked[0].var().name()};
  }
  const std::vector<HostTensor> got =
      EvaluateReference(
          main.desc(), {{"x", HostTensor::FromVector(std::vector<float>{1.0f, -1.0f}, Shape({2}))}},
          fetches)
          .value();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].ToVector<float>(), std::vector<float>{3.0f});
  // x -> 0.5 x + 0.25 three times: 1 -> 0.75 -> 0.625 -> 0.5625, -1 -> -0.25 -> 0.125 ->
  // 0.3125; then negated.
  EXPECT_EQ(got[1].ToVector<float>(), (std::vector<float>{-0.5625f, -0.3125f}));
}

TEST_F(StressControlFlowTest, ReferenceRefusesOpsOutsideItsSubset) {
  framework::Program main(&registry_), startup(&registry_);
  std::string fetch;
  {
    framework::ProgramGuard guard(main, startup);
    const framework::Var x = framework::Data("x", Shape({2})).value();
    fetch = fn::Tanh(x).value().var().name();
  }
  const absl::StatusOr<std::vector<HostTensor>> got = EvaluateReference(
      main.desc(), {{"x", HostTensor::FromVector(std::vector<float>{1.0f, -1.0f}, Shape({2}))}},
      {fetch});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("block 0 op #0 'tanh'"));
}

// The reference gives the bytes of a plain run: cpu, one stream, no jitter.
TEST_F(StressControlFlowTest, ReferenceAgreesWithCpuOneStream) {
  ControlFlowStressOptions options;
  options.programs = 30;
  options.seed = 5;
  options.device = Device(DeviceType::kCpu, 0);
  options.streams = 1;
  const ControlFlowStressTotals totals = RunControlFlowStress(options).value();
  EXPECT_FALSE(totals.problems()) << totals.ToJson() << ": " << totals.first_problem;
  EXPECT_EQ(totals.runs, 60);
  EXPECT_GT(totals.compared, 300);
  EXPECT_GT(totals.whiles, 0);
  EXPECT_GT(totals.conds, 0);
}

TEST_F(StressControlFlowTest, SeedsRunCleanOnSimStreamsWithJitter) {
  ControlFlowStressOptions options;
  options.programs = 25;
  options.seed = 3;
  options.streams = 3;
  options.jitter_us = 20;
  options.shape.depth = 3;
  const ControlFlowStressTotals totals = RunControlFlowStress(options).value();
  EXPECT_FALSE(totals.problems()) << totals.ToJson() << ": " << totals.first_problem;
  EXPECT_EQ(totals.programs, 25);
  EXPECT_EQ(totals.runs, 50);
  EXPECT_GT(totals.stream_waits, 0);  // the programs do cross streams
  EXPECT_FALSE(totals.abandoned);
}

// A loop that is the last step of its cpu lane, run twice with temporaries kept: the
// second run's writes of what the loop read are ordered after the first run's reads by
// the run's end. The checker saw it only once a step that runs steps of its own (the
// control step) re-certified its lane's completion after them (SyncChecker::
// OnNestedStepsDone); before, seed 302 gave 240 false reports in 110 programs.
TEST_F(StressControlFlowTest, KeptTemporariesOnCpuStreamsRunClean) {
  ControlFlowStressOptions options;
  options.programs = 120;
  options.seed = 302;
  options.device = Device(DeviceType::kCpu, 0);
  options.streams = 3;
  options.keep_temporaries = true;
  options.shape.depth = 3;
  const ControlFlowStressTotals totals = RunControlFlowStress(options).value();
  EXPECT_FALSE(totals.problems()) << totals.ToJson() << ": " << totals.first_problem;
  EXPECT_GT(totals.stream_waits, 0);
}

TEST_F(StressControlFlowTest, WithoutStreamAnalysisTheCheckerReportsErrors) {
  ControlFlowStressOptions options;
  options.programs = 10;
  options.seed = 1;
  options.streams = 3;
  options.jitter_us = 20;
  options.no_soft_sync = true;
  // Unordered, a loop may read its predicate before the body wrote it and run on until the
  // timeout (a hang, one more problem of the broken run): 5 s, not the default 120 s.
  options.timeout_s = 5;
  const ControlFlowStressTotals totals = RunControlFlowStress(options).value();
  EXPECT_GT(totals.sync_errors, 0) << totals.ToJson();
  ASSERT_FALSE(totals.abandoned) << totals.ToJson();
  // Every program crosses streams, so every one shows it.
  EXPECT_EQ(totals.programs_with_sync_errors, totals.programs) << totals.ToJson();
  EXPECT_TRUE(totals.problems());
  EXPECT_EQ(totals.stream_waits, 0);
  EXPECT_THAT(totals.first_problem, ::testing::Not(::testing::IsEmpty()));
}

// A loop of up to 10^6 iterations on a jittered sim stream (seed 1's first program draws a
// large trip count) does not finish within the 1 s timeout: a hang, counted, and the
// cancel ends the run, so the VM is not left behind.
TEST_F(StressControlFlowTest, ARunPastTheTimeoutIsAHangAndIsCancelled) {
  ControlFlowStressOptions options;
  options.programs = 1;
  options.seed = 1;
  options.streams = 2;
  options.jitter_us = 50;
  options.timeout_s = 1;
  options.shape.ops = 0;  // just the one loop
  options.shape.depth = 1;
  options.shape.max_trips = 1000000;
  options.shape.feed_sets = 1;
  const ControlFlowStressTotals totals = RunControlFlowStress(options).value();
  EXPECT_EQ(totals.hangs, 1) << totals.ToJson();
  EXPECT_EQ(totals.runs, 0);
  EXPECT_FALSE(totals.abandoned);
  EXPECT_TRUE(totals.problems());
  EXPECT_THAT(totals.first_problem, HasSubstr("did not finish within 1 s"));
}

}  // namespace
}  // namespace sluice::stress::stress_control_flow_test
