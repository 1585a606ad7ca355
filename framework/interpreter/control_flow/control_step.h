// The control step: the instruction a `cond` or `while` op of a lowered block becomes
// (docs/design.md, "Control flow"). It reads its predicate and runs the frames of the
// chosen sub-block in place, on the worker that launched it, as a StepSequence runs its
// steps: every step goes through KernelContext::RunStep on the control step's stream, so
// the poison rules, lazy allocation, error reports and the sync checker see each step as
// they see any other. This is the *inline* form: every stream the sub-blocks use is the
// control step's own synchronous cpu stream (the interpreter lowers control flow on cpu
// only, for now).
//
// Frames (lower_sub_blocks.h builds them): a frame is one instance of a sub-block's steps
// with blobs of its own. A cond has a frame per branch, each ending with copies of its
// yields into Out. A while has:
//  - an entry frame, which copies X into the current values of parity 0;
//  - per parity p (0, 1), a condition frame and a body frame in which the loop's Out names
//    are bound to the current values of parity p; the body ends with copies of its yields
//    into the current values of parity 1 - p (double buffering: a body that returns its
//    variables swapped reads nothing it overwrites);
//  - per parity, an exit frame that copies the current values into Out.
//
// Immutable once built; Launch may run on any worker (one at a time: runs of a graph
// follow one another).
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
#include "absl/strings/string_view.h"
#include "vm/blob.h"
#include "vm/kernel.h"
#include "vm/step_sequence.h"

namespace sluice::framework::control_flow {

// One lowered sub-block instance.
struct Frame {
  std::unique_ptr<vm::StepSequence> steps;            // closed; run as one unit
  std::vector<vm::Blob*> results;                     // what the block yields, once its steps ran
  std::vector<vm::BlobRef> blobs;                     // the block's own variables (kept alive)
  std::vector<std::unique_ptr<vm::OpKernel>> nested;  // control steps its steps call
};

class ControlStep final : public vm::OpKernel {
 public:
  // `where` names the op in errors ("block 0 op #3 'while'").
  static std::unique_ptr<ControlStep> Cond(std::string where, vm::Blob* pred, Frame on_true,
                                           Frame on_false);
  struct Loop {
    Frame entry;
    std::array<Frame, 2> check;  // by parity; results[0] is the predicate
    std::array<Frame, 2> body;
    std::array<Frame, 2> exit;
    std::vector<vm::BlobRef> current;  // both parities' current values
    std::optional<int64_t> max_iterations;
    const std::atomic<bool>* cancel = nullptr;  // set: stop before the next iteration
  };
  static std::unique_ptr<ControlStep> While(std::string where, Loop loop);

  absl::string_view name() const override { return is_loop_ ? "while" : "cond"; }
  // Runs the chosen frames. A predicate whose producer failed (poisoned) ends a loop: the
  // exit copies then poison Out with that error, which was reported when it happened.
  // InvalidArgument naming the op when a loop runs its body more than max_iterations times.
  absl::Status Launch(vm::KernelContext& ctx) const override;

 private:
  ControlStep() = default;
  absl::Status RunLoop(vm::KernelContext& ctx) const;

  std::string where_;
  bool is_loop_ = false;
  vm::Blob* pred_ = nullptr;  // cond
  std::array<Frame, 2> branches_;
  Loop loop_;
};

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_CONTROL_STEP_H_
