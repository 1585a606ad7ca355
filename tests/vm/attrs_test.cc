// AttrMap's text form (ToString / Parse), used by the recorder and the program format: every
// value comes back exactly — floats of every class included — and malformed text is refused
// with the attribute's name.
#include "vm/attrs.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::vm::attrs_test {
namespace {

TEST(AttrMapTest, EveryTypeRoundTrips) {
  AttrMap attrs;
  attrs.Set("i", int64_t{-42})
      .Set("s", std::string("name_1"))
      .Set("v", std::vector<int64_t>{3, -1, 0})
      .Set("e", std::vector<int64_t>{})
      .Set("body", BlockRef{3});
  const absl::StatusOr<AttrMap> parsed = AttrMap::Parse(attrs.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->ToString(), attrs.ToString());
  EXPECT_EQ(parsed->GetInt("i").value(), -42);
  EXPECT_EQ(parsed->GetString("s").value(), "name_1");
  EXPECT_EQ(parsed->GetInts("v").value(), (std::vector<int64_t>{3, -1, 0}));
  EXPECT_TRUE(parsed->GetInts("e").value().empty());
  EXPECT_EQ(parsed->GetBlock("body").value(), BlockRef{3});
  EXPECT_EQ(parsed->GetBlock("i").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(attrs.ToString().find("body=b:3"), std::string::npos) << attrs.ToString();
}

TEST(AttrMapTest, FloatsOfEveryClassRoundTripExactly) {
  using limits = std::numeric_limits<double>;
  const std::vector<double> values = {0.0,
                                      -0.0,
                                      0.1,
                                      -1.0 / 3.0,
                                      1e300,
                                      limits::max(),
                                      limits::lowest(),
                                      limits::min(),         // smallest normal
                                      limits::denorm_min(),  // smallest subnormal
                                      -3.5e-310,             // a subnormal
                                      limits::infinity(),
                                      -limits::infinity()};
  for (double value : values) {
    SCOPED_TRACE(value);
    const AttrMap attrs = AttrMap().Set("f", value);
    const absl::StatusOr<AttrMap> parsed = AttrMap::Parse(attrs.ToString());
    ASSERT_TRUE(parsed.ok()) << parsed.status() << " for " << attrs.ToString();
    const double back = parsed->GetFloat("f").value();
    EXPECT_EQ(back, value);
    EXPECT_EQ(std::signbit(back), std::signbit(value));
  }
  const absl::StatusOr<AttrMap> nan =
      AttrMap::Parse(AttrMap().Set("f", limits::quiet_NaN()).ToString());
  ASSERT_TRUE(nan.ok()) << nan.status();
  EXPECT_TRUE(std::isnan(nan->GetFloat("f").value()));
}

// Found by the program-text fuzz target's round-trip check: a NaN attribute made a map (and
// a program) unequal to itself, and to what reading its own text gave back.
TEST(AttrMapTest, NanAttributesCompareEqual) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const AttrMap attrs = AttrMap().Set("bias", nan).Set("scale", 2.0);
  EXPECT_TRUE(attrs == attrs);
  const absl::StatusOr<AttrMap> parsed = AttrMap::Parse(attrs.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(*parsed == attrs);
  // NaN equals only NaN: not a number, and not an attribute of another type or name.
  EXPECT_FALSE(attrs == AttrMap().Set("bias", 0.0).Set("scale", 2.0));
  EXPECT_FALSE(attrs == AttrMap().Set("bias", std::string("nan")).Set("scale", 2.0));
  EXPECT_FALSE(attrs == AttrMap().Set("bias2", nan).Set("scale", 2.0));
  EXPECT_FALSE(attrs == AttrMap().Set("bias", nan));
}

TEST(AttrMapTest, MalformedTextNamesTheAttribute) {
  for (const char* text : {"x=f:1e400",   // overflows
                           "x=f:1e-400",  // underflows to zero
                           "x=f:1.5z", "x=f:", "x=i:1.5", "x=v:1;;2", "x=q:1", "x=s:a b", "x=b:-1",
                           "x=b:", "x=b:1.5"}) {
    SCOPED_TRACE(text);
    const absl::StatusOr<AttrMap> parsed = AttrMap::Parse(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("'x'"), std::string::npos) << parsed.status();
  }
  EXPECT_FALSE(AttrMap::Parse("novalue").ok());
}

}  // namespace
}  // namespace sluice::vm::attrs_test
