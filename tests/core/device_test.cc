// Tests for core/device.h: device types, parsing of device strings and the value semantics.
#include "core/device.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::device_test {
namespace {

using ::testing::HasSubstr;

TEST(DeviceTest, TypeNamesRoundTrip) {
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    const auto type = static_cast<DeviceType>(i);
    absl::StatusOr<DeviceType> parsed = ParseDeviceType(DeviceTypeName(type));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(DeviceTypeName(DeviceType::kCpu), "cpu");
  EXPECT_EQ(DeviceTypeName(DeviceType::kSim), "sim");
  EXPECT_EQ(DeviceTypeName(DeviceType::kCuda), "cuda");
}

TEST(DeviceTest, ParseDeviceTypeNamesTheUnknownType) {
  absl::StatusOr<DeviceType> parsed = ParseDeviceType("gpu");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("'gpu'"));
}

TEST(DeviceTest, ParsesGoodStrings) {
  struct Case {
    const char* text;
    Device expected;
  };
  const Case cases[] = {
      {"cpu", Device::Cpu()},
      {"cpu:0", Device::Cpu()},
      {"sim", Device(DeviceType::kSim, 0)},
      {"sim:0", Device(DeviceType::kSim, 0)},
      {"sim:3", Device(DeviceType::kSim, 3)},
      {"sim:63", Device(DeviceType::kSim, Device::kMaxIndex)},
      {"sim:007", Device(DeviceType::kSim, 7)},
      {"cuda", Device(DeviceType::kCuda, 0)},
      {"cuda:0", Device(DeviceType::kCuda, 0)},
      {"cuda:1", Device(DeviceType::kCuda, 1)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Device> parsed = Device::Parse(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(*parsed, c.expected) << c.text;
  }
}

TEST(DeviceTest, RejectsBadStringsNamingThem) {
  const char* const cases[] = {
      "",       // no type at all
      "gpu:0",  // unknown type
      "GPU",
      "Sim:0",
      " cpu",
      "cpu ",
      "cpu:1",                     // the host is cpu:0 only
      "sim:-1",                    // negative
      "sim:",                      // missing index
      "sim:x",                     // not a number
      "sim:+1",                    // sign
      "sim:1.0",                   // not an integer
      "sim:3:1",                   // two indices
      "sim:64",                    // above kMaxIndex
      "sim:999",                   // above kMaxIndex
      "sim:99999999999999999999",  // overflows int
      ":0",
  };
  for (const char* text : cases) {
    absl::StatusOr<Device> parsed = Device::Parse(text);
    ASSERT_FALSE(parsed.ok()) << "'" << text << "' parsed as " << parsed->ToString();
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", text, "'"))) << text;
  }
}

TEST(DeviceTest, ErrorsSayWhatWasExpected) {
  EXPECT_THAT(Device::Parse("gpu:0").status().message(), HasSubstr("cpu, sim:N or cuda:N"));
  EXPECT_THAT(Device::Parse("sim:x").status().message(), HasSubstr("'x'"));
  EXPECT_THAT(Device::Parse("sim:-1").status().message(), HasSubstr("non-negative integer"));
  EXPECT_THAT(Device::Parse("sim:").status().message(), HasSubstr("non-negative integer"));
  EXPECT_THAT(Device::Parse("sim:999").status().message(), HasSubstr("exceeds 63"));
  EXPECT_THAT(Device::Parse("cpu:1").status().message(), HasSubstr("cpu:0 only"));
}

TEST(DeviceTest, ToStringRoundTrips) {
  EXPECT_EQ(Device::Cpu().ToString(), "cpu");
  EXPECT_EQ(Device(DeviceType::kSim, 1).ToString(), "sim:1");
  EXPECT_EQ(Device(DeviceType::kSim, 0).ToString(), "sim:0");
  EXPECT_EQ(Device(DeviceType::kCuda, 0).ToString(), "cuda:0");
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    for (int index : {0, 1, 17, Device::kMaxIndex}) {
      const Device device(static_cast<DeviceType>(type), index);
      if (device.type() == DeviceType::kCpu && index != 0) continue;
      absl::StatusOr<Device> parsed = Device::Parse(device.ToString());
      ASSERT_TRUE(parsed.ok()) << device.ToString() << ": " << parsed.status();
      EXPECT_EQ(*parsed, device) << device.ToString();
    }
  }
}

TEST(DeviceTest, DefaultIsTheHost) {
  constexpr Device device;
  static_assert(device == Device::Cpu());
  EXPECT_EQ(device.type(), DeviceType::kCpu);
  EXPECT_EQ(device.index(), 0);
}

TEST(DeviceTest, OnlyTheHostIsSynchronous) {
  EXPECT_FALSE(Device::Cpu().IsAsync());
  EXPECT_TRUE(Device(DeviceType::kSim, 0).IsAsync());
  EXPECT_TRUE(Device(DeviceType::kCuda, 2).IsAsync());
}

TEST(DeviceTest, EqualityAndHashUseTypeAndIndex) {
  const Device sim0(DeviceType::kSim, 0);
  const Device sim1(DeviceType::kSim, 1);
  const Device cuda0(DeviceType::kCuda, 0);
  EXPECT_EQ(sim0, Device(DeviceType::kSim, 0));
  EXPECT_NE(sim0, sim1);
  EXPECT_NE(sim0, cuda0);
  EXPECT_NE(Device::Cpu(), sim0);
  absl::flat_hash_set<Device> set = {Device::Cpu(), sim0, sim1, cuda0, Device(DeviceType::kSim, 0)};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_TRUE(set.contains(Device(DeviceType::kSim, 1)));
  EXPECT_FALSE(set.contains(Device(DeviceType::kCuda, 1)));
}

}  // namespace
}  // namespace sluice::device_test
