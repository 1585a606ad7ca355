#include "vm/blob.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::vm {

Blob::Blob(uint64_t id, Device device, DataType dtype, Shape shape, std::string name)
    : Blob(id, device, dtype, std::move(shape), nullptr, std::move(name)) {}

Blob::~Blob() { FreeStorage(); }

absl::Status Blob::AllocateStorage(Allocator* allocator, StreamId stream) {
  SLUICE_ASSIGN_OR_RETURN(storage_, TensorStorage::AllocateAt(storage_space_, allocator, device_,
                                                              dtype_, shape_, stream));
  return absl::OkStatus();
}

void Blob::FreeStorage() {
  if (storage_ != nullptr) {
    storage_->~TensorStorage();
    storage_ = nullptr;
  }
  kept_.store(false, std::memory_order_relaxed);
}

Blob::Blob(uint64_t id, Device device, DataType dtype, Shape shape, Allocator* allocator,
           std::string name)
    : id_(id),
      // Declared before shape_ (see the layout in blob.h): computed from the argument.
      bytes_(static_cast<size_t>(shape.NumElements()) * SizeOf(dtype)),
      dtype_(dtype),
      device_(device),
      shape_(std::move(shape)),
      name_(std::move(name)),
      allocator_(allocator) {}

absl::Status Blob::EnsureStorage(StreamId stream) {
  if (storage_ != nullptr) return absl::OkStatus();
  if (allocator_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(DebugName(), " was released"));
  }
  return AllocateStorage(allocator_, stream);
}

std::string Blob::DebugName() const {
  if (name_.empty()) return absl::StrCat("blob #", id_);
  return absl::StrCat("blob #", id_, " '", name_, "'");
}

absl::Status Blob::poison() const {
  absl::MutexLock lock(&poison_mu_);
  return poison_;
}

void Blob::Poison(const absl::Status& cause) {
  absl::MutexLock lock(&poison_mu_);
  poison_ = cause;
  poisoned_.store(true, std::memory_order_release);
}

void Blob::ClearPoison() {
  if (!poisoned()) return;
  absl::MutexLock lock(&poison_mu_);
  poison_ = absl::OkStatus();
  poisoned_.store(false, std::memory_order_release);
}

}  // namespace sluice::vm
