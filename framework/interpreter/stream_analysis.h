// Stream analysis: the synchronization a placed, segmented graph needs between its streams,
// as a plan of items (lowered_graph.h's StreamItem) a back end turns into instructions.
//
// Every segment becomes a kSequence item. A dependence of segment c on segment p of
// another stream becomes:
//  - a plain item edge when the engine orders it by itself: p's stream is synchronous
//    (cpu) and either c's stream is not, or both run on the same worker;
//  - otherwise, on one device, a kStreamWait (recorded on p's stream right after p, waited
//    for on c's stream before c);
//  - otherwise (an asynchronous stream feeding another device), a kRecordEvent after p,
//    one per producing segment, that c's sequence depends on.
// A wait or record already implied by earlier ones is not emitted: each stream keeps a
// vector clock (per stream, the last segment position known complete), and a dependence on
// a position the consumer's stream already knows is dropped. Dependences are visited latest
// producer first, since a sync with a later segment of a stream covers its earlier ones.
// Each segment also depends on the previous segment of its stream.
//
// Items carry a key, their list-schedule time: a sync goes just before the end of its
// producer's segment, a sequence at its segment's start but after everything it depends on.
// Dispatching in key order puts a sync right behind its producer on the producer's stream.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_STREAM_ANALYSIS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_STREAM_ANALYSIS_H_

#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// `nodes` and `segments` as FormSegments left them (node and segment streams index
// `streams`); `op_start[f]`: op func f's list-schedule start. With `skip_stream_analysis`
// (testing the sync checker) every cross-stream dependence is a plain item edge. Pure
// function; thread-safe.
StreamPlan AnalyzeStreams(const std::vector<Node>& nodes, const std::vector<Segment>& segments,
                          const std::vector<double>& op_start,
                          const std::vector<StreamInfo>& streams, bool skip_stream_analysis);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_STREAM_ANALYSIS_H_
