// Buffer planning inside a compiled subgraph (docs/design.md, "Subgraph compilation"). The
// group's inputs and outputs belong to the main graph (its GC plan frees them; the group
// neither allocates nor frees them). Every value a node computes is materialized in a
// buffer of its own while it is live — from its node to its last reader, or to the end for
// an output, which is stored once everything is computed — and buffers are reused by
// liveness: a BufferMalloc step before the node that defines a value takes a free buffer
// (or a new one), a BufferFree step after a value's last reader gives it back.
//
// A buffer holds one tile of any dtype the compiler supports (kBufferElementBytes per
// element): the cpu back end evaluates the group tile by tile, so "a buffer" is a tile's
// worth of one value. The peak number of buffers in use is the liveness bound: the largest
// number of values live at once.
//
// Value types; PlanBuffers is a pure function.
#ifndef SLUICE_FRAMEWORK_COMPILER_BUFFER_PLAN_H_
#define SLUICE_FRAMEWORK_COMPILER_BUFFER_PLAN_H_

#include <cstdint>
#include <vector>

#include "framework/compiler/subgraph.h"

namespace sluice::framework::compiler {

// Bytes per element of a buffer: the widest dtype (f64).
inline constexpr int64_t kBufferElementBytes = 8;

struct BufferStep {
  enum class Kind { kMalloc, kCompute, kFree };
  Kind kind = Kind::kCompute;
  int value = -1;   // the value allocated, computed or freed
  int buffer = -1;  // its buffer
};

struct BufferPlan {
  std::vector<int> buffer_of;     // per value: its buffer; -1 for inputs (read in place)
  std::vector<BufferStep> steps;  // in order: per node Malloc, Compute, Frees
  int num_buffers = 0;            // distinct buffers created
  int peak_buffers = 0;           // most buffers allocated at once
};

// Plans `graph` (which must be valid: Subgraph::Validate).
BufferPlan PlanBuffers(const Subgraph& graph);

// The liveness bound, computed from def-use alone: the largest number of node values live
// at once, where a value is live from its node through its last reader (through the last
// node for an output). What PlanBuffers must reach.
int LivenessBound(const Subgraph& graph);

}  // namespace sluice::framework::compiler

#endif  // SLUICE_FRAMEWORK_COMPILER_BUFFER_PLAN_H_
