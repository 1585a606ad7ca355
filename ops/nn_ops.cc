// Schemas of the nn family: matrix products, reductions, softmax and cross entropy. All
// take f32 or f64 (Label: i64). Shape rules live in ops/cpu/nn_shape_rules.h, shared with
// the kernels.
//
//   matmul           X, Y -> Out   attrs transpose_x=0, transpose_y=0 (0/1)
//                                  Out[..., m, n] = op(X)[..., m, k] * op(Y)[..., k, n]; op
//                                  swaps the last two dims when its flag is 1. Rank >= 2 on
//                                  both sides (a rank-1 operand is an error: reshape it);
//                                  the batch dims broadcast numpy-style.
//                                  grad: matmul_grad (same attrs)
//   matmul_grad      X, Y, OutGrad -> XGrad, YGrad   summed over broadcast batch dims
//   reduce_sum       X -> Out      attrs axes=[] (empty: all axes; negative counts from the
//                                  end; duplicates and out-of-range axes are errors),
//                                  keepdim=0 (1: reduced dims stay as 1). The sum of no
//                                  elements is 0.        grad: reduce_sum_grad (same attrs)
//   reduce_sum_grad  X, OutGrad -> XGrad   OutGrad broadcast back to X's shape
//   reduce_mean      X -> Out      like reduce_sum, divided by the number of reduced
//                                  elements; the mean of no elements is NaN (0/0).
//                                  grad: reduce_mean_grad (same attrs)
//   reduce_mean_grad X, OutGrad -> XGrad   OutGrad / count broadcast back to X's shape
//   softmax          X -> Out      attr axis=-1; exp(x - max) / sum (max subtracted for
//                                  stability)           grad: softmax_grad
//   softmax_grad     Out, OutGrad -> XGrad   Out * (OutGrad - sum(OutGrad * Out))
//   log_softmax      X -> Out      attr axis=-1; x - max - log(sum exp(x - max))
//                                  grad: log_softmax_grad
//   log_softmax_grad Out, OutGrad -> XGrad   OutGrad - exp(Out) * sum(OutGrad)
//   softmax_with_cross_entropy
//                    Logits [..., C], Label [..., 1] (i64 class indices) -> Softmax [..., C],
//                    Loss [..., 1]   attr axis=-1 (only the last axis is supported).
//                                  Loss = -log softmax[label]. A label outside [0, C) is an
//                                  error of the run (surfaces at the next sync point).
//                                  grad: softmax_with_cross_entropy_grad, LogitsGrad only
//                                  (labels are not differentiable)
//   softmax_with_cross_entropy_grad
//                    Softmax, Label, LossGrad, SoftmaxGrad (optional) -> LogitsGrad
//                                  LossGrad * (Softmax - onehot(Label)), plus the softmax
//                                  backward of SoftmaxGrad when given. Softmax comes first so
//                                  that the kernel's key dtype is the float one.
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/cpu/nn_shape_rules.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;
using nn::Describe;

absl::Status RequireMeta(const InferContext& ctx, absl::string_view name, const TensorMeta& have,
                         const TensorMeta& want, absl::string_view why) {
  if (have == want) return absl::OkStatus();
  return ctx.Error(absl::StrCat(Describe(name, have), " must be ", DataTypeName(want.dtype),
                                want.shape.ToString(), " (", why, ")"));
}

absl::StatusOr<nn::MatmulDims> MatmulDimsOf(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const bool tx, InOp(ctx, nn::FlagAttr(ctx.attrs(), "transpose_x")));
  SLUICE_ASSIGN_OR_RETURN(const bool ty, InOp(ctx, nn::FlagAttr(ctx.attrs(), "transpose_y")));
  return InOp(ctx, nn::MatmulShapes(ctx.input(0), ctx.input(1), tx, ty));
}

absl::StatusOr<Metas> InferMatmul(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(nn::MatmulDims d, MatmulDimsOf(ctx));
  return Single({ctx.input(0).dtype, d.out});
}

absl::StatusOr<Metas> InferMatmulGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(nn::MatmulDims d, MatmulDimsOf(ctx));
  SLUICE_RETURN_IF_ERROR(RequireMeta(
      ctx, "OutGrad", ctx.input(2), {ctx.input(0).dtype, d.out},
      absl::StrCat("Out of ", Describe("X", ctx.input(0)), " and ", Describe("Y", ctx.input(1)))));
  return Metas{{ctx.input(0)}, {ctx.input(1)}};
}

absl::StatusOr<Metas> InferReduce(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(ctx, nn::ReduceShapesFromAttrs(ctx.input(0), ctx.attrs())));
  return Single({ctx.input(0).dtype, d.out});
}

absl::StatusOr<Metas> InferReduceGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  SLUICE_ASSIGN_OR_RETURN(nn::ReduceDims d,
                          InOp(ctx, nn::ReduceShapesFromAttrs(ctx.input(0), ctx.attrs())));
  SLUICE_RETURN_IF_ERROR(RequireMeta(ctx, "OutGrad", ctx.input(1), {ctx.input(0).dtype, d.out},
                                     absl::StrCat("Out of ", Describe("X", ctx.input(0)))));
  return Single(ctx.input(0));
}

absl::Status CheckAxis(const InferContext& ctx, const TensorMeta& x, absl::string_view name) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, x, absl::StrCat("input ", name)));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(ctx, ctx.attrs().GetInt("axis")));
  return InOp(ctx, nn::NormalizeAxis(axis, x, name)).status();
}

absl::StatusOr<Metas> InferSoftmax(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAxis(ctx, ctx.input(0), "X"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferSoftmaxGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAxis(ctx, ctx.input(0), "Out"));
  SLUICE_RETURN_IF_ERROR(RequireMeta(ctx, "OutGrad", ctx.input(1), ctx.input(0), "that of Out"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferCrossEntropy(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(ctx, ctx.attrs().GetInt("axis")));
  SLUICE_RETURN_IF_ERROR(
      InOp(ctx, nn::CrossEntropyShapes(ctx.input(0), ctx.input(1), axis)).status());
  return Metas{{ctx.input(0)}, {{ctx.input(0).dtype, ctx.input(1).shape}}};
}

absl::StatusOr<Metas> InferCrossEntropyGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, InOp(ctx, ctx.attrs().GetInt("axis")));
  const TensorMeta& softmax = ctx.input(0);
  SLUICE_RETURN_IF_ERROR(
      InOp(ctx, nn::CrossEntropyShapes(softmax, ctx.input(1), axis, "Softmax")).status());
  SLUICE_RETURN_IF_ERROR(RequireMeta(ctx, "LossGrad", ctx.input(2),
                                     {softmax.dtype, ctx.input(1).shape}, "that of Loss"));
  if (!ctx.inputs(3).empty()) {
    SLUICE_RETURN_IF_ERROR(
        RequireMeta(ctx, "SoftmaxGrad", ctx.input(3), softmax, "that of Softmax"));
  }
  return Single(softmax);
}

std::vector<GradOpDesc> MatmulGrad(const GradContext& g) {
  return {GradOp("matmul_grad",
                 {{"X", g.Input("X")}, {"Y", g.Input("Y")}, {"OutGrad", g.OutputGrad("Out")}},
                 {{"XGrad", g.InputGrad("X")}, {"YGrad", g.InputGrad("Y")}},
                 GradAttrs(g, {"transpose_x", "transpose_y"}))};
}

GradMaker ReduceGrad(std::string grad_op) {
  return [grad_op](const GradContext& g) {
    return std::vector<GradOpDesc>{
        GradOp(grad_op, {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
               {{"XGrad", g.InputGrad("X")}}, GradAttrs(g, {"axes", "keepdim"}))};
  };
}

GradMaker SoftmaxGrad(std::string grad_op) {
  return [grad_op](const GradContext& g) {
    return std::vector<GradOpDesc>{
        GradOp(grad_op, {{"Out", g.Output("Out")}, {"OutGrad", g.OutputGrad("Out")}},
               {{"XGrad", g.InputGrad("X")}}, GradAttrs(g, {"axis"}))};
  };
}

std::vector<GradOpDesc> CrossEntropyGrad(const GradContext& g) {
  return {GradOp("softmax_with_cross_entropy_grad",
                 {{"Softmax", g.Output("Softmax")},
                  {"Label", g.Input("Label")},
                  {"LossGrad", g.OutputGrad("Loss")},
                  {"SoftmaxGrad", g.OutputGrad("Softmax")}},
                 {{"LogitsGrad", g.InputGrad("Logits")}}, GradAttrs(g, {"axis"}))};
}

}  // namespace

absl::Status RegisterNnOps(OpRegistry* registry) {
  const int64_t zero = 0;
  const int64_t last = -1;
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("matmul")
                                                      .Input("X")
                                                      .Input("Y")
                                                      .Output("Out")
                                                      .Attr("transpose_x", AttrType::kInt, zero)
                                                      .Attr("transpose_y", AttrType::kInt, zero)
                                                      .Infer(InferMatmul)
                                                      .Grad(MatmulGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("matmul_grad")
                                                      .Input("X")
                                                      .Input("Y")
                                                      .Input("OutGrad")
                                                      .Output("XGrad")
                                                      .Output("YGrad")
                                                      .Attr("transpose_x", AttrType::kInt, zero)
                                                      .Attr("transpose_y", AttrType::kInt, zero)
                                                      .Infer(InferMatmulGrad)));
  for (const char* op : {"reduce_sum", "reduce_mean"}) {
    const std::string grad_op = absl::StrCat(op, "_grad");
    SLUICE_RETURN_IF_ERROR(
        registry->RegisterSchema(OpSchema(op)
                                     .Input("X")
                                     .Output("Out")
                                     .Attr("axes", AttrType::kInts, std::vector<int64_t>{})
                                     .Attr("keepdim", AttrType::kInt, zero)
                                     .Infer(InferReduce)
                                     .Grad(ReduceGrad(grad_op))));
    SLUICE_RETURN_IF_ERROR(
        registry->RegisterSchema(OpSchema(grad_op)
                                     .Input("X")
                                     .Input("OutGrad")
                                     .Output("XGrad")
                                     .Attr("axes", AttrType::kInts, std::vector<int64_t>{})
                                     .Attr("keepdim", AttrType::kInt, zero)
                                     .Infer(InferReduceGrad)));
  }
  for (const char* op : {"softmax", "log_softmax"}) {
    const std::string grad_op = absl::StrCat(op, "_grad");
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema(op)
                                                        .Input("X")
                                                        .Output("Out")
                                                        .Attr("axis", AttrType::kInt, last)
                                                        .Infer(InferSoftmax)
                                                        .Grad(SoftmaxGrad(grad_op))));
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema(grad_op)
                                                        .Input("Out")
                                                        .Input("OutGrad")
                                                        .Output("XGrad")
                                                        .Attr("axis", AttrType::kInt, last)
                                                        .Infer(InferSoftmaxGrad)));
  }
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("softmax_with_cross_entropy")
                                                      .Input("Logits")
                                                      .Input("Label")
                                                      .Output("Softmax")
                                                      .Output("Loss")
                                                      .Attr("axis", AttrType::kInt, last)
                                                      .Infer(InferCrossEntropy)
                                                      .Grad(CrossEntropyGrad)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("softmax_with_cross_entropy_grad")
                                   .Input("Softmax")
                                   .Input("Label")
                                   .Input("LossGrad")
                                   .Input("SoftmaxGrad", /*variadic=*/false, /*optional=*/true)
                                   .Output("LogitsGrad")
                                   .Attr("axis", AttrType::kInt, last)
                                   .Infer(InferCrossEntropyGrad)));
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
