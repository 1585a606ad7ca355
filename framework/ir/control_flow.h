// Control flow in the Program IR: the `cond`, `while` and `yield` ops, whose sub-blocks are
// named by block-reference attributes (vm::BlockRef, text form `b:INDEX`), and queries
// over them. ProgramDesc::Validate (program_desc.h) applies their structural rules.
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
#include "framework/ir/control_flow_names.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::ir {

// The ops', slots' and attributes' names (kCondOp, kOutSlot, ...): control_flow_names.h.

// True for `cond` and `while`.
bool IsControlFlowOp(const OpDesc& op);

// SubBlockRefs, ResolveVar and YieldedNames, which ProgramDesc::Validate uses too:
// program_desc.h.

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

}  // namespace sluice::framework::ir

#endif  // SLUICE_FRAMEWORK_IR_CONTROL_FLOW_H_
