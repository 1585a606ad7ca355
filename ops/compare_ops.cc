// Schemas of the compare family: comparisons and logical ops, whose bool results are the
// predicates of control flow (cond, while), and increment, a loop counter's step.
//
//   less_than, less_equal,         X, Y -> Out     X and Y of one dtype, f32, f64, i32 or
//   greater_than, greater_equal,                   i64; Out is bool with the broadcast of
//   equal, not_equal                               their shapes (NumPy rules, as add):
//                                                  X < Y, X <= Y, X > Y, X >= Y, X == Y,
//                                                  X != Y. IEEE for floats: a comparison
//                                                  with NaN is false, except not_equal,
//                                                  which is true; -0 equals 0
//   logical_and, logical_or,       X, Y -> Out     X and Y bool (broadcasting as above);
//   logical_xor                                    Out bool. A stored byte other than 0
//                                                  reads as true
//   logical_not                    X -> Out        X bool; Out bool of X's shape
//   increment                      X -> Out        Out = X + value, attr value=1 (float);
//                                                  X f32, f64, i32 or i64 of any shape, Out
//                                                  like X. For an integer X the value must
//                                                  be an integer in X's range; integer sums
//                                                  wrap around (two's complement)
//                                                  grad: assign(Out@GRAD) to X
// The comparisons and logical ops have no grad maker: their outputs are bool, which autodiff
// does not differentiate, so no gradient flows back through them. Every op here is
// elementwise (kOpElementwise).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

bool IsNumeric(DataType dtype) { return dtype != DataType::kBool; }

// InvalidArgument unless `meta` has a numeric dtype (f32, f64, i32, i64).
absl::Status RequireNumeric(const InferContext& ctx, const TensorMeta& meta,
                            absl::string_view what) {
  if (IsNumeric(meta.dtype)) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " is ", MetaText(meta), "; it must be f32, f64, i32 or i64"));
}

absl::Status RequireBool(const InferContext& ctx, const TensorMeta& meta, absl::string_view what) {
  if (meta.dtype == DataType::kBool) return absl::OkStatus();
  return ctx.Error(absl::StrCat(what, " is ", MetaText(meta), "; it must be bool"));
}

// X and Y (inputs 0 and 1) of one dtype and broadcastable: Out, bool of their broadcast shape.
absl::StatusOr<Metas> InferBoolBroadcast(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  const TensorMeta& y = ctx.input(1);
  if (x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("input X is ", MetaText(x), " but Y is ", MetaText(y),
                                  "; X and Y must have one dtype"));
  }
  absl::StatusOr<Shape> shape = BroadcastShapes(x.shape, y.shape);
  if (!shape.ok()) return ctx.Error(absl::StrCat("inputs X and Y: ", shape.status().message()));
  return Single({DataType::kBool, *std::move(shape)});
}

absl::StatusOr<Metas> InferCompare(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireNumeric(ctx, ctx.input(0), "input X"));
  SLUICE_RETURN_IF_ERROR(RequireNumeric(ctx, ctx.input(1), "input Y"));
  return InferBoolBroadcast(ctx);
}

absl::StatusOr<Metas> InferLogical(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireBool(ctx, ctx.input(0), "input X"));
  SLUICE_RETURN_IF_ERROR(RequireBool(ctx, ctx.input(1), "input Y"));
  return InferBoolBroadcast(ctx);
}

absl::StatusOr<Metas> InferLogicalNot(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireBool(ctx, ctx.input(0), "input X"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferIncrement(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  SLUICE_RETURN_IF_ERROR(RequireNumeric(ctx, x, "input X"));
  SLUICE_ASSIGN_OR_RETURN(const double value, ctx.attrs().GetFloat("value"));
  SLUICE_RETURN_IF_ERROR(CheckIncrementValue(ctx.op(), x.dtype, value));
  return Single(x);
}

absl::Status RegisterBoolOp(OpRegistry* registry, const std::string& op, int inputs,
                            InferFn infer) {
  OpSchema schema(op);
  schema.Input("X");
  if (inputs == 2) schema.Input("Y");
  schema.Output("Out").Infer(std::move(infer)).Flags(kOpElementwise);
  // Out is bool: an alias is possible only for bool inputs, read element by element.
  schema.InPlace("X", "Out");
  if (inputs == 2) schema.InPlace("Y", "Out");
  return registry->RegisterSchema(std::move(schema));
}

}  // namespace

absl::Status CheckIncrementValue(absl::string_view op, DataType dtype, double value) {
  // The bounds of i32 and i64 as doubles (both exact): [lo, hi).
  double lo, hi;
  switch (dtype) {
    case DataType::kI32:
      lo = -0x1p31;
      hi = 0x1p31;
      break;
    case DataType::kI64:
      lo = -0x1p63;
      hi = 0x1p63;
      break;
    default:
      return absl::OkStatus();  // any value, NaN and infinities too, for f32 and f64
  }
  if (std::isfinite(value) && std::trunc(value) == value && value >= lo && value < hi) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("op '", op, "': attribute 'value' is ", value, "; for an ", DataTypeName(dtype),
                   " input it must be an integer in the range of ", DataTypeName(dtype)));
}

absl::Status RegisterCompareOps(OpRegistry* registry) {
  for (const char* op :
       {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"}) {
    SLUICE_RETURN_IF_ERROR(RegisterBoolOp(registry, op, 2, InferCompare));
  }
  for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
    SLUICE_RETURN_IF_ERROR(RegisterBoolOp(registry, op, 2, InferLogical));
  }
  SLUICE_RETURN_IF_ERROR(RegisterBoolOp(registry, "logical_not", 1, InferLogicalNot));
  return registry->RegisterSchema(
      OpSchema("increment")
          .Input("X")
          .Output("Out")
          .Attr("value", AttrType::kFloat, 1.0)
          .Infer(InferIncrement)
          .Grad([](const GradContext& g) {
            return std::vector<GradOpDesc>{
                GradOp("assign", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}})};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise));
}

}  // namespace sluice::ops::internal
