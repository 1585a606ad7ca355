// SpinLock: a test-and-test-and-set lock for critical sections of a few instructions (a
// vector push or pop) on hot paths, where absl::Mutex's bookkeeping costs more than the
// work it protects. A waiter that spins too long yields its core, so a preempted holder is
// not starved on a 2-core machine.
#ifndef SLUICE_CORE_SPIN_LOCK_H_
#define SLUICE_CORE_SPIN_LOCK_H_

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "core/scoped_lock.h"
#include "core/spin_wait.h"

namespace sluice {

class ABSL_LOCKABLE SpinLock {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    // Acquire: the holder's writes before Unlock (release) are visible after Lock.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      int spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

using SpinLockHolder = ScopedLock<SpinLock>;

}  // namespace sluice

#endif  // SLUICE_CORE_SPIN_LOCK_H_
