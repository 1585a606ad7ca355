#include "vm/blob.h"

#include "absl/strings/str_cat.h"

namespace sluice::vm {

Blob::Blob(uint64_t id, std::unique_ptr<TensorStorage> storage, std::string name)
    : id_(id),
      name_(std::move(name)),
      device_(storage->device()),
      dtype_(storage->dtype()),
      shape_(storage->shape()),
      bytes_(storage->bytes()),
      storage_(std::move(storage)) {}

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
