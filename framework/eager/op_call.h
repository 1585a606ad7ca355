// The eager functional ops' fast path: one op on single-tensor operand slots, run in the
// context of the first operand, without copying a Tensor handle per operand (a copy costs
// two atomic count updates). The generated fn:: functions (framework/builder/functional_ops.h)
// call it; anything else calls Context::Call.
#ifndef SLUICE_FRAMEWORK_EAGER_OP_CALL_H_
#define SLUICE_FRAMEWORK_EAGER_OP_CALL_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/eager/tensor.h"
#include "vm/attrs.h"

namespace sluice::eager {

// `op` on inputs[i] as operand slot i, returning its one output. InvalidArgument naming the
// op when there are no inputs or inputs[0] is an empty Tensor; otherwise Context::Call's
// errors. Any thread (as Context::Call).
absl::StatusOr<Tensor> CallOp(absl::string_view op, absl::Span<const Tensor* const> inputs,
                              const vm::AttrMap& attrs);

}  // namespace sluice::eager

#endif  // SLUICE_FRAMEWORK_EAGER_OP_CALL_H_
