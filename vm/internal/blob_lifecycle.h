// BlobLifecycle: the one place that reads and writes a Blob's lifecycle state. Blob (vm/blob.h)
// shows callers its metadata, storage and poison; everything else — release marks, fusion
// marks, run-private holds, the engine's dependence state, kept storage, parking, the sync
// checker's clock — is reached through the accessor groups below, one per owner thread.
// Every accessor is an inline function over Blob's fields, so going through them costs
// nothing; Park and Recycle, out of line, are defined in vm/internal/blob_lifecycle.cc.
//
// States and transitions (thread that makes each; accessor group in brackets):
//
//   created ── eager: VirtualMachine::NewBlob, storage allocated at once (producer)
//     │          [Worker::AllocateStorage], or taken back from the parked set [Parking::Recycle]
//     │        lazy: NewLazyBlob, no storage until a writer's worker allocates it
//     │          (Blob::EnsureStorage) and a Release frees it again [Worker::ReleaseStorage]
//     ▼
//   in use ── operands of instructions. Scheduler: uses, last writer, readers
//     │          [Scheduler::AddUse / RecordWrite / AddReader / ForgetWriter / DropUse];
//     │          worker: poison (Blob's public interface).
//     │        producer, under the builder's buffer lock: fusion marks [Producer::fuse_*]
//     ▼
//   released ── producer: InstructionsBuilder::Release [Producer::MarkReleased, SetDying];
//     │          the builder rejects any later use. Producer::ParksStorage decides, as the
//     │          Release is built, whether its storage is kept (Instruction::keeps_storage).
//     ├─ storage freed: the Release's worker [Worker::ReleaseStorage(keep = false)]
//     ├─ storage kept: the Release's worker [Worker::ReleaseStorage(keep = true)], or for a
//     │    run-private blob's stepless Release the scheduler as its run retires
//     │    [Scheduler::MarkKept]; storage() reads null, raw_storage() still the storage
//     └─ run-private: born and released in one fused run [Producer::MakeRunPrivate] with one
//          or two holds; the engine never sees it
//     ▼
//   dead ── last hold dropped (any thread, BlobReaper::Reap):
//     │        ordinary blob → Engine::Bury (graveyard [Scheduler::next_buried]); the
//     │          scheduler deletes it at once if unused, else [Scheduler::MarkDead] and
//     │          deletes it when [Scheduler::DropUse] reports its last use retired;
//     │        run-private → whichever of its holds drops last [Holds::DropPrivateHold]
//     │          deletes it: the reaper (Engine::DeleteUnused) or the scheduler recycling
//     │          the run (StepSequence::DropPrivateHolds).
//     ▼
//   BlobPool::Delete ── [Parking::Parkable]?
//     ├─ yes: parked [Parking::Park] (the deleting thread) → recycled under a new id by a
//     │    producer [Parking::PrefetchForRecycle, Parking::Recycle] (back to created), or
//     │    evicted / dropped at shutdown → deleted
//     └─ no: deleted (~Blob frees any storage, kept storage included; memory back to the pool)
//
// Invariants:
//  - released is set only once a Release was accepted, and only by the producer; nothing
//    clears it but Recycle.
//  - kept implies storage: storage is set (raw_storage() != null) whenever kept is.
//  - A blob is deleted only with no unretired instruction using it (uses == 0); parked only
//    when, besides, it kept its storage, has no last writer or readers and its bytes were
//    last used on the stream they were allocated for (Parking::Parkable).
//  - A run-private blob has uses == 0, no dependence state and never reaches the graveyard;
//    its holds start at 1 or 2 and the thread whose drop reaches 0 deletes it.
//  - A parked blob holds no engine, kept, checker or poison state (Park cleared it); Recycle
//    clears the producer's marks, so a recycled blob is indistinguishable from a new one but
//    for its storage, which it keeps.
//
// Field ownership follows Blob's cache lines (see the layout in vm/blob.h): Producer writes
// the first line only; Scheduler and Checker the last; Worker the storage, and the kept flag
// on the scheduler's line; Parking clears what the others left.
#ifndef SLUICE_VM_INTERNAL_BLOB_LIFECYCLE_H_
#define SLUICE_VM_INTERNAL_BLOB_LIFECYCLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "core/prefetch.h"
#include "core/stream_id.h"
#include "core/tensor_storage.h"
#include "vm/blob.h"

namespace sluice::vm {

class Instruction;

namespace internal {

// Stateless: groups of static accessors, each documented with the thread allowed to call it.
class BlobLifecycle {
 public:
  BlobLifecycle() = delete;

  // The producer: the builder thread that issues work on the blob (NewBlob, Release), or
  // whoever holds the builder's buffer lock (fusion marks). Writes the blob's first line.
  struct Producer {
    // Whether a Release was submitted; any later use is an error.
    static bool released(const Blob& blob) { return blob.released_; }
    // Only once the Release was accepted.
    static void MarkReleased(Blob* blob) { blob->released_ = true; }
    // Before the Release is built: whether the releaser drops its last hold right after
    // (see ParksStorage). A refused Release leaves the blob usable; the mark is harmless.
    static void SetDying(Blob* blob, bool dying) { blob->released_dying_ = dying; }

    // Whether the blob's Release keeps its storage aside instead of freeing it, so that the
    // blob can be parked with it when it dies: a small, unnamed, eager blob whose Release is
    // the end of it — run-private, or released by a caller that drops its last hold right
    // after (SetDying). A blob someone keeps after its Release gets its storage freed: kept
    // bytes would otherwise live as long as the reference, possibly past the allocator.
    // Decided as the Release is built (Instruction::keeps_storage carries it to the worker).
    static bool ParksStorage(const Blob& blob) {
      return (blob.run_private_ || blob.released_dying_) && blob.allocator_ == nullptr &&
             blob.bytes_ <= Blob::kMaxParkedBytes && blob.name_.empty();
    }

    // Run-private blobs (see StepSequence): when a fused run that created the blob also
    // releases it. From then on `holds` holds keep it — the run's and the BlobRef deleter's
    // (2), or only the run's when the releaser gave its hold up with the Release (1) — and
    // the engine never sees it. Published with the run.
    static void MakeRunPrivate(Blob* blob, int holds) {
      blob->run_private_ = true;
      blob->private_holds_.store(holds, std::memory_order_relaxed);
    }
    // Any thread once the run is published (set before it, never cleared but by Recycle).
    static bool run_private(const Blob& blob) { return blob.run_private_; }

    // StepSequence' marks, under the builder's buffer lock: the run that last counted the blob
    // among its operands (that run's unique mark) and as what (StepSequence' role bits, which
    // mean something only while the mark is the asking run's). StepSequence reads and updates
    // them in place, so they are handed out as the fields themselves.
    static uint64_t& fuse_mark(Blob* blob) { return blob->fuse_mark_; }
    static uint8_t& fuse_roles(Blob* blob) { return blob->fuse_roles_; }
  };

  // A run-private blob's holds: the BlobRef deleter (any thread) and the scheduler
  // recycling the run each drop one.
  struct Holds {
    // Drops one hold; true for the last one (the caller deletes the blob).
    static bool DropPrivateHold(Blob* blob) {
      return blob->private_holds_.fetch_sub(1, std::memory_order_acq_rel) == 1;
    }
  };

  // The engine's scheduler thread only: dependence state, use counts, death and the
  // graveyard link. Writes the blob's last line.
  struct Scheduler {
    // The scheduler's per-op path: instructions are taken and counts returned by reference,
    // so that inlined these compile to exactly the field accesses they stand for.
    // Unretired instructions using the blob, counted per operand.
    static const int64_t& uses(const Blob& blob) { return blob.uses_; }
    static void AddUse(Blob* blob) { ++blob->uses_; }
    // Drops one use; true when that was the last one of a dead blob (the caller deletes it).
    static bool DropUse(Blob* blob) { return --blob->uses_ == 0 && blob->dead_; }
    // The last reference is gone but instructions still use the blob: DropUse reports the
    // last of them.
    static void MarkDead(Blob* blob) { blob->dead_ = true; }

    // The last writer among unretired instructions (null if none).
    static Instruction* last_writer(const Blob& blob) { return blob.last_writer_; }
    // `writer` writes the blob: it becomes the last writer and earlier readers are forgotten.
    static void RecordWrite(Blob* blob, Instruction* const& writer) {
      blob->last_writer_ = writer;
      blob->readers_.clear();
      blob->readers_head_ = 0;
    }
    // `reader` (received after the last writer) reads the blob.
    static void AddReader(Blob* blob, Instruction* const& reader) {
      blob->readers_.push_back(reader);
    }
    // `writer` retired: no longer the blob's last writer if it was.
    static void ForgetWriter(Blob* blob, Instruction* const& writer) {
      if (blob->last_writer_ == writer) blob->last_writer_ = nullptr;
    }
    // The readers since the last writer live in readers()[readers_head(), size); retired ones
    // are null. Retirement is mostly in arrival order, so the head advances instead of
    // erasing from the front (Engine::ForgetReader).
    static absl::InlinedVector<Instruction*, 4>& readers(Blob* blob) { return blob->readers_; }
    static size_t& readers_head(Blob* blob) { return blob->readers_head_; }

    // The graveyard link (Engine::Bury): the next buried blob of a chain taken from it.
    static Blob* next_buried(const Blob& blob) { return blob.next; }

    // As a run-private blob's run retires, what its stepless Release would have done (see
    // StepSequence::MarkKept): its storage stays built, storage() turns null.
    static void MarkKept(Blob* blob) { blob->kept_.store(true, std::memory_order_relaxed); }
  };

  // The worker thread running an instruction on the blob (and the producer that allocates
  // an eager blob's storage at creation, before anyone else sees the blob).
  struct Worker {
    // Allocates the storage from `allocator` for first use on `stream` (it must have none).
    static absl::Status AllocateStorage(Blob* blob, Allocator* const& allocator,
                                        const StreamId& stream) {
      return blob->AllocateStorage(allocator, stream);
    }
    // A Release ends the storage: frees it, or — `keep`: the Release's producer found that
    // Producer::ParksStorage — keeps it aside. In the Release's stream order. Nothing for a
    // blob without storage or already kept (a second Release, as a resubmitted batch may
    // run).
    static void ReleaseStorage(Blob* blob, bool keep) {
      if (blob->storage_ == nullptr || blob->kept_.load(std::memory_order_relaxed)) return;
      if (keep) {
        blob->kept_.store(true, std::memory_order_relaxed);  // storage() turns null; the
                                                             // storage stays for Park
      } else {
        blob->FreeStorage();
      }
    }
    // Ahead of a kernel on the blob: starts moving the lines a kernel reads (the storage
    // pointer's and the storage's) to this core.
    static void PrefetchForKernel(const Blob& blob) {
      ::sluice::PrefetchForRead(&blob.storage_);
      ::sluice::PrefetchForRead(blob.storage_space_ + sizeof(void*));
    }
  };

  // The parked set (internal::BlobPool): the thread deleting a dead blob parks it; a
  // producer recycles it.
  struct Parking {
    // Whether a dead blob may be parked: it kept its storage (Producer::ParksStorage), whose
    // bytes were last used by their allocating stream, and no unretired instruction uses it
    // — the engine deletes its blobs so (their last writer and readers retired, which
    // cleared them), and a run-private one never met the engine. A caller that passed
    // `fresh_outputs` for a blob already in use gets it deleted instead.
    static bool Parkable(const Blob& blob) {
      if (!blob.kept_.load(std::memory_order_relaxed) || blob.storage_ == nullptr) return false;
      const TensorStorage& kept = *blob.storage_;
      return kept.last_used_stream() == kept.alloc_stream() && blob.uses_ == 0 &&
             blob.last_writer_ == nullptr && blob.readers_.size() == blob.readers_head_;
    }
    // Parking a Parkable blob: clears the marks the engine and the worker left (death, kept
    // storage, checker clock, poison), so that the producer that recycles it writes only
    // its own line. Defined in vm/internal/blob_lifecycle.cc.
    static void Park(Blob* blob);
    // A producer, on a parked blob nobody references and no unretired instruction uses:
    // makes it blob `id` with the same metadata and the kept storage (no poison, no fusion,
    // release or engine marks). Writes only the producer's line. Defined in
    // vm/internal/blob_lifecycle.cc.
    static void Recycle(Blob* blob, uint64_t id);
    // A producer, ahead of taking this parked blob back: the line Recycle writes, for
    // writing; what BlobPool's match reads (dtype,
    // shape, the storage's stream), for reading. Not
    // the rest: a kernel's lines taken for writing would have to come back to the worker.
    static void PrefetchForRecycle(const Blob& blob) {
      ::sluice::PrefetchForWrite(&blob.id_);
      ::sluice::PrefetchForRead(&blob.storage_);
      ::sluice::PrefetchForRead(blob.storage_space_);
      ::sluice::PrefetchForRead(blob.storage_space_ + sizeof(blob.storage_space_) - 1);
    }
  };

  // The sync checker's hooks (the scheduler, only with VmOptions::check_sync): what retired
  // accesses of the blob certify (see SyncChecker::OnEagerRetired).
  struct Checker {
    static std::vector<uint32_t>& retired_clock(Blob* blob) { return blob->retired_clock_; }
  };
};

}  // namespace internal
}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_BLOB_LIFECYCLE_H_
