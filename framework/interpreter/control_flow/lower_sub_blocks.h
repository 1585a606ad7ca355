// Lowering of control-flow ops: a `cond` or `while` of a block, with its sub-blocks (nested
// control flow included), into a ControlStep (control_step.h) whose frames are built once
// and reused by every run and every iteration.
//
// Each sub-block is lowered in program order into one StepSequence on the control step's
// stream: its ops go through the resolution, placement and kernel choice block 0 goes
// through (ResolveAndPlace: schemas, attributes, inference against the declared
// variables, kernels for the control step's device; a "stream" attribute is checked but a
// sub-block runs where its control step runs), their operands bound by name — the block's
// own variables to lazy blobs of the frame (allocated by their first write and kept:
// frames are reused, so memory does not grow with iterations), every other name to the
// enclosing frame's binding. Each step's origin (errors) names its block, its op and the
// iterations of its enclosing loops.
//
// Thread-compatible; used while the interpreter builds.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

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
  // `stream`: the control step's stream (cpu, or an asynchronous stream whose memory the
  // host addresses: sim). `cancel` and `ops_run`: the interpreter's cancel flag and op
  // counter, given to every frame.
  SubBlockLowering(const ir::ProgramDesc& program, const ops::OpRegistry& registry,
                   vm::VirtualMachine& vm, vm::Stream* stream, const std::atomic<bool>* cancel,
                   std::atomic<int64_t>* ops_run)
      : program_(program),
        registry_(registry),
        vm_(vm),
        stream_(stream),
        device_(stream->key().device),
        cancel_(cancel),
        ops_run_(ops_run) {}

  // The control step of op #`index` of block `block` (a cond or while that passed
  // ProgramDesc::Validate), whose names resolve through `bound`. Errors name the block and
  // the op at fault: an unknown op, a bad attribute, a name without a binding, no kernel
  // for the stream's device.
  absl::StatusOr<std::unique_ptr<ControlStep>> Build(int block, int index, const ir::OpDesc& op,
                                                     const Bindings& bound) {
    return Build(block, index, op, bound, nullptr);
  }

 private:
  // `loop`: the innermost loop enclosing the op, or null.
  absl::StatusOr<std::unique_ptr<ControlStep>> Build(int block, int index, const ir::OpDesc& op,
                                                     const Bindings& bound,
                                                     const LoopIteration* loop);
  absl::StatusOr<std::unique_ptr<ControlStep>> BuildCond(const std::string& where,
                                                         const ir::OpDesc& op,
                                                         const Bindings& bound,
                                                         const LoopIteration* loop);
  absl::StatusOr<std::unique_ptr<ControlStep>> BuildWhile(const std::string& where,
                                                          const ir::OpDesc& op,
                                                          const Bindings& bound,
                                                          const LoopIteration* loop);
  // Block `block`'s steps into a new frame (not closed), its own variables bound to new
  // lazy blobs in a copy of `bound`; `loop` as in Build.
  absl::StatusOr<Frame> LowerBlock(int block, Bindings bound, const LoopIteration* loop);
  VarTable ViewOf(const ir::BlockDesc& desc, const Bindings& bound) const;
  // Appends a copy step from -> to (nothing when they are one blob).
  absl::Status AddCopy(vm::StepSequence& steps, vm::Blob* from, vm::Blob* to);
  // A frame of copy steps only.
  absl::StatusOr<Frame> CopyFrame(const std::vector<vm::Blob*>& from,
                                  const std::vector<vm::Blob*>& to);
  std::unique_ptr<vm::StepSequence> NewSteps() const;

  const ir::ProgramDesc& program_;
  const ops::OpRegistry& registry_;
  vm::VirtualMachine& vm_;
  vm::Stream* const stream_;
  const Device device_;  // stream_'s
  const std::atomic<bool>* const cancel_;
  std::atomic<int64_t>* const ops_run_;
};

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOWER_SUB_BLOCKS_H_
