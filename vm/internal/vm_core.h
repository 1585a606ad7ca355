// VmCore: the machine behind the VirtualMachine front door (vm/virtual_machine.h). It owns
// the vm::Streams, the ThreadCtx workers, the engine, the instruction pool, the blob pool,
// the error sink and, when enabled, the sync checker and the recorder, which it hands the
// engine and the executor as one ExecutionObserver (vm/execution_observer.h). The front forwards
// its users' calls here; ProducerPort (vm/producer_port.h) forwards the producers' calls
// (instruction chains, held-back buffers, batches). Nothing above vm/ sees this class.
//
// Layering inside vm/: this component includes the engine, the workers, the executor and
// the stream policies; it includes neither the front, nor the port, nor any producer
// (InstructionsBuilder, PrecomputedBatch, Replayer), which all sit above it.
//
// Thread-safe; each method documents its own rules where the front does not. The public
// methods that mirror the front's have the front's contracts (vm/virtual_machine.h).
#ifndef SLUICE_VM_INTERNAL_VM_CORE_H_
#define SLUICE_VM_INTERNAL_VM_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
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
#include "vm/error_sink.h"
#include "vm/execution_observer.h"
#include "vm/instruction.h"
#include "vm/internal/engine.h"
#include "vm/internal/instruction_executor.h"
#include "vm/internal/observer_list.h"
#include "vm/internal/stream_policy.h"
#include "vm/internal/thread_ctx.h"
#include "vm/owned_blob.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"
#include "vm/sync_checker.h"
#include "vm/vm_options.h"

namespace sluice::vm {

class Recorder;
class Tracer;

namespace internal {

class BlobPool;
class BlobReaper;
class InstructionPool;
struct SubmitBuffer;

class VmCore {
 public:
  // Options are validated by the front (VirtualMachine::Create); `recorder` is null
  // unless options.record_path is set. Starts the engine and registers the reclaimer.
  static std::unique_ptr<VmCore> Create(ep::Runtime* runtime, VmOptions options,
                                        std::unique_ptr<Recorder> recorder);
  ~VmCore();
  VmCore(const VmCore&) = delete;
  VmCore& operator=(const VmCore&) = delete;

  // --- The front's calls (see VirtualMachine for each contract). ---
  absl::StatusOr<Stream*> GetStream(const StreamKey& key);
  absl::StatusOr<Stream*> GetStream(StreamId id);
  absl::StatusOr<BlobRef> NewBlob(Stream* stream, DataType dtype, Shape shape, std::string name,
                                  Allocator* allocator);
  absl::StatusOr<OwnedBlob> NewOwnedBlob(Stream* stream, DataType dtype, const Shape& shape);
  absl::StatusOr<BlobRef> NewLazyBlob(Stream* stream, DataType dtype, Shape shape, std::string name,
                                      Allocator* allocator);
  // One blob's host write or read (the front checked sizes and storage).
  struct IdleCopy {
    Blob* blob;
    void* dst;
    const void* src;
    size_t bytes;
  };
  // Copies into idle blobs and clears their poison. With a recorder attached the copies are
  // AccessBlob writes between two barriers instead (so that the record carries the bytes and
  // a replay orders them after the work before and before the work after); otherwise a
  // memcpy (cpu) or a copy on the device's host-to-device stream, waited for here.
  absl::Status WriteIdle(absl::Span<const IdleCopy> writes);
  absl::Status ReadIdle(absl::Span<const IdleCopy> reads);
  absl::Status Sync(std::vector<absl::Status>* all);
  absl::Status Shutdown(ShutdownMode mode);
  absl::Status FreeParkedBlobs();
  VmStats stats();
  void SetTracer(Tracer* tracer) { executor_.set_tracer(tracer); }
  std::vector<Stream*> streams() const;

  SyncChecker* sync_checker() const { return checker_.get(); }
  Recorder* recorder() const { return recorder_.get(); }
  ep::Runtime* runtime() const { return runtime_; }
  const VmOptions& options() const { return options_; }
  bool fusion() const { return fusion_; }
  ErrorSink& errors() { return errors_; }

  // --- The producers' calls (see ProducerPort for each contract). ---
  InstructionPool& pool() const { return *pool_; }
  absl::Status Submit(Chain<Instruction> chain) {
    return SubmitInternal(std::move(chain), /*after_close=*/false);
  }
  absl::Status ReserveBatch(int64_t n) {
    HandOverBuffers();  // what this thread holds back was submitted before the batch
    return Reserve(n, /*after_close=*/false);
  }
  void SubmitBatchPart(Chain<Instruction> part, bool first, bool last);
  void AttachBuffer(SubmitBuffer* buffer);
  void DetachBuffer(SubmitBuffer* buffer);
  absl::Status SubmitBuffered(SubmitBuffer* buffer, Chain<Instruction> chain, bool open);
  bool AppendToOpenRun(SubmitBuffer* buffer, const Stream* stream,
                       absl::FunctionRef<void(StepSequence& run, Instruction* head)> add);
  void HandOverBuffers();
  int64_t held_back();
  int64_t max_buffered() const { return max_buffered_; }
  void NoteHostWaited(const Instruction& instruction);

 private:
  VmCore(ep::Runtime* runtime, VmOptions options, std::unique_ptr<Recorder> recorder);

  // One idle blob's bytes to or from host memory: memcpy for cpu blobs; otherwise a copy on
  // the device's copy stream that this thread waits for through an event (never a host
  // access of device memory); the copy's error, or an earlier one of that stream, is
  // returned. Any thread.
  absl::Status CopyIdle(const Blob& blob, void* dst, const void* src, size_t bytes, bool to_device);
  // WriteIdle with a recorder attached.
  absl::Status WriteIdleRecorded(absl::Span<const IdleCopy> writes);
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
  void HandOver(SubmitBuffer* buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(buffers_mu_);
  // Takes the buffer's chain and publishes it, before the buffer's lock is released.
  // Requires buffer->mu (not annotated: SubmitBuffer is incomplete here, and clang reads the
  // annotation's expression).
  void TakeAndPublish(SubmitBuffer* buffer);
  // The buffer's tail stops taking calls; a fused run there closes (StepSequence::Close).
  // Requires buffer->mu.
  void CloseOpenRun(SubmitBuffer* buffer);
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
  const std::unique_ptr<SyncChecker> checker_;
  const std::unique_ptr<Recorder> recorder_;
  // Both on: the fan-out that observer_ points to (the checker first, then the recorder).
  const std::unique_ptr<ObserverList> observer_list_;
  // What the engine, the executor and this class report events to: null when nothing
  // observes, else the checker, the recorder or observer_list_. Fixed at construction.
  ExecutionObserver* const observer_;
  std::atomic<bool> cancel_{false};
  InstructionExecutor executor_;
  // Read by producers on every instruction and blob, written never: a line of their own,
  // away from the executor's (workers) and the engine's (scheduler, producers' CAS).
  alignas(64) const std::unique_ptr<InstructionPool> pool_;
  // Eager blobs' memory; outlives the engine that frees them.
  const std::unique_ptr<BlobPool> blob_pool_;
  alignas(64) Engine engine_;
  // Read by every NewBlob: on a line of its own, away from the scheduler's state at the
  // end of engine_ (sharing that line made each new blob a cache miss on the producer).
  alignas(64) std::shared_ptr<BlobReaper> reaper_;

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
  std::vector<SubmitBuffer*> buffers_ ABSL_GUARDED_BY(buffers_mu_);
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

}  // namespace internal
}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_VM_CORE_H_
