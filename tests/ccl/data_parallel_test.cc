// Data-parallel training of the demo model (framework/models/linear_regression.h): run
// under mpirun, each rank trains on its share of the batch; the averaged loss of every step
// must match a single-process run on the whole batch (made here too, in a one-rank
// context). Alone (one rank) it checks the transform leaves training unchanged.
#include "framework/distributed/data_parallel.h"

#include <cmath>
#include <vector>

#include "ep/ccl/world.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/models/linear_regression.h"
#include "gtest/gtest.h"

namespace sluice::framework::data_parallel_test {
namespace {

std::vector<float> Train(eager::Context& ctx, bool data_parallel, int steps,
                         DataParallelStats* stats = nullptr) {
  absl::StatusOr<LinearRegression> model = BuildLinearRegression(&ctx.registry());
  EXPECT_TRUE(model.ok()) << model.status();
  ExecutorOptions options;
  if (data_parallel) {
    DataParallelOptions dp;
    dp.averaged = {model->loss};
    absl::StatusOr<std::shared_ptr<const ProgramTransform>> transform = MakeDataParallelTransform(
        &ctx.registry(), ctx.runtime()->world().rank(), ctx.runtime()->world().size(), dp);
    EXPECT_TRUE(transform.ok()) << transform.status();
    if (transform.ok()) options.transform = *transform;
    if (stats != nullptr) {
      auto replica = MakeDataParallel(model->main->desc(), ctx.registry(), {model->x, model->y},
                                      ctx.runtime()->world().size(), dp, stats);
      EXPECT_TRUE(replica.ok()) << replica.status();
    }
  }
  Executor executor(&ctx.registry(), ctx.vm(), options);
  Scope scope;
  auto init = executor.Run(model->startup->desc(), {}, {}, &scope);
  EXPECT_TRUE(init.ok()) << init.status() << "\n" << (init.ok() ? "" : "");
  const Feeds feeds = {{model->x, LinearRegressionInput()}, {model->y, LinearRegressionTarget()}};
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    auto result = executor.Run(model->main->desc(), feeds, {model->loss}, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) break;
    losses.push_back(result->fetches[0].ToVector<float>()[0]);
  }
  return losses;
}

TEST(DataParallelTest, LossesMatchTheWholeBatch) {
  auto world = ep::ccl::World::FromEnvironment();
  ASSERT_TRUE(world.ok()) << world.status();
  // The demo's 16 rows split evenly over 1, 2, 4, 8 or 16 ranks (the same on every rank).
  if (16 % (*world)->size() != 0) GTEST_SKIP() << "16 rows do not split over this world";
  eager::ContextOptions parallel_options;
  parallel_options.runtime.world = *world;
  auto parallel = eager::Context::Create(parallel_options);
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  auto single = eager::Context::Create();
  ASSERT_TRUE(single.ok()) << single.status();
  const int steps = 20;
  DataParallelStats stats;
  const std::vector<float> expected = Train(*single, false, steps);
  const std::vector<float> got = Train(*parallel, true, steps, &stats);
  EXPECT_EQ(stats.buckets, 1);
  EXPECT_EQ(stats.gradients, 2);
  ASSERT_EQ(got.size(), expected.size());
  for (int i = 0; i < steps; ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-5 * std::abs(expected[i])) << "step " << i + 1;
  }
}

}  // namespace
}  // namespace sluice::framework::data_parallel_test
