// Segment formation (fusion): consecutive nodes of one stream become one segment — one
// StepSequence at run time — as long as their dependences on other streams come only into
// the segment's first node and out of its last.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_SEGMENTS_H_
#define SLUICE_FRAMEWORK_INTERPRETER_SEGMENTS_H_

#include <vector>

#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// Walks `nodes` in order and sets each node's `segment`. A node starts a new segment of its
// stream when it depends on a node of another stream, when the stream's open segment
// ended at a node another stream depends on, or always when `fuse` is false. Segments are
// numbered in order of their first node; `position` counts the segments of each stream.
// Pure function apart from setting `segment`.
std::vector<Segment> FormSegments(std::vector<Node>& nodes, bool fuse);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_SEGMENTS_H_
