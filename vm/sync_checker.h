// SyncChecker: proves that every tensor access the VM launches is ordered after the
// accesses it conflicts with (read after write, write after read, write after write), using
// the happens-before order that really exists between streams — not the order things
// happened to run in. Happens-before is tracked with a vector clock per stream:
//  - stream order: each launch on stream S ticks S's own component;
//  - device waits: a StreamWait joins the source stream's clock into the target's;
//  - host syncs: an instruction released because the host saw another complete (a
//    RecordEvent or StreamWait point, or work on a synchronous cpu stream) carries that
//    instruction's clock into its own stream; a Barrier (VirtualMachine::Sync) or a blocking
//    read makes everything it waited for known to later submissions. A Barrier certifies
//    exactly the instructions received before it: their completion clocks are gathered as
//    they retire (work received after the barrier may already be running when it fires);
//  - worker order: cpu streams are synchronous, so when the engine releases an edge from
//    cpu work at dispatch (only to work of the same ThreadCtx), the successor (launched
//    later by the same worker) is ordered after that work's completion; the checker joins
//    the worker's clock;
//  - host waits: a StreamWait between cpu streams of two ThreadCtxs makes the consumer's
//    worker wait until the source stream ran it; the consumer joins the source's clock as
//    of the StreamWait when it launches;
//  - sequence waits: a StepSequence reports each step as it launches it (a tick of its
//    stream, the step's accesses) and, when it passes a step another sequence waits for,
//    its clock at that step; the waiting sequence joins that clock once its wait passed
//    (StepSequence::AddWait is an ordering edge honoured on the host, like a host wait). A
//    StepSequence's own instruction checks no operands: its steps do;
//  - shared releases: each drop of a ReleaseCount hands its stream's clock to the count
//    before it drops, and the last drop joins them all before its release is checked as a
//    write (the count's acq_rel order, like a wait for every dropper).
// Accesses are checked when launched: a stream runs its work in launch order, so the clock
// at launch is the clock at execution. The checker works the same on every provider.
//
// It also checks aliases: an op call (or a step) whose kernel declares an in-place contract
// (vm::InPlaceContract, from its op's schema) and lists one blob as an input and as an
// output of a pair the contract does not declare is reported as a violation naming the op
// and both operands. Such a kernel would overwrite what its other threads still read on a
// real device (docs/design.md, "Aliasing"). Kernels without a contract are not checked.
#ifndef SLUICE_VM_SYNC_CHECKER_H_
#define SLUICE_VM_SYNC_CHECKER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "vm/execution_observer.h"

namespace sluice::vm {

class Instruction;
class Stream;

// One unordered pair of accesses.
struct SyncViolation {
  std::string blob;    // "blob #3 'w'"
  std::string first;   // the earlier access: "op 'add' #12 on sim:0/compute (write)"
  std::string second;  // the later, unordered access
  // An undeclared alias instead: `second` is the op, `first` names the input operand and
  // `output` the output operand that are both `blob`.
  bool alias = false;
  std::string output;
  std::string ToString() const;
};

// Thread-safe: hooks are called from producers, the scheduler and workers.
//
// The VM reaches it as its ExecutionObserver (the events below, each on the thread that
// interface names); a StepSequence reaches it directly through KernelContext for its
// cross-sequence waits (OnSequencePassed, OnSequenceWaited), which are the kernel's reports,
// not the VM's.
class SyncChecker final : public ExecutionObserver {
 public:
  static constexpr int kMaxKeptViolations = 64;

  SyncChecker() = default;
  SyncChecker(const SyncChecker&) = delete;
  SyncChecker& operator=(const SyncChecker&) = delete;

  // --- ExecutionObserver. ---
  // Producer, at Submit: the instruction starts from what the host already knows is done.
  void OnSubmit(Instruction* instruction) override;
  // Worker, as it launches `instruction` on its stream (in each stream's launch order).
  void OnLaunch(Instruction* instruction) override;
  // Worker, as the StepSequence that `outer` runs launches `step` (an OpCall or Release whose
  // stream and number are set): ticks the stream, checks the step's accesses, and makes
  // `outer`'s completion certify the step.
  void OnStepLaunch(Instruction* outer, const Instruction& step) override;
  // Worker, after a step of `outer` whose kernel runs steps of its own (a control-flow
  // kernel, a nested StepSequence) returned: those steps were reported against the step,
  // so `outer`'s completion now certifies everything its stream launched so far.
  void OnNestedStepsDone(Instruction* outer) override;
  // Worker, before `step` (a Release with a ReleaseCount, run by `outer`) drops its count:
  // ticks the stream and adds its clock to what the count has gathered this run. No access
  // is checked: the drop frees nothing unless it is the last.
  void OnSharedDrop(Instruction* outer, const Instruction& step) override;
  // Worker, when that drop was the run's last: the stream joins every drop's clock, the
  // release is checked as a write of its blob, and the gathered clock is cleared.
  void OnLastDrop(Instruction* outer, const Instruction& step) override;
  // Scheduler: the edge `done` -> `successor` was satisfied by `done`'s completion.
  void OnDoneEdge(const Instruction& done, Instruction* successor) override;
  // Scheduler: an eager instruction is received.
  void OnEagerReceived(Instruction* instruction) override;
  // Scheduler: a non-barrier instruction retired (complete): its completion clock goes to
  // the first barrier received after it.
  void OnRetired(const Instruction& instruction) override;
  // Scheduler: an eager `instruction` retired. If a later instruction on another stream
  // would have had to wait for its completion (a RecordEvent or StreamWait point, cpu work),
  // that completion is now known to the host for good: it is folded into each operand blob,
  // and OnEagerReceived hands it to later users of the blob, which no longer get an edge
  // from it.
  void OnEagerRetired(const Instruction& instruction) override;
  // Scheduler: a Barrier was received (it certifies everything received before it).
  void OnBarrierReceived(const Instruction& barrier) override;
  // Scheduler: `barrier` fired; everything received before it is complete.
  void OnBarrierFired(const Instruction& barrier) override;
  // A host thread waited for `instruction` to complete (a blocking blob read or write).
  void OnHostWaited(const Instruction& instruction) override;

  // --- The kernel's reports (StepSequence, through KernelContext). ---
  // Worker: `sequence`, run by `outer` in the run tagged `run_tag`, passed its first
  // `steps` steps; keeps the stream's clock for the sequences that wait for them. Called
  // before the waiters can see the progress.
  void OnSequencePassed(const Instruction& outer, const void* sequence, uint64_t run_tag,
                        uint32_t steps);
  // Worker: the sequence `outer` runs waited until `source` passed its first `steps` steps
  // in the run tagged `run_tag`; its stream joins the clock `source` kept for them (none
  // kept for this run: nothing is joined, so what the wait was meant to order is reported).
  void OnSequenceWaited(const Instruction& outer, const void* source, uint64_t run_tag,
                        uint32_t steps);

  // Every violation, unordered accesses and undeclared aliases alike.
  int64_t violation_count() const;
  int64_t alias_count() const;
  std::vector<SyncViolation> violations() const;  // the first kMaxKeptViolations
  // OK, or FailedPrecondition with the count and the first violation.
  absl::Status status() const;

 private:
  using Clock = std::vector<uint32_t>;
  struct Access {
    int stream = -1;  // dense stream index; -1: none
    uint32_t tick = 0;
    std::string who;
  };
  struct History {
    Access write;
    absl::InlinedVector<Access, 2> reads;  // latest read per stream since the write
  };

  Clock& StreamClock(int index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ticks stream `s`'s own component of `clock`.
  static void Tick(Clock& clock, int s);
  // Checks an OpCall's, Release's or AccessBlob's accesses at `clock`.
  void CheckOperands(const Instruction& instruction, int stream, const Clock& clock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a step of the StepSequence `outer` runs on `stream`: `outer`'s completion
  // certifies `clock`, and on a synchronous stream so does its worker's order.
  void CertifyStep(Instruction* outer, const Stream& stream, const Clock& clock)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Check(const Instruction& instruction, uint64_t blob_id, const std::string& blob_name,
             bool write, int stream, const Clock& clock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Report(const std::string& blob, const Access& first, std::string second)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports each blob `instruction` (an OpCall) lists as an input and as an output of a pair
  // its kernel's contract does not declare in place.
  void CheckAliases(const Instruction& instruction) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<Clock> clocks_ ABSL_GUARDED_BY(mu_);  // per dense stream index
  Clock host_ ABSL_GUARDED_BY(mu_);                 // known done at host sync points
  // Per ThreadCtx running synchronous streams: the clock of the last work it launched.
  absl::flat_hash_map<const void*, Clock> worker_clocks_ ABSL_GUARDED_BY(mu_);
  // Host waits (Instruction::HostWait): the source stream's clock at each StreamWait whose
  // consumers wait on the host, by (dense stream index, stream_seq).
  absl::flat_hash_map<std::pair<int, uint64_t>, Clock> host_wait_clocks_ ABSL_GUARDED_BY(mu_);
  // Sequence waits: by (sequence, steps passed), the run tag and its stream's clock then.
  // One entry per announced step, overwritten every run (a sequence runs once at a time).
  absl::flat_hash_map<std::pair<const void*, uint32_t>, std::pair<uint64_t, Clock>> sequence_clocks_
      ABSL_GUARDED_BY(mu_);
  // Shared releases: by ReleaseCount, the clocks of this run's drops so far, joined.
  absl::flat_hash_map<const void*, Clock> drop_clocks_ ABSL_GUARDED_BY(mu_);
  // Unfired barriers in receive order, each with the completion clocks of instructions
  // received before it (and after the previous one) that retired; `unclaimed_` collects
  // those received after the last pending barrier, for the next one.
  struct PendingBarrier {
    uint64_t received = 0;
    Clock done;
  };
  std::vector<PendingBarrier> barriers_ ABSL_GUARDED_BY(mu_);
  Clock unclaimed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, History> history_ ABSL_GUARDED_BY(mu_);
  int64_t violation_count_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t alias_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<SyncViolation> violations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_SYNC_CHECKER_H_
