#include "vm/owned_blob.h"

#include "vm/internal/blob_reaper.h"

namespace sluice::vm {

void OwnedBlob::Reset() {
  if (reaper_ != nullptr) {
    reaper_->Reap(blob_);
  } else if (shared_ != nullptr) {
    shared_.reset();
  }
  blob_ = nullptr;
  reaper_ = nullptr;
}

}  // namespace sluice::vm
