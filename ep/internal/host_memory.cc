#include "ep/internal/host_memory.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace sluice::ep::internal {

HostMemory::HostMemory(std::string name, size_t limit_bytes)
    : name_(std::move(name)), limit_bytes_(limit_bytes) {}

HostMemory::~HostMemory() {
  absl::MutexLock lock(&mu_);
  for (auto& [start, size] : live_) std::free(reinterpret_cast<void*>(start));
}

absl::StatusOr<void*> HostMemory::Allocate(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError(absl::StrCat(name_, ": 0-byte allocation"));
  const size_t rounded = (bytes + kAlignment - 1) & ~(kAlignment - 1);
  {
    absl::MutexLock lock(&mu_);
    if (limit_bytes_ != 0 && (rounded > limit_bytes_ || in_use_ > limit_bytes_ - rounded)) {
      return absl::ResourceExhaustedError(absl::StrCat(name_, " exhausted: requested ", bytes,
                                                       " bytes with ", in_use_, " of ",
                                                       limit_bytes_, " in use"));
    }
    in_use_ += rounded;
  }
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  absl::MutexLock lock(&mu_);
  if (ptr == nullptr) {
    in_use_ -= rounded;
    return absl::ResourceExhaustedError(
        absl::StrCat(name_, ": the host could not allocate ", bytes, " bytes"));
  }
  live_.emplace(reinterpret_cast<uintptr_t>(ptr), rounded);
  return ptr;
}

void HostMemory::Free(void* ptr, size_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    SLUICE_CHECK(it != live_.end());
    in_use_ -= it->second;
    live_.erase(it);
  }
  std::free(ptr);
}

bool HostMemory::Contains(const void* ptr, size_t bytes) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  absl::MutexLock lock(&mu_);
  auto it = live_.upper_bound(p);
  if (it == live_.begin()) return false;
  --it;
  return p >= it->first && p + bytes <= it->first + it->second;
}

size_t HostMemory::bytes_in_use() const {
  absl::MutexLock lock(&mu_);
  return in_use_;
}

}  // namespace sluice::ep::internal
