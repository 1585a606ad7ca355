// Schemas of the unary math family (the table in ops/internal/unary_math.h): the
// trigonometric and hyperbolic functions, their inverses, and floor, ceil and round, each
// X -> Out on f32 or f64. Values follow the C library (std::sin, ...; CUDA's sinf/sin on the
// device): NaN stays NaN, and an argument outside the domain (asin(2), acosh(0), atanh(2))
// gives NaN, never an error; the poles give the library's infinities (atanh(1) = inf).
//
//   sin, cos, tan              X -> Out        grad: <op>_grad(X, Out@GRAD)
//   asin, acos, atan           X -> Out        grad: <op>_grad(X, Out@GRAD)
//   sinh, cosh                 X -> Out        grad: <op>_grad(X, Out@GRAD)
//   asinh, acosh, atanh        X -> Out        grad: <op>_grad(X, Out@GRAD)
//   floor, ceil                X -> Out        rounded down, up
//   round                      X -> Out        to the nearest integer, halves to even (ONNX
//                                              Round; std::nearbyint in the default mode)
//   <op>_grad     X, OutGrad -> XGrad   f'(X) OutGrad, with f'(X) as below (each from X, so
//                                       that no grad op needs the forward output alive):
//     sin: cos X        cos: -sin X        tan: 1 + tan^2 X
//     asin: 1 / sqrt((1 - X)(1 + X))       acos: -1 / sqrt((1 - X)(1 + X))
//     atan: 1 / (1 + X^2)                  sinh: cosh X        cosh: sinh X
//     asinh: 1 / sqrt(X^2 + 1)             acosh: 1 / sqrt((X - 1)(X + 1))
//     atanh: 1 / ((1 - X)(1 + X))
//   (the products (1 - X)(1 + X) rather than 1 - X^2: no cancellation near |X| = 1). At the
//   domain's ends the derivative is infinite, outside it NaN, as f'(X) computed there gives.
// floor, ceil and round have a gradient of zero everywhere (PyTorch's convention; at the
// jumps too): their grad maker writes fill_zeros_like(X) as XGrad, so a model that rounds on
// the way to its loss still differentiates (the gradient through the rounding is zero)
// instead of failing for want of a grad maker. They have no grad op of their own.
// Every op here is elementwise (kOpElementwise) and may write over its input (Out over X;
// XGrad over X or OutGrad). None has a compiled (fused) form yet: the subgraph compiler
// leaves them as ops, as it does erf.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"
#include "ops/internal/unary_math.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

absl::StatusOr<Metas> InferUnaryMath(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, ctx.input(0), "input X"));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferUnaryMathGrad(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  const TensorMeta& g = ctx.input(1);
  SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, x, "input X"));
  if (!(g == x)) {
    return ctx.Error(absl::StrCat("input OutGrad is ", MetaText(g), " but X is ", MetaText(x),
                                  "; they must have one dtype and shape"));
  }
  return Single(x);
}

// f'(X) OutGrad through the op's grad op, or zeros like X for the piecewise-constant ones.
GradMaker UnaryMathGradMaker(const UnaryMathOp& op) {
  if (op.grad == nullptr) {
    return [](const GradContext& g) -> std::vector<GradOpDesc> {
      return {GradOp("fill_zeros_like", {{"X", g.Input("X")}}, {{"Out", g.InputGrad("X")}})};
    };
  }
  return [grad = std::string(op.grad)](const GradContext& g) -> std::vector<GradOpDesc> {
    return {GradOp(grad, {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
                   {{"XGrad", g.InputGrad("X")}})};
  };
}

}  // namespace

absl::Status RegisterUnaryMathOps(OpRegistry* registry) {
  for (const UnaryMathOp& op : kUnaryMathOps) {
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema(op.name)
                                                        .Input("X")
                                                        .Output("Out")
                                                        .Infer(InferUnaryMath)
                                                        .Grad(UnaryMathGradMaker(op))
                                                        .InPlace("X", "Out")
                                                        .Flags(kOpElementwise)));
    if (op.grad == nullptr) continue;
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema(op.grad)
                                                        .Input("X")
                                                        .Input("OutGrad")
                                                        .Output("XGrad")
                                                        .Infer(InferUnaryMathGrad)
                                                        .InPlace("X", "XGrad")
                                                        .InPlace("OutGrad", "XGrad")
                                                        .Flags(kOpElementwise)));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
