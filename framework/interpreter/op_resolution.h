// Op resolution: a block's ops checked against their schemas before anything is placed —
// attributes normalized (the "stream" attribute taken apart), operands resolved by slot to
// var slots, output shapes inferred and checked against the declared variables — and,
// after placement, each op's kernel for (op, device type, dtype).
//
// Errors name the op ("op #3 'matmul'") and the variable. A pass stops at the first failing
// op and still returns what it resolved before it, so that a later pass run over that
// prefix can report an earlier op's error first: the pipeline reports the error of the
// first op that fails any step, as a single walk over the ops would.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_OP_RESOLUTION_H_
#define SLUICE_FRAMEWORK_INTERPRETER_OP_RESOLUTION_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "framework/interpreter/lowered_graph.h"
#include "framework/ir/program_desc.h"
#include "ops/op_registry.h"
#include "vm/attrs.h"

namespace sluice::framework {

// "op #<index> '<type>'": how errors name a block op.
std::string OpName(int index, const std::string& type);

// One block op, resolved: what placement needs.
struct ResolvedOp {
  std::string type;
  int source = -1;  // index of the block op
  const ops::OpSchema* schema = nullptr;
  bool random = false;
  vm::AttrMap attrs;        // normalized, without "stream"
  std::string stream_attr;  // the "stream" attribute ("compute:1"), or empty
  std::vector<int> inputs;  // var slots in schema slot order (their home copies)
  std::vector<int> outputs;
};

// The block's ops and fetches, resolved up to the first error.
struct ResolvedBlock {
  std::vector<ResolvedOp> ops;  // every op of the block unless `error` names one
  std::vector<int> fetches;     // var slot per fetch; all unless `error` names a fetch
  absl::Status error;           // the first failure; ops and fetches stop before it
};

// Resolves `block`'s ops in order, and checks that every fetch is fed, persistable or
// written by some op. `vars` must come from CollectVars for this block. Errors
// (InvalidArgument unless the registry says otherwise): unknown op, bad attribute or
// stream attribute, unknown slot, undefined variable, a temporary read before any op
// writes it, a fed variable written, inference failure or a declared dtype/shape the op
// does not make.
// A `yield` (a sub-block's results) is skipped. Control-flow ops (cond, while) have no schema: they
// resolve to what they read from the block (ir::OuterReads over `program`, which holds `block`;
// without it, a control-flow op is an error) and what they write (Out); their kernel is built later
// (framework/interpreter/control_flow/).
ResolvedBlock ResolveOps(const ir::BlockDesc& block, const ops::OpRegistry& registry,
                         const VarTable& vars, const std::vector<std::string>& fetch_names,
                         const ir::ProgramDesc* program = nullptr);

// Picks the kernel of every block op in `funcs` but the control-flow ones (schema null) and
// the inserted copies (which have one) for its
// device type and the dtype of its first input, else of its first output, else f32.
// NotFound naming the first op without one.
absl::Status ChooseKernels(const ops::OpRegistry& registry, const VarTable& vars,
                           std::vector<OpFunc>& funcs);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_OP_RESOLUTION_H_
