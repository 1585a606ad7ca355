// BlobReaper: the deleter behind every BlobRef a VM hands out. While the VM runs, a blob
// whose last reference is dropped goes to the engine, which deletes it once no unretired
// instruction uses it; after the VM is gone, blobs are deleted directly. A run-private
// blob (StepSequence) bypasses the engine: the last of its two holders deletes it.
#ifndef SLUICE_VM_INTERNAL_BLOB_REAPER_H_
#define SLUICE_VM_INTERNAL_BLOB_REAPER_H_

#include "absl/base/thread_annotations.h"
#include "core/plain_mutex.h"
#include "vm/blob.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/internal/engine.h"

namespace sluice::vm::internal {

// Thread-safe. Shared (std::shared_ptr) by the VM and the deleters of its blobs.
class BlobReaper {
 public:
  explicit BlobReaper(Engine* engine) : engine_(engine) {}

  void Reap(Blob* blob) {
    // A run-private blob is the engine's business only through its run: the last of the
    // two holds deletes it (see StepSequence, "Run-private blobs").
    if (BlobLifecycle::Producer::run_private(*blob) &&
        !BlobLifecycle::Holds::DropPrivateHold(blob)) {
      return;
    }
    PlainMutexLock lock(&mu_);
    if (engine_ == nullptr) {
      delete blob;
    } else if (BlobLifecycle::Producer::run_private(*blob)) {
      engine_->DeleteUnused(blob);
    } else {
      engine_->Bury(blob);
    }
  }
  // From now on Reap deletes directly (the VM is shutting down; nothing is in flight).
  void Detach() {
    PlainMutexLock lock(&mu_);
    engine_ = nullptr;
  }

 private:
  PlainMutex mu_;  // taken for every blob freed: see core/plain_mutex.h
  Engine* engine_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_BLOB_REAPER_H_
