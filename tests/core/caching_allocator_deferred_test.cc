// Frees never take StreamOrderedCachingAllocator's lock; they are deferred, not waited for:
// the next holder of the lock applies them first. A raw allocator that blocks inside
// Allocate (which runs under the lock) holds the lock for as long as the test wants.
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "core/caching_allocator.h"
#include "gtest/gtest.h"
#include "tests/core/fake_memory.h"

namespace sluice::caching_allocator_deferred_test {
namespace {

using ::sluice::testing::FakeRawAllocator;

constexpr StreamId kS0(0);

// Blocks the next raw allocation until Open(); reports when one is blocked.
class GatedRawAllocator final : public RawAllocator {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    if (gate_armed_.exchange(false)) {
      entered_.Notify();
      open_.WaitForNotification();
    }
    return inner_.Allocate(bytes);
  }
  void Free(void* ptr, size_t bytes) override { inner_.Free(ptr, bytes); }
  std::string Name() const override { return "gated"; }

  void Arm() { gate_armed_.store(true); }
  void WaitEntered() { entered_.WaitForNotification(); }
  void Open() { open_.Notify(); }

 private:
  FakeRawAllocator inner_;
  std::atomic<bool> gate_armed_{false};
  absl::Notification entered_;
  absl::Notification open_;
};

TEST(CachingAllocatorDeferredFreeTest, FreeWhileTheLockIsHeldNeitherWaitsNorIsLost) {
  GatedRawAllocator raw;
  StreamOrderedCachingAllocator allocator(&raw, /*fences=*/nullptr);
  void* a = allocator.Allocate(512, kS0).value();
  // Another thread allocates a new size: the raw allocation blocks with the lock held.
  raw.Arm();
  absl::StatusOr<void*> b;
  std::thread holder([&] { b = allocator.Allocate(4096, kS0); });
  raw.WaitEntered();
  // This free must return while the lock is held (before the gate opens).
  absl::Notification freed;
  std::thread freer([&] {
    allocator.Deallocate(a);
    freed.Notify();
  });
  EXPECT_TRUE(freed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  raw.Open();
  holder.join();
  freer.join();
  ASSERT_TRUE(b.ok()) << b.status();
  // The deferred free is applied by the next holder: stats see it, and the block is reused.
  const AllocatorStats stats = allocator.stats();
  EXPECT_EQ(stats.bytes_in_use, 4096u);
  EXPECT_EQ(allocator.Allocate(512, kS0).value(), a);
  allocator.Deallocate(*b);
}

// Frees racing allocations from two threads: every block comes back exactly once.
TEST(CachingAllocatorDeferredFreeTest, ConcurrentAllocateAndFreeBalance) {
  FakeRawAllocator raw;
  StreamOrderedCachingAllocator allocator(&raw, /*fences=*/nullptr);
  constexpr int kRounds = 20000;
  std::vector<void*> handoff(kRounds, nullptr);
  std::atomic<int> produced{0};
  std::thread freer([&] {
    for (int i = 0; i < kRounds; ++i) {
      while (produced.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      allocator.Deallocate(handoff[i]);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    handoff[i] = allocator.Allocate(64 + (i % 3) * 512, kS0).value();
    produced.store(i + 1, std::memory_order_release);
  }
  freer.join();
  EXPECT_EQ(allocator.stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace sluice::caching_allocator_deferred_test
