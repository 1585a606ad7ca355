// Batch lowering, the general back end of the interpreter: every plan item becomes one
// instruction of a vm::PrecomputedBatch, in dispatch order — a segment an OpCall running
// its own StepSequence on its stream, a StreamWait and a RecordEvent the VM instructions of
// those names — and every plan edge a batch edge.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_BATCH_LOWERING_H_
#define SLUICE_FRAMEWORK_INTERPRETER_BATCH_LOWERING_H_

#include "absl/status/status.h"
#include "framework/interpreter/sequence_lowering.h"

namespace sluice::framework {

// Appends the plan to `out.batch`. With `list_operands` (a VM observer is attached: the sync
// checker or the recorder), each OpCall lists its sequence's external inputs and outputs;
// otherwise none, since the interpreter keeps every blob alive itself and listing them
// would cost the engine a use count per blob per run. Errors only on a malformed plan.
absl::Status LowerToBatch(const LoweringInput& in, bool list_operands, LoweringOutput& out);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_BATCH_LOWERING_H_
