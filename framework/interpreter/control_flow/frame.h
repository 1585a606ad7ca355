// Frames: the lowered instances of a control-flow op's sub-blocks that a control step
// (control_step.h) runs — a Frame per cond branch, and a while loop's LoopFrames — with
// what their steps' errors name (LoopIteration, StepOrigin) and the predicate helpers the
// control step and a pipelined loop (loop_pipeline.h) share. control_step.h's header
// comment says what each frame holds; lower_sub_blocks.h builds them.
//
// Frames are immutable once built, but for the per-launch iteration numbers (LoopIteration,
// atomic); the free functions are thread-compatible (the caller owns the blobs' turn).
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_FRAME_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_FRAME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"
#include "vm/step_sequence.h"

namespace sluice::framework::control_flow {

// The iteration a loop is running, for the error messages of the steps inside it. The
// loop's control step sets it in stream order (set_value: at once on a synchronous
// stream, as stream work on an asynchronous one), so a step's error, formatted on the
// thread that runs the step, reads the iteration that step belongs to. Atomic (relaxed):
// on an asynchronous stream the sync checker also describes steps, on the worker as it
// launches them, and may then name the iteration before.
class LoopIteration {
 public:
  // `where` names the loop ("block 0 op #3 'while'"); `parent`: the enclosing loop's, or null.
  LoopIteration(std::string where, const LoopIteration* parent)
      : where_(std::move(where)), parent_(parent) {}
  // "iteration 7 of block 0 op #3 'while'", then the enclosing loops'.
  std::string Describe() const;
  void set_value(int64_t value) { value_.store(value, std::memory_order_relaxed); }

 private:
  const std::string where_;
  const LoopIteration* const parent_;
  std::atomic<int64_t> value_{0};
};

// A sub-block step's origin: "block 2 op #1 'mul'", then its loops' iterations.
class StepOrigin final : public vm::InstructionOrigin {
 public:
  StepOrigin(std::string where, const LoopIteration* loop)
      : where_(std::move(where)), loop_(loop) {}
  std::string Describe() const override;

 private:
  const std::string where_;
  const LoopIteration* const loop_;  // null outside loops
};

// A predicate's value, read on the host now; nullopt when it has no value to read
// (poisoned, or never written because a cancel skipped its producer).
std::optional<bool> ReadPredicate(const vm::Blob* pred);
// Poisons each of `blobs` with `cause`.
void PoisonAll(absl::Span<vm::Blob* const> blobs, const absl::Status& cause);

// One lowered sub-block instance.
struct Frame {
  std::unique_ptr<vm::StepSequence> steps;  // closed; run as one unit (null: `stages`)
  // A pipelined loop's body: its three stages (loop_stages.h), each closed, run in turn.
  std::vector<std::unique_ptr<vm::StepSequence>> stages;
  std::vector<vm::Blob*> results;                     // what the block yields, once its steps ran
  std::vector<vm::BlobRef> blobs;                     // the block's own variables (kept alive)
  std::vector<std::unique_ptr<vm::OpKernel>> nested;  // control steps its steps call
  std::vector<std::unique_ptr<StepOrigin>> origins;   // its steps point at them
};

// A while loop's frames. Iteration k runs in slot k mod slots: a sequential loop has two
// slots (double buffering, see above); a pipelined one P + 1 (loop_pipeline.h).
struct LoopFrames {
  Frame entry;                       // copies X into slot 0's current values
  std::vector<Frame> check;          // by slot; results[0] is the predicate
  std::vector<Frame> body;           // by slot; its yields' copies write the next slot's values
  std::vector<Frame> exit;           // by slot; copies its current values into Out
  std::vector<vm::BlobRef> current;  // every slot's current values
  std::optional<int64_t> max_iterations;
  const std::atomic<bool>* cancel = nullptr;  // set: stop before the next iteration
  // By slot: the frames' steps' origins point at their slot's.
  std::vector<std::unique_ptr<LoopIteration>> iterations;
  // Pipelined: P, the iterations in flight (the body frames have stages); 0: sequential.
  int in_flight = 0;
  const std::atomic<uint32_t>* run_number = nullptr;  // pipelined: the graph's run counter
  int slots() const { return static_cast<int>(check.size()); }
};
}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_FRAME_H_
