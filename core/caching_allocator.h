// StreamOrderedCachingAllocator: caches device memory per stream, with RecordStream
// semantics: a block used by several streams is reused only once each of them is done with it.
//
// Reuse rules:
//  - A block freed with no other stream recorded on it goes straight back to its owning
//    (allocating) stream's free list: that stream's later work runs after the earlier work
//    in stream order, so reuse is safe at once.
//  - A block that other streams used is held until a fence recorded on each of those
//    streams at free time is done; then it returns to its owner's free list.
//  - Another stream may take a block from an owner's free list only once a fence recorded
//    on the owner stream after the free is done. That fence is recorded lazily, the first
//    time another stream needs memory it cannot get from the raw allocator.
//  - When the raw allocator is exhausted the allocator waits for outstanding fences (without
//    holding its lock), returns every free block to the raw allocator and retries. If that
//    fails too, it asks its reclaimers (MemoryReclaimer, core/allocator.h: the VMs over the
//    device, which wait for their queued Release instructions and the work before them) to
//    hand back what they are about to free, then does all of it once more. Only then is it
//    ResourceExhausted, naming the bytes in use, cached and pending release (freed, still
//    waiting for another stream's work), and why a reclaimer could not wait, if one could
//    not. A reclaimer cannot wait on a thread that runs the queued work itself (a VM
//    worker allocating a lazy blob's storage at launch): that allocation fails instead of
//    deadlocking.
//
// A free never takes the allocator's lock: it drops the pointer into a small lock-free
// mailbox that the lock's next holder empties first — every method that takes the lock
// does, so stats and reuse see every free that returned before the call (a free that finds
// the mailbox full takes the lock and applies itself).
// A producer allocating each op's output while a worker frees the previous one otherwise
// meets it on this lock every op, and spins or sleeps until the other lets go. The fences
// of a block other streams used are recorded when the free is applied: later than the
// free, which only makes them cover more work.
#ifndef SLUICE_CORE_CACHING_ALLOCATOR_H_
#define SLUICE_CORE_CACHING_ALLOCATOR_H_

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "core/allocator.h"
#include "core/plain_mutex.h"

namespace sluice {

struct CachingAllocatorOptions {
  // Requests are rounded up to a multiple of this (a power of two).
  size_t round_bytes = 512;
  // A cached block serves a request when its size is at most this factor times the request.
  size_t max_fit_ratio = 2;
};

// Thread-safe: every method may be called from any thread. Not reentrant from fences.
// Owns the raw memory it caches; the raw allocator and fence recorder must outlive it.
class StreamOrderedCachingAllocator final : public Allocator {
 public:
  // `fences` may be null for synchronous devices (cpu), where every block is reusable by
  // any stream at once.
  StreamOrderedCachingAllocator(RawAllocator* raw, FenceRecorder* fences,
                                CachingAllocatorOptions options = {});
  // Returns all cached memory to the raw allocator. Blocks still in use are freed too (and
  // reported on stderr): their owner leaked them.
  ~StreamOrderedCachingAllocator() override;

  absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream) override;
  void RecordStream(void* ptr, StreamId stream) override;
  void Deallocate(void* ptr) override;
  AllocatorStats stats() const override;
  void ResetPeakBytes() override;

  // Waits for pending blocks and returns every free block to the raw allocator.
  absl::Status EmptyCache();

  // Registers `reclaimer` (not null, not registered yet) for the out-of-memory path (see
  // the header comment); it is called, without this allocator's lock, on the allocating
  // thread. It must stay alive until RemoveReclaimer returns. Any thread.
  void AddReclaimer(MemoryReclaimer* reclaimer);
  // Unregisters `reclaimer` and returns once no Reclaim call into it is running, so that
  // none reaches it afterwards (calls into other reclaimers are not waited for). Any thread
  // but one inside a Reclaim call of `reclaimer`.
  void RemoveReclaimer(MemoryReclaimer* reclaimer);

 private:
  struct Block;
  using FreeList = std::multimap<size_t, Block*>;
  struct Block {
    // The free-list node this block last sat in, kept while it is in use so that putting
    // it back allocates nothing (a node per free and per reuse otherwise).
    FreeList::node_type spare_node;
    void* ptr = nullptr;
    size_t size = 0;
    StreamId owner;
    bool in_use = false;
    absl::InlinedVector<StreamId, 2> other_users;
    std::vector<std::shared_ptr<StreamFence>> pending;  // while held after a free
    std::shared_ptr<StreamFence> owner_fence;           // recorded for cross-stream reuse
  };

  size_t RoundUp(size_t bytes) const;
  FreeList& FreeListOf(StreamId stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inserts `block` into `list`, reusing its spare node when it has one.
  void PutBack(FreeList& list, Block* block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void* TakeBlock(FreeList& list, FreeList::iterator it, StreamId stream, bool cross)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PollPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finds a block of another stream whose owner fence is done; records missing fences into
  // `to_wait`.
  void* TryStealLocked(size_t size, StreamId stream,
                       std::vector<std::shared_ptr<StreamFence>>* to_wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the fences of pending blocks and owner fences of all free blocks (recording
  // missing ones) to `to_wait`.
  void CollectFencesLocked(std::vector<std::shared_ptr<StreamFence>>* to_wait)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseFreeBlocksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeallocateLocked(void* ptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the frees deferred while the lock was held.
  void ApplyDeferredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<void*> AllocateRawLocked(size_t size, StreamId stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Out of raw memory: makes cached memory usable for `size` bytes on `stream`. Returns a
  // cached block (taken) if one fits; otherwise null, with every free block that no stream
  // still uses returned to the raw allocator. Waits for fences without the lock. `retake`:
  // first look for any block of the stream's own list freed meanwhile (after a reclaim).
  void* FreeUpLocked(size_t size, StreamId stream, bool retake, absl::Status* wait_status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Calls every reclaimer; false when there is none. Requires mu_ not held.
  bool RunReclaimers(StreamId stream, absl::Status* status);

  // The reclaimers; never taken while holding mu_.
  absl::Mutex reclaim_mu_;
  std::vector<MemoryReclaimer*> reclaimers_ ABSL_GUARDED_BY(reclaim_mu_);
  // Reclaim calls in progress, per reclaimer (absent: none).
  absl::flat_hash_map<MemoryReclaimer*, int> reclaims_running_ ABSL_GUARDED_BY(reclaim_mu_);

  RawAllocator* const raw_;
  FenceRecorder* const fences_;
  const CachingAllocatorOptions options_;

  mutable PlainMutex mu_;  // taken per allocation and free: see core/plain_mutex.h
  absl::flat_hash_map<void*, std::unique_ptr<Block>> blocks_ ABSL_GUARDED_BY(mu_);
  std::vector<FreeList> free_lists_ ABSL_GUARDED_BY(mu_);  // indexed by StreamId
  std::vector<Block*> pending_ ABSL_GUARDED_BY(mu_);
  AllocatorStats stats_ ABSL_GUARDED_BY(mu_);

  // Frees not applied yet: a slot holds a pointer or null. Filled by a CAS from a rotating
  // start, emptied by an exchange under mu_.
  static constexpr int kMailboxSlots = 16;
  mutable std::atomic<void*> mailbox_[kMailboxSlots] = {};
  mutable std::atomic<uint32_t> mailbox_next_{0};
  // A hint: filled slots, counted after the fill and before the empty (may lag a fill).
  mutable std::atomic<int> mailbox_count_{0};
};

}  // namespace sluice

#endif  // SLUICE_CORE_CACHING_ALLOCATOR_H_
