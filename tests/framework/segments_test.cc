// FormSegments: a segment ends at a node another stream depends on and a new one starts
// at a node that depends on another stream; positions count per stream; without fusion
// every node is a segment.
#include "framework/interpreter/segments.h"

#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::segments_test {
namespace {

using ::testing::ElementsAre;

Node At(int stream, std::vector<int> preds) {
  Node node;
  node.op = 0;
  node.stream = stream;
  node.preds = std::move(preds);
  return node;
}

TEST(SegmentsTest, CutAtEdgesBetweenStreams) {
  // n0 → n1 on stream 0; n1 feeds n2 → n3 on stream 1; n4 on stream 0 after n1; n5 on
  // stream 0 needs n3. A segment ends at a node another stream reads and starts at a node
  // that reads another stream.
  std::vector<Node> nodes = {At(0, {}),  At(0, {0}), At(1, {1}),
                             At(1, {2}), At(0, {1}), At(0, {4, 3})};
  const std::vector<Segment> fused = FormSegments(nodes, /*fuse=*/true);
  ASSERT_EQ(fused.size(), 4u);
  EXPECT_THAT(fused[0].nodes, ElementsAre(0, 1));
  EXPECT_THAT(fused[1].nodes, ElementsAre(2, 3));
  EXPECT_THAT(fused[2].nodes, ElementsAre(4));
  EXPECT_THAT(fused[3].nodes, ElementsAre(5));
  EXPECT_EQ(fused[1].stream, 1);
  EXPECT_EQ(fused[1].position, 0);
  EXPECT_EQ(fused[2].position, 1);
  EXPECT_EQ(fused[3].position, 2);
  EXPECT_EQ(nodes[3].segment, 1);
  EXPECT_EQ(nodes[5].segment, 3);

  const std::vector<Segment> unfused = FormSegments(nodes, /*fuse=*/false);
  ASSERT_EQ(unfused.size(), nodes.size());
  for (size_t b = 0; b < nodes.size(); ++b) EXPECT_EQ(nodes[b].segment, static_cast<int>(b));
}

}  // namespace
}  // namespace sluice::framework::segments_test
