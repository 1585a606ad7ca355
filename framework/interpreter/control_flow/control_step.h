// The control step: the instruction a `cond` or `while` op of a lowered block becomes
// (docs/design.md, "Control flow"). It reads its predicate and runs the frames of the
// chosen sub-block in place, on the worker that launched it, as a StepSequence runs its
// steps: every step goes through KernelContext::RunStep on the control step's stream, so
// the poison rules, lazy allocation, error reports and the sync checker see each step as
// they see any other. This is the *inline* form: every stream the sub-blocks use is the
// control step's own stream. (The exception is a pipelined loop, loop_pipeline.h: helper
// steps in the block's other lanes run some of its iterations' steps on their streams.)
//  - On a synchronous (cpu) stream the steps have run when their launch returns, and the
//    predicate's byte is read directly.
//  - On an asynchronous stream whose memory the host addresses (sim), the steps are
//    enqueued; the predicate is read by a task enqueued behind them, and the worker waits
//    for that task (an event recorded after it). The wait covers only work already on the
//    control step's stream (a cross-stream wait there was enqueued after the work it waits
//    for was), so it always ends. Everything the control step launched is on its stream
//    before Launch returns: the instruction's own completion covers its frames.
//  - On an asynchronous stream (sim, cuda: no stream policy of theirs is
//    host_accessible()), the predicate's byte is copied device-to-host in
//    stream order into a host buffer of the step, and the task enqueued behind the copy
//    reads that buffer; the wait is the same. The host never reads device memory.
//
// Errors: each step of a sub-block names its block and op, and inside a loop the
// iteration of every enclosing loop (LoopIteration, written in the steps' stream order).
//
// Frames (frame.h; lower_sub_blocks.h builds them): a frame is one instance of a sub-block's steps
// with blobs of its own. A cond has a frame per branch, each ending with copies of its
// yields into Out (one parallel assignment: every yield is read before any Out is
// written). A sequential while (loop_pipeline.h for a pipelined one) has:
//  - an entry frame, which copies X into the current values of parity 0;
//  - per parity p (0, 1), a condition frame and a body frame in which the loop's Out names
//    are bound to the current values of parity p; the body writes its yields into the
//    current values of parity 1 - p, in place or by a copy at its end (double buffering:
//    a body that returns its variables swapped reads nothing it overwrites);
//  - per parity, an exit frame that copies the current values into Out.
//
// Immutable once built, but for per-launch state (the predicate read's event and value,
// the loops' iteration numbers) that one launch at a time uses: Launch may run on any
// worker, one at a time (runs of a graph follow one another). A pipelined loop's steps
// also run on its helpers' workers, during its Launch (loop_pipeline.h says how).
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_CONTROL_STEP_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_CONTROL_STEP_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ep/event.h"
#include "framework/interpreter/control_flow/frame.h"
#include "vm/blob.h"
#include "vm/kernel.h"

namespace sluice::framework::control_flow {

class LoopPipeline;

class ControlStep final : public vm::OpKernel {
 public:
  // `where` names the op in errors ("block 0 op #3 'while'").
  static std::unique_ptr<ControlStep> Cond(std::string where, vm::Blob* pred, Frame on_true,
                                           Frame on_false);
  // A pipelined loop (in_flight > 0) runs through a LoopPipeline.
  static std::unique_ptr<ControlStep> While(std::string where, LoopFrames loop);
  ~ControlStep() override;

  // A pipelined loop's pipeline (lane lowering adds its helpers), else null.
  LoopPipeline* pipeline() const { return pipeline_.get(); }

  absl::string_view name() const override { return is_loop_ ? "while" : "cond"; }
  // With the VM recording, the steps a launch ran (iterations unrolled, nested control
  // flow flattened) are written as the expansion of this op's line (vm/step_log.h).
  bool logs_own_steps() const override { return true; }
  // Runs the chosen frames. A predicate whose producer failed (poisoned) ends a loop or a
  // cond with Out poisoned by that error, which was reported when it happened (a failed
  // body op poisons the next condition's predicate through the values it yields), so what
  // depends on Out is skipped. InvalidArgument naming the op when a loop runs its body more
  // than max_iterations times.
  absl::Status Launch(vm::KernelContext& ctx) const override;

 private:
  ControlStep() = default;
  absl::Status Run(vm::KernelContext& ctx) const;
  absl::Status RunLoop(vm::KernelContext& ctx) const;
  // `pred`'s value once the work enqueued so far on ctx's stream has run; nullopt when it
  // has no value (poisoned: `poison` gets the error; or never written, by a cancel).
  absl::StatusOr<std::optional<bool>> ReadInOrder(vm::KernelContext& ctx, const vm::Blob* pred,
                                                  absl::Status* poison) const;
  // Sets the iteration of slot `slot` in the stream order of ctx's stream.
  absl::Status SetIteration(vm::KernelContext& ctx, int slot, int64_t iteration) const;

  std::string where_;
  bool is_loop_ = false;
  vm::Blob* pred_ = nullptr;  // cond
  std::array<Frame, 2> branches_;
  LoopFrames loop_;
  std::unique_ptr<LoopPipeline> pipeline_;  // pipelined loops
  // Asynchronous streams: the event the worker waits on to read a predicate (created at
  // the first read; one worker at a time runs the step).
  mutable std::unique_ptr<ep::Event> read_event_;
  mutable std::optional<bool> read_value_;  // written by the stream's task
  mutable uint8_t read_byte_ = 0;           // host buffer of the device-to-host copy
  mutable bool read_ran_ = false;           // set by it (the worker resets it before)
};

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_CONTROL_STEP_H_
