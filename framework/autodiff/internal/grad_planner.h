// GradPlanner: the backward pass of one block's ops, planned by variable names and then
// appended to a gradient block. AppendBackward (framework/autodiff/backward.h) runs one on
// the global block, seeded by the loss, appending to the global block itself. The
// gradients of `cond` and `while` (control_flow_grad.h) run one per branch or loop body,
// seeded by the gradients of what the block yields, each appending to a new sub-block of
// the enclosing planner's gradient block — so nesting is recursion (through the
// BlockGradPlanner interface, block_grad_planner.h, which this class implements).
//
// The algorithm (for the global block; a sub-block differs where noted):
//  1. Path: walking the ops backwards from the loss (a sub-block: from the yielded values
//     that have a seed), an op is on the path when it writes a wanted variable; its inputs
//     then join the wanted set. A cond's or while's inputs are everything its sub-blocks
//     read from outside them (ir::OuterReads).
//  2. Need: a variable needs a gradient when it has a float dtype, is not stop_gradient and
//     not in `no_grad_set`, and either no op of the block writes it (a leaf; in a sub-block
//     the enclosing planner must also say the variable needs one) or some input of the op
//     writing it needs one. An op is differentiated when it is on the path and some input
//     needs a gradient.
//  3. Seed: `<loss>@GRAD` = fill_constant 1 of the loss's dtype and shape (a sub-block: an
//     `assign` of each seed to the yielded value's gradient).
//  4. Walking the differentiated ops backwards, each op whose outputs received a gradient
//     gets its grad maker's ops (a cond or while: the op control_flow_grad.h plans):
//     - an output gradient the grad op reads but nobody produced is dropped when the grad
//       op's slot is optional, else made zeros (fill_zeros_like of the output; in a
//       sub-block fill_constant, which reads nothing);
//     - an input gradient nobody needs is written to a scratch variable
//       `<grad name>@UNUSED_<n>` that nothing reads; a grad op with no needed output is not
//       appended at all;
//     - the forward op's "stream" attribute carries over to its grad ops;
//     - every forward variable a grad op reads is looked up through Visible: in a
//       sub-block, a branch's temporaries are yielded by the forward cond and a loop
//       body's values are read back from the loop's stacks (control_flow_grad.h).
//  5. Accumulation: a variable whose gradient comes from several grad-op outputs has them
//     written to `<grad name>@RENAME@0`, `@1`, ... and summed into the gradient by a "sum"
//     op right after the last of them.
//  6. Gradient variables take their forward variable's dtype and shape and are declared in
//     the gradient block; every appended op is checked like AppendOpInto.
// Gradient names: `x@GRAD` in the global block; `x@GRAD@b<G>` in gradient block G, so that
// names stay unique program-wide.
//
// Thread-compatible: it mutates the Program it plans for.
#ifndef SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_GRAD_PLANNER_H_
#define SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_GRAD_PLANNER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/autodiff/internal/block_grad_planner.h"
#include "framework/builder/program.h"
#include "framework/ir/program_desc.h"
#include "vm/attrs.h"

namespace sluice::framework::autodiff_internal {

class GradPlanner final : public BlockGradPlanner {
 public:
  struct Config {
    Program* program = nullptr;
    int forward_block = 0;
    // Where Append puts the gradient ops; must be the program's current block then.
    int grad_block = 0;
    // The planner of the block holding the cond or while; null for the global block.
    GradPlanner* parent = nullptr;
    LocalView local_view;  // empty: every variable reads as itself
    const absl::flat_hash_set<std::string>* no_grad_set = nullptr;
  };

  explicit GradPlanner(Config config);
  GradPlanner(const GradPlanner&) = delete;
  GradPlanner& operator=(const GradPlanner&) = delete;

  // Global block: plans the backward pass of `loss` (a one-element float variable, which
  // the caller checked). False, with nothing planned, when the loss needs no gradient.
  absl::StatusOr<bool> PlanFromLoss(const std::string& loss);
  // Sub-block: `seeds[j]` is the gradient of the block's j-th yielded value (a name
  // readable from the gradient block), or nullopt when none flows back; positions past
  // the end have none.
  absl::Status PlanFromSeeds(const std::vector<std::optional<std::string>>& seeds);
  // Declares the gradient variables in the gradient block and appends the planned ops.
  // AlreadyExists when a gradient variable's name is taken; an op's check failing as
  // AppendOpInto.
  absl::Status Append();

  Program& program() override { return *config_.program; }
  int forward_block() const { return config_.forward_block; }
  int grad_block() const { return config_.grad_block; }
  const absl::flat_hash_set<std::string>* no_grad_set() const { return config_.no_grad_set; }

  // Whether forward variable `name` needs a gradient (step 2; false for a name the
  // block's ops never mention).
  bool NeedsGrad(const std::string& name) const override { return needs_.contains(name); }
  // Whether some gradient of `name` is planned; its name is then GradVar(name).
  bool HasGrad(const std::string& name) const override { return has_grad_.contains(name); }
  std::string GradVar(const std::string& name) const override;
  // `name` (a forward variable visible from the forward block) as the gradient block
  // reads it; the first call for a name may rewrite the forward program to make it
  // readable (control_flow_grad.h). Memoized.
  absl::StatusOr<std::string> Visible(const std::string& name) override;
  // A GradPlanner for the sub-block, this one its parent, sharing its no_grad_set:
  // PlanFromSeeds(seeds), then Append.
  absl::StatusOr<std::unique_ptr<BlockGradPlanner>> PlanSubBlock(
      int forward_block, int grad_block, LocalView view,
      const std::vector<std::optional<std::string>>& seeds) override;

  // "block B op #I 'type'", for errors.
  std::string OpWhere(size_t index, const std::string& type) const;

 private:
  // Float, not stop_gradient, not in no_grad_set.
  bool Differentiable(const std::string& name) const;
  // A leaf's need as the enclosing planner sees it.
  bool ParentNeeds(const std::string& name) const;
  // Steps 1 and 2 over ops [0, count), from `wanted`.
  void FindPathAndNeeds(size_t count, absl::flat_hash_set<std::string> wanted);
  absl::Status PlanOps();
  absl::Status PlanOp(size_t index);
  absl::StatusOr<bool> PlanGradOp(const ir::OpDesc& fwd, PlannedOp grad);
  absl::Status PlanControlFlowOp(size_t index, const ir::OpDesc& fwd);
  // Registers output (slot, position) of the next planned op as a gradient of `var`.
  void AddContribution(const std::string& var, size_t slot, size_t position);
  // A planned op writing zeros of `like`'s dtype and shape to `name`.
  PlannedOp Zeros(const std::string& like, const std::string& name, const vm::AttrMap& stream);
  void Accumulate();

  Config config_;
  size_t op_count_ = 0;                        // forward ops planned over (yield excluded)
  std::vector<bool> differentiated_;           // per forward op
  absl::flat_hash_set<std::string> needs_;     // forward vars that need a gradient
  absl::flat_hash_set<std::string> has_grad_;  // forward vars whose gradient is planned
  std::vector<PlannedOp> plan_;
  struct Contribution {
    size_t op;
    size_t slot;
    size_t index;
  };
  absl::flat_hash_map<std::string, std::vector<Contribution>> contributions_;  // by fwd var
  std::vector<std::string> contribution_order_;
  // Every variable the plan writes -> the forward variable whose dtype and shape it takes.
  absl::flat_hash_map<std::string, std::string> grad_vars_;
  std::vector<std::string> grad_var_order_;
  absl::flat_hash_map<std::string, std::string> visible_;
};

}  // namespace sluice::framework::autodiff_internal

#endif  // SLUICE_FRAMEWORK_AUTODIFF_INTERNAL_GRAD_PLANNER_H_
