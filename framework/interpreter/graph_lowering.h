// Graph lowering, the back end for host streams under load: the block's nodes become the
// tasks of one vm::StepGraph, which the streams' workers run as a team, each taking
// whatever task is ready (vm/step_graph.h says why: a worker that loses its core holds up
// one task, not a lane). A run is one member instruction per stream.
//
// Tasks. Each op node starts a task; the release nodes that follow it in node order join
// it. A task waits for the tasks holding its nodes' predecessors. Node order is a
// topological order and every predecessor is an earlier node, so the tasks' edges point
// backwards and the graph has no cycle.
//
// What stream order gave lanes, edges give here. The dependence graph orders accesses of
// one variable; two variables share a blob only where a release handed its storage on
// (storage_handoff.h, inplace_pass.h), which lanes order by stream order alone. So:
//  - a hand-off: the taker's first write waits for the release's task (and so for every
//    toucher of the giver, which the release waits for);
//  - in place: the input's release follows the op that takes its storage, in that op's
//    task, so the task waits for the release's predecessors (the input's other touchers)
//    before the op writes over the input.
// Shared releases (gc_plan.h) stay drops of one count: the last to run frees.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_GRAPH_LOWERING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_GRAPH_LOWERING_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/interpreter/interpreter_options.h"
#include "framework/interpreter/lane_lowering.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/interpreter/sequence_lowering.h"
#include "vm/step_graph.h"

namespace sluice::framework {

// Graph lowering is used where lane lowering would be (UseLaneLowering), with
// `options.work_sharing` on, every stream a compute stream (a task may run on any member's
// stream: a collective must stay on its ccl stream, in the order every rank issues it), no
// recorder attached (it writes sequences and waits, not graphs) and no pipelined loop in the
// block (its helpers need lanes).
bool UseGraphLowering(const LaneSupport& support, const InterpreterOptions& options,
                      const std::vector<vm::Stream*>& streams, bool recording, bool pipelined);

// The tasks and their edges (the rules above). Pure function; InternalError when a
// hand-off's taker comes before its release in node order (no plan makes one).
struct GraphTasks {
  std::vector<std::vector<int>> nodes;  // per task, its node indices, ascending
  std::vector<std::vector<int>> preds;  // per task, its predecessor tasks, ascending
};
absl::StatusOr<GraphTasks> PlanGraphTasks(const std::vector<OpFunc>& funcs,
                                          const std::vector<Node>& nodes, int num_vars);

// Builds the graph into `graph` and appends one member per stream of `in.streams` to
// `out.batch`. Returns false, with nothing appended, when a hand-off's taker comes before
// its release in node order (no plan makes one; the caller then lowers to lanes).
bool LowerToGraph(const LoweringInput& in, LoweringOutput& out,
                  std::unique_ptr<vm::StepGraph>& graph);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_GRAPH_LOWERING_H_
