#include "framework/interpreter/interpreter.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/status.h"
#include "framework/interpreter/addto_pass.h"
#include "framework/interpreter/batch_lowering.h"
#include "framework/interpreter/control_flow/lower_sub_blocks.h"
#include "framework/interpreter/gc_plan.h"
#include "framework/interpreter/graph_lowering.h"
#include "framework/interpreter/inplace_pass.h"
#include "framework/interpreter/lane_lowering.h"
#include "framework/interpreter/list_schedule.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/interpreter/op_resolution.h"
#include "framework/interpreter/placement.h"
#include "framework/interpreter/segments.h"
#include "framework/interpreter/sequence_lowering.h"
#include "framework/interpreter/storage_handoff.h"
#include "framework/interpreter/stream_analysis.h"
#include "framework/interpreter/subgraph_fusion.h"
#include "framework/interpreter/var_table.h"
#include "framework/interpreter/vm_binding.h"
#include "framework/ir/control_flow.h"

namespace sluice::framework {

namespace {

// FailedPrecondition naming the first of `persistables` the scope has no value for.
absl::Status CheckHaveValues(const std::vector<int>& persistables, const VarTable& vars,
                             const Scope& scope) {
  for (int v : persistables) {
    const vm::BlobRef* found = scope.Find(vars.slots[v].name);
    if (found == nullptr || (*found)->storage() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", vars.slots[v].name,
                       "' has no value: run the startup program or load parameters first"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Runs the pipeline (interpreter.h) over the program's global block into `out`.
struct Interpreter::Builder {
  const ir::ProgramDesc& program;
  const ops::OpRegistry& registry;
  vm::VirtualMachine& vm;
  Scope& scope;
  const InterpreterOptions options;
  Interpreter& out;

  absl::Status Run(const std::vector<std::string>& feed_names,
                   const std::vector<std::string>& fetch_names);
  absl::Status Lower(const VarTable& vars, const std::vector<OpFunc>& funcs,
                     const std::vector<Node>& nodes, const std::vector<Segment>& segments,
                     const StreamPlan& plan, const std::vector<vm::Stream*>& streams);
  void Commit(const VarTable& vars, const PlacedBlock& placed, const BoundBlobs& bound,
              const std::vector<int>& must_check, std::vector<BoundIo::DeviceCopy> feed_copies,
              std::vector<BoundIo::DeviceCopy> fetch_copies);
  // The kernel of every control-flow func (a ControlStep over its lowered sub-blocks).
  absl::Status BuildControlSteps(const VarTable& vars, const StreamTable& streams,
                                 std::vector<OpFunc>& funcs);
  // The `assign` kernel and stream of each device-resident feed and fetch (none for host
  // ones), in feed and fetch order.
  absl::Status PrepareDeviceCopies(const VarTable& vars, const PlacedBlock& placed,
                                   std::vector<BoundIo::DeviceCopy>& feed_copies,
                                   std::vector<BoundIo::DeviceCopy>& fetch_copies);
  // With a pipelined loop, every compute stream of its device the options allow joins the
  // table (appended: no func runs there), so that lane lowering gives each a lane whose
  // helper runs iterations. True when a stream was added.
  absl::StatusOr<bool> AddHelperStreams(StreamTable& streams);
};

absl::StatusOr<bool> Interpreter::Builder::AddHelperStreams(StreamTable& streams) {
  bool added = false;
  for (const std::unique_ptr<vm::OpKernel>& kernel : out.control_steps_) {
    const auto* step = dynamic_cast<const control_flow::ControlStep*>(kernel.get());
    if (step == nullptr || step->pipeline() == nullptr) continue;
    for (int j = 0; j < options.compute_streams; ++j) {
      SLUICE_ASSIGN_OR_RETURN(vm::Stream * stream,
                              vm.GetStream(StreamKey{options.device, StreamType::kCompute, j}));
      if (std::find(streams.streams.begin(), streams.streams.end(), stream) ==
          streams.streams.end()) {
        streams.streams.push_back(stream);
        added = true;
      }
    }
  }
  return added;
}

absl::Status Interpreter::Builder::BuildControlSteps(const VarTable& vars,
                                                     const StreamTable& streams,
                                                     std::vector<OpFunc>& funcs) {
  control_flow::Bindings bound;
  for (const VarSlot& slot : vars.slots) bound[slot.name] = slot.blob.get();
  // A loop's iterations overlap only on the lanes of a block lowered to lanes.
  const bool lanes_possible = options.compute_streams > 1 && options.lane_sequences &&
                              options.fuse && !options.skip_stream_analysis;
  for (size_t f = 0; f < funcs.size(); ++f) {
    if (funcs[f].schema != nullptr || funcs[f].source < 0) continue;
    vm::Stream* stream = streams.streams[static_cast<size_t>(streams.func_stream[f])];
    control_flow::SubBlockLowering lowering(program, registry, vm, stream, &out.cancel_,
                                            &out.ops_run_, options.release_temporaries,
                                            lanes_possible ? &out.run_number_ : nullptr);
    const ir::OpDesc& op = program.global_block().ops()[static_cast<size_t>(funcs[f].source)];
    // The op's reads are its outer reads in order, each replaced by its copy where
    // placement put one on the op's device: the frames read what the node lists (and what
    // the graph orders and keeps alive for it), not the original.
    control_flow::Bindings op_bound = bound;
    const std::vector<std::string> reads = ir::OuterReads(program, op);
    if (reads.size() != funcs[f].inputs.size()) {
      return absl::InternalError(absl::StrCat("block 0 op #", funcs[f].source, " '", op.type,
                                              "': its node lists ", funcs[f].inputs.size(),
                                              " reads for ", reads.size(), " outer reads"));
    }
    for (size_t r = 0; r < reads.size(); ++r) {
      op_bound[reads[r]] = vars.slots[static_cast<size_t>(funcs[f].inputs[r])].blob.get();
    }
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<control_flow::ControlStep> step,
                            lowering.Build(0, funcs[f].source, op, op_bound));
    funcs[f].kernel = step.get();
    out.control_steps_.push_back(std::move(step));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Builder::Run(const std::vector<std::string>& feed_names,
                                       const std::vector<std::string>& fetch_names) {
  SLUICE_RETURN_IF_ERROR(program.Validate());
  const ir::BlockDesc& block = program.global_block();
  SLUICE_ASSIGN_OR_RETURN(
      VarTable vars, CollectVars(block, feed_names, fetch_names, options.device, scope, out.io_));
  SLUICE_ASSIGN_OR_RETURN(PlacedBlock placed, ResolveAndPlace(program, block, registry,
                                                              options.device, vars, fetch_names));
  std::vector<OpFunc>& funcs = placed.funcs;
  LoweringStats& stats = out.lowering_;
  if (options.compile_subgraphs && options.compiler != nullptr) {
    FusionResult fusion = FuseSubgraphs(funcs, vars, *options.compiler);
    out.compiled_ = std::move(fusion.compiled);
    stats.compiled_subgraphs = fusion.stats.subgraphs;
    stats.fused_ops = fusion.stats.fused_ops;
    stats.compile_fallbacks = fusion.stats.fallbacks;
    stats.compile_cache_hits = fusion.stats.cache_hits;
    stats.compile_ns = fusion.stats.compile_ns;
  }
  if (options.addto) {
    const AddToStats addto = PlanAddTo(funcs, vars);
    stats.addto_sums = addto.sums_removed;
    stats.addto_writes = addto.addto_writes;
  }
  const std::vector<int> must_check = PersistablesReadBeforeWritten(funcs, vars, fetch_names);
  SLUICE_RETURN_IF_ERROR(CheckHaveValues(must_check, vars, scope));
  const DependencyGraph deps = BuildDependencies(AccessesOf(funcs), vars.size());
  const std::vector<double> start = AssignStreams(
      funcs, deps, {options.device, options.compute_streams, options.cross_stream_cost});
  SLUICE_ASSIGN_OR_RETURN(StreamTable streams, BindStreams(vm, funcs));
  SLUICE_ASSIGN_OR_RETURN(const BoundBlobs bound, BindBlobs(vm, scope, vars));
  std::vector<StreamInfo> stream_infos = DescribeStreams(vm, streams.streams);
  std::vector<bool> host_stream;
  for (const StreamInfo& info : stream_infos) host_stream.push_back(info.synchronous);
  std::vector<Node> nodes =
      PlanNodes(funcs, vars, deps, streams.func_stream, options.release_temporaries, host_stream);
  const std::vector<Segment> segments = FormSegments(nodes, options.fuse);
  const int inplace = options.inplace ? PlanInPlace(funcs, nodes, vars) : 0;
  const int handoffs =
      options.hand_off_storage ? PlanStorageHandoffs(funcs, segments, nodes, vars, host_stream) : 0;
  // After the hand-offs: they rebind slots to other blobs, and a control step binds the
  // blobs its frames read and write once, here.
  SLUICE_RETURN_IF_ERROR(BuildControlSteps(vars, streams, funcs));
  SLUICE_ASSIGN_OR_RETURN(const bool added, AddHelperStreams(streams));
  if (added) stream_infos = DescribeStreams(vm, streams.streams);
  const StreamPlan plan =
      AnalyzeStreams(nodes, segments, start, stream_infos, options.skip_stream_analysis);
  stats.ops = static_cast<int64_t>(funcs.size());
  stats.inserted_copies = placed.inserted_copies;
  stats.dependencies = deps.stats;
  stats.releases = std::count_if(nodes.begin(), nodes.end(),
                                 [](const Node& n) { return n.op < 0 && n.handoff_to < 0; });
  stats.shared_releases =
      std::count_if(nodes.begin(), nodes.end(), [](const Node& n) { return n.drops > 0; });
  stats.storage_handoffs = handoffs;
  stats.inplace_reuses = inplace;
  stats.peak_temporary_bytes = PeakTemporaryBytes(funcs, nodes, vars);
  stats.streams = static_cast<int64_t>(streams.streams.size());
  stats.stream_waits = plan.stream_waits;
  stats.record_events = plan.record_events;
  SLUICE_RETURN_IF_ERROR(Lower(vars, funcs, nodes, segments, plan, streams.streams));
  std::vector<BoundIo::DeviceCopy> feed_copies, fetch_copies;
  SLUICE_RETURN_IF_ERROR(PrepareDeviceCopies(vars, placed, feed_copies, fetch_copies));
  Commit(vars, placed, bound, must_check, std::move(feed_copies), std::move(fetch_copies));
  return absl::OkStatus();
}

absl::Status Interpreter::Builder::PrepareDeviceCopies(
    const VarTable& vars, const PlacedBlock& placed, std::vector<BoundIo::DeviceCopy>& feed_copies,
    std::vector<BoundIo::DeviceCopy>& fetch_copies) {
  using DeviceCopy = BoundIo::DeviceCopy;
  auto copy_of = [&](const VarSlot& slot, bool on_device) -> absl::StatusOr<DeviceCopy> {
    DeviceCopy copy;
    if (!on_device) return copy;
    SLUICE_ASSIGN_OR_RETURN(copy.assign,
                            registry.FindKernel("assign", slot.device.type(), slot.dtype));
    SLUICE_ASSIGN_OR_RETURN(copy.stream,
                            vm.GetStream(StreamKey{slot.device, StreamType::kCompute, 0}));
    return copy;
  };
  const IoBinding& io = out.io_;
  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  for (const std::string& name : out.feed_names_) {
    SLUICE_ASSIGN_OR_RETURN(DeviceCopy copy, copy_of(vars.slots[vars.index_of.at(name)],
                                                     listed(io.device_feeds, name)));
    feed_copies.push_back(copy);
  }
  for (size_t i = 0; i < out.fetch_names_.size(); ++i) {
    const VarSlot& slot = vars.slots[static_cast<size_t>(placed.fetch_slots[i])];
    SLUICE_ASSIGN_OR_RETURN(DeviceCopy copy, copy_of(slot, slot.device_fetch));
    fetch_copies.push_back(copy);
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Builder::Lower(const VarTable& vars, const std::vector<OpFunc>& funcs,
                                         const std::vector<Node>& nodes,
                                         const std::vector<Segment>& segments,
                                         const StreamPlan& plan,
                                         const std::vector<vm::Stream*>& streams) {
  const LoweringInput in{vars, funcs, nodes, segments, plan, streams};
  out.release_counts_ = std::make_unique<ReleaseCounts>();
  LoweringOutput lowered{out.batch_, out.sequences_, *out.release_counts_, out.lowering_,
                         SequenceCounters{&out.cancel_, &out.ops_run_, &out.run_number_}};
  const LaneSupport support = QueryLaneSupport(vm, streams);
  const bool pipelined =
      std::any_of(out.control_steps_.begin(), out.control_steps_.end(), [](const auto& kernel) {
        const auto* step = dynamic_cast<const control_flow::ControlStep*>(kernel.get());
        return step != nullptr && step->pipeline() != nullptr;
      });
  if (UseGraphLowering(support, options, streams, vm.recorder() != nullptr, pipelined) &&
      LowerToGraph(in, lowered, out.graph_)) {
    return absl::OkStatus();
  }
  if (UseLaneLowering(support, options, static_cast<int>(streams.size()))) {
    LowerToLanes(in, lowered);
    return absl::OkStatus();
  }
  return LowerToBatch(in, /*list_operands=*/support.observed, lowered);
}

// Everything checked: only now does the scope change.
void Interpreter::Builder::Commit(const VarTable& vars, const PlacedBlock& placed,
                                  const BoundBlobs& bound, const std::vector<int>& must_check,
                                  std::vector<BoundIo::DeviceCopy> feed_copies,
                                  std::vector<BoundIo::DeviceCopy> fetch_copies) {
  Scope* root = &scope;
  while (root->parent() != nullptr) root = root->parent();
  for (const auto& [name, blob] : bound.new_persistables) root->Set(name, blob);
  std::vector<BoundIo::Port> feeds, fetches;
  for (size_t i = 0; i < out.feed_names_.size(); ++i) {
    const std::string& name = out.feed_names_[i];
    feeds.push_back({name, vars.slots[vars.index_of.at(name)].blob, feed_copies[i]});
  }
  for (size_t i = 0; i < placed.fetch_slots.size(); ++i) {
    fetches.push_back(
        {out.fetch_names_[i], vars.slots[placed.fetch_slots[i]].blob, fetch_copies[i]});
  }
  out.io_stage_ = BoundIo(&vm, std::move(feeds), std::move(fetches));
  for (int v : must_check) {
    out.must_be_initialized_.emplace_back(vars.slots[v].name, vars.slots[v].blob);
  }
  for (const VarSlot& var : vars.slots) {
    if (var.kind == VarKind::kPersistable) out.persistables_.emplace_back(var.name, var.blob);
    out.blobs_.push_back(var.blob);
  }
  out.devices_ = bound.devices;
}

absl::StatusOr<std::unique_ptr<Interpreter>> Interpreter::Build(
    const ir::ProgramDesc& program, const ops::OpRegistry* registry, vm::VirtualMachine* vm,
    Scope* scope, const std::vector<std::string>& feed_names,
    const std::vector<std::string>& fetch_names, InterpreterOptions options, const IoBinding& io) {
  if (registry == nullptr || vm == nullptr || scope == nullptr) {
    return absl::InvalidArgumentError("Interpreter::Build: null registry, VM or scope");
  }
  std::unique_ptr<Interpreter> interpreter(new Interpreter());
  interpreter->vm_ = vm;
  interpreter->feed_names_ = feed_names;
  interpreter->fetch_names_ = fetch_names;
  interpreter->io_ = io;
  Builder builder{program, *registry, *vm, *scope, options, *interpreter};
  SLUICE_RETURN_IF_ERROR(builder.Run(feed_names, fetch_names));
  return interpreter;
}

Interpreter::~Interpreter() = default;

absl::Status Interpreter::CheckInitialized() const {
  for (const auto& [name, blob] : must_be_initialized_) {
    if (blob->storage() == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", name,
                       "' has no value: run the startup program or load parameters first"));
    }
  }
  for (const auto& [name, blob] : persistables_) {
    if (blob->poisoned()) {
      return absl::FailedPreconditionError(
          absl::StrCat("persistable '", name, "' was not updated by a failed run (",
                       blob->poison().message(), "); run the startup program or load it again"));
    }
  }
  return absl::OkStatus();
}

bool Interpreter::BindingsMatch(const Scope& scope) const {
  for (const auto& [name, blob] : persistables_) {
    const vm::BlobRef* found = scope.Find(name);
    if (found == nullptr || *found != blob) return false;
  }
  return true;
}

absl::Status Interpreter::Submit() {
  cancel_.store(false, std::memory_order_relaxed);
  // Before the batch: it does not order itself after the copies (a Cancel meanwhile holds).
  SLUICE_RETURN_IF_ERROR(io_stage_.WaitForPendingCopies());
  // Lane sequences tell this run's progress from the previous run's by this number.
  run_number_.fetch_add(1, std::memory_order_relaxed);
  return batch_.Submit(vm_);
}

}  // namespace sluice::framework
