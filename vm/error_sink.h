// ErrorSink: where the first error of asynchronous work waits for the next synchronization
// point (VirtualMachine::Sync, a blob read). Later errors are counted, and the first
// kMaxKept are kept for a caller that wants them all (VirtualMachine::Sync's `all`): the
// first one is usually the cause and the rest its consequences, but independent failures
// (fault injection checks each one surfaces) are not.
#ifndef SLUICE_VM_ERROR_SINK_H_
#define SLUICE_VM_ERROR_SINK_H_

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

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
    // Errors are rare: keeping them costs nothing on the success path.
    if (kept_.size() < kMaxKept) kept_.push_back(error);
  }
  // Returns the first error reported since the previous Take, and forgets it (and the kept
  // ones).
  absl::Status Take() {
    absl::MutexLock lock(&mu_);
    absl::Status error = std::move(first_);
    first_ = absl::OkStatus();
    kept_.clear();
    return error;
  }
  // Take, and moves every error reported since the previous Take (the first kMaxKept, in
  // report order; the first error first) into `all`.
  absl::Status TakeAll(std::vector<absl::Status>* all) {
    absl::MutexLock lock(&mu_);
    absl::Status error = std::move(first_);
    first_ = absl::OkStatus();
    for (absl::Status& kept : kept_) all->push_back(std::move(kept));
    kept_.clear();
    return error;
  }
  // How many errors between two Takes are kept for TakeAll (the rest are only counted).
  static constexpr size_t kMaxKept = 1024;
  // Errors reported since construction (statistics; relaxed).
  int64_t count() const { return errors_.load(std::memory_order_relaxed); }

 private:
  absl::Mutex mu_;
  absl::Status first_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> kept_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> errors_{0};
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_ERROR_SINK_H_
