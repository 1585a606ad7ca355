// Tests for core/caching_allocator.h: the reuse rules of StreamOrderedCachingAllocator
// (same-stream reuse, RecordStream'd blocks held until their fences are done, cross-stream
// reuse only after an owner fence), its out-of-memory path, its stats, EmptyCache, a seeded
// randomized run against a model of stream progress, and concurrent use from several threads.
//
// Fences come from FakeFenceRecorder (tests/core/fake_memory.h): the test decides when each is
// done, and a thread blocked in Wait is observed with AwaitWaiterOn, never with sleeps.
#include "core/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/core/fake_memory.h"

namespace sluice::caching_allocator_test {
namespace {

using ::sluice::testing::FakeFenceRecorder;
using ::sluice::testing::FakeRawAllocator;
using ::testing::HasSubstr;

constexpr StreamId kS0(0);
constexpr StreamId kS1(1);
constexpr StreamId kS2(2);
constexpr StreamId kS3(3);

// Allocate that must succeed; records a test failure and returns null otherwise.
void* MustAllocate(Allocator& allocator, size_t bytes, StreamId stream) {
  absl::StatusOr<void*> ptr = allocator.Allocate(bytes, stream);
  EXPECT_TRUE(ptr.ok()) << "Allocate(" << bytes << ", stream " << stream.value()
                        << "): " << ptr.status();
  return ptr.ok() ? *ptr : nullptr;
}

// An Allocate running on its own thread, for requests that block in a fence's Wait.
class AsyncAllocate {
 public:
  AsyncAllocate(Allocator& allocator, size_t bytes, StreamId stream)
      : thread_([this, &allocator, bytes, stream] {
          result_ = allocator.Allocate(bytes, stream);
          done_.Notify();
        }) {}
  ~AsyncAllocate() {
    if (thread_.joinable()) thread_.join();
  }
  bool done() const { return done_.HasBeenNotified(); }
  // Joins the thread and returns what Allocate returned.
  absl::StatusOr<void*> Get() {
    thread_.join();
    return result_;
  }

 private:
  absl::Notification done_;
  absl::StatusOr<void*> result_;
  std::thread thread_;  // last: starts after the other members exist
};

class StreamOrderedCachingAllocatorTest : public ::testing::Test {
 protected:
  // Declared before any allocator a test creates, so they outlive it.
  FakeRawAllocator raw_;
  FakeFenceRecorder fences_;
};

TEST_F(StreamOrderedCachingAllocatorTest, SameStreamReusesAFreedBlockAtOnce) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1000, kS0);
  allocator.Deallocate(a);
  EXPECT_EQ(MustAllocate(allocator, 1000, kS0), a);
  EXPECT_EQ(raw_.num_allocations(), 1);
  EXPECT_EQ(fences_.num_records(), 0);  // stream order alone makes this reuse safe
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_allocations, 2);
  EXPECT_EQ(stats.num_cache_hits, 1);
  EXPECT_EQ(stats.num_raw_allocations, 1);
  EXPECT_EQ(stats.num_cross_stream_reuses, 0);
  allocator.Deallocate(a);
}

TEST_F(StreamOrderedCachingAllocatorTest, RequestsAreRoundedAndServedWithinTheFitRatio) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);  // 512-byte rounding, ratio 2
  void* a = MustAllocate(allocator, 1000, kS0);
  EXPECT_EQ(raw_.BlockSize(a), 1024u);
  allocator.Deallocate(a);
  // A 1024-byte block serves any request that rounds to 512 or 1024 bytes.
  EXPECT_EQ(MustAllocate(allocator, 1, kS0), a);
  allocator.Deallocate(a);
  EXPECT_EQ(MustAllocate(allocator, 513, kS0), a);
  allocator.Deallocate(a);

  void* big = MustAllocate(allocator, 4096, kS0);
  allocator.Deallocate(big);
  // 4096 > 2 * 1024: too wasteful, so 1024-byte requests take the 1024 block, and once it is
  // in use, a new one.
  void* x = MustAllocate(allocator, 1024, kS0);
  void* y = MustAllocate(allocator, 1024, kS0);
  EXPECT_EQ(x, a);
  EXPECT_NE(y, big);
  EXPECT_EQ(raw_.BlockSize(y), 1024u);
  // The 4096 block still serves what fits.
  EXPECT_EQ(MustAllocate(allocator, 2049, kS0), big);
  EXPECT_EQ(raw_.num_allocations(), 3);
  for (void* p : {x, y, big}) allocator.Deallocate(p);
}

TEST_F(StreamOrderedCachingAllocatorTest, CustomRoundingApplies) {
  CachingAllocatorOptions options;
  options.round_bytes = 4096;
  options.max_fit_ratio = 1;
  StreamOrderedCachingAllocator allocator(&raw_, &fences_, options);
  void* a = MustAllocate(allocator, 1, kS0);
  EXPECT_EQ(raw_.BlockSize(a), 4096u);
  allocator.Deallocate(a);
  void* b = MustAllocate(allocator, 5000, kS0);  // 8192: the 4096 block is too small
  EXPECT_NE(b, a);
  EXPECT_EQ(raw_.BlockSize(b), 8192u);
  allocator.Deallocate(b);
  EXPECT_EQ(MustAllocate(allocator, 4000, kS0), a);  // exact fit; 8192 > 1 * 4096
  allocator.Deallocate(a);
}

TEST_F(StreamOrderedCachingAllocatorTest, ZeroBytesGiveUniqueNonNullPointers) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 0, kS0);
  void* b = MustAllocate(allocator, 0, kS0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(allocator.stats().bytes_in_use, 1024);  // two blocks of the 512-byte minimum
  allocator.Deallocate(a);
  allocator.Deallocate(b);
}

TEST_F(StreamOrderedCachingAllocatorTest, InvalidStreamIsRejected) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  absl::StatusOr<void*> ptr = allocator.Allocate(16, StreamId());
  ASSERT_FALSE(ptr.ok());
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ptr.status().message(), HasSubstr("invalid stream"));
  EXPECT_EQ(allocator.stats().num_allocations, 0);
  EXPECT_EQ(raw_.num_allocations(), 0);
}

TEST_F(StreamOrderedCachingAllocatorTest, OtherStreamsDoNotTakeCachedBlocksWhileRawMemoryLasts) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(a);
  void* b = MustAllocate(allocator, 1024, kS1);
  EXPECT_NE(b, a);
  EXPECT_EQ(fences_.num_records(), 0);
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 0);
  allocator.Deallocate(b);
}

// A block used by other streams is held until a fence on each of them is done: nobody, not
// even the owner, gets it earlier. Then it goes back to the owner's free list only.
TEST_F(StreamOrderedCachingAllocatorTest, RecordedBlockIsHeldUntilAllFencesAreDone) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1000, kS0);
  allocator.RecordStream(a, kS1);
  allocator.RecordStream(a, kS2);
  allocator.RecordStream(a, kS1);  // again: one fence is enough
  allocator.RecordStream(a, kS0);  // the owner: stream order covers it
  allocator.Deallocate(a);
  // A free is applied (and its fences recorded) by the allocator's next call.
  EXPECT_EQ(fences_.NumRecordsOn(kS1), 0);
  EXPECT_EQ(allocator.stats().bytes_in_use, 0);
  EXPECT_EQ(fences_.NumRecordsOn(kS0), 0);
  EXPECT_EQ(fences_.NumRecordsOn(kS1), 1);
  EXPECT_EQ(fences_.NumRecordsOn(kS2), 1);
  EXPECT_EQ(allocator.stats().bytes_cached, 1024);

  std::vector<void*> live;
  for (StreamId s : {kS0, kS1, kS2, kS3}) {
    void* p = MustAllocate(allocator, 1000, s);
    EXPECT_NE(p, a) << "reused by stream " << s.value() << " before any fence was done";
    live.push_back(p);
  }
  fences_.CompleteStream(kS1);
  for (StreamId s : {kS0, kS1, kS2, kS3}) {
    void* p = MustAllocate(allocator, 1000, s);
    EXPECT_NE(p, a) << "reused by stream " << s.value() << " while the stream 2 fence runs";
    live.push_back(p);
  }
  fences_.CompleteStream(kS2);
  for (StreamId s : {kS1, kS2, kS3}) {
    void* p = MustAllocate(allocator, 1000, s);
    EXPECT_NE(p, a) << "stream " << s.value() << " took the owner's block";
    live.push_back(p);
  }
  EXPECT_EQ(MustAllocate(allocator, 1000, kS0), a);  // back with its owner
  live.push_back(a);
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 0);
  EXPECT_EQ(allocator.stats().num_cache_hits, 1);
  for (void* p : live) allocator.Deallocate(p);
}

TEST_F(StreamOrderedCachingAllocatorTest, RecordedBlockGoesBackToItsOwnerWhenFencesAreDone) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 512, kS1);
  allocator.RecordStream(a, kS0);
  allocator.Deallocate(a);
  allocator.stats();  // applies the free: its fence on stream 0 is recorded now
  fences_.CompleteAll();
  EXPECT_NE(MustAllocate(allocator, 512, kS0), a);  // stream 0 used it but does not own it
  EXPECT_EQ(MustAllocate(allocator, 512, kS1), a);
  EXPECT_EQ(fences_.num_records(), 1);
}

// The owner's free list is the owner's: under memory pressure another stream takes a block
// from it only after a fence recorded on the owner after the free is done, and it waits for
// that fence without holding the allocator's lock.
TEST_F(StreamOrderedCachingAllocatorTest, OtherStreamTakesOwnersBlockOnlyAfterOwnerFence) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(a);
  EXPECT_EQ(fences_.num_records(), 0);  // recorded lazily

  AsyncAllocate request(allocator, 1024, kS1);
  fences_.AwaitWaiterOn(kS0);
  EXPECT_FALSE(request.done());
  EXPECT_EQ(fences_.NumRecordsOn(kS0), 1);
  // The allocator is not locked while it waits.
  AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_cross_stream_reuses, 0);
  EXPECT_EQ(stats.bytes_cached, 1024);
  EXPECT_EQ(stats.bytes_in_use, 0);
  EXPECT_FALSE(request.done());

  fences_.CompleteStream(kS0);
  absl::StatusOr<void*> b = request.Get();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, a);
  stats = allocator.stats();
  EXPECT_EQ(stats.num_cross_stream_reuses, 1);
  EXPECT_EQ(stats.num_cache_hits, 1);
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.bytes_in_use, 1024);
  EXPECT_EQ(raw_.num_allocations(), 1);
  EXPECT_EQ(fences_.NumRecordsOn(kS0), 1);

  // The block now belongs to stream 1: it reuses it at once after a free.
  allocator.Deallocate(*b);
  EXPECT_EQ(MustAllocate(allocator, 1024, kS1), a);
  allocator.Deallocate(a);
}

TEST_F(StreamOrderedCachingAllocatorTest, OwnerFenceAlreadyDoneMeansNoWait) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(a);
  fences_.SetIdle(kS0);  // stream 0 has nothing in flight
  EXPECT_EQ(MustAllocate(allocator, 600, kS2), a);
  EXPECT_EQ(fences_.num_waits(), 0);
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 1);
  allocator.Deallocate(a);
}

// Out of raw memory with only too-small blocks cached: the allocator waits for their owner
// fences, returns them to the raw allocator and retries.
TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryReleasesCachedBlocksAndRetries) {
  raw_.set_limit(2048);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  void* b = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(a);
  allocator.Deallocate(b);

  AsyncAllocate request(allocator, 2048, kS1);
  fences_.AwaitWaiterOn(kS0);
  EXPECT_FALSE(request.done());
  EXPECT_EQ(raw_.num_frees(), 0);  // nothing is released before the owner is done with it
  fences_.CompleteStream(kS0);
  absl::StatusOr<void*> c = request.Get();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(raw_.BlockSize(*c), 2048u);
  EXPECT_EQ(raw_.num_frees(), 2);
  EXPECT_EQ(raw_.num_allocations(), 3);
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.bytes_cached, 0);
  EXPECT_EQ(stats.bytes_in_use, 2048);
  EXPECT_EQ(stats.num_raw_allocations, 3);
  EXPECT_EQ(stats.num_cross_stream_reuses, 0);
  allocator.Deallocate(*c);
}

TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryReturnsResourceExhaustedNamingTheSize) {
  raw_.set_limit(4096);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* x = MustAllocate(allocator, 4096, kS0);
  absl::StatusOr<void*> y = allocator.Allocate(1000, kS1);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(y.status().message(), HasSubstr("1024 bytes"));  // the rounded request
  EXPECT_THAT(y.status().message(), HasSubstr("fake device memory"));
  EXPECT_THAT(y.status().message(), HasSubstr("stream 1"));
  EXPECT_THAT(y.status().message(), HasSubstr("4096 of 4096 in use"));  // the raw cause
  EXPECT_EQ(fences_.num_waits(), 0);  // nothing cached, nothing to wait for
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_allocations, 1);
  EXPECT_EQ(stats.bytes_in_use, 4096);
  // Freeing makes the memory available again.
  allocator.Deallocate(x);
  fences_.SetIdle(kS0);
  EXPECT_EQ(MustAllocate(allocator, 1000, kS1), x);
  allocator.Deallocate(x);
}

TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryReportsAFailedStream) {
  raw_.set_limit(2048);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* held = MustAllocate(allocator, 1024, kS2);
  void* cached = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(cached);

  AsyncAllocate request(allocator, 2048, kS1);
  fences_.AwaitWaiterOn(kS0);
  fences_.CompleteStream(kS0, absl::InternalError("stream 0 crashed"));
  absl::StatusOr<void*> result = request.Get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("2048 bytes"));
  EXPECT_THAT(result.status().message(), HasSubstr("a stream failed: stream 0 crashed"));
  allocator.Deallocate(held);
}

// The simplest out-of-memory case: a stream's own block is held for another stream's fence.
// The allocator waits for that fence and must then give the block back to its owner (no
// owner fence is needed: stream order covers the owner) instead of failing.
TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryWaitsForOwnPendingBlock) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.RecordStream(a, kS1);
  allocator.Deallocate(a);

  AsyncAllocate request(allocator, 1024, kS0);
  fences_.AwaitWaiterOn(kS1);
  EXPECT_FALSE(request.done());
  fences_.SetAllIdle();  // also unblocks any later wait, so a wrong path fails, not hangs
  absl::StatusOr<void*> b = request.Get();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, a);
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 0);
  allocator.Deallocate(a);
}

// Another stream under memory pressure may take a block that was held for fences once those
// fences and a fence on its owner are done.
TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryStealsAHeldBlockOnceAllFencesAreDone) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.RecordStream(a, kS1);
  allocator.Deallocate(a);

  AsyncAllocate request(allocator, 1024, kS2);
  fences_.AwaitWaiterOn(kS1);
  EXPECT_FALSE(request.done());
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 0);
  fences_.SetAllIdle();
  absl::StatusOr<void*> b = request.Get();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, a);
  EXPECT_EQ(allocator.stats().num_cross_stream_reuses, 1);
  EXPECT_GE(fences_.NumRecordsOn(kS0), 1);  // the owner was fenced before the steal
  allocator.Deallocate(a);
}

TEST_F(StreamOrderedCachingAllocatorTest, StatsAreExactAfterAScriptedSequence) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  auto expect_stats = [&](int line, int64_t in_use, int64_t peak, int64_t cached, int64_t allocs,
                          int64_t hits, int64_t raws, int64_t cross) {
    const AllocatorStats s = allocator.stats();
    EXPECT_EQ(s.bytes_in_use, in_use) << "line " << line;
    EXPECT_EQ(s.peak_bytes_in_use, peak) << "line " << line;
    EXPECT_EQ(s.bytes_cached, cached) << "line " << line;
    EXPECT_EQ(s.num_allocations, allocs) << "line " << line;
    EXPECT_EQ(s.num_cache_hits, hits) << "line " << line;
    EXPECT_EQ(s.num_raw_allocations, raws) << "line " << line;
    EXPECT_EQ(s.num_cross_stream_reuses, cross) << "line " << line;
    EXPECT_EQ(static_cast<size_t>(s.bytes_in_use + s.bytes_cached), raw_.bytes_in_use())
        << "line " << line;
  };
  expect_stats(__LINE__, 0, 0, 0, 0, 0, 0, 0);
  void* a = MustAllocate(allocator, 1000, kS0);  // raw 1024
  void* b = MustAllocate(allocator, 100, kS0);   // raw 512
  expect_stats(__LINE__, 1536, 1536, 0, 2, 0, 2, 0);
  allocator.Deallocate(a);
  expect_stats(__LINE__, 512, 1536, 1024, 2, 0, 2, 0);
  void* c = MustAllocate(allocator, 600, kS0);  // hit: a
  EXPECT_EQ(c, a);
  expect_stats(__LINE__, 1536, 1536, 0, 3, 1, 2, 0);
  void* d = MustAllocate(allocator, 300, kS1);  // raw 512
  expect_stats(__LINE__, 2048, 2048, 0, 4, 1, 3, 0);
  allocator.Deallocate(b);
  void* e = MustAllocate(allocator, 200, kS0);  // hit: b
  EXPECT_EQ(e, b);
  expect_stats(__LINE__, 2048, 2048, 0, 5, 2, 3, 0);
  allocator.RecordStream(c, kS1);
  allocator.Deallocate(c);  // held for stream 1
  expect_stats(__LINE__, 1024, 2048, 1024, 5, 2, 3, 0);
  void* f = MustAllocate(allocator, 1024, kS0);  // raw: c is held
  EXPECT_NE(f, c);
  expect_stats(__LINE__, 2048, 2048, 1024, 6, 2, 4, 0);
  fences_.CompleteStream(kS1);
  void* g = MustAllocate(allocator, 513, kS0);  // hit: c is back
  EXPECT_EQ(g, c);
  expect_stats(__LINE__, 3072, 3072, 0, 7, 3, 4, 0);
  allocator.Deallocate(d);
  expect_stats(__LINE__, 2560, 3072, 512, 7, 3, 4, 0);
  void* h = MustAllocate(allocator, 100, kS0);  // raw: d is stream 1's
  expect_stats(__LINE__, 3072, 3072, 512, 8, 3, 5, 0);
  raw_.set_limit(raw_.bytes_in_use());
  fences_.SetIdle(kS1);
  void* i = MustAllocate(allocator, 512, kS2);  // out of raw memory: steals d
  EXPECT_EQ(i, d);
  expect_stats(__LINE__, 3584, 3584, 0, 9, 4, 5, 1);
  absl::StatusOr<void*> j = allocator.Allocate(512, kS3);  // truly out of memory
  EXPECT_EQ(j.status().code(), absl::StatusCode::kResourceExhausted);
  expect_stats(__LINE__, 3584, 3584, 0, 9, 4, 5, 1);
  for (void* p : {e, f, g, h, i}) allocator.Deallocate(p);
  expect_stats(__LINE__, 0, 3584, 3584, 9, 4, 5, 1);

  const std::string text = allocator.stats().ToString();
  EXPECT_THAT(text, HasSubstr("in_use=0B"));
  EXPECT_THAT(text, HasSubstr("peak=3584B"));
  EXPECT_THAT(text, HasSubstr("cache_hits=4"));
  EXPECT_THAT(text, HasSubstr("cross_stream_reuses=1"));
}

// Without fences (a synchronous device) every freed block is reusable by any stream at once,
// including one that other streams used.
TEST_F(StreamOrderedCachingAllocatorTest, SynchronousModeReusesAcrossStreamsAtOnce) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, /*fences=*/nullptr);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.RecordStream(a, kS1);
  allocator.Deallocate(a);
  EXPECT_EQ(MustAllocate(allocator, 1024, kS0), a);
  allocator.RecordStream(a, kS2);
  allocator.Deallocate(a);
  EXPECT_EQ(MustAllocate(allocator, 1024, kS1), a);  // out of raw memory: taken at once
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.num_cross_stream_reuses, 1);
  EXPECT_EQ(stats.num_cache_hits, 2);
  EXPECT_EQ(raw_.num_allocations(), 1);
  allocator.Deallocate(a);
  ASSERT_TRUE(allocator.EmptyCache().ok());
  EXPECT_EQ(raw_.bytes_in_use(), 0u);
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
}

TEST_F(StreamOrderedCachingAllocatorTest, EmptyCacheWaitsForOwnersAndReturnsEveryFreeBlock) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  void* b = MustAllocate(allocator, 512, kS1);
  void* live = MustAllocate(allocator, 2048, kS2);
  allocator.Deallocate(a);
  allocator.Deallocate(b);

  absl::Status status;
  absl::Notification emptied;
  std::thread thread([&] {
    status = allocator.EmptyCache();
    emptied.Notify();
  });
  fences_.AwaitWaiterOn(kS0);
  EXPECT_FALSE(emptied.HasBeenNotified());
  EXPECT_EQ(raw_.num_frees(), 0);  // stream 0 may still be using its block
  fences_.SetAllIdle();
  thread.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(raw_.num_frees(), 2);
  EXPECT_EQ(raw_.bytes_in_use(), 2048u);
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
  EXPECT_EQ(allocator.stats().bytes_in_use, 2048);

  allocator.Deallocate(live);  // blocks in use are untouched; free it and empty again
  ASSERT_TRUE(allocator.EmptyCache().ok());
  EXPECT_EQ(raw_.bytes_in_use(), 0u);
  EXPECT_EQ(raw_.num_live(), 0);
  // The allocator keeps working afterwards.
  void* again = MustAllocate(allocator, 100, kS0);
  EXPECT_EQ(allocator.stats().num_raw_allocations, 4);
  allocator.Deallocate(again);
}

TEST_F(StreamOrderedCachingAllocatorTest, EmptyCacheReturnsTheErrorOfAFailedStream) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  allocator.Deallocate(MustAllocate(allocator, 1024, kS0));
  absl::Status status;
  std::thread thread([&] { status = allocator.EmptyCache(); });
  fences_.AwaitWaiterOn(kS0);
  fences_.CompleteStream(kS0, absl::DataLossError("stream 0 crashed"));
  thread.join();
  EXPECT_EQ(status, absl::DataLossError("stream 0 crashed"));
}

// EmptyCache promises to return every free block once pending ones are done. A block that
// was held for another stream's fence at the call must be released too (regression: its
// owner fence was never recorded, so it stayed cached).
TEST_F(StreamOrderedCachingAllocatorTest, EmptyCacheReleasesBlocksHeldForOtherStreams) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  allocator.RecordStream(a, kS1);
  allocator.Deallocate(a);
  fences_.SetAllIdle();
  ASSERT_TRUE(allocator.EmptyCache().ok());
  EXPECT_EQ(allocator.stats().bytes_cached, 0);
  EXPECT_EQ(raw_.bytes_in_use(), 0u);
}

// A block whose other user cannot be fenced (its stream failed) must never be handed out
// again: the allocator forgets it and leaks the raw memory on purpose.
TEST_F(StreamOrderedCachingAllocatorTest, BlockIsDroppedWhenAUserCannotBeFenced) {
  void* a = nullptr;
  {
    StreamOrderedCachingAllocator allocator(&raw_, &fences_);
    a = MustAllocate(allocator, 1024, kS0);
    fences_.FailRecordsOn(kS1);
    allocator.RecordStream(a, kS1);
    allocator.Deallocate(a);
    AllocatorStats stats = allocator.stats();
    EXPECT_EQ(stats.bytes_in_use, 0);
    EXPECT_EQ(stats.bytes_cached, 0);
    for (StreamId s : {kS0, kS1, kS2}) {
      void* p = MustAllocate(allocator, 1024, s);
      EXPECT_NE(p, a) << "stream " << s.value();
      allocator.Deallocate(p);
    }
    fences_.SetAllIdle();
    ASSERT_TRUE(allocator.EmptyCache().ok());
    // Left with the raw allocator: the dropped block, and stream 1's own cached block, which
    // cannot be proven unused without a fence on stream 1.
    EXPECT_EQ(raw_.num_live(), 2);
    EXPECT_EQ(raw_.BlockSize(a), 1024u);
    EXPECT_EQ(allocator.stats().bytes_cached, 1024);
  }
  EXPECT_EQ(raw_.num_live(), 1);  // the destructor frees the cached block, not the dropped one
  EXPECT_EQ(raw_.BlockSize(a), 1024u);
}

TEST_F(StreamOrderedCachingAllocatorTest, DestructorReturnsAllMemory) {
  {
    StreamOrderedCachingAllocator allocator(&raw_, &fences_);
    MustAllocate(allocator, 100, kS0);  // leaked by its user: freed and reported on stderr
    void* held = MustAllocate(allocator, 2000, kS0);
    allocator.RecordStream(held, kS1);
    allocator.Deallocate(held);
    allocator.Deallocate(MustAllocate(allocator, 5000, kS2));
    fences_.CompleteAll();
    EXPECT_EQ(raw_.num_live(), 3);
  }
  EXPECT_EQ(raw_.num_live(), 0);
  EXPECT_EQ(raw_.bytes_in_use(), 0u);
  EXPECT_EQ(raw_.num_frees(), 3);
}

// A request so large that rounding it up overflows must fail, not wrap around to a tiny
// block (regression: RoundUp wrapped to 0 and called RawAllocator::Allocate(0)).
TEST_F(StreamOrderedCachingAllocatorTest, HugeRequestFailsInsteadOfWrapping) {
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  absl::StatusOr<void*> ptr = allocator.Allocate(std::numeric_limits<size_t>::max() - 100, kS0);
  EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(raw_.num_allocations(), 0);
  if (ptr.ok()) allocator.Deallocate(*ptr);
}

// A reclaimer that runs `reclaim` (a stand-in for a VM running its queued Releases).
class FakeReclaimer final : public MemoryReclaimer {
 public:
  explicit FakeReclaimer(std::function<absl::Status(StreamId)> reclaim)
      : reclaim_(std::move(reclaim)) {}
  absl::Status Reclaim(StreamId stream) override {
    calls_.fetch_add(1);
    return reclaim_(stream);
  }
  int calls() const { return calls_.load(); }

 private:
  std::function<absl::Status(StreamId)> reclaim_;
  std::atomic<int> calls_{0};
};

// Out of memory with nothing cached, the allocator lets its reclaimer finish a queued free
// (here: `a`'s) and takes the block it returned; memory that suffices never calls it.
TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryRunsReclaimersAndRetries) {
  raw_.set_limit(2048);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* a = MustAllocate(allocator, 1024, kS0);
  void* b = MustAllocate(allocator, 1024, kS0);
  FakeReclaimer reclaimer([&](StreamId stream) {
    EXPECT_EQ(stream, kS0);
    allocator.Deallocate(a);  // without the allocator's lock held: a free may take it
    return absl::OkStatus();
  });
  allocator.AddReclaimer(&reclaimer);
  absl::StatusOr<void*> c = allocator.Allocate(1024, kS0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(*c, a);
  EXPECT_EQ(reclaimer.calls(), 1);
  EXPECT_EQ(raw_.num_allocations(), 2);
  allocator.Deallocate(b);
  EXPECT_EQ(MustAllocate(allocator, 1024, kS0), b);
  EXPECT_EQ(reclaimer.calls(), 1);
  allocator.RemoveReclaimer(&reclaimer);
  allocator.Deallocate(a);
  allocator.Deallocate(b);
}

// Cached memory that no stream uses any more (here: taken by another stream once its owner
// is idle) serves the request before any reclaimer is asked.
TEST_F(StreamOrderedCachingAllocatorTest, CachedMemoryIsUsedBeforeReclaimersRun) {
  raw_.set_limit(2048);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  FakeReclaimer reclaimer([](StreamId) { return absl::OkStatus(); });
  allocator.AddReclaimer(&reclaimer);
  allocator.Deallocate(MustAllocate(allocator, 2048, kS0));
  fences_.SetIdle(kS0);
  void* big = MustAllocate(allocator, 2048, kS1);
  EXPECT_EQ(reclaimer.calls(), 0);
  allocator.Deallocate(big);
  allocator.RemoveReclaimer(&reclaimer);
}

// When even the reclaim frees too little, the error names the bytes in use, cached (a block
// whose owner cannot be fenced stays cached) and pending release, and the reclaimer's reason
// for not waiting.
TEST_F(StreamOrderedCachingAllocatorTest, OutOfMemoryAfterReclaimNamesInUseCachedAndPending) {
  raw_.set_limit(3072);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* held = MustAllocate(allocator, 1024, kS0);
  allocator.Deallocate(MustAllocate(allocator, 1024, kS2));
  fences_.FailRecordsOn(kS2);
  FakeReclaimer reclaimer(
      [](StreamId) { return absl::FailedPreconditionError("called on a worker thread"); });
  allocator.AddReclaimer(&reclaimer);
  absl::StatusOr<void*> big = allocator.Allocate(2048, kS1);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reclaimer.calls(), 1);
  EXPECT_THAT(big.status().message(), HasSubstr("2048 bytes"));
  EXPECT_THAT(big.status().message(),
              HasSubstr("in use: 1024 bytes, cached: 1024 bytes, pending release: 0 bytes"));
  EXPECT_THAT(big.status().message(),
              HasSubstr("queued frees not waited for: called on a worker thread"));
  allocator.RemoveReclaimer(&reclaimer);
  allocator.Deallocate(held);
}

// RemoveReclaimer returns only once a running Reclaim has returned; none starts afterwards.
TEST_F(StreamOrderedCachingAllocatorTest, RemoveReclaimerWaitsForARunningReclaim) {
  raw_.set_limit(1024);
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  void* held = MustAllocate(allocator, 1024, kS0);
  absl::Notification entered, gate;
  std::atomic<bool> finished{false};
  FakeReclaimer reclaimer([&](StreamId) {
    entered.Notify();
    gate.WaitForNotification();
    finished.store(true);
    return absl::OkStatus();
  });
  allocator.AddReclaimer(&reclaimer);
  AsyncAllocate request(allocator, 1024, kS1);
  entered.WaitForNotification();
  std::thread remover([&] {
    allocator.RemoveReclaimer(&reclaimer);
    EXPECT_TRUE(finished.load());
  });
  gate.Notify();
  remover.join();
  EXPECT_EQ(request.Get().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(allocator.Allocate(1024, kS1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(reclaimer.calls(), 1);
  allocator.Deallocate(held);
}

using StreamOrderedCachingAllocatorDeathTest = StreamOrderedCachingAllocatorTest;

TEST_F(StreamOrderedCachingAllocatorDeathTest, MisuseOfPointersAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  StreamOrderedCachingAllocator allocator(&raw_, &fences_);
  int not_allocated = 0;
  // A free is checked when it is applied: at the allocator's next call.
  EXPECT_DEATH(
      {
        allocator.Deallocate(&not_allocated);
        allocator.stats();
      },
      "SLUICE_CHECK failed");
  EXPECT_DEATH(allocator.RecordStream(&not_allocated, kS1), "SLUICE_CHECK failed");
  void* a = MustAllocate(allocator, 64, kS0);
  allocator.Deallocate(a);
  EXPECT_DEATH(
      {
        allocator.Deallocate(a);  // double free
        allocator.stats();
      },
      "SLUICE_CHECK failed");
  EXPECT_DEATH(allocator.RecordStream(a, kS1), "SLUICE_CHECK failed");  // use after free
}

// ---------------------------------------------------------------------------------------
// Randomized run against a model of stream progress.

// Streams as counters: work items 1..enqueued(s) were given to stream s and the first
// completed(s) of them have finished. A fence takes enqueued(s) when recorded and is done once
// completed(s) reaches it; waiting on a fence runs its stream up to it, as a device would.
// Thread-safe.
class ModelFenceRecorder final : public FenceRecorder {
 public:
  explicit ModelFenceRecorder(int num_streams)
      : enqueued_(num_streams, 0), completed_(num_streams, 0) {}

  absl::StatusOr<std::shared_ptr<StreamFence>> Record(StreamId stream) override {
    absl::MutexLock lock(&mu_);
    return std::shared_ptr<StreamFence>(
        std::make_shared<Fence>(this, stream, enqueued_[stream.value()]));
  }

  // Gives stream `s` one more work item.
  void Enqueue(StreamId s) {
    absl::MutexLock lock(&mu_);
    ++enqueued_[s.value()];
  }
  // Finishes the work items of `s` up to `value` (at most what was enqueued).
  void CompleteUpTo(StreamId s, int64_t value) {
    absl::MutexLock lock(&mu_);
    int64_t& completed = completed_[s.value()];
    completed = std::max(completed, std::min(value, enqueued_[s.value()]));
  }
  int64_t enqueued(StreamId s) const {
    absl::MutexLock lock(&mu_);
    return enqueued_[s.value()];
  }
  int64_t completed(StreamId s) const {
    absl::MutexLock lock(&mu_);
    return completed_[s.value()];
  }

 private:
  class Fence final : public StreamFence {
   public:
    Fence(ModelFenceRecorder* recorder, StreamId stream, int64_t value)
        : recorder_(recorder), stream_(stream), value_(value) {}
    bool IsDone() override { return recorder_->completed(stream_) >= value_; }
    absl::Status Wait() override {
      recorder_->CompleteUpTo(stream_, value_);
      return absl::OkStatus();
    }

   private:
    ModelFenceRecorder* const recorder_;
    const StreamId stream_;
    const int64_t value_;
  };

  mutable absl::Mutex mu_;
  std::vector<int64_t> enqueued_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> completed_ ABSL_GUARDED_BY(mu_);
};

struct RandomizedOutcome {
  int64_t allocations = 0;
  int64_t ooms = 0;
  // Out-of-memory results although the live blocks plus the request fit in the raw limit, so
  // that releasing everything cached (after waiting for every fence) would have succeeded.
  int64_t avoidable_ooms = 0;
  int64_t cross_stream_reuses = 0;
  int64_t raw_releases = 0;
};

// Thousands of random Allocate / RecordStream / Deallocate / stream-progress / EmptyCache
// steps on 4 streams, checking after each one:
//  - no two live allocations overlap;
//  - a reused or released block is safe: every other stream that used it has finished the
//    work it was given before the free, and so has the owner unless the owner reuses it;
//  - the stats equal the model's (bytes in use = sum of the live blocks' sizes, which are the
//    rounded requests unless a larger cached block served them; in use + cached = raw bytes).
void RunRandomized(bool with_fences, uint32_t seed, int steps, RandomizedOutcome* outcome) {
  constexpr int kStreams = 4;
  constexpr size_t kLimit = 64 * 1024;
  constexpr size_t kMaxLive = 12;
  constexpr size_t kRound = 512;
  const size_t kSizes[] = {1, 100, 511, 512, 513, 1000, 1024, 2000, 3000, 4096, 5000, 8192};

  struct Live {
    StreamId stream;
    size_t block = 0;
    absl::flat_hash_set<int32_t> users;  // other streams recorded on it
  };
  struct Freed {
    StreamId owner;
    int64_t owner_enqueued = 0;
    std::vector<std::pair<StreamId, int64_t>> users;  // other streams and their work at free
  };

  std::mt19937 rng(seed);
  FakeRawAllocator raw(kLimit);
  ModelFenceRecorder model(kStreams);
  auto allocator =
      std::make_unique<StreamOrderedCachingAllocator>(&raw, with_fences ? &model : nullptr);

  absl::flat_hash_map<void*, Live> live;
  std::vector<void*> live_list;
  std::map<uintptr_t, size_t> ranges;  // start -> size of each live block
  absl::flat_hash_map<void*, Freed> freed;
  int64_t live_bytes = 0, peak = 0, allocations = 0, hits = 0, raw_allocations = 0, cross = 0;
  bool destroying = false;

  // Safe to hand `f`'s block to `taker` (invalid: back to the raw allocator)?
  auto expect_safe = [&](const Freed& f, StreamId taker, const char* what) {
    if (!with_fences) return;
    for (const auto& [user, work] : f.users) {
      EXPECT_GE(model.completed(user), work)
          << what << " before stream " << user.value() << " finished with the block";
    }
    if (taker != f.owner) {
      EXPECT_GE(model.completed(f.owner), f.owner_enqueued)
          << what << " before its owner stream " << f.owner.value() << " finished with it";
    }
  };
  raw.set_on_free([&](void* ptr, size_t bytes) {
    if (destroying) return;
    EXPECT_FALSE(live.contains(ptr)) << "a live block was returned to the raw allocator";
    auto it = freed.find(ptr);
    if (it != freed.end()) {
      expect_safe(it->second, StreamId(), "released to the raw allocator");
      freed.erase(it);
    }
    ++outcome->raw_releases;
  });

  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE(absl::StrCat("seed ", seed, " step ", step));
    const int dice = static_cast<int>(rng() % 100);
    if (live_list.empty() || (live_list.size() < kMaxLive && dice < 35)) {
      const StreamId s(static_cast<int32_t>(rng() % kStreams));
      const size_t request =
          rng() % 3 == 0 ? rng() % 8193 : kSizes[rng() % (sizeof(kSizes) / sizeof(kSizes[0]))];
      const size_t rounded = (std::max<size_t>(request, 1) + kRound - 1) / kRound * kRound;
      const int raw_before = raw.num_allocations();
      absl::StatusOr<void*> result = allocator->Allocate(request, s);
      if (!result.ok()) {
        ASSERT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
        EXPECT_THAT(result.status().message(), HasSubstr(absl::StrCat(rounded, " bytes")));
        ++outcome->ooms;
        if (live_bytes + rounded <= kLimit) ++outcome->avoidable_ooms;
      } else {
        void* p = *result;
        const size_t block = raw.BlockSize(p);
        ASSERT_GT(block, 0u) << "not the start of a raw block";
        EXPECT_GE(block, rounded);
        auto f = freed.find(p);
        const bool hit = f != freed.end();
        EXPECT_EQ(raw.num_allocations() - raw_before, hit ? 0 : 1);
        if (hit) {
          expect_safe(f->second, s, "reused");
          if (f->second.owner != s) ++cross;
          freed.erase(f);
          ++hits;
        } else {
          ++raw_allocations;
        }
        const uintptr_t start = reinterpret_cast<uintptr_t>(p);
        auto next = ranges.lower_bound(start);
        if (next != ranges.end()) {
          ASSERT_GE(next->first, start + block) << "overlap";
        }
        if (next != ranges.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + prev->second, start) << "overlap";
        }
        ranges.emplace(start, block);
        live.emplace(p, Live{s, block, {}});
        live_list.push_back(p);
        live_bytes += static_cast<int64_t>(block);
        peak = std::max(peak, live_bytes);
        ++allocations;
        model.Enqueue(s);  // the stream's work that writes the new block
      }
    } else if (dice < 65 || live_list.size() >= kMaxLive) {
      const size_t index = rng() % live_list.size();
      void* p = live_list[index];
      const Live& l = live.at(p);
      Freed f;
      f.owner = l.stream;
      f.owner_enqueued = model.enqueued(l.stream);
      for (int32_t user : l.users)
        f.users.emplace_back(StreamId(user), model.enqueued(StreamId(user)));
      live_bytes -= static_cast<int64_t>(l.block);
      ranges.erase(reinterpret_cast<uintptr_t>(p));
      live.erase(p);
      live_list[index] = live_list.back();
      live_list.pop_back();
      freed[p] = std::move(f);
      allocator->Deallocate(p);
    } else if (dice < 80) {
      void* p = live_list[rng() % live_list.size()];
      const StreamId user(static_cast<int32_t>(rng() % kStreams));
      allocator->RecordStream(p, user);
      Live& l = live.at(p);
      if (user != l.stream) l.users.insert(user.value());
      model.Enqueue(user);  // the user's work that reads the block
    } else if (dice < 99) {
      const StreamId s(static_cast<int32_t>(rng() % kStreams));
      const int64_t done = model.completed(s);
      const int64_t target =
          done + static_cast<int64_t>(rng() % static_cast<uint32_t>(model.enqueued(s) - done + 1));
      model.CompleteUpTo(s, target);
    } else {
      ASSERT_TRUE(allocator->EmptyCache().ok());
    }

    const AllocatorStats stats = allocator->stats();
    ASSERT_EQ(stats.bytes_in_use, live_bytes);
    ASSERT_EQ(static_cast<size_t>(stats.bytes_in_use + stats.bytes_cached), raw.bytes_in_use());
    ASSERT_EQ(stats.peak_bytes_in_use, peak);
    ASSERT_EQ(stats.num_allocations, allocations);
    ASSERT_EQ(stats.num_cache_hits, hits);
    ASSERT_EQ(stats.num_raw_allocations, raw_allocations);
    ASSERT_EQ(stats.num_cross_stream_reuses, cross);
  }

  for (void* p : live_list) allocator->Deallocate(p);
  destroying = true;
  allocator.reset();
  EXPECT_EQ(raw.bytes_in_use(), 0u);
  outcome->allocations = allocations;
  outcome->cross_stream_reuses = cross;
}

TEST_F(StreamOrderedCachingAllocatorTest, RandomizedRunKeepsInvariantsWithFences) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    RandomizedOutcome outcome;
    RunRandomized(/*with_fences=*/true, seed, 20000, &outcome);
    if (HasFatalFailure()) return;
    // The run must have exercised what it claims to test.
    EXPECT_GT(outcome.allocations, 5000) << "seed " << seed;
    EXPECT_GT(outcome.ooms, 0) << "seed " << seed;
    EXPECT_GT(outcome.cross_stream_reuses, 0) << "seed " << seed;
    EXPECT_GT(outcome.raw_releases, 0) << "seed " << seed;
    std::printf(
        "seed %u: %lld allocations, %lld out of memory (%lld avoidable), %lld cross-stream "
        "reuses\n",
        seed, static_cast<long long>(outcome.allocations), static_cast<long long>(outcome.ooms),
        static_cast<long long>(outcome.avoidable_ooms),
        static_cast<long long>(outcome.cross_stream_reuses));
  }
}

TEST_F(StreamOrderedCachingAllocatorTest, RandomizedRunKeepsInvariantsWithoutFences) {
  RandomizedOutcome outcome;
  RunRandomized(/*with_fences=*/false, 7, 20000, &outcome);
  if (HasFatalFailure()) return;
  EXPECT_GT(outcome.allocations, 5000);
  EXPECT_GT(outcome.cross_stream_reuses, 0);
  // Without fences everything cached can be released at once, so memory never runs out while
  // the live blocks and the request fit.
  EXPECT_EQ(outcome.avoidable_ooms, 0);
}

// With fences too, every out-of-memory result should be a real one: the allocator waits for
// all fences, so everything cached is reclaimable. Fails today because blocks that were held
// for fences are neither reused by their own stream nor released after the wait
TEST_F(StreamOrderedCachingAllocatorTest,
       RandomizedRunRunsOutOfMemoryOnlyWhenLiveBlocksFillTheLimit) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    RandomizedOutcome outcome;
    RunRandomized(/*with_fences=*/true, seed, 20000, &outcome);
    if (HasFatalFailure()) return;
    EXPECT_EQ(outcome.avoidable_ooms, 0) << "seed " << seed;
  }
}

// ---------------------------------------------------------------------------------------
// Concurrency: each thread allocates and frees on its own stream (recording other streams
// now and then) over a raw allocator small enough that the out-of-memory path runs. Each
// thread fills its blocks with its own tag and checks it before freeing, so a block handed to
// two threads at once shows up as a mismatch (and as a race under TSan).
void RunConcurrently(FenceRecorder* fences) {
  constexpr int kThreads = 4;
  constexpr int kIterations = 2000;
  constexpr size_t kMaxLive = 4;
  constexpr size_t kMaxBytes = 4096;
  // Room for twice every thread's live blocks: the cache fills it, so requests hit the
  // out-of-memory path and steal or release, but a request never fails for lack of memory
  // that is actually in use.
  FakeRawAllocator raw(2 * kThreads * kMaxLive * kMaxBytes + kMaxBytes);
  StreamOrderedCachingAllocator allocator(&raw, fences);

  absl::Notification start;
  absl::BlockingCounter ready(kThreads);
  std::vector<int64_t> successes(kThreads, 0), ooms(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      struct Held {
        uint64_t* words;
        size_t count;
        uint64_t tag;
      };
      std::mt19937 rng(1000 + t);
      const StreamId own(t);
      std::vector<Held> held;
      auto release = [&](size_t index) {
        const Held h = held[index];
        for (size_t w = 0; w < h.count; ++w) {
          if (h.words[w] != h.tag) {
            ADD_FAILURE() << "thread " << t << ": block overwritten at word " << w;
            break;
          }
        }
        allocator.Deallocate(h.words);
        held[index] = held.back();
        held.pop_back();
      };
      ready.DecrementCount();
      start.WaitForNotification();
      for (int i = 0; i < kIterations; ++i) {
        if (held.empty() || (held.size() < kMaxLive && rng() % 2 == 0)) {
          const size_t bytes = 8 * (1 + rng() % (kMaxBytes / 8));
          absl::StatusOr<void*> ptr = allocator.Allocate(bytes, own);
          if (!ptr.ok()) {
            EXPECT_EQ(ptr.status().code(), absl::StatusCode::kResourceExhausted);
            ++ooms[t];
            while (!held.empty()) release(held.size() - 1);
            continue;
          }
          ++successes[t];
          const uint64_t tag = (static_cast<uint64_t>(t) << 32) | static_cast<uint64_t>(i);
          auto* words = static_cast<uint64_t*>(*ptr);
          std::fill(words, words + bytes / 8, tag);
          if (rng() % 4 == 0) {
            allocator.RecordStream(
                words, StreamId((t + 1 + static_cast<int>(rng() % (kThreads - 1))) % kThreads));
          }
          held.push_back({words, bytes / 8, tag});
        } else {
          release(rng() % held.size());
        }
      }
      while (!held.empty()) release(held.size() - 1);
    });
  }
  ready.Wait();
  start.Notify();
  for (std::thread& thread : threads) thread.join();

  int64_t total = 0, total_ooms = 0;
  for (int t = 0; t < kThreads; ++t) {
    total += successes[t];
    total_ooms += ooms[t];
  }
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.bytes_in_use, 0);
  EXPECT_EQ(stats.num_allocations, total);
  EXPECT_EQ(static_cast<size_t>(stats.bytes_cached), raw.bytes_in_use());
  EXPECT_GT(total, kThreads * kIterations / 4);
  // Rare at most: a request can only fail when other threads fill the cache with blocks they
  // free while it waits for fences.
  EXPECT_LT(total_ooms, total / 10) << stats.ToString();
}

TEST_F(StreamOrderedCachingAllocatorTest, ConcurrentThreadsOnTheirOwnStreamsWithFences) {
  fences_.SetAllIdle();  // streams are the threads themselves: their work is done at free
  RunConcurrently(&fences_);
}

TEST_F(StreamOrderedCachingAllocatorTest, ConcurrentThreadsOnTheirOwnStreamsWithoutFences) {
  RunConcurrently(nullptr);
}
}  // namespace
}  // namespace sluice::caching_allocator_test
