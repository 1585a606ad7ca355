// Schemas of the elementwise family: binary arithmetic with NumPy broadcasting, unary math
// functions, clip, and their grad ops. Every op takes and produces f32 or f64, except add,
// sub, mul, div, max, min, neg, abs, relu and clip, which also take i32 and i64.
//
//   add, sub, mul, div, max, min   X, Y -> Out     X and Y of one dtype; Out has the
//                                  broadcast of their shapes (NumPy rules: dimensions
//                                  aligned from the right, each pair equal or one of them 1)
//                                  grad: <op>_grad(X, Y, Out@GRAD)
//   add, sub, mul, div, neg, abs,  on i32 and i64 (ops/cpu/integer_arith_kernels.cc): +, -,
//   relu (integers)                * and negation wrap around (two's complement), so
//                                  |lowest| and lowest / -1 are the lowest value itself; div
//                                  truncates toward zero (C++, ONNX Div); a zero divisor is
//                                  an error of the run naming the element of Y. No gradient:
//                                  autodiff and autograd differentiate floats only, so
//                                  integer results are constants to them
//   max, min                       NaN propagates, whatever the argument order (NumPy
//                                  maximum/minimum, ONNX Max/Min): Out is X where X >= Y
//                                  (max) or X <= Y (min) or X is NaN, else Y. So a NaN in
//                                  either input gives NaN, and a tie gives X. Also i32 and
//                                  i64 (no gradient: autodiff differentiates floats only)
//   add_grad ... min_grad          X, Y, OutGrad -> XGrad, YGrad   OutGrad has Out's shape;
//                                  XGrad and YGrad have X's and Y's shapes: the gradient
//                                  summed over the dimensions where that input was broadcast
//                                  max_grad and min_grad route each element of OutGrad to
//                                  the input the forward op returned, the other gets 0: to
//                                  X on a tie and where X is NaN, to Y where Y wins or only
//                                  Y is NaN. XGrad + YGrad is OutGrad at every element
//   relu     X -> Out   max(X, 0) (NaN stays NaN)   grad: relu_grad(Out, Out@GRAD)
//   sigmoid  X -> Out   1 / (1 + e^-X)              grad: sigmoid_grad(Out, Out@GRAD)
//   tanh     X -> Out                               grad: tanh_grad(Out, Out@GRAD)
//   exp      X -> Out                               grad: exp_grad(Out, Out@GRAD)
//   log      X -> Out   natural log                 grad: log_grad(X, Out@GRAD)
//   sqrt     X -> Out                               grad: sqrt_grad(Out, Out@GRAD)
//   square   X -> Out   X * X                       grad: square_grad(X, Out@GRAD)
//   abs      X -> Out   |X| (NaN stays NaN)         grad: abs_grad(X, Out@GRAD)
//   neg      X -> Out   -X                          grad: neg(Out@GRAD)
//   pow      X -> Out   attr factor (default 1): X^factor as std::pow (NaN where X < 0 and
//                       factor is not whole; Paddle's pow)   grad: pow_grad(X, Out@GRAD)
//   relu_grad     Out, OutGrad -> XGrad   OutGrad where Out > 0, else 0 (0 at X = 0)
//   sigmoid_grad  Out, OutGrad -> XGrad   OutGrad * Out * (1 - Out)
//   tanh_grad     Out, OutGrad -> XGrad   OutGrad * (1 - Out^2)
//   exp_grad      Out, OutGrad -> XGrad   OutGrad * Out
//   log_grad      X, OutGrad -> XGrad     OutGrad / X
//   sqrt_grad     Out, OutGrad -> XGrad   OutGrad / (2 Out)
//   square_grad   X, OutGrad -> XGrad     2 X OutGrad
//   abs_grad      X, OutGrad -> XGrad     sign(X) OutGrad: 0 at X = 0, NaN where X is NaN
//   pow_grad      X, OutGrad -> XGrad     attr factor: factor X^(factor - 1) OutGrad
//   clip     X -> Out   attrs min, max (required): min(max(X, min), max) with max and
//                       min's NaN rule, so NaN stays NaN and +-inf go to the bounds (NumPy
//                       clip, ONNX Clip). min > max or a NaN bound is refused (NumPy would
//                       give max everywhere). Also i32 and i64: min is rounded up and max
//                       down to integers, saturated to the dtype's range (an infinite bound
//                       is no bound); refused when no integer lies between them
//                       (ops/internal/clip_bounds.h)   grad: clip_grad(X, Out@GRAD)
//   clip_grad     X, OutGrad -> XGrad     attrs min, max: OutGrad where min <= X <= max
//                                         (at the bounds too, as max and min give a tie
//                                         to X) or X is NaN: where Out is X itself; else 0
// The forward ops and the unary grad ops are elementwise (kOpElementwise); the binary grad
// ops reduce and are not. The grad ops have no grads themselves.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/clip_bounds.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

// The forward ops that also take integers (ONNX models compute shapes and indices in INT64
// and INT32 at run time): every binary op, and of the unary ones those exact on integers.
// Their rules for overflow and division by zero are in the comment above.
bool TakesIntegers(absl::string_view op) {
  return op == "add" || op == "sub" || op == "mul" || op == "div" || op == "max" || op == "min" ||
         op == "neg" || op == "abs" || op == "relu";
}

// X and Y (inputs 0 and 1) of one dtype and broadcastable: their broadcast shape. The dtype
// is f32 or f64, or also i32 or i64 when `integers`.
absl::StatusOr<Shape> BroadcastXY(const InferContext& ctx, bool integers = false) {
  const TensorMeta& x = ctx.input(0);
  const TensorMeta& y = ctx.input(1);
  if (x.dtype != y.dtype) {
    return ctx.Error(absl::StrCat("input X is ", MetaText(x), " but Y is ", MetaText(y),
                                  "; X and Y must have one dtype"));
  }
  if (integers) {
    if (x.dtype == DataType::kBool) {
      return ctx.Error(
          absl::StrCat("input X is ", MetaText(x), "; it must be f32, f64, i32 or i64"));
    }
  } else {
    SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, x, "input X"));
  }
  absl::StatusOr<Shape> shape = BroadcastShapes(x.shape, y.shape);
  if (!shape.ok()) return ctx.Error(absl::StrCat("inputs X and Y: ", shape.status().message()));
  return shape;
}

absl::StatusOr<Metas> InferBinary(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Shape shape, BroadcastXY(ctx, TakesIntegers(ctx.op())));
  return Single({ctx.input(0).dtype, std::move(shape)});
}

absl::StatusOr<Metas> InferBinaryGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Shape shape, BroadcastXY(ctx));
  const TensorMeta& x = ctx.input(0);
  const TensorMeta& g = ctx.input(2);
  if (g.dtype != x.dtype || g.shape != shape) {
    return ctx.Error(absl::StrCat("input OutGrad is ", MetaText(g), " but the op's output is ",
                                  DataTypeName(x.dtype), shape.ToString(), " (X is ", MetaText(x),
                                  ", Y is ", MetaText(ctx.input(1)), ")"));
  }
  return Metas{{x}, {ctx.input(1)}};
}

absl::StatusOr<Metas> InferUnary(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  if (!TakesIntegers(ctx.op())) {
    SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, x, "input X"));
  } else if (x.dtype == DataType::kBool) {
    return ctx.Error(absl::StrCat("input X is ", MetaText(x), "; it must be f32, f64, i32 or i64"));
  }
  return Single(x);
}

// Inputs (X or Out), OutGrad of one float dtype and shape -> XGrad like them.
InferFn InferUnaryGrad(std::string value_slot) {
  return [value_slot](const InferContext& ctx) -> absl::StatusOr<Metas> {
    const TensorMeta& v = ctx.input(0);
    const TensorMeta& g = ctx.input(1);
    SLUICE_RETURN_IF_ERROR(RequireFloat(ctx, v, absl::StrCat("input ", value_slot)));
    if (!(g == v)) {
      return ctx.Error(absl::StrCat("input OutGrad is ", MetaText(g), " but ", value_slot, " is ",
                                    MetaText(v), "; they must have one dtype and shape"));
    }
    return Single(v);
  };
}

absl::Status RegisterBinary(OpRegistry* registry, const std::string& op) {
  const std::string grad = op + "_grad";
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema(op)
          .Input("X")
          .Input("Y")
          .Output("Out")
          .Infer(InferBinary)
          .Grad([grad](const GradContext& g) {
            return std::vector<GradOpDesc>{GradOp(
                grad, {{"X", g.Input("X")}, {"Y", g.Input("Y")}, {"OutGrad", g.OutputGrad("Out")}},
                {{"XGrad", g.InputGrad("X")}, {"YGrad", g.InputGrad("Y")}})};
          })
          .InPlace("X", "Out")
          .InPlace("Y", "Out")
          .Flags(kOpElementwise)));
  return registry->RegisterSchema(
      OpSchema(grad).Input("X").Input("Y").Input("OutGrad").Output("XGrad").Output("YGrad").Infer(
          InferBinaryGrad));
}

// `value_slot` is what the grad op reads besides OutGrad: "X" or "Out".
absl::Status RegisterUnary(OpRegistry* registry, const std::string& op,
                           const std::string& value_slot) {
  const std::string grad = op + "_grad";
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema(op)
          .Input("X")
          .Output("Out")
          .Infer(InferUnary)
          .Grad([grad, value_slot](const GradContext& g) {
            const std::vector<std::string>& value =
                value_slot == "X" ? g.Input("X") : g.Output("Out");
            return std::vector<GradOpDesc>{
                GradOp(grad, {{value_slot, value}, {"OutGrad", g.OutputGrad("Out")}},
                       {{"XGrad", g.InputGrad("X")}})};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise)));
  return registry->RegisterSchema(OpSchema(grad)
                                      .Input(value_slot)
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Infer(InferUnaryGrad(value_slot))
                                      .InPlace(value_slot, "XGrad")
                                      .InPlace("OutGrad", "XGrad")
                                      .Flags(kOpElementwise));
}

// Refuses clip's bounds for `dtype` as its kernels would (ops/internal/clip_bounds.h), so a
// bad pair fails when the op is built rather than when it runs.
absl::Status CheckClipBounds(const InferContext& ctx, DataType dtype) {
  SLUICE_ASSIGN_OR_RETURN(const double lo, ctx.attrs().GetFloat("min"));
  SLUICE_ASSIGN_OR_RETURN(const double hi, ctx.attrs().GetFloat("max"));
  switch (dtype) {
    case DataType::kF32:
      return MakeClipBounds<float>(ctx.op(), lo, hi).status();
    case DataType::kF64:
      return MakeClipBounds<double>(ctx.op(), lo, hi).status();
    case DataType::kI32:
      return MakeClipBounds<int32_t>(ctx.op(), lo, hi).status();
    case DataType::kI64:
      return MakeClipBounds<int64_t>(ctx.op(), lo, hi).status();
    case DataType::kBool:
      break;
  }
  return ctx.Error(
      absl::StrCat("input X is ", DataTypeName(dtype), "; it must be f32, f64, i32 or i64"));
}

absl::StatusOr<Metas> InferClip(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckClipBounds(ctx, ctx.input(0).dtype));
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferClipGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(Metas metas, InferUnaryGrad("X")(ctx));
  SLUICE_RETURN_IF_ERROR(CheckClipBounds(ctx, ctx.input(0).dtype));
  return metas;
}

absl::Status RegisterClip(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("clip")
          .Input("X")
          .Output("Out")
          .Attr("min", AttrType::kFloat, std::nullopt)
          .Attr("max", AttrType::kFloat, std::nullopt)
          .Infer(InferClip)
          .Grad([](const GradContext& g) {
            // The grad op needs the bounds to tell which elements were clipped.
            vm::AttrMap attrs;
            attrs.Set("min", g.attrs().GetFloat("min").value_or(0.0))
                .Set("max", g.attrs().GetFloat("max").value_or(0.0));
            return std::vector<GradOpDesc>{
                GradOp("clip_grad", {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
                       {{"XGrad", g.InputGrad("X")}}, attrs)};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise)));
  return registry->RegisterSchema(OpSchema("clip_grad")
                                      .Input("X")
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Attr("min", AttrType::kFloat, std::nullopt)
                                      .Attr("max", AttrType::kFloat, std::nullopt)
                                      .Infer(InferClipGrad)
                                      .InPlace("X", "XGrad")
                                      .InPlace("OutGrad", "XGrad")
                                      .Flags(kOpElementwise));
}

// neg's gradient is neg of the output's: no grad op of its own.
absl::Status RegisterNeg(OpRegistry* registry) {
  return registry->RegisterSchema(
      OpSchema("neg")
          .Input("X")
          .Output("Out")
          .Infer(InferUnary)
          .Grad([](const GradContext& g) {
            return std::vector<GradOpDesc>{
                GradOp("neg", {{"X", g.OutputGrad("Out")}}, {{"Out", g.InputGrad("X")}})};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise));
}

absl::Status RegisterPow(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
      OpSchema("pow")
          .Input("X")
          .Output("Out")
          .Attr("factor", AttrType::kFloat, 1.0)
          .Infer(InferUnary)
          .Grad([](const GradContext& g) {
            vm::AttrMap attrs;
            attrs.Set("factor", g.attrs().GetFloat("factor").value_or(1.0));
            return std::vector<GradOpDesc>{
                GradOp("pow_grad", {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
                       {{"XGrad", g.InputGrad("X")}}, attrs)};
          })
          .InPlace("X", "Out")
          .Flags(kOpElementwise)));
  return registry->RegisterSchema(OpSchema("pow_grad")
                                      .Input("X")
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Attr("factor", AttrType::kFloat, 1.0)
                                      .Infer(InferUnaryGrad("X"))
                                      .InPlace("X", "XGrad")
                                      .InPlace("OutGrad", "XGrad")
                                      .Flags(kOpElementwise));
}

}  // namespace

absl::Status RegisterElementwiseOps(OpRegistry* registry) {
  for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
    SLUICE_RETURN_IF_ERROR(RegisterBinary(registry, op));
  }
  const std::pair<const char*, const char*> unary[] = {
      {"relu", "Out"}, {"sigmoid", "Out"}, {"tanh", "Out"}, {"exp", "Out"},
      {"log", "X"},    {"sqrt", "Out"},    {"square", "X"}, {"abs", "X"},
  };
  for (const auto& [op, value_slot] : unary) {
    SLUICE_RETURN_IF_ERROR(RegisterUnary(registry, op, value_slot));
  }
  SLUICE_RETURN_IF_ERROR(RegisterNeg(registry));
  SLUICE_RETURN_IF_ERROR(RegisterPow(registry));
  return RegisterClip(registry);
}

}  // namespace sluice::ops::internal
