// Blob: a tensor as the VM sees it: its metadata, its storage and the error that poisons it
// when the instruction that should have written it failed or was skipped. Its lifecycle
// state (release and fusion marks, run-private holds, the engine's dependence state, kept
// storage, parking) lives in its fields too, but only internal::BlobLifecycle
// (vm/internal/blob_lifecycle.h) reads or writes it; that header states the state machine.
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
#include "core/intrusive_queue.h"
#include "core/shape.h"
#include "core/tensor_storage.h"

namespace sluice::vm {

class Instruction;
namespace internal {
class BlobLifecycle;
}  // namespace internal

// Created by VirtualMachine::NewBlob and shared (std::shared_ptr) between the caller and the
// instructions that touch it; instructions keep it alive until they retire.
//
// Thread-safety, per part:
//  - metadata (id, device, dtype, shape, name): immutable while anyone references the
//    blob (a parked blob takes a new id when it is recycled); any thread.
//  - storage: set at creation (a lazy blob's by its writers); freed, or kept aside for
//    parking, by a Release as it runs — or, for a run-private blob's stepless Release, kept
//    by the scheduler as the run retires. Kernels read raw_storage(), whose order against
//    the Release the engine guarantees; storage() also reads the kept mark.
//  - last use (soft sync input) lives in the storage and is touched by one builder thread at
//    a time (the caller's contract, as for any tensor handle).
//  - lifecycle state: per owner thread, through internal::BlobLifecycle only.
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

  // Null once a Release instruction has run — a run-private blob's, once its fused run
  // retired (see StepSequence; so after a Sync or a barrier behind the run, not necessarily
  // as soon as the worker passed the run) — and, for a lazy blob, before its first write.
  // Not for kernels (see raw_storage()).
  TensorStorage* storage() const {
    return kept_.load(std::memory_order_relaxed) ? nullptr : storage_;
  }
  // The storage as kernels and builders see it: storage(), except that a blob whose Release
  // kept its storage for parking still shows it. The builder rejects any
  // use of a blob after its Release, so its kernels never see the difference; this reads
  // only the blob's immutable cache lines (storage() reads the engine's, which the
  // scheduler writes). A batch or sequence that names a released blob anyway runs on the
  // kept bytes.
  TensorStorage* raw_storage() const { return storage_; }
  bool lazy() const { return allocator_ != nullptr; }
  // Worker thread of a writer: allocates a lazy blob's storage for `stream` when it has
  // none. OK for a blob that has storage; FailedPrecondition naming the blob for a released
  // eager blob; the allocator's error otherwise.
  absl::Status EnsureStorage(StreamId stream);

  // Largest blob (in bytes) whose storage a Release may keep for reuse when the blob dies
  // (BlobLifecycle::Producer::ParksStorage).
  static constexpr size_t kMaxParkedBytes = 4096;

  // Poison: the error of the failed or skipped instruction that should have produced the
  // current contents. Readers of a poisoned blob are skipped; a successful write clears it.
  bool poisoned() const { return poisoned_.load(std::memory_order_acquire); }
  absl::Status poison() const;
  void Poison(const absl::Status& cause);
  void ClearPoison();

 private:
  // The lifecycle's accessors (vm/internal/blob_lifecycle.h) are the only code besides
  // Blob's own that touches its private fields.
  friend class internal::BlobLifecycle;
  // core/intrusive_queue.h links the engine's graveyard through `next` and `queue_header`
  // by name; they stay private (and in place on the scheduler's line) rather than open to
  // every caller.
  template <typename T>
  friend struct ::sluice::Chain;
  template <typename T>
  friend class ::sluice::IntrusiveQueue;

  // Allocates the storage from `allocator` for first use on `stream` (it must have none).
  absl::Status AllocateStorage(Allocator* allocator, StreamId stream);
  // Ends the storage, a kept one included (its bytes return to the allocator,
  // stream-ordered); nothing if none.
  void FreeStorage();

  // Fields are grouped by the thread that writes them, so that an eager op's producer, the
  // worker that runs it and the scheduler that retires it do not pass lines back and
  // forth: the producer writes the first line (recycling, fusion marks, release); nobody
  // normally writes the next ones, which hold what a kernel reads (the second line: storage,
  // size, dtype, poison flag, device and a small shape's dims; the third: the storage's
  // data pointer); the scheduler writes the engine's, last.

  // --- Producer (BlobLifecycle::Producer; the holds: BlobLifecycle::Holds). ---
  alignas(64) uint64_t id_;  // changes only in BlobLifecycle::Parking::Recycle
  // Run-private holds (BlobLifecycle::Producer::MakeRunPrivate): set by the builder thread;
  // dropped by the BlobRef deleter (after the builder's last use) and by the scheduler once
  // the blob's run retired, each with an atomic decrement.
  std::atomic<int> private_holds_{0};
  // Builder thread: set once a Release has been submitted; later use is an error.
  bool released_ = false;
  // Builder thread, before the Release is submitted: the releaser drops its last hold
  // right after (BlobLifecycle::Producer::ParksStorage).
  bool released_dying_ = false;
  // Builder thread: the blob is run-private.
  bool run_private_ = false;
  // Builder's buffer lock (the builder, or whoever closes its run): the StepSequence run that
  // last counted this blob among its union operands (that run's mark) and as what
  // (StepSequence' role bits).
  uint8_t fuse_roles_ = 0;
  uint64_t fuse_mark_ = 0;

  // --- What kernels read; immutable while the blob lives (but a lazy blob's storage_,
  // and poison, which changes only when ops fail). ---
  // The storage lives in storage_space_ (built there, ended in place): a blob is created
  // by the producer and its storage freed by a worker, and a heap object per storage would
  // make every freed tensor a free into another thread's malloc arena. Set at creation for
  // an eager blob and kept until the blob ends or a Release frees it (a kept one stays:
  // see kept_); a lazy blob's comes and goes with its writers and Releases.
  alignas(64) TensorStorage* storage_ = nullptr;
  const size_t bytes_;
  const DataType dtype_;
  // Mirrors `!poison_.ok()` for a lock-free check on every instruction: release on
  // Poison/ClearPoison, acquire in poisoned().
  std::atomic<bool> poisoned_{false};
  const Device device_;
  const Shape shape_;
  alignas(TensorStorage) unsigned char storage_space_[sizeof(TensorStorage)];
  const std::string name_;
  Allocator* const allocator_ = nullptr;  // set for lazy blobs only
  mutable absl::Mutex poison_mu_;
  absl::Status poison_ ABSL_GUARDED_BY(poison_mu_);

  // --- Scheduler (BlobLifecycle::Scheduler, ::Checker; kept_ also ::Worker). ---
  // The last writer and the readers since it, among unretired instructions.
  // Readers live in [readers_head_, size); retired ones become null. Retirement is mostly
  // in arrival order, so the head advances instead of erasing from the front.
  alignas(64) Instruction* last_writer_ = nullptr;
  absl::InlinedVector<Instruction*, 4> readers_;
  size_t readers_head_ = 0;
  // Unretired instructions using the blob (counted per operand), whether its last
  // reference is gone (then it is deleted when `uses_` drops to zero), and the engine's
  // graveyard link.
  int64_t uses_ = 0;
  bool dead_ = false;
  // Set by the worker that ran the blob's Release when it kept the storage (storage_ stays
  // set, storage() turns null), or by the scheduler for a run-private blob's stepless
  // Release (StepSequence::MarkKept); read by the scheduler when the blob dies (the Release
  // retired before), cleared by BlobLifecycle::Parking::Park. Here rather than on a
  // kernel's lines: only the Release and the scheduler touch it.
  // Atomic: storage() may read it on any thread while the scheduler sets it for a
  // run-private blob (StepSequence::MarkKept); the storage it guards does not change.
  std::atomic<bool> kept_{false};
  Blob* next = nullptr;
  QueuedChainHeader<Blob> queue_header;

  // Sync checker only: what retired accesses of this blob certify (see
  // SyncChecker::OnEagerRetired). Scheduler only.
  std::vector<uint32_t> retired_clock_;
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
