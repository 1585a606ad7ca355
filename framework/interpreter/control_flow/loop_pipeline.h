// A while loop whose iterations overlap (parallel_iterations > 1; docs/design.md,
// "Parallel iterations"). The body is split into three stages (loop_stages.h): the driver
// (what the condition needs), the independent stage and the carried stage. The loop has
// R = P + 1 slots, P the iterations in flight: iteration k runs in slot k mod R, with
// frames and current values of its own.
//
// Who runs what. The control step (the *driver*, on its lane) runs the entry and opens
// the run; a *helper* step, which lane lowering puts in each other lane of the block at
// the loop's place, joins it. Then every participant, the driver included, repeats:
//  - claim the next published, unclaimed iteration, run its independent stage, then, once
//    iteration k - 1 is complete, its carried stage, and mark it complete;
//  - else, if no one else holds the driver token, take it and advance the driver stage:
//    for each next iteration, the condition, then the driver stage, then publish it.
//    Iteration k's driver stage writes slot k + 1's current values, which iteration
//    k + 1 - R read, so it runs only once k + 1 - R is complete: at most P iterations are
//    in flight. A false condition, a poisoned predicate, max_iterations exceeded or a
//    cancel ends the loop there (the end is published);
//  - else wait for a publication, a completion, the end, or the token's release.
// Once the loop ended and every iteration is claimed, the driver waits for them to
// complete and runs the exit frame (or poisons Out, or fails).
//
// Why it cannot hang: no participant waits for a helper to start; what no helper takes,
// the driver does. A claimed iteration always completes (its steps run or are skipped,
// but it is never abandoned), and it waits only for lower iterations, claimed before it.
// The token is held only while a driver stage runs. A helper waits for the driver's run
// to open, or for its lane to pass the driver's step (the step was skipped: a poisoned
// input), or for a cancel.
//
// Observers. The sync checker sees every step of every iteration on the lane that ran it.
// Opening, publishing, completing and ending are ordering edges
// (KernelContext::NoteSequencePassed and NoteSequenceWaited, keyed by the addresses of the
// four counters), as a lane's waits are. With the VM recording, the driver runs every
// iteration itself (the log of a control step's steps is one thread's), and a helper
// records an empty expansion. With a tracer, each iteration is a slice on the lane that
// completed it.
//
// Errors. An op failing in an iteration reports that iteration. With iterations in
// flight, a later iteration's independent stage may fail, and be reported, before an
// earlier one's does: the run's error is whichever was reported first.
//
// Thread-safety: one driver and any number of helpers run at once, for one run of the
// graph at a time; state is atomics tagged with the run's number.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_PIPELINE_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/waker.h"
#include "vm/kernel.h"
#include "vm/step_sequence.h"

namespace sluice::framework::control_flow {

struct LoopFrames;  // frame.h

class LoopPipeline {
 public:
  // `loop` (its slots, frames with stages, run counter) must outlive this object.
  LoopPipeline(std::string where, const LoopFrames& loop);
  ~LoopPipeline();
  LoopPipeline(const LoopPipeline&) = delete;
  LoopPipeline& operator=(const LoopPipeline&) = delete;

  // The control step's Launch (cpu: a synchronous stream). Errors as ControlStep::Launch.
  absl::Status Drive(vm::KernelContext& ctx);

  // The kernel a lane other than the driver's runs at the loop's place. `driver_lane`
  // runs the control step as its step number `driver_step` and announces passing it
  // (AnnounceAt(driver_step + 1)): a helper that sees the lane pass it without a run
  // open knows the step was skipped. Owned here; one per call.
  const vm::OpKernel& NewHelper(const vm::StepSequence* driver_lane, int driver_step);

 private:
  class Helper;
  enum class Advance { kProgressed, kNothing, kBusy };
  // What every participant does until the loop ended and every iteration is claimed.
  // False when a later run opened meanwhile (a helper that arrived late).
  bool Participate(vm::KernelContext& ctx, uint64_t tag);
  // Claims the next iteration if it is published and unclaimed, and runs it; false when
  // there is none to claim now.
  bool TryClaimAndRun(vm::KernelContext& ctx, uint64_t tag);
  // Runs a claimed iteration's independent and carried stages and completes it.
  void RunIteration(vm::KernelContext& ctx, uint64_t tag, uint32_t index);
  // With the driver token: the driver stage for as many iterations as the slots allow.
  // kBusy: another participant holds the token.
  Advance AdvanceDriver(vm::KernelContext& ctx, uint64_t tag);
  // Ends the loop after `trip` iterations (the token holder, or the driver before any).
  void EndAt(vm::KernelContext& ctx, uint64_t tag, uint32_t trip);
  // Keeps the first of this run's failures (or poisons).
  void Fail(const absl::Status& status);
  // Waits until `ready()` (spinning first, then parked, re-checked each poll period).
  template <typename Pred>
  void Await(Pred ready);
  void Publish(std::atomic<uint64_t>& word, uint64_t value);
  uint64_t RunTag() const;

  const std::string where_;
  const LoopFrames& loop_;
  const uint32_t slots_;  // R
  // (run tag | count). published_: iterations whose driver stage ran; claim_: the next
  // iteration to claim; completed_: iterations complete (in order); end_: the trip count
  // plus one once known (0: not yet). A helper sees a run open once published_ carries
  // its tag: the driver resets the others first.
  alignas(64) std::atomic<uint64_t> published_{0};
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint64_t> completed_{0};
  alignas(64) std::atomic<uint64_t> end_{0};
  std::atomic<bool> solo_{false};     // this run's driver runs every iteration itself
  std::atomic<bool> driving_{false};  // the driver token
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // the loop fails with it (this run)
  absl::Status poison_ ABSL_GUARDED_BY(mu_);   // Out inherits it (this run)
  Waker waker_;
  std::vector<std::unique_ptr<Helper>> helpers_;
};

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_PIPELINE_H_
