// Control flow in the Program IR: the `cond`, `while` and `yield` ops, whose sub-blocks are
// named by block-reference attributes (vm::BlockRef, text form `b:INDEX`), and the
// structural rules ProgramDesc::Validate applies to them.
//
//   cond   in  Cond=P [Input=captured...]          out Out=y...
//          attrs true_block=b:T, false_block=b:F
//          Runs block T when the bool scalar P is true, else block F. Each branch ends in a
//          `yield` of as many values as Out has, matching Out's dtypes and shapes in order;
//          Out takes the taken branch's values.
//   while  in  X=x... [Input=captured...]          out Out=x_loop...
//          attrs cond_block=b:C, body_block=b:B [, max_iterations=i:N]
//                [, parallel_iterations=i:K]
//          X holds the loop-carried variables' initial values; Out (one per X, each with
//          its X's dtype and shape, no name twice and none an X) holds their current
//          values. Inside C and B the Out names read the current
//          iteration's values (X names read the initial ones, like any outer variable).
//          Block C yields one bool scalar: whether to run the body again. Block B yields
//          the next value of each Out, in order. When C yields false, Out keeps the last
//          values. Running the body more than N times is an error naming the loop (no
//          attribute: no limit). Up to K iterations may be in flight at once where the
//          body allows it (default 1).
//   yield  in  X=v...                               out (none), no attributes
//          The last op of a sub-block referenced by a cond or while: the block's results.
//
// Sub-blocks are children of the block that holds the op that references them; names
// resolve through parent blocks (a sub-block reads its ancestors' variables). `Input`
// lists captured variables the sub-blocks read, so the op's own dependences are complete
// without looking into the blocks; the interpreter also finds reads it does not list.
//
// Free functions over immutable IR values; thread-compatible.
#ifndef SLUICE_FRAMEWORK_IR_CONTROL_FLOW_H_
#define SLUICE_FRAMEWORK_IR_CONTROL_FLOW_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::ir {

inline constexpr absl::string_view kCondOp = "cond";
inline constexpr absl::string_view kWhileOp = "while";
inline constexpr absl::string_view kYieldOp = "yield";

// Slots.
inline constexpr absl::string_view kCondSlot = "Cond";
inline constexpr absl::string_view kLoopVarsSlot = "X";  // while's loop-carried values; yield's
inline constexpr absl::string_view kCapturedSlot = "Input";
inline constexpr absl::string_view kOutSlot = "Out";

// Attributes.
inline constexpr absl::string_view kTrueBlockAttr = "true_block";
inline constexpr absl::string_view kFalseBlockAttr = "false_block";
inline constexpr absl::string_view kCondBlockAttr = "cond_block";
inline constexpr absl::string_view kBodyBlockAttr = "body_block";
inline constexpr absl::string_view kMaxIterationsAttr = "max_iterations";
inline constexpr absl::string_view kParallelIterationsAttr = "parallel_iterations";

// True for `cond` and `while`.
bool IsControlFlowOp(const OpDesc& op);

// The block-reference attributes of `op`: (attribute name, block index), by name.
std::vector<std::pair<std::string, int64_t>> SubBlockRefs(const OpDesc& op);

// The variable `name` as seen from block `block`: its own, or the nearest ancestor's. Null
// when no block on the chain has it.
const VarDesc* ResolveVar(const ProgramDesc& program, int block, absl::string_view name);

// The names that control-flow op `op` and its sub-blocks, nested ones included, read from
// outside those sub-blocks: its own inputs (Cond, X, Input) first, then every other name a
// sub-block op reads that resolves to the op's block or an ancestor, in order of first
// use, each once. A while's Out names, which its blocks read as the current
// values, are not among them. What a node for `op` in `block`'s plan reads.
std::vector<std::string> OuterReads(const ProgramDesc& program, const OpDesc& op);

// Sets `op`'s Input (captured) slot to what its sub-blocks read from outside them:
// OuterReads without the op's own inputs; no slot when that is nothing. `op` has its other
// slots and its block attributes. (The builder and autodiff list captures this way.)
void ListCaptures(const ProgramDesc& program, OpDesc& op);

// The names block `block` yields: the X slot of its last op, which must be a `yield`
// (InvalidArgument naming the block otherwise).
absl::StatusOr<std::vector<std::string>> YieldedNames(const ProgramDesc& program, int block);

// The control-flow rules, each error InvalidArgument naming the block, the op (index and
// type) and the variable or attribute at fault:
//  - a block reference names a block after 0 whose parent is the op's block, and no block
//    is referenced twice;
//  - `yield` appears only as the last op of a block a cond or while references, with no
//    outputs;
//  - cond: one bool scalar Cond; both branch attributes; each branch yields as many values
//    as Out names, each with the dtype and shape of its Out variable;
//  - while: as many X as Out, Out[i] with X[i]'s dtype and shape, no Out name twice or
//    among X, no X name twice; the condition block yields one bool scalar; the body
//    yields one value per Out with its dtype and shape; max_iterations and
//    parallel_iterations, when present, are ints of at least 1;
//  - a yield has exactly the X slot, no outputs and no attributes.
// Expects the checks ProgramDesc::Validate makes first (blocks well formed, operands
// defined).
absl::Status ValidateControlFlow(const ProgramDesc& program);

}  // namespace sluice::framework::ir

#endif  // SLUICE_FRAMEWORK_IR_CONTROL_FLOW_H_
