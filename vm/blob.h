// Blob: a tensor as the VM sees it (OneFlow's eager blob object): its storage, the
// dependence state the engine derives read/write order from, and the error that poisons it
// when the instruction that should have written it failed or was skipped.
#ifndef SLUICE_VM_BLOB_H_
#define SLUICE_VM_BLOB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/device.h"
#include "core/shape.h"
#include "core/tensor_storage.h"
#include "vm/internal/intrusive_queue.h"

namespace sluice::vm {

class Instruction;
namespace internal {
class BlobPool;
class BlobReaper;
}  // namespace internal

// Created by VirtualMachine::NewBlob and shared (std::shared_ptr) between the caller and the
// instructions that touch it; instructions keep it alive until they retire.
//
// Thread-safety, per part:
//  - metadata (id, device, dtype, shape, name): immutable while anyone references the
//    blob (a parked blob takes a new id when it is recycled); any thread.
//  - storage(): written only by a Release instruction as it runs; read by kernels, whose
//    order against the Release the engine guarantees.
//  - last use (soft sync input) lives in the storage and is touched by one builder thread at
//    a time (the caller's contract, as for any tensor handle).
//  - dependence state: the engine's scheduler only.
//  - poison: any thread.
class Blob {
 public:
  // An eager blob: its storage comes from VirtualMachine::NewBlob right after (see
  // AllocateStorage) and lives until a Release.
  Blob(uint64_t id, Device device, DataType dtype, Shape shape, std::string name);
  // A lazy blob: no storage until an OpCall writes it, when the worker allocates it from
  // `allocator` for the writing stream; a Release frees it and the next writer allocates
  // again. The interpreter binds its temporaries this way, so one lowered graph serves
  // every run while each run's memory lives only from first write to last use.
  Blob(uint64_t id, Device device, DataType dtype, Shape shape, Allocator* allocator,
       std::string name);
  ~Blob();
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  Device device() const { return device_; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  size_t bytes() const { return bytes_; }
  // "blob #7" or "blob #7 'weights'": how errors and the sync checker name it.
  std::string DebugName() const;

  // Null once a Release instruction has run (and, for a lazy blob, before its first write).
  TensorStorage* storage() const { return storage_; }
  bool lazy() const { return allocator_ != nullptr; }
  // Worker thread of a writer: allocates a lazy blob's storage for `stream` when it has
  // none. OK for a blob that has storage; FailedPrecondition naming the blob for a released
  // eager blob; the allocator's error otherwise.
  absl::Status EnsureStorage(StreamId stream);

 private:
  // Allocates the storage from `allocator` for first use on `stream` (it must have none).
  absl::Status AllocateStorage(Allocator* allocator, StreamId stream);
  // Ends the storage, a kept one included (its bytes return to the allocator,
  // stream-ordered); nothing if none.
  void FreeStorage();

  // Run-private blobs (see FusedCalls): the builder, when a fused run that created the blob
  // also releases it. From then on two holds keep it — the run's and the BlobRef
  // deleter's — and the engine never sees it.
  void MakeRunPrivate() {
    run_private_ = true;
    private_holds_.store(2, std::memory_order_relaxed);  // published with the run
  }
  // Drops one hold; true for the last one (the caller deletes the blob).
  bool DropPrivateHold() { return private_holds_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  // A Release ends the storage: frees it, or for a blob that ParksStorage() keeps it aside
  // (KeepStorage). Worker thread, in the Release's stream order. Nothing for a blob
  // without storage (a second Release of it, as a resubmitted batch may run).
  void ReleaseStorage() {
    if (storage_ == nullptr) return;
    if (ParksStorage()) {
      KeepStorage();
    } else {
      FreeStorage();
    }
  }
  // Whether the blob's Release keeps its storage aside instead of freeing it, so that the
  // blob can be parked with it when it dies (internal::BlobPool): a small, unnamed, eager
  // blob whose Release is the end of it — run-private, or released by a caller that drops
  // its last hold right after (InstructionsBuilder::Release's `dying`). A blob someone
  // keeps after its Release gets its storage freed as before: kept bytes would otherwise
  // live as long as the reference, possibly past the allocator. Fixed once the Release is
  // submitted.
  bool ParksStorage() const {
    return (run_private_ || released_dying_) && allocator_ == nullptr &&
           bytes_ <= kMaxParkedBytes && name_.empty();
  }
  // storage() becomes null as for any release, but the storage stays built, waiting for
  // Park; ~Blob still frees it.
  void KeepStorage() {
    kept_storage_ = storage_;
    storage_ = nullptr;
  }
  // BlobPool, on a parked blob nobody references and no unretired instruction uses: makes
  // it a new blob `id` with the same metadata and the kept storage (no poison, no fusion,
  // release or engine marks).
  void Recycle(uint64_t id);

 public:
  // Largest blob (in bytes) whose storage a Release may keep for reuse (ParksStorage).
  static constexpr size_t kMaxParkedBytes = 4096;

  // Poison: the error of the failed or skipped instruction that should have produced the
  // current contents. Readers of a poisoned blob are skipped; a successful write clears it.
  bool poisoned() const { return poisoned_.load(std::memory_order_acquire); }
  absl::Status poison() const;
  void Poison(const absl::Status& cause);
  void ClearPoison();

 private:
  friend class Engine;
  friend class VirtualMachine;
  friend class InstructionsBuilder;
  friend class InstructionExecutor;
  friend class SyncChecker;
  friend class FusedCalls;
  friend class internal::BlobPool;
  friend class internal::BlobReaper;

  uint64_t id_;  // changes only in Recycle
  const std::string name_;
  const Device device_;
  const DataType dtype_;
  const Shape shape_;
  const size_t bytes_;
  Allocator* const allocator_ = nullptr;  // set for lazy blobs only
  // The storage lives in storage_space_ (built there, ended in place): a blob is created
  // by the producer and its storage freed by a worker, and a heap object per storage would
  // make every freed tensor a free into another thread's malloc arena.
  TensorStorage* storage_ = nullptr;
  // Set by KeepStorage (then storage_ is null): the released storage, still built, that a
  // parked blob takes back in Recycle.
  TensorStorage* kept_storage_ = nullptr;
  alignas(TensorStorage) unsigned char storage_space_[sizeof(TensorStorage)];

  // Builder thread: set once a Release has been submitted; later use is an error.
  bool released_ = false;
  // Builder thread, before the Release is submitted (read by the worker that runs it):
  // the releaser drops its last hold right after (see ParksStorage).
  bool released_dying_ = false;
  // Builder thread (read by the BlobRef deleter, which runs after the builder's last use):
  // the blob is run-private (see MakeRunPrivate).
  bool run_private_ = false;
  std::atomic<int> private_holds_{0};
  // Builder's buffer lock (the builder, or whoever closes its run): the FusedCalls run that
  // last counted this blob among its union operands (that run's mark) and as what
  // (FusedCalls' role bits).
  uint8_t fuse_roles_ = 0;
  uint64_t fuse_mark_ = 0;

  // Scheduler only: the last writer and the readers since it, among unretired instructions.
  // Readers live in [readers_head_, size); retired ones become null. Retirement is mostly
  // in arrival order, so the head advances instead of erasing from the front.
  // On its own cache line: the scheduler writes these for every instruction while the
  // producer reads the fields above (storage, released_) for the next call.
  alignas(64) Instruction* last_writer_ = nullptr;
  absl::InlinedVector<Instruction*, 4> readers_;
  size_t readers_head_ = 0;
  // Scheduler only: unretired instructions using the blob (counted per operand), whether
  // its last reference is gone (then it is deleted when `uses_` drops to zero), and the
  // engine's graveyard link.
  int64_t uses_ = 0;
  bool dead_ = false;
  Blob* next = nullptr;
  internal::QueuedChainHeader<Blob> queue_header;
  template <typename T>
  friend class internal::IntrusiveQueue;
  template <typename T>
  friend struct internal::Chain;

  // Sync checker only: what retired accesses of this blob certify (see
  // SyncChecker::OnRetire). Scheduler only.
  std::vector<uint32_t> retired_clock_;

  // `poisoned_` mirrors `!poison_.ok()` for a lock-free check on every instruction:
  // release on Poison/ClearPoison, acquire in poisoned().
  std::atomic<bool> poisoned_{false};
  mutable absl::Mutex poison_mu_;
  absl::Status poison_ ABSL_GUARDED_BY(poison_mu_);
};

// What callers hold. The VM creates blobs with a deleter that hands them to its engine,
// which deletes a blob only once no unretired instruction uses it (see Engine).
using BlobRef = std::shared_ptr<Blob>;
using BlobList = absl::InlinedVector<BlobRef, 4>;
// What instructions hold: raw pointers, kept valid by the engine's use counts, so that an
// instruction costs no atomic reference counting on blobs shared between threads.
using BlobPtrs = absl::InlinedVector<Blob*, 4>;

// A view of operands for calls that only look at them (no reference counting: a braced
// list `{x, y}` or a BlobList binds to it).
using BlobSpan = absl::Span<const BlobRef>;
// The same without ownership: raw pointers the caller keeps alive (its BlobRefs).
using BlobPtrSpan = absl::Span<Blob* const>;
inline BlobPtrs ToPtrs(BlobSpan blobs) {
  BlobPtrs ptrs;
  ptrs.reserve(blobs.size());
  for (const BlobRef& blob : blobs) ptrs.push_back(blob.get());
  return ptrs;
}

}  // namespace sluice::vm

#endif  // SLUICE_VM_BLOB_H_
