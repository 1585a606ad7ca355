// Eager autograd: gradients of eager programs, run by the VM (docs/design.md, "Eager
// autograd"). A tensor that requires a gradient makes every op reading it record a node;
// Backward walks the recorded graph from a root in reverse and issues each node's grad ops
// (from the op schemas' grad makers, as static autodiff does) as ordinary eager ops: they
// run asynchronously on their inputs' streams, ordered by soft sync, and gradients that
// meet are summed with `add`.
//
//   eager::Tensor w = ...;
//   SLUICE_RETURN_IF_ERROR(autograd::SetRequiresGrad(w));
//   SLUICE_ASSIGN_OR_RETURN(eager::Tensor loss, ...ops on w...);
//   SLUICE_RETURN_IF_ERROR(autograd::Backward(loss));
//   eager::Tensor dw = autograd::GradOf(w);
//
// Saved tensors are released as soon as the node that needs them has issued its grad ops
// (unless retain_graph), which makes a second pass through those nodes an error; the nodes
// themselves live as long as a tensor that reaches them. Each grad op runs in the
// StreamScope its forward op ran in (else in the caller's). Only first-order gradients:
// grad ops are not recorded, so a gradient never requires a gradient itself.
//
// Thread-safety: any thread may record and run backward passes on its own graphs; two
// passes over one graph at once are serialized node by node (keep retain_graph for that).
// NoGradGuard is per thread. A gradient slot (GradOf) is safe to read while another
// thread accumulates into it.
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_AUTOGRAD_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_AUTOGRAD_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "framework/eager/tensor.h"

namespace sluice::autograd {

// Makes `t` a leaf that requires a gradient (or stops it requiring one: a leaf only).
// InvalidArgument for an integer or bool tensor, or to turn off a non-leaf's.
absl::Status SetRequiresGrad(const eager::Tensor& t, bool requires_grad = true);
bool RequiresGrad(const eager::Tensor& t);
// True for a tensor no recorded op produced (whether or not it requires a gradient).
bool IsLeaf(const eager::Tensor& t);

// The gradient accumulated into leaf `t`, or kept for a non-leaf by RetainGrad; an empty
// Tensor when no backward pass wrote one yet.
eager::Tensor GradOf(const eager::Tensor& t);
// Forgets `t`'s gradient (the next pass starts from zero). A no-op without one.
void ZeroGrad(const eager::Tensor& t);
// Keeps the gradient of non-leaf `t` at the next passes (GradOf). FailedPrecondition when
// `t` does not require a gradient; a no-op for a leaf.
absl::Status RetainGrad(const eager::Tensor& t);
// A tensor over `t`'s storage with no history and no gradient: ops on it record nothing,
// and an in-place write to either shows in both (and counts as a modification of a saved
// tensor). It holds `t`'s state, so while it lives so does what `t`'s history holds.
eager::Tensor Detach(const eager::Tensor& t);

struct BackwardOptions {
  // Keep the graph (and its saved tensors) for another pass.
  bool retain_graph = false;
};

// Accumulates into the leaves' gradients the gradient of `root`, seeded with `grad` (ones
// when empty, for a one-element root; a copy of `grad` when it requires a gradient itself,
// else `grad`, which a leaf's first gradient may then share). Errors: `root` does not
// require a gradient; a root with more than one element and no `grad`; `grad` of another dtype or
// shape; a graph freed by an earlier pass; a saved tensor modified in place since (naming the op);
// an op without a gradient on the way. Returns once every grad op is issued (the VM runs
// them); reading a gradient waits for what produces it.
absl::Status Backward(const eager::Tensor& root, const eager::Tensor& grad = eager::Tensor(),
                      BackwardOptions options = {});

// The gradients of `outputs` (seeded with `output_grads`, or ones) with respect to
// `inputs`, without accumulating into any leaf, as torch.autograd.grad. InvalidArgument
// when an input requires no gradient or does not reach the outputs (naming it).
absl::StatusOr<std::vector<eager::Tensor>> Grad(const std::vector<eager::Tensor>& outputs,
                                                const std::vector<eager::Tensor>& inputs,
                                                const std::vector<eager::Tensor>& output_grads = {},
                                                BackwardOptions options = {});

// While alive, eager ops on this thread record nothing (parameter updates, evaluation).
// Nests. Not movable.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
};

}  // namespace sluice::autograd

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_AUTOGRAD_H_
