#include "vm/internal/blob_lifecycle.h"

#include <atomic>

namespace sluice::vm {

namespace internal {

void BlobLifecycle::Parking::Park(Blob* blob) {
  blob->kept_.store(false, std::memory_order_relaxed);
  blob->dead_ = false;
  if (!blob->retired_clock_.empty()) blob->retired_clock_.clear();
  blob->ClearPoison();
}

void BlobLifecycle::Parking::Recycle(Blob* blob, uint64_t id) {
  // Only the producer's line: Park cleared the rest.
  blob->id_ = id;
  blob->private_holds_.store(0, std::memory_order_relaxed);
  blob->released_ = false;
  blob->released_dying_ = false;
  blob->run_private_ = false;
  blob->fuse_roles_ = 0;
  blob->fuse_mark_ = 0;
}

}  // namespace internal

}  // namespace sluice::vm
