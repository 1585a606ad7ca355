// Prefetching lines that another core last wrote, before this core writes (or reads) them.
//
// __builtin_prefetch(p, /*rw=*/1) emits PREFETCHW only when the target enables it
// (-mprfchw, or an -march that has it); for baseline x86-64 GCC emits PREFETCHT0, which
// brings the line in shared state, so the write that follows still has to take it from the
// other core — the stall the prefetch was meant to hide. PrefetchForWrite emits PREFETCHW
// itself on x86-64 (CPUs without it execute the encoding as a no-op).
#ifndef SLUICE_CORE_PREFETCH_H_
#define SLUICE_CORE_PREFETCH_H_

#include <cstddef>

namespace sluice {

// Starts moving the line holding `address` to this core in a writable state.
inline void PrefetchForWrite(const void* address) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
#else
  __builtin_prefetch(address, /*rw=*/1, /*locality=*/3);
#endif
}

// Starts moving the line of `address` into this core's caches for reading.
inline void PrefetchForRead(const void* address) {
  __builtin_prefetch(address, /*rw=*/0, /*locality=*/3);
}

// PrefetchForWrite for every line of [address, address + bytes).
inline void PrefetchRangeForWrite(const void* address, size_t bytes) {
  const char* begin = static_cast<const char*>(address);
  for (size_t offset = 0; offset < bytes; offset += 64) PrefetchForWrite(begin + offset);
}

}  // namespace sluice

#endif  // SLUICE_CORE_PREFETCH_H_
