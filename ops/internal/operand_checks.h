// Operand checks the cpu and cuda kernels of one op family share (ops/cpu/nn_kernels.cc,
// ops/cuda/nn_op_kernels.cc): the same counts, attributes, dtypes and metas are refused with
// the same message on every device, naming the op and the operand. `Args` is HostArgs or
// CudaArgs: anything with `inputs` and `outputs` of HostTensor and an `attrs` pointer.
// Stateless; any thread.
#ifndef SLUICE_OPS_INTERNAL_OPERAND_CHECKS_H_
#define SLUICE_OPS_INTERNAL_OPERAND_CHECKS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "core/status.h"
#include "ops/cpu/host_kernel.h"
#include "ops/internal/op_families.h"
#include "ops/op_schema.h"

namespace sluice::ops::internal {

// `value`, or its error as the op's (OpError).
template <typename V>
absl::StatusOr<V> InOp(absl::string_view op, absl::StatusOr<V> value) {
  if (!value.ok()) return OpError(op, value.status().message());
  return value;
}

inline TensorMeta MetaOf(const HostTensor& t) { return {t.dtype, *t.shape}; }

// Operand counts (inputs within [min_in, max_in], `outputs` outputs), the attributes, and
// input 0 of the kernel's dtype T.
template <typename T, typename Args>
absl::Status CheckOperands(absl::string_view op, const Args& a, int min_in, int max_in,
                           int outputs) {
  const int n_in = static_cast<int>(a.inputs.size());
  const int n_out = static_cast<int>(a.outputs.size());
  if (n_in < min_in || n_in > max_in || n_out != outputs) {
    return OpError(
        op, absl::StrCat("takes ", min_in, max_in > min_in ? absl::StrCat("-", max_in) : "",
                         " input(s) and ", outputs, " output(s), got ", n_in, " and ", n_out));
  }
  if (a.attrs == nullptr) return OpError(op, "has no attributes (they carry the defaults)");
  if (a.inputs[0].dtype != DataTypeOf<T>()) {
    return OpError(op, absl::StrCat(a.inputs[0].Describe("input", 0), " must be ",
                                    DataTypeName(DataTypeOf<T>())));
  }
  return absl::OkStatus();
}

// The broadcast of inputs 0 and 1 (NumPy's rules), which `out` (the `out_index`-th
// `out_role`: output 0, or a grad op's OutGrad) must have; refused naming both inputs.
template <typename Args>
absl::StatusOr<Shape> CheckBroadcastOutput(absl::string_view op, const Args& a,
                                           const HostTensor& out,
                                           absl::string_view out_role = "output",
                                           int out_index = 0) {
  const HostTensor& x = a.inputs[0];
  const HostTensor& y = a.inputs[1];
  absl::StatusOr<Shape> shape = BroadcastShapes(*x.shape, *y.shape);
  if (!shape.ok()) return OpError(op, shape.status().message());
  if (*shape != *out.shape) {
    return OpError(op, absl::StrCat(out.Describe(out_role, out_index), " must have shape ",
                                    shape->ToString(), ", the broadcast of ",
                                    x.Describe("input", 0), " and ", y.Describe("input", 1)));
  }
  return shape;
}

// `t` (the `index`-th `role`, "input" or "output") has dtype and shape `want`.
inline absl::Status CheckMeta(absl::string_view op, const HostTensor& t, absl::string_view role,
                              int index, const TensorMeta& want) {
  if (MetaOf(t) == want) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must be ", DataTypeName(want.dtype),
                                  want.shape.ToString()));
}

// `t` (the `index`-th `role`) has the shape of `like` (the `like_index`-th `like_role`).
inline absl::Status CheckSameShape(absl::string_view op, const HostTensor& t,
                                   absl::string_view role, int index, const HostTensor& like,
                                   absl::string_view like_role, int like_index) {
  if (*t.shape == *like.shape) return absl::OkStatus();
  return OpError(op, absl::StrCat(t.Describe(role, index), " must have the shape of ",
                                  like.Describe(like_role, like_index)));
}

// The shapes of a unary elementwise op (X -> Out) or of its gradient (`grad`: X, OutGrad ->
// XGrad): every operand has X's shape. Counts and dtypes are the caller's to check first.
template <typename Args>
absl::Status CheckUnaryShapes(absl::string_view op, const Args& a, bool grad) {
  if (grad) {
    SLUICE_RETURN_IF_ERROR(CheckSameShape(op, a.inputs[1], "input", 1, a.inputs[0], "input", 0));
  }
  return CheckSameShape(op, a.outputs[0], "output", 0, a.inputs[0], "input", 0);
}

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_OPERAND_CHECKS_H_
