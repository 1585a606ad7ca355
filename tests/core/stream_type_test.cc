// Tests for core/stream_type.h: stream role names and parsing.
#include "core/stream_type.h"

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::stream_type_test {
namespace {

using ::testing::HasSubstr;

TEST(StreamTypeTest, NamesAreTheDocumentedOnes) {
  EXPECT_EQ(StreamTypeName(StreamType::kCompute), "compute");
  EXPECT_EQ(StreamTypeName(StreamType::kHost2Device), "h2d");
  EXPECT_EQ(StreamTypeName(StreamType::kDevice2Host), "d2h");
  EXPECT_EQ(StreamTypeName(StreamType::kCcl), "ccl");
  EXPECT_EQ(StreamTypeName(StreamType::kBarrier), "barrier");
  EXPECT_EQ(StreamTypeName(StreamType::kCriticalSection), "critical_section");
  EXPECT_EQ(StreamTypeName(StreamType::kPinnedCompute), "pinned_compute");
  EXPECT_EQ(StreamTypeName(StreamType::kLazyJobLauncher), "lazy_job_launcher");
}

TEST(StreamTypeTest, EveryTypeHasADistinctNameThatParsesBack) {
  std::set<std::string> names;
  for (int i = 0; i < kNumStreamTypes; ++i) {
    const auto type = static_cast<StreamType>(i);
    const std::string name(StreamTypeName(type));
    EXPECT_NE(name, "invalid") << i;
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    absl::StatusOr<StreamType> parsed = ParseStreamType(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, type) << name;
  }
}

TEST(StreamTypeTest, ParseRejectsUnknownNamesAndListsTheKnownOnes) {
  for (const char* bad : {"", "Compute", "host2device", "h2d ", "invalid", "critical-section"}) {
    absl::StatusOr<StreamType> parsed = ParseStreamType(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", bad, "'")));
    EXPECT_THAT(parsed.status().message(),
                HasSubstr("compute, h2d, d2h, ccl, barrier, critical_section, pinned_compute or "
                          "lazy_job_launcher"));
  }
}

}  // namespace
}  // namespace sluice::stream_type_test
