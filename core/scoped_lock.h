// ScopedLock: holds any lock with Lock()/Unlock() (and abseil's capability annotations) for
// its scope — the one guard behind PlainMutexLock and SpinLockHolder.
#ifndef SLUICE_CORE_SCOPED_LOCK_H_
#define SLUICE_CORE_SCOPED_LOCK_H_

#include "absl/base/thread_annotations.h"

namespace sluice {

template <typename Lockable>
class ABSL_SCOPED_LOCKABLE ScopedLock {
 public:
  explicit ScopedLock(Lockable* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
    lock_->Lock();
  }
  ~ScopedLock() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  Lockable* const lock_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_SCOPED_LOCK_H_
