#include "core/fault_injecting_allocator.h"

#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<void*> FaultInjectingAllocator::Allocate(size_t bytes, StreamId stream) {
  const uint64_t attempt = attempts_.fetch_add(1, std::memory_order_relaxed);
  // The attempt number in the low bits, the user's key above: distinct keys per attempt.
  if (const int64_t fault = faults_->Fire((key_ << 16) ^ attempt); fault != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(faults_->Describe(fault), ": allocation of ", bytes, " bytes refused"));
  }
  return inner_->Allocate(bytes, stream);
}

}  // namespace sluice
