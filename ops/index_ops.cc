// Schemas of the index family: ops that pick elements by position or by a condition (gather,
// slice, where), their grad ops, and erf, the one special function ONNX models need that the
// elementwise family lacks. Shape rules live in ops/internal/index_rules.h, shared with the
// kernels.
//
//   gather       X, Index -> Out   attr axis=0 (negative counts from the end). X any dtype,
//                                  rank >= 1; Index i32 or i64 of any shape (rank 0 too);
//                                  Out = X.shape[:axis] + Index.shape + X.shape[axis+1:],
//                                  Out[o, k, i] = X[o, Index[k], i]. An index in [-n, n)
//                                  counts from the end when negative (ONNX's Gather); one
//                                  outside is an error of the run (it surfaces at the next
//                                  sync point, as softmax_with_cross_entropy's labels).
//                                  grad: gather_grad (X, Index, Out@GRAD; same axis)
//   gather_grad  X, Index, OutGrad -> XGrad   f32/f64; X only for its shape. XGrad is zero
//                                  but for the rows Index names, where OutGrad's slices are
//                                  added in the order of Index (a repeated index sums its
//                                  slices, in the same order on every device)
//   slice        X -> Out          attrs starts, ends (required), axes=[] (empty: 0, 1, ...),
//                                  steps=[] (empty: all 1): ONNX's Slice, resolved from X's
//                                  static shape when the op is built (negative starts and
//                                  ends count from the end, then clamp; negative steps walk
//                                  backward). X any dtype.   grad: slice_grad (same attrs)
//   slice_grad   X, OutGrad -> XGrad   f32/f64; X only for its shape. OutGrad scattered back
//                                  to the elements slice read, zeros elsewhere
//   where        Cond, X, Y -> Out  Cond bool; X and Y of one dtype (any); Out = X where Cond
//                                  else Y, NumPy broadcasting over all three
//                                  grad: where_grad (Out@GRAD, Cond, X, Y)
//   where_grad   OutGrad, Cond, X, Y -> XGrad, YGrad   f32/f64; X and Y only for their
//                                  shapes. XGrad = OutGrad where Cond, YGrad = OutGrad where
//                                  not, each summed over the dims where its input was
//                                  broadcast. OutGrad comes first, so that the kernel's key
//                                  dtype is the float one (as reshape_grad's)
//   erf          X -> Out          f32/f64: the error function   grad: erf_grad(X, Out@GRAD)
//   erf_grad     X, OutGrad -> XGrad   2 / sqrt(pi) exp(-X^2) OutGrad
// where and erf are elementwise (kOpElementwise) and may write over X (where: X or Y of the
// output's shape); the others move elements between positions and declare no in-place pair.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/index_rules.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

// A rule's error as the op's ("op 'gather': ...").
template <typename V>
absl::StatusOr<V> IndexRuleResult(const InferContext& ctx, absl::StatusOr<V> value) {
  if (!value.ok()) return ctx.Error(value.status().message());
  return value;
}

// InvalidArgument unless input `name` is `want` (the output of the forward op, `what`).
absl::Status RequireGradMeta(const InferContext& ctx, absl::string_view name,
                             const TensorMeta& have, const TensorMeta& want,
                             absl::string_view what) {
  if (have == want) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat("input ", name, " is ", MetaText(have), " but ", what, " is ", MetaText(want)));
}

absl::StatusOr<index::GatherDims> GatherDimsOf(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, IndexRuleResult(ctx, ctx.attrs().GetInt("axis")));
  // X and Index are inputs 0 and 1 of gather and of gather_grad.
  return IndexRuleResult(ctx, index::GatherShapes(ctx.input(0), ctx.input(1), axis));
}

absl::StatusOr<Metas> InferGather(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(index::GatherDims d, GatherDimsOf(ctx));
  return Single({ctx.input(0).dtype, std::move(d.out)});
}

absl::StatusOr<Metas> InferGatherGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  SLUICE_ASSIGN_OR_RETURN(index::GatherDims d, GatherDimsOf(ctx));
  SLUICE_RETURN_IF_ERROR(RequireGradMeta(ctx, "OutGrad", ctx.input(2),
                                         {ctx.input(0).dtype, std::move(d.out)},
                                         "the output of gather"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferSlice(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(index::SliceDims d,
                          IndexRuleResult(ctx, index::SliceShapes(ctx.input(0), ctx.attrs())));
  return Single({ctx.input(0).dtype, std::move(d.out)});
}

absl::StatusOr<Metas> InferSliceGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  SLUICE_ASSIGN_OR_RETURN(index::SliceDims d,
                          IndexRuleResult(ctx, index::SliceShapes(ctx.input(0), ctx.attrs())));
  SLUICE_RETURN_IF_ERROR(RequireGradMeta(
      ctx, "OutGrad", ctx.input(1), {ctx.input(0).dtype, std::move(d.out)}, "the output of slice"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferWhere(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(
      Shape shape,
      IndexRuleResult(ctx, index::WhereShape(ctx.input(0), ctx.input(1), ctx.input(2))));
  return Single({ctx.input(1).dtype, std::move(shape)});
}

// OutGrad, Cond, X, Y -> XGrad, YGrad.
absl::StatusOr<Metas> InferWhereGrad(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(2);
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, x, "input X"));
  SLUICE_ASSIGN_OR_RETURN(Shape shape,
                          IndexRuleResult(ctx, index::WhereShape(ctx.input(1), x, ctx.input(3))));
  SLUICE_RETURN_IF_ERROR(RequireGradMeta(ctx, "OutGrad", ctx.input(0), {x.dtype, std::move(shape)},
                                         "the output of where"));
  return Metas{{x}, {ctx.input(3)}};
}

absl::StatusOr<Metas> InferErf(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferErfGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  SLUICE_RETURN_IF_ERROR(RequireGradMeta(ctx, "OutGrad", ctx.input(1), ctx.input(0), "input X"));
  return Single(ctx.input(0));
}

std::vector<GradOpDesc> GatherGradMaker(const GradContext& g) {
  return {
      GradOp("gather_grad",
             {{"X", g.Input("X")}, {"Index", g.Input("Index")}, {"OutGrad", g.OutputGrad("Out")}},
             {{"XGrad", g.InputGrad("X")}}, GradAttrs(g, {"axis"}))};
}

std::vector<GradOpDesc> SliceGradMaker(const GradContext& g) {
  return {GradOp("slice_grad", {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
                 {{"XGrad", g.InputGrad("X")}}, GradAttrs(g, {"starts", "ends", "axes", "steps"}))};
}

std::vector<GradOpDesc> WhereGradMaker(const GradContext& g) {
  return {GradOp("where_grad",
                 {{"OutGrad", g.OutputGrad("Out")},
                  {"Cond", g.Input("Cond")},
                  {"X", g.Input("X")},
                  {"Y", g.Input("Y")}},
                 {{"XGrad", g.InputGrad("X")}, {"YGrad", g.InputGrad("Y")}})};
}

std::vector<GradOpDesc> ErfGradMaker(const GradContext& g) {
  return {GradOp("erf_grad", {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
                 {{"XGrad", g.InputGrad("X")}})};
}

absl::Status RegisterGather(OpRegistry* registry) {
  const int64_t zero = 0;
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("gather")
                                                      .Input("X")
                                                      .Input("Index")
                                                      .Output("Out")
                                                      .Attr("axis", AttrType::kInt, zero)
                                                      .Infer(InferGather)
                                                      .Grad(GatherGradMaker)));
  return registry->RegisterSchema(OpSchema("gather_grad")
                                      .Input("X")
                                      .Input("Index")
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Attr("axis", AttrType::kInt, zero)
                                      .Infer(InferGatherGrad));
}

absl::Status RegisterSlice(OpRegistry* registry) {
  const std::vector<int64_t> none;
  for (const char* op : {"slice", "slice_grad"}) {
    const bool grad = std::string(op) == "slice_grad";
    OpSchema schema(op);
    schema.Input("X");
    if (grad) schema.Input("OutGrad");
    schema.Output(grad ? "XGrad" : "Out")
        .Attr("starts", AttrType::kInts, std::nullopt)
        .Attr("ends", AttrType::kInts, std::nullopt)
        .Attr("axes", AttrType::kInts, none)
        .Attr("steps", AttrType::kInts, none)
        .Infer(grad ? InferSliceGrad : InferSlice);
    if (!grad) schema.Grad(SliceGradMaker);
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(std::move(schema)));
  }
  return absl::OkStatus();
}

absl::Status RegisterWhere(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("where")
                                                      .Input("Cond")
                                                      .Input("X")
                                                      .Input("Y")
                                                      .Output("Out")
                                                      .Infer(InferWhere)
                                                      .Grad(WhereGradMaker)
                                                      .InPlace("X", "Out")
                                                      .InPlace("Y", "Out")
                                                      .Flags(kOpElementwise)));
  return registry->RegisterSchema(OpSchema("where_grad")
                                      .Input("OutGrad")
                                      .Input("Cond")
                                      .Input("X")
                                      .Input("Y")
                                      .Output("XGrad")
                                      .Output("YGrad")
                                      .Infer(InferWhereGrad));
}

absl::Status RegisterErf(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("erf")
                                                      .Input("X")
                                                      .Output("Out")
                                                      .Infer(InferErf)
                                                      .Grad(ErfGradMaker)
                                                      .InPlace("X", "Out")
                                                      .Flags(kOpElementwise)));
  return registry->RegisterSchema(OpSchema("erf_grad")
                                      .Input("X")
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Infer(InferErfGrad)
                                      .InPlace("X", "XGrad")
                                      .InPlace("OutGrad", "XGrad")
                                      .Flags(kOpElementwise));
}

}  // namespace

absl::Status RegisterIndexOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(RegisterGather(registry));
  SLUICE_RETURN_IF_ERROR(RegisterSlice(registry));
  SLUICE_RETURN_IF_ERROR(RegisterWhere(registry));
  return RegisterErf(registry);
}

}  // namespace sluice::ops::internal
