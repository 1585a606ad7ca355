// FaultInjectingAllocator: an Allocator decorator that makes allocations fail on purpose
// (ResourceExhausted naming the injected fault), so that tests and `sluice stress
// --fail-rate` can check that an allocation failure becomes the failing instruction's error
// (a lazy blob allocates when its writer runs; see vm/blob.h) rather than a crash.
//
// Nothing in production allocates through it: it is built around the allocator a caller
// wants to shake (VirtualMachine::NewLazyBlob takes the allocator to use), so the caching
// allocator itself carries no injection test.
#ifndef SLUICE_CORE_FAULT_INJECTING_ALLOCATOR_H_
#define SLUICE_CORE_FAULT_INJECTING_ALLOCATOR_H_

#include <atomic>
#include <cstdint>

#include "core/allocator.h"
#include "core/fault_injector.h"

namespace sluice {

// Thread-safe (as its inner allocator). Attempts are keyed by (`key`, attempt number):
// deterministic when one user's allocations through it happen in a deterministic order (a
// lazy blob's writers allocate in their dispatch order), whatever other threads do. Both
// `inner` and `faults` must outlive the decorator and every allocation made through it.
class FaultInjectingAllocator final : public Allocator {
 public:
  FaultInjectingAllocator(Allocator* inner, FaultInjector* faults, uint64_t key)
      : inner_(inner), faults_(faults), key_(key) {}

  // The inner allocator's memory, unless the attempt's key fires: then ResourceExhausted
  // with the fault's description, and nothing is allocated.
  absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream) override;
  void RecordStream(void* ptr, StreamId stream) override { inner_->RecordStream(ptr, stream); }
  void Deallocate(void* ptr) override { inner_->Deallocate(ptr); }
  AllocatorStats stats() const override { return inner_->stats(); }
  void ResetPeakBytes() override { inner_->ResetPeakBytes(); }

 private:
  Allocator* const inner_;
  FaultInjector* const faults_;
  const uint64_t key_;
  // Numbers the attempts for their keys; relaxed: each attempt only needs its own number.
  std::atomic<uint64_t> attempts_{0};
};

}  // namespace sluice

#endif  // SLUICE_CORE_FAULT_INJECTING_ALLOCATOR_H_
