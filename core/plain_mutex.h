// PlainMutex: a mutex for short critical sections on hot paths, with abseil's thread-safety
// annotations (so ABSL_GUARDED_BY and friends still apply). Unlike absl::Mutex it keeps no
// deadlock-detection graph: Debian's abseil builds with detection on, which adds a global
// graph update to every absl::Mutex acquisition (visible as `GraphCycles::GetId`/
// `InsertEdge` in profiles), and an embedder's process-wide setting is not ours to change.
// No conditions (use absl::Mutex where a thread waits on one).
//
// Unlock is a plain release store, not an atomic read-modify-write: on x86 a locked
// instruction waits for every store before it to reach the cache, and the sections this
// lock guards write lines another core last held (a step of a fused run, a recycled
// blob), so with std::mutex the unlock stalled on those transfers (the largest single cost
// of the eager add loop's producer). The price is that Unlock cannot
// know of sleeping waiters, so nobody sleeps waiting to be woken: a waiter spins, then
// yields its core, then naps (kNap) and retries. Long holds therefore cost a waiter up to
// one nap of latency and a wake-up per nap; use absl::Mutex for sections that block.
#ifndef SLUICE_CORE_PLAIN_MUTEX_H_
#define SLUICE_CORE_PLAIN_MUTEX_H_

#include <atomic>
#include <chrono>

#include "absl/base/thread_annotations.h"
#include "core/scoped_lock.h"

namespace sluice {

// Thread-safe. Not recursive.
class ABSL_LOCKABLE PlainMutex {
 public:
  PlainMutex() = default;
  PlainMutex(const PlainMutex&) = delete;
  PlainMutex& operator=(const PlainMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    // Acquire: what the previous holder wrote before Unlock (release) is visible here.
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }
  // Takes the mutex if it is free; never waits.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  // How a waiter waits, in order: kSpins polls with a pause between, then kYields polls
  // that yield the core between, then polls kNap apart until the mutex is free.
  static constexpr int kSpins = 256;
  static constexpr int kYields = 64;
  static constexpr std::chrono::microseconds kNap{50};

 private:
  void LockSlow();

  std::atomic<bool> locked_{false};
};

using PlainMutexLock = ScopedLock<PlainMutex>;

}  // namespace sluice

#endif  // SLUICE_CORE_PLAIN_MUTEX_H_
