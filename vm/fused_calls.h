// FusedCalls: a run of consecutive OpCalls and Releases that one InstructionsBuilder issued on
// one stream, handed to the engine as a single instruction (OneFlow fuses instructions
// within a window; see docs/design.md "Eager fusion"). An eager program issuing small ops
// back to back otherwise pays a trip through the scheduler per op and per freed tensor.
//
// While the run is held back by its producer (internal::SubmitBuffer) the producer appends
// steps; once handed over it is immutable. The enclosing instruction's operands are the
// union of the steps' — reads of blobs no earlier step of the run wrote, and every blob a
// step writes or releases — so the engine orders the run against other work exactly as it
// would order its steps, which share a stream and so need no order among themselves beyond
// their own. The worker runs the steps in order with a lone instruction's rules (poison,
// errors under the step's op name, Release frees storage), like OpSequence.
#ifndef SLUICE_VM_FUSED_CALLS_H_
#define SLUICE_VM_FUSED_CALLS_H_

#include <cstdint>
#include <deque>
#include <memory>

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
  // unique per run (it tags the blobs the run has seen; see Blob::fuse_mark_).
  void Begin(Instruction* head, uint64_t mark);
  // Producer: append an OpCall, or a Release of `blob`, to the run Begin made of `head`.
  void AddCall(Instruction* head, const OpKernel& kernel, BlobPtrSpan inputs, BlobPtrSpan outputs,
               std::shared_ptr<const AttrMap> attrs);
  void AddRelease(Instruction* head, Blob* blob);

  int size() const { return static_cast<int>(size_); }
  int op_calls() const { return op_calls_; }
  int releases() const { return static_cast<int>(size_) - op_calls_; }
  // Step `i` (0 <= i < size()): an OpCall or Release instruction, for the recorder.
  const Instruction& step(int i) const { return steps_[static_cast<size_t>(i)]; }

  absl::string_view name() const override { return "fused_calls"; }
  // Runs every step through KernelContext::RunStep.
  absl::Status Launch(KernelContext& ctx) const override;
  bool handles_poison() const override { return true; }

 private:
  // The next step, reset (steps are reused from run to run).
  Instruction& NewStep();
  // Adds a step's operands to the union operands in `head`.
  void NoteOperands(Instruction* head, const Instruction& step);

  // A deque keeps steps in place as it grows (workers and host work hold pointers to them
  // once the run is handed over); only the first size_ are this run's.
  std::deque<Instruction> steps_;
  size_t size_ = 0;
  int op_calls_ = 0;
  uint64_t mark_ = 0;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_FUSED_CALLS_H_
