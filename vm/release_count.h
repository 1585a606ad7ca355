// ReleaseCount: the release of a blob that several host streams touch in every run of a
// precomputed graph with no order among their last touches. Instead of one Release that
// waits for every stream, each stream runs a Release step of its own right after its last
// touch (StepSequence::AddSharedRelease) and drops one count; the drop that completes the
// run's count frees the storage. No stream waits for another, and the storage lives until
// the last touch, wherever it ran.
//
// The count is taken modulo `drops`, so it needs no reset between runs: every run drops
// exactly `drops` times (Release steps run even in a cancelled run; only a VM shutting down
// with cancellation skips them, and it runs nothing afterwards).
//
// Host streams only: the dropping worker has finished its stream's touches when it drops
// (cpu work completes in launch order), and host memory is reusable by any stream at once.
#ifndef SLUICE_VM_RELEASE_COUNT_H_
#define SLUICE_VM_RELEASE_COUNT_H_

#include <atomic>
#include <cstdint>

#include "core/status.h"

namespace sluice::vm {

// Thread-safe: the workers of the streams that drop it call Drop concurrently.
class ReleaseCount {
 public:
  // `drops` >= 2: the Release steps sharing this count per run.
  explicit ReleaseCount(uint32_t drops) : drops_(drops) { SLUICE_CHECK(drops >= 2); }
  ReleaseCount(const ReleaseCount&) = delete;
  ReleaseCount& operator=(const ReleaseCount&) = delete;

  // One drop; true for the run's last. acq_rel: the last dropper sees every touch the other
  // droppers made before they dropped.
  bool Drop() { return (dropped_.fetch_add(1, std::memory_order_acq_rel) + 1) % drops_ == 0; }
  uint32_t drops() const { return drops_; }

 private:
  const uint32_t drops_;
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_RELEASE_COUNT_H_
