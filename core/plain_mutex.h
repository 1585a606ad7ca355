// PlainMutex: a mutex for short critical sections on hot paths — std::mutex with abseil's
// thread-safety annotations (so ABSL_GUARDED_BY and friends still apply). Unlike
// absl::Mutex it keeps no deadlock-detection graph: Debian's abseil builds with detection
// on, which adds a global graph update to every absl::Mutex acquisition (visible as
// `GraphCycles::GetId`/`InsertEdge` in profiles), and an embedder's process-wide setting is
// not ours to change. No conditions (use absl::Mutex where a thread waits on one).
#ifndef SLUICE_CORE_PLAIN_MUTEX_H_
#define SLUICE_CORE_PLAIN_MUTEX_H_

#include <mutex>

#include "absl/base/thread_annotations.h"
#include "core/scoped_lock.h"

namespace sluice {

// Thread-safe. Not recursive.
class ABSL_LOCKABLE PlainMutex {
 public:
  PlainMutex() = default;
  PlainMutex(const PlainMutex&) = delete;
  PlainMutex& operator=(const PlainMutex&) = delete;

  // Spins briefly before it blocks: the sections it guards are short, and a thread that
  // parks on a futex here costs both sides a system call (the holder's unlock has to wake
  // it) — in the eager add loop, the producer allocating storage and the worker freeing
  // the previous one met on the caching allocator's lock every op, and the futex calls
  // took a fifth of the producer's time.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    for (int i = 0; i < kSpins; ++i) {
      if (mu_.try_lock()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    mu_.lock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Takes the mutex if it is free; never waits.
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }

 private:
  static constexpr int kSpins = 200;  // a few microseconds at most

  std::mutex mu_;
};

// Holds a PlainMutex for its scope.
using PlainMutexLock = ScopedLock<PlainMutex>;

}  // namespace sluice

#endif  // SLUICE_CORE_PLAIN_MUTEX_H_
