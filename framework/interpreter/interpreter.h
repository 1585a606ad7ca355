// Interpreter: a Program analysed once and lowered into a reusable instruction graph. The
// interpreter schedules nothing itself: every run hands the same PrecomputedBatch to the VM.
//
// Build runs a pipeline of passes over one block (ir::BlockDesc) and its variable table;
// each pass is a function of the lowered graph (lowered_graph.h) so far:
//   var_table.h           CollectVars: block, feeds, fetches, scope, I/O binding ->
//                         VarTable (kind and home device per variable);
//   op_resolution.h       ResolveOps: block, VarTable -> ResolvedBlock (per op: schema,
//                         normalized attributes, operands by slot, inferred shapes checked);
//   placement.h           PlaceOps: ResolvedBlock -> OpFuncs on devices and fixed streams,
//                         with inserted `memcpy_h2d` / `memcpy_d2h` where a value crosses
//                         devices (feeds live on cpu; fetched values come back to cpu —
//                         except device-resident ones: interpreter_options.h, IoBinding);
//   op_resolution.h       ChooseKernels: each op's kernel for (op, device type, dtype);
//   subgraph_fusion.h     FuseSubgraphs: groups of fusible elementwise funcs -> one func
//                         each running a compiled kernel (InterpreterOptions::
//                         compile_subgraphs), funcs reordered topologically;
//   var_table.h           PersistablesReadBeforeWritten: what must have a value already;
//   dependency_builder.h  BuildDependencies: OpFunc accesses -> happens-before edges;
//   list_schedule.h       AssignStreams: edges -> a compute stream per remaining op (the
//                         "stream" attribute, else stream 0, or with compute_streams > 1 a
//                         list schedule pricing cross-stream edges) and start times;
//   vm_binding.h          BindStreams, BindBlobs: stream keys -> vm::Streams (dense
//                         indices), var slots -> blobs (feeds blobs of their own on their
//                         device, persistables the root scope's or new lazy ones,
//                         temporaries lazy blobs, device-resident fetches blobs of their own);
//   gc_plan.h             PlanNodes: OpFuncs, edges -> Nodes, with the release of each
//                         temporary after the last op that touches it;
//   segments.h            FormSegments: Nodes -> Segments (fusion into StepSequences);
//   storage_handoff.h     PlanStorageHandoffs: a release whose storage the next same-shaped
//                         temporary of its segment takes (no step, no allocation);
//   stream_analysis.h     AnalyzeStreams: Nodes, Segments, start times, StreamInfos ->
//                         StreamPlan (sequences, StreamWaits, RecordEvents, item edges;
//                         waits implied by earlier ones pruned by vector clocks);
//   lane_lowering.h       QueryLaneSupport, LowerToLanes: one StepSequence per stream with
//                         wait steps, when every stream is a cpu stream of its own worker;
//   batch_lowering.h      LowerToBatch: otherwise one instruction per plan item.
// Only vm_binding.h, lane_lowering.h and batch_lowering.h touch the VM; every other pass is
// a function of its inputs alone (CollectVars also reads the scope) and is tested without
// one.
//
// A sub-block (the body of a control-flow op) goes through the same passes: its VarTable
// holds the enclosing block's variables it reads or writes as bound slots (like
// persistables: never released, read before written allowed) plus its own temporaries;
// ResolveOps, PlaceOps and the rest run on its BlockDesc unchanged, and the back end
// lowers it into a batch (or lanes) of its own that the control-flow op's kernel submits.
//
// Errors (unknown op, bad attribute, shape mismatch, a variable read before anything writes
// it, an unknown feed or fetch) name the op and variable — the first op that fails any
// step — and are returned before anything is created in the scope.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_
#define SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "framework/compiler/compiler.h"
#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/host_tensor.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/interpreter/io_binding.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/blob.h"
#include "vm/instructions_builder.h"
#include "vm/kernel.h"
#include "vm/precomputed_batch.h"
#include "vm/step_graph.h"
#include "vm/step_sequence.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

class ReleaseCounts;  // sequence_lowering.h

// Thread-compatible: the Executor serializes runs of one interpreter (a run's StageFeeds
// and Submit, on the submitting thread, happen before its ReadFetches and
// CopyOutDeviceFetches, on another thread, which happen before the next run's StageFeeds).
// The registry, VM and scope must outlive it; no run may be in flight when it is destroyed.
class Interpreter {
 public:
  // `io`: which of `feed_names` and `fetch_names` stay on the device (I/O binding,
  // interpreter_options.h).
  static absl::StatusOr<std::unique_ptr<Interpreter>> Build(
      const ir::ProgramDesc& program, const ops::OpRegistry* registry, vm::VirtualMachine* vm,
      Scope* scope, const std::vector<std::string>& feed_names,
      const std::vector<std::string>& fetch_names, InterpreterOptions options = {},
      const IoBinding& io = {});
  ~Interpreter();

  // --- One run, in this order; no other run of this interpreter may be in flight. ---
  // The run's feeds, checked and staged (BoundIo::StageFeeds, io_binding.h). The caller
  // must not use a fed blob from another builder until this returns.
  absl::Status StageFeeds(const Feeds& feeds, const BlobFeeds& device_feeds = {}) {
    return io_stage_.StageFeeds(feeds, device_feeds);
  }
  // FailedPrecondition naming the first persistable the program reads before writing (or
  // fetches without writing) that has no value yet (the startup program has not run,
  // nothing was loaded), or whose value an earlier failed run left poisoned (the message
  // carries that failure; re-run the startup program or load the variable to recover).
  absl::Status CheckInitialized() const;
  // True while every persistable this graph was built on is still the variable `scope`
  // (or its ancestors) holds under that name: the graph binds blobs, so a variable replaced
  // or erased since — or another scope at a reused address — needs a new build.
  bool BindingsMatch(const Scope& scope) const;
  // Hands the lowered graph to the VM (clearing the cancel flag), after waiting for the
  // device copies of feeds and fetches still pending (BoundIo::WaitForPendingCopies).
  absl::Status Submit();
  // After the run completed: BoundIo::ReadFetches and CopyOutDeviceFetches.
  absl::StatusOr<std::vector<HostTensor>> ReadFetches() const { return io_stage_.ReadFetches(); }
  absl::StatusOr<std::vector<vm::BlobRef>> CopyOutDeviceFetches() {
    return io_stage_.CopyOutDeviceFetches();
  }

  // Request that the submitted run stop early (ops not yet started are skipped).
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  // OpCall steps launched since construction.
  int64_t ops_run() const { return ops_run_.load(std::memory_order_relaxed); }

  const LoweringStats& lowering() const { return lowering_; }
  const std::vector<std::string>& feed_names() const { return feed_names_; }
  const std::vector<std::string>& fetch_names() const { return fetch_names_; }
  const IoBinding& io() const { return io_; }
  // The devices whose allocators the run uses (for per-run peak bytes).
  const std::vector<Device>& devices() const { return devices_; }

 private:
  Interpreter() = default;
  struct Builder;
  friend struct Builder;

  vm::VirtualMachine* vm_ = nullptr;
  std::vector<std::string> feed_names_;
  std::vector<std::string> fetch_names_;
  IoBinding io_;
  // The graph's feed and fetch blobs and their staging (made by the build's Commit).
  BoundIo io_stage_;
  std::vector<std::pair<std::string, vm::BlobRef>> must_be_initialized_;
  std::vector<std::pair<std::string, vm::BlobRef>> persistables_;  // every one bound
  std::vector<vm::BlobRef> blobs_;  // every blob the graph uses: keeps them alive
  // The compiled subgraphs whose kernels the graph runs (subgraph_fusion.h).
  std::vector<std::shared_ptr<const compiler::CompiledSubgraph>> compiled_;
  // The kernels of control-flow ops (with their frames); outlive the sequences and batch
  // that call them (declared before them, so destroyed after them).
  std::vector<std::unique_ptr<vm::OpKernel>> control_steps_;
  std::vector<std::unique_ptr<vm::StepSequence>> sequences_;
  std::unique_ptr<vm::StepGraph> graph_;           // graph lowering's (graph_lowering.h), or null
  std::unique_ptr<ReleaseCounts> release_counts_;  // the sequences' shared releases
  vm::PrecomputedBatch batch_;
  std::vector<Device> devices_;
  LoweringStats lowering_;
  std::atomic<bool> cancel_{false};
  std::atomic<int64_t> ops_run_{0};
  std::atomic<uint32_t> run_number_{0};  // incremented by each Submit
};

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_INTERPRETER_H_
