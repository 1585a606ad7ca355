// Lowering of control-flow ops: a `cond` or `while` of a block, with its sub-blocks (nested
// control flow included), into a ControlStep (control_step.h) whose frames are built once
// and reused by every run and every iteration.
//
// Each sub-block is lowered in program order into one StepSequence on the control step's
// stream: its ops go through the resolution, placement and kernel choice block 0 goes
// through (ResolveAndPlace: schemas, attributes, inference against the declared
// variables, kernels for the control step's device; a "stream" attribute is checked but a
// sub-block runs where its control step runs), their operands bound by name — the block's
// own variables to lazy blobs of the frame, every other name to the enclosing frame's
// binding. With release_temporaries (the GC plan's option) the block's own variables share
// storage by live range, decided once here: a variable first written after another of its
// dtype and shape was last used (the copy of a yield is a yield's last use) takes that
// one's blob, so a frame holds its live set, not the sum of its temporaries, and no
// iteration allocates or frees anything. (Releasing each temporary after its last use and
// allocating it again the next iteration gives the same peak at two allocator calls per
// temporary per iteration: half again the cost of the benchmark's iteration on cpu, twice
// on sim.) Not shared: a condition's predicate (read by the control step after the frame),
// a variable read before it is written, and what a nested control step touches (its frames
// hold the pointers). Without the option each variable has a blob of its own. Frames are
// reused, so memory does not grow with iterations either way.
// Each step's origin (errors) names its block, its op and the iterations of its
// enclosing loops.
//
// Thread-compatible; used while the interpreter builds.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "framework/interpreter/control_flow/control_step.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::framework::control_flow {

// Name -> blob, for every name visible where a block runs.
using Bindings = absl::flat_hash_map<std::string, vm::Blob*>;

class SubBlockLowering {
 public:
  // `stream`: the control step's stream (cpu, or an asynchronous one: sim, cuda). `cancel`
  // and `ops_run`: the interpreter's cancel flag and op counter, given to every frame.
  // `release_temporaries`: InterpreterOptions'. `run_number`: the graph's run counter
  // (vm::StepSequence::set_run_counter), which a pipelined loop tags its state with. Given
  // only when the block will run as lanes over more than one stream; null: every loop runs
  // one iteration at a time.
  SubBlockLowering(const ir::ProgramDesc& program, const ops::OpRegistry& registry,
                   vm::VirtualMachine& vm, vm::Stream* stream, const std::atomic<bool>* cancel,
                   std::atomic<int64_t>* ops_run, bool release_temporaries,
                   const std::atomic<uint32_t>* run_number = nullptr)
      : program_(program),
        registry_(registry),
        vm_(vm),
        stream_(stream),
        device_(stream->key().device),
        cancel_(cancel),
        ops_run_(ops_run),
        release_temporaries_(release_temporaries),
        run_number_(run_number) {}

  // The control step of op #`index` of block `block` (a cond or while that passed
  // ProgramDesc::Validate), whose names resolve through `bound`. Errors name the block and
  // the op at fault: an unknown op, a bad attribute, a name without a binding, no kernel
  // for the stream's device.
  absl::StatusOr<std::unique_ptr<ControlStep>> Build(int block, int index, const ir::OpDesc& op,
                                                     const Bindings& bound) {
    return Build(block, index, op, bound, nullptr);
  }

  // The caller's blobs for block 0's variables when a whole program is lowered as one frame.
  struct ProgramBindings {
    Bindings feeds;         // read-only (a write is refused, as a write to a fed variable)
    Bindings persistables;  // may be read before written; updated in place
  };
  // Block 0 of the program lowered as one frame, for a caller that runs it inline on the
  // stream (a graph launch, framework/graph): every variable named in `top` is bound to the
  // caller's blob (which must have the variable's dtype and shape), every other variable of
  // block 0 is the frame's own, and nested control flow is lowered as Build lowers it (loops
  // one iteration at a time). Frame::results are the blobs of `outputs`, in order, kept out
  // of storage sharing so the caller can read them once the frame ran. Errors as Build's,
  // plus InvalidArgument naming a bound variable whose blob does not match its declaration,
  // or an output that is not a variable of block 0.
  absl::StatusOr<Frame> BuildProgram(const ProgramBindings& top,
                                     const std::vector<std::string>& outputs);

 private:
  // `loop`: the innermost loop enclosing the op, or null.
  absl::StatusOr<std::unique_ptr<ControlStep>> Build(int block, int index, const ir::OpDesc& op,
                                                     const Bindings& bound,
                                                     const LoopIteration* loop);
  absl::StatusOr<std::unique_ptr<ControlStep>> BuildCond(const std::string& where,
                                                         const ir::OpDesc& op,
                                                         const Bindings& bound,
                                                         const LoopIteration* loop);
  // `global_block`: the op is in block 0 (its control step is a step of a lane, whose
  // other lanes can help a pipelined loop).
  absl::StatusOr<std::unique_ptr<ControlStep>> BuildWhile(const std::string& where,
                                                          const ir::OpDesc& op,
                                                          const Bindings& bound,
                                                          const LoopIteration* loop,
                                                          bool global_block);
  // A loop's frames in `in_flight` + 1 slots with staged bodies (loop_pipeline.h), or in
  // two slots when `in_flight` is 0. nullopt when in_flight > 0 and the body does not
  // split (loop_stages.h).
  absl::StatusOr<std::optional<LoopFrames>> BuildLoopFrames(const std::string& where,
                                                            const ir::OpDesc& op,
                                                            const Bindings& bound,
                                                            const LoopIteration* enclosing,
                                                            int in_flight);
  // A frame being lowered: its calls, kept until Finish places the releases.
  struct PendingFrame {
    struct Call {
      const vm::OpKernel* kernel;
      std::vector<vm::Blob*> reads, writes;
      std::shared_ptr<const vm::AttrMap> attrs;
      const StepOrigin* origin;  // null: a copy the lowering added
      bool random = false;       // draws random numbers (a nested control step: may)
    };
    Frame frame;  // blobs, results, nested steps and origins so far; no steps yet
    std::vector<Call> calls;
  };
  // Block `block`'s calls into a new pending frame, its own variables bound to new lazy
  // blobs in a copy of `bound`; `loop` as in Build. `top` (BuildProgram): block 0's
  // variables it names keep their bindings; `results` (BuildProgram): the frame's results
  // instead of the block's yields.
  absl::StatusOr<PendingFrame> LowerBlock(int block, Bindings bound, const LoopIteration* loop,
                                          const ProgramBindings* top = nullptr,
                                          const std::vector<std::string>* results = nullptr);
  VarTable ViewOf(const ir::BlockDesc& desc, const Bindings& bound,
                  const ProgramBindings* top) const;
  // Appends a copy from -> to (nothing when they are one blob).
  absl::Status AddCopy(PendingFrame& pending, vm::Blob* from, vm::Blob* to) const;
  // The frame with its closed StepSequence of the calls; with release_temporaries, its own
  // blobs (but those in `keep`) share storage by live range first.
  Frame Finish(PendingFrame pending, absl::Span<vm::Blob* const> keep) const;
  // A pipelined body: the calls in stage order (stable), storage shared by live range in
  // that order, one closed StepSequence per stage in Frame::stages.
  Frame FinishStaged(PendingFrame pending, const std::vector<int>& stage_of_call) const;
  // A body frame's yields written where the next iteration reads them: a yielded variable
  // of the body's own, written by one call (not a nested control step) and yielded once,
  // is rebound to its next value `next[i]`, so the copy into it disappears.
  static void WriteYieldsInPlace(PendingFrame& pending, const std::vector<vm::Blob*>& next);
  // Appends the copies to[i] = from[i] as one parallel assignment: every `from` is read
  // before any `to` is written (a branch that yields its Out swapped swaps them). Copies
  // are ordered so that none overwrites a value a later one reads; each cycle (a swap, a
  // rotation) goes through one temporary, a blob of the frame. A `to` named twice takes
  // its last `from`.
  absl::Status AddYieldCopies(PendingFrame& pending, const std::vector<vm::Blob*>& from,
                              const std::vector<vm::Blob*>& to) const;
  // A closed sequence of `calls`, wired to the cancel flag and the op counter.
  std::unique_ptr<vm::StepSequence> Sequence(std::vector<PendingFrame::Call>& calls) const;
  // Rebinds `pending`'s calls and `frame`'s results so that own blobs with disjoint live
  // ranges (same dtype and shape) are one blob; drops the blobs no longer used.
  static void ShareStorage(PendingFrame& pending, Frame& frame, absl::Span<vm::Blob* const> keep);
  // A frame of copy steps only.
  absl::StatusOr<Frame> CopyFrame(const std::vector<vm::Blob*>& from,
                                  const std::vector<vm::Blob*>& to) const;

  const ir::ProgramDesc& program_;
  const ops::OpRegistry& registry_;
  vm::VirtualMachine& vm_;
  vm::Stream* const stream_;
  const Device device_;  // stream_'s
  const std::atomic<bool>* const cancel_;
  std::atomic<int64_t>* const ops_run_;
  const bool release_temporaries_;
  const std::atomic<uint32_t>* const run_number_;
};

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_
