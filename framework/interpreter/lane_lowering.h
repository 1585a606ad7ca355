// Lane lowering, one back end of the interpreter: each stream's segments become ONE
// StepSequence (a lane), in dispatch order, and each StreamWait a wait step inside the
// consumer's lane right before the segment that needs it (vm/step_sequence.h). A run is then
// one instruction per stream instead of one per segment and sync.
//
// Only sound when every stream is synchronous (cpu) and runs on a worker of its own: then
// every cross-stream dependence the stream analysis kept is a StreamWait honoured on the
// host — none a RecordEvent or an engine edge — and no lane is queued behind another on
// one worker while waiting for work that waits for that other lane (a copy stream shares
// compute stream 0's worker, for one). Not with VM observers either: the sync checker and
// the recorder see instructions, and waits inside a sequence are invisible to them.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_LANE_LOWERING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_LANE_LOWERING_H_

#include <vector>

#include "framework/interpreter/interpreter_options.h"
#include "framework/interpreter/sequence_lowering.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::framework {

// What the VM offers lane lowering.
struct LaneSupport {
  // Every stream runs on the host and no two streams share a worker
  // (VirtualMachine::CanRunLanes).
  bool host_lanes = false;
  // The VM has a sync checker or a recorder attached (VirtualMachine::ObservesSteps). They
  // see inside sequences — each step, and cross-sequence waits as ordering edges — so lane
  // mode runs under them as it does without.
  bool observed = false;
};

// The one place the build asks the VM what it supports (its capability queries); changes
// nothing.
LaneSupport QueryLaneSupport(const vm::VirtualMachine& vm, const std::vector<vm::Stream*>& streams);

// Lane lowering is used when `options` ask for it (lane_sequences and fuse on, stream
// analysis not skipped), there is more than one stream, and the streams can run as lanes.
bool UseLaneLowering(const LaneSupport& support, const InterpreterOptions& options, int streams);

// One lane per stream of `in.streams`, appended to `out.batch` in stream order, with no
// edges between them. `in.plan` must hold no kRecordEvent and no engine edge between
// streams (what UseLaneLowering guarantees).
void LowerToLanes(const LoweringInput& in, LoweringOutput& out);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_LANE_LOWERING_H_
