// Waker: lets a VM thread sleep until a condition over atomics becomes true, spinning
// briefly first. Notifiers pay one atomic load when nobody sleeps: the mutex is touched
// only when a waiter has announced itself.
#ifndef SLUICE_CORE_WAKER_H_
#define SLUICE_CORE_WAKER_H_

#include <atomic>
#include <chrono>
#include <thread>
#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/spin_wait.h"

namespace sluice {

// Thread-safe; any number of waiters and notifiers.
//
// Protocol (no lost wake-up): a notifier first makes the condition true with a seq_cst
// store/RMW, then calls Notify(), which loads `waiters_` (seq_cst). A waiter increments
// `waiters_` (seq_cst) under `mu_` and only then evaluates the condition inside Await. In
// the single total order either the notifier's load sees the waiter (and then locks `mu_`,
// whose release makes Await re-evaluate the condition), or the waiter's evaluation comes
// after the notifier's store and sees the condition true.
class Waker {
 public:
  // Returns once `ready()` is true. Spins for `spin` first.
  template <typename Pred>
  void Wait(Pred&& ready, std::chrono::nanoseconds spin) {
    using P = std::remove_reference_t<Pred>;
    if (SpinWithBackoff(ready, spin)) return;
    absl::MutexLock lock(&mu_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    mu_.Await(absl::Condition(
        +[](P* p) -> bool { return (*p)(); }, &ready));
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }

  // Parks (no spin) until `ready()` is true or `timeout` passed; returns `ready()`'s last
  // value. For waiters that must look at something else now and then (a cancel flag).
  template <typename Pred>
  bool WaitFor(Pred&& ready, absl::Duration timeout) {
    using P = std::remove_reference_t<Pred>;
    absl::MutexLock lock(&mu_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    const bool done = mu_.AwaitWithTimeout(absl::Condition(
                                               +[](P* p) -> bool { return (*p)(); }, &ready),
                                           timeout);
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
    return done;
  }

  // Call after making a waiter's condition true.
  void Notify() {
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    absl::MutexLock lock(&mu_);  // the unlock re-evaluates every waiter's condition
  }

  // Polls `ready` for up to `budget`, pausing longer between polls as the wait goes on
  // (1, 2, 4 ... 32 pauses, then a yield before each poll). A consumer polling a queue head keeps
  // the producer's cache line in shared state, so every push pays a cache-line transfer; polling
  // less often lets a burst of pushes land before the consumer looks, and the consumer then takes
  // them as one batch.
  template <typename Pred>
  static bool SpinWithBackoff(Pred& ready, std::chrono::nanoseconds budget) {
    if (ready()) return true;
    if (budget.count() <= 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + budget;
    int pauses = 1;
    while (true) {
      for (int i = 0; i < pauses; ++i) CpuRelax();
      if (ready()) return true;
      if (pauses < kMaxPauses) {
        pauses *= 2;
      } else {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        // Past the first microsecond or so: let a thread that shares this core run. With
        // a producer, the scheduler and a worker on two cores, one core hosts two of them;
        // a waiter that only pauses takes half of it from the one doing the work.
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kMaxPauses = 32;

  absl::Mutex mu_;
  std::atomic<int> waiters_{0};
};

}  // namespace sluice

#endif  // SLUICE_CORE_WAKER_H_
