// The operand check of the unary math family's kernels (ops/unary_math_ops.cc), shared by the
// host kernels (ops/cpu/unary_math_kernels.cc) and the cuda ones
// (ops/cuda/unary_math_op_kernels.cc), so that both refuse the same operands with the same
// message. `Args` is HostArgs or CudaArgs. Stateless; any thread.
#ifndef SLUICE_OPS_INTERNAL_UNARY_MATH_OPERANDS_H_
#define SLUICE_OPS_INTERNAL_UNARY_MATH_OPERANDS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/status.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal {

// <op>: X -> Out; <op>_grad (`grad`): X, OutGrad -> XGrad. X of the kernel's dtype T, every
// other operand of X's dtype and shape.
template <typename T, typename Args>
absl::Status CheckUnaryMathOperands(absl::string_view op, const Args& a, bool grad) {
  const int inputs = grad ? 2 : 1;
  SLUICE_RETURN_IF_ERROR(CheckOperands<T>(op, a, inputs, inputs, 1));
  const TensorMeta x = MetaOf(a.inputs[0]);
  if (grad) SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, x));
  return CheckMeta(op, a.outputs[0], "output", 0, x);
}

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_UNARY_MATH_OPERANDS_H_
