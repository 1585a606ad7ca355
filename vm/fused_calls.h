// FusedCalls: a run of consecutive OpCalls and Releases that one InstructionsBuilder issued on
// one stream, handed to the engine as a single instruction (see docs/design.md "Eager
// fusion"). An eager program issuing small ops
// back to back otherwise pays a trip through the scheduler per op and per freed tensor.
//
// While the run is held back by its producer (internal::SubmitBuffer) the producer appends
// steps; once handed over it is immutable. The enclosing instruction's operands are the
// union of the steps' — reads of blobs no earlier step of the run wrote, and every blob a
// step writes or releases — so the engine orders the run against other work exactly as it
// would order its steps, which share a stream and so need no order among themselves beyond
// their own. The worker runs the steps in order with a lone instruction's rules (poison,
// errors under the step's op name, Release frees storage), like OpSequence.
//
// Run-private blobs. A step's outputs that its caller created for it a moment earlier
// (`fresh_outputs`: no instruction has named them yet) are *born* in the run. A born blob
// that a later step of the same run releases never needs the engine: every access to it is
// a step of this run, in order on one stream. It stays out of the union operands (no
// dependence state, no graveyard visit on the scheduler) and the run owns one of its two
// holds: the scheduler drops the run's hold when it recycles the run, the BlobRef deleter
// the other (internal::BlobReaper); whichever is last deletes the blob. Born blobs still
// alive when the run stops taking steps (Close) join its union outputs like any write.
// The Release of a run-private blob that keeps its storage for parking
// (internal::BlobLifecycle::Producer::ParksStorage) has no step: it would free nothing, only mark
// the storage kept, which the scheduler does when the run retires (MarkKept) — a step fewer to
// write for the producer and to run for the worker per eager temporary.
#ifndef SLUICE_VM_FUSED_CALLS_H_
#define SLUICE_VM_FUSED_CALLS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::vm {

// Thread-compatible while its producer builds it, then immutable until the instruction that
// runs it retired; recycled through internal::InstructionPool.
class FusedCalls final : public OpKernel {
 public:
  FusedCalls() = default;
  FusedCalls(const FusedCalls&) = delete;
  FusedCalls& operator=(const FusedCalls&) = delete;

  // Producer. Turns `head` — a filled OpCall or Release of this producer, not yet handed
  // over, whose `fused` already owns this object — into a run whose first step is that
  // work: `head` becomes an OpCall of this kernel over the union operands. `mark` must be
  // unique per run (it tags the blobs the run has seen: the fusion marks of
  // internal::BlobLifecycle::Producer).
  void Begin(Instruction* head, uint64_t mark);
  // Producer: append an OpCall, or a Release of `blob`, to the run Begin made of `head`.
  // `fresh_outputs`: the caller created `outputs` for this call and nobody else has used
  // them (see "Run-private blobs" above).
  void AddCall(Instruction* head, const OpKernel& kernel, BlobPtrSpan inputs, BlobPtrSpan outputs,
               std::shared_ptr<const AttrMap> attrs, bool fresh_outputs = false);
  // `take_hold`: the releaser gives its hold on `blob` up if the blob becomes run-private
  // (then the run's hold is the only one); returns whether it did.
  bool AddRelease(Instruction* head, Blob* blob, bool take_hold = false);
  // Producer (or whoever hands the run over, under the producer's buffer lock): the run
  // takes no more steps; born blobs not released in it join `head`'s union outputs. Must
  // run before the run is handed over or anything is queued behind it. Idempotent.
  void Close(Instruction* head);
  // Scheduler, once the run's instruction retired: drops the run's hold on each
  // run-private blob and calls `last` with those it was the last holder of (the caller
  // deletes them). Leaves the run without private blobs.
  void DropPrivateHolds(absl::FunctionRef<void(Blob*)> last);
  // Run-private blobs of this run (for tests).
  int private_blobs() const { return static_cast<int>(private_.size()); }

  // Scheduler, as the run's instruction retires (before anyone can learn that it did):
  // what the Releases of its run-private blobs that kept their storage would have done
  // (see "Run-private blobs": such a Release has no step).
  void MarkKept();

  // Calls and releases fused, stepless releases included.
  int size() const { return static_cast<int>(size_) + stepless_releases_; }
  int op_calls() const { return op_calls_; }
  int releases() const { return size() - op_calls_; }
  // Steps the worker runs: size() without the stepless releases.
  int steps() const { return static_cast<int>(size_); }
  // Step `i` (0 <= i < steps()): an OpCall or Release instruction, for tests.
  const Instruction& step(int i) const { return steps_[static_cast<size_t>(i)]; }

  absl::string_view name() const override { return "fused_calls"; }
  // Runs every step through KernelContext::RunStep.
  absl::Status Launch(KernelContext& ctx) const override;
  bool handles_poison() const override { return true; }

 private:
  // The next step, reset (steps are reused from run to run) and pointed at `head` and its
  // stream.
  Instruction& NewStep(const Instruction* head);
  // Worker, ahead of a step: start moving its lines (the producer's) to this core; then
  // its operands' lines (which needs the step's).
  static void PrefetchStep(const Instruction& step);
  static void PrefetchOperands(const Instruction& step);
  // Adds a step's operands to the union operands in `head`; fresh outputs are born here.
  void NoteOperands(Instruction* head, const Instruction& step, bool fresh_outputs);

  // A deque keeps steps in place as it grows (workers and host work hold pointers to them
  // once the run is handed over); only the first size_ are this run's. Mutable: Launch
  // (const, as every kernel's) runs each step as a lone instruction, which writes the
  // step's execution fields; only the one worker running the run's instruction does.
  mutable std::deque<Instruction> steps_;
  size_t size_ = 0;
  int op_calls_ = 0;
  int stepless_releases_ = 0;
  uint64_t mark_ = 0;
  std::vector<Blob*> born_;     // born in this run, in birth order (cleared by Close)
  std::vector<Blob*> private_;  // born and released in it: the run holds them
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_FUSED_CALLS_H_
