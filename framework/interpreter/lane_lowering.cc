#include "framework/interpreter/lane_lowering.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "framework/interpreter/control_flow/control_step.h"
#include "framework/interpreter/control_flow/loop_pipeline.h"

namespace sluice::framework {

LaneSupport QueryLaneSupport(const vm::VirtualMachine& vm,
                             const std::vector<vm::Stream*>& streams) {
  LaneSupport support;
  support.host_lanes = vm.CanRunLanes(streams);
  support.observed = vm.ObservesSteps();
  return support;
}

bool UseLaneLowering(const LaneSupport& support, const InterpreterOptions& options, int streams) {
  return options.lane_sequences && options.fuse && !options.skip_stream_analysis && streams > 1 &&
         support.host_lanes;
}

namespace {

// The lanes, other than `driver`'s, that may hold a helper of the loop at node `loop`,
// reached at `position` of the plan's order. A helper keeps its lane's worker until the
// loop ends, so a lane qualifies only when none of its later ops could run before that:
// each depends on the loop (releases do not count: they only free storage later).
std::vector<bool> HelperLanes(const LoweringInput& in, size_t position, int loop, int driver) {
  std::vector<bool> after(in.nodes.size(), false);  // depends on the loop
  after[static_cast<size_t>(loop)] = true;
  for (size_t b = static_cast<size_t>(loop) + 1; b < in.nodes.size(); ++b) {
    for (int p : in.nodes[b].preds) {
      if (after[static_cast<size_t>(p)]) {
        after[b] = true;
        break;
      }
    }
  }
  std::vector<bool> lanes(in.streams.size(), true);
  lanes[static_cast<size_t>(driver)] = false;
  for (size_t j = position + 1; j < in.plan.order.size(); ++j) {
    const StreamItem& item = in.plan.items[static_cast<size_t>(in.plan.order[j])];
    if (item.kind != StreamItem::Kind::kSequence) continue;
    for (int b : in.segments[static_cast<size_t>(item.segment)].nodes) {
      if (in.nodes[static_cast<size_t>(b)].op >= 0 && !after[static_cast<size_t>(b)]) {
        lanes[static_cast<size_t>(item.to)] = false;
      }
    }
  }
  return lanes;
}

}  // namespace

void LowerToLanes(const LoweringInput& in, LoweringOutput& out) {
  const int k = static_cast<int>(in.streams.size());
  const std::vector<StreamItem>& items = in.plan.items;
  std::vector<std::unique_ptr<vm::StepSequence>> lanes(k);
  for (int s = 0; s < k; ++s) lanes[s] = NewSequence(out.counters);
  std::vector<int> passed_after(in.segments.size(), 0);  // lane steps once it is appended
  // Each wait goes right before the segment that needs it, not where the StreamWait's key
  // would put it: a wait placed earlier would idle the lane while segments ahead of the
  // consumer, which do not need it, could run.
  std::vector<std::vector<int>> waits_for(in.segments.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind == StreamItem::Kind::kStreamWait) waits_for[items[i].segment].push_back(i);
  }
  for (size_t position = 0; position < in.plan.order.size(); ++position) {
    const StreamItem& item = items[in.plan.order[position]];
    if (item.kind != StreamItem::Kind::kSequence) continue;
    vm::StepSequence& lane = *lanes[item.to];
    for (int w : waits_for[item.segment]) {
      // The producer's segment has a smaller key than this one, so it is in its lane.
      lane.AddWait(lanes[items[w].from].get(), passed_after[items[w].from_segment]);
    }
    AppendSegment(in, in.segments[item.segment], lane, out.release_counts, [&](int b, int step) {
      // A pipelined loop: the other lanes that can spare their worker run a helper here.
      const auto* control =
          dynamic_cast<const control_flow::ControlStep*>(in.funcs[in.nodes[b].op].kernel);
      if (control == nullptr || control->pipeline() == nullptr) return;
      const std::vector<bool> helpers = HelperLanes(in, position, b, item.to);
      if (std::find(helpers.begin(), helpers.end(), true) == helpers.end()) return;
      lane.AnnounceAt(step + 1);
      const vm::OpKernel& helper = control->pipeline()->NewHelper(&lane, step);
      for (int s = 0; s < k; ++s) {
        if (helpers[s]) lanes[s]->AddCall(helper, {}, {}, nullptr);
      }
      ++out.stats.pipelined_loops;
    });
    passed_after[item.segment] = lane.steps();
  }
  for (int s = 0; s < k; ++s) {
    lanes[s]->Close();
    out.batch.AddOpCall(*lanes[s], {}, {}, nullptr, in.streams[s]);
    ++out.stats.op_sequences;
    out.sequences.push_back(std::move(lanes[s]));
  }
  out.stats.lane_sequences = k;
  out.stats.instructions = out.batch.size();
}

}  // namespace sluice::framework
