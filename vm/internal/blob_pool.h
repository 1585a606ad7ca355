// BlobPool: recycles the memory of a VM's eager blobs. A blob is created by a producer and
// deleted by the scheduler once no instruction uses it; with plain new/delete every dead
// tensor would be a free into the producer's malloc arena from another thread, contending
// for that arena's lock with the producer's own allocations. Here the scheduler hands the
// memory back through a lock-free queue and producers build new blobs in it.
//
// Parked blobs. A small eager blob released at the end of its life
// (BlobLifecycle::Producer::ParksStorage) keeps its storage in its Release
// (BlobLifecycle::Worker::ReleaseStorage, or StepSequence::MarkKept for a run-private blob's
// stepless Release); when it dies it is parked here whole, and the next NewBlob of the same
// stream, dtype and shape takes it back under a new id — no allocator round trip on the
// producer (lock, free-list search) nor on the worker (the free). Nothing else can reach a
// dead blob, and every instruction that used it retired before its last hold dropped, so its
// bytes are free to reuse on its own stream at once. At most `max_parked` blobs of at most
// Blob::kMaxParkedBytes each wait here (the oldest goes when one more arrives); their bytes
// count as in use in their allocator until DropParked. The blob-side steps (Parkable, Park,
// Recycle) are BlobLifecycle::Parking's (vm/internal/blob_lifecycle.h).
//
// Two sides, two locks. The scheduler parks into an inbox (`inbox_mu_`); producers take
// from a ring of their own (`parked_mu_`) and move the inbox into it only when the ring has
// no match (so "most recently parked first" holds within the ring: the inbox waits for a
// miss). The lock a producer takes per op is one the scheduler rarely touches: one lock for
// both would put the producer's per-op take behind the scheduler's bursts of parking (and
// behind a scheduler preempted inside one), and move the lock's line between the two cores
// on every op. The scheduler takes the producers' lock only when a burst may not fit
// (ParkEvicting), to park and evict in one step.
#ifndef SLUICE_VM_INTERNAL_BLOB_POOL_H_
#define SLUICE_VM_INTERNAL_BLOB_POOL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/intrusive_queue.h"
#include "core/plain_mutex.h"
#include "core/prefetch.h"
#include "core/shape.h"
#include "core/status.h"
#include "core/stream_id.h"
#include "vm/blob.h"
#include "vm/internal/blob_lifecycle.h"

namespace sluice::vm::internal {

// Thread-safe. Memory comes from ::operator new with Blob's size and alignment, so a blob
// built here may also be deleted with plain `delete` (as the reaper does once the VM is
// gone). Destroying the pool frees the memory it holds; blobs still alive are not its.
class BlobPool {
 public:
  // `max_parked`: how many parked blobs may wait at most (0: none is parked).
  explicit BlobPool(size_t max_parked = kDefaultMaxParked)
      : capacity_(max_parked), parked_(max_parked) {}
  BlobPool(const BlobPool&) = delete;
  BlobPool& operator=(const BlobPool&) = delete;
  ~BlobPool() {
    DropParked();
    Chain<Slot> all = freed_.TakeAll();
    all.Append(std::move(cache_));
    for (Slot* slot = all.head; slot != nullptr;) {
      Slot* next = slot->next;
      slot->~Slot();
      ::operator delete(static_cast<void*>(slot), kAlign);
      slot = next;
    }
  }

  // Any thread: a new Blob built from `args`, in recycled memory when there is some.
  template <typename... Args>
  Blob* New(Args&&... args) {
    void* memory = TakeMemory();
    return new (memory) Blob(std::forward<Args>(args)...);
  }

  // Any thread (the scheduler): ends `blob` and keeps its memory for New — or, for a blob
  // that kept its storage for it, parks the whole blob (see above). Beyond kMaxCached
  // blobs' worth the memory goes back to the heap instead.
  void Delete(Blob* blob) { DeleteAll(absl::MakeConstSpan(&blob, 1)); }
  // Delete for each of `blobs`, parking under one lock (the scheduler frees a retired run's
  // private blobs together).
  void DeleteAll(absl::Span<Blob* const> blobs) {
    // Which blobs may be parked is decided before the lock (their fields are in other
    // cores' caches); under the inbox's lock, only pointers move.
    absl::InlinedVector<Blob*, 32> parkable;
    for (Blob* blob : blobs) {
      if (BlobLifecycle::Parking::Parkable(*blob)) {
        BlobLifecycle::Parking::Park(blob);
        parkable.push_back(blob);
      } else {
        Destroy(blob);
      }
    }
    if (parkable.empty()) return;
    std::vector<Blob*> destroy;
    {
      PlainMutexLock lock(&inbox_mu_);
      if (parking_closed_ || capacity_ == 0) {
        destroy.assign(parkable.begin(), parkable.end());
      } else if (inbox_.size() + parkable.size() + ring_bound_ <= capacity_) {
        inbox_.insert(inbox_.end(), parkable.begin(), parkable.end());
        inbox_size_.store(inbox_.size(), std::memory_order_release);
        return;
      }
    }
    // Closed, or the set may overflow: the ring's lock too, so that parking and evicting
    // are one step (nobody sees more than the bound parked).
    if (destroy.empty()) destroy = ParkEvicting(parkable);
    for (Blob* blob : destroy) Destroy(blob);
  }

  // Any thread (a producer): the parked blob of `stream`, `dtype` and `shape`, recycled
  // under a new id (BlobLifecycle::Parking::Recycle); null when none waits. Ids come from `ids`,
  // the VM's blob id counter, kIdBlock at a time (so a recycled blob's id is unique but not in
  // creation order with blobs made meanwhile; an atomic increment per op was a locked
  // instruction on the producer's per-op path).
  Blob* TakeParked(StreamId stream, DataType dtype, const Shape& shape,
                   std::atomic<uint64_t>& ids) {
    Blob* found = nullptr;
    uint64_t id = 0;
    {
      PlainMutexLock lock(&parked_mu_);
      found = FindParkedLocked(stream, dtype, shape);
      if (found == nullptr && inbox_size_.load(std::memory_order_acquire) != 0) {
        MoveInboxLocked();
        found = FindParkedLocked(stream, dtype, shape);
      }
      if (found != nullptr) {
        if (next_id_ == end_id_) {
          next_id_ = ids.fetch_add(kIdBlock, std::memory_order_relaxed);
          end_id_ = next_id_ + kIdBlock;
        }
        id = next_id_++;
      }
    }
    if (found != nullptr) BlobLifecycle::Parking::Recycle(found, id);
    return found;
  }

  // Any thread: frees every parked blob (their bytes return to their allocators, which
  // must still be alive); later dying blobs are not parked. Idempotent.
  void DropParked() { FreeParked(/*close=*/true); }

  // Any thread: frees the blobs parked now (as DropParked); later dying blobs are parked
  // as before.
  void FreeParked() { FreeParked(/*close=*/false); }

  // Blobs TakeParked handed back so far.
  int64_t recycled() const {
    PlainMutexLock lock(&parked_mu_);
    return recycled_;
  }
  // Parked blobs freed to make room for newer ones so far.
  int64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }
  // Blobs parked now.
  int64_t parked() const {
    PlainMutexLock lock(&parked_mu_);
    PlainMutexLock inbox_lock(&inbox_mu_);
    return static_cast<int64_t>(parked_.size() + inbox_.size());
  }
  // Retired runs come back in bursts as large as what a producer issues while the
  // scheduler waits for a core (a time slice: thousands of small ops on two cores), so the
  // set must hold a burst, or the blobs it turns away are allocated again meanwhile.
  static constexpr size_t kDefaultMaxParked = 4096;

 private:
  // DropParked and FreeParked; `close`: later dying blobs are not parked.
  void FreeParked(bool close) {
    std::vector<Blob*> parked;
    {
      PlainMutexLock lock(&parked_mu_);
      PlainMutexLock inbox_lock(&inbox_mu_);
      if (close) parking_closed_ = true;
      while (parked_.size() != 0) parked.push_back(parked_.PopFront());
      ring_bound_ = 0;
      parked.insert(parked.end(), inbox_.begin(), inbox_.end());
      inbox_.clear();
      inbox_size_.store(0, std::memory_order_relaxed);
    }
    for (Blob* blob : parked) Destroy(blob);
  }

  static constexpr size_t kParkedScan = 8;
  static constexpr uint64_t kIdBlock = 64;

  // The parked blob TakeParked looks for, removed from the ring; null when none of the
  // newest kParkedScan matches.
  Blob* FindParkedLocked(StreamId stream, DataType dtype, const Shape& shape)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(parked_mu_) {
    // The most recently parked first; a few only (a miss costs a normal allocation).
    const size_t n = parked_.size();
    for (size_t k = 0; k < n && k < kParkedScan; ++k) {
      Blob* blob = parked_.FromBack(k);
      if (blob->dtype() == dtype && blob->raw_storage()->alloc_stream() == stream &&
          blob->shape() == shape) {
        parked_.EraseFromBack(k);
        // ring_bound_ stays as it was (see there): a take writes nothing the scheduler
        // reads.
        ++recycled_;
        // The next op most likely takes the next one: start moving the lines it reads
        // and writes here now.
        if (parked_.size() != 0) BlobLifecycle::Parking::PrefetchForRecycle(*parked_.FromBack(0));
        return blob;
      }
    }
    return nullptr;
  }

  // Moves the inbox, oldest first, behind the ring's newest. Ring and inbox together never
  // hold more than the capacity (DeleteAll parks into the inbox only below it, else
  // ParkEvicting evicts), and the ring's capacity is that: everything fits.
  void MoveInboxLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(parked_mu_) {
    PlainMutexLock inbox_lock(&inbox_mu_);
    SLUICE_CHECK(parked_.size() + inbox_.size() <= parked_.capacity());
    for (Blob* blob : inbox_) parked_.PushBack(blob);
    inbox_.clear();
    inbox_size_.store(0, std::memory_order_relaxed);
    ring_bound_ = parked_.size();
  }

  // The scheduler, when `blobs` may not fit: under both locks, parks them and frees the
  // oldest (of ring, then inbox) until ring and inbox together hold at most the capacity.
  // Returns what to destroy (after the locks): the evicted, or all of `blobs` once
  // parking is closed.
  std::vector<Blob*> ParkEvicting(absl::Span<Blob* const> blobs) {
    std::vector<Blob*> evicted;
    PlainMutexLock lock(&parked_mu_);
    PlainMutexLock inbox_lock(&inbox_mu_);
    if (parking_closed_) return std::vector<Blob*>(blobs.begin(), blobs.end());
    inbox_.insert(inbox_.end(), blobs.begin(), blobs.end());
    size_t inbox_first = 0;
    while (parked_.size() + (inbox_.size() - inbox_first) > capacity_) {
      if (parked_.size() != 0) {
        evicted.push_back(parked_.PopFront());
      } else {
        evicted.push_back(inbox_[inbox_first++]);
      }
    }
    inbox_.erase(inbox_.begin(), inbox_.begin() + static_cast<ptrdiff_t>(inbox_first));
    inbox_size_.store(inbox_.size(), std::memory_order_release);
    ring_bound_ = parked_.size();
    evicted_.fetch_add(static_cast<int64_t>(evicted.size()), std::memory_order_relaxed);
    return evicted;
  }

  // Ends `blob` (freeing its storage, if any) and keeps its memory.
  void Destroy(Blob* blob) {
    blob->~Blob();
    if (cached_.load(std::memory_order_relaxed) >= kMaxCached) {
      ::operator delete(static_cast<void*>(blob), kAlign);
      return;
    }
    cached_.fetch_add(1, std::memory_order_relaxed);
    freed_.Push(new (static_cast<void*>(blob)) Slot());
  }

  // What a recycled blob's memory holds while it waits.
  struct Slot {
    Slot* next = nullptr;
    QueuedChainHeader<Slot> queue_header;
  };
  static_assert(sizeof(Slot) <= sizeof(Blob), "a slot must fit in a blob's memory");
  static constexpr std::align_val_t kAlign{alignof(Blob)};
  static constexpr int64_t kMaxCached = 1 << 14;

  void* TakeMemory() {
    {
      PlainMutexLock lock(&mu_);
      if (cache_.empty()) cache_ = freed_.TakeAll();
      if (!cache_.empty()) {
        Slot* slot = cache_.PopFront();
        cached_.fetch_sub(1, std::memory_order_relaxed);
        slot->~Slot();
        return slot;
      }
    }
    return ::operator new(sizeof(Blob), kAlign);
  }

  IntrusiveQueue<Slot> freed_;  // pushed by deleters, taken by producers
  PlainMutex mu_;               // producers' side: a cache taken from `freed_` at once
  Chain<Slot> cache_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> cached_{0};  // approximate: slots in `freed_` and `cache_`

  // The producers' parked blobs, oldest first, in a ring allocated once (a node-based
  // container would allocate on one thread and free on another).
  class Ring {
   public:
    explicit Ring(size_t capacity) : slots_(capacity) {}
    size_t capacity() const { return slots_.size(); }
    size_t size() const { return size_; }
    // The k-th blob from the newest (k < size()).
    Blob* FromBack(size_t k) const { return slots_[Index(size_ - 1 - k)]; }
    // Removes FromBack(k), keeping the order of the rest.
    void EraseFromBack(size_t k) {
      for (size_t i = size_ - 1 - k; i + 1 < size_; ++i) slots_[Index(i)] = slots_[Index(i + 1)];
      --size_;
    }
    // Requires size() < capacity().
    void PushBack(Blob* blob) { slots_[Index(size_++)] = blob; }
    // Requires size() > 0.
    Blob* PopFront() {
      Blob* blob = slots_[first_];
      first_ = (first_ + 1) % slots_.size();
      --size_;
      return blob;
    }

   private:
    // The slot of the i-th blob from the oldest.
    size_t Index(size_t i) const { return (first_ + i) % slots_.size(); }

    std::vector<Blob*> slots_;
    size_t first_ = 0;
    size_t size_ = 0;
  };
  const size_t capacity_;
  // Producers' side. Lock order: parked_mu_ before inbox_mu_.
  mutable PlainMutex parked_mu_;
  Ring parked_ ABSL_GUARDED_BY(parked_mu_);
  int64_t recycled_ ABSL_GUARDED_BY(parked_mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(parked_mu_) = 0;  // ids [next_id_, end_id_) are ours
  uint64_t end_id_ ABSL_GUARDED_BY(parked_mu_) = 0;
  // The scheduler's side: blobs parked since producers last looked, oldest first.
  alignas(64) mutable PlainMutex inbox_mu_;
  std::vector<Blob*> inbox_ ABSL_GUARDED_BY(inbox_mu_);
  bool parking_closed_ ABSL_GUARDED_BY(inbox_mu_) = false;
  // At least the ring's size, for the scheduler's "does it fit" without the producers'
  // lock: the ring grows only under inbox_mu_ (MoveInboxLocked), which sets it; takes
  // shrink the ring and leave it (a store per take moved its line away from the producer
  // whenever the scheduler read it), so it may be high; ParkEvicting counts exactly.
  size_t ring_bound_ ABSL_GUARDED_BY(inbox_mu_) = 0;
  // The inbox's size, for a producer to look at the inbox only when it holds something
  // (written under inbox_mu_, read without it).
  std::atomic<size_t> inbox_size_{0};
  std::atomic<int64_t> evicted_{0};
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_BLOB_POOL_H_
