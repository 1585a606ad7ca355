// ExecutionObserver: what the VM's machinery reports as it runs — blobs created, chains
// submitted, instructions received, dispatched edges and retirements in the engine, launches,
// steps and drops on the workers, host waits and barriers. The sync checker (vm/sync_checker.h)
// and the recorder (vm/recorder.h) implement it; anything else that wants to watch execution
// (a tracer of dependences, a test probe) can too, without a new hook at every call site.
//
// Where it fits: VmCore (vm/internal/vm_core.h) owns the checker and the recorder and hands
// the engine and the executor ONE observer pointer, fixed when the VM is created: null when
// nothing observes (each call site then costs one null check, as before observers existed),
// the checker or the recorder alone when only one is on, or an internal::ObserverList
// (vm/internal/observer_list.h) that calls the checker, then the recorder, when both are.
// Every method has a no-op default, so an observer overrides only the events it uses.
//
// What does not go through here: a kernel's own reports. A kernel that runs steps and orders
// them itself (StepSequence) reports its cross-sequence waits through
// KernelContext::NoteSequencePassed / NoteSequenceWaited, and a control-flow kernel its
// expansion through RunLoggingSteps (vm/recorder.h); those reach KernelContext::sync_checker()
// and KernelContext::recorder() directly. They are facts only that kernel knows, asked for
// only when the consumer is there (a kernel tests sync_checker() once per launch), and a
// kernel holds the concrete consumer anyway; they are not the core's events. Likewise the
// recorder's end of run (final checksums, closing the file) is its owner's call at shutdown,
// not an event.
//
// Thread rules: an observer is called concurrently from the threads named per method below
// (producers, the scheduler, workers, a device stream's thread), so an implementation is
// thread-safe. Calls are synchronous, on the thread that reached the event, before the VM
// goes on; an observer must not call back into the VM. Every reference and pointer argument
// is valid only for the duration of the call unless the method says otherwise.
#ifndef SLUICE_VM_EXECUTION_OBSERVER_H_
#define SLUICE_VM_EXECUTION_OBSERVER_H_

#include <cstdint>
#include <memory>

#include "absl/types/span.h"

namespace sluice::vm {

class Blob;
class Instruction;
class Stream;

// An interface: implementations are thread-safe (see above). Methods are listed by the
// thread that calls them.
class ExecutionObserver {
 public:
  virtual ~ExecutionObserver() = default;

  // --- Producers: any thread that creates blobs or submits chains; for a chain a producer
  // held back (SubmitBuffer), the thread that hands it over, which may be the scheduler. ---

  // `blob` (an eager or a lazy one, with its id, device, dtype and shape) was created with
  // `stream` as its first-use stream, before the producer gets it. Not for blobs that only
  // one owner holds (VirtualMachine::NewOwnedBlob without a recorder; run-private blobs).
  virtual void OnBlobCreated(const std::shared_ptr<Blob>& /*blob*/, const Stream& /*stream*/) {}
  // `instruction`, one of a chain (or a batch's part) being handed to the engine, got its
  // number (`seq`); called for each instruction of the chain in chain order, before
  // OnChainSubmitted. Nothing else touches the instruction yet: the observer may write its
  // own fields of it (Instruction::host_clock).
  virtual void OnSubmit(Instruction* /*instruction*/) {}
  // The chain starting at `head` (linked by `next`, numbered, counted) is about to be handed
  // to the engine; one producer's chains are reported in the order it submits them.
  virtual void OnChainSubmitted(const Instruction* /*head*/) {}
  // A host thread (a blocking blob read or write) waited for `instruction` to complete.
  virtual void OnHostWaited(const Instruction& /*instruction*/) {}

  // --- The scheduler (one thread at a time: the engine's thread or its current caller). ---

  // A Barrier was received: it certifies everything received before it.
  virtual void OnBarrierReceived(const Instruction& /*barrier*/) {}
  // An eager instruction (not precomputed, not a barrier) was received, before the engine
  // derives its edges from its blobs.
  virtual void OnEagerReceived(Instruction* /*instruction*/) {}
  // The edge `done` -> `successor` was satisfied by `done`'s completion (not at dispatch),
  // as `done` retires; before the successor can become ready.
  virtual void OnDoneEdge(const Instruction& /*done*/, Instruction* /*successor*/) {}
  // A non-barrier instruction retired (complete), after its done edges were reported.
  virtual void OnRetired(const Instruction& /*instruction*/) {}
  // Right after OnRetired, for an eager instruction: its blobs are about to forget it as
  // their writer or reader, so later users get no edge from it.
  virtual void OnEagerRetired(const Instruction& /*instruction*/) {}
  // `barrier` fired: everything received before it is complete. Before its callback runs.
  virtual void OnBarrierFired(const Instruction& /*barrier*/) {}

  // --- Workers (the ThreadCtx running the instruction's stream), in each stream's launch
  // order. ---

  // `instruction` is being launched on its stream (not when it is skipped for
  // cancellation). A Release with a ReleaseCount is one drop of a shared release.
  virtual void OnLaunch(Instruction* /*instruction*/) {}
  // The StepSequence that `outer` runs is launching `step` (an OpCall or a Release without
  // a ReleaseCount; its stream and number are set). Reported only for kernels that ask for
  // it (KernelContext::RunStep with `check`, which needs a sync checker).
  virtual void OnStepLaunch(Instruction* /*outer*/, const Instruction& /*step*/) {}
  // `step` (a Release with a ReleaseCount, run by `outer`) is about to drop its count.
  // Reported as OnStepLaunch is.
  virtual void OnSharedDrop(Instruction* /*outer*/, const Instruction& /*step*/) {}
  // That drop was the count's last for this run (its blob's storage goes now). Reported as
  // OnStepLaunch is, and, with `outer` == &`step`, for a shared release launched as an
  // instruction of its own (a replayed one) after OnLaunch.
  virtual void OnLastDrop(Instruction* /*outer*/, const Instruction& /*step*/) {}
  // A step of `outer` whose kernel runs steps of its own (control flow, a nested
  // StepSequence) returned; those steps were reported against the step. Reported as
  // OnStepLaunch is.
  virtual void OnNestedStepsDone(Instruction* /*outer*/) {}
  // `control` (an OpCall whose kernel runs steps of its own: vm/step_log.h) expanded to
  // `steps`, in launch order. The core reports only the empty expansion of such a call that
  // was skipped (a poisoned input, cancellation); a kernel that ran reports its own through
  // RunLoggingSteps.
  virtual void OnControlExpanded(const Instruction& /*control*/,
                                 absl::Span<const Instruction* const> /*steps*/) {}

  // --- The thread that runs an AccessBlob's host code (the worker for cpu, the device
  // stream's thread for sim), in its stream's order. ---

  // The host code of the AccessBlob write numbered `seq` succeeded and put `bytes` into
  // its blob.
  virtual void OnHostWrite(uint64_t /*seq*/, absl::Span<const uint8_t> /*bytes*/) {}
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_EXECUTION_OBSERVER_H_
