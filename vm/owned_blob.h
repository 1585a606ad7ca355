// OwnedBlob: a hold on a blob without reference counting, for a producer that keeps each
// blob in an object of its own (the eager front end's tensor state). A BlobRef costs a heap
// control block per blob and atomic count updates in every copy; an OwnedBlob is one
// owner, moved, never copied, and drops its hold — as the last BlobRef would, through the
// VM's reaper — when it goes away. Share() hands out BlobRefs tied to a caller-chosen
// owner (std::shared_ptr's aliasing constructor), so the blob lives as long as both.
#ifndef SLUICE_VM_OWNED_BLOB_H_
#define SLUICE_VM_OWNED_BLOB_H_

#include <memory>
#include <utility>

#include "vm/blob.h"

namespace sluice::vm {

namespace internal {
class BlobReaper;
class VmCore;
}  // namespace internal

// Thread-compatible; move-only. An OwnedBlob made by VirtualMachine::NewOwnedBlob must not
// outlive its VM (its hold goes back through the VM's reaper); one that adopted a BlobRef
// has no such limit.
class OwnedBlob {
 public:
  OwnedBlob() = default;
  // Adopts a shared blob: the OwnedBlob holds that reference.
  explicit OwnedBlob(BlobRef shared) : blob_(shared.get()), shared_(std::move(shared)) {}
  ~OwnedBlob() {
    if (blob_ != nullptr) Reset();  // moved-from ones (StatusOr, returns) cost nothing
  }
  OwnedBlob(OwnedBlob&& other) noexcept
      : blob_(std::exchange(other.blob_, nullptr)),
        reaper_(std::exchange(other.reaper_, nullptr)),
        shared_(std::move(other.shared_)) {}
  OwnedBlob& operator=(OwnedBlob&& other) noexcept {
    if (this != &other) {
      if (blob_ != nullptr) Reset();
      blob_ = std::exchange(other.blob_, nullptr);
      reaper_ = std::exchange(other.reaper_, nullptr);
      shared_ = std::move(other.shared_);
    }
    return *this;
  }
  OwnedBlob(const OwnedBlob&) = delete;
  OwnedBlob& operator=(const OwnedBlob&) = delete;

  Blob* get() const { return blob_; }
  Blob* operator->() const { return blob_; }
  Blob& operator*() const { return *blob_; }
  explicit operator bool() const { return blob_ != nullptr; }

  // A BlobRef to this blob that keeps `owner` alive (the object holding this OwnedBlob),
  // and so the blob.
  template <typename T>
  BlobRef Share(const std::shared_ptr<T>& owner) const {
    return BlobRef(owner, blob_);
  }

  // Drops the hold now (nothing if empty).
  void Reset();
  // Lets go of the hold without dropping it: for a hold someone else took over
  // (InstructionsBuilder::Release's `hold_taken`). Not for an adopted BlobRef.
  void Abandon() {
    blob_ = nullptr;
    reaper_ = nullptr;
  }
  // Whether this holds an adopted BlobRef (whose hold the VM cannot take over).
  bool adopted() const { return shared_ != nullptr; }

 private:
  friend class internal::VmCore;
  OwnedBlob(Blob* blob, internal::BlobReaper* reaper) : blob_(blob), reaper_(reaper) {}

  Blob* blob_ = nullptr;
  internal::BlobReaper* reaper_ = nullptr;  // null when empty or adopted
  BlobRef shared_;                          // set when adopted
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_OWNED_BLOB_H_
