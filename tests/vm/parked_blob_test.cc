// Parked blobs (vm/internal/blob_pool.h): a small eager blob keeps its storage aside in its
// Release and, once dead, is parked whole; NewBlob of the same stream, dtype and
// shape takes it back under a new id. These tests check that a released private blob still
// looks released, that recycling happens only on an exact match and clears what the old
// blob carried (poison), that the parked set is bounded, and that shutdown returns the
// parked bytes to their allocator. Under AddressSanitizer (CI) a parked blob freed twice
// or never shows as an error or a leak.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::testing {
namespace {

int64_t BytesInUse(VmHarness& h, const char* device) {
  return h.runtime->GetDevice(device).value()->caching_allocator().stats().bytes_in_use;
}

// `n` temporaries t = one + one, each released at once, all in runs the scheduler sees only
// when the hold ends: every temporary is born and released in its run (private), except
// where a run is cut between the two. Returns the temporaries' data pointers.
std::vector<const void*> MakePrivateTemporaries(VmHarness& h, absl::string_view stream, int n,
                                                const BlobRef& one) {
  std::vector<const void*> data;
  SchedulerHold hold(h.builder.get());
  for (int i = 0; i < n; ++i) {
    BlobRef t = h.NewF32(stream, 1);
    data.push_back(t->storage()->data());
    EXPECT_TRUE(h.FreshAdd(one, one, t, stream).ok());
    EXPECT_TRUE(h.builder->Release(t).ok());
  }
  return data;
}

// Waits until the retired runs dropped their holds (the scheduler recycles them lazily).
bool WaitParked(VmHarness& h, int64_t at_least) {
  return WaitUntil([&] { return h.vm->stats().parked_blobs >= at_least; });
}

// Waits until every private blob so far died: each was parked, then taken back or evicted
// (tests that leave no private blob alive and none that missed parking).
bool WaitAllPrivateDead(VmHarness& h) {
  return WaitUntil([&] {
    const VmStats s = h.vm->stats();
    return s.parked_blobs + s.recycled_blobs + s.evicted_blobs == s.private_blobs;
  });
}

class ParkedBlobTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ParkedBlobTest, NewBlobTakesAParkedBlobWithItsStorage) {
  const char* stream = GetParam();
  VmHarness h;
  BlobRef one = h.NewF32(stream, 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, stream));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const uint64_t last_id = one->id();
  const std::vector<const void*> data = MakePrivateTemporaries(h, stream, 20, one);
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitAllPrivateDead(h)) << h.vm->stats().ToString();
  const VmStats before = h.vm->stats();
  EXPECT_GE(before.private_blobs, 18) << before.ToString();
  EXPECT_EQ(before.parked_blobs, before.private_blobs) << before.ToString();

  BlobRef reused = h.NewF32(stream, 1);
  const VmStats after = h.vm->stats();
  EXPECT_EQ(after.recycled_blobs, before.recycled_blobs + 1) << after.ToString();
  EXPECT_EQ(after.parked_blobs, before.parked_blobs - 1) << after.ToString();
  // A new blob (new id, usable) whose bytes are a dead temporary's.
  EXPECT_GT(reused->id(), last_id + 20);
  ASSERT_NE(reused->storage(), nullptr);
  EXPECT_NE(std::find(data.begin(), data.end(), reused->storage()->data()), data.end());
  SLUICE_ASSERT_OK(h.FreshAdd(one, one, reused, stream));
  EXPECT_EQ(h.Read(reused).value(), std::vector<float>{2.0f});
}

TEST_P(ParkedBlobTest, OnlyAnExactMatchIsTaken) {
  const char* stream = GetParam();
  VmHarness h;
  BlobRef one = h.NewF32(stream, 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, stream));
  MakePrivateTemporaries(h, stream, 8, one);
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitParked(h, 1)) << h.vm->stats().ToString();
  const int64_t recycled = h.vm->stats().recycled_blobs;
  const std::string other_stream = absl::StrCat(stream, "/compute:1");
  // Another shape, dtype or stream, or a named blob: a fresh allocation each.
  BlobRef wider = h.NewF32(stream, 2);
  BlobRef named = h.NewF32(stream, 1, "named");
  BlobRef elsewhere = h.NewF32(other_stream, 1);
  BlobRef ints = h.vm->NewBlob(h.S(stream), DataType::kI32, Shape({1})).value();
  BlobRef matrix = h.vm->NewBlob(h.S(stream), DataType::kF32, Shape({1, 1})).value();
  EXPECT_EQ(h.vm->stats().recycled_blobs, recycled) << h.vm->stats().ToString();
  BlobRef same = h.NewF32(stream, 1);
  EXPECT_EQ(h.vm->stats().recycled_blobs, recycled + 1) << h.vm->stats().ToString();
}

VmOptions WithMaxParked(int64_t n) {
  VmOptions options;
  options.max_parked_blobs = n;
  return options;
}

TEST_P(ParkedBlobTest, ParkedSetIsBounded) {
  const char* stream = GetParam();
  const VmOptions options = WithMaxParked(256);
  VmHarness h(options);
  BlobRef one = h.NewF32(stream, 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, stream));
  constexpr int kTemporaries = 400;
  MakePrivateTemporaries(h, stream, kTemporaries, one);
  SLUICE_ASSERT_OK(h.vm->Sync());
  const int64_t cap = options.max_parked_blobs;
  ASSERT_TRUE(WaitAllPrivateDead(h)) << h.vm->stats().ToString();
  const VmStats stats = h.vm->stats();
  ASSERT_GT(stats.private_blobs, cap) << stats.ToString();  // more died than may wait
  EXPECT_EQ(stats.parked_blobs, cap) << stats.ToString();
  EXPECT_EQ(stats.evicted_blobs, stats.private_blobs - cap) << stats.ToString();
}

TEST_P(ParkedBlobTest, ZeroMaxParkedBlobsParksNothing) {
  const char* stream = GetParam();
  VmHarness h(WithMaxParked(0));
  BlobRef one = h.NewF32(stream, 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, stream));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const int64_t baseline = BytesInUse(h, stream);  // `one` (streams here are devices')
  MakePrivateTemporaries(h, stream, 20, one);
  SLUICE_ASSERT_OK(h.vm->Sync());
  // Every temporary's bytes go back to the allocator (parked ones would stay in use).
  ASSERT_TRUE(WaitUntil([&] { return BytesInUse(h, stream) == baseline; }))
      << BytesInUse(h, stream) << " bytes in use, " << baseline << " expected";
  BlobRef t = h.NewF32(stream, 1);
  const VmStats stats = h.vm->stats();
  EXPECT_GT(stats.private_blobs, 0) << stats.ToString();
  EXPECT_EQ(stats.parked_blobs, 0) << stats.ToString();
  EXPECT_EQ(stats.recycled_blobs, 0) << stats.ToString();
}

INSTANTIATE_TEST_SUITE_P(Streams, ParkedBlobTest, ::testing::Values("cpu", "sim:0"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param == std::string("cpu") ? "Cpu" : "Sim");
                         });

// A released private blob looks released through a kept reference (no storage) even
// though its bytes wait to be parked with it.
TEST(ParkedBlobTest, ReleasedPrivateBlobHasNoStorage) {
  VmHarness h;
  BlobRef one = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  BlobRef kept;
  {
    SchedulerHold hold(h.builder.get());
    BlobRef t = h.NewF32("cpu", 1);
    SLUICE_ASSERT_OK(h.FreshAdd(one, one, t, "cpu"));
    SLUICE_ASSERT_OK(h.builder->Release(t));
    kept = t;
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->stats().private_blobs, 1);
  EXPECT_EQ(kept->storage(), nullptr);
  // Held by `kept`, so not parked yet; dropping it parks the blob.
  EXPECT_EQ(h.vm->stats().parked_blobs, 0);
  kept.reset();
  EXPECT_TRUE(WaitParked(h, 1)) << h.vm->stats().ToString();
}

// A private blob poisoned by a failed step is parked like any other; the blob made from
// it starts clean.
TEST(ParkedBlobTest, RecycledBlobIsNotPoisoned) {
  VmHarness h;
  BlobRef one = h.NewF32("cpu", 1);
  BlobRef wide = h.NewF32("cpu", 3);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  SLUICE_ASSERT_OK(h.Fill(wide, 1.0, "cpu"));
  SLUICE_ASSERT_OK(h.vm->Sync());
  {
    SchedulerHold hold(h.builder.get());
    BlobRef bad = h.NewF32("cpu", 1);
    SLUICE_ASSERT_OK(h.FreshAdd(one, wide, bad, "cpu"));  // fails in the kernel: poisons `bad`
    SLUICE_ASSERT_OK(h.builder->Release(bad));
  }
  EXPECT_FALSE(h.vm->Sync().ok());
  ASSERT_EQ(h.vm->stats().private_blobs, 1);
  ASSERT_TRUE(WaitParked(h, 1)) << h.vm->stats().ToString();
  BlobRef fresh = h.NewF32("cpu", 1);
  ASSERT_EQ(h.vm->stats().recycled_blobs, 1);  // it is the poisoned blob, recycled
  EXPECT_FALSE(fresh->poisoned());
  SLUICE_ASSERT_OK(h.Add(one, one, fresh, "cpu"));
  EXPECT_EQ(h.Read(fresh).value(), std::vector<float>{2.0f});
}

// A blob the engine tracked — released in an instruction of its own, not privately in a
// fused run — is parked when the engine deletes it, and comes back with no trace of its
// first life in the engine: using it does not make the engine delete (or park) it while it
// is referenced.
TEST(ParkedBlobTest, BlobTheEngineTrackedIsParkedAndComesBackClean) {
  VmHarness h;
  h.builder->set_fusion(false);
  BlobRef one = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  const void* data = nullptr;
  {
    BlobRef t = h.NewF32("cpu", 1);
    data = t->storage()->data();
    SLUICE_ASSERT_OK(h.FreshAdd(one, one, t, "cpu"));
    SLUICE_ASSERT_OK(h.builder->Release(t, /*dying=*/true));
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitParked(h, 1)) << h.vm->stats().ToString();
  EXPECT_EQ(h.vm->stats().private_blobs, 0);

  BlobRef fresh = h.NewF32("cpu", 1);
  ASSERT_EQ(h.vm->stats().recycled_blobs, 1);
  ASSERT_NE(fresh->storage(), nullptr);
  EXPECT_EQ(fresh->storage()->data(), data);
  // Written, read and written again: each retirement drops a use of `fresh`; none may
  // delete it.
  SLUICE_ASSERT_OK(h.Add(one, one, fresh, "cpu"));
  SLUICE_ASSERT_OK(h.Add(fresh, one, fresh, "cpu"));
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->stats().parked_blobs, 0) << h.vm->stats().ToString();
  EXPECT_EQ(h.Read(fresh).value(), std::vector<float>{3.0f});
}

// A blob its releaser keeps (Release without `dying`) gets its storage freed by the
// Release, as before parking: kept bytes would live as long as the reference — possibly
// past the allocator — and nothing is parked when it dies.
TEST(ParkedBlobTest, ReleaseOfAKeptBlobFreesItsStorage) {
  VmHarness h;
  h.builder->set_fusion(false);  // a lone Release: not run-private
  BlobRef one = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const int64_t baseline = BytesInUse(h, "cpu");
  BlobRef t = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Add(one, one, t, "cpu"));
  SLUICE_ASSERT_OK(h.builder->Release(t));
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(t->storage(), nullptr);
  EXPECT_EQ(BytesInUse(h, "cpu"), baseline);  // freed while `t` is still held
  t.reset();
  SLUICE_ASSERT_OK(h.vm->Sync());
  BlobRef fresh = h.NewF32("cpu", 1);
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.parked_blobs + stats.recycled_blobs, 0) << stats.ToString();
}

TEST(ParkedBlobTest, OutOfRangeMaxParkedBlobsIsRejected) {
  for (int64_t bad_value : {int64_t{-1}, int64_t{1} << 40}) {
    VmOptions bad;
    bad.max_parked_blobs = bad_value;
    const absl::Status status = CreateStatus(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad_value;
    EXPECT_NE(status.message().find("max_parked_blobs"), std::string::npos) << status;
  }
}

// Shutdown returns parked bytes to the allocator: nothing stays in use.
TEST(ParkedBlobTest, ShutdownFreesParkedStorage) {
  VmHarness h;
  {
    BlobRef one = h.NewF32("cpu", 1);
    SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
    MakePrivateTemporaries(h, "cpu", 30, one);
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitAllPrivateDead(h)) << h.vm->stats().ToString();
  ASSERT_GT(h.vm->stats().parked_blobs, 0);
  EXPECT_GT(BytesInUse(h, "cpu"), 0);  // the parked blobs' bytes (no other blob is alive)
  SLUICE_ASSERT_OK(h.vm->Shutdown());
  EXPECT_EQ(h.vm->stats().parked_blobs, 0);
  EXPECT_EQ(BytesInUse(h, "cpu"), 0);
}

}  // namespace
}  // namespace sluice::vm::testing

namespace sluice::vm::testing {
namespace {

// Recycled blobs draw their ids in blocks (BlobPool::TakeParked): every blob, recycled or
// fresh, still gets an id no other blob of the VM had.
TEST(ParkedBlobIdsTest, RecycledAndFreshBlobsGetDistinctIds) {
  VmHarness h;
  BlobRef one = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  std::vector<uint64_t> ids;
  for (int round = 0; round < 20; ++round) {
    MakePrivateTemporaries(h, "cpu", 50, one);
    SLUICE_ASSERT_OK(h.vm->Sync());
    ASSERT_TRUE(WaitAllPrivateDead(h)) << h.vm->stats().ToString();
    // Some of these take parked blobs, the rest are fresh (a named one never is parked).
    for (int i = 0; i < 60; ++i) ids.push_back(h.NewF32("cpu", 1)->id());
    ids.push_back(h.NewF32("cpu", 1, "named")->id());
  }
  EXPECT_GT(h.vm->stats().recycled_blobs, 0) << h.vm->stats().ToString();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "a blob id came twice";
}

// The scheduler parks into an inbox while the producer takes from its ring, and evicts
// whenever the two hold more than the bound: with a small bound both happen all the time.
// The counts must add up and the bound must hold (ThreadSanitizer in CI checks the rest).
TEST(ParkedBlobIdsTest, ParkingTakingAndEvictingConcurrently) {
  VmHarness h(WithMaxParked(16));
  BlobRef one = h.NewF32("cpu", 1);
  SLUICE_ASSERT_OK(h.Fill(one, 1.0, "cpu"));
  for (int round = 0; round < 50; ++round) {
    // 40 temporaries die together once the hold ends: more than the bound, so some go.
    MakePrivateTemporaries(h, "cpu", 40, one);
    // No hold: runs retire (and their blobs park) while this loop takes parked ones.
    for (int i = 0; i < 200; ++i) {
      BlobRef t = h.NewF32("cpu", 1);
      SLUICE_ASSERT_OK(h.FreshAdd(one, one, t, "cpu"));
      SLUICE_ASSERT_OK(h.builder->Release(t));
    }
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  ASSERT_TRUE(WaitAllPrivateDead(h)) << h.vm->stats().ToString();
  const VmStats stats = h.vm->stats();
  EXPECT_LE(stats.parked_blobs, 16) << stats.ToString();
  EXPECT_GT(stats.recycled_blobs, 0) << stats.ToString();
  EXPECT_GT(stats.evicted_blobs, 0) << stats.ToString();
}

}  // namespace
}  // namespace sluice::vm::testing
