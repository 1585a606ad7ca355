// When a StreamWait (one stream waiting on another's event) stands in for the engine
// ordering two streams, stated once on the facts the rule needs: for the live streams of a
// VM (vm/stream.h: CanStreamWait and WaitsOnHost on vm::Stream) and for the streams a record
// replays on (vm/replay_plan.h), so that the replay plan and the engine cannot disagree.
// Pure functions of value types; any thread.
#ifndef SLUICE_VM_STREAM_WAIT_RULE_H_
#define SLUICE_VM_STREAM_WAIT_RULE_H_

#include <cstdint>

#include "core/device.h"

namespace sluice::vm {

// What the rule needs to know of a stream. Value type.
struct StreamWaitFacts {
  Device device;
  bool synchronous = false;  // its work runs on its worker as launched (cpu)
  int64_t worker = 0;        // its worker (ThreadCtx); streams of one worker run in order
};

// Synchronous streams of two different workers: a StreamWait between them is honoured on
// the host, by the consumer's worker (Instruction::HostWait), not by a device.
inline bool WaitsOnHost(const StreamWaitFacts& from, const StreamWaitFacts& to) {
  return from.synchronous && to.synchronous && from.worker != to.worker;
}

// Whether a StreamWait from `from` to `to` means something: two different streams
// (`same_stream` false) of one device that is asynchronous (a device-side wait), or
// synchronous streams of two workers (WaitsOnHost).
inline bool CanStreamWait(const StreamWaitFacts& from, const StreamWaitFacts& to,
                          bool same_stream) {
  if (same_stream || from.device != to.device) return false;
  return from.device.IsAsync() || WaitsOnHost(from, to);
}

}  // namespace sluice::vm

#endif  // SLUICE_VM_STREAM_WAIT_RULE_H_
