// The gradients of `cond` and `while` (framework/ir/control_flow.h), in the style of
// TensorFlow 2's cond_v2 / while_v2: the gradient of a control-flow op is a control-flow op
// of the same kind in the gradient block, whose sub-blocks hold the gradients of the
// forward sub-blocks, planned by nested planners (BlockGradPlanner::PlanSubBlock,
// block_grad_planner.h; GradPlanner, grad_planner.h, implements it). Sub-block
// temporaries are invisible outside their block, so the forward op is rewritten to hand
// out what the gradient reads:
//
// cond. The gradient is a cond on the same predicate. Its true block is the true branch's
// gradient, seeded with the gradients of Out; its false block likewise. Each yields the
// gradient of every captured variable that needs one, zeros (fill_constant) for a
// capture its branch does not use. A temporary of a branch that a gradient op reads is
// added to the forward cond's Out ("<name>@SAVED_<n>"): its branch yields it, the other
// branch yields zeros of its dtype and shape.
//
// while. The forward loop gets an i64 iteration counter (0 before the loop, incremented by
// the body) and, for every per-iteration value the body's gradient reads (a body temporary
// or a current loop value), a loop-carried stack "<name>@STACK_<n>" of shape
// [max_iterations, ...] that the body fills with write_row at the counter
// (ops/row_ops.cc). The gradient is a while that counts the counter down to 0: its body
// reads row (counter - 1) of each stack with read_row, runs the forward body's gradient
// seeded with the loop-variable gradients it carries, carries the gradients of the
// current loop values as the next ones, and adds each captured variable's gradient to an
// accumulator it carries. After it, the carried gradients are those of X, and the
// accumulators those of the captures. A loop without max_iterations is refused
// (InvalidArgument naming the op): the stacks need a bound.
//
// Nesting is recursion: a cond or while inside a branch or loop body is differentiated by
// the body's planner, and its saved values are in turn saved by the enclosing op — a
// stack of an inner loop becomes a row of the outer loop's stack.
//
// Thread-compatible: it mutates the planner's Program.
#ifndef SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_CONTROL_FLOW_GRAD_H_
#define SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_CONTROL_FLOW_GRAD_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/autodiff/internal/block_grad_planner.h"
#include "framework/ir/program_desc.h"

namespace sluice::framework::autodiff_internal {

// A planned control-flow gradient: `op` (whose build appends it), writing in its Out
// slot, at position j, a gradient of forward variable grads_of[j].
struct ControlFlowGrad {
  PlannedOp op;
  std::vector<std::string> grads_of;
};

// Plans the gradient of `op` (a cond or while of `planner`'s forward block; `where` names
// it for errors), after the gradients of its outputs are planned. Nullopt when no
// variable it reads needs a gradient. InvalidArgument for a while without max_iterations.
// The forward program is rewritten only when the planned op is built (at Append).
absl::StatusOr<std::optional<ControlFlowGrad>> PlanControlFlowGrad(BlockGradPlanner& planner,
                                                                   const ir::OpDesc& op,
                                                                   const std::string& where);

}  // namespace sluice::framework::autodiff_internal

#endif  // SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_CONTROL_FLOW_GRAD_H_
