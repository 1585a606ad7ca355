// BlobPool: recycles the memory of a VM's eager blobs. A blob is created by a producer and
// deleted by the scheduler once no instruction uses it; with plain new/delete every dead
// tensor is a free into the producer's malloc arena from another thread, which takes that
// arena's lock against the producer's own allocations (in the eager add loop the producer
// spent a fifth of its time waking the scheduler out of that lock). Here the scheduler
// hands the memory back through a lock-free queue and producers build new blobs in it.
#ifndef SLUICE_VM_INTERNAL_BLOB_POOL_H_
#define SLUICE_VM_INTERNAL_BLOB_POOL_H_

#include <atomic>
#include <cstddef>
#include <new>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "core/plain_mutex.h"
#include "vm/blob.h"
#include "vm/internal/intrusive_queue.h"

namespace sluice::vm::internal {

// Thread-safe. Memory comes from ::operator new with Blob's size and alignment, so a blob
// built here may also be deleted with plain `delete` (as the reaper does once the VM is
// gone). Destroying the pool frees the memory it holds; blobs still alive are not its.
class BlobPool {
 public:
  BlobPool() = default;
  BlobPool(const BlobPool&) = delete;
  BlobPool& operator=(const BlobPool&) = delete;
  ~BlobPool() {
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

  // Any thread (the scheduler): ends `blob` and keeps its memory for New. Beyond
  // kMaxCached blobs' worth the memory goes back to the heap instead.
  void Delete(Blob* blob) {
    blob->~Blob();
    if (cached_.load(std::memory_order_relaxed) >= kMaxCached) {
      ::operator delete(static_cast<void*>(blob), kAlign);
      return;
    }
    cached_.fetch_add(1, std::memory_order_relaxed);
    freed_.Push(new (static_cast<void*>(blob)) Slot());
  }

 private:
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
      if (Slot* slot = cache_.head; slot != nullptr) {
        cache_.head = slot->next;
        if (cache_.head == nullptr) cache_.tail = nullptr;
        --cache_.size;
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
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_BLOB_POOL_H_
