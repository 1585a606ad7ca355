// VirtualMachine: the instruction VM over an ep::Runtime — the front door for everything
// above it. Users create blobs and streams, sync and shut down here; instructions come in
// through an InstructionsBuilder (eager, with soft sync) or a PrecomputedBatch
// (interpreter, with precomputed edges), which reach the machine through a ProducerPort
// (vm/producer_port.h), not through this class.
//
// A pImpl: the machine itself (streams, workers, engine, instruction and blob pools, error
// sink, sync checker, recorder) is internal::VmCore (vm/internal/vm_core.h), which no
// header above vm/ sees. The few accessors producers read per op stay inline: the front
// keeps copies of what they return, fixed when the VM is created.
#ifndef SLUICE_VM_VIRTUAL_MACHINE_H_
#define SLUICE_VM_VIRTUAL_MACHINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "core/stream_id.h"
#include "ep/runtime.h"
#include "vm/blob.h"
#include "vm/counters.h"
#include "vm/error_sink.h"
#include "vm/owned_blob.h"
#include "vm/stream.h"
#include "vm/vm_options.h"

namespace sluice::vm {

class ProducerPort;
class Recorder;
class SyncChecker;
class Tracer;
namespace internal {
class VmCore;
}  // namespace internal

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
  void SetTracer(Tracer* tracer);

  // Null unless options.check_sync.
  SyncChecker* sync_checker() const { return checker_; }
  // Null unless options.record_path is set.
  Recorder* recorder() const { return recorder_; }
  ep::Runtime* runtime() const { return runtime_; }
  const VmOptions& options() const { return *options_; }
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
  // True when host code may address the memory of `stream`'s device (AccessBlob, host reads
  // and writes of its blobs): cpu only. sim, like cuda, is not: its memory is reached
  // through stream-ordered copies, so a host read that would fail on a GPU fails on sim.
  static bool HostAccessible(const Stream& stream);
  // True when every stream of `streams` runs on host and has its own worker: the streams
  // StepSequence cross-sequence waits (StepSequence::AddWait) may join, one sequence each.
  bool CanRunLanes(absl::Span<Stream* const> streams) const;
  // True when an observer is attached (sync checker or recorder). Observers see inside an
  // StepSequence — each step's accesses and its cross-sequence waits — so its instruction
  // need not list the steps' operands for them.
  bool ObservesSteps() const { return checker_ != nullptr || recorder_ != nullptr; }

  // Whether producers fuse (see VmOptions::max_fused_steps).
  bool fusion() const { return fusion_; }
  ErrorSink& errors() { return *errors_; }

 private:
  friend class ProducerPort;  // the producers' side: see vm/producer_port.h

  explicit VirtualMachine(std::unique_ptr<internal::VmCore> core);

  const std::unique_ptr<internal::VmCore> core_;
  // Copies of the core's, fixed at Create: the inline accessors above read them.
  ep::Runtime* const runtime_;
  const VmOptions* const options_;
  SyncChecker* const checker_;
  Recorder* const recorder_;
  ErrorSink* const errors_;
  const bool fusion_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_VIRTUAL_MACHINE_H_
