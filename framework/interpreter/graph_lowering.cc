#include "framework/interpreter/graph_lowering.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sluice::framework {

bool UseGraphLowering(const LaneSupport& support, const InterpreterOptions& options,
                      const std::vector<vm::Stream*>& streams, bool recording, bool pipelined) {
  const bool all_compute = std::all_of(streams.begin(), streams.end(), [](const vm::Stream* s) {
    return s->key().type == StreamType::kCompute;
  });
  return options.work_sharing && all_compute && !recording && !pipelined &&
         UseLaneLowering(support, options, static_cast<int>(streams.size()));
}

absl::StatusOr<GraphTasks> PlanGraphTasks(const std::vector<OpFunc>& funcs,
                                          const std::vector<Node>& nodes, int num_vars) {
  GraphTasks tasks;
  std::vector<int> of_node(nodes.size(), -1);
  for (size_t b = 0; b < nodes.size(); ++b) {
    if (nodes[b].op >= 0 || tasks.nodes.empty()) tasks.nodes.emplace_back();
    tasks.nodes.back().push_back(static_cast<int>(b));
    of_node[b] = static_cast<int>(tasks.nodes.size()) - 1;
  }
  std::vector<std::vector<int>>& preds = tasks.preds;
  preds.assign(tasks.nodes.size(), {});
  std::vector<int> first_writer(static_cast<size_t>(num_vars), -1);  // node
  for (size_t b = 0; b < nodes.size(); ++b) {
    const Node& node = nodes[b];
    const int t = of_node[b];
    for (int p : node.preds) {
      if (of_node[static_cast<size_t>(p)] != t) preds[t].push_back(of_node[p]);
    }
    if (node.op < 0) continue;
    for (int v : funcs[static_cast<size_t>(node.op)].outputs) {
      if (first_writer[static_cast<size_t>(v)] < 0) first_writer[v] = static_cast<int>(b);
    }
  }
  for (size_t r = 0; r < nodes.size(); ++r) {
    const Node& release = nodes[r];
    if (release.op >= 0 || release.handoff_to < 0) continue;
    const int w = first_writer[static_cast<size_t>(release.handoff_to)];
    const int taker = w < 0 ? -1 : of_node[static_cast<size_t>(w)];
    const int giver = of_node[r];
    if (taker > giver) {
      preds[taker].push_back(giver);
    } else if (taker < giver) {
      return absl::InternalError(absl::StrCat("node ", r, " hands its storage to var slot ",
                                              release.handoff_to, ", first written before it"));
    }
    // taker == giver: in place, the taker being the op this release follows. The release's
    // predecessors (the input's other touchers) are its task's already.
  }
  for (size_t t = 0; t < preds.size(); ++t) {
    std::vector<int>& list = preds[t];
    list.erase(std::remove(list.begin(), list.end(), static_cast<int>(t)), list.end());
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return tasks;
}

bool LowerToGraph(const LoweringInput& in, LoweringOutput& out,
                  std::unique_ptr<vm::StepGraph>& graph) {
  const absl::StatusOr<GraphTasks> tasks =
      PlanGraphTasks(in.funcs, in.nodes, static_cast<int>(in.vars.slots.size()));
  if (!tasks.ok()) return false;
  graph = std::make_unique<vm::StepGraph>(out.counters.run_number, out.counters.ops_run);
  SequenceCounters task_counters = out.counters;
  task_counters.ops_run = nullptr;  // the graph's members count for their tasks
  for (size_t t = 0; t < tasks->nodes.size(); ++t) {
    std::unique_ptr<vm::StepSequence> task = NewSequence(task_counters);
    Segment part;
    part.nodes = tasks->nodes[t];
    AppendSegment(in, part, *task, out.release_counts);
    task->Close();
    graph->AddTask(std::move(task), tasks->preds[t]);
  }
  const int members = static_cast<int>(in.streams.size());
  graph->Close(members);
  for (int s = 0; s < members; ++s) {
    out.batch.AddOpCall(graph->member(s), {}, {}, nullptr, in.streams[static_cast<size_t>(s)]);
  }
  out.stats.graph_tasks = graph->tasks();
  out.stats.op_sequences = graph->tasks();
  out.stats.instructions = out.batch.size();
  return true;
}

}  // namespace sluice::framework
