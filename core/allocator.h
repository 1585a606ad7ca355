// Memory interfaces: RawAllocator (a device's own memory, no caching), Allocator (what
// tensors allocate from: stream-aware), AllocatorStats, the StreamFence hooks through
// which a device tells an allocator when a stream has finished its earlier work, and
// MemoryReclaimer, through which an upper layer (the VM) hands back memory it has queued
// frees of before an allocation fails.
//
// core/ knows nothing of devices' streams or events; the ep layer implements these
// interfaces, so the dependency stays one-way.
#ifndef SLUICE_CORE_ALLOCATOR_H_
#define SLUICE_CORE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/stream_id.h"

namespace sluice {

// Uncached memory of one kind (device memory, pinned host memory, ...).
// Implementations are thread-safe.
class RawAllocator {
 public:
  virtual ~RawAllocator() = default;
  // `bytes` > 0. ResourceExhausted (naming the request and the limit) when out of memory.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // `ptr` came from Allocate(bytes) on this allocator and is freed once.
  virtual void Free(void* ptr, size_t bytes) = 0;
  // For messages: "sim:0 device memory".
  virtual std::string Name() const = 0;
};

// A point in one stream's work: done once everything the stream had been given before the
// fence was recorded has finished. Thread-safe.
class StreamFence {
 public:
  virtual ~StreamFence() = default;
  virtual bool IsDone() = 0;
  // Blocks the calling thread until done; returns the stream's error if it failed.
  virtual absl::Status Wait() = 0;
};

// Records fences on streams by id (a device implements this over its event pool).
// Thread-safe.
class FenceRecorder {
 public:
  virtual ~FenceRecorder() = default;
  virtual absl::StatusOr<std::shared_ptr<StreamFence>> Record(StreamId stream) = 0;
};

// Gives back memory whose free an upper layer has queued but not yet performed: the VM's
// Release instructions not yet run (a freed tensor's storage reaches the allocator only
// when its Release runs on the tensor's last stream's worker). An allocator out of memory
// calls Reclaim and retries (StreamOrderedCachingAllocator::AddReclaimer).
//
// Thread-safety contract, for implementations:
//  - Reclaim is called from any thread that allocates, several at a time, never with the
//    allocator's lock held: it may block, and the frees it waits for may Deallocate on
//    other threads meanwhile (they never wait for the allocating thread).
//  - It must not wait for work that can only proceed once the calling thread returns: on a
//    thread that itself runs the queued work (a VM worker or scheduler), it returns at once
//    with a non-OK status saying why it could not wait, and the allocation fails.
//  - It must not Allocate from the allocator that called it (no reentrancy).
//  - For callers: an allocating thread must not hold a lock that the queued work takes (a
//    callback's lock, say): the reclaim would wait for work that waits for that lock. Work
//    running on an ep stream's own thread (a sim stream, a cuda host function) must not
//    allocate from a device allocator for the same reason.
class MemoryReclaimer {
 public:
  virtual ~MemoryReclaimer() = default;
  // Blocks until the frees queued before the call on the allocator's device (and the work
  // they wait for) have reached the allocator. `stream`: the allocating stream. OK when it
  // waited; otherwise a reason (e.g. "called on a VM worker thread") the allocator adds to
  // its out-of-memory error.
  virtual absl::Status Reclaim(StreamId stream) = 0;
};

struct AllocatorStats {
  int64_t bytes_in_use = 0;       // handed out and not yet deallocated
  int64_t peak_bytes_in_use = 0;  // maximum of bytes_in_use over the allocator's life
  int64_t bytes_cached = 0;       // held from the raw allocator but not in use
  int64_t num_allocations = 0;    // successful Allocate calls
  int64_t num_cache_hits = 0;     // allocations served from the cache
  int64_t num_raw_allocations = 0;
  int64_t num_cross_stream_reuses = 0;  // a block freed by one stream reused by another
  std::string ToString() const;
};

// What tensors allocate from. Allocation is stream-ordered: memory returned for stream S
// may be written by S's work as soon as it is enqueued. Implementations are thread-safe.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // Memory for `bytes` (0 is allowed and returns a unique non-null pointer) to be first
  // used on `stream`.
  virtual absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream) = 0;
  // Declares that work on `stream`, other than the allocating stream, uses `ptr`; the
  // memory is not reused until that work is done. Call before Deallocate.
  virtual void RecordStream(void* ptr, StreamId stream) = 0;
  // Returns memory from Allocate. Work already enqueued on the streams that used it may
  // still be running; the allocator orders reuse after it.
  virtual void Deallocate(void* ptr) = 0;
  virtual AllocatorStats stats() const = 0;
  // Restarts peak_bytes_in_use from the current bytes_in_use (per-run peaks).
  virtual void ResetPeakBytes() {}
};

}  // namespace sluice

#endif  // SLUICE_CORE_ALLOCATOR_H_
