// Random static Programs with control flow for `sluice stress --control-flow`: block 0 is a
// random sequence of elementwise ops, `cond`s and `while`s built with the functional front
// end (framework/builder/control_flow.h), many of its ops pinned to random compute streams
// through the "stream" attribute, so values cross streams into, out of and around the
// control-flow ops (cond and while get the attribute too, which pins their control steps
// in block 0; inside a sub-block every op runs on its control step's stream). Inside:
//  - a cond's predicate is a comparison of two scalars computed earlier (often an element
//    picked out of a vector with split + reshape), so both branches get taken;
//  - a while carries a counter from 0 to a random trip count in 0..max_trips (a constant
//    made before the loop, read inside it as a capture) and one or two data values, reads
//    outer values, and may hold a cond or another while, down to `depth` levels; sometimes
//    it also stops early on a data comparison, sometimes it has max_iterations set to
//    the most it can run, sometimes parallel_iterations 2 or 3;
//  - branches and bodies yield new values or, sometimes, outer ones unchanged.
// Every op keeps values in [-1, 1] (products, halved sums and differences, max, min, relu,
// scale with |scale| + |bias| <= 1), so loops never overflow, and uses only the ops the
// bit-exact reference of stress/stress_reference.h knows.
//
// Free functions; thread-compatible.
#ifndef SLUICE_STRESS_STRESS_CONTROL_FLOW_H_
#define SLUICE_STRESS_STRESS_CONTROL_FLOW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/executor/executor.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"

namespace sluice::stress {

struct ControlFlowShape {
  int streams = 2;       // ops of block 0 are pinned to compute:0..streams-1 (1: none)
  int inputs = 3;        // fed f32 [elements] vectors x0..; plus two fed scalars s0, s1
  int ops = 10;          // statements in block 0; a sub-block gets 1..max(1, ops / 3)
  int depth = 2;         // nesting levels of cond / while below block 0
  int max_trips = 4;     // a loop's trip count is in 0..max_trips
  int64_t elements = 8;  // floats per vector
  int feed_sets = 2;     // runs of each program, each with feeds of its own
};

struct ControlFlowProgram {
  framework::ir::ProgramDesc program;
  std::vector<framework::Feeds> feed_sets;  // one run per set
  std::vector<std::string> fetches;         // every f32 value block 0 computes
  int conds = 0;                            // cond ops, at any depth
  int whiles = 0;                           // while ops, at any depth
};

// Deterministic in (shape, seed). Errors are the builder's (a generator bug), naming the op.
absl::StatusOr<ControlFlowProgram> GenerateControlFlowProgram(const ops::OpRegistry& registry,
                                                              const ControlFlowShape& shape,
                                                              uint64_t seed);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_STRESS_CONTROL_FLOW_H_
