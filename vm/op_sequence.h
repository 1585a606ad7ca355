// OpSequence: consecutive OpCalls and Releases of one stream that a precomputed graph runs
// as a single instruction (OneFlow fuses instructions within a window; Sluice fuses a whole
// same-stream run chosen by the interpreter). The engine schedules the sequence once; the
// worker runs its steps in order, each with the same rules as a lone instruction: a step
// whose input is poisoned is skipped and poisons its outputs, a failing step is reported
// under its own op name, a lazy output is allocated when first written, a Release step
// frees storage. The per-op cost falls from one trip through the engine to one virtual call.
#ifndef SLUICE_VM_OP_SEQUENCE_H_
#define SLUICE_VM_OP_SEQUENCE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::vm {

// Built once by a producer (thread-compatible while building), then immutable and used by
// one worker at a time: the instruction running it is the only one, because a precomputed
// graph runs one step after another (the executor serializes runs of one graph).
class OpSequence final : public OpKernel {
 public:
  OpSequence() = default;
  ~OpSequence() override;
  OpSequence(const OpSequence&) = delete;
  OpSequence& operator=(const OpSequence&) = delete;

  // The blobs stay alive as long as the producer holds their BlobRefs (a precomputed graph
  // holds every blob it uses); the sequence keeps raw pointers.
  void AddOpCall(const OpKernel& kernel, BlobPtrs inputs, BlobPtrs outputs,
                 std::shared_ptr<const AttrMap> attrs);
  void AddRelease(Blob* blob);
  // Optional, set before first use. `cancel`: once true, OpCall steps not yet started are
  // skipped (their outputs keep their contents and are not poisoned, so a cancelled run
  // leaves persistent state as the last finished op left it); Release steps still run.
  // `ops_run`: incremented by the number of OpCall steps launched (relaxed; statistics).
  void set_cancel_flag(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  void set_ops_counter(std::atomic<int64_t>* ops_run) { ops_run_ = ops_run; }

  int size() const { return static_cast<int>(steps_.size()); }
  // The steps, in order (OpCall or Release instructions; for the recorder).
  const std::deque<Instruction>& steps() const { return steps_; }
  int op_calls() const { return op_calls_; }
  // Union of the steps' operands, for the enclosing instruction: reads of blobs the
  // sequence did not write first, and every blob it writes or releases.
  const BlobPtrs& external_inputs() const { return external_inputs_; }
  const BlobPtrs& all_outputs() const { return all_outputs_; }

  absl::string_view name() const override { return "op_sequence"; }
  // Runs every step through KernelContext::RunStep.
  absl::Status Launch(KernelContext& ctx) const override;
  bool handles_poison() const override { return true; }

 private:
  // Steps are Instructions the VM never pools: kind, kernel, operands and attrs are set
  // here; the worker fills stream and seq each run. A deque keeps them in large
  // contiguous chunks (stable addresses), so walking a sequence streams through memory.
  std::deque<Instruction> steps_;
  int op_calls_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t>* ops_run_ = nullptr;
  BlobPtrs external_inputs_;
  BlobPtrs all_outputs_;
  absl::flat_hash_set<const Blob*> external_set_;  // mirrors external_inputs_
  absl::flat_hash_set<const Blob*> written_set_;   // mirrors all_outputs_
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_OP_SEQUENCE_H_
