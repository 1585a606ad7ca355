// The eager run loop of `sluice stress` (stress/eager_stress.h): a short run with soft sync
// finds no problem; without soft sync the checker reports errors; the totals' JSON line
// keeps the shape CI greps; a setup failure is an error, not a count.
#include "stress/eager_stress.h"

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::stress::eager_stress_test {
namespace {

using ::testing::HasSubstr;

EagerStressOptions ShortRun() {
  EagerStressOptions options;
  options.programs = 8;
  options.seed = 3;
  options.jitter_us = 20;
  options.shape.sim_devices = 2;
  options.shape.streams = 4;
  return options;
}

TEST(EagerStressTest, SoftSyncRunsClean) {
  const EagerStressTotals totals = RunEagerStress(ShortRun()).value();
  EXPECT_EQ(totals.programs, 8);
  EXPECT_GT(totals.instructions, 0);
  EXPECT_FALSE(totals.problems()) << totals.first_problem << totals.first_sync_error;
  EXPECT_FALSE(totals.abandoned);
  EXPECT_TRUE(totals.shutdown_error.empty()) << totals.shutdown_error;
  EXPECT_THAT(totals.vm_stats, Not(testing::IsEmpty()));
}

TEST(EagerStressTest, WithoutSoftSyncTheCheckerReports) {
  EagerStressOptions options = ShortRun();
  options.programs = 20;
  options.soft_sync = false;
  const EagerStressTotals totals = RunEagerStress(options).value();
  EXPECT_GT(totals.sync_errors, 0);
  EXPECT_TRUE(totals.problems());
  EXPECT_FALSE(totals.first_sync_error.empty());
}

TEST(EagerStressTest, JsonLineNamesEveryCount) {
  EagerStressTotals totals;
  totals.programs = 2;
  totals.instructions = 30;
  totals.hangs = 1;
  EXPECT_EQ(totals.ToJson(),
            "{\"programs\":2,\"instructions\":30,\"mismatches\":0,\"sync_errors\":0,\"hangs\":1}");
}

TEST(EagerStressTest, BadSetupIsAnError) {
  EagerStressOptions options = ShortRun();
  options.record_path = "/nonexistent-directory/run.rec";
  const absl::StatusOr<EagerStressTotals> totals = RunEagerStress(options);
  ASSERT_FALSE(totals.ok());
  EXPECT_THAT(totals.status().message(), HasSubstr("nonexistent-directory"));
}

}  // namespace
}  // namespace sluice::stress::eager_stress_test
