// Storage hand-off: where the GC plan releases a temporary and, a little later on the same
// stream, an op first writes another temporary of the same device, type and shape, the
// released storage goes straight to the new temporary — the release runs no step and the
// write allocates nothing. The allocator is skipped twice per such pair, which in a chain
// of same-sized ops is every op.
//
// The rule, for a release node r of temporary X and an op node w that first writes
// temporary Y (Y neither fed, fetched nor persistable):
//  - r and w are on one stream, w after r (a stream's segments run in order: one lane, or
//    instructions chained on the stream) — on a device stream, in one segment: there the
//    host runs far ahead of the device, and storage held from r to a w in a later segment
//    would keep other streams from reusing it (the stream-ordered allocator lets them have
//    a freed block once its stream is fenced), which raised the measured peak;
//  - no op of that stream between r and w first-writes a temporary without taking a
//    released one (no allocation between them: what the stream holds between r and w is
//    then a subset of what was live at X's last use, so peak bytes stay at the liveness
//    bound);
//  - r is not one drop of a shared release (gc_plan.h: the last drop to run frees);
//  - X and Y have the same device, data type and shape.
// Then Y is bound to X's blob and r is marked `handoff_to = Y`: the back ends emit no step
// for it, but it stays in the graph as an ordering point (a release waits for X's readers
// on other streams, and so Y's first write to the same blob does too, being later on r's
// stream). Several released
// temporaries may wait for takers at once; each goes to at most one. A taker may hand its
// storage on in turn, so a chain of same-sized temporaries runs on two blobs.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_STORAGE_HANDOFF_H_
#define SLUICE_FRAMEWORK_INTERPRETER_STORAGE_HANDOFF_H_

#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// Plans the hand-offs over `segments` (FormSegments' result over `nodes`): sets
// `handoff_to` on the release nodes that hand off and rebinds each taker's slot in `vars`
// to the giver's blob (slots must be bound: BindBlobs). Returns the number of hand-offs.
// Without release nodes (GC plan off) nothing changes.
// `host_stream[s]`: stream s runs on the host (StreamInfo::synchronous; empty: none does).
int PlanStorageHandoffs(const std::vector<OpFunc>& funcs, const std::vector<Segment>& segments,
                        std::vector<Node>& nodes, VarTable& vars,
                        const std::vector<bool>& host_stream = {});

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_STORAGE_HANDOFF_H_
