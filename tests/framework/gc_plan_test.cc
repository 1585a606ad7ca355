// PlanNodes on hand-built funcs: a release follows the last func touching a temporary, on
// the stream of its first writer, depending on every func that touches it; on host streams
// an ordered release follows the last toucher alone, and unordered touchers on several
// host streams get a drop each (a shared release); fed, fetched, persistable and untouched
// variables are never released; node predecessors map through the releases in between;
// and with releases off there is one node per func.
#include "framework/interpreter/gc_plan.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/lowered_graph_test_util.h"
#include "vm/kernel.h"

namespace sluice::framework::gc_plan_test {
namespace {

using graph_test::Func;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

VarTable Vars(const std::vector<VarKind>& kinds) {
  VarTable table;
  for (size_t v = 0; v < kinds.size(); ++v)
    graph_test::AddSlot(table, absl::StrCat("v", v), kinds[v]);
  return table;
}

DependencyGraph Deps(std::vector<std::vector<int>> preds) {
  DependencyGraph g;
  g.predecessors = std::move(preds);
  return g;
}

// v0 fed, v1 persistable, v2..v5 temporaries (v4 fetched, v5 untouched).
//   f0: v2 = g(v0)          stream 0
//   f1: v3 = g(v2, v1)      stream 1
//   f2: v4 = g(v3, v2)      stream 1
class GcPlanTest : public ::testing::Test {
 protected:
  GcPlanTest()
      : vars_(Vars({VarKind::kFeed, VarKind::kPersistable, VarKind::kTemp, VarKind::kTemp,
                    VarKind::kTemp, VarKind::kTemp})),
        funcs_({Func({0}, {2}), Func({2, 1}, {3}), Func({3, 2}, {4})}),
        deps_(Deps({{}, {0}, {1}})) {
    vars_.slots[4].fetched = true;
  }

  VarTable vars_;
  std::vector<OpFunc> funcs_;
  DependencyGraph deps_;
  const std::vector<int> streams_ = {0, 1, 1};
};

TEST_F(GcPlanTest, ReleasesFollowTheLastUseOnTheFirstWritersStream) {
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, true);
  // f0, f1, f2, then the releases of v2 and v3 (both last touched by f2), in slot order.
  ASSERT_EQ(nodes.size(), 5u);
  EXPECT_EQ(nodes[0].op, 0);
  EXPECT_EQ(nodes[1].op, 1);
  EXPECT_EQ(nodes[2].op, 2);
  EXPECT_EQ(nodes[3].op, -1);
  EXPECT_EQ(nodes[3].var, 2);
  EXPECT_EQ(nodes[3].stream, 0);  // v2's first writer runs on stream 0
  EXPECT_THAT(nodes[3].preds, ElementsAre(0, 1, 2));
  EXPECT_EQ(nodes[4].var, 3);
  EXPECT_EQ(nodes[4].stream, 1);
  EXPECT_THAT(nodes[4].preds, ElementsAre(1, 2));
  EXPECT_THAT(nodes[2].preds, ElementsAre(1));
}

TEST_F(GcPlanTest, PredecessorsMapThroughEarlierReleases) {
  // f3 reads v4 after f2: v3 and v2 are released between, so f3 is node 5 and its
  // predecessor f2 stays node 2.
  funcs_.push_back(Func({4}, {}));
  deps_.predecessors.push_back({2});
  const std::vector<int> streams = {0, 1, 1, 0};
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams, true);
  ASSERT_EQ(nodes.size(), 6u);
  EXPECT_EQ(nodes[5].op, 3);
  EXPECT_THAT(nodes[5].preds, ElementsAre(2));
}

TEST_F(GcPlanTest, OnlyUnfetchedTouchedTemporariesAreReleased) {
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, true);
  std::vector<int> released;
  for (const Node& node : nodes) {
    if (node.op < 0) released.push_back(node.var);
  }
  EXPECT_THAT(released, ElementsAre(2, 3));  // not v0 (fed), v1, v4 (fetched), v5 (untouched)
}

TEST_F(GcPlanTest, WithoutReleasesOneNodePerFunc) {
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, false);
  ASSERT_EQ(nodes.size(), 3u);
  for (int f = 0; f < 3; ++f) {
    EXPECT_EQ(nodes[f].op, f);
    EXPECT_EQ(nodes[f].stream, streams_[f]);
  }
}

TEST_F(GcPlanTest, OnHostStreamsAnOrderedReleaseFollowsTheLastToucherAlone) {
  // v2: written by f0 (stream 0), read by f1 and f2 (stream 1), f2 after f1 after f0: f2
  // follows every other toucher, so the release goes after f2 on stream 1 with the
  // touchers there as its only predecessors (f0 is implied).
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, true, {true, true});
  ASSERT_EQ(nodes.size(), 5u);
  EXPECT_EQ(nodes[3].var, 2);
  EXPECT_EQ(nodes[3].stream, 1);
  EXPECT_THAT(nodes[3].preds, ElementsAre(1, 2));
  EXPECT_EQ(nodes[3].drops, 0);
}

// v2 written by f0 on stream 0, then read by f1 on stream 1 and by f2 on stream 0 with no
// order between f1 and f2.
class SharedReleaseTest : public ::testing::Test {
 protected:
  SharedReleaseTest()
      : vars_(
            Vars({VarKind::kFeed, VarKind::kTemp, VarKind::kTemp, VarKind::kTemp, VarKind::kTemp})),
        funcs_({Func({0}, {1}), Func({1}, {2}), Func({1}, {3}), Func({2, 3}, {4})}),
        deps_(Deps({{}, {0}, {0}, {1, 2}})) {
    vars_.slots[4].fetched = true;
  }
  VarTable vars_;
  std::vector<OpFunc> funcs_;
  DependencyGraph deps_;
  const std::vector<int> streams_ = {0, 1, 0, 0};
};

TEST_F(SharedReleaseTest, UnorderedTouchersOnHostStreamsDropOnEach) {
  const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, true, {true, true});
  std::vector<const Node*> drops;
  for (const Node& node : nodes) {
    if (node.op < 0 && node.var == 1) drops.push_back(&node);
  }
  ASSERT_EQ(drops.size(), 2u);
  // One after f1 on stream 1 (node 2), one after f2 on stream 0 (f0 and f2 touch it there).
  EXPECT_EQ(drops[0]->stream, 1);
  EXPECT_THAT(drops[0]->preds, ElementsAre(1));
  EXPECT_EQ(drops[1]->stream, 0);
  EXPECT_THAT(drops[1]->preds, ElementsAre(0, 3));
  for (const Node* drop : drops) EXPECT_EQ(drop->drops, 2);
}

TEST_F(SharedReleaseTest, OffTheHostOneReleaseWaitsForEveryToucher) {
  for (const std::vector<bool>& host : {std::vector<bool>{}, std::vector<bool>{true, false}}) {
    const std::vector<Node> nodes = PlanNodes(funcs_, vars_, deps_, streams_, true, host);
    std::vector<const Node*> releases;
    for (const Node& node : nodes) {
      if (node.op < 0 && node.var == 1) releases.push_back(&node);
    }
    ASSERT_EQ(releases.size(), 1u);
    EXPECT_EQ(releases[0]->stream, 0);  // the first writer's
    EXPECT_EQ(releases[0]->drops, 0);
    EXPECT_EQ(releases[0]->preds.size(), 3u);
  }
}

TEST_F(GcPlanTest, NoFuncsNoNodes) {
  EXPECT_THAT(PlanNodes({}, vars_, Deps({}), {}, true), IsEmpty());
}

}  // namespace
}  // namespace sluice::framework::gc_plan_test

namespace sluice::framework::gc_plan_test {
namespace {

// Reads its first input's shape alone (as add_grad reads X and Y).
class ShapeOnlyKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "shape_only"; }
  absl::Status Launch(vm::KernelContext&) const override { return absl::OkStatus(); }
  bool ReadsShapeOnly(int input) const override { return input == 0; }
};

// v0 fed, v1..v3 temporaries, v3 fetched: f0 writes v1, f1 reads v1's values, f2 reads
// v1's shape alone. v1's release follows f1, its last reader of values; with a kernel that
// reads values there, it follows f2.
TEST(GcPlanShapeOnlyTest, AShapeOnlyReadKeepsNoStorageAlive) {
  VarTable vars = Vars({VarKind::kFeed, VarKind::kTemp, VarKind::kTemp, VarKind::kTemp});
  vars.slots[3].fetched = true;
  std::vector<OpFunc> funcs = {Func({0}, {1}), Func({1}, {2}), Func({1, 2}, {3})};
  const ShapeOnlyKernel shape_only;
  const DependencyGraph deps = Deps({{}, {0}, {0, 1}});
  const std::vector<int> streams = {0, 0, 0};
  auto release_after = [&](int var) {
    const std::vector<Node> nodes = PlanNodes(funcs, vars, deps, streams, true);
    int last_op = -1;
    for (const Node& node : nodes) {
      if (node.op >= 0) last_op = node.op;
      if (node.op < 0 && node.var == var) return last_op;
    }
    return -2;
  };
  EXPECT_EQ(release_after(1), 2);  // no kernel: every input is a use
  funcs[2].kernel = &shape_only;
  EXPECT_EQ(release_after(1), 1);
  EXPECT_EQ(release_after(2), 2);  // input 1 of f2 is read for its values
}

}  // namespace
}  // namespace sluice::framework::gc_plan_test
