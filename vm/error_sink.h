// ErrorSink: where the first error of asynchronous work waits for the next synchronization
// point (VirtualMachine::Sync, a blob read). Later errors are counted, not kept: the first
// one is the cause, the rest are usually its consequences.
#ifndef SLUICE_VM_ERROR_SINK_H_
#define SLUICE_VM_ERROR_SINK_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sluice::vm {

// Thread-safe.
class ErrorSink {
 public:
  void Report(const absl::Status& error) {
    if (error.ok()) return;
    errors_.fetch_add(1, std::memory_order_relaxed);
    absl::MutexLock lock(&mu_);
    if (first_.ok()) first_ = error;
  }
  // Returns the first error reported since the previous Take, and forgets it.
  absl::Status Take() {
    absl::MutexLock lock(&mu_);
    absl::Status error = std::move(first_);
    first_ = absl::OkStatus();
    return error;
  }
  // Errors reported since construction (statistics; relaxed).
  int64_t count() const { return errors_.load(std::memory_order_relaxed); }

 private:
  absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> errors_{0};
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_ERROR_SINK_H_
