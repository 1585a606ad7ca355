// HostMemory: a RawAllocator over aligned host memory with an optional byte limit and a
// record of live ranges, so a provider can tell whether a pointer is its memory.
#ifndef SLUICE_EP_INTERNAL_HOST_MEMORY_H_
#define SLUICE_EP_INTERNAL_HOST_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/synchronization/mutex.h"
#include "core/allocator.h"

namespace sluice::ep::internal {

// Thread-safe.
class HostMemory final : public RawAllocator {
 public:
  // `limit_bytes` == 0 means unlimited. `name` is used in error messages.
  HostMemory(std::string name, size_t limit_bytes);
  ~HostMemory() override;

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* ptr, size_t bytes) override;
  std::string Name() const override { return name_; }

  // True when [ptr, ptr + bytes) lies inside one live allocation of this memory.
  bool Contains(const void* ptr, size_t bytes) const;
  size_t bytes_in_use() const;

 private:
  static constexpr size_t kAlignment = 64;  // cache line; enough for any SIMD load

  const std::string name_;
  const size_t limit_bytes_;
  mutable absl::Mutex mu_;
  absl::btree_map<uintptr_t, size_t> live_ ABSL_GUARDED_BY(mu_);  // start -> size
  size_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::ep::internal

#endif  // SLUICE_EP_INTERNAL_HOST_MEMORY_H_
