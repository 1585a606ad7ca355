// Eager ops and graph calls chained on two sim streams with jitter, under the sync checker
// (graph_chain_test_util.h): the same values as the ops run eagerly and no sync error.
// framework_long_tests runs 10^3 repetitions, and the chains without soft sync (real data
// races, so not under the sanitizers), where the checker must report errors.
#include "gtest/gtest.h"
#include "tests/framework/graph_chain_test_util.h"

namespace sluice::framework::graph::testing::graph_chain_test {
namespace {

TEST(GraphChainTest, ChainsMatchTheEagerOpsWithoutSyncErrors) {
  const ChainOutcome outcome = RunGraphChains(/*repetitions=*/40, /*length=*/8, /*seed=*/7);
  EXPECT_EQ(outcome.repetitions, 40);
  EXPECT_EQ(outcome.mismatches, 0) << outcome.first_mismatch;
  EXPECT_EQ(outcome.errors, 0);
  EXPECT_EQ(outcome.violations, 0);
}

}  // namespace
}  // namespace sluice::framework::graph::testing::graph_chain_test
