// GraphLaunch: the kernel of one graph call (graph.h) — the instruction a call of a Graph
// from eager code becomes, on its device's launcher stream (StreamType::kLazyJobLauncher).
// The instruction's operands are the call's inputs, its outputs and the eager parameters
// the graph binds, so the engine orders it with eager work by the ordinary dependence rules
// and soft sync. Its work is the graph's traced Program, lowered once (control_flow::
// SubBlockLowering::BuildProgram) into a frame that runs inline on the launcher stream:
//  1. a copy (`assign`, device to device) of each call input into the frame's input blob;
//  2. the frame's steps;
//  3. a copy of each result into the call's new output tensor.
// Every copy and step goes through KernelContext::RunStep, so each has a lone instruction's
// rules: a step whose input is poisoned is skipped and poisons its outputs, a failing step
// is reported under its own name (with the graph in its origin), and the sync checker and
// the recorder (an expansion of the launch's line, vm/step_log.h) see every step. The
// instruction completes when its last step does (on an asynchronous stream, when the stream
// has run them).
//
// Operand layout (Context::LaunchKernel's): inputs = [call inputs..., read-only parameters...,
// updated parameters...], outputs = [call outputs..., updated parameters...]. The frame's
// steps read and write the parameters' blobs directly (bound at lowering), so the listed
// parameter operands are what orders them.
//
// One launch at a time. A step's work on an asynchronous stream (sim) reads the step when it
// runs, after Launch returned, and every launch reuses the frame's steps (RunStep names
// them after the launching instruction). So on an asynchronous stream a launch first waits
// until the previous launch's work has run (an event recorded behind it; that work waits
// only for work already enqueued, so the wait ends), as runs of a lowered graph follow one
// another. On a synchronous stream the work has run when Launch returns.
//
// Copy steps. For the same reason a launch cannot repoint copy steps the previous launch
// may still be running. Each launch takes a set of copy steps that is not busy (or makes one),
// points it at the call's blobs, and frees it behind its work: at once on a synchronous
// stream, by a task enqueued after its steps on an asynchronous one. The sets in use at once
// are the launches in flight on the stream.
//
// Thread-safety: immutable once built, but for the copy sets: launches follow one another
// (every launch of one GraphLaunch is on the one launcher stream of its device, whose worker
// runs them in order), so one thread at a time takes sets and makes new ones; a set's
// `busy` flag is cleared by the stream's thread (release) and read by the worker (acquire).
#ifndef SLUICE_FRAMEWORK_GRAPH_GRAPH_LAUNCH_H_
#define SLUICE_FRAMEWORK_GRAPH_GRAPH_LAUNCH_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ep/event.h"
#include "framework/interpreter/control_flow/control_step.h"
#include "ops/op_registry.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::framework::graph {

class GraphLaunch final : public vm::OpKernel {
 public:
  // `name` ("graph 'step'") names the launch in traces and the copies' errors. `frame`: the
  // program lowered on the launcher stream, whose results are the call's outputs in order;
  // `inputs`: the frame's blobs that call input i is copied into (on the launcher stream).
  // NotFound when the registry has no `assign` kernel for a blob's device and dtype.
  static absl::StatusOr<std::unique_ptr<GraphLaunch>> Create(std::string name,
                                                             control_flow::Frame frame,
                                                             std::vector<vm::BlobRef> inputs,
                                                             const ops::OpRegistry& registry);
  ~GraphLaunch() override;

  absl::string_view name() const override { return "graph_launch"; }
  absl::Status Launch(vm::KernelContext& ctx) const override;
  // Each copy and step settles its own operands' poison.
  bool handles_poison() const override { return true; }
  bool checks_own_steps() const override { return true; }
  bool logs_own_steps() const override { return true; }

  int num_inputs() const { return static_cast<int>(copy_in_.size()); }
  int num_outputs() const { return static_cast<int>(copy_out_.size()); }
  // Copy sets made so far (at most the launches that were in flight at once).
  int copy_sets() const { return static_cast<int>(sets_.size()); }

 private:
  // One `assign` step per input and per output, for one launch at a time.
  struct CopySet {
    std::vector<std::unique_ptr<vm::Instruction>> in, out;
    std::atomic<bool> busy{false};
  };
  GraphLaunch() = default;
  absl::Status Run(vm::KernelContext& ctx) const;
  // A set not in use (made from the prototypes when every one is busy).
  CopySet* TakeCopySet() const;

  std::string name_;
  control_flow::Frame frame_;
  std::vector<vm::BlobRef> inputs_;
  // Prototypes of the copy steps: kernel, origin and the fixed operand (the frame's input
  // blob, the result); the other operand is the call's, set per launch.
  std::vector<std::unique_ptr<vm::Instruction>> copy_in_;
  std::vector<std::unique_ptr<vm::Instruction>> copy_out_;
  std::vector<std::unique_ptr<vm::InstructionOrigin>> origins_;
  mutable std::vector<std::unique_ptr<CopySet>> sets_;  // the launching worker's
  // Asynchronous streams: recorded behind each launch's work; the next launch waits for it.
  mutable std::unique_ptr<ep::Event> done_;
  mutable bool done_pending_ = false;
};

}  // namespace sluice::framework::graph

#endif  // SLUICE_FRAMEWORK_GRAPH_GRAPH_LAUNCH_H_
