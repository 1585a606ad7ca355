// PlanGraphTasks (framework/interpreter/graph_lowering.h): the tasks of the shared step graph
// and their edges, checked on hand-made node lists. The storage rules are the part that
// stream order gave lanes for free: a hand-off's taker waits for the release's task (shown
// to be missing from the dependence edges alone), and an in-place op's task holds the
// release, so it waits for the input's other readers.
#include "framework/interpreter/graph_lowering.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

OpFunc Func(std::vector<int> inputs, std::vector<int> outputs) {
  OpFunc f;
  f.type = "op";
  f.inputs = std::move(inputs);
  f.outputs = std::move(outputs);
  return f;
}

Node OpNode(int op, std::vector<int> preds) {
  Node n;
  n.op = op;
  n.preds = std::move(preds);
  return n;
}

Node Release(int var, std::vector<int> preds, int handoff_to = -1) {
  Node n;
  n.var = var;
  n.handoff_to = handoff_to;
  n.preds = std::move(preds);
  return n;
}

TEST(GraphLoweringTest, ATaskIsAnOpAndTheReleasesAfterIt) {
  // v0 = f0(); v1 = f1(v0); release v0; v2 = f2(v1); release v1.
  const std::vector<OpFunc> funcs = {Func({}, {0}), Func({0}, {1}), Func({1}, {2})};
  const std::vector<Node> nodes = {OpNode(0, {}), OpNode(1, {0}), Release(0, {1}), OpNode(2, {1}),
                                   Release(1, {3})};
  absl::StatusOr<GraphTasks> tasks = PlanGraphTasks(funcs, nodes, 3);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->nodes.size(), 3u);
  EXPECT_THAT(tasks->nodes[1], ElementsAre(1, 2));
  EXPECT_THAT(tasks->nodes[2], ElementsAre(3, 4));
  EXPECT_THAT(tasks->preds[0], IsEmpty());
  EXPECT_THAT(tasks->preds[1], ElementsAre(0));
  EXPECT_THAT(tasks->preds[2], ElementsAre(1));
}

TEST(GraphLoweringTest, AHandOffsTakerWaitsForTheRelease) {
  // v0 = f0(); v1 = f1(v0); release v0 -> v2; v2 = f2(v3): f2 touches nothing of v0, so only
  // the hand-off orders its write (into v0's storage) after f1's read.
  const std::vector<OpFunc> funcs = {Func({}, {0}), Func({0}, {1}), Func({3}, {2})};
  const std::vector<Node> nodes = {OpNode(0, {}), OpNode(1, {0}), Release(0, {1}, /*to=*/2),
                                   OpNode(2, {})};
  absl::StatusOr<GraphTasks> tasks = PlanGraphTasks(funcs, nodes, 4);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(tasks->preds[2], ElementsAre(1));
  // The same nodes without the hand-off: nothing orders f2.
  std::vector<Node> plain = nodes;
  plain[2].handoff_to = -1;
  absl::StatusOr<GraphTasks> unordered = PlanGraphTasks(funcs, plain, 4);
  ASSERT_TRUE(unordered.ok());
  EXPECT_THAT(unordered->preds[2], IsEmpty());
}

TEST(GraphLoweringTest, AnInPlaceOpWaitsForTheInputsOtherReaders) {
  // v0 = f0(); v1 = f1(v0); v2 = f2(v0) in place of v0; release v0 -> v2 (after f2, waiting
  // for both readers). f1 and f2 share no dependence edge; the release in f2's task orders
  // f2's task after f1's.
  const std::vector<OpFunc> funcs = {Func({}, {0}), Func({0}, {1}), Func({0}, {2})};
  const std::vector<Node> nodes = {OpNode(0, {}), OpNode(1, {0}), OpNode(2, {0}),
                                   Release(0, {1, 2}, /*to=*/2)};
  absl::StatusOr<GraphTasks> tasks = PlanGraphTasks(funcs, nodes, 3);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  EXPECT_THAT(tasks->nodes[2], ElementsAre(2, 3));
  EXPECT_THAT(tasks->preds[2], ElementsAre(0, 1));
}

TEST(GraphLoweringTest, ATakerBeforeItsReleaseIsRefused) {
  const std::vector<OpFunc> funcs = {Func({}, {0}), Func({}, {1}), Func({0}, {2})};
  const std::vector<Node> nodes = {OpNode(0, {}), OpNode(1, {}), OpNode(2, {0}),
                                   Release(0, {2}, /*to=*/1)};
  absl::StatusOr<GraphTasks> tasks = PlanGraphTasks(funcs, nodes, 3);
  ASSERT_FALSE(tasks.ok());
  EXPECT_THAT(std::string(tasks.status().message()), ::testing::HasSubstr("node 3"));
}

}  // namespace
}  // namespace sluice::framework
