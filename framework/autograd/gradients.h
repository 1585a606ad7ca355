// fn::Gradients: one call for the gradients of a loss in both modes of the functional front
// end (framework/builder/functional.h). A model written once against fn:: ops gives, for
// static Values (inside a ProgramGuard), the gradient Vars that AppendBackward appends to
// the loss's program; for eager Values, the gradient Tensors that autograd::Grad computes
// (without accumulating into any leaf). Both come from the same grad makers, so on one
// device they agree bit for bit.
//
// Thread-compatible, as the modes are.
#ifndef SLUICE_FRAMEWORK_AUTOGRAD_GRADIENTS_H_
#define SLUICE_FRAMEWORK_AUTOGRAD_GRADIENTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "framework/builder/functional.h"

namespace sluice::fn {

// The gradient of one-element `loss` with respect to each of `params`, in order.
// Static: each param must be a parameter variable (is_parameter: Linear's weight and bias)
// of the loss's program; AppendBackward runs once for the loss (a second call for the
// same loss is AlreadyExists, as AppendBackward's). Eager: each param must be a tensor
// that requires a gradient (autograd::SetRequiresGrad). InvalidArgument for mixed modes,
// or a param the loss does not depend on (naming it).
absl::StatusOr<std::vector<framework::Value>> Gradients(
    const framework::Value& loss, const std::vector<framework::Value>& params);

}  // namespace sluice::fn

#endif  // SLUICE_FRAMEWORK_AUTOGRAD_GRADIENTS_H_
