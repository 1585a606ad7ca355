// Loss functions, written once over the two-mode functional ops (functional.h): on static
// Vars they append ops to the inputs' program, on eager Tensors they compute at once. Each
// gives a one-element result, what autodiff (AppendBackward) starts from.
//
// Free functions; thread-compatible like the functional ops.
#ifndef SLUICE_FRAMEWORK_BUILDER_LOSSES_H_
#define SLUICE_FRAMEWORK_BUILDER_LOSSES_H_

#include "absl/status/statusor.h"
#include "framework/builder/functional.h"
#include "framework/builder/program.h"

namespace sluice::nn {

// mean((input - label)^2) over every element: reduce_mean(square(sub(input, label))).
// input and label must broadcast (normally the same shape).
absl::StatusOr<framework::Value> MseLoss(const framework::Value& input,
                                         const framework::Value& label);
absl::StatusOr<framework::Var> MseLoss(const framework::Var& input, const framework::Var& label);

// mean over the batch of softmax_with_cross_entropy's loss: logits [..., C] (f32/f64),
// label [..., 1] of i64 class indices.
absl::StatusOr<framework::Value> SoftmaxCrossEntropyLoss(const framework::Value& logits,
                                                         const framework::Value& label);
absl::StatusOr<framework::Var> SoftmaxCrossEntropyLoss(const framework::Var& logits,
                                                       const framework::Var& label);

}  // namespace sluice::nn

#endif  // SLUICE_FRAMEWORK_BUILDER_LOSSES_H_
