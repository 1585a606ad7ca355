// Mappers for ONNX's reductions and normalizations that Sluice has no op of its own for,
// each a composition of existing ops (node_table.h):
//  - ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp: elementwise ops
//    around reduce_sum;
//  - ReduceMax, ReduceMin: max_pool2d over the reduced elements, moved (transpose) to the end
//    and viewed (reshape) as [1, 1, outer, count], one window per output element; Hardmax
//    through the same max and a min over the indices of the maxima;
//  - RMSNormalization, LpNormalization, MeanVarianceNormalization, InstanceNormalization,
//    GroupNormalization: reduce_mean or reduce_sum and elementwise ops.
// Axes come from attribute "axes" before opset 18 and from the constant input 1 from it. An
// input with no elements makes the output a constant at import (ONNX's value for an empty
// reduction: 0, or -inf for the logarithms, the dtype's lowest for ReduceMax).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace composite_reduce {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A reduction's axes and shapes.
struct Reduction {
  std::vector<int64_t> axes;  // sorted, non-negative; empty: nothing reduced (noop)
  bool keepdims = true;
  std::vector<int64_t> kept;  // x's dimensions with the reduced ones as 1
  std::vector<int64_t> out;   // the output's dimensions (kept, or without the reduced ones)
  int64_t count = 1;          // elements per output element
};

// The node's Reduction over x's shape: ONNX's axes (every axis when none are given, unless
// noop_with_empty_axes), keepdims.
absl::StatusOr<Reduction> ReductionOf(const NodeContext& ctx, const Shape& shape) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axes", "keepdims", "noop_with_empty_axes"}));
  std::vector<int64_t> axes;
  if (ctx.opset() < 18) {
    SLUICE_ASSIGN_OR_RETURN(axes, ctx.IntsAttr("axes", {}));
  } else if (ctx.HasInput(1)) {
    SLUICE_ASSIGN_OR_RETURN(axes, ctx.ConstantInts(1, "axes"));
  }
  Reduction r;
  SLUICE_ASSIGN_OR_RETURN(const bool keepdims, ctx.FlagAttr("keepdims", true));
  SLUICE_ASSIGN_OR_RETURN(const bool noop, ctx.FlagAttr("noop_with_empty_axes", false));
  r.keepdims = keepdims != 0;
  const int64_t rank = shape.rank();
  if (axes.empty() && noop == 0) {
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  for (int64_t& axis : axes) {
    SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) {
    return ctx.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat an axis"));
  }
  r.axes = axes;
  for (int64_t i = 0; i < rank; ++i) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), i);
    r.kept.push_back(reduced ? 1 : shape.dim(static_cast<int>(i)));
    if (reduced) r.count *= shape.dim(static_cast<int>(i));
    if (!reduced || r.keepdims) r.out.push_back(r.kept.back());
  }
  return r;
}

// Sum of v over the reduction's axes (keeping them as 1 when `keep`); v itself when nothing
// is reduced.
absl::StatusOr<Value> SumOver(const NodeContext& ctx, const Value& v, const Reduction& r,
                              bool keep) {
  if (r.axes.empty()) return v;
  return Built(ctx, fn::ReduceSum(v, r.axes, keep));
}

// v (of the reduction's kept shape) as the output shape.
absl::StatusOr<Value> AsOutput(const NodeContext& ctx, const Value& v, const Reduction& r) {
  if (r.keepdims || r.axes.empty()) return v;
  return Built(ctx, fn::Reshape(v, r.out));
}

// The maximum of f32 or f64 x over the reduction's axes (count >= 1, no empty input), with
// the kept shape: the reduced axes moved last, [1, 1, outer, count], one max_pool2d window
// [1, count] per output element.
absl::StatusOr<Value> MaxOver(const NodeContext& ctx, const Value& x, const Reduction& r) {
  const int64_t rank = x.var().shape().rank();
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < rank; ++i) {
    if (!std::binary_search(r.axes.begin(), r.axes.end(), i)) perm.push_back(i);
  }
  perm.insert(perm.end(), r.axes.begin(), r.axes.end());
  Value moved = x;
  if (!std::is_sorted(perm.begin(), perm.end())) {
    SLUICE_ASSIGN_OR_RETURN(moved, Built(ctx, fn::Transpose(x, perm)));
  }
  const int64_t outer = x.var().shape().NumElements() / r.count;
  SLUICE_ASSIGN_OR_RETURN(Value image, Built(ctx, fn::Reshape(moved, {1, 1, outer, r.count})));
  SLUICE_ASSIGN_OR_RETURN(Value pooled, Built(ctx, fn::MaxPool2d(image, {1, r.count})));
  return Built(ctx, fn::Reshape(pooled, r.kept));
}

// A constant of the output's shape filled with `value` (an empty input's reduction).
void SetFilledOutput(NodeContext& ctx, const Reduction& r, DataType dtype, double value) {
  HostTensor out = NewTensor(dtype, Shape(r.out));
  DispatchDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T v{};  // 0 (false)
    if constexpr (std::is_same_v<T, bool>) {
      v = value > 0;
    } else if constexpr (std::is_integral_v<T>) {  // +-inf: the type's limits
      if (value != 0) {
        v = value > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest();
      }
    } else {
      v = static_cast<T>(value);
    }
    for (int64_t i = 0; i < out.shape.NumElements(); ++i) HostStore<T>(out, i, v);
  });
  ctx.SetConstantOutput(0, std::move(out));
}

// log(sum(exp(x - m))) + m with m the maximum where it is finite, else 0 (so that all -inf
// gives -inf and a +inf gives +inf, as ONNX's reference).
absl::StatusOr<Value> LogSumExp(const NodeContext& ctx, const Value& x, const Reduction& r) {
  SLUICE_ASSIGN_OR_RETURN(Value max, MaxOver(ctx, x, r));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, x.var().dtype()));
  SLUICE_ASSIGN_OR_RETURN(Value diff, Built(ctx, fn::Sub(max, max)));  // 0 where finite
  SLUICE_ASSIGN_OR_RETURN(Value finite, Built(ctx, fn::Equal(diff, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value shift, Built(ctx, fn::Where(finite, max, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value centered, Built(ctx, fn::Sub(x, shift)));
  SLUICE_ASSIGN_OR_RETURN(Value e, Built(ctx, fn::Exp(centered)));
  SLUICE_ASSIGN_OR_RETURN(Value sum, SumOver(ctx, e, r, true));
  SLUICE_ASSIGN_OR_RETURN(Value log, Built(ctx, fn::Log(sum)));
  return Built(ctx, fn::Add(log, shift));
}

// A per-channel parameter [C] as [C, 1, ...], to broadcast over x of rank `rank`.
absl::StatusOr<Value> PerChannel(const NodeContext& ctx, const Value& p, int64_t rank) {
  std::vector<int64_t> dims(static_cast<size_t>(rank - 1), 1);
  dims[0] = p.var().shape().NumElements();
  return Built(ctx, fn::Reshape(p, dims));
}

// (x - mean) / sqrt(var + epsilon) over `axes` (kept as 1), the variance the mean of the
// squared deviations.
absl::StatusOr<Value> Standardize(const NodeContext& ctx, const Value& x,
                                  const std::vector<int64_t>& axes, double epsilon) {
  SLUICE_ASSIGN_OR_RETURN(Value mean, Built(ctx, fn::ReduceMean(x, axes, true)));
  SLUICE_ASSIGN_OR_RETURN(Value dev, Built(ctx, fn::Sub(x, mean)));
  SLUICE_ASSIGN_OR_RETURN(Value sq, Built(ctx, fn::Square(dev)));
  SLUICE_ASSIGN_OR_RETURN(Value var, Built(ctx, fn::ReduceMean(sq, axes, true)));
  SLUICE_ASSIGN_OR_RETURN(Value shifted, Built(ctx, fn::Scale(var, 1.0, epsilon)));
  SLUICE_ASSIGN_OR_RETURN(Value std, Built(ctx, fn::Sqrt(shifted)));
  return Built(ctx, fn::Div(dev, std));
}

}  // namespace composite_reduce

// ReduceSumSquare: sum(x^2); ReduceL1: sum(|x|); ReduceL2: sqrt(sum(x^2)); ReduceLogSum:
// log(sum(x)); ReduceLogSumExp: the stable log(sum(exp(x))) (LogSumExp above). With
// noop_with_empty_axes and no axes, only the elementwise parts apply (ONNX's reference).
absl::Status MapReduceComposite(NodeContext& ctx) {
  const std::string& type = ctx.node().op_type();
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const composite_reduce::Reduction r,
                          composite_reduce::ReductionOf(ctx, x.var().shape()));
  const bool log = type == "ReduceLogSum" || type == "ReduceLogSumExp";
  if (x.var().shape().NumElements() == 0) {
    composite_reduce::SetFilledOutput(ctx, r, x.var().dtype(), log ? -composite_reduce::kInf : 0.0);
    return absl::OkStatus();
  }
  Value out = x;
  if (type == "ReduceLogSumExp") {
    if (r.axes.empty()) {
      SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Assign(x)));
    } else {
      SLUICE_ASSIGN_OR_RETURN(out, composite_reduce::LogSumExp(ctx, x, r));
    }
  } else {
    Value terms = x;
    if (type == "ReduceL1") {
      SLUICE_ASSIGN_OR_RETURN(terms, Built(ctx, fn::Abs(x)));
    } else if (type != "ReduceLogSum") {
      SLUICE_ASSIGN_OR_RETURN(terms, Built(ctx, fn::Square(x)));
    }
    SLUICE_ASSIGN_OR_RETURN(out, composite_reduce::SumOver(ctx, terms, r, true));
    if (type == "ReduceL2") {
      SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Sqrt(out)));
    } else if (log) {
      SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Log(out)));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(out, composite_reduce::AsOutput(ctx, out, r));
  return ctx.SetOutput(0, out);
}

// ReduceMax: MaxOver; ReduceMin: -MaxOver(-x). NaN propagates. Integers go through f64
// (exact up to 2^53), bool through f32 (false < true).
absl::Status MapReduceMax(NodeContext& ctx) {
  const bool min = ctx.node().op_type() == "ReduceMin";
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const composite_reduce::Reduction r,
                          composite_reduce::ReductionOf(ctx, x.var().shape()));
  const DataType dtype = x.var().dtype();
  if (x.var().shape().NumElements() == 0) {
    composite_reduce::SetFilledOutput(ctx, r, dtype,
                                      min ? composite_reduce::kInf : -composite_reduce::kInf);
    return absl::OkStatus();
  }
  if (r.axes.empty() || r.count == 1) {
    SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Reshape(x, r.out)));
    return ctx.SetOutput(0, out);
  }
  Value work = x;
  const bool is_float = dtype == DataType::kF32 || dtype == DataType::kF64;
  if (!is_float) {
    SLUICE_ASSIGN_OR_RETURN(
        work, Built(ctx, fn::Cast(x, dtype == DataType::kBool ? DataType::kF32 : DataType::kF64)));
  }
  if (min) {
    SLUICE_ASSIGN_OR_RETURN(work, Built(ctx, fn::Neg(work)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, composite_reduce::MaxOver(ctx, work, r));
  if (min) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Neg(out)));
  }
  if (!is_float) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Cast(out, dtype)));
  }
  SLUICE_ASSIGN_OR_RETURN(out, composite_reduce::AsOutput(ctx, out, r));
  return ctx.SetOutput(0, out);
}

// Hardmax: 1 at the first maximum along the axis, else 0. m = the max along the axis; the
// first index i where x == m is the min over where(x == m, i, n); out = (i == first). Before
// opset 13 the input is flattened to 2-D at the axis first, as ONNX's version did.
absl::Status MapHardmax(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  const bool coerced = ctx.opset() < 13;
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", coerced ? 1 : -1));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const DataType dtype = x.var().dtype();
  if (dtype != DataType::kF32 && dtype != DataType::kF64) {
    return ctx.Error(absl::StrCat("input is ", DataTypeName(dtype), "; FLOAT and DOUBLE only"));
  }
  const Shape shape = x.var().shape();
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, shape.rank()));
  if (shape.NumElements() == 0) return ctx.SetOutput(0, x);  // nothing to mark (a copy)
  Value work = x;
  if (coerced) {
    int64_t rows = 1, cols = 1;  // products: a dimension may be 0
    for (int64_t d = 0; d < shape.rank(); ++d)
      (d < axis ? rows : cols) *= shape.dim(static_cast<int>(d));
    SLUICE_ASSIGN_OR_RETURN(work, Built(ctx, fn::Reshape(x, {rows, cols})));
    axis = 1;
  }
  const Shape wshape = work.var().shape();
  const int64_t rank = wshape.rank();
  const int64_t n = wshape.dim(static_cast<int>(axis));
  composite_reduce::Reduction r;
  r.axes = {axis};
  r.kept.assign(wshape.dims().begin(), wshape.dims().end());
  r.kept[axis] = 1;
  r.out = r.kept;
  r.count = n;
  SLUICE_ASSIGN_OR_RETURN(Value top, composite_reduce::MaxOver(ctx, work, r));
  SLUICE_ASSIGN_OR_RETURN(Value at_top, Built(ctx, fn::Equal(work, top)));
  std::vector<int64_t> iota_dims(static_cast<size_t>(rank - axis), 1);
  iota_dims[0] = n;
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, iota_dims, int64_t{1} << 24).status());
  HostTensor iota = NewTensor(dtype, Shape(iota_dims));
  DispatchDtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) HostStore<T>(iota, i, static_cast<T>(i));
    return 0;
  });
  SLUICE_ASSIGN_OR_RETURN(Value index, ImportConstant(ctx, "index", std::move(iota)));
  SLUICE_ASSIGN_OR_RETURN(Value past_end, ScalarConstant(ctx, static_cast<double>(n), dtype));
  SLUICE_ASSIGN_OR_RETURN(Value candidates, Built(ctx, fn::Where(at_top, index, past_end)));
  SLUICE_ASSIGN_OR_RETURN(candidates, Built(ctx, fn::Neg(candidates)));
  SLUICE_ASSIGN_OR_RETURN(Value first, composite_reduce::MaxOver(ctx, candidates, r));
  SLUICE_ASSIGN_OR_RETURN(first, Built(ctx, fn::Neg(first)));
  SLUICE_ASSIGN_OR_RETURN(Value hit, Built(ctx, fn::Equal(index, first)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Cast(hit, dtype)));
  if (coerced) {
    SLUICE_ASSIGN_OR_RETURN(
        out, Built(ctx, fn::Reshape(
                            out, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()))));
  }
  return ctx.SetOutput(0, out);
}

// X / sqrt(mean(X^2 over [axis, rank)) + epsilon) * scale, the first part in stash_type's
// precision (FLOAT or DOUBLE), as ONNX's function body.
absl::Status MapRMSNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis", "epsilon", "stash_type"}));
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  SLUICE_ASSIGN_OR_RETURN(const int64_t stash_type, ctx.IntAttr("stash_type", 1));
  if (stash_type != ::onnx::TensorProto::FLOAT && stash_type != ::onnx::TensorProto::DOUBLE) {
    return ctx.Error(absl::StrCat("stash_type ", stash_type, " is neither FLOAT nor DOUBLE"));
  }
  const DataType stash = stash_type == ::onnx::TensorProto::FLOAT ? DataType::kF32 : DataType::kF64;
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value scale, ctx.Input(1));
  const int64_t rank = x.var().shape().rank();
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank));
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < rank; ++i) axes.push_back(i);
  const DataType dtype = x.var().dtype();
  Value xs = x;
  if (dtype != stash) {
    SLUICE_ASSIGN_OR_RETURN(xs, Built(ctx, fn::Cast(x, stash)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value sq, Built(ctx, fn::Square(xs)));
  SLUICE_ASSIGN_OR_RETURN(Value mean, Built(ctx, fn::ReduceMean(sq, axes, true)));
  SLUICE_ASSIGN_OR_RETURN(Value shifted, Built(ctx, fn::Scale(mean, 1.0, epsilon)));
  SLUICE_ASSIGN_OR_RETURN(Value rms, Built(ctx, fn::Sqrt(shifted)));
  SLUICE_ASSIGN_OR_RETURN(Value normalized, Built(ctx, fn::Div(xs, rms)));
  if (dtype != stash) {
    SLUICE_ASSIGN_OR_RETURN(normalized, Built(ctx, fn::Cast(normalized, dtype)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Mul(normalized, scale)));
  return ctx.SetOutput(0, out);
}

// x / ||x|| along axis (p 1: sum |x|; p 2: sqrt(sum x^2)); 0 where the norm is 0.
absl::Status MapLpNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis", "p"}));
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", -1));
  SLUICE_ASSIGN_OR_RETURN(const int64_t p, ctx.IntAttr("p", 2));
  if (p != 1 && p != 2) return ctx.Error(absl::StrCat("p is ", p, ", not 1 or 2"));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, x.var().shape().rank()));
  SLUICE_ASSIGN_OR_RETURN(Value terms, Built(ctx, p == 1 ? fn::Abs(x) : fn::Square(x)));
  SLUICE_ASSIGN_OR_RETURN(Value norm, Built(ctx, fn::ReduceSum(terms, {axis}, true)));
  if (p == 2) {
    SLUICE_ASSIGN_OR_RETURN(norm, Built(ctx, fn::Sqrt(norm)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value quotient, Built(ctx, fn::Div(x, norm)));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, x.var().dtype()));
  SLUICE_ASSIGN_OR_RETURN(Value null, Built(ctx, fn::Equal(norm, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(null, zero, quotient)));
  return ctx.SetOutput(0, out);
}

// (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over axes (default [0, 2, 3]), as ONNX's
// function body.
absl::Status MapMeanVarianceNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axes"}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.IntsAttr("axes", {0, 2, 3}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  for (int64_t& axis : axes) {
    SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, x.var().shape().rank()));
  }
  SLUICE_ASSIGN_OR_RETURN(Value mean, Built(ctx, fn::ReduceMean(x, axes, true)));
  SLUICE_ASSIGN_OR_RETURN(Value mean_sq, Built(ctx, fn::Square(mean)));
  SLUICE_ASSIGN_OR_RETURN(Value sq, Built(ctx, fn::Square(x)));
  SLUICE_ASSIGN_OR_RETURN(Value sq_mean, Built(ctx, fn::ReduceMean(sq, axes, true)));
  SLUICE_ASSIGN_OR_RETURN(Value var, Built(ctx, fn::Sub(sq_mean, mean_sq)));
  SLUICE_ASSIGN_OR_RETURN(Value std, Built(ctx, fn::Sqrt(var)));
  SLUICE_ASSIGN_OR_RETURN(Value denominator, Built(ctx, fn::Scale(std, 1.0, 1e-9)));
  SLUICE_ASSIGN_OR_RETURN(Value dev, Built(ctx, fn::Sub(x, mean)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Div(dev, denominator)));
  return ctx.SetOutput(0, out);
}

// Each (n, c) of x [N, C, ...] standardized over the spatial dimensions, times scale[c] plus
// B[c].
absl::Status MapInstanceNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"epsilon"}));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value scale, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value bias, ctx.Input(2));
  const int64_t rank = x.var().shape().rank();
  if (rank < 3) {
    return ctx.Error(absl::StrCat("input has shape ", x.var().shape().ToString(),
                                  "; InstanceNormalization needs [N, C, D1, ...]"));
  }
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < rank; ++i) axes.push_back(i);
  SLUICE_ASSIGN_OR_RETURN(Value normalized, composite_reduce::Standardize(ctx, x, axes, epsilon));
  SLUICE_ASSIGN_OR_RETURN(Value s, composite_reduce::PerChannel(ctx, scale, rank));
  SLUICE_ASSIGN_OR_RETURN(Value b, composite_reduce::PerChannel(ctx, bias, rank));
  SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Mul(normalized, s)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Add(scaled, b)));
  return ctx.SetOutput(0, out);
}

// x [N, C, ...] as [N, G, rest] standardized over rest; opset 18: times scale[g] plus
// bias[g] per group; opset 21 on: per channel, on x's shape. stash_type is ignored (the
// statistics in x's dtype).
absl::Status MapGroupNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"epsilon", "num_groups", "stash_type"}));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, ctx.FloatAttr("epsilon", 1e-5f));
  if (!ctx.HasAttr("num_groups")) return ctx.Error("attribute 'num_groups' is required");
  SLUICE_ASSIGN_OR_RETURN(const int64_t groups, ctx.IntAttr("num_groups", 1));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value scale, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value bias, ctx.Input(2));
  const Shape shape = x.var().shape();
  if (shape.rank() < 2 || groups <= 0 || shape.dim(1) % groups != 0) {
    return ctx.Error(absl::StrCat("num_groups ", groups, " does not divide the channels of X ",
                                  shape.ToString()));
  }
  const int64_t n = shape.dim(0);
  SLUICE_ASSIGN_OR_RETURN(Value grouped, Built(ctx, fn::Reshape(x, {n, groups, -1})));
  SLUICE_ASSIGN_OR_RETURN(Value out, composite_reduce::Standardize(ctx, grouped, {2}, epsilon));
  const bool per_group = ctx.opset() < 21;
  if (per_group) {
    SLUICE_ASSIGN_OR_RETURN(Value s, composite_reduce::PerChannel(ctx, scale, 3));
    SLUICE_ASSIGN_OR_RETURN(Value b, composite_reduce::PerChannel(ctx, bias, 3));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Mul(out, s)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Add(out, b)));
  }
  SLUICE_ASSIGN_OR_RETURN(
      out,
      Built(ctx, fn::Reshape(out, std::vector<int64_t>(shape.dims().begin(), shape.dims().end()))));
  if (!per_group) {
    SLUICE_ASSIGN_OR_RETURN(Value s, composite_reduce::PerChannel(ctx, scale, shape.rank()));
    SLUICE_ASSIGN_OR_RETURN(Value b, composite_reduce::PerChannel(ctx, bias, shape.rank()));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Mul(out, s)));
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Add(out, b)));
  }
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
