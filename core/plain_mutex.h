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

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a PlainMutex for its scope.
using PlainMutexLock = ScopedLock<PlainMutex>;

}  // namespace sluice

#endif  // SLUICE_CORE_PLAIN_MUTEX_H_
