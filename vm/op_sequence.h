// OpSequence: consecutive OpCalls and Releases of one stream that a precomputed graph runs
// as a single instruction. The engine schedules the sequence once; the
// worker runs its steps in order, each with the same rules as a lone instruction: a step
// whose input is poisoned is skipped and poisons its outputs, a failing step is reported
// under its own op name, a lazy output is allocated when first written, a Release step
// frees storage. The per-op cost falls from one trip through the engine to one virtual call.
//
// Cross-sequence waits. A precomputed graph over several cpu streams, each served by its
// own worker, can run as one sequence per stream: where a step needs another stream's
// work, a wait step holds the worker until the other sequence has passed the step that
// produced it in the same run (a progress counter tagged with the run number, so a value
// left from the previous run never satisfies it). The engine then sees one instruction per
// stream per run instead of one per fused segment and sync.
//
// Observers. With a sync checker attached (KernelContext::sync_checker), a sequence reports
// each step it launches, with its stream's clock, and each wait it passed as an ordering
// edge (the source announces its clock as it passes a step another sequence waits for), so
// the enclosing instruction need not list the steps' operands. Without one the only cost
// is a null test per step. The recorder writes the steps and their waits (wait_steps()).
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
#include "core/waker.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::vm {

// Built once by a producer (thread-compatible while building), then its program is
// immutable and it is used by one worker at a time: the instruction running it is the only
// one, because a precomputed graph runs one step after another (the executor serializes
// runs of one graph). That worker owns the per-run state (the steps' stream and number,
// the progress); other sequences' workers read its progress (atomics) while it runs.
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

  // The run number every sequence of one graph reads at Launch (relaxed: the producer
  // increments it before it submits a run, and submission orders that before the launch).
  // Needed by both sides of a wait; set before AddWait. A wait matches the run number
  // exactly, so it may wrap around.
  void set_run_counter(const std::atomic<uint32_t>* run) { run_ = run; }
  // Before the next step added here, wait until `source` has passed its first `steps`
  // steps in the current run. `source` (not this sequence) must run in the same run on
  // another worker, and the waits of all sequences must follow one order of the work (each
  // wait points to steps that come earlier in it) — otherwise two sequences can wait for
  // each other forever. Each sequence needs a worker of its own (a sequence queued behind
  // another on one worker can wait for work that waits for it). While waiting, the worker
  // spins briefly, then parks; if the VM cancels its work, a sequence that waited — or
  // would wait — skips its remaining steps (Releases included: their storage goes with
  // the blob), since the step it waited for may have been skipped.
  void AddWait(OpSequence* source, int steps);
  int waits() const { return static_cast<int>(waits_.size()); }

  // One AddWait, as the recorder writes it: before steps()[before_step] (== size(): after
  // the last step), `source` has passed its first `steps` steps.
  struct Wait {
    size_t before_step;
    const OpSequence* source;
    uint32_t steps;
  };
  // In before_step order.
  const std::vector<Wait>& wait_steps() const { return waits_; }

  int size() const { return static_cast<int>(steps_.size()); }
  // The steps, in order (OpCall or Release instructions; for the recorder).
  const std::deque<Instruction>& steps() const { return steps_; }
  int op_calls() const { return op_calls_; }
  // Union of the steps' operands, for the enclosing instruction: reads of blobs the
  // sequence did not write first, and every blob it writes or releases.
  const BlobPtrs& external_inputs() const { return external_inputs_; }
  const BlobPtrs& all_outputs() const { return all_outputs_; }

  absl::string_view name() const override { return "op_sequence"; }
  // Runs every step through KernelContext::RunStep, waiting where AddWait said; reports
  // steps and waits to the sync checker when the context has one.
  absl::Status Launch(KernelContext& ctx) const override;
  bool handles_poison() const override { return true; }
  bool checks_own_steps() const override { return true; }

 private:
  // Steps are Instructions the VM never pools: kind, kernel, operands and attrs are set
  // here (the program); the running worker fills stream and seq (per-run state, hence
  // mutable: Launch is const for the OpKernel interface). A deque keeps them in large
  // contiguous chunks (stable addresses), so walking a sequence streams through memory.
  mutable std::deque<Instruction> steps_;
  // Waits for `wait` in the run tagged `run_tag`. False when the VM cancelled its work
  // meanwhile (the source may never run).
  bool Await(const Wait& wait, uint64_t run_tag, KernelContext& ctx) const;

  std::vector<Wait> waits_;  // in before_step order
  // Per step: another sequence waits for it, so passing it is announced.
  std::vector<uint8_t> announce_;
  const std::atomic<uint32_t>* run_ = nullptr;
  // (run number << 32) | steps passed, announced after steps others wait for.
  mutable std::atomic<uint64_t> progress_{0};
  mutable Waker progress_waker_;
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
