// Fault injection in the eager run loop of `sluice stress` (stress/eager_stress.h with
// fail_rate, stress/fault_injection.h): no fault at rate 0; at a positive rate every fault
// is reported under its op, what depends on it is skipped and the rest is exact — for each
// kind of fault alone and all together; the same seed fails the same way; and a swallowed
// kernel fault (injected, but neither reported nor poisoning: its output, an independent
// result by the reference's rule, stays wrong) makes the checks fail.
#include "stress/fault_injection.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stress/eager_stress.h"

namespace sluice::stress::fault_injection_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EagerStressOptions FaultRun(double rate, uint64_t seed = 5) {
  EagerStressOptions options;
  options.programs = 24;
  options.seed = seed;
  options.jitter_us = 10;
  options.shape.sim_devices = 2;
  options.shape.streams = 3;
  options.fail_rate = rate;
  return options;
}

void ExpectInvariants(const EagerStressTotals& totals) {
  EXPECT_EQ(totals.faults_reported, totals.faults_injected) << totals.first_problem;
  EXPECT_EQ(totals.wrong_independent_results, 0) << totals.first_problem;
  EXPECT_EQ(totals.dependents_not_skipped, 0) << totals.first_problem;
  EXPECT_EQ(totals.faults_unnamed, 0) << totals.first_problem;
  EXPECT_EQ(totals.op_errors, 0) << totals.first_problem;
  EXPECT_EQ(totals.sync_errors, 0) << totals.first_sync_error;
  EXPECT_EQ(totals.hangs, 0);
  EXPECT_FALSE(totals.problems()) << totals.first_problem;
  EXPECT_TRUE(totals.shutdown_error.empty()) << totals.shutdown_error;
}

TEST(FaultInjectionTest, RateZeroInjectsNothing) {
  const EagerStressTotals totals = RunEagerStress(FaultRun(0)).value();
  EXPECT_EQ(totals.faults_injected, 0);
  EXPECT_EQ(totals.faults_reported, 0);
  EXPECT_FALSE(totals.problems()) << totals.first_problem;
  EXPECT_THAT(totals.ToJson(), Not(HasSubstr("faults_injected")));
}

TEST(FaultInjectionTest, AllKindsReportedDependentsSkippedRestExact) {
  const EagerStressTotals totals = RunEagerStress(FaultRun(0.03)).value();
  EXPECT_EQ(totals.programs, 24);
  EXPECT_GT(totals.faults_injected, 0);
  ExpectInvariants(totals);
  EXPECT_THAT(totals.ToJson(), HasSubstr("\"faults_injected\":"));
  EXPECT_THAT(totals.ToJson(), HasSubstr("\"wrong_independent_results\":0"));
}

TEST(FaultInjectionTest, KernelFaultsAlone) {
  EagerStressOptions options = FaultRun(0.05);
  options.device_faults = options.allocation_faults = false;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.faults_injected, 0);
  ExpectInvariants(totals);
}

TEST(FaultInjectionTest, DeviceFaultsAlone) {
  EagerStressOptions options = FaultRun(0.05);
  options.kernel_faults = options.allocation_faults = false;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.faults_injected, 0);
  ExpectInvariants(totals);
}

TEST(FaultInjectionTest, AllocationFaultsAlone) {
  EagerStressOptions options = FaultRun(0.1);
  options.kernel_faults = options.device_faults = false;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.faults_injected, 0);
  ExpectInvariants(totals);
}

TEST(FaultInjectionTest, CallerThreadScheduling) {
  EagerStressOptions options = FaultRun(0.03);
  options.scheduling = vm::VmOptions::Scheduling::kCallerThread;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.faults_injected, 0);
  ExpectInvariants(totals);
}

TEST(FaultInjectionTest, SameSeedSameFaults) {
  const EagerStressTotals first = RunEagerStress(FaultRun(0.03, 11)).value();
  const EagerStressTotals second = RunEagerStress(FaultRun(0.03, 11)).value();
  EXPECT_GT(first.faults_injected, 0);
  EXPECT_EQ(first.faults_injected, second.faults_injected);
  EXPECT_EQ(first.faults_reported, second.faults_reported);
  ExpectInvariants(first);
  ExpectInvariants(second);
}

TEST(FaultInjectionTest, SwallowedFaultsFailTheChecks) {
  EagerStressOptions options = FaultRun(0.05);
  options.device_faults = options.allocation_faults = false;
  options.swallow_kernel_faults = true;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.faults_injected, 0);
  EXPECT_LT(totals.faults_reported, totals.faults_injected);
  EXPECT_GT(totals.wrong_independent_results, 0);
  EXPECT_TRUE(totals.problems());
}

TEST(FaultInjectionTest, FaultOptionsAreChecked) {
  EagerStressOptions options = FaultRun(1.5);
  EXPECT_FALSE(RunEagerStress(options).ok());
  options = FaultRun(0.1);
  options.record_path = "/tmp/unused.rec";
  EXPECT_FALSE(RunEagerStress(options).ok());
}

// --- The pieces the checks are made of. ---

TEST(FaultInjectionTest, TraceFaultsFindsCauseAndOp) {
  const FaultTrace trace = TraceFaults(
      "op 'add' #12 on sim:0/compute:1 (stress op 17): sim:0/compute:1: injected device "
      "fault #3");
  ASSERT_EQ(trace.faults.size(), 1u);
  EXPECT_EQ(trace.faults[0], "device fault #3");
  EXPECT_EQ(trace.kernel, "add");
  EXPECT_EQ(trace.op, 17);
  const FaultTrace none = TraceFaults("input t3 was never written");
  EXPECT_TRUE(none.faults.empty());
  EXPECT_EQ(none.op, -1);
}

TEST(FaultInjectionTest, TaintFollowsReadsAndCleanOverwritesClearIt) {
  StressProgram program;
  program.tensor_home.resize(3);
  auto op = [](StressOp::Kind kind, int a, int b, int y) {
    StressOp o;
    o.kind = kind;
    o.a = a;
    o.b = b;
    o.y = y;
    return o;
  };
  program.ops = {op(StressOp::Kind::kFill, -1, -1, 0),   // 0: fails
                 op(StressOp::Kind::kFill, -1, -1, 1),   // 1
                 op(StressOp::Kind::kAdd, 0, 1, 2),      // 2: reads tainted t0
                 op(StressOp::Kind::kCopy, 1, -1, 0),    // 3: clean overwrite of t0
                 op(StressOp::Kind::kScale, 2, -1, 2)};  // 4: in place on tainted t2
  const std::vector<bool> tainted = TaintedTensors(program, {true, false, false, false, false});
  EXPECT_EQ(tainted, (std::vector<bool>{false, false, true}));
}

}  // namespace
}  // namespace sluice::stress::fault_injection_test
