// Reverse-mode autodiff on a Program: AppendBackward extends the loss's
// program with the ops that compute d(loss)/d(var) for every variable that needs it, using
// each forward op's grad maker (ops/op_schema.h), and returns the gradients of the
// trainable parameters for an optimizer to consume.
//
// The algorithm, on the global block, whose ops are taken to be in dependence order with
// each variable written once:
//  1. Path: walking the ops backwards from the loss, an op is on the path when it writes a
//     variable the loss depends on; its inputs then join that set.
//  2. Need: a variable needs a gradient when it has a float dtype, is not stop_gradient and
//     not in `no_grad_set`, and either no op writes it (a leaf: parameters; data vars are
//     stop_gradient) or some input of the op writing it needs one. An op is differentiated
//     when it is on the path and some input needs a gradient.
//  3. Seed: `<loss>@GRAD` = fill_constant 1 of the loss's dtype and shape.
//  4. Walking the differentiated ops backwards, each op whose outputs received a gradient
//     gets its grad maker's ops, with the names the maker chose (`x@GRAD`):
//     - an output gradient the grad op reads but nobody produced (a split output the loss
//       does not use) is dropped when the grad op's slot is optional (softmax_with_cross_
//       entropy's SoftmaxGrad), else made zeros by fill_zeros_like of the output;
//     - an input gradient nobody needs (the input needs no gradient) is written to a scratch
//       variable `x@GRAD@UNUSED_<n>` that nothing reads (grad ops' output slots are not
//       optional); a grad op left with no needed output is not appended at all;
//     - the forward op's "stream" attribute carries over to its grad ops.
//  5. Accumulation: a variable whose gradient comes from several grad-op outputs (it feeds
//     several ops, or one op twice) has them written to `x@GRAD@RENAME@0`, `@1`, ... and
//     summed into `x@GRAD` by a "sum" op right after the last of them — before any reader,
//     since readers are the grad ops of x's producer, which come later.
//  6. Gradient variables take their forward variable's dtype and shape; every appended op is
//     checked like AppendOpInto (schema, attributes, inferred shapes).
//
// Thread-compatible: it mutates the loss's Program.
#ifndef SLUICE_FRAMEWORK_AUTODIFF_BACKWARD_H_
#define SLUICE_FRAMEWORK_AUTODIFF_BACKWARD_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "framework/builder/program.h"

namespace sluice::framework {

// Appends the backward pass of `loss` to its program and returns (parameter, gradient) for
// every is_parameter variable that gets a gradient, in the program's variable order. Vars
// named in `no_grad_set` are treated as stop_gradient. An empty list (and no change) when
// nothing the loss depends on needs a gradient.
// Errors, with the program left as it was: InvalidArgument when the loss is not a
// one-element float variable of its program; Unimplemented naming the op when an op on the
// path has no grad maker; AlreadyExists when a gradient variable's name is taken (backward
// appended twice for one loss); a grad op's check failing (a grad maker bug) as AppendOpInto.
absl::StatusOr<std::vector<std::pair<Var, Var>>> AppendBackward(
    const Var& loss, const absl::flat_hash_set<std::string>& no_grad_set = {});

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_AUTODIFF_BACKWARD_H_
