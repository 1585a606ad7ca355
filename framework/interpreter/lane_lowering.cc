#include "framework/interpreter/lane_lowering.h"

#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "framework/interpreter/control_flow/control_step.h"
#include "framework/interpreter/control_flow/loop_pipeline.h"
#include "vm/stream_policy.h"

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
  for (int i : in.plan.order) {
    const StreamItem& item = items[i];
    if (item.kind != StreamItem::Kind::kSequence) continue;
    vm::StepSequence& lane = *lanes[item.to];
    for (int w : waits_for[item.segment]) {
      // The producer's segment has a smaller key than this one, so it is in its lane.
      lane.AddWait(lanes[items[w].from].get(), passed_after[items[w].from_segment]);
    }
    AppendSegment(in, in.segments[item.segment], lane, out.release_counts, [&](int f, int step) {
      // A pipelined loop: every other lane runs a helper at this point of the work.
      const auto* control = dynamic_cast<const control_flow::ControlStep*>(in.funcs[f].kernel);
      if (control == nullptr || control->pipeline() == nullptr) return;
      lane.AnnounceAt(step + 1);
      const vm::OpKernel& helper = control->pipeline()->NewHelper(&lane, step);
      for (int s = 0; s < k; ++s) {
        if (s != item.to) lanes[s]->AddCall(helper, {}, {}, nullptr);
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
