// Control flow in the functional front end, in the shape of paddle.static.nn.cond and
// while_loop: fn::Cond picks one of two functions by a bool scalar predicate, fn::WhileLoop
// runs a body function while a condition function says so. One call, two modes, like every
// op in functional.h:
//
//  - static (the predicate or loop variables are Vars of a Program): each function is
//    called once, with the program's current block set to a new sub-block, so the ops it
//    applies land there; its results become the block's `yield`. Then the `cond` or
//    `while` op is appended to the block that was current (framework/ir/control_flow.h),
//    with new output variables named "cond_<n>.out_<i>" / "while_<n>.out_<i>", and the
//    variables the sub-blocks read from outside listed as its captured inputs. A loop's
//    functions get the handles of its outputs, which stand for the current iteration's
//    values inside the loop (as the eager values passed to them do); the initial values'
//    handles keep meaning the initial values, in both modes.
//  - eager (Tensors): the predicate is read (a blocking read of one element) and the chosen
//    function runs at once; a loop calls its condition, reads it, and runs the body until
//    the condition is false.
//
// Errors, each InvalidArgument (FailedPrecondition for an eager read that fails) naming
// "cond" or "while_loop" and the value at fault: a predicate that is not a bool scalar;
// static and eager values mixed; branches returning different counts, dtypes or shapes (a
// static cond checks both; an eager one runs only one); a body returning a value whose
// dtype or shape differs from its loop variable's; more than max_iterations runs of the
// body (eager: at run time; static: the interpreter reports it when the program runs).
// Inside a branch or body, ops write only the block's own variables (AppendOpInto into an
// enclosing block's variable is refused), and persistables cannot be created
// (CreatePersistable, AppendBackward and Minimize answer FailedPrecondition). An error
// from a function is returned as is, and the program is put back as it was before the
// call (names generated meanwhile stay used).
//
// Thread-compatible, like the rest of the builder.
#ifndef SLUICE_FRAMEWORK_BUILDER_CONTROL_FLOW_H_
#define SLUICE_FRAMEWORK_BUILDER_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/builder/functional.h"

namespace sluice::fn {

// A branch: returns the values the cond produces (any number, the same for both branches).
using BranchFn = std::function<absl::StatusOr<std::vector<Value>>()>;
// Takes the loop variables' current values; returns a bool scalar: run the body again?
using LoopCondFn = std::function<absl::StatusOr<Value>(const std::vector<Value>&)>;
// Takes the loop variables' current values; returns their next values, in order.
using LoopBodyFn = std::function<absl::StatusOr<std::vector<Value>>(const std::vector<Value>&)>;

struct WhileOptions {
  // More runs of the body than this is an error naming the loop; none: no limit.
  std::optional<int64_t> max_iterations;
  // How many iterations may be in flight at once where the body allows it (static only).
  int64_t parallel_iterations = 1;
};

absl::StatusOr<std::vector<Value>> Cond(const Value& pred, const BranchFn& true_fn,
                                        const BranchFn& false_fn);

// Returns the loop variables' final values. `loop_vars` must not be empty.
absl::StatusOr<std::vector<Value>> WhileLoop(const LoopCondFn& cond, const LoopBodyFn& body,
                                             const std::vector<Value>& loop_vars,
                                             const WhileOptions& options = {});

}  // namespace sluice::fn

#endif  // SLUICE_FRAMEWORK_BUILDER_CONTROL_FLOW_H_
