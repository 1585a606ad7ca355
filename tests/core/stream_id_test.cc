// Tests for core/stream_id.h: StreamKey strings, StreamId values and StreamIdTable interning,
// including interning from several threads at once.
#include "core/stream_id.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::stream_id_test {
namespace {

using ::testing::HasSubstr;

StreamKey Key(Device device, StreamType type = StreamType::kCompute, int index = 0) {
  StreamKey key;
  key.device = device;
  key.type = type;
  key.index = index;
  return key;
}

const Device kSim0(DeviceType::kSim, 0);
const Device kSim1(DeviceType::kSim, 1);

TEST(StreamKeyTest, ToStringOmitsIndexZero) {
  EXPECT_EQ(Key(Device::Cpu()).ToString(), "cpu/compute");
  EXPECT_EQ(Key(kSim0, StreamType::kCompute, 1).ToString(), "sim:0/compute:1");
  EXPECT_EQ(Key(kSim1, StreamType::kHost2Device).ToString(), "sim:1/h2d");
  EXPECT_EQ(Key(Device(DeviceType::kCuda, 2), StreamType::kCcl, 12).ToString(), "cuda:2/ccl:12");
}

TEST(StreamKeyTest, ParseRoundTripsToString) {
  std::vector<StreamKey> keys;
  for (const Device device : {Device::Cpu(), kSim0, kSim1, Device(DeviceType::kSim, 63),
                              Device(DeviceType::kCuda, 0), Device(DeviceType::kCuda, 7)}) {
    for (int type = 0; type < kNumStreamTypes; ++type) {
      for (int index : {0, 1, 2, 10, 9999}) {
        keys.push_back(Key(device, static_cast<StreamType>(type), index));
      }
    }
  }
  for (const StreamKey& key : keys) {
    const std::string text = key.ToString();
    absl::StatusOr<StreamKey> parsed = StreamKey::Parse(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(*parsed, key) << text;
    EXPECT_EQ(parsed->ToString(), text);
  }
}

TEST(StreamKeyTest, ParseAcceptsShortForms) {
  EXPECT_EQ(StreamKey::Parse("sim:2").value(), Key(Device(DeviceType::kSim, 2)));
  EXPECT_EQ(StreamKey::Parse("cpu").value(), Key(Device::Cpu()));
  EXPECT_EQ(StreamKey::Parse("sim").value(), Key(kSim0));
  EXPECT_EQ(StreamKey::Parse("sim:1/d2h").value(), Key(kSim1, StreamType::kDevice2Host));
  EXPECT_EQ(StreamKey::Parse("sim:1/compute:0").value(), Key(kSim1));
}

TEST(StreamKeyTest, ParseRejectsBadStringsNamingThem) {
  const char* const cases[] = {
      "sim:0/nope",        "sim:0/",
      "sim:0/compute:",    "sim:0/compute:x",
      "sim:0/compute:-1",  "sim:0/compute:12345",
      "sim:0/compute:1/x", "sim:0/compute:1:2",
      "sim:0/Compute",
  };
  for (const char* text : cases) {
    absl::StatusOr<StreamKey> parsed = StreamKey::Parse(text);
    ASSERT_FALSE(parsed.ok()) << text << " parsed as " << parsed->ToString();
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", text, "'")));
  }
}

TEST(StreamKeyTest, ParseRejectsBadDevicesNamingThem) {
  for (const char* text : {"gpu:0/compute", "cpu:1/compute", "sim:-1", "", "/compute"}) {
    absl::StatusOr<StreamKey> parsed = StreamKey::Parse(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  EXPECT_THAT(StreamKey::Parse("gpu:0/compute").status().message(), HasSubstr("'gpu:0'"));
  EXPECT_THAT(StreamKey::Parse("cpu:1/h2d").status().message(), HasSubstr("'cpu:1'"));
}

TEST(StreamKeyTest, EqualityAndHashUseAllFields) {
  absl::flat_hash_set<StreamKey> set = {Key(kSim0), Key(kSim1), Key(kSim0, StreamType::kCcl),
                                        Key(kSim0, StreamType::kCompute, 1), Key(kSim0)};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_FALSE(Key(kSim0) == Key(kSim1));
  EXPECT_FALSE(Key(kSim0) == Key(kSim0, StreamType::kCcl));
  EXPECT_FALSE(Key(kSim0) == Key(kSim0, StreamType::kCompute, 1));
}

TEST(StreamIdTest, DefaultIsInvalid) {
  constexpr StreamId none;
  static_assert(!none.valid());
  static_assert(StreamId(0).valid());
  EXPECT_EQ(none.value(), -1);
  EXPECT_EQ(none, StreamId());
}

TEST(StreamIdTest, ComparesAndHashesByValue) {
  EXPECT_EQ(StreamId(3), StreamId(3));
  EXPECT_NE(StreamId(3), StreamId(4));
  EXPECT_LT(StreamId(3), StreamId(4));
  EXPECT_FALSE(StreamId(4) < StreamId(3));
  absl::flat_hash_set<StreamId> set = {StreamId(1), StreamId(2), StreamId(1)};
  EXPECT_EQ(set.size(), 2u);
}

TEST(StreamIdTableTest, InternsDenselyInFirstSeenOrder) {
  StreamIdTable table;
  EXPECT_EQ(table.size(), 0);
  const std::vector<StreamKey> keys = {Key(kSim0), Key(kSim0, StreamType::kHost2Device),
                                       Key(Device::Cpu()), Key(kSim1, StreamType::kCompute, 3)};
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StatusOr<StreamId> id = table.Intern(keys[i]);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ(id->value(), static_cast<int32_t>(i));
    EXPECT_EQ(table.size(), static_cast<int>(i + 1));
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(table.key(StreamId(static_cast<int32_t>(i))), keys[i]);
  }
}

TEST(StreamIdTableTest, InterningIsStable) {
  StreamIdTable table;
  const StreamId a = table.Intern(Key(kSim0)).value();
  const StreamId b = table.Intern(Key(kSim1)).value();
  EXPECT_EQ(table.Intern(Key(kSim0)).value(), a);
  EXPECT_EQ(table.Intern(Key(kSim1)).value(), b);
  EXPECT_EQ(table.Intern(Key(kSim0)).value(), a);
  EXPECT_EQ(table.size(), 2);
  // A reference from key() stays valid and unchanged while the table grows.
  const StreamKey& first = table.key(a);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(table.Intern(Key(kSim0, StreamType::kCcl, i)).ok());
  EXPECT_EQ(first, Key(kSim0));
  EXPECT_EQ(&first, &table.key(a));
}

TEST(StreamIdTableTest, FindReturnsInternedIdsOnly) {
  StreamIdTable table;
  absl::StatusOr<StreamId> missing = table.Find(Key(kSim0, StreamType::kCcl, 2));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("sim:0/ccl:2"));
  EXPECT_EQ(table.size(), 0);  // Find does not intern

  const StreamId id = table.Intern(Key(kSim0, StreamType::kCcl, 2)).value();
  EXPECT_EQ(table.Find(Key(kSim0, StreamType::kCcl, 2)).value(), id);
}

TEST(StreamIdTableTest, CapacityExhaustionNamesTheStream) {
  StreamIdTable table;
  for (int i = 0; i < StreamIdTable::kCapacity; ++i) {
    absl::StatusOr<StreamId> id = table.Intern(Key(kSim0, StreamType::kCompute, i));
    ASSERT_TRUE(id.ok()) << i << ": " << id.status();
    ASSERT_EQ(id->value(), i);
  }
  EXPECT_EQ(table.size(), StreamIdTable::kCapacity);
  absl::StatusOr<StreamId> over = table.Intern(Key(kSim1, StreamType::kCcl, 5));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("sim:1/ccl:5"));
  EXPECT_THAT(over.status().message(), HasSubstr("4096"));
  EXPECT_EQ(table.size(), StreamIdTable::kCapacity);
  // Existing keys still resolve; the rejected key was not half-interned.
  EXPECT_EQ(table.Intern(Key(kSim0, StreamType::kCompute, 17)).value(), StreamId(17));
  EXPECT_FALSE(table.Find(Key(kSim1, StreamType::kCcl, 5)).ok());
}

// Threads intern overlapping key sets at once (released together by a notification) and read
// keys back lock-free. Every key gets exactly one id, the ids are 0..N-1, and key(id) agrees.
TEST(StreamIdTableTest, ConcurrentInterningIsDenseAndConsistent) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 200;
  StreamIdTable table;
  std::vector<StreamKey> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(
        Key(Device(DeviceType::kSim, i % 4), static_cast<StreamType>(i % kNumStreamTypes), i));
  }
  absl::Notification start;
  absl::BlockingCounter ready(kThreads);
  std::vector<std::vector<StreamId>> ids(kThreads, std::vector<StreamId>(kKeys));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.DecrementCount();
      start.WaitForNotification();
      // Each thread walks the keys in its own rotated order, so first sight differs.
      for (int n = 0; n < kKeys; ++n) {
        const int i = (n * 7 + t * 31) % kKeys;
        absl::StatusOr<StreamId> id = table.Intern(keys[i]);
        ASSERT_TRUE(id.ok()) << id.status();
        ids[t][i] = *id;
        ASSERT_GE(id->value(), 0);
        ASSERT_LT(id->value(), table.size());
        ASSERT_EQ(table.key(*id), keys[i]);  // lock-free read of a fresh entry
      }
    });
  }
  ready.Wait();
  start.Notify();
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(table.size(), kKeys);
  absl::flat_hash_set<int32_t> seen;
  for (int i = 0; i < kKeys; ++i) {
    for (int t = 1; t < kThreads; ++t) ASSERT_EQ(ids[t][i], ids[0][i]) << "key " << i;
    EXPECT_TRUE(seen.insert(ids[0][i].value()).second) << "id reused: " << ids[0][i].value();
    EXPECT_EQ(table.key(ids[0][i]), keys[i]);
    EXPECT_EQ(table.Find(keys[i]).value(), ids[0][i]);
  }
  for (int32_t v = 0; v < kKeys; ++v) EXPECT_TRUE(seen.contains(v)) << "gap at " << v;
}

}  // namespace
}  // namespace sluice::stream_id_test
