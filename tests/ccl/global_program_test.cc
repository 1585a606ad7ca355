// Static programs on global tensors (framework/global/global_program.h): the demo model
// trained with its batch split across the ranks (x and y laid out S(0), parameters
// broadcast) must print the single-process losses, and a forward program with a split
// matmul must give the whole result; a rank outside the placement runs nothing.
#include "framework/global/global_program.h"

#include <cmath>
#include <vector>

#include "framework/eager/collectives.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/models/linear_regression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/ccl/ccl_test_util.h"

namespace sluice::global::global_program_test {
namespace {

using framework::Executor;
using framework::Feeds;
using framework::HostTensor;
using framework::Scope;

eager::Context& Ctx() { return ccltest::OpsContext(); }

// Rows [begin, end) of a 2-D host tensor.
HostTensor Rows(const HostTensor& t, int64_t begin, int64_t end) {
  const int64_t cols = t.shape.dim(1);
  const std::vector<float> all = t.ToVector<float>();
  return HostTensor::FromVector<float>(
      std::vector<float>(all.begin() + begin * cols, all.begin() + end * cols),
      Shape({end - begin, cols}));
}

TEST(GlobalProgramTest, DemoWithTheBatchSplitTrainsLikeOneProcess) {
  eager::Context& ctx = Ctx();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  if (16 % size != 0) GTEST_SKIP() << "16 rows do not split over this world";
  auto model = framework::BuildLinearRegression(&ctx.registry());
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(r);
  auto placement = Placement::Create(DeviceType::kCpu, ranks);
  ASSERT_TRUE(placement.ok()) << placement.status();
  GlobalProgramOptions options;
  options.layouts[model->x] = {Sbp::Split(0)};
  options.layouts[model->y] = {Sbp::Split(0)};
  options.whole = {model->loss};
  auto global = MakeGlobalProgram(model->main->desc(), ctx.registry(), *placement, options, rank);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_FALSE(global->excluded);
  if (size > 1) EXPECT_GT(global->boxing_ops, 0);

  const int steps = 10;
  auto train = [&](const framework::ir::ProgramDesc& main, const Feeds& feeds,
                   const std::string& fetch) {
    Executor executor(&ctx.registry(), ctx.vm());
    Scope scope;
    EXPECT_TRUE(executor.Run(model->startup->desc(), {}, {}, &scope).ok());
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
      auto result = executor.Run(main, feeds, {fetch}, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) break;
      losses.push_back(result->fetches[0].ToVector<float>()[0]);
    }
    return losses;
  };
  const HostTensor x = framework::LinearRegressionInput(), y = framework::LinearRegressionTarget();
  const std::vector<float> expected =
      train(model->main->desc(), {{model->x, x}, {model->y, y}}, model->loss);
  const int64_t rows = 16 / size;
  const std::vector<float> got = train(global->program,
                                       {{model->x, Rows(x, rank * rows, (rank + 1) * rows)},
                                        {model->y, Rows(y, rank * rows, (rank + 1) * rows)}},
                                       model->loss + "@whole");
  ASSERT_EQ(got.size(), expected.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_NEAR(got[s], expected[s], 1e-5 * std::abs(expected[s])) << "step " << s + 1;
  }
}

TEST(GlobalProgramTest, ARankOutsideThePlacementRunsNothing) {
  eager::Context& ctx = Ctx();
  const int rank = eager::WorldRank(ctx), size = eager::WorldSize(ctx);
  auto model = framework::BuildLinearRegression(&ctx.registry());
  ASSERT_TRUE(model.ok()) << model.status();
  auto placement = Placement::Create(DeviceType::kCpu, {size - 1});
  ASSERT_TRUE(placement.ok());
  auto global = MakeGlobalProgram(model->main->desc(), ctx.registry(), *placement, {}, rank);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(global->excluded, rank != size - 1);
  if (global->excluded) EXPECT_TRUE(global->program.global_block().ops().empty());
}

TEST(GlobalProgramTest, BadLayoutsAreNamed) {
  eager::Context& ctx = Ctx();
  auto model = framework::BuildLinearRegression(&ctx.registry());
  ASSERT_TRUE(model.ok());
  auto placement = Placement::Create(DeviceType::kCpu, {0});
  ASSERT_TRUE(placement.ok());
  GlobalProgramOptions unknown;
  unknown.layouts["nope"] = {Sbp::Split(0)};
  auto a = MakeGlobalProgram(model->main->desc(), ctx.registry(), *placement, unknown, 0);
  EXPECT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), ::testing::HasSubstr("'nope'"));
  GlobalProgramOptions too_many;
  too_many.layouts[model->x] = {Sbp::Split(0), Sbp::Broadcast()};
  auto b = MakeGlobalProgram(model->main->desc(), ctx.registry(), *placement, too_many, 0);
  EXPECT_FALSE(b.ok());
}

}  // namespace
}  // namespace sluice::global::global_program_test
