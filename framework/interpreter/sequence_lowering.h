// What both back ends (lane_lowering.h, batch_lowering.h) share: the lowered graph and
// stream plan they read, where they put the instructions, and how a segment's nodes become
// the steps of a StepSequence.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_SEQUENCE_LOWERING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_SEQUENCE_LOWERING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/interpreter/lowered_graph.h"
#include "vm/precomputed_batch.h"
#include "vm/release_count.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"

namespace sluice::framework {

// A back end's input: a bound, segmented graph and its stream plan. Read only.
struct LoweringInput {
  const VarTable& vars;  // every slot bound to a blob
  const std::vector<OpFunc>& funcs;
  const std::vector<Node>& nodes;
  const std::vector<Segment>& segments;
  const StreamPlan& plan;
  const std::vector<vm::Stream*>& streams;  // by stream index
};

// The counters every sequence of one interpreter shares; they must outlive the sequences.
struct SequenceCounters {
  const std::atomic<bool>* cancel = nullptr;
  std::atomic<int64_t>* ops_run = nullptr;
  const std::atomic<uint32_t>* run_number = nullptr;
};

// The counts of the shared releases (gc_plan.h), one per variable, made on first use.
// Owned with the sequences, which keep raw pointers to them. Thread-compatible.
class ReleaseCounts {
 public:
  vm::ReleaseCount* For(int var, int drops);

 private:
  absl::flat_hash_map<int, std::unique_ptr<vm::ReleaseCount>> counts_;
};

// Where a back end puts its work: the batch it appends to, the owner of the sequences the
// batch's instructions run and of their release counts, and the statistics it counts
// (op_sequences, lane_sequences, instructions, edges).
struct LoweringOutput {
  vm::PrecomputedBatch& batch;
  std::vector<std::unique_ptr<vm::StepSequence>>& sequences;
  ReleaseCounts& release_counts;
  LoweringStats& stats;
  SequenceCounters counters;
};

// An empty sequence wired to `counters`.
std::unique_ptr<vm::StepSequence> NewSequence(const SequenceCounters& counters);

// Appends `segment`'s nodes to `sequence`: an op call per op func (on the slots' blobs), a
// release per release node that hands its storage to no one (a shared one drops its
// variable's count in `counts`).
// `on_call` (optional) learns each op call's node index and step number in `sequence`.
void AppendSegment(
    const LoweringInput& in, const Segment& segment, vm::StepSequence& sequence,
    ReleaseCounts& counts, absl::FunctionRef<void(int node, int step)> on_call = [](int, int) {});

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_SEQUENCE_LOWERING_H_
