// Replay planning: what replaying a RecordedProgram (vm/record_reader.h) needs decided before
// any instruction is built, as a pure pass over the record and the facts of the streams it
// will run on (after the device map). The Replayer resolves streams and kernels on its VM,
// hands their facts here, and then only builds what the plan says.
//
// The plan decides:
//  - each blob's last use (the instruction after which the replay drops it; -1: kept to the
//    end, because a checksum or a control-flow expansion names it) and whether it is lazy
//    (used again after a release line: a precomputed graph's temporary, allocated by its
//    writer each run, as when recorded);
//  - each recorded StreamWait that the mapped streams cannot express (two cpu streams of one
//    worker, two devices, one stream): it is replayed as a RecordEvent on its source, the
//    soft sync the VM's builder writes itself for such a pair;
//  - for each batch, which StepSequences with cross-sequence waits are rebuilt as lanes (one
//    instruction each): only when each runs on its own host stream with its own worker, and
//    every edge into a lane comes from a place before the lane's first step;
//  - for each wait of a step not rebuilt as a lane, how the awaited step is ordered before
//    it, as the interpreter orders streams without lanes (framework/interpreter/
//    stream_analysis.h): an engine edge when the engine orders it by itself (same stream, or
//    host work not waited for on the host), else a StreamWait within one device, else a
//    RecordEvent across devices.
#ifndef SLUICE_VM_REPLAY_PLAN_H_
#define SLUICE_VM_REPLAY_PLAN_H_

#include <vector>

#include "core/device.h"
#include "vm/record_reader.h"
#include "vm/stream_wait_rule.h"

namespace sluice::vm {

// What the plan needs to know of a stream: what the stream-wait rule needs
// (vm/stream_wait_rule.h, whose CanStreamWait and WaitsOnHost the plan applies). Value type.
using ReplayStreamFacts = StreamWaitFacts;

// Where the record's lines run, after the device map: dense indices into `streams`. Value
// type.
struct ReplayTopology {
  std::vector<ReplayStreamFacts> streams;
  std::vector<int> instruction_stream;       // per instruction; -1 for a barrier
  std::vector<int> instruction_wait_target;  // per instruction: a StreamWait's target, else -1
};

// The StepSequences of one batch rebuilt as lanes. Empty `lane`: none rebuilt.
struct ReplayLanes {
  std::vector<int> lane;                    // per batch position: its lane, or -1
  std::vector<std::vector<int>> positions;  // per lane: its steps' positions, in order
};

// How a wait of a step outside the lanes is ordered (see the file comment).
enum class ReplayWaitOrder { kEngineEdge, kStreamWait, kRecordEvent };

struct ReplayPlan {
  std::vector<int> last_use;         // per blob: last instruction index; -1: keep
  std::vector<bool> lazy;            // per blob
  std::vector<bool> wait_as_record;  // per instruction: a StreamWait replayed as a record
  std::vector<ReplayLanes> lanes;    // per batch
  // Per instruction, per entry of its `waits`: how it is ordered when the step is not in a
  // lane (entries of steps in lanes are unused).
  std::vector<std::vector<ReplayWaitOrder>> wait_orders;
};

// Plans `program` on `topology` (sized as the program; every instruction but barriers has a
// stream, and each StreamWait a target). `rebuild_lanes` false: no lanes (ReplayOptions).
// Pure function; thread-safe.
ReplayPlan PlanReplay(const RecordedProgram& program, const ReplayTopology& topology,
                      bool rebuild_lanes);

}  // namespace sluice::vm

#endif  // SLUICE_VM_REPLAY_PLAN_H_
