// PlainMutex: mutual exclusion for its scope (under TSan in CI this also proves the
// annotations and the lock pairing).
#include "core/plain_mutex.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sluice::plain_mutex_test {
namespace {

TEST(PlainMutexTest, ExcludesConcurrentUpdates) {
  PlainMutex mu;
  int64_t counter = 0;  // guarded by mu
  constexpr int kThreads = 4;
  constexpr int kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        PlainMutexLock lock(&mu);
        // A read-modify-write split in two: lost updates would show without the lock.
        const int64_t seen = counter;
        counter = seen + 1;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  PlainMutexLock lock(&mu);
  EXPECT_EQ(counter, int64_t{kThreads} * kIncrements);
}

}  // namespace
}  // namespace sluice::plain_mutex_test
