#include "ep/sim/internal/sim_memory_map.h"

namespace sluice::ep::sim_internal {

void SimMemoryMap::Add(int device_index, const internal::HostMemory* memory) {
  absl::WriterMutexLock lock(&mu_);
  if (memories_.size() <= static_cast<size_t>(device_index)) memories_.resize(device_index + 1);
  memories_[device_index] = memory;
}

void SimMemoryMap::Remove(int device_index) {
  absl::WriterMutexLock lock(&mu_);
  if (static_cast<size_t>(device_index) < memories_.size()) memories_[device_index] = nullptr;
}

int SimMemoryMap::Owner(const void* ptr, size_t bytes) const {
  absl::ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < memories_.size(); ++i) {
    if (memories_[i] != nullptr && memories_[i]->Contains(ptr, bytes)) return static_cast<int>(i);
  }
  return kHost;
}

}  // namespace sluice::ep::sim_internal
