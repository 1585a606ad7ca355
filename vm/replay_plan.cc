#include "vm/replay_plan.h"

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace sluice::vm {

namespace {

bool IsStep(const RecordedInstruction& r) {
  return r.kind == InstructionKind::kOpCall || r.kind == InstructionKind::kRelease;
}

// Last uses and laziness over the instructions, then the expansions' blobs and the
// checksummed blobs kept to the end.
void PlanBlobs(const RecordedProgram& program, ReplayPlan& plan) {
  plan.last_use.assign(program.blobs.size(), -1);
  plan.lazy.assign(program.blobs.size(), false);
  std::vector<bool> released(program.blobs.size(), false);
  for (size_t n = 0; n < program.instructions.size(); ++n) {
    const RecordedInstruction& r = program.instructions[n];
    for (int b : r.inputs) plan.last_use[b] = static_cast<int>(n);
    for (int b : r.outputs) plan.last_use[b] = static_cast<int>(n);
    if (r.kind == InstructionKind::kRelease) {
      for (int b : r.outputs) released[b] = true;
      continue;
    }
    for (int b : r.inputs) plan.lazy[b] = plan.lazy[b] || released[b];
    for (int b : r.outputs) plan.lazy[b] = plan.lazy[b] || released[b];
  }
  // An expansion's blobs (a loop's frames, reused by every run of the graph) live to the
  // end; one it releases is written again by a later step or run: lazy.
  for (const RecordedExpansion& expansion : program.expansions) {
    for (const RecordedInstruction& step : expansion.steps) {
      for (int b : step.inputs) plan.last_use[b] = -1;
      for (int b : step.outputs) plan.last_use[b] = -1;
      if (step.kind == InstructionKind::kRelease) {
        for (int b : step.outputs) plan.lazy[b] = true;
      }
    }
  }
  for (const RecordedChecksum& c : program.checksums) plan.last_use[c.blob] = -1;
}

ReplayLanes PlanLanes(const RecordedProgram& program, const ReplayTopology& topology, int b) {
  const int begin = program.batch_begin[b];
  const int size = program.batch_size[b];
  const auto at = [&](int p) -> const RecordedInstruction& {
    return program.instructions[begin + p];
  };
  absl::flat_hash_set<uint64_t> waiting;  // sequences that wait or are waited for
  for (int p = 0; p < size; ++p) {
    for (const RecordedInstruction::Wait& wait : at(p).waits) {
      waiting.insert(at(p).seq);
      waiting.insert(wait.source_seq);
    }
  }
  ReplayLanes plan;
  if (waiting.empty()) return plan;
  std::vector<int> lane(size, -1);
  absl::flat_hash_map<uint64_t, int> lane_of;
  std::vector<int> streams;  // per lane
  for (int p = 0; p < size; ++p) {
    const RecordedInstruction& r = at(p);
    if (!waiting.contains(r.seq)) continue;
    const int stream = topology.instruction_stream[begin + p];
    auto [it, added] = lane_of.emplace(r.seq, static_cast<int>(plan.positions.size()));
    if (added) {
      plan.positions.emplace_back();
      streams.push_back(stream);
    }
    if (!IsStep(r) || stream != streams[it->second]) return ReplayLanes();
    lane[p] = it->second;
    plan.positions[it->second].push_back(p);
  }
  // One sequence per worker, each on a host stream that runs on its worker
  // (StepSequence::AddWait; VirtualMachine::CanRunLanes).
  absl::flat_hash_set<int64_t> workers;
  for (int s : streams) {
    const ReplayStreamFacts& facts = topology.streams[s];
    if (!facts.synchronous || !workers.insert(facts.worker).second) return ReplayLanes();
  }
  // A lane becomes one instruction at its first step's place: every edge into it from
  // outside must come from a place before that.
  for (size_t l = 0; l < plan.positions.size(); ++l) {
    const int first = plan.positions[l].front();
    for (int p : plan.positions[l]) {
      for (int a : at(p).after) {
        if (lane[a] == static_cast<int>(l)) continue;
        const int place = lane[a] >= 0 ? plan.positions[lane[a]].front() : a;
        if (place >= first) return ReplayLanes();
      }
    }
  }
  plan.lane = std::move(lane);
  return plan;
}

ReplayWaitOrder OrderWait(const ReplayTopology& topology, int source, int target) {
  const int from = topology.instruction_stream[source];
  const int to = topology.instruction_stream[target];
  const ReplayStreamFacts& f = topology.streams[from];
  const ReplayStreamFacts& t = topology.streams[to];
  if (from == to || (f.synchronous && !WaitsOnHost(f, t))) return ReplayWaitOrder::kEngineEdge;
  return CanStreamWait(f, t, /*same_stream=*/false) ? ReplayWaitOrder::kStreamWait
                                                    : ReplayWaitOrder::kRecordEvent;
}

}  // namespace

ReplayPlan PlanReplay(const RecordedProgram& program, const ReplayTopology& topology,
                      bool rebuild_lanes) {
  ReplayPlan plan;
  PlanBlobs(program, plan);
  const size_t n = program.instructions.size();
  plan.wait_as_record.assign(n, false);
  plan.wait_orders.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RecordedInstruction& r = program.instructions[i];
    if (r.kind == InstructionKind::kStreamWait) {
      const int from = topology.instruction_stream[i];
      const int to = topology.instruction_wait_target[i];
      plan.wait_as_record[i] =
          !CanStreamWait(topology.streams[from], topology.streams[to], from == to);
    }
    if (r.batch < 0) continue;
    const int begin = program.batch_begin[r.batch];
    for (const RecordedInstruction::Wait& wait : r.waits) {
      plan.wait_orders[i].push_back(
          OrderWait(topology, begin + wait.source_position, static_cast<int>(i)));
    }
  }
  plan.lanes.resize(program.batch_begin.size());
  if (rebuild_lanes) {
    for (size_t b = 0; b < program.batch_begin.size(); ++b) {
      plan.lanes[b] = PlanLanes(program, topology, static_cast<int>(b));
    }
  }
  return plan;
}

}  // namespace sluice::vm
