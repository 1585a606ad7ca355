// Issue 23's check: chains eager -> graph -> eager -> graph on two sim streams with jitter
// and the sync checker on, repeated 10^3 times: no sync error, and the values of the same
// ops run eagerly. And the same chains without soft sync, where the checker must report
// errors (the check can fail; these runs race for real, so they stay out of the sanitizer
// builds, which do not build this binary).
#include "gtest/gtest.h"
#include "tests/framework/graph_chain_test_util.h"

namespace sluice::framework::graph::testing::graph_chain_long_test {
namespace {

TEST(GraphChainLongTest, ThousandChainsMatchTheEagerOpsWithoutSyncErrors) {
  const ChainOutcome outcome = RunGraphChains(/*repetitions=*/1000, /*length=*/8, /*seed=*/23);
  EXPECT_EQ(outcome.repetitions, 1000);
  EXPECT_EQ(outcome.mismatches, 0) << outcome.first_mismatch;
  EXPECT_EQ(outcome.errors, 0);
  EXPECT_EQ(outcome.violations, 0);
}

TEST(GraphChainLongTest, WithoutSoftSyncTheCheckerReportsErrors) {
  const ChainOutcome outcome =
      RunGraphChains(/*repetitions=*/40, /*length=*/8, /*seed=*/7, /*soft_sync=*/false);
  EXPECT_GT(outcome.violations, 0);
}

}  // namespace
}  // namespace sluice::framework::graph::testing::graph_chain_long_test
