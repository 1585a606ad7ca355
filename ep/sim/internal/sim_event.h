// SimEvent: a CUDA-like event for the sim provider. Each RecordEvent opens a new
// generation; the recording stream's worker closes it when it reaches the record point.
// A wait captures one generation, so re-recording (pool reuse) never changes what an
// earlier wait waits for, even when the new record is on another stream.
#ifndef SLUICE_EP_SIM_INTERNAL_SIM_EVENT_H_
#define SLUICE_EP_SIM_INTERNAL_SIM_EVENT_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ep/event.h"

namespace sluice::ep::sim_internal {

// Thread-safe.
class SimEvent final : public Event {
 public:
  explicit SimEvent(sluice::Device device) : Event(device) {}

  bool Query() override;
  absl::Status Sync() override;

  // Opens a new generation and returns it (called by the recording stream, before it
  // enqueues the record point).
  uint64_t BeginRecord();
  // The newest generation (0 = never recorded, which counts as done).
  uint64_t latest() const;
  // Closes `generation`, carrying the recording stream's pending error.
  void Complete(uint64_t generation, absl::Status stream_error);
  // Blocks until `generation` is closed; returns the error it was closed with.
  absl::Status WaitFor(uint64_t generation);

 private:
  bool DoneLocked(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t latest_ ABSL_GUARDED_BY(mu_) = 0;
  // Generations recorded but not yet reached: usually zero or one.
  absl::InlinedVector<uint64_t, 2> open_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // of the last closed generation
  // Bumped (release) on every Complete so that WaitFor can spin without the lock before
  // parking; acquire on the reader side pairs with it.
  std::atomic<uint64_t> completions_{0};
};

}  // namespace sluice::ep::sim_internal

#endif  // SLUICE_EP_SIM_INTERNAL_SIM_EVENT_H_
