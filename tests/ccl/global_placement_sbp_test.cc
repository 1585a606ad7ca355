// Placement and Sbp (framework/global/placement.h, sbp.h) and LocalShape (boxing.h) on
// their own, without a world: parsing and printing round trips, the errors of bad texts
// and bad meshes, parallel ids, mesh coordinates and the axis groups of 1-D and 2-D meshes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/device.h"
#include "core/shape.h"
#include "framework/global/boxing.h"
#include "framework/global/placement.h"
#include "framework/global/sbp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::global::global_placement_sbp_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GlobalPlacementTest, ParsesOneDimensionalMesh) {
  absl::StatusOr<Placement> p = Placement::Parse("cpu:[0, 1, 2, 3]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DeviceType::kCpu);
  EXPECT_EQ(p->device(), Device(DeviceType::kCpu, 0));
  EXPECT_THAT(p->ranks(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(p->hierarchy(), ElementsAre(4));
  EXPECT_EQ(p->ndim(), 1);
  EXPECT_EQ(p->ToString(), "cpu:[0, 1, 2, 3]");
}

TEST(GlobalPlacementTest, ParsesTwoDimensionalMesh) {
  absl::StatusOr<Placement> p = Placement::Parse("sim:[[0, 1], [2, 3]]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device_type(), DeviceType::kSim);
  EXPECT_EQ(p->device(), Device(DeviceType::kSim, 0));
  EXPECT_THAT(p->ranks(), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(p->hierarchy(), ElementsAre(2, 2));
  EXPECT_EQ(p->ndim(), 2);
  EXPECT_EQ(p->ToString(), "sim:[[0, 1], [2, 3]]");
}

TEST(GlobalPlacementTest, RoundTrips) {
  for (const char* text :
       {"cpu:[0]", "cpu:[3, 1, 2]", "sim:[0, 1]", "sim:[[0]]", "cpu:[[0, 1, 2]]",
        "cpu:[[0], [1], [2]]", "sim:[[5, 4], [3, 2], [1, 0]]", "cpu:[[0, 1, 2], [3, 4, 5]]"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<Placement> p = Placement::Parse(text);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->ToString(), text);
    absl::StatusOr<Placement> again = Placement::Parse(p->ToString());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, *p);
  }
}

TEST(GlobalPlacementTest, ParsesLooseSpacingAndDeviceIndex) {
  absl::StatusOr<Placement> p = Placement::Parse("cpu:[ 0 ,1,  2 ]");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ToString(), "cpu:[0, 1, 2]");
  absl::StatusOr<Placement> q = Placement::Parse("sim: [[0,1] , [2,3]] ");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->ToString(), "sim:[[0, 1], [2, 3]]");
  // The text before the first ':' is the device type; what follows must be the brackets.
  EXPECT_FALSE(Placement::Parse("sim:0:[1]").ok());
}

TEST(GlobalPlacementTest, EqualityComparesTypeRanksAndMesh) {
  const Placement a = Placement::Parse("cpu:[0, 1, 2, 3]").value();
  EXPECT_EQ(a, Placement::Parse("cpu:[0, 1, 2, 3]").value());
  EXPECT_NE(a, Placement::Parse("sim:[0, 1, 2, 3]").value());
  EXPECT_NE(a, Placement::Parse("cpu:[[0, 1], [2, 3]]").value());
  EXPECT_NE(a, Placement::Parse("cpu:[[0, 1, 2, 3]]").value());
  EXPECT_NE(a, Placement::Parse("cpu:[1, 0, 2, 3]").value());
  EXPECT_NE(Placement::Parse("cpu:[[0, 1], [2, 3]]").value(),
            Placement::Parse("cpu:[[0], [1], [2], [3]]").value());
}

TEST(GlobalPlacementTest, CreateMatchesParse) {
  absl::StatusOr<Placement> p = Placement::Create(DeviceType::kSim, {4, 5, 6, 7, 8, 9}, {2, 3});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ToString(), "sim:[[4, 5, 6], [7, 8, 9]]");
  EXPECT_EQ(*p, Placement::Parse("sim:[[4, 5, 6], [7, 8, 9]]").value());
  absl::StatusOr<Placement> flat = Placement::Create(DeviceType::kCpu, {2, 0});
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_THAT(flat->hierarchy(), ElementsAre(2));
  EXPECT_EQ(flat->ToString(), "cpu:[2, 0]");
}

TEST(GlobalPlacementTest, CreateErrors) {
  struct Bad {
    std::vector<int> ranks;
    std::vector<int64_t> hierarchy;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {{}, {}, "at least one rank"},
      {{0, -1}, {}, "negative"},
      {{0, 1, 0}, {}, "twice"},
      {{0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2}, "1 or 2 mesh axes"},
      {{0, 1, 2}, {2, 2}, "does not hold 3 ranks"},
      {{0, 1, 2, 3}, {2, 3}, "does not hold 4 ranks"},
      {{0, 1}, {0, 2}, "mesh axis of size 0"},
      {{0, 1}, {-2, -1}, "mesh axis of size -2"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<Placement> p = Placement::Create(DeviceType::kCpu, b.ranks, b.hierarchy);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << b.message;
    EXPECT_THAT(p.status().message(), HasSubstr(b.message));
  }
}

TEST(GlobalPlacementTest, ParseErrors) {
  struct Bad {
    const char* text;
    const char* message;  // a part of the error
  };
  const std::vector<Bad> bad = {
      {"cpu", "is not TYPE:[RANKS]"},
      {"[0, 1]", "is not TYPE:[RANKS]"},
      {"cpu:0, 1", "brackets"},
      {"cpu:[0, 1", "brackets"},
      {"cpu:0, 1]", "brackets"},
      {"cpu:[]", "is not a rank"},
      {"cpu:[0, x]", "x' is not a rank"},
      {"cpu:[0,, 1]", "is not a rank"},
      {"cpu:[0, 1,]", "is not a rank"},
      {"cpu:[1.5]", "is not a rank"},
      {"cpu:[0, 0]", "twice"},
      {"cpu:[-1]", "negative"},
      {"cpu:[[0, 1], [2]]", "rows differ"},
      {"cpu:[[0, 1], [2, 3]", "missing ']'"},
      {"cpu:[[0, 1], 2]", "expected '['"},
      {"cpu:[[0, 1], [1, 2]]", "twice"},
      {"cpu:[[]]", "is not a rank"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.text);
    absl::StatusOr<Placement> p = Placement::Parse(b.text);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
    EXPECT_THAT(p.status().message(), HasSubstr(b.message));
  }
  // Unknown device types are the device parser's error.
  for (const char* text : {"gpu:[0]", ":[0]", "cpu:7:[0]"}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(Placement::Parse(text).ok());
  }
}

TEST(GlobalPlacementTest, OneDimensionalIdsCoordinatesAndGroups) {
  const Placement p = Placement::Parse("cpu:[3, 1, 0, 2]").value();
  EXPECT_EQ(p.ParallelId(3), 0);
  EXPECT_EQ(p.ParallelId(1), 1);
  EXPECT_EQ(p.ParallelId(0), 2);
  EXPECT_EQ(p.ParallelId(2), 3);
  EXPECT_EQ(p.ParallelId(4), std::nullopt);
  EXPECT_EQ(p.ParallelId(-1), std::nullopt);
  for (int id = 0; id < 4; ++id) {
    EXPECT_THAT(p.Coordinates(id), ElementsAre(id));
    EXPECT_THAT(p.AxisGroup(id, 0), ElementsAre(3, 1, 0, 2));
  }
  const Placement alone = Placement::Parse("sim:[5]").value();
  EXPECT_EQ(alone.ParallelId(5), 0);
  EXPECT_EQ(alone.ParallelId(0), std::nullopt);
  EXPECT_THAT(alone.Coordinates(0), ElementsAre(0));
  EXPECT_THAT(alone.AxisGroup(0, 0), ElementsAre(5));
}

TEST(GlobalPlacementTest, TwoDimensionalIdsCoordinatesAndGroups) {
  // Rows are the first axis: rank 4 sits at (1, 0).
  const Placement p = Placement::Parse("cpu:[[0, 1, 2], [4, 5, 6]]").value();
  EXPECT_EQ(p.ParallelId(4), 3);
  EXPECT_EQ(p.ParallelId(3), std::nullopt);
  const std::vector<std::vector<int64_t>> coords = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  for (int id = 0; id < 6; ++id) {
    SCOPED_TRACE(id);
    EXPECT_EQ(p.Coordinates(id), coords[id]);
    const int column = static_cast<int>(coords[id][1]);
    const int row = static_cast<int>(coords[id][0]);
    // Axis 0 varies the row: the column's ranks; axis 1 the column: the row's ranks.
    EXPECT_THAT(p.AxisGroup(id, 0), ElementsAre(p.ranks()[column], p.ranks()[3 + column]));
    EXPECT_THAT(p.AxisGroup(id, 1),
                ElementsAre(p.ranks()[3 * row], p.ranks()[3 * row + 1], p.ranks()[3 * row + 2]));
  }
  const Placement square = Placement::Parse("sim:[[3, 2], [1, 0]]").value();
  EXPECT_EQ(square.ParallelId(0), 3);
  EXPECT_THAT(square.Coordinates(3), ElementsAre(1, 1));
  EXPECT_THAT(square.AxisGroup(3, 0), ElementsAre(2, 0));
  EXPECT_THAT(square.AxisGroup(3, 1), ElementsAre(1, 0));
  EXPECT_THAT(square.AxisGroup(0, 0), ElementsAre(3, 1));
  EXPECT_THAT(square.AxisGroup(0, 1), ElementsAre(3, 2));
  // Degenerate axes: groups of one along them.
  const Placement row = Placement::Parse("cpu:[[0, 1]]").value();
  EXPECT_THAT(row.hierarchy(), ElementsAre(1, 2));
  EXPECT_THAT(row.Coordinates(1), ElementsAre(0, 1));
  EXPECT_THAT(row.AxisGroup(1, 0), ElementsAre(1));
  EXPECT_THAT(row.AxisGroup(1, 1), ElementsAre(0, 1));
  const Placement column = Placement::Parse("cpu:[[0], [1]]").value();
  EXPECT_THAT(column.hierarchy(), ElementsAre(2, 1));
  EXPECT_THAT(column.Coordinates(1), ElementsAre(1, 0));
  EXPECT_THAT(column.AxisGroup(1, 0), ElementsAre(0, 1));
  EXPECT_THAT(column.AxisGroup(1, 1), ElementsAre(1));
}

TEST(GlobalSbpTest, ParsesAndPrintsOneSbp) {
  EXPECT_EQ(Sbp::Parse("S(0)").value(), Sbp::Split(0));
  EXPECT_EQ(Sbp::Parse("split(3)").value(), Sbp::Split(3));
  EXPECT_EQ(Sbp::Parse(" S(12) ").value(), Sbp::Split(12));
  EXPECT_EQ(Sbp::Parse("B").value(), Sbp::Broadcast());
  EXPECT_EQ(Sbp::Parse("broadcast").value(), Sbp::Broadcast());
  EXPECT_EQ(Sbp::Parse("P").value(), Sbp::PartialSum());
  EXPECT_EQ(Sbp::Parse("partial_sum").value(), Sbp::PartialSum());
  EXPECT_EQ(Sbp::Split(2).ToString(), "S(2)");
  EXPECT_EQ(Sbp::Broadcast().ToString(), "B");
  EXPECT_EQ(Sbp::PartialSum().ToString(), "P");
  EXPECT_TRUE(Sbp::Split(1).is_split());
  EXPECT_TRUE(Sbp::Broadcast().is_broadcast());
  EXPECT_TRUE(Sbp::PartialSum().is_partial_sum());
  for (const Sbp& s : {Sbp::Split(0), Sbp::Split(7), Sbp::Broadcast(), Sbp::PartialSum()}) {
    EXPECT_EQ(Sbp::Parse(s.ToString()).value(), s);
  }
}

TEST(GlobalSbpTest, EqualityIgnoresTheAxisOfNonSplits) {
  EXPECT_NE(Sbp::Split(0), Sbp::Split(1));
  EXPECT_NE(Sbp::Split(0), Sbp::Broadcast());
  EXPECT_NE(Sbp::Broadcast(), Sbp::PartialSum());
  EXPECT_EQ((Sbp{Sbp::Kind::kBroadcast, 3}), Sbp::Broadcast());
  EXPECT_EQ((Sbp{Sbp::Kind::kPartialSum, 5}), Sbp::PartialSum());
}

TEST(GlobalSbpTest, SbpParseErrors) {
  for (const char* text : {"", " ", "S", "S()", "S(-1)", "S(x)", "S(0", "S 0", "s(0)", "b", "p",
                           "Split(0)", "S(0)S(1)", "S(0), B", "PB", "S(1.0)"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<Sbp> s = Sbp::Parse(text);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
    EXPECT_THAT(s.status().message(), HasSubstr("is not an sbp"));
  }
}

TEST(GlobalSbpTest, ParsesAndPrintsNdSbp) {
  absl::StatusOr<NdSbp> sbp = ParseNdSbp("S(0), B");
  ASSERT_TRUE(sbp.ok()) << sbp.status();
  EXPECT_THAT(*sbp, ElementsAre(Sbp::Split(0), Sbp::Broadcast()));
  EXPECT_EQ(NdSbpToString(*sbp), "(S(0), B)");
  EXPECT_THAT(ParseNdSbp("(P)").value(), ElementsAre(Sbp::PartialSum()));
  EXPECT_THAT(ParseNdSbp("P").value(), ElementsAre(Sbp::PartialSum()));
  EXPECT_THAT(ParseNdSbp(" ( S(1) ,split(0),  partial_sum ) ").value(),
              ElementsAre(Sbp::Split(1), Sbp::Split(0), Sbp::PartialSum()));
  EXPECT_EQ(NdSbpToString({}), "()");
  EXPECT_EQ(NdSbpToString({Sbp::Split(1)}), "(S(1))");
  for (const char* text : {"(S(0), B)", "(B, P)", "(S(1), S(1))", "(P)", "(S(0), S(1), B)"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<NdSbp> parsed = ParseNdSbp(text);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(NdSbpToString(*parsed), text);
  }
}

TEST(GlobalSbpTest, NdSbpParseErrors) {
  for (const char* text : {"", "()", "(S(0), B", "S(0),", ",B", "S(0),,B", "S(0) B", "(S(0)))",
                           "((S(0)))", "S(0), Q", "(S(0); B)"}) {
    SCOPED_TRACE(text);
    absl::StatusOr<NdSbp> s = ParseNdSbp(text);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  }
  EXPECT_THAT(ParseNdSbp("(S(0), B").status().message(), HasSubstr("missing ')'"));
  EXPECT_THAT(ParseNdSbp("S(0), Q").status().message(), HasSubstr("Q' is not an sbp"));
}

TEST(GlobalLocalShapeTest, DividesEverySplitAxis) {
  const Placement line = Placement::Parse("cpu:[0, 1, 2]").value();
  EXPECT_EQ(LocalShape(Shape({12, 6}), line, {Sbp::Split(0)}).value(), Shape({4, 6}));
  EXPECT_EQ(LocalShape(Shape({12, 6}), line, {Sbp::Split(1)}).value(), Shape({12, 2}));
  EXPECT_EQ(LocalShape(Shape({12, 6}), line, {Sbp::Broadcast()}).value(), Shape({12, 6}));
  EXPECT_EQ(LocalShape(Shape({12, 6}), line, {Sbp::PartialSum()}).value(), Shape({12, 6}));
  const Placement mesh = Placement::Parse("cpu:[[0, 1, 2], [3, 4, 5]]").value();
  EXPECT_EQ(LocalShape(Shape({12, 6}), mesh, {Sbp::Split(0), Sbp::Split(1)}).value(),
            Shape({6, 2}));
  EXPECT_EQ(LocalShape(Shape({12, 6}), mesh, {Sbp::Split(1), Sbp::Split(0)}).value(),
            Shape({4, 3}));
  // Two mesh axes splitting one tensor axis divide it by both.
  EXPECT_EQ(LocalShape(Shape({12, 6}), mesh, {Sbp::Split(0), Sbp::Split(0)}).value(),
            Shape({2, 6}));
  EXPECT_EQ(LocalShape(Shape({12, 6}), mesh, {Sbp::PartialSum(), Sbp::Broadcast()}).value(),
            Shape({12, 6}));
  EXPECT_EQ(LocalShape(Shape({}), mesh, {Sbp::PartialSum(), Sbp::Broadcast()}).value(), Shape({}));
}

TEST(GlobalLocalShapeTest, Errors) {
  const Placement line = Placement::Parse("cpu:[0, 1, 2]").value();
  const Placement mesh = Placement::Parse("cpu:[[0, 1], [2, 3]]").value();
  absl::Status wrong_count =
      LocalShape(Shape({12}), line, {Sbp::Split(0), Sbp::Broadcast()}).status();
  EXPECT_EQ(wrong_count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_count.message(), HasSubstr("has 2 entries"));
  EXPECT_THAT(wrong_count.message(), HasSubstr("has 1 mesh axes"));
  EXPECT_EQ(LocalShape(Shape({12}), mesh, {Sbp::Split(0)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LocalShape(Shape({12}), mesh, {}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status uneven = LocalShape(Shape({10, 6}), line, {Sbp::Split(0)}).status();
  EXPECT_EQ(uneven.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(uneven.message(), HasSubstr("does not split into 3 equal parts"));
  // 6 splits in 2, but its half (3) not again in 2.
  absl::Status nested = LocalShape(Shape({6, 4}), mesh, {Sbp::Split(0), Sbp::Split(0)}).status();
  EXPECT_EQ(nested.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(nested.message(), HasSubstr("(3 left)"));
  absl::Status missing = LocalShape(Shape({12, 6}), line, {Sbp::Split(2)}).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("splits axis 2"));
  EXPECT_EQ(LocalShape(Shape({}), line, {Sbp::Split(0)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A negative split axis (Sbp::Split takes any int) is InvalidArgument, not an index before
// the shape's first dimension.
TEST(GlobalLocalShapeTest, NegativeSplitAxisIsAnError) {
  const Placement line = Placement::Parse("cpu:[0, 1, 2]").value();
  absl::Status negative = LocalShape(Shape({12, 6}), line, {Sbp::Split(-1)}).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument) << negative;
}

}  // namespace
}  // namespace sluice::global::global_placement_sbp_test
