// StepSequence: the one instruction that owns and runs a sequence of steps — OpCalls and
// Releases of one stream, run by one worker as a single instruction. The engine schedules
// the sequence once; the worker runs its steps in order, each with a lone instruction's
// rules (a step whose input is poisoned is skipped and poisons its outputs, a failing step
// is reported under its own op name, a lazy output is allocated when first written, a
// Release step frees or keeps its storage). The per-op cost falls from one trip through
// the engine to one virtual call. Two producers build them:
//
//  - Eager fusion (ProducerPort::AppendToOpenRun): a run of consecutive calls and releases
//    that one InstructionsBuilder issued on one stream. Begin turns the producer's first
//    held-back instruction (the run's *head*) into the sequence's instruction; later calls
//    append steps while the producer holds the run back; Close ends it before hand-over.
//    The run is recycled (through internal::InstructionPool) once its instruction retired.
//  - Static lowering (a precomputed graph, the replayer): built once with AddCall,
//    AddRelease and AddWait, then Close, then run once per run of the graph.
//
// Union operands. The enclosing instruction's operands are the union of the steps': reads
// of blobs no earlier step wrote, and every blob a step writes or releases. The engine then
// orders the sequence against other work exactly as it would order its steps, which share a
// stream and so need no order among themselves. One computation (NoteOperands, over the
// blobs' fusion marks, BlobLifecycle::Producer) serves both producers: an eager run notes
// each step as it is added, into its head's operands (it needs the roles at once: see
// run-private blobs); a static sequence notes them all at Close, into union_inputs() and
// union_outputs(). Each note pass has a mark of its own (NewMark), so the producer that
// builds a sequence must be the only one naming its blobs while it does.
//
// Run-private blobs (eager). A step's outputs that its caller created for it a moment
// earlier (`fresh_outputs`: no instruction has named them yet) are *born* in the run. A
// born blob that a later step of the same run releases never needs the engine: every
// access to it is a step of this run, in order on one stream. It stays out of the union
// operands and the run owns one of its two holds: the scheduler drops the run's hold when
// it recycles the run, the BlobRef deleter the other (internal::BlobReaper); whichever is
// last deletes the blob. Born blobs still alive at Close join the union outputs. The
// Release of a run-private blob that keeps its storage for parking
// (BlobLifecycle::Producer::ParksStorage) has no step: the scheduler marks the storage kept
// when the run retires (MarkKept).
//
// Cross-sequence waits (static). A precomputed graph over several cpu streams, each served
// by its own worker, can run as one sequence per stream (a *lane*): where a step needs
// another lane's work, a wait holds the worker until the other sequence has passed the step
// that produced it in the same run (a progress counter tagged with the run number, so a
// value left from the previous run never satisfies it).
//
// Observers. The sequence reports each step it launches to the sync checker
// (KernelContext::sync_checker), with its stream's clock, and each wait it passed as an
// ordering edge, so the checker checks the steps rather than the enclosing instruction.
// Without a checker the cost is a null test per step. The recorder writes a static
// sequence as its steps and waits (step(), wait_steps()).
#ifndef SLUICE_VM_STEP_SEQUENCE_H_
#define SLUICE_VM_STEP_SEQUENCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/waker.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"
#include "vm/release_count.h"

namespace sluice::vm {

// Thread-compatible while its producer builds it. Then its steps are immutable while an
// instruction runs it, and one worker at a time runs it: an eager run has one instruction;
// a static sequence runs once per run of its graph, and runs of one graph follow one
// another (the executor serializes them). That worker owns the per-run state (the steps'
// stream and number, the progress); other sequences' workers read the progress (atomics).
class StepSequence final : public OpKernel {
 public:
  StepSequence() = default;
  ~StepSequence() override;
  StepSequence(const StepSequence&) = delete;
  StepSequence& operator=(const StepSequence&) = delete;

  // A mark no note pass used before (process-wide, relaxed).
  static uint64_t NewMark();

  // ---- Eager fusion (the producer, under its buffer lock) ----
  // Turns `head` — a filled OpCall or Release of this producer, not yet handed over, whose
  // `fused` already owns this object — into a run whose first step is that work: `head`
  // becomes an OpCall of this kernel over the union operands. Clears what an earlier run
  // left (steps keep their memory).
  void Begin(Instruction* head);

  // ---- Both producers ----
  // Appends an OpCall. The blobs must stay alive while the sequence may run (a precomputed
  // graph holds every blob it uses; an eager run's operands are held by the engine).
  // `fresh_outputs` (eager): the caller created `outputs` for this call and nobody else has
  // used them (see "Run-private blobs").
  void AddCall(const OpKernel& kernel, BlobPtrSpan inputs, BlobPtrSpan outputs,
               std::shared_ptr<const AttrMap> attrs, bool fresh_outputs = false);
  // Appends a Release of `blob`. `take_hold` (eager): the releaser gives its hold on `blob`
  // up if the blob becomes run-private (then the run's hold is the only one); returns
  // whether it did.
  bool AddRelease(Blob* blob, bool take_hold = false);
  // Static: appends a Release of `blob` that drops one count of `count` (shared by the
  // Release steps of other sequences, each after its stream's last touch of `blob`); the
  // drop that completes a run's count frees the storage. `count` must outlive the sequence.
  void AddSharedRelease(Blob* blob, ReleaseCount* count);
  // The sequence takes no more steps. Eager: born blobs not released in the run join the
  // head's union outputs; must run before the run is handed over or anything is queued
  // behind it. Static: computes union_inputs() and union_outputs(). Idempotent.
  void Close();

  // ---- Static only, set before first use ----
  // Points step `i` (0 <= i < steps()) at `origin` for its error messages (see
  // InstructionOrigin); `origin` must outlive the sequence.
  void set_step_origin(int i, const InstructionOrigin* origin) {
    steps_[static_cast<size_t>(i)].origin = origin;
  }
  // `cancel`: once true, OpCall steps not yet started are skipped (their outputs keep their
  // contents and are not poisoned, so a cancelled run leaves persistent state as the last
  // finished op left it); Release steps still run. `ops_run`: incremented by the number of
  // OpCall steps launched (relaxed; statistics).
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
  void AddWait(StepSequence* source, int steps);

  // Static, before Close: the sequence announces each run that it passed its first
  // `steps` steps (0 < steps <= steps()), for a kernel of another sequence that watches it
  // with Passed (a control-flow helper learning that the step it serves was skipped). Also
  // requires set_run_counter.
  void AnnounceAt(int steps);
  // Any thread: true once this sequence has passed its first `steps` steps in the run
  // tagged `run_tag` (run number << 32), `steps` being an AnnounceAt or AddWait point.
  // seq_cst (the Waker protocol, should the caller park on something this announcement
  // does not notify, it polls).
  bool Passed(uint64_t run_tag, uint32_t steps) const {
    const uint64_t progress = progress_.load(std::memory_order_seq_cst);
    return (progress & ~uint64_t{0xFFFFFFFF}) == run_tag &&
           static_cast<uint32_t>(progress) >= steps;
  }

  // One AddWait, as the recorder writes it: before step(before_step) (== steps(): after
  // the last step), `source` has passed its first `steps` steps.
  struct Wait {
    size_t before_step;
    const StepSequence* source;
    uint32_t steps;
  };
  // In before_step order.
  const std::vector<Wait>& wait_steps() const { return waits_; }
  int waits() const { return static_cast<int>(waits_.size()); }

  // ---- The scheduler, for an eager run ----
  // As the run's instruction retires (before anyone can learn that it did): what the
  // Releases of its run-private blobs that kept their storage would have done.
  void MarkKept();
  // Once the run's instruction retired: drops the run's hold on each run-private blob and
  // calls `last` with those it was the last holder of (the caller deletes them). Leaves
  // the run without private blobs.
  void DropPrivateHolds(absl::FunctionRef<void(Blob*)> last);

  // ---- Inspection ----
  // Calls and releases, stepless releases included.
  int size() const { return static_cast<int>(size_) + stepless_releases_; }
  int op_calls() const { return op_calls_; }
  int releases() const { return size() - op_calls_; }
  // Steps the worker runs: size() without the stepless releases.
  int steps() const { return static_cast<int>(size_); }
  // Step `i` (0 <= i < steps()): an OpCall or Release instruction.
  const Instruction& step(int i) const { return steps_[static_cast<size_t>(i)]; }
  // Run-private blobs of this run (eager).
  int private_blobs() const { return static_cast<int>(private_.size()); }
  // Static, after Close: the union operands, for the enclosing instruction.
  const BlobPtrs& union_inputs() const;
  const BlobPtrs& union_outputs() const;

  absl::string_view name() const override { return "step_sequence"; }
  // Runs every step through KernelContext::RunStep, waiting where AddWait said; reports
  // steps and waits to the sync checker when the context has one.
  absl::Status Launch(KernelContext& ctx) const override;
  // Launch of a sequence with no waits and no announcements (a StepGraph's task), counting
  // nothing: returns the OpCall steps it launched, for the caller to add to the ops counter
  // once (the counter's line is shared by every worker running the graph).
  int64_t RunUncounted(KernelContext& ctx) const;
  bool handles_poison() const override { return true; }
  bool checks_own_steps() const override { return true; }

 private:
  // The next step, reset (an eager run's steps are reused from run to run) and, in an
  // eager run, pointed at the head and its stream.
  Instruction& NewStep();
  // Adds a step's operands to the union operands (the head's, or own_inputs_ and
  // own_outputs_); fresh outputs are born here.
  void NoteOperands(const Instruction& step, bool fresh_outputs);
  // Runs steps [begin, end) (no wait or announcement falls inside); returns the OpCalls
  // launched.
  int64_t RunSteps(size_t begin, size_t end, KernelContext& ctx, bool check) const;
  // Waits for `wait` in the run tagged `run_tag`. False when the VM cancelled its work
  // meanwhile (the source may never run).
  bool Await(const Wait& wait, uint64_t run_tag, KernelContext& ctx) const;
  // After `passed` steps of the run tagged `run_tag`: tell the waiting sequences.
  void Announce(uint32_t passed, uint64_t run_tag, KernelContext& ctx, bool check) const;

  // Steps: a deque keeps them in place as it grows (workers and host work hold pointers to
  // them once the sequence is handed over); only the first size_ are this run's. Mutable:
  // Launch (const, as every kernel's) runs each step as a lone instruction, which writes
  // the step's execution fields; only the one worker running the sequence does.
  mutable std::deque<Instruction> steps_;
  size_t size_ = 0;
  int op_calls_ = 0;
  int stepless_releases_ = 0;
  bool closed_ = false;

  // An eager run's head, whose operands are the union operands; null for a static
  // sequence, whose union operands are its own.
  Instruction* head_ = nullptr;
  BlobPtrs own_inputs_;
  BlobPtrs own_outputs_;
  uint64_t mark_ = 0;
  std::vector<Blob*> born_;     // born in this run, in birth order (cleared by Close)
  std::vector<Blob*> private_;  // born and released in it: the run holds them

  std::vector<Wait> waits_;              // in before_step order
  std::vector<uint32_t> announcements_;  // step counts another sequence waits for, ascending
  const std::atomic<uint32_t>* run_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  std::atomic<int64_t>* ops_run_ = nullptr;
  // (run number << 32) | steps passed, announced after steps others wait for.
  mutable std::atomic<uint64_t> progress_{0};
  mutable Waker progress_waker_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_STEP_SEQUENCE_H_
