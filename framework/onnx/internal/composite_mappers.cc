// Mappers for ONNX ops that Sluice has no op of its own for, each a composition of existing
// ops (node_table.h): CastLike onto cast; Mod onto integer division (or folded at import);
// Sign, IsNaN, IsInf, PRelu, Shrink, Swish and SwiGLU onto comparisons, where and arithmetic;
// LRN onto avg_pool2d over the channels; Trilu as a where over a mask computed at import;
// EyeLike as a constant. Reductions and normalizations compose in
// composite_reduce_mappers.cc, Pad, Tile and the space/depth moves in
// composite_layout_mappers.cc. Also the helpers those files share (mapper_util.h).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace composite_mapping {

bool IsFloat(DataType dtype) { return dtype == DataType::kF32 || dtype == DataType::kF64; }

// CastLike of a constant input as a Cast node to `dtype` through the constant-folding hook:
// true when the output became a constant.
absl::StatusOr<bool> FoldCastLike(NodeContext& ctx, DataType dtype) {
  ::onnx::NodeProto cast;
  cast.set_name(ctx.node().name());
  cast.set_op_type("Cast");
  cast.add_input(ctx.node().input(0));
  cast.add_output(ctx.node().output(0));
  auto* to = cast.add_attribute();
  to->set_name("to");
  to->set_type(::onnx::AttributeProto::INT);
  to->set_i(OnnxTypeOfDtype(dtype));
  NodeContext cast_ctx(cast, ctx.opset(), &ctx.state());
  return TryFoldConstants(cast_ctx);
}

// a mod b as ONNX's Mod: fmod keeps a's sign (C's fmod and %), else b's (Python's %). An
// integer b of 0 is an error.
template <typename T>
absl::StatusOr<T> ModOf(const NodeContext& ctx, T a, T b, bool fmod) {
  T r{};
  if constexpr (std::is_floating_point_v<T>) {
    r = std::fmod(a, b);
  } else {
    if (b == 0) return ctx.Error("the divisor B holds 0");
    r = b == -1 ? 0 : a % b;  // (the lowest value % -1 overflows)
  }
  if (!fmod && r != 0 && (r < 0) != (b < 0)) r += b;
  return r;
}

// Mod of constant inputs (at most 2^24 output elements, as the constant-only ops), computed
// at import.
absl::StatusOr<HostTensor> FoldMod(NodeContext& ctx, const HostTensor& a, const HostTensor& b,
                                   bool fmod) {
  absl::StatusOr<Shape> shape = BroadcastShapes(a.shape, b.shape);
  if (!shape.ok()) return ctx.Error(shape.status().message());
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, shape->dims(), int64_t{1} << 24).status());
  const std::vector<int64_t> ia = BroadcastIndex(a.shape, *shape);
  const std::vector<int64_t> ib = BroadcastIndex(b.shape, *shape);
  HostTensor out = NewTensor(a.dtype, *shape);
  SLUICE_RETURN_IF_ERROR(DispatchDtype(a.dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return ctx.Error("Mod of BOOL");
    } else {
      for (size_t i = 0; i < ia.size(); ++i) {
        SLUICE_ASSIGN_OR_RETURN(T v,
                                ModOf<T>(ctx, HostLoad<T>(a, ia[i]), HostLoad<T>(b, ib[i]), fmod));
        HostStore<T>(out, static_cast<int64_t>(i), v);
      }
      return absl::OkStatus();
    }
  }));
  return out;
}

}  // namespace composite_mapping

absl::StatusOr<Value> ScalarConstant(const NodeContext& ctx, double value, DataType dtype) {
  return Built(ctx, fn::FillConstant(Shape(), value, dtype));
}

absl::StatusOr<Value> ImportConstant(NodeContext& ctx, absl::string_view what, HostTensor value) {
  const std::string base =
      absl::StrCat(ctx.num_outputs() > 0 ? ctx.node().output(0) : ctx.node().name(), "__", what);
  std::string name = base;
  for (int n = 1; ctx.state().Has(name); ++n) name = absl::StrCat(base, "_", n);
  ctx.state().BindConstant(name, std::move(value));
  absl::StatusOr<Var> var = ctx.state().VarOf(name);
  if (!var.ok()) return ctx.Error(var.status().message());
  return Value(*std::move(var));
}

absl::StatusOr<InputType> TypeOfInput(NodeContext& ctx, int i) {
  if (ctx.HasInput(i)) {
    if (const HostTensor* constant = ctx.state().Constant(ctx.node().input(i))) {
      return InputType{constant->dtype, constant->shape};
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Value v, ctx.Input(i));
  return InputType{v.var().dtype(), v.var().shape()};
}

// A mod B (fmod 1: the sign of A; 0: the sign of B). Constant inputs fold at import (any
// dtype); integers computed at run time as r = A - (A / B) * B (truncating division), plus B
// where r is not 0 and its sign differs from B's (fmod 0). Floats computed at run time are
// refused: no op computes fmod exactly.
absl::Status MapMod(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"fmod"}));
  SLUICE_ASSIGN_OR_RETURN(const bool fmod, ctx.FlagAttr("fmod", false));
  if (ctx.num_inputs() != 2) return ctx.Error("needs two inputs, A and B");
  SLUICE_ASSIGN_OR_RETURN(const InputType a_type, TypeOfInput(ctx, 0));
  SLUICE_ASSIGN_OR_RETURN(const InputType b_type, TypeOfInput(ctx, 1));
  if (a_type.dtype != b_type.dtype) {
    return ctx.Error(absl::StrCat("A is ", DataTypeName(a_type.dtype), " but B is ",
                                  DataTypeName(b_type.dtype)));
  }
  const HostTensor* a_const = ctx.state().Constant(ctx.node().input(0));
  const HostTensor* b_const = ctx.state().Constant(ctx.node().input(1));
  if (a_const != nullptr && b_const != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(HostTensor out,
                            composite_mapping::FoldMod(ctx, *a_const, *b_const, fmod != 0));
    ctx.SetConstantOutput(0, std::move(out));
    return absl::OkStatus();
  }
  if (composite_mapping::IsFloat(a_type.dtype) || a_type.dtype == DataType::kBool) {
    return ctx.Error(absl::StrCat("Mod of ", DataTypeName(a_type.dtype),
                                  " values computed at run time is not supported (integers only; "
                                  "constant inputs fold at import)"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value quotient, Built(ctx, fn::Div(a, b)));
  SLUICE_ASSIGN_OR_RETURN(Value whole, Built(ctx, fn::Mul(quotient, b)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Sub(a, whole)));
  if (fmod == 0) {
    SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, a_type.dtype));
    SLUICE_ASSIGN_OR_RETURN(Value nonzero, Built(ctx, fn::NotEqual(out, zero)));
    SLUICE_ASSIGN_OR_RETURN(Value r_negative, Built(ctx, fn::LessThan(out, zero)));
    SLUICE_ASSIGN_OR_RETURN(Value b_negative, Built(ctx, fn::LessThan(b, zero)));
    SLUICE_ASSIGN_OR_RETURN(Value signs_differ, Built(ctx, fn::LogicalXor(r_negative, b_negative)));
    SLUICE_ASSIGN_OR_RETURN(Value shift, Built(ctx, fn::LogicalAnd(nonzero, signs_differ)));
    SLUICE_ASSIGN_OR_RETURN(Value shifted, Built(ctx, fn::Add(out, b)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Where(shift, shifted, out)));
  }
  return ctx.SetOutput(0, out);
}

// Cast to target_type's dtype; a constant input of at most 4096 elements casts at import.
// saturate and round_mode apply only to the FLOAT8 types, which Sluice lacks: any value
// means the same here.
absl::Status MapCastLike(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"saturate", "round_mode"}));
  if (ctx.num_inputs() != 2 || ctx.num_outputs() != 1) {
    return ctx.Error("needs two inputs, input and target_type, and one output");
  }
  SLUICE_ASSIGN_OR_RETURN(const InputType target, TypeOfInput(ctx, 1));
  if (ctx.HasInput(0) && ctx.state().Constant(ctx.node().input(0)) != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(const bool folded, composite_mapping::FoldCastLike(ctx, target.dtype));
    if (folded) return absl::OkStatus();
  }
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Cast(x, target.dtype)));
  return ctx.SetOutput(0, out);
}

// (x > 0) - (x < 0) in x's dtype; NaN stays NaN (where x != x).
absl::Status MapSign(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const DataType dtype = x.var().dtype();
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value above, Built(ctx, fn::GreaterThan(x, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value below, Built(ctx, fn::LessThan(x, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value plus, Built(ctx, fn::Cast(above, dtype)));
  SLUICE_ASSIGN_OR_RETURN(Value minus, Built(ctx, fn::Cast(below, dtype)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Sub(plus, minus)));
  if (composite_mapping::IsFloat(dtype)) {
    SLUICE_ASSIGN_OR_RETURN(Value nan, Built(ctx, fn::NotEqual(x, x)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Where(nan, x, out)));
  }
  return ctx.SetOutput(0, out);
}

// x != x.
absl::Status MapIsNaN(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::NotEqual(x, x)));
  return ctx.SetOutput(0, out);
}

// x == +inf, x == -inf, or |x| == inf as detect_positive and detect_negative ask; all false
// when neither is asked.
absl::Status MapIsInf(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"detect_positive", "detect_negative"}));
  SLUICE_ASSIGN_OR_RETURN(const bool positive, ctx.FlagAttr("detect_positive", true));
  SLUICE_ASSIGN_OR_RETURN(const bool negative, ctx.FlagAttr("detect_negative", true));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const DataType dtype = x.var().dtype();
  if (!composite_mapping::IsFloat(dtype)) {
    return ctx.Error(absl::StrCat("X is ", DataTypeName(dtype), "; IsInf takes f32 or f64"));
  }
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Value out = x;
  if (positive == 0 && negative == 0) {
    SLUICE_ASSIGN_OR_RETURN(out,
                            Built(ctx, fn::FillConstant(x.var().shape(), 0.0, DataType::kBool)));
  } else {
    Value probe = x;
    if (positive != 0 && negative != 0) {
      SLUICE_ASSIGN_OR_RETURN(probe, Built(ctx, fn::Abs(x)));
    }
    SLUICE_ASSIGN_OR_RETURN(Value inf, ScalarConstant(ctx, positive != 0 ? kInf : -kInf, dtype));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Equal(probe, inf)));
  }
  return ctx.SetOutput(0, out);
}

// slope * x where x < 0, else x (NaN stays NaN); slope broadcasts to X.
absl::Status MapPRelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value slope, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, x.var().dtype()));
  SLUICE_ASSIGN_OR_RETURN(Value negative, Built(ctx, fn::LessThan(x, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Mul(x, slope)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(negative, scaled, x)));
  if (out.var().shape() != x.var().shape()) {
    return ctx.Error(absl::StrCat("slope of shape ", slope.var().shape().ToString(),
                                  " does not broadcast to X's shape ", x.var().shape().ToString()));
  }
  return ctx.SetOutput(0, out);
}

// x + bias where x < -lambd, x - bias where x > lambd, else 0 (ONNX's function body: the
// attributes in x's dtype).
absl::Status MapShrink(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"bias", "lambd"}));
  SLUICE_ASSIGN_OR_RETURN(const double bias, ctx.FloatAttr("bias", 0.0));
  SLUICE_ASSIGN_OR_RETURN(const double lambd, ctx.FloatAttr("lambd", 0.5));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const DataType dtype = x.var().dtype();
  SLUICE_ASSIGN_OR_RETURN(Value low, ScalarConstant(ctx, -lambd, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value high, ScalarConstant(ctx, lambd, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value b, ScalarConstant(ctx, bias, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, dtype));
  SLUICE_ASSIGN_OR_RETURN(Value below, Built(ctx, fn::LessThan(x, low)));
  SLUICE_ASSIGN_OR_RETURN(Value above, Built(ctx, fn::GreaterThan(x, high)));
  SLUICE_ASSIGN_OR_RETURN(Value plus, Built(ctx, fn::Add(x, b)));
  SLUICE_ASSIGN_OR_RETURN(Value minus, Built(ctx, fn::Sub(x, b)));
  SLUICE_ASSIGN_OR_RETURN(Value upper, Built(ctx, fn::Where(above, minus, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(below, plus, upper)));
  return ctx.SetOutput(0, out);
}

// x * sigmoid(alpha * x).
absl::Status MapSwish(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha"}));
  SLUICE_ASSIGN_OR_RETURN(const double alpha, ctx.FloatAttr("alpha", 1.0));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  Value arg = x;
  if (alpha != 1.0) {
    SLUICE_ASSIGN_OR_RETURN(arg, Built(ctx, fn::Scale(x, alpha)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value gate, Built(ctx, fn::Sigmoid(arg)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Mul(x, gate)));
  if (ctx.node().op_type() == "SwiGLU") {  // Swish(A) * B, A and B of one shape
    SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
    if (b.var().shape() != x.var().shape()) {
      return ctx.Error(absl::StrCat("A ", x.var().shape().ToString(), " and B ",
                                    b.var().shape().ToString(), " must have one shape"));
    }
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Mul(out, b)));
  }
  return ctx.SetOutput(0, out);
}

// LRN: X / (bias + alpha / size * square_sum)^beta, square_sum over the channels from
// c - floor((size - 1) / 2) to c + ceil((size - 1) / 2): an avg_pool2d of X^2 viewed as
// [N, 1, C, rest] with a [size, 1] window over the padded channels, times size.
absl::Status MapLrn(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"alpha", "beta", "bias", "size"}));
  SLUICE_ASSIGN_OR_RETURN(const double alpha, ctx.FloatAttr("alpha", 0.0001));
  SLUICE_ASSIGN_OR_RETURN(const double beta, ctx.FloatAttr("beta", 0.75));
  SLUICE_ASSIGN_OR_RETURN(const double bias, ctx.FloatAttr("bias", 1.0));
  if (!ctx.HasAttr("size")) return ctx.Error("attribute 'size' is required");
  SLUICE_ASSIGN_OR_RETURN(const int64_t size, ctx.IntAttr("size", 1));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const Shape shape = x.var().shape();
  if (shape.rank() < 3 || size < 1) {
    return ctx.Error(absl::StrCat("needs X of rank 3 or more ([N, C, ...]) and size >= 1; X is ",
                                  shape.ToString(), ", size ", size));
  }
  const int64_t n = shape.dim(0), c = shape.dim(1);
  int64_t rest = 1;  // a product, not NumElements() / (n * c): n or c may be 0
  for (int d = 2; d < shape.rank(); ++d) rest *= shape.dim(d);
  SLUICE_ASSIGN_OR_RETURN(Value sq, Built(ctx, fn::Square(x)));
  SLUICE_ASSIGN_OR_RETURN(sq, Built(ctx, fn::Reshape(sq, {n, 1, c, rest})));
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  SLUICE_ASSIGN_OR_RETURN(
      Value sum, Built(ctx, fn::AvgPool2d(sq, {size, 1}, {1, 1}, {before, 0, after, 0}, {1, 1},
                                          false, /*count_include_pad=*/true)));
  SLUICE_ASSIGN_OR_RETURN(
      sum,
      Built(ctx, fn::Reshape(sum, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()))));
  // size * mean * alpha / size + bias = alpha * mean + bias.
  SLUICE_ASSIGN_OR_RETURN(Value denom, Built(ctx, fn::Scale(sum, alpha, bias)));
  SLUICE_ASSIGN_OR_RETURN(denom, Built(ctx, fn::Pow(denom, beta)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Div(x, denom)));
  return ctx.SetOutput(0, out);
}

// The upper (j - i >= k) or lower (j - i <= k) triangle of each matrix of x's last two
// dimensions, the rest 0: where(mask, x, 0) with the [N, M] mask made at import (k must be a
// constant). A mask of all true is a copy, of all false zeros.
absl::Status MapTrilu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"upper"}));
  SLUICE_ASSIGN_OR_RETURN(const bool upper, ctx.FlagAttr("upper", true));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  int64_t k = 0;
  if (ctx.HasInput(1)) {
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> ks, ctx.ConstantInts(1, "k"));
    if (ks.size() != 1) return ctx.Error("k must hold one integer");
    k = ks[0];
  }
  const Shape shape = x.var().shape();
  if (shape.rank() < 2) {
    return ctx.Error(absl::StrCat("input has shape ", shape.ToString(), "; Trilu needs rank 2+"));
  }
  const int64_t rows = shape.dim(shape.rank() - 2);
  const int64_t cols = shape.dim(shape.rank() - 1);
  HostTensor mask = NewTensor(DataType::kBool, Shape{rows, cols});
  int64_t kept = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const bool keep = upper != 0 ? j - i >= k : j - i <= k;
      HostStore<bool>(mask, i * cols + j, keep);
      kept += keep ? 1 : 0;
    }
  }
  Value out = x;
  if (kept == rows * cols) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Assign(x)));
  } else if (kept == 0) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::FillZerosLike(x)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value keep, ImportConstant(ctx, "trilu_mask", std::move(mask)));
    SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, x.var().dtype()));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Where(keep, x, zero)));
  }
  return ctx.SetOutput(0, out);
}

// A constant of the input's shape (rank 2) with ones on diagonal k, in attribute dtype's type
// (else the input's).
absl::Status MapEyeLike(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"dtype", "k"}));
  SLUICE_ASSIGN_OR_RETURN(const int64_t k, ctx.IntAttr("k", 0));
  SLUICE_ASSIGN_OR_RETURN(const InputType input, TypeOfInput(ctx, 0));
  DataType dtype = input.dtype;
  if (ctx.HasAttr("dtype")) {
    SLUICE_ASSIGN_OR_RETURN(const int64_t type, ctx.IntAttr("dtype", 0));
    absl::StatusOr<DataType> d = DtypeOfOnnxType(static_cast<int32_t>(type), "attribute dtype");
    if (!d.ok()) return ctx.Error(d.status().message());
    dtype = *d;
  }
  if (input.shape.rank() != 2) {
    return ctx.Error(
        absl::StrCat("input has shape ", input.shape.ToString(), "; EyeLike needs rank 2"));
  }
  const int64_t rows = input.shape.dim(0), cols = input.shape.dim(1);
  HostTensor eye = NewTensor(dtype, input.shape);
  DispatchDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < rows; ++i) {
      if (i + k >= 0 && i + k < cols) HostStore<T>(eye, i * cols + i + k, static_cast<T>(1));
    }
  });
  ctx.SetConstantOutput(0, std::move(eye));
  return absl::OkStatus();
}

}  // namespace sluice::framework::onnx::internal
