// Operand checks of the index family's kernels (gather, slice, where, erf and their grads),
// shared by the host kernels (ops/cpu/index_kernels.cc) and the cuda kernels
// (ops/cuda/index_op_kernels.cc), so that every device refuses the same operands with the
// same message, naming the op and the operand. `Args` is HostArgs or CudaArgs (anything with
// `inputs` and `outputs` of HostTensor and an `attrs` pointer). Each check covers counts,
// attributes, dtypes and shapes; the key dtype (the one the kernel was registered for) is
// passed in. Run-time checks (gather's index range) are the kernels' own.
//
// Stateless; any thread.
#ifndef SLUICE_OPS_INTERNAL_INDEX_OPERANDS_H_
#define SLUICE_OPS_INTERNAL_INDEX_OPERANDS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/index_rules.h"
#include "ops/internal/operand_checks.h"

namespace sluice::ops::internal::index {

// Operand counts, the attributes, and input `key_input`'s dtype `key`.
template <typename Args>
absl::Status CheckIndexCounts(absl::string_view op, const Args& a, int inputs, int outputs,
                              int key_input, DataType key) {
  const int n_in = static_cast<int>(a.inputs.size());
  const int n_out = static_cast<int>(a.outputs.size());
  if (n_in != inputs || n_out != outputs) {
    return OpError(op, absl::StrCat("takes ", inputs, " input(s) and ", outputs, " output(s), got ",
                                    n_in, " and ", n_out));
  }
  if (a.attrs == nullptr) return OpError(op, "has no attributes (they carry the defaults)");
  const HostTensor& t = a.inputs[key_input];
  if (t.dtype != key) {
    return OpError(op,
                   absl::StrCat(t.Describe("input", key_input), " must be ", DataTypeName(key)));
  }
  return absl::OkStatus();
}

// A float dtype for the grad ops' key.
inline absl::Status CheckFloatKey(absl::string_view op, DataType key) {
  if (IsFloating(key)) return absl::OkStatus();
  return OpError(op, absl::StrCat("has no kernel for ", DataTypeName(key), " (f32 and f64 only)"));
}

// gather: X, Index -> Out; gather_grad: X (its shape), Index, OutGrad -> XGrad.
template <typename Args>
absl::StatusOr<GatherDims> CheckGatherOperands(absl::string_view op, const Args& a, bool grad,
                                               DataType key) {
  if (grad) SLUICE_RETURN_IF_ERROR(CheckFloatKey(op, key));
  SLUICE_RETURN_IF_ERROR(CheckIndexCounts(op, a, grad ? 3 : 2, 1, 0, key));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(op, a.attrs->GetInt("axis")));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(GatherDims d,
                          InOp(op, GatherShapes(MetaOf(x), MetaOf(a.inputs[1]), axis)));
  if (grad) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[2], "input", 2, {x.dtype, d.out}));
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(x)));
  } else {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {x.dtype, d.out}));
  }
  return d;
}

// slice: X -> Out; slice_grad: X (its shape), OutGrad -> XGrad.
template <typename Args>
absl::StatusOr<SliceDims> CheckSliceOperands(absl::string_view op, const Args& a, bool grad,
                                             DataType key) {
  if (grad) SLUICE_RETURN_IF_ERROR(CheckFloatKey(op, key));
  SLUICE_RETURN_IF_ERROR(CheckIndexCounts(op, a, grad ? 2 : 1, 1, 0, key));
  const HostTensor& x = a.inputs[0];
  SLUICE_ASSIGN_OR_RETURN(SliceDims d, InOp(op, SliceShapes(MetaOf(x), *a.attrs)));
  if (grad) {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, {x.dtype, d.out}));
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(x)));
  } else {
    SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {x.dtype, d.out}));
  }
  return d;
}

// where: Cond, X, Y -> Out (key: Cond's bool). The output's shape.
template <typename Args>
absl::StatusOr<Shape> CheckWhereOperands(absl::string_view op, const Args& a) {
  SLUICE_RETURN_IF_ERROR(CheckIndexCounts(op, a, 3, 1, 0, DataType::kBool));
  const HostTensor& x = a.inputs[1];
  SLUICE_ASSIGN_OR_RETURN(
      Shape shape, InOp(op, WhereShape(MetaOf(a.inputs[0]), MetaOf(x), MetaOf(a.inputs[2]))));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, {x.dtype, shape}));
  return shape;
}

// where_grad: OutGrad, Cond, X (its shape), Y (its shape) -> XGrad, YGrad (key: OutGrad's
// dtype). The shape of OutGrad.
template <typename Args>
absl::StatusOr<Shape> CheckWhereGradOperands(absl::string_view op, const Args& a, DataType key) {
  SLUICE_RETURN_IF_ERROR(CheckFloatKey(op, key));
  SLUICE_RETURN_IF_ERROR(CheckIndexCounts(op, a, 4, 2, 0, key));
  const HostTensor& x = a.inputs[2];
  const HostTensor& y = a.inputs[3];
  SLUICE_ASSIGN_OR_RETURN(Shape shape,
                          InOp(op, WhereShape(MetaOf(a.inputs[1]), MetaOf(x), MetaOf(y))));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[0], "input", 0, {x.dtype, shape}));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[0], "output", 0, MetaOf(x)));
  SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.outputs[1], "output", 1, MetaOf(y)));
  return shape;
}

// erf: X -> Out; erf_grad: X, OutGrad -> XGrad. Every operand of X's dtype and shape.
template <typename Args>
absl::Status CheckErfOperands(absl::string_view op, const Args& a, bool grad, DataType key) {
  SLUICE_RETURN_IF_ERROR(CheckFloatKey(op, key));
  SLUICE_RETURN_IF_ERROR(CheckIndexCounts(op, a, grad ? 2 : 1, 1, 0, key));
  const TensorMeta x = MetaOf(a.inputs[0]);
  if (grad) SLUICE_RETURN_IF_ERROR(CheckMeta(op, a.inputs[1], "input", 1, x));
  return CheckMeta(op, a.outputs[0], "output", 0, x);
}

}  // namespace sluice::ops::internal::index

#endif  // SLUICE_OPS_INTERNAL_INDEX_OPERANDS_H_
