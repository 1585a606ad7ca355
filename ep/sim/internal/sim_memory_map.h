// SimMemoryMap: which sim device's memory (if any) a pointer range belongs to. Shared by
// the sim devices of one Runtime so that copies between them are checked too.
#ifndef SLUICE_EP_SIM_INTERNAL_SIM_MEMORY_MAP_H_
#define SLUICE_EP_SIM_INTERNAL_SIM_MEMORY_MAP_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ep/internal/host_memory.h"

namespace sluice::ep::sim_internal {

// Thread-safe.
class SimMemoryMap {
 public:
  static constexpr int kHost = -1;

  void Add(int device_index, const internal::HostMemory* memory);
  void Remove(int device_index);
  // The index of the sim device whose memory holds all of [ptr, ptr + bytes), else kHost.
  int Owner(const void* ptr, size_t bytes) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<const internal::HostMemory*> memories_ ABSL_GUARDED_BY(mu_);  // by index
};

}  // namespace sluice::ep::sim_internal

#endif  // SLUICE_EP_SIM_INTERNAL_SIM_MEMORY_MAP_H_
