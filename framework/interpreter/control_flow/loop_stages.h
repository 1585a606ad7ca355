// Splitting a while body into the three stages of a pipelined loop (docs/design.md,
// "Parallel iterations"). The calls of one body frame, in program order, are sorted into:
//  - stage 0, the *driver*: what the loop's condition needs, iteration after iteration.
//    The loop variables the condition reads are the driver's; so is every call the next
//    value of a driver variable needs, and then the variables those calls read, to a fixed
//    point. Only the driver decides how many iterations run.
//  - stage 1, *independent*: calls that read only driver variables, captures and what
//    stage 0 or 1 calls of the same iteration wrote. Stage 1 of iteration k + 1 needs
//    nothing of iteration k's stage 1 or 2, so it may run beside them.
//  - stage 2, *carried*: the rest (they read a non-driver loop variable, directly or
//    through another call). Stage 2 of iteration k + 1 runs after stage 2 of iteration k.
// The stages, in order, are a valid order of the calls: stage 0 reads only stage 0; stage 1
// reads stages 0 and 1. A copy into a next value is a call like any other: stage 0 when
// it writes a driver variable's next value, else stage 1 or 2 by what it reads (so a copy
// of a stage-0 value into a non-driver variable is stage 1).
//
// Pure functions of their arguments; thread-compatible.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_STAGES_H_
#define SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_STAGES_H_

#include <vector>

#include "vm/blob.h"

namespace sluice::framework::control_flow {

// One call of a body frame: the blobs it reads and writes.
struct StageCall {
  std::vector<vm::Blob*> reads, writes;
  bool random = false;  // draws from a generator: its order across iterations matters
};

struct LoopStages {
  // Per call: 0, 1 or 2 (see above). Empty when the body cannot be split (see `why`).
  std::vector<int> stage;
  int independent_calls = 0;  // calls in stage 1
  // Why the body runs iteration after iteration instead: "" when it splits.
  const char* why = "";
};

// `calls`: the body frame's calls, the copies into the next values last or anywhere after
// their source. `current[i]`: the blob of loop variable i the body reads; `next[i]`: the
// one its copy writes. `check_reads[i]`: the condition reads loop variable i. A body
// splits when every blob it writes has one writer, nothing draws random numbers, and some
// call lands in stage 1 (else pipelining would only add overhead).
LoopStages SplitLoopBody(const std::vector<StageCall>& calls, const std::vector<vm::Blob*>& current,
                         const std::vector<vm::Blob*>& next, const std::vector<bool>& check_reads);

}  // namespace sluice::framework::control_flow

#endif  // SLUICE_FRAMEWORK_INTERPRETER_CONTROL_FLOW_LOOP_STAGES_H_
