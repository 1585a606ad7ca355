// VirtualMachine: the instruction VM over an ep::Runtime — the front door for everything
// above it. It owns the vm::Streams, ThreadCtx workers, the engine, the instruction pool,
// the error sink and, when enabled, the sync checker and the recorder. Users create blobs,
// sync and shut down here; instructions come in through an InstructionsBuilder (eager,
// with soft sync) or a PrecomputedBatch (interpreter, with precomputed edges), which reach
// the pool and the engine through a ProducerPort (vm/producer_port.h), not through this
// class.
#ifndef SLUICE_VM_VIRTUAL_MACHINE_H_
#define SLUICE_VM_VIRTUAL_MACHINE_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/intrusive_queue.h"
#include "core/plain_mutex.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "ep/runtime.h"
#include "vm/blob.h"
#include "vm/counters.h"
#include "vm/engine.h"
#include "vm/error_sink.h"
#include "vm/instruction.h"
#include "vm/instruction_executor.h"
#include "vm/owned_blob.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"
#include "vm/stream_policy.h"
#include "vm/sync_checker.h"
#include "vm/thread_ctx.h"

namespace sluice::vm {

class ProducerPort;
class Recorder;
namespace internal {
class BlobPool;
class BlobReaper;
class InstructionPool;
struct SubmitBuffer;
}  // namespace internal

struct VmOptions {
  enum class Scheduling {
    kDedicatedThread,  // a scheduler thread of its own
    kCallerThread,     // on the threads that submit work or report completions
  };
  Scheduling scheduling = Scheduling::kDedicatedThread;
  // Submitted, unretired instructions at most; Submit waits beyond (backpressure). A fused
  // run (max_fused_steps) counts as one instruction.
  int64_t max_in_flight = 1 << 16;
  // Check every tensor access against happens-before (vm/sync_checker.h).
  bool check_sync = false;
  // When not empty, every submitted instruction is written to this file
  // (docs/instruction_record_format.md) and final blob checksums are added at shutdown.
  std::string record_path;
  // How long idle VM threads spin before parking.
  std::chrono::nanoseconds spin{20000};
  // How long a ThreadCtx worker that ran out of instructions keeps polling for more before
  // it parks (it yields the core between polls). Longer than `spin`: work often comes in
  // runs (a precomputed graph per step), and a parked worker costs the next run a wake-up.
  std::chrono::nanoseconds idle_spin{200000};
  // Eager fusion: consecutive OpCalls and Releases an InstructionsBuilder issues on one
  // stream while its earlier ones are still held back join them as one instruction
  // (StepSequence) of at most this many steps. 0 or 1: off. Off as well while recording
  // (a recording keeps one line per call) and in caller-thread scheduling (nothing is held
  // back there).
  int max_fused_steps = 64;
  // Small eager blobs that died with their storage wait for a NewBlob of the same stream,
  // dtype and shape (parked blobs; see internal::BlobPool): at most this many (each at
  // most Blob::kMaxParkedBytes; the oldest goes first). 0: none waits; at most 2^20.
  static constexpr int64_t kDefaultMaxParkedBlobs = 4096;
  int64_t max_parked_blobs = kDefaultMaxParkedBlobs;
};

enum class ShutdownMode {
  kFinish,  // run everything already submitted
  kCancel,  // skip everything not yet launched (status Cancelled); launched work finishes
};

// Thread-safe. Destroying the VM shuts it down (kFinish) if Shutdown was not called.
// Builders and batches must not outlive it; blobs may (their storage must not outlive the
// Runtime).
class VirtualMachine {
 public:
  // `runtime` must outlive the VM. InvalidArgument for bad options; the recorder's file
  // error when record_path cannot be created.
  static absl::StatusOr<std::unique_ptr<VirtualMachine>> Create(ep::Runtime* runtime,
                                                                VmOptions options = {});
  ~VirtualMachine();
  VirtualMachine(const VirtualMachine&) = delete;
  VirtualMachine& operator=(const VirtualMachine&) = delete;

  // The vm::Stream for an ep stream, created (with the ep stream) on first use.
  absl::StatusOr<Stream*> GetStream(const StreamKey& key);
  // Parses "sim:0/h2d", "cpu", ... first (InvalidArgument naming the text).
  absl::StatusOr<Stream*> GetStream(absl::string_view key);
  absl::StatusOr<Stream*> GetStream(StreamId id);

  // A new blob whose storage comes from the device's caching allocator, first used on
  // `stream` (which must be on the blob's device). Contents are uninitialized.
  // `allocator`: where the storage comes from instead (null: the device's caching
  // allocator; see NewLazyBlob for its requirements); such a blob never takes a parked one's
  // storage. Its allocation error (ResourceExhausted) is returned, and nothing is created.
  absl::StatusOr<BlobRef> NewBlob(Stream* stream, DataType dtype, Shape shape,
                                  std::string name = "", Allocator* allocator = nullptr);

  // NewBlob (unnamed) held by an OwnedBlob instead of a BlobRef: no reference counting,
  // no heap control block. The OwnedBlob must not outlive this VM.
  absl::StatusOr<OwnedBlob> NewOwnedBlob(Stream* stream, DataType dtype, const Shape& shape);

  // A lazy blob on `stream`'s device (see Blob): storage is allocated by its first writer,
  // for the writer's stream, and freed by a Release; the blob stays usable after it.
  // `allocator`: where its storage comes from (null: the device's caching allocator); it
  // must hand out memory of the blob's device and outlive the blob's storage (e.g. a
  // FaultInjectingAllocator around the device's allocator, core/fault_injecting_allocator.h).
  absl::StatusOr<BlobRef> NewLazyBlob(Stream* stream, DataType dtype, Shape shape,
                                      std::string name = "", Allocator* allocator = nullptr);

  // One host write for WriteIdleHostBlobs: `bytes` into `blob`.
  struct HostBlobWrite {
    const BlobRef* blob;
    absl::Span<const uint8_t> bytes;
  };
  // Copies host bytes into blobs (of any device) that no unsubmitted or
  // unretired instruction uses (the caller's guarantee: e.g. a precomputed graph's feed
  // blobs between runs), and clears their poison. With a recorder attached, the copies go
  // through AccessBlob instructions and a barrier instead, so that the record carries the
  // bytes and a replay orders what follows after them. Each blob written counts one in
  // VmStats::host_to_device_copies (once: the recorded path counts its AccessBlob writes).
  // Device memory (sim, cuda) is written by a copy on the device's host-to-device stream,
  // waited for here. InvalidArgument naming the blob for a size mismatch or a blob without
  // storage; nothing is written then. A failed device copy is returned; blobs before it in
  // `writes` are written then. Any thread; not concurrently with work on these blobs.
  absl::Status WriteIdleHostBlobs(absl::Span<const HostBlobWrite> writes);
  // One host read for ReadIdleHostBlobs: `blob`'s bytes into `bytes`.
  struct HostBlobRead {
    const BlobRef* blob;
    absl::Span<uint8_t> bytes;
  };
  // The converse: copies the bytes of blobs (of any device) that no
  // unretired instruction writes (e.g. a precomputed graph's fetch blobs after its run) out
  // to host memory. Poison is the caller's to check. Counted in
  // VmStats::device_to_host_copies, one per blob, as WriteIdleHostBlobs counts its writes.
  // Device memory is read by a copy on the device's device-to-host stream, waited for here.
  // InvalidArgument naming the blob for a size mismatch or a blob without storage; nothing
  // is read then. Any thread; not concurrently with writers of these blobs.
  absl::Status ReadIdleHostBlobs(absl::Span<const HostBlobRead> reads);

  // True when `blob` has storage (storage(): not lazy and unwritten, not released) that came
  // from an allocator of this VM's Runtime — as every blob this VM made has until its
  // Release, and no blob of a VM over another Runtime does. (Two VMs over one Runtime are
  // not told apart.) For code that accepts a caller's blob, such as a graph's
  // device-resident feeds. Any thread.
  bool OwnsStorage(const Blob& blob) const;

  // Waits until everything submitted before the call is complete; returns (and forgets)
  // the first error since the previous sync point, naming the instruction.
  absl::Status Sync();
  // Sync, and also appends every error since the previous sync point (the first
  // ErrorSink::kMaxKept, in report order) to `all`: for a caller that checks that
  // independent failures each surfaced, not only the first (fault injection).
  absl::Status Sync(std::vector<absl::Status>* all);
  // Stops taking work; finishes or cancels what is in flight; joins every thread. Returns
  // the first pending error. Idempotent.
  absl::Status Shutdown(ShutdownMode mode = ShutdownMode::kFinish);

  // Waits until everything submitted before the call is complete and the blobs it let die
  // are parked (as Sync does, but errors stay for the next sync point), then frees every
  // eager blob parked for reuse (VmOptions::max_parked_blobs): their bytes return to their
  // allocators, which then count what live blobs hold and nothing else this VM made. Blobs
  // that die later are parked as before. For a caller under memory pressure, and for tests
  // that count bytes. Any thread but the VM's own; fails once the VM is shut down.
  absl::Status FreeParkedBlobs();

  // Hands held-back instructions over first, so that the counts cover every accepted one.
  VmStats stats();
  // Times every OpCall from now on into `tracer` (null: stop). The tracer must stay alive
  // until the work launched while it was installed is complete (remove it after a Sync).
  void SetTracer(Tracer* tracer) { executor_.set_tracer(tracer); }

  // Null unless options.check_sync.
  SyncChecker* sync_checker() { return checker_.get(); }
  // Null unless options.record_path is set.
  Recorder* recorder() { return recorder_.get(); }
  ep::Runtime* runtime() const { return runtime_; }
  const VmOptions& options() const { return options_; }
  // Every vm::Stream created so far, in creation order.
  std::vector<Stream*> streams() const;

  // --- Capabilities: what producers may rely on when they choose how to submit. ---
  // Any thread; the answers for given streams never change (a stream's worker and policy
  // are fixed when it is created, observers when the VM is).
  //
  // True when each of `streams` is served by a worker (ThreadCtx) that no other listed
  // stream shares; false when a stream is listed twice. Work of one such stream never
  // queues behind another listed stream's on a worker.
  bool HasOwnWorkers(absl::Span<Stream* const> streams) const;
  // True when `stream`'s work runs on its worker as it is launched (a synchronous stream:
  // cpu), so the worker is busy until it is done.
  static bool RunsOnHost(const Stream& stream);
  // True when every stream of `streams` runs on host and has its own worker: the streams
  // StepSequence cross-sequence waits (StepSequence::AddWait) may join, one sequence each.
  bool CanRunLanes(absl::Span<Stream* const> streams) const;
  // True when an observer is attached (sync checker or recorder). Observers see inside an
  // StepSequence — each step's accesses and its cross-sequence waits — so its instruction
  // need not list the steps' operands for them.
  bool ObservesSteps() const { return checker_ != nullptr || recorder_ != nullptr; }

  // Whether producers fuse (see VmOptions::max_fused_steps).
  bool fusion() const { return fusion_; }
  ErrorSink& errors() { return errors_; }

 private:
  // One idle blob's bytes to or from host memory: memcpy for cpu blobs; otherwise a copy on
  // the device's copy stream that this thread waits for through an event (never a host
  // access of device memory); the copy's error, or an earlier one of that stream, is
  // returned. Any thread.
  absl::Status CopyIdle(const Blob& blob, void* dst, const void* src, size_t bytes, bool to_device);
  friend class ProducerPort;  // the producers' side: see vm/producer_port.h

  VirtualMachine(ep::Runtime* runtime, VmOptions options);
  // The producers' side, reached through ProducerPort (which documents each).
  absl::Status Submit(Chain<Instruction> chain) {
    return SubmitInternal(std::move(chain), /*after_close=*/false);
  }
  absl::Status ReserveBatch(int64_t n) {
    HandOverBuffers();  // what this thread holds back was submitted before the batch
    return Reserve(n, /*after_close=*/false);
  }
  void SubmitBatchPart(Chain<Instruction> part, bool first, bool last);
  void AttachBuffer(internal::SubmitBuffer* buffer);
  void DetachBuffer(internal::SubmitBuffer* buffer);
  absl::Status SubmitBuffered(internal::SubmitBuffer* buffer, Chain<Instruction> chain, bool open);
  bool AppendToOpenRun(internal::SubmitBuffer* buffer, const Stream* stream,
                       absl::FunctionRef<void(StepSequence& run, Instruction* head)> add);
  void HandOverBuffers();
  int64_t held_back();
  void NoteHostWaited(const Instruction& instruction);
  // Which ThreadCtx runs a stream: one per device type, except that every cpu compute
  // stream but the first, and every cpu ccl stream, gets a worker of its own (cpu streams
  // run their kernels on their worker, so streams sharing one could never run side by
  // side; see docs/design.md).
  ThreadCtx* ThreadCtxFor(const StreamKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(streams_mu_);
  // NewBlob's blob before anyone holds it (the caller makes the first hold).
  absl::StatusOr<Blob*> NewBlobRaw(Stream* stream, DataType dtype, const Shape& shape,
                                   std::string name, Allocator* allocator = nullptr);
  // Waits for room for `n` instructions in the pool (see InstructionPool::Reserve).
  absl::Status Reserve(int64_t n, bool after_close);
  // Reserve for the whole chain; on error frees its instructions (and empties it).
  absl::Status ReserveOrFree(Chain<Instruction>& chain, bool after_close);
  // Hands one attached buffer over. Requires buffers_mu_ (lock order: see buffers_mu_).
  void HandOver(internal::SubmitBuffer* buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(buffers_mu_);
  // Takes the buffer's chain and publishes it, before the buffer's lock is released.
  // Requires buffer->mu (not annotated: SubmitBuffer is incomplete here, and clang reads the
  // annotation's expression).
  void TakeAndPublish(internal::SubmitBuffer* buffer);
  // The buffer's tail stops taking calls; a fused run there closes (StepSequence::Close).
  // Requires buffer->mu.
  void CloseOpenRun(internal::SubmitBuffer* buffer);
  absl::Status SubmitInternal(Chain<Instruction> chain, bool after_close);
  // Room reserved: numbers, counts, checks and records the chain, then hands it over.
  void Publish(Chain<Instruction> chain);
  // Submits a Barrier and waits for it.
  absl::Status WaitBarrier(bool after_close);
  // The device allocators' out-of-memory hook (MemoryReclaimer, registered on every device
  // of the runtime from Create until Shutdown): a barrier, which hands over every held-back
  // instruction and waits until everything submitted before it is complete, so that the
  // Release instructions queued so far have returned their storage and the work before
  // them is done. On this VM's worker or scheduler thread (a lazy blob allocating at
  // launch) it cannot wait for work queued behind the caller: FailedPrecondition at once.
  // A whole-VM barrier rather than one per device: simpler, and only the rare
  // out-of-memory path pays for it.
  absl::Status ReclaimReleases();
  // True on one of this VM's worker threads or its scheduler thread.
  bool OnOwnThread() const;

  class ReleaseReclaimer;

  ep::Runtime* const runtime_;
  const VmOptions options_;
  // Registered with every device's allocator by Create, removed by Shutdown.
  std::unique_ptr<ReleaseReclaimer> reclaimer_;

  VmCounters counters_;
  ErrorSink errors_;
  std::unique_ptr<SyncChecker> checker_;
  std::unique_ptr<Recorder> recorder_;
  std::atomic<bool> cancel_{false};
  InstructionExecutor executor_;
  // Held by pointer so that this header needs no internal/ one (one more load per access).
  // Read by producers on every instruction and blob, written never: a line of their own,
  // away from the executor's (workers) and the engine's (scheduler, producers' CAS).
  alignas(64) const std::unique_ptr<internal::InstructionPool> pool_;
  // Eager blobs' memory; outlives the engine that frees them.
  const std::unique_ptr<internal::BlobPool> blob_pool_;
  alignas(64) Engine engine_;
  // Read by every NewBlob: on a line of its own, away from the scheduler's state at the
  // end of engine_ (sharing that line made each new blob a cache miss on the producer).
  alignas(64) std::shared_ptr<internal::BlobReaper> reaper_;

  mutable absl::Mutex streams_mu_;
  // By name ("cpu", "sim", "cuda", "cpu-c1", ...), in creation order.
  std::vector<std::unique_ptr<ThreadCtx>> thread_ctxs_ ABSL_GUARDED_BY(streams_mu_);
  std::vector<std::unique_ptr<StreamPolicy>> policies_ ABSL_GUARDED_BY(streams_mu_);
  std::vector<std::unique_ptr<Stream>> owned_streams_ ABSL_GUARDED_BY(streams_mu_);
  // Indexed by StreamId: lock-free lookup on the submit path. Written once under
  // streams_mu_ (release), read with acquire.
  std::unique_ptr<std::atomic<Stream*>[]> by_id_;

  static constexpr int64_t kMaxBuffered = 32;
  const int64_t max_buffered_;
  // Attached buffers. Lock order: buffers_mu_, then a buffer's mu.
  PlainMutex buffers_mu_;
  std::vector<internal::SubmitBuffer*> buffers_ ABSL_GUARDED_BY(buffers_mu_);
  std::atomic<int> attached_buffers_{0};  // buffers_.size(), readable without the lock

  bool fusion_ = false;  // set once by Create
  // Bumped by producers and by a scheduler handing over a producer's buffer: on a line of
  // its own, away from the buffers' lock and count above.
  alignas(64) std::atomic<uint64_t> next_seq_{1};
  // Producers only (NewBlob): apart from next_seq_, which a scheduler handing over a
  // producer's buffer also bumps.
  alignas(64) std::atomic<uint64_t> next_blob_id_{1};
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_VIRTUAL_MACHINE_H_
