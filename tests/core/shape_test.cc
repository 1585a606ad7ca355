// Tests for core/shape.h: construction, element counts, strides and NumPy broadcasting.
#include "core/shape.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::shape_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTest, ParseReadsWhatToStringWritesAndTheCompactForm) {
  for (const Shape& shape : {Shape(), Shape({0}), Shape({2, 3}), Shape({1, 0, 7, 1})}) {
    SCOPED_TRACE(shape.ToString());
    const absl::StatusOr<Shape> parsed = Shape::Parse(shape.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, shape);
  }
  const absl::StatusOr<Shape> compact = Shape::Parse("[2,3]");
  ASSERT_TRUE(compact.ok()) << compact.status();
  EXPECT_EQ(*compact, Shape({2, 3}));
}

TEST(ShapeTest, ParseRefusesWhatIsNotAShapeNamingTheText) {
  for (const char* text : {"", "[", "2,3", "[2,,3]", "[-1]", "[+2]", "[2 ]", "[0x10]", "[1e3]",
                           "[9223372036854775808]", "[4294967296,4294967296]"}) {
    SCOPED_TRACE(text);
    const absl::StatusOr<Shape> parsed = Shape::Parse(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("bad shape"));
  }
}

TEST(ShapeTest, DefaultIsAScalarWithOneElement) {
  const Shape scalar;
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.NumElements(), 1);
  EXPECT_TRUE(scalar.Strides().empty());
  EXPECT_EQ(scalar.ToString(), "[]");
  EXPECT_EQ(scalar, Shape({}));
}

TEST(ShapeTest, AccessorsAndElementCount) {
  const Shape shape = {2, 3, 4};
  EXPECT_EQ(shape.rank(), 3);
  EXPECT_EQ(shape.dim(0), 2);
  EXPECT_EQ(shape.dim(2), 4);
  EXPECT_THAT(shape.dims(), ElementsAre(2, 3, 4));
  EXPECT_EQ(shape.NumElements(), 24);
  EXPECT_EQ(shape.ToString(), "[2, 3, 4]");
  EXPECT_EQ(Shape({7}).ToString(), "[7]");
}

TEST(ShapeTest, ZeroDimensionMeansNoElements) {
  EXPECT_EQ(Shape({0}).NumElements(), 0);
  EXPECT_EQ(Shape({3, 0, 5}).NumElements(), 0);
  EXPECT_EQ(Shape({3, 0, 5}).ToString(), "[3, 0, 5]");
}

TEST(ShapeTest, StridesAreRowMajor) {
  EXPECT_THAT(Shape({2, 3, 4}).Strides(), ElementsAre(12, 4, 1));
  EXPECT_THAT(Shape({5}).Strides(), ElementsAre(1));
  EXPECT_THAT(Shape({1, 1}).Strides(), ElementsAre(1, 1));
  EXPECT_THAT(Shape({2, 0, 3}).Strides(), ElementsAre(0, 3, 1));
}

TEST(ShapeTest, EqualityComparesDimensions) {
  const std::vector<int64_t> dims = {2, 3};
  EXPECT_EQ(Shape(absl::MakeConstSpan(dims)), Shape({2, 3}));
  EXPECT_NE(Shape({2, 3}), Shape({3, 2}));
  EXPECT_NE(Shape({2, 3}), Shape({2, 3, 1}));
  EXPECT_NE(Shape({1}), Shape());
}

TEST(ShapeTest, MakeAcceptsValidDimensions) {
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{},
                                         {0},
                                         {1},
                                         {2, 3},
                                         {0, kMax},
                                         {kMax, 0, 1},
                                         {kMax},
                                         {kMax, 1},
                                         {int64_t{1} << 31, int64_t{1} << 31}}) {
    absl::StatusOr<Shape> shape = Shape::Make(dims);
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_THAT(shape->dims(), ::testing::ElementsAreArray(dims));
  }
}

TEST(ShapeTest, MakeRejectsNegativeDimensionsNamingShapeAndIndex) {
  const std::vector<int64_t> dims = {2, -3, 4};
  absl::StatusOr<Shape> shape = Shape::Make(dims);
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("[2, -3, 4]"));
  EXPECT_THAT(shape.status().message(), HasSubstr("negative dimension 1"));
}

TEST(ShapeTest, MakeRejectsElementCountOverflow) {
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{
           {kMax, 2}, {int64_t{1} << 32, int64_t{1} << 32}, {3, kMax / 2}}) {
    absl::StatusOr<Shape> shape = Shape::Make(dims);
    ASSERT_FALSE(shape.ok()) << Shape(absl::MakeConstSpan(dims)).ToString();
    EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(shape.status().message(), HasSubstr("too many elements"));
    EXPECT_THAT(shape.status().message(), HasSubstr(Shape(absl::MakeConstSpan(dims)).ToString()));
  }
}

// Make's answer must not depend on where a zero dimension sits. [0, kMax, kMax] was once
// accepted (the running product is 0 before the huge dimensions) while [kMax, kMax, 0] was
// rejected, and the accepted shape overflowed int64 in Strides(). The rule that
// keeps NumElements() and Strides() free of overflow is NumPy's: the product of the non-zero
// dimensions must fit in int64.
TEST(ShapeTest, MakeChecksOverflowWhereverTheZeroIs) {
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{0, kMax, kMax},
                                         {kMax, 0, kMax},
                                         {kMax, kMax, 0},
                                         {0, int64_t{1} << 32, int64_t{1} << 32}}) {
    absl::StatusOr<Shape> shape = Shape::Make(dims);
    ASSERT_FALSE(shape.ok()) << Shape(absl::MakeConstSpan(dims)).ToString() << " was accepted";
    EXPECT_THAT(shape.status().message(), HasSubstr("too many elements"));
  }
  absl::StatusOr<Shape> fits =
      Shape::Make(std::vector<int64_t>{0, int64_t{1} << 31, int64_t{1} << 31});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->NumElements(), 0);
  EXPECT_THAT(fits->Strides(), ElementsAre(int64_t{1} << 62, int64_t{1} << 31, 1));
}

// Independent NumPy broadcast: align from the right, pad with 1s, each pair equal or a 1.
std::optional<Shape> ReferenceBroadcast(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (int i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a.dim(i - (rank - a.rank()));
    const int64_t db = i < rank - b.rank() ? 1 : b.dim(i - (rank - b.rank()));
    if (da == db) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else {
      return std::nullopt;
    }
  }
  return Shape(absl::MakeConstSpan(out));
}

// Every shape of rank 0..3 with dimensions in {0, 1, 2, 3}.
std::vector<Shape> SmallShapes() {
  std::vector<Shape> shapes = {Shape()};
  std::vector<Shape> previous = {Shape()};
  for (int rank = 1; rank <= 3; ++rank) {
    std::vector<Shape> next;
    for (const Shape& s : previous) {
      for (int64_t d = 0; d <= 3; ++d) {
        std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
        dims.push_back(d);
        next.emplace_back(absl::MakeConstSpan(dims));
      }
    }
    shapes.insert(shapes.end(), next.begin(), next.end());
    previous = std::move(next);
  }
  return shapes;
}

TEST(ShapeTest, BroadcastEdgeCases) {
  struct Case {
    Shape a, b, expected;
  };
  const Case cases[] = {
      {{2, 3}, {2, 3}, {2, 3}},        // equal
      {{}, {}, {}},                    // scalars
      {{}, {2, 3}, {2, 3}},            // scalar with anything
      {{4, 1}, {}, {4, 1}},            //
      {{3}, {2, 3}, {2, 3}},           // rank mismatch
      {{2, 1, 4}, {5, 1}, {2, 5, 4}},  // rank mismatch with 1s on both sides
      {{2, 1}, {1, 3}, {2, 3}},        // 1s on both sides
      {{1}, {1, 1, 1}, {1, 1, 1}},     // only 1s
      {{0}, {1}, {0}},                 // zero against 1
      {{1}, {0}, {0}},                 //
      {{0}, {0}, {0}},                 //
      {{0, 3}, {3}, {0, 3}},           // zero in a padded dimension
      {{2, 0}, {2, 1}, {2, 0}},        //
      {{}, {0}, {0}},                  // scalar with an empty tensor
      {{1, 0, 1}, {5, 1, 1, 7}, {5, 1, 0, 7}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Shape> out = BroadcastShapes(c.a, c.b);
    ASSERT_TRUE(out.ok()) << c.a.ToString() << " vs " << c.b.ToString() << ": " << out.status();
    EXPECT_EQ(*out, c.expected) << c.a.ToString() << " vs " << c.b.ToString();
  }
}

TEST(ShapeTest, BroadcastRejectsIncompatibleShapesNamingBoth) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{2, 3}, {3, 2}}, {{3}, {4}}, {{0}, {3}}, {{3}, {0}}, {{2, 3}, {4, 2, 2}}, {{2}, {2, 3}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Shape> out = BroadcastShapes(c.a, c.b);
    ASSERT_FALSE(out.ok()) << c.a.ToString() << " vs " << c.b.ToString() << " gave "
                           << out->ToString();
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr(c.a.ToString()));
    EXPECT_THAT(out.status().message(), HasSubstr(c.b.ToString()));
  }
  EXPECT_THAT(BroadcastShapes({2, 3}, {4, 2, 2}).status().message(),
              HasSubstr("dimension 2 is 3 vs 2"));
}

TEST(ShapeTest, BroadcastMatchesReferenceOnAllSmallShapes) {
  const std::vector<Shape> shapes = SmallShapes();
  ASSERT_EQ(shapes.size(), 1u + 4 + 16 + 64);
  int compatible = 0;
  for (const Shape& a : shapes) {
    for (const Shape& b : shapes) {
      const std::optional<Shape> expected = ReferenceBroadcast(a, b);
      absl::StatusOr<Shape> out = BroadcastShapes(a, b);
      ASSERT_EQ(out.ok(), expected.has_value()) << a.ToString() << " vs " << b.ToString();
      if (!expected.has_value()) continue;
      ++compatible;
      ASSERT_EQ(*out, *expected) << a.ToString() << " vs " << b.ToString();
      absl::StatusOr<Shape> swapped = BroadcastShapes(b, a);
      ASSERT_TRUE(swapped.ok());
      EXPECT_EQ(*swapped, *out) << "not symmetric: " << a.ToString() << " vs " << b.ToString();
    }
  }
  EXPECT_GT(compatible, 1000);
}

TEST(ShapeTest, BroadcastStridesGiveZeroForBroadcastDimensions) {
  EXPECT_THAT(BroadcastStrides({3}, {2, 3}), ElementsAre(0, 1));
  EXPECT_THAT(BroadcastStrides({2, 1}, {2, 3}), ElementsAre(1, 0));
  EXPECT_THAT(BroadcastStrides({}, {2, 3}), ElementsAre(0, 0));
  EXPECT_THAT(BroadcastStrides({2, 3}, {2, 3}), ElementsAre(3, 1));
  EXPECT_THAT(BroadcastStrides({1, 3}, {4, 2, 3}), ElementsAre(0, 0, 1));
  EXPECT_THAT(BroadcastStrides({}, {}), ElementsAre());
}

// Reading `from` through BroadcastStrides(from, to) at every index of `to` must land on the
// element NumPy broadcasting selects.
TEST(ShapeTest, BroadcastStridesAddressTheBroadcastElement) {
  const std::vector<Shape> shapes = SmallShapes();
  for (const Shape& from : shapes) {
    for (const Shape& other : shapes) {
      absl::StatusOr<Shape> to = BroadcastShapes(from, other);
      if (!to.ok()) continue;
      const Shape::Dims strides = BroadcastStrides(from, *to);
      ASSERT_EQ(static_cast<int>(strides.size()), to->rank());
      const Shape::Dims own = from.Strides();
      const int offset = to->rank() - from.rank();
      std::vector<int64_t> index(to->rank(), 0);
      for (int64_t n = 0; n < to->NumElements(); ++n) {
        // `index` is the n-th row-major index of `to`.
        int64_t remaining = n;
        for (int i = to->rank() - 1; i >= 0; --i) {
          index[i] = remaining % to->dim(i);
          remaining /= to->dim(i);
        }
        int64_t got = 0;
        for (int i = 0; i < to->rank(); ++i) got += index[i] * strides[i];
        int64_t want = 0;
        for (int j = 0; j < from.rank(); ++j) {
          want += (from.dim(j) == 1 ? 0 : index[offset + j]) * own[j];
        }
        ASSERT_EQ(got, want) << from.ToString() << " -> " << to->ToString() << " at " << n;
        ASSERT_LT(got, std::max<int64_t>(from.NumElements(), 1));
      }
    }
  }
}

TEST(ShapeTest, BroadcastStridesRequireAValidTarget) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(BroadcastStrides({2, 3}, {3}), "SLUICE_CHECK failed");
}

}  // namespace
}  // namespace sluice::shape_test
