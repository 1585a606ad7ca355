#include "core/intra_op_pool.h"

#include <atomic>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace sluice {
namespace {

// Every index of [0, n) visited exactly once, over random sizes, grains and pool widths.
TEST(IntraOpPoolTest, EveryIndexRunsExactlyOnce) {
  std::mt19937_64 rng(20261207);
  for (int parallelism : {1, 2, 3, 4}) {
    IntraOpPool pool(parallelism);
    ParallelCounters counters;
    for (int round = 0; round < 60; ++round) {
      const int64_t n = static_cast<int64_t>(rng() % 5000);
      const int64_t grain = 1 + static_cast<int64_t>(rng() % 300);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int64_t> shortest{n + 1};
      EXPECT_TRUE(pool.ParallelFor(
          n, grain,
          [&](int64_t begin, int64_t end) {
            ASSERT_LT(begin, end);
            ASSERT_LE(end, n);
            if (end != n) {
              int64_t seen = shortest.load();
              while (end - begin < seen && !shortest.compare_exchange_weak(seen, end - begin)) {
              }
            }
            for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
          },
          nullptr, &counters));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1)
            << "index " << i << " of " << n << ", grain " << grain;
      }
      // Every chunk but the last is at least `grain` long.
      if (shortest.load() <= n) EXPECT_GE(shortest.load(), grain);
    }
    EXPECT_EQ(counters.skipped_chunks.load(), 0);
    if (parallelism == 1) {
      EXPECT_EQ(counters.regions.load(), 0);  // nothing splits with one thread
      EXPECT_EQ(pool.started_helpers(), 0);
    } else {
      EXPECT_GT(counters.regions.load(), 0);
      EXPECT_EQ(pool.started_helpers(), parallelism - 1);
    }
  }
}

// A helper really runs chunks: the caller holds its first chunk until some other thread has
// run one, which cannot happen if the region stays on the caller.
TEST(IntraOpPoolTest, HelpersRunChunksBesideTheCaller) {
  IntraOpPool pool(2);
  ParallelCounters counters;
  const std::thread::id caller = std::this_thread::get_id();
  absl::Notification other_ran;
  std::atomic<int> on_other{0};
  EXPECT_TRUE(pool.ParallelFor(
      8, 1,
      [&](int64_t, int64_t) {
        if (std::this_thread::get_id() == caller) {
          other_ran.WaitForNotification();
        } else {
          on_other.fetch_add(1);
          if (!other_ran.HasBeenNotified()) other_ran.Notify();
        }
      },
      nullptr, &counters));
  EXPECT_GT(on_other.load(), 0);
  EXPECT_EQ(counters.helped_chunks.load(), on_other.load());
  EXPECT_EQ(counters.chunks.load(), 8);
  EXPECT_EQ(counters.regions.load(), 1);
}

// Several threads open regions at once (as two VM workers running two matmuls do); each
// returns with its own range complete. TSan checks the hand-offs.
TEST(IntraOpPoolTest, ConcurrentCallersEachCompleteTheirOwnRegion) {
  IntraOpPool pool(3);
  constexpr int kCallers = 4;
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(kCallers, 0);
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&pool, &sums, c] {
      for (int round = 0; round < 50; ++round) {
        const int64_t n = 1000 + 37 * c + round;
        std::vector<int64_t> out(static_cast<size_t>(n), 0);
        ASSERT_TRUE(pool.ParallelFor(n, 16, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = i * (c + 1);
        }));
        int64_t sum = 0;
        for (int64_t v : out) sum += v;  // read after the return: must see every write
        ASSERT_EQ(sum, (c + 1) * n * (n - 1) / 2);
        sums[static_cast<size_t>(c)] += sum;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_GT(sums[static_cast<size_t>(c)], 0);
}

// A region opened inside a chunk runs on that chunk's thread (it must not wait for helpers
// that are busy with the region around it), and still covers its range.
TEST(IntraOpPoolTest, NestedRegionsRunInline) {
  IntraOpPool pool(2);
  ParallelCounters counters;
  std::atomic<int64_t> inner_total{0};
  std::atomic<int> inner_on_other_thread{0};
  std::atomic<int> outer_chunks{0};
  EXPECT_TRUE(pool.ParallelFor(
      16, 1,
      [&](int64_t, int64_t) {
        outer_chunks.fetch_add(1);
        const std::thread::id outer = std::this_thread::get_id();
        EXPECT_TRUE(pool.ParallelFor(
            100, 1,
            [&](int64_t b, int64_t e) {
              if (std::this_thread::get_id() != outer) inner_on_other_thread.fetch_add(1);
              inner_total.fetch_add(e - b);
            },
            nullptr, &counters));
      },
      nullptr, &counters));
  EXPECT_GE(outer_chunks.load(), 2);
  EXPECT_EQ(inner_total.load(), outer_chunks.load() * 100);
  EXPECT_EQ(inner_on_other_thread.load(), 0);
  EXPECT_EQ(counters.regions.load(), 1);  // only the outer region split
}

// Once the cancel flag is up, chunks not yet started are skipped and the call says so; the
// scope turns that into Cancelled. Without the flag the same region completes (the check can
// fail both ways).
TEST(IntraOpPoolTest, CancelSkipsTheChunksNotYetStarted) {
  IntraOpPool pool(2);
  ParallelCounters counters;
  std::atomic<bool> cancel{false};
  std::atomic<int64_t> ran{0};
  const bool complete = pool.ParallelFor(
      64, 1,
      [&](int64_t b, int64_t e) {
        ran.fetch_add(e - b);
        cancel.store(true, std::memory_order_release);  // the first chunk cancels the rest
      },
      &cancel, &counters);
  EXPECT_FALSE(complete);
  EXPECT_LT(ran.load(), 64);
  EXPECT_GT(counters.skipped_chunks.load(), 0);
  EXPECT_GE(counters.chunks.load() + counters.skipped_chunks.load(), 2);

  const ParallelScope scope(&pool, &cancel, &counters);
  const absl::Status cancelled = scope.For(
      64, 1, [](int64_t, int64_t) {}, "matmul");
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled);
  EXPECT_NE(cancelled.message().find("matmul"), absl::string_view::npos) << cancelled;

  cancel.store(false);
  std::atomic<int64_t> all{0};
  EXPECT_TRUE(scope.For(64, 1, [&](int64_t b, int64_t e) { all.fetch_add(e - b); }).ok());
  EXPECT_EQ(all.load(), 64);
}

// Without a pool the scope runs the whole range on the calling thread, and still honours a
// cancel.
TEST(IntraOpPoolTest, AScopeWithoutAPoolRunsInline) {
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  EXPECT_TRUE(ParallelScope()
                  .For(1 << 20, 1,
                       [&](int64_t b, int64_t e) {
                         EXPECT_EQ(std::this_thread::get_id(), caller);
                         EXPECT_EQ(b, 0);
                         EXPECT_EQ(e, 1 << 20);
                         ++calls;
                       })
                  .ok());
  EXPECT_EQ(calls, 1);
  std::atomic<bool> cancel{true};
  EXPECT_EQ(ParallelScope(nullptr, &cancel, nullptr)
                .For(10, 1, [&](int64_t, int64_t) { ++calls; })
                .code(),
            absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

// A chunk that throws, on a helper or on the caller, stops the region: the call joins the
// chunks running and rethrows on the calling thread (no helper terminates the process, no
// helper touches the finished job), and the pool serves the next region. Every chunk throws
// here, so whichever thread runs one first throws; over 50 regions both kinds occur.
TEST(IntraOpPoolTest, AnExceptionInAChunkReachesTheCaller) {
  IntraOpPool pool(3);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> thrown_by_helpers{0};
  for (int round = 0; round < 50; ++round) {
    EXPECT_THROW(pool.ParallelFor(64, 1,
                                  [&](int64_t, int64_t) {
                                    if (std::this_thread::get_id() != caller) {
                                      thrown_by_helpers.fetch_add(1);
                                    }
                                    throw std::runtime_error("chunk failed");
                                  }),
                 std::runtime_error);
  }
  // Inline (one chunk): the exception propagates as is.
  EXPECT_THROW(pool.ParallelFor(1, 1, [](int64_t, int64_t) { throw std::runtime_error("x"); }),
               std::runtime_error);
  std::atomic<int64_t> total{0};
  EXPECT_TRUE(pool.ParallelFor(1000, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); }));
  EXPECT_EQ(total.load(), 1000);
}

// A range that does not split runs as one call on the calling thread: with parallelism 1,
// and for a nested region.
TEST(IntraOpPoolTest, AnUnsplitRangeIsOneCall) {
  IntraOpPool alone(1);
  int calls = 0;
  EXPECT_TRUE(alone.ParallelFor(1000, 1, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 1000);
    ++calls;
  }));
  EXPECT_EQ(calls, 1);
}

// A pool whose helpers never started, and one whose helpers sleep, both shut down cleanly.
TEST(IntraOpPoolTest, DestroysWithOrWithoutHelpers) {
  { IntraOpPool unused(4); }
  IntraOpPool pool(4);
  EXPECT_TRUE(pool.ParallelFor(1000, 1, [](int64_t, int64_t) {}));
  EXPECT_EQ(pool.started_helpers(), 3);
}

}  // namespace
}  // namespace sluice
