// InstructionsBuilder: how eager code talks to the VM. Call() turns
// one op into instructions at once: soft sync for every operand whose last use was on
// another stream, then the OpCall, submitted together.
//
// Soft sync, per operand blob, against its storage's last_used_stream:
//  - the same stream: nothing (a stream runs in order);
//  - another stream of the same asynchronous device: StreamWait(last -> current), a
//    device-side wait, so the op can be dispatched without waiting on the host;
//  - otherwise (cpu involved, or another device): RecordEvent(last); the op waits on the host
//    for it (RecordEvent -> op is a completion edge in the engine).
// Blobs sharing a last stream share one sync instruction. Then every operand's last use
// becomes the current stream. No other sync is emitted: the counts are tested.
//
// Call's and Release's instructions may be held back briefly (while the scheduler is busy,
// up to VirtualMachine::max_buffered() of them) and handed to the engine together: order is
// kept, and nothing waits for this builder's next call (see VirtualMachine::SubmitBuffered).
// Eager fusion: a call whose operands were all last used on its stream (it needs no sync),
// or a release, joins the instruction held back just before it when that one is on the same
// stream — the two become a StepSequence run, one instruction for the engine (up to
// VmOptions::max_fused_steps steps). An eager loop of small ops then costs the scheduler one
// instruction per run instead of one per op and per freed tensor.
#ifndef SLUICE_VM_INSTRUCTIONS_BUILDER_H_
#define SLUICE_VM_INSTRUCTIONS_BUILDER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/intrusive_queue.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/blob_access_waiter.h"
#include "vm/instruction.h"
#include "vm/kernel.h"
#include "vm/producer_port.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"

namespace sluice::vm {

class VirtualMachine;

// Thread-compatible: one builder per producing thread; any number of builders per VM. A
// blob's last use is updated by the builder that uses it, so one blob must not be used by
// two builders at the same time; a producer that passes a blob on to another builder calls
// Flush() first (the engine orders a blob's users in the order it receives them, and the
// other builder's instructions could otherwise arrive before this one's held-back ones).
// Must not outlive its VM.
class InstructionsBuilder {
 public:
  explicit InstructionsBuilder(VirtualMachine* vm);
  ~InstructionsBuilder();
  InstructionsBuilder(const InstructionsBuilder&) = delete;
  InstructionsBuilder& operator=(const InstructionsBuilder&) = delete;

  // Soft sync, then OpCall(kernel) on `stream`. InvalidArgument for a null stream or blob, a
  // released blob. The kernel's own errors surface at the next sync point.
  absl::Status Call(const OpKernel& kernel, BlobSpan inputs, BlobSpan outputs,
                    std::shared_ptr<const AttrMap> attrs, Stream* stream);
  // The same over raw pointers (the caller holds the blobs): no reference counting.
  // `fresh_outputs`: the caller created `outputs` for this call (VirtualMachine::NewBlob)
  // and has given them to nobody else; a fused run that also releases one keeps it
  // private (see StepSequence, "Run-private blobs").
  absl::Status CallPtrs(const OpKernel& kernel, BlobPtrSpan inputs, BlobPtrSpan outputs,
                        std::shared_ptr<const AttrMap> attrs, Stream* stream,
                        bool fresh_outputs = false);
  absl::Status Call(const OpKernel& kernel, BlobSpan inputs, BlobSpan outputs, AttrMap attrs,
                    Stream* stream) {
    return Call(kernel, inputs, outputs,
                attrs.empty() ? nullptr : std::make_shared<const AttrMap>(std::move(attrs)),
                stream);
  }

  // Explicit syncs (soft sync emits these itself). StreamWait needs two streams of one
  // asynchronous device, or cpu streams of two workers (CanStreamWait; InvalidArgument
  // otherwise).
  absl::Status StreamWait(BlobSpan blobs, Stream* from, Stream* to);
  absl::Status RecordEvent(BlobSpan blobs, Stream* stream);

  // Frees the blob's storage in the order of its last stream, after its last use. Using the
  // blob afterwards is InvalidArgument.
  // `dying`: the caller drops its last hold on the blob right after (its OwnedBlob, or the
  // last BlobRef): a small unnamed eager blob then keeps its storage to be parked and
  // recycled when it dies (see docs/design.md, "Lifecycle of a blob"), instead of returning it to
  // the allocator. A caller that keeps the blob must pass false: its bytes would stay in use as
  // long as the blob.
  absl::Status Release(const BlobRef& blob, bool dying = false) {
    return Release(blob.get(), dying);
  }
  // The same for a blob the caller keeps alive by other means (an OwnedBlob).
  // `hold_taken` (only with `dying`, for a hold the VM's reaper would drop, as a
  // non-adopted OwnedBlob's): set to true when the Release took that hold over — the blob
  // became private to a fused run, which now holds it alone — and the caller must then let
  // go of it without dropping it (OwnedBlob::Abandon). Saves the caller an atomic update
  // on a line the scheduler writes.
  absl::Status Release(Blob* blob, bool dying = false, bool* hold_taken = nullptr);

  // Host code on the blob's bytes, run in the order of the blob's last stream (so it needs
  // no sync). `write` makes it a write. `on_retire` (optional) runs once it is complete.
  // A host (cpu) blob last used by a device stream — the output of a device-to-host copy —
  // is accessed on its cpu stream after a soft sync on that copy, which then becomes the
  // blob's last use. Device memory the host cannot address (sim, cuda) is staged: the
  // callback sees a host copy, made by a device-to-host copy in stream order (and, for a
  // write, copied back in stream order after it).
  absl::Status AccessBlob(const BlobRef& blob, bool write, BlobCallback callback,
                          absl::AnyInvocable<void(const Instruction&)> on_retire = nullptr);
  // An empty read: retires once every producer of the blob has (its error, if one failed,
  // in the instruction's status); no bytes move, on any device.
  absl::Status WaitBlob(const BlobRef& blob,
                        absl::AnyInvocable<void(const Instruction&)> on_retire);
  // Blocking helpers over AccessBlob: copy host bytes in (size must match) or out. A read of
  // a blob whose producer failed returns that error.
  absl::Status WriteBlob(const BlobRef& blob, absl::Span<const uint8_t> bytes);
  absl::StatusOr<std::vector<uint8_t>> ReadBlob(const BlobRef& blob);
  // Their two halves, for a caller that submits under a lock of its own and waits after
  // releasing it: submit the copy, then `waiter->Wait()` (only when this returned OK).
  // `bytes` (resized to the blob's size by SubmitRead) must stay alive until then.
  absl::Status SubmitWrite(const BlobRef& blob, absl::Span<const uint8_t> bytes,
                           BlobAccessWaiter* waiter);
  absl::Status SubmitRead(const BlobRef& blob, std::vector<uint8_t>* bytes,
                          BlobAccessWaiter* waiter);

  // Host callback once everything submitted before it is complete (see Barrier).
  absl::Status Barrier(BarrierCallback callback);

  // Hands over the instructions Call and Release held back (see above) now. Needed for
  // correctness only before another builder uses this one's blobs: the scheduler takes
  // them itself as soon as it runs out of work, and the other methods, Sync and barriers
  // hand them over first.
  void Flush();

  // Off: Call emits no sync instructions (`sluice stress --no-soft-sync` uses it to prove
  // the sync checker catches what soft sync prevents). On by default.
  void set_soft_sync(bool enabled) { soft_sync_ = enabled; }
  bool soft_sync() const { return soft_sync_; }
  // Off: every call and release stays an instruction of its own, even where the VM fuses
  // (VmOptions::max_fused_steps). On by default.
  void set_fusion(bool enabled) { fusion_ = enabled; }
  bool fusion() const { return fusion_; }
  // OpCalls issued from now on carry `origin` (null: none), which their errors name after
  // the op (see InstructionOrigin): a caller that issues many calls of one kernel tells
  // their errors apart (`sluice stress --fail-rate` names its program's op). `origin` must
  // outlive the calls' retirement (a Sync after them).
  void set_origin(const InstructionOrigin* origin) { origin_ = origin; }

  VirtualMachine* vm() const { return vm_; }

 private:
  absl::Status SubmitAccess(const BlobRef& blob, bool write, bool wait_only, BlobCallback callback,
                            absl::AnyInvocable<void(const Instruction&)> on_retire);
  absl::Status CheckUsable(const Blob* blob) const;
  // What CheckUsable accepts, without building a Status (the per-op path).
  // Inline, defined in the .cc (the lifecycle's release mark is internal).
  static bool Usable(const Blob* blob);
  absl::StatusOr<Stream*> LastStream(const Blob& blob);
  // Appends the sync instructions `stream` needs before using the operands.
  absl::Status SoftSync(BlobPtrSpan inputs, BlobPtrSpan outputs, Stream* stream,
                        Chain<Instruction>& chain);
  // Records `stream` as the operands' last user (after a successful submit).
  static void SetLastUse(BlobPtrSpan inputs, BlobPtrSpan outputs, Stream* stream);
  // True when every operand was last used on `stream` (a call then needs no sync).
  static bool LastUsedOn(BlobPtrSpan inputs, BlobPtrSpan outputs, const Stream& stream);
  Instruction* Allocate();

  VirtualMachine* const vm_;
  ProducerPort port_;
  // LastStream's most recent answer (streams live as long as the VM): the eager release
  // path asks for the same stream op after op.
  StreamId last_stream_id_;
  Stream* last_stream_ = nullptr;
  bool soft_sync_ = true;
  bool fusion_ = true;
  const InstructionOrigin* origin_ = nullptr;
  Chain<Instruction> cache_;
  // What Call submitted but the VM holds back while its scheduler is busy
  // (ProducerPort::SubmitBuffered: up to max_buffered() instructions).
  const std::unique_ptr<internal::SubmitBuffer> buffer_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_INSTRUCTIONS_BUILDER_H_
