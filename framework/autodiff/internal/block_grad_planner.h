// BlockGradPlanner: a planner of one block's backward pass as the gradients of `cond` and
// `while` (control_flow_grad.h) see it — the planner of the block that holds the op, whose
// gradients and visible names they read, and which plans each sub-block's backward pass
// with a nested planner. GradPlanner (grad_planner.h) implements it and calls
// control_flow_grad.h for each cond or while it meets: the recursion through nested
// control flow goes through this interface, so neither file includes the other's header
// both ways. Also the planned op both sides pass around.
//
// Thread-compatible, as GradPlanner: it mutates the Program it plans for.
#ifndef SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_BLOCK_GRAD_PLANNER_H_
#define SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_BLOCK_GRAD_PLANNER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/builder/program.h"
#include "vm/attrs.h"

namespace sluice::framework::autodiff_internal {

using Slots = std::vector<std::pair<std::string, std::vector<std::string>>>;

// One op of a backward pass, by variable names, before anything is appended.
struct PlannedOp {
  std::string type;
  Slots inputs;
  Slots outputs;
  vm::AttrMap attrs;
  // Set for the gradient of a cond or while: appends the op (and builds its sub-blocks)
  // in its turn, given the final output names, instead of AppendOpInto.
  std::function<absl::Status(const Slots& outputs)> build;
};

class BlockGradPlanner {
 public:
  // Maps a forward variable that the planner's forward block owns (for a loop body, also
  // the loop's current values) to a name readable in the gradient block; nullopt for
  // any other variable, which the enclosing planner then maps.
  using LocalView =
      std::function<absl::StatusOr<std::optional<std::string>>(const std::string& name)>;

  virtual ~BlockGradPlanner() = default;

  // The program planned for.
  virtual Program& program() = 0;
  // Whether forward variable `name` needs a gradient (false for a name the block's ops
  // never mention).
  virtual bool NeedsGrad(const std::string& name) const = 0;
  // Whether some gradient of `name` is planned; its name is then GradVar(name).
  virtual bool HasGrad(const std::string& name) const = 0;
  virtual std::string GradVar(const std::string& name) const = 0;
  // `name` (a forward variable visible from the forward block) as the gradient block
  // reads it; the first call for a name may rewrite the forward program to make it
  // readable. Memoized.
  virtual absl::StatusOr<std::string> Visible(const std::string& name) = 0;

  // Plans the backward pass of sub-block `forward_block` with a nested planner whose
  // enclosing planner is this one (`view` its LocalView; `seeds` as
  // GradPlanner::PlanFromSeeds), and appends it to `grad_block`, which must be the
  // program's current block. Returns the nested planner, for its gradients. Errors as
  // PlanFromSeeds and Append.
  virtual absl::StatusOr<std::unique_ptr<BlockGradPlanner>> PlanSubBlock(
      int forward_block, int grad_block, LocalView view,
      const std::vector<std::optional<std::string>>& seeds) = 0;
};

}  // namespace sluice::framework::autodiff_internal

#endif  // SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_BLOCK_GRAD_PLANNER_H_
