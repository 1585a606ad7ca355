// The list schedule: which compute stream each op without a fixed stream runs on, and when
// it starts in schedule time (one unit per op). The start times also order the stream
// plan's instructions (stream_analysis.h).
#ifndef SLUICE_FRAMEWORK_INTERPRETER_LIST_SCHEDULE_H_
#define SLUICE_FRAMEWORK_INTERPRETER_LIST_SCHEDULE_H_

#include <vector>

#include "core/device.h"
#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

struct ListScheduleOptions {
  Device device{DeviceType::kCpu, 0};  // whose compute streams the schedule fills
  int compute_streams = 1;             // values < 1 count as 1
  double cross_stream_cost = 2.0;      // in ops; negative counts as 0
};

// Walks `funcs` in order (`deps.predecessors` gives each func's inputs, all earlier). An op
// starts on a stream once that stream is free and each input is done — plus the cross
// cost for an input from another stream. An op without a stream goes to the compute
// stream of `options.device` with the lowest start plus the cross cost per input from
// elsewhere (ties: the stream of the latest-finishing input, else the lowest index), and
// its `stream` is set. An op with a fixed stream keeps it; it occupies a scheduled stream
// when that is one of the compute streams being filled. Returns each func's start time.
// Pure function apart from setting `stream`.
std::vector<double> AssignStreams(std::vector<OpFunc>& funcs, const DependencyGraph& deps,
                                  const ListScheduleOptions& options);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_LIST_SCHEDULE_H_
