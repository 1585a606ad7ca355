// framework/distributed/data_parallel.h in one process (the world size is just a number):
// MakeDataParallel splits the feeds and re-infers the shapes that depend on them, averages
// every parameter gradient exactly once with an in-place all_reduce(mean) placed between its
// last writer and its first reader, buckets the gradients by `bucket_bytes`, broadcasts what a
// startup program initializes, averages the `averaged` variables at the end, and refuses what
// it cannot do; ShardFeed cuts a feed into the ranks' rows. Finally the transformed demo model
// runs one-rank steps through the Executor with the same losses as the plain program.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"
#include "framework/distributed/data_parallel.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/models/gated_mlp.h"
#include "framework/models/linear_regression.h"
#include "framework/optim/optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"

namespace sluice::framework::data_parallel_transform_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Buckets = std::vector<std::vector<std::string>>;

constexpr int kNone = std::numeric_limits<int>::max();
constexpr int64_t kHugeBucket = int64_t{1} << 40;

bool IsCollective(const ir::OpDesc& op) {
  return op.type == "all_reduce" || op.type == "broadcast";
}
bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}
std::string Describe(const ir::ProgramDesc& program) { return program.ToText(); }

// The non-collective ops of `block`: what the transform must leave as it was.
std::vector<ir::OpDesc> WithoutCollectives(const ir::BlockDesc& block) {
  std::vector<ir::OpDesc> ops;
  for (const ir::OpDesc& op : block.ops()) {
    if (!IsCollective(op)) ops.push_back(op);
  }
  return ops;
}

// The gradients of `block`'s parameters that some op writes, and their total bytes.
std::vector<std::string> ParameterGradients(const ir::BlockDesc& block, int64_t* bytes) {
  std::vector<std::string> grads;
  if (bytes != nullptr) *bytes = 0;
  for (const ir::VarDesc& var : block.vars()) {
    if (!var.is_parameter) continue;
    const std::string grad = var.name + "@GRAD";
    const ir::VarDesc* g = block.FindVar(grad);
    if (g == nullptr) continue;
    const bool written =
        std::any_of(block.ops().begin(), block.ops().end(),
                    [&](const ir::OpDesc& op) { return Contains(op.OutputNames(), grad); });
    if (!written) continue;
    grads.push_back(grad);
    if (bytes != nullptr) *bytes += g->shape.NumElements() * static_cast<int64_t>(SizeOf(g->dtype));
  }
  return grads;
}

// Checks the gradient all_reduces of `dp` (transformed from `original`) and returns their
// buckets in program order. Every parameter gradient is in exactly one all_reduce, whose
// reduce is "mean" and whose inputs are its outputs; it comes after every (non-collective)
// writer of each of its gradients, with only collectives in between the last such writer and
// it, and before the first reader after that writer. Nothing but collectives was added.
Buckets CheckGradientAllReduces(const ir::ProgramDesc& original, const ir::ProgramDesc& dp) {
  const ir::BlockDesc& block = dp.global_block();
  const std::vector<ir::OpDesc>& ops = block.ops();
  EXPECT_EQ(WithoutCollectives(block), original.global_block().ops()) << Describe(dp);
  const std::vector<std::string> grads = ParameterGradients(original.global_block(), nullptr);
  Buckets buckets;
  std::vector<int> seen(grads.size(), 0);
  for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
    const ir::OpDesc& op = ops[k];
    if (op.type != "all_reduce") continue;
    const std::vector<std::string>& members = op.Input("X");
    const bool gradient_bucket = std::any_of(members.begin(), members.end(),
                                             [&](const auto& n) { return Contains(grads, n); });
    if (!gradient_bucket) continue;
    SCOPED_TRACE(absl::StrCat("all_reduce #", k, " of ", absl::StrJoin(members, ",")));
    EXPECT_EQ(op.Output("Out"), members) << "not in place";
    EXPECT_EQ(op.attrs.GetString("reduce").value_or(""), "mean");
    int last_writer = -1;
    for (const std::string& g : members) {
      if (!Contains(grads, g)) {
        ADD_FAILURE() << g << " shares a bucket with gradients";
        continue;
      }
      ++seen[std::find(grads.begin(), grads.end(), g) - grads.begin()];
      int writer = -1;
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        if (!IsCollective(ops[i]) && Contains(ops[i].OutputNames(), g)) writer = i;
      }
      int reader = kNone;
      for (int i = writer + 1; i < static_cast<int>(ops.size()) && reader == kNone; ++i) {
        if (!IsCollective(ops[i]) && Contains(ops[i].InputNames(), g)) reader = i;
      }
      EXPECT_LT(writer, k) << g << ": averaged before its last writer";
      EXPECT_LT(k, reader) << g << ": averaged after its first reader";
      last_writer = std::max(last_writer, writer);
    }
    for (int i = last_writer + 1; i < k; ++i) {
      EXPECT_TRUE(IsCollective(ops[i]))
          << "not right after the last writer: #" << i << " " << ops[i].type;
    }
    buckets.push_back(members);
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    EXPECT_EQ(seen[i], 1) << grads[i] << " averaged " << seen[i] << " times\n" << Describe(dp);
  }
  return buckets;
}

int CountOps(const ir::ProgramDesc& program, const std::string& type) {
  const auto& ops = program.global_block().ops();
  return static_cast<int>(
      std::count_if(ops.begin(), ops.end(), [&](const ir::OpDesc& op) { return op.type == type; }));
}

int64_t BucketCount(const Buckets& buckets) { return static_cast<int64_t>(buckets.size()); }

class DataParallelTransformTest : public ::testing::Test {
 protected:
  DataParallelTransformTest() { SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok()); }

  absl::StatusOr<ir::ProgramDesc> Transform(const ir::ProgramDesc& program,
                                            std::vector<std::string> split_feeds, int size,
                                            const DataParallelOptions& options = {}) {
    stats_ = DataParallelStats{};
    return MakeDataParallel(program, registry_, split_feeds, size, options, &stats_);
  }

  LinearRegression Linear() { return BuildLinearRegression(&registry_).value(); }
  GatedMlp Mlp(int64_t batch = 64) {
    GatedMlpOptions options;
    options.batch = batch;
    return BuildGatedMlp(&registry_, options).value();
  }

  ops::OpRegistry registry_;
  DataParallelStats stats_;
};

// ---------------------------------------------------------------------------------------
// Shapes.

TEST_F(DataParallelTransformTest, FeedsAreSplitAndBatchShapesReinferred) {
  LinearRegression model = Linear();
  const ir::BlockDesc& before = model.main->desc().global_block();
  absl::StatusOr<ir::ProgramDesc> dp = Transform(model.main->desc(), {model.x, model.y}, 4);
  ASSERT_TRUE(dp.ok()) << dp.status();
  const ir::BlockDesc& after = dp->global_block();
  ASSERT_EQ(after.vars().size(), before.vars().size());
  EXPECT_EQ(after.FindVar(model.x)->shape, Shape({4, 16}));
  EXPECT_EQ(after.FindVar(model.y)->shape, Shape({4, 1}));
  for (const ir::VarDesc& var : before.vars()) {
    SCOPED_TRACE(var.name);
    const ir::VarDesc* now = after.FindVar(var.name);
    ASSERT_NE(now, nullptr);
    EXPECT_EQ(now->dtype, var.dtype);
    EXPECT_EQ(now->persistable, var.persistable);
    EXPECT_EQ(now->is_parameter, var.is_parameter);
    if (var.persistable) {
      EXPECT_EQ(now->shape, var.shape);  // parameters and optimizer state keep theirs
    } else if (var.shape.rank() >= 1 && var.shape.dim(0) == 16 &&
               var.name != model.weight + "@GRAD") {
      // Everything that carried the batch now carries the rank's quarter of it.
      std::vector<int64_t> dims(var.shape.dims().begin(), var.shape.dims().end());
      dims[0] = 4;
      EXPECT_EQ(now->shape, Shape(dims));
    } else {
      EXPECT_EQ(now->shape, var.shape);
    }
  }
  // The weight's gradient is [16, 1] because the weight is, not because of the batch.
  EXPECT_EQ(after.FindVar(model.weight + "@GRAD")->shape, Shape({16, 1}));
  EXPECT_EQ(after.FindVar("matmul_0.out")->shape, Shape({4, 1}));
  EXPECT_EQ(after.FindVar(model.loss)->shape, Shape({}));
}

// Transforming the gated MLP built for a batch of 64 for 4 ranks declares exactly what
// building it for a batch of 16 declares, and keeps its ops.
TEST_F(DataParallelTransformTest, ReinferredShapesMatchAProgramBuiltForThePerRankBatch) {
  GatedMlp whole = Mlp(64);
  GatedMlp quarter = Mlp(16);
  absl::StatusOr<ir::ProgramDesc> dp = Transform(whole.main->desc(), {whole.x, whole.y}, 4);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->global_block().vars(), quarter.main->desc().global_block().vars());
  EXPECT_EQ(WithoutCollectives(dp->global_block()), quarter.main->desc().global_block().ops());
}

TEST_F(DataParallelTransformTest, SizeOneLeavesShapesAlone) {
  LinearRegression model = Linear();
  absl::StatusOr<ir::ProgramDesc> dp = Transform(model.main->desc(), {model.x, model.y}, 1);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->global_block().vars(), model.main->desc().global_block().vars());
  // Gradients are still averaged (a world of one).
  EXPECT_EQ(CheckGradientAllReduces(model.main->desc(), *dp).size(), 1u);
}

TEST_F(DataParallelTransformTest, ReplicatedFeedsAreNotSplit) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    Var x = Data("x", Shape({8, 4})).value();
    // [1, 4]: 2 does not divide its first dimension, so splitting it would be an error.
    Var t = Data("t", Shape({1, 4})).value();
    ASSERT_TRUE(fn::Add(x, t).ok());
  }
  DataParallelOptions options;
  options.replicated_feeds = {"t"};
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {"x", "t"}, 2, options);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->global_block().FindVar("x")->shape, Shape({4, 4}));
  EXPECT_EQ(dp->global_block().FindVar("t")->shape, Shape({1, 4}));
  EXPECT_EQ(dp->global_block().FindVar("add_0.out")->shape, Shape({4, 4}));
  // Without the option, t is split: refused.
  absl::StatusOr<ir::ProgramDesc> refused = Transform(main.desc(), {"x", "t"}, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("'t'"));
}

// ---------------------------------------------------------------------------------------
// Gradient averaging and buckets.

TEST_F(DataParallelTransformTest, LinearRegressionAveragesBothGradientsInOneBucket) {
  LinearRegression model = Linear();
  absl::StatusOr<ir::ProgramDesc> dp = Transform(model.main->desc(), {model.x, model.y}, 4);
  ASSERT_TRUE(dp.ok()) << dp.status();
  const Buckets buckets = CheckGradientAllReduces(model.main->desc(), *dp);
  ASSERT_EQ(buckets.size(), 1u);
  // In the order the backward pass produces them: the bias's first.
  EXPECT_THAT(buckets[0], ElementsAre(model.bias + "@GRAD", model.weight + "@GRAD"));
  // Right after the last gradient's writer (matmul_grad), before the first adam.
  const auto& ops = dp->global_block().ops();
  const auto it = std::find_if(ops.begin(), ops.end(),
                               [](const ir::OpDesc& op) { return op.type == "all_reduce"; });
  ASSERT_NE(it, ops.end());
  EXPECT_EQ((it - 1)->type, "matmul_grad");
  EXPECT_EQ((it + 1)->type, "adam");
  EXPECT_EQ(stats_.buckets, 1);
  EXPECT_EQ(stats_.gradients, 2);
  EXPECT_EQ(stats_.gradient_bytes, (16 + 1) * 4);
  EXPECT_EQ(stats_.broadcasts, 0);  // parameters are read before anything writes them
  EXPECT_EQ(CountOps(*dp, "broadcast"), 0);
  EXPECT_EQ(CountOps(*dp, "all_reduce"), 1);
}

// Three linear layers: 6 gradients, produced (backward) in the order
// linear_2.b [1], linear_2.w [64,1], linear_1.b [64], linear_1.w [64,64], linear_0.b [64],
// linear_0.w [32,64] — 4, 256, 256, 16384, 256 and 8192 bytes.
TEST_F(DataParallelTransformTest, BucketSizesFollowBucketBytes) {
  GatedMlp model = Mlp();
  const ir::ProgramDesc& main = model.main->desc();
  int64_t total = 0;
  const std::vector<std::string> grads = ParameterGradients(main.global_block(), &total);
  ASSERT_EQ(grads.size(), 6u);
  ASSERT_EQ(total, 4 + 256 + 256 + 16384 + 256 + 8192);
  struct Case {
    int64_t bucket_bytes;
    Buckets expected;
  };
  const Case cases[] = {
      {kHugeBucket,
       {{"linear_2.b@GRAD", "linear_2.w@GRAD", "linear_1.b@GRAD", "linear_1.w@GRAD",
         "linear_0.b@GRAD", "linear_0.w@GRAD"}}},
      {1,
       {{"linear_2.b@GRAD"},
        {"linear_2.w@GRAD"},
        {"linear_1.b@GRAD"},
        {"linear_1.w@GRAD"},
        {"linear_0.b@GRAD"},
        {"linear_0.w@GRAD"}}},
      // A bucket closes once it holds at least bucket_bytes: 4 + 256 + 256 >= 512.
      {512,
       {{"linear_2.b@GRAD", "linear_2.w@GRAD", "linear_1.b@GRAD"},
        {"linear_1.w@GRAD"},
        {"linear_0.b@GRAD", "linear_0.w@GRAD"}}},
      // Exactly at the boundary: 516 bytes held closes a bucket of 516.
      {516,
       {{"linear_2.b@GRAD", "linear_2.w@GRAD", "linear_1.b@GRAD"},
        {"linear_1.w@GRAD"},
        {"linear_0.b@GRAD", "linear_0.w@GRAD"}}},
      {517,
       {{"linear_2.b@GRAD", "linear_2.w@GRAD", "linear_1.b@GRAD", "linear_1.w@GRAD"},
        {"linear_0.b@GRAD", "linear_0.w@GRAD"}}},
      {16384,
       {{"linear_2.b@GRAD", "linear_2.w@GRAD", "linear_1.b@GRAD", "linear_1.w@GRAD"},
        {"linear_0.b@GRAD", "linear_0.w@GRAD"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("bucket_bytes ", c.bucket_bytes));
    DataParallelOptions options;
    options.bucket_bytes = c.bucket_bytes;
    absl::StatusOr<ir::ProgramDesc> dp = Transform(main, {model.x, model.y}, 2, options);
    ASSERT_TRUE(dp.ok()) << dp.status();
    EXPECT_EQ(CheckGradientAllReduces(main, *dp), c.expected);
    EXPECT_EQ(stats_.buckets, BucketCount(c.expected));
    EXPECT_EQ(stats_.gradients, 6);
    EXPECT_EQ(stats_.gradient_bytes, total);
    EXPECT_EQ(stats_.broadcasts, 0);
    EXPECT_EQ(CountOps(*dp, "all_reduce"), BucketCount(c.expected));
  }
}

// A weight used twice: its gradient is the sum of two partial ones, and only the sum (its
// last writer) may be averaged.
TEST_F(DataParallelTransformTest, GradientWithSeveralWritersIsAveragedAfterTheLast) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    Var x = Data("x", Shape({8, 4})).value();
    ir::VarDesc w{.name = "w", .shape = Shape({4, 4}), .persistable = true, .is_parameter = true};
    Var weight = CreateVar(main, w).value();
    Value h = fn::Matmul(x, weight).value();
    Value z = fn::Matmul(h, weight).value();
    Value loss = fn::ReduceMean(fn::Square(z).value()).value();
    Sgd sgd(0.1);
    ASSERT_TRUE(sgd.Minimize(loss.var()).ok());
  }
  int writers = 0;
  for (const ir::OpDesc& op : main.desc().global_block().ops()) {
    writers += Contains(op.OutputNames(), "w@GRAD") ? 1 : 0;
  }
  ASSERT_GE(writers, 1);
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {"x"}, 2);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(CheckGradientAllReduces(main.desc(), *dp), Buckets{{"w@GRAD"}});
  EXPECT_EQ(dp->global_block().FindVar("w@GRAD")->shape, Shape({4, 4}));
  EXPECT_EQ(dp->global_block().FindVar("x")->shape, Shape({4, 4}));
  const auto& ops = dp->global_block().ops();
  const auto it = std::find_if(ops.begin(), ops.end(),
                               [](const ir::OpDesc& op) { return op.type == "all_reduce"; });
  ASSERT_NE(it, ops.end());
  EXPECT_TRUE(Contains((it - 1)->OutputNames(), "w@GRAD")) << (it - 1)->type;
  EXPECT_EQ((it + 1)->type, "sgd");
  EXPECT_EQ(stats_.gradient_bytes, 16 * 4);
}

// Hand-placed gradients: a bucket must close when the next gradient is produced after a
// member was read, and gradients of another dtype go into a bucket of their own, whatever
// bucket_bytes allows.
//   #0 writes p1@GRAD   #1 reads p1@GRAD   #2 writes p2@GRAD   #3 writes p4@GRAD
//   #4 writes p3@GRAD (f64)   #5, #6, #7 read p2@GRAD, p4@GRAD, p3@GRAD
TEST_F(DataParallelTransformTest, BucketsCloseBeforeAReaderAndBetweenDtypes) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    auto param = [&](const std::string& name, DataType dtype, int64_t n) {
      ir::VarDesc p{.name = name,
                    .dtype = dtype,
                    .shape = Shape({n}),
                    .persistable = true,
                    .is_parameter = true};
      SLUICE_CHECK(CreateVar(main, p).ok());
      ir::VarDesc g{.name = name + "@GRAD", .dtype = dtype, .shape = Shape({n})};
      return CreateVar(main, g).value();
    };
    auto fill = [&](const Var& grad, DataType dtype, int64_t n) {
      SLUICE_CHECK(AppendOpInto(main, "fill_constant", {}, {{grad}},
                                vm::AttrMap()
                                    .Set("shape", std::vector<int64_t>{n})
                                    .Set("value", 1.0)
                                    .Set("dtype", std::string(DataTypeName(dtype))))
                       .ok());
    };
    Var g1 = param("p1", DataType::kF32, 4), g2 = param("p2", DataType::kF32, 4);
    Var g3 = param("p3", DataType::kF64, 2), g4 = param("p4", DataType::kF32, 8);
    fill(g1, DataType::kF32, 4);
    ASSERT_TRUE(fn::Scale(g1, 2.0).ok());
    fill(g2, DataType::kF32, 4);
    fill(g4, DataType::kF32, 8);
    fill(g3, DataType::kF64, 2);
    ASSERT_TRUE(fn::Scale(g2, 2.0).ok());
    ASSERT_TRUE(fn::Scale(g4, 2.0).ok());
    ASSERT_TRUE(fn::Scale(g3, 2.0).ok());
  }
  DataParallelOptions options;
  options.bucket_bytes = kHugeBucket;
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {}, 3, options);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(CheckGradientAllReduces(main.desc(), *dp),
            (Buckets{{"p1@GRAD"}, {"p2@GRAD", "p4@GRAD"}, {"p3@GRAD"}}));
  std::vector<std::string> types;
  for (const ir::OpDesc& op : dp->global_block().ops()) types.push_back(op.type);
  EXPECT_THAT(types,
              ElementsAre("fill_constant", "all_reduce", "scale", "fill_constant", "fill_constant",
                          "all_reduce", "fill_constant", "all_reduce", "scale", "scale", "scale"));
  EXPECT_EQ(stats_.buckets, 3);
  EXPECT_EQ(stats_.gradients, 4);
  EXPECT_EQ(stats_.gradient_bytes, 4 * 4 + 4 * 4 + 2 * 8 + 8 * 4);
  EXPECT_EQ(stats_.broadcasts, 0);
}

// ---------------------------------------------------------------------------------------
// Broadcasts and averaged variables.

TEST_F(DataParallelTransformTest, StartupBroadcastsEveryPersistableItInitializes) {
  LinearRegression model = Linear();
  const ir::ProgramDesc& startup = model.startup->desc();
  absl::StatusOr<ir::ProgramDesc> dp = Transform(startup, {}, 4);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(WithoutCollectives(dp->global_block()), startup.global_block().ops());
  EXPECT_EQ(dp->global_block().vars(), startup.global_block().vars());
  EXPECT_EQ(CountOps(*dp, "all_reduce"), 0);
  // One broadcast from rank 0 per initialized persistable, right after its initializer.
  std::vector<std::string> broadcast;
  const auto& ops = dp->global_block().ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].type != "broadcast") continue;
    ASSERT_EQ(ops[i].Input("X").size(), 1u);
    const std::string& name = ops[i].Input("X")[0];
    SCOPED_TRACE(name);
    EXPECT_EQ(ops[i].Output("Out"), ops[i].Input("X"));
    EXPECT_EQ(ops[i].attrs.GetInt("root").value_or(-1), 0);
    ASSERT_GT(i, 0u);
    EXPECT_TRUE(Contains(ops[i - 1].OutputNames(), name)) << ops[i - 1].type;
    broadcast.push_back(name);
  }
  std::vector<std::string> persistables;
  for (const ir::VarDesc& var : startup.global_block().vars()) {
    if (var.persistable) persistables.push_back(var.name);
  }
  ASSERT_EQ(persistables.size(), 11u);  // w, b, the learning rate, 4 Adam states per param
  std::sort(broadcast.begin(), broadcast.end());
  std::sort(persistables.begin(), persistables.end());
  EXPECT_EQ(broadcast, persistables);
  EXPECT_EQ(stats_.broadcasts, 11);
  EXPECT_EQ(stats_.buckets, 0);
  EXPECT_EQ(stats_.gradients, 0);
  EXPECT_EQ(stats_.gradient_bytes, 0);
}

// Only what a program initializes is broadcast: a persistable it reads first (a parameter it
// updates) or does not touch is not, nor is a non-persistable it writes.
TEST_F(DataParallelTransformTest, BroadcastsOnlyPersistablesWrittenBeforeRead) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    auto persistable = [&](const std::string& name) {
      ir::VarDesc v{.name = name, .shape = Shape({2}), .persistable = true};
      return CreateVar(main, v).value();
    };
    Var initialized = persistable("initialized"), updated = persistable("updated");
    persistable("untouched");
    const vm::AttrMap fill = vm::AttrMap()
                                 .Set("shape", std::vector<int64_t>{2})
                                 .Set("value", 3.0)
                                 .Set("dtype", std::string("f32"));
    ASSERT_TRUE(AppendOpInto(main, "fill_constant", {}, {{initialized}}, fill).ok());
    ASSERT_TRUE(
        AppendOpInto(main, "scale", {{updated}}, {{updated}}, vm::AttrMap().Set("scale", 2.0))
            .ok());
    ASSERT_TRUE(fn::Scale(initialized, 2.0).ok());  // a temporary
  }
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {}, 2);
  ASSERT_TRUE(dp.ok()) << dp.status();
  std::vector<std::string> types;
  for (const ir::OpDesc& op : dp->global_block().ops()) types.push_back(op.type);
  EXPECT_THAT(types, ElementsAre("fill_constant", "broadcast", "scale", "scale"));
  EXPECT_EQ(dp->global_block().ops()[1].Input("X"), std::vector<std::string>{"initialized"});
  EXPECT_EQ(stats_.broadcasts, 1);
}

TEST_F(DataParallelTransformTest, AveragedVariablesAreReducedAtTheEndWhenWritten) {
  LinearRegression model = Linear();
  DataParallelOptions options;
  // The loss is written by main; x is only read; "nowhere" is no variable at all.
  options.averaged = {model.loss, model.x, "nowhere"};
  absl::StatusOr<ir::ProgramDesc> dp =
      Transform(model.main->desc(), {model.x, model.y}, 2, options);
  ASSERT_TRUE(dp.ok()) << dp.status();
  const auto& ops = dp->global_block().ops();
  ASSERT_FALSE(ops.empty());
  const ir::OpDesc& last = ops.back();
  EXPECT_EQ(last.type, "all_reduce");
  EXPECT_EQ(last.Input("X"), std::vector<std::string>{model.loss});
  EXPECT_EQ(last.Output("Out"), std::vector<std::string>{model.loss});
  EXPECT_EQ(last.attrs.GetString("reduce").value_or(""), "mean");
  EXPECT_EQ(CountOps(*dp, "all_reduce"), 2);  // the gradient bucket and the loss
  for (const ir::OpDesc& op : ops) {
    if (op.type == "all_reduce") {
      EXPECT_FALSE(Contains(op.Input("X"), model.x));
    }
  }
  EXPECT_EQ(stats_.buckets, 1);  // averaged variables are no bucket
  CheckGradientAllReduces(model.main->desc(), *dp);

  // The startup program does not write the loss: nothing to average there.
  absl::StatusOr<ir::ProgramDesc> startup = Transform(model.startup->desc(), {}, 2, options);
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_EQ(CountOps(*startup, "all_reduce"), 0);
}

// ---------------------------------------------------------------------------------------
// Errors.

TEST_F(DataParallelTransformTest, FeedWhoseFirstDimensionDoesNotSplitIsRefused) {
  LinearRegression model = Linear();
  for (int size : {3, 5, 32}) {
    SCOPED_TRACE(size);
    absl::StatusOr<ir::ProgramDesc> dp = Transform(model.main->desc(), {model.x, model.y}, size);
    EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(dp.status().message(), HasSubstr("'x'"));
  }
  // A scalar feed has no first dimension to split.
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    ASSERT_TRUE(fn::Scale(Data("s", Shape()).value(), 2.0).ok());
  }
  absl::StatusOr<ir::ProgramDesc> scalar = Transform(main.desc(), {"s"}, 2);
  EXPECT_EQ(scalar.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scalar.status().message(), HasSubstr("'s'"));
}

TEST_F(DataParallelTransformTest, WorldSizeBelowOneIsRefused) {
  LinearRegression model = Linear();
  for (int size : {0, -2}) {
    SCOPED_TRACE(size);
    EXPECT_EQ(Transform(model.main->desc(), {model.x, model.y}, size).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Transform(model.startup->desc(), {}, size).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(DataParallelTransformTest, FeedThatIsNoVariableIsRefused) {
  LinearRegression model = Linear();
  absl::StatusOr<ir::ProgramDesc> dp = Transform(model.main->desc(), {model.x, "ghost"}, 2);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dp.status().message(), HasSubstr("'ghost'"));
}

TEST_F(DataParallelTransformTest, SplitFeedInAProgramWithSubBlocksIsUnimplemented) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    const Var x = Data("x", Shape({8, 4})).value();
    const Var p = Data("p", Shape(), DataType::kBool).value();
    absl::StatusOr<std::vector<Value>> out = fn::Cond(
        p,
        [&]() -> absl::StatusOr<std::vector<Value>> {
          SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(x, 2.0));
          return std::vector<Value>{y};
        },
        [&]() -> absl::StatusOr<std::vector<Value>> { return std::vector<Value>{x}; });
    ASSERT_TRUE(out.ok()) << out.status();
  }
  ASSERT_GT(main.desc().num_blocks(), 1);
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {"x"}, 2);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kUnimplemented) << dp.status();
  // Nothing split (x replicated): nothing to infer again, accepted.
  DataParallelOptions options;
  options.replicated_feeds = {"x"};
  EXPECT_TRUE(Transform(main.desc(), {"x"}, 2, options).ok());
}

TEST_F(DataParallelTransformTest, OpRefusingThePerRankShapesIsNamed) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    const Var x = Data("x", Shape({8, 16})).value();
    ASSERT_TRUE(fn::Reshape(x, {128}).ok());  // the whole batch's element count, fixed
  }
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {"x"}, 2);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dp.status().message(), HasSubstr("'reshape'"));
}

TEST_F(DataParallelTransformTest, PersistableThatWouldDependOnTheBatchIsRefused) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    const Var x = Data("x", Shape({8, 4})).value();
    ir::VarDesc desc{.name = "running", .shape = Shape({8, 4}), .persistable = true};
    const Var running = CreateVar(main, desc).value();
    ASSERT_TRUE(
        AppendOpInto(main, "scale", {{x}}, {{running}}, vm::AttrMap().Set("scale", 0.5)).ok());
  }
  absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), {"x"}, 2);
  EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dp.status().message(), HasSubstr("'running'"));
}

// A feed named twice in `split_feeds` is refused (it was divided once per mention, leaving
// the program declaring a shape its shards do not have); the Executor's own feed list
// cannot name a feed twice.
TEST_F(DataParallelTransformTest, FeedNamedTwiceIsSplitOnce) {
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    ASSERT_TRUE(fn::Scale(Data("x", Shape({16, 4})).value(), 2.0).ok());
  }
  for (const std::vector<std::string>& feeds :
       {std::vector<std::string>{"x", "x"}, std::vector<std::string>{"x", "x", "x"}}) {
    SCOPED_TRACE(feeds.size());
    absl::StatusOr<ir::ProgramDesc> dp = Transform(main.desc(), feeds, 2);
    if (!dp.ok()) {
      EXPECT_EQ(dp.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(dp.status().message(), HasSubstr("'x'"));
      continue;
    }
    EXPECT_EQ(dp->global_block().FindVar("x")->shape.ToString(), Shape({8, 4}).ToString());
    EXPECT_EQ(dp->global_block().FindVar("scale_0.out")->shape.ToString(),
              Shape({8, 4}).ToString());
  }
}

// ---------------------------------------------------------------------------------------
// ShardFeed.

TEST(DataParallelShardFeedTest, RanksRowsConcatenateToTheFeed) {
  std::vector<float> values(6 * 2 * 3);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const HostTensor feed = HostTensor::FromVector(values, Shape({6, 2, 3}));
  for (int size : {1, 2, 3, 6}) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> joined;
    for (int rank = 0; rank < size; ++rank) {
      absl::StatusOr<HostTensor> shard = ShardFeed("x", feed, rank, size);
      ASSERT_TRUE(shard.ok()) << shard.status();
      EXPECT_EQ(shard->dtype, DataType::kF32);
      EXPECT_EQ(shard->shape, Shape({6 / size, 2, 3}));
      EXPECT_EQ(shard->bytes.size(), feed.bytes.size() / static_cast<size_t>(size));
      joined.insert(joined.end(), shard->bytes.begin(), shard->bytes.end());
    }
    EXPECT_EQ(joined, feed.bytes);
  }
  // Another dtype, one dimension: each rank one element.
  const HostTensor ids = HostTensor::FromVector(std::vector<int64_t>{7, -1, 40, 3}, Shape({4}));
  std::vector<int64_t> got;
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<HostTensor> shard = ShardFeed("ids", ids, rank, 4);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(shard->dtype, DataType::kI64);
    EXPECT_EQ(shard->shape, Shape({1}));
    for (int64_t v : shard->ToVector<int64_t>()) got.push_back(v);
  }
  EXPECT_THAT(got, ElementsAre(7, -1, 40, 3));
}

TEST(DataParallelShardFeedTest, EmptyFeedSplitsIntoEmptyShards) {
  const HostTensor feed = HostTensor::FromVector(std::vector<float>{}, Shape({0, 3}));
  absl::StatusOr<HostTensor> shard = ShardFeed("x", feed, 1, 2);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(shard->shape, Shape({0, 3}));
  EXPECT_TRUE(shard->bytes.empty());
}

TEST(DataParallelShardFeedTest, ScalarsAndUnevenFirstDimensionsAreRefused) {
  const HostTensor scalar = HostTensor::FromVector(std::vector<float>{1.0f}, Shape());
  absl::StatusOr<HostTensor> s = ShardFeed("lr", scalar, 0, 2);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("'lr'"));
  const HostTensor rows = HostTensor::FromVector(std::vector<float>(10, 1.0f), Shape({5, 2}));
  absl::StatusOr<HostTensor> r = ShardFeed("rows", rows, 1, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'rows'"));
}

// ShardFeed refuses a world size of 0 (a division by zero before).
TEST(DataParallelShardFeedTest, WorldSizeZeroIsRefused) {
  const HostTensor feed = HostTensor::FromVector(std::vector<float>(8, 1.0f), Shape({4, 2}));
  EXPECT_EQ(ShardFeed("x", feed, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// And a negative world size.
TEST(DataParallelShardFeedTest, NegativeWorldSizeIsRefused) {
  const HostTensor feed = HostTensor::FromVector(std::vector<float>(8, 1.0f), Shape({4, 2}));
  EXPECT_EQ(ShardFeed("x", feed, 0, -2).status().code(), absl::StatusCode::kInvalidArgument);
}

// And a rank outside [0, size) (it read outside the feed's bytes before).
TEST(DataParallelShardFeedTest, RankOutOfRangeIsRefused) {
  const HostTensor feed = HostTensor::FromVector(std::vector<float>(8, 1.0f), Shape({4, 2}));
  EXPECT_EQ(ShardFeed("x", feed, 2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShardFeed("x", feed, -1, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------
// Through the Executor, in a world of one: the all_reduces and broadcasts are copies, so the
// transformed program must train exactly as the plain one.

struct Trained {
  std::vector<float> losses;
  int64_t startup_ops = 0;
  int64_t step_ops = 0;
};

Trained TrainLinearRegression(eager::Context& ctx, bool data_parallel, int steps) {
  Trained trained;
  absl::StatusOr<LinearRegression> model = BuildLinearRegression(&ctx.registry());
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return trained;
  ExecutorOptions options;
  if (data_parallel) {
    DataParallelOptions dp;
    dp.averaged = {model->loss};
    absl::StatusOr<std::shared_ptr<const ProgramTransform>> transform = MakeDataParallelTransform(
        &ctx.registry(), ctx.runtime()->world().rank(), ctx.runtime()->world().size(), dp);
    EXPECT_TRUE(transform.ok()) << transform.status();
    if (transform.ok()) options.transform = *transform;
  }
  Executor executor(&ctx.registry(), ctx.vm(), options);
  Scope scope;
  absl::StatusOr<RunResult> init = executor.Run(model->startup->desc(), {}, {}, &scope);
  EXPECT_TRUE(init.ok()) << init.status();
  if (!init.ok()) return trained;
  trained.startup_ops = init->stats.ops_run;
  const Feeds feeds = {{model->x, LinearRegressionInput()}, {model->y, LinearRegressionTarget()}};
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<RunResult> result =
        executor.Run(model->main->desc(), feeds, {model->loss}, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) break;
    trained.step_ops = result->stats.ops_run;
    trained.losses.push_back(result->fetches[0].ToVector<float>()[0]);
  }
  return trained;
}

TEST(DataParallelExecutorTest, OneRankTransformedStepsGiveThePlainLosses) {
  absl::StatusOr<eager::Context> ctx = eager::Context::Create();
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  ASSERT_EQ(ctx->runtime()->world().size(), 1);
  constexpr int kSteps = 3;
  const Trained plain = TrainLinearRegression(*ctx, /*data_parallel=*/false, kSteps);
  const Trained parallel = TrainLinearRegression(*ctx, /*data_parallel=*/true, kSteps);
  ASSERT_EQ(plain.losses.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(parallel.losses.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(parallel.losses[i], plain.losses[i]) << "step " << i + 1;
  }
  EXPECT_LT(plain.losses.back(), plain.losses.front());  // it does train
  // The transformed programs ran: 11 broadcasts in startup; one gradient bucket and the
  // loss's all_reduce in each step.
  EXPECT_EQ(parallel.startup_ops, plain.startup_ops + 11);
  EXPECT_EQ(parallel.step_ops, plain.step_ops + 2);
}

// The transform the executor is handed: its rank is checked; MapFeeds gives this rank's rows
// of a split feed and a replicated feed whole, and refuses device-resident feeds; Rewrite is
// MakeDataParallel of the host feeds.
TEST(DataParallelExecutorTest, TheTransformMapsFeedsForItsRank) {
  ops::OpRegistry registry;
  ASSERT_TRUE(ops::RegisterStandardOps(&registry).ok());
  EXPECT_EQ(MakeDataParallelTransform(&registry, 2, 2, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeDataParallelTransform(&registry, -1, 2, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MakeDataParallelTransform(nullptr, 0, 1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  DataParallelOptions options;
  options.replicated_feeds = {"lr"};
  absl::StatusOr<std::shared_ptr<const ProgramTransform>> transform =
      MakeDataParallelTransform(&registry, 1, 2, options);
  ASSERT_TRUE(transform.ok()) << transform.status();
  const Feeds feeds = {{"x", HostTensor::FromVector(std::vector<float>{1, 2, 3, 4}, Shape({4}))},
                       {"lr", HostTensor::FromVector(std::vector<float>{0.5f}, Shape({1}))}};
  absl::StatusOr<Feeds> mapped = (*transform)->MapFeeds(feeds, {});
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_EQ(mapped->size(), 2u);
  EXPECT_EQ((*mapped)[0].second.ToVector<float>(), (std::vector<float>{3, 4}));  // rank 1's rows
  EXPECT_EQ((*mapped)[1].second.ToVector<float>(), (std::vector<float>{0.5f}));
  const BlobFeeds device_feeds = {{"x", vm::BlobRef()}};
  EXPECT_EQ((*transform)->MapFeeds({}, device_feeds).status().code(),
            absl::StatusCode::kUnimplemented);

  absl::StatusOr<LinearRegression> model = BuildLinearRegression(&registry);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<std::string> host_feeds = {model->x, model->y};
  absl::StatusOr<ir::ProgramDesc> rewritten =
      (*transform)->Rewrite(model->main->desc(), host_feeds);
  absl::StatusOr<ir::ProgramDesc> direct =
      MakeDataParallel(model->main->desc(), registry, host_feeds, 2, options);
  ASSERT_TRUE(rewritten.ok() && direct.ok());
  EXPECT_EQ(rewritten->ToText(), direct->ToText());
}

}  // namespace
}  // namespace sluice::framework::data_parallel_transform_test
