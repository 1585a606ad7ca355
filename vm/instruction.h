// Instruction: one unit of VM work — a policy (what to do: OpCall, StreamWait, RecordEvent,
// Release, Barrier, AccessBlob), the vm::Stream it runs on, its operands, and the engine's
// bookkeeping for its dependences. Instructions are pooled by the VirtualMachine and reused;
// producers (InstructionsBuilder, PrecomputedBatch) fill the first group of fields.
#ifndef SLUICE_VM_INSTRUCTION_H_
#define SLUICE_VM_INSTRUCTION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/prefetch.h"
#include "ep/event_pool.h"
#include "vm/attrs.h"
#include "vm/blob.h"

namespace sluice::vm {

class ReleaseCount;
class StepSequence;
class OpKernel;
class Stream;

// Deletes a fused run. Defined with StepSequence (step_sequence.cc), so that an
// Instruction, which owns one, need not see that class.
struct StepSequenceDeleter {
  void operator()(StepSequence* run) const;
};
using FusedRun = std::unique_ptr<StepSequence, StepSequenceDeleter>;

enum class InstructionKind : uint8_t {
  kOpCall,       // run `kernel` on `stream` with inputs, outputs, attrs
  kStreamWait,   // record an event on `stream`, make `wait_target` wait for it on the device
  kRecordEvent,  // record a pooled event on `stream`: a point the host can wait for
  kRelease,  // free (or, `keeps_storage`, keep for parking) outputs[0]'s storage, in `stream` order
  kBarrier,  // host callback once every instruction submitted before it is done
  kAccessBlob,  // host code on the bytes of inputs[0] (read) or outputs[0] (write)
};
// How many kinds there are (they are numbered from 0; kAccessBlob is the last).
inline constexpr int kInstructionKinds = static_cast<int>(InstructionKind::kAccessBlob) + 1;
absl::string_view InstructionKindName(InstructionKind kind);

// Where an instruction's work comes from, beyond its op name, for its error messages: a
// producer that lowers a program's nested blocks points the steps at one (e.g. "block 2
// op #1, iteration 7 of block 0 op #3 'while'"). Describe is called on the thread that
// formats the error, which is the thread running the instruction's work; an origin whose
// text changes (an iteration number) must change it in that work's order.
class InstructionOrigin {
 public:
  virtual ~InstructionOrigin() = default;
  virtual std::string Describe() const = 0;
};

// AccessBlob's host code: gets the blob's bytes; its error becomes the instruction's.
using BlobCallback = absl::AnyInvocable<absl::Status(void* data, size_t bytes)>;
// Barrier's host code.
using BarrierCallback = absl::AnyInvocable<void()>;

// Thread-safety follows the lifecycle: the producer owns an instruction until Submit; then
// the scheduler owns the engine fields and the ThreadCtx worker the execution fields; an
// instruction is recycled only after it retired.
//
// Cache-line aligned: the field groups below are laid out by line, and prefetches cover
// whole lines from the start. Unaligned (malloc's 16 bytes), a step's two producer-written
// lines would straddle three, and the third, never prefetched, would miss on every step.
class alignas(64) Instruction {
 public:
  Instruction();
  ~Instruction();
  Instruction(const Instruction&) = delete;
  Instruction& operator=(const Instruction&) = delete;

  // Fields are grouped hot first. The first two cache lines hold what the producer fills
  // for an op call or a release — also a fused run's step (StepSequence), which the worker
  // then only reads: a step's lines move from the producer's core to the worker's and
  // nothing on them is written back. Engine bookkeeping starts on the third line;
  // callbacks, events and checker clocks come last.

  // --- Filled by the producer; read-only after Submit. ---
  InstructionKind kind = InstructionKind::kOpCall;
  // Precomputed edges: `predecessors` lists earlier instructions of the same batch this one
  // depends on. False for eager instructions, whose edges the engine derives from operands.
  bool precomputed = false;
  // First and last instruction of a batch handed over in parts (VirtualMachine::
  // SubmitBatchPart): the engine recycles nothing between the two.
  bool opens_batch = false;
  bool closes_batch = false;
  // OpCall: its caller created `outputs` for it (InstructionsBuilder::CallPtrs'
  // fresh_outputs); a fused run made of it treats them as born there (StepSequence).
  bool fresh_outputs = false;
  // Release: keep the storage for parking instead of freeing it (the builder decided with
  // BlobLifecycle::Producer::ParksStorage when it submitted the Release).
  bool keeps_storage = false;
  // AccessBlob: the host code reads no bytes (a wait for the blob's producers): device
  // memory is not staged.
  bool access_wait_only = false;
  // Engine (scheduler thread only); here to fill the line's first word.
  enum class State : uint8_t { kFree, kSubmitted, kReceived, kDispatched, kRetired };
  State state = State::kFree;

  const OpKernel* kernel = nullptr;  // OpCall only
  // Operands. Reads in `inputs`, writes in `outputs` (a blob in both is read-modify-write).
  // StreamWait and RecordEvent list the blobs they order in `outputs`: they act as writes on
  // those blobs' dependence state, so that later users order after the sync.
  BlobPtrs inputs;
  // A fused run's step: the instruction that runs the run (its `seq` and `stream` name the
  // step); null otherwise.
  const Instruction* outer = nullptr;
  BlobPtrs outputs;
  std::shared_ptr<const AttrMap> attrs;
  // Submission order, unique per VM (assigned at Submit).
  uint64_t seq = 0;

  Stream* stream = nullptr;       // where it runs (Barrier: none)
  Stream* wait_target = nullptr;  // StreamWait only
  // Release step of a static sequence: one of several drops of a shared release; the
  // storage is freed by the drop that completes the count (vm/release_count.h).
  ReleaseCount* release_count = nullptr;

  // --- Engine (scheduler thread only). ---
  int32_t pending = 0;                          // unsatisfied incoming edges
  Instruction* next = nullptr;                  // link in IntrusiveQueue / Chain
  QueuedChainHeader<Instruction> queue_header;  // see IntrusiveQueue
  uint64_t received = 0;                        // receive order (Barrier: what "earlier" means)

  // --- Engine (continued). Successors whose edge from this instruction is satisfied once it
  // is dispatched (its ThreadCtx launches in order) or once it is done.
  absl::InlinedVector<Instruction*, 2> dispatch_successors;
  absl::InlinedVector<Instruction*, 2> done_successors;
  // Position in its stream's dispatch order (1, 2, ...; synchronous streams only).
  uint64_t stream_seq = 0;
  // Set at dispatch: the worker waits until each `stream` has run through `seq` before it
  // runs this instruction. A StreamWait from a synchronous stream to a synchronous stream
  // of another ThreadCtx releases its consumer at dispatch with such a wait attached: the
  // host-side counterpart of a device-side wait.
  struct HostWait {
    Stream* stream;
    uint64_t seq;
  };
  absl::InlinedVector<HostWait, 1> host_waits;

  // --- Execution (ThreadCtx worker, then the scheduler at retirement). ---
  absl::Status status;    // not OK when the instruction failed, was skipped or cancelled
  ep::PooledEvent event;  // RecordEvent: held until retirement

  // --- Producer, rarely used. ---
  absl::InlinedVector<Instruction*, 2> predecessors;  // see `precomputed`
  BlobCallback blob_callback;                         // AccessBlob
  BarrierCallback barrier_callback;                   // Barrier
  // Optional: runs on the scheduler when the instruction retires (its work complete; see
  // `status`). Must not block or submit. Used by blocking reads and writes of blobs.
  absl::AnyInvocable<void(const Instruction&)> on_retire;
  // A run of fused eager calls (see StepSequence): `kernel` points to it. Owned here while
  // the instruction is in flight; the pool takes it back when the instruction is recycled.
  FusedRun fused;
  // Optional, for errors (see InstructionOrigin); not owned. DebugString appends it.
  const InstructionOrigin* origin = nullptr;

  // --- Sync checker (when enabled). ---
  std::vector<uint32_t> host_clock;  // what the host knew done when it was launched
  std::vector<uint32_t> done_clock;  // what its completion certifies
  // Released by a predecessor on a synchronous stream of the same ThreadCtx at dispatch:
  // the worker runs that predecessor to completion before launching this one.
  bool joins_worker_clock = false;

  // The op name for OpCall, the kind name otherwise.
  absl::string_view name() const;
  // "op 'add' #12 on sim:0/compute", for errors and sync reports; with an origin,
  // "op 'add' #12 on sim:0/compute (block 1 op #0, iteration 3 of ...)".
  std::string DebugString() const;
  // True for instructions whose completion the engine observes (RecordEvent, StreamWait):
  // an edge from one to another stream's instruction waits for completion, not launch.
  bool IsCompletionMarker() const {
    return kind == InstructionKind::kRecordEvent || kind == InstructionKind::kStreamWait;
  }

  // Back to a freshly constructed state, keeping container capacity. Touches only what was
  // set, so that recycling an instruction stays within its hot cache lines.
  void Reset();
};

// How many cache lines an Instruction spans.
inline constexpr size_t kInstructionLines = (sizeof(Instruction) + 63) / 64;

// Starts moving the first `lines` cache lines of `instruction` to this core, for writing:
// the VM's threads hand instructions to each other, so their lines are usually in another
// core's cache when the next one touches them.
inline void PrefetchForWrite(const Instruction* instruction, size_t lines = kInstructionLines) {
  PrefetchRangeForWrite(instruction, 64 * lines);
}

}  // namespace sluice::vm

#endif  // SLUICE_VM_INSTRUCTION_H_
