// Mappers for ONNX ops that move elements, composed of existing ops (node_table.h): Pad
// (constant mode: fill_constant blocks joined by concat; edge, reflect and wrap: a gather
// along each padded axis with an index table made at import; negative pads: slice), Expand
// (a where that broadcasts), GatherElements (a gather from the flattened data), Tile (a
// gather per repeated axis), SpaceToDepth and DepthToSpace (reshape, transpose, reshape).
// Pads, the constant value, axes, Expand's shape and repeats must be constants.
#include <algorithm>
#include <cstdint>
#include <string>
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
namespace composite_layout {

std::vector<int64_t> DimsOf(const Value& v) {
  const Shape shape = v.var().shape();
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

// x gathered along `axis` at `index` (made a constant I64 table).
absl::StatusOr<Value> GatherAlong(NodeContext& ctx, const Value& x, int64_t axis,
                                  const std::vector<int64_t>& index) {
  const auto n = static_cast<int64_t>(index.size());
  SLUICE_ASSIGN_OR_RETURN(Value table, ImportConstant(ctx, absl::StrCat("index", axis),
                                                      HostTensor::FromVector(index, Shape{n})));
  return Built(ctx, fn::Gather(x, table, axis));
}

// Where output position o of a padded axis of `size` elements (`before` added in front)
// reads from: edge clamps, wrap repeats, reflect mirrors without repeating the border.
int64_t SourceIndex(absl::string_view mode, int64_t o, int64_t before, int64_t size) {
  const int64_t i = o - before;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, size - 1);
  if (mode == "wrap") return ((i % size) + size) % size;
  if (size == 1) return 0;  // reflect
  const int64_t period = 2 * (size - 1);
  const int64_t j = ((i % period) + period) % period;
  return j < size ? j : period - j;
}

// x padded along `axis` by `before` and `after` elements (negative: cropped first).
absl::StatusOr<Value> PadAxis(NodeContext& ctx, Value x, int64_t axis, int64_t before,
                              int64_t after, absl::string_view mode, double value) {
  int64_t size = x.var().shape().dim(static_cast<int>(axis));
  if (before < 0 || after < 0) {
    const int64_t start = std::max<int64_t>(-before, 0);
    const int64_t end = size - std::max<int64_t>(-after, 0);
    if (end < start) {
      return ctx.Error(absl::StrCat("pads ", before, " and ", after, " crop axis ", axis,
                                    " of size ", size, " below 0"));
    }
    SLUICE_ASSIGN_OR_RETURN(x, Built(ctx, fn::Slice(x, {start}, {end}, {axis})));
    size = end - start;
    before = std::max<int64_t>(before, 0);
    after = std::max<int64_t>(after, 0);
  }
  if (before == 0 && after == 0) return x;
  if (mode != "constant") {
    if (size == 0) {
      return ctx.Error(absl::StrCat("mode '", mode, "' pads axis ", axis, ", which is empty"));
    }
    std::vector<int64_t> index(static_cast<size_t>(before + size + after));
    for (size_t o = 0; o < index.size(); ++o) {
      index[o] = SourceIndex(mode, static_cast<int64_t>(o), before, size);
    }
    return GatherAlong(ctx, x, axis, index);
  }
  std::vector<Value> parts;
  std::vector<int64_t> dims = DimsOf(x);
  for (const int64_t n : {before, int64_t{-1}, after}) {
    if (n == -1) {
      parts.push_back(x);
    } else if (n > 0) {
      dims[axis] = n;
      SLUICE_ASSIGN_OR_RETURN(Value block,
                              Built(ctx, fn::FillConstant(Shape(dims), value, x.var().dtype())));
      parts.push_back(block);
    }
  }
  return Built(ctx, fn::Concat(parts, axis));
}

// Pad's pads (begin values, then end values, for `axes`), constant value and axes.
struct PadParams {
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;  // empty: every axis
  double value = 0.0;
};
absl::StatusOr<PadParams> PadParamsOf(const NodeContext& ctx) {
  PadParams p;
  if (ctx.opset() < 11) {
    const char* pads_name = ctx.opset() < 2 ? "paddings" : "pads";
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"mode", pads_name, "value"}));
    if (!ctx.HasAttr(pads_name)) {
      return ctx.Error(absl::StrCat("attribute '", pads_name, "' is required"));
    }
    SLUICE_ASSIGN_OR_RETURN(p.pads, ctx.IntsAttr(pads_name, {}));
    SLUICE_ASSIGN_OR_RETURN(p.value, ctx.FloatAttr("value", 0.0));
    return p;
  }
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"mode"}));
  SLUICE_ASSIGN_OR_RETURN(p.pads, ctx.ConstantInts(1, "pads"));
  if (ctx.HasInput(2)) {
    SLUICE_ASSIGN_OR_RETURN(const HostTensor* v, ctx.ConstantInput(2, "constant_value"));
    if (v->shape.NumElements() != 0) {  // an empty tensor stands for the default, 0
      SLUICE_ASSIGN_OR_RETURN(p.value, ctx.ConstantScalar(2, "constant_value"));
    }
  }
  if (ctx.opset() >= 18 && ctx.HasInput(3)) {
    SLUICE_ASSIGN_OR_RETURN(p.axes, ctx.ConstantInts(3, "axes"));
  }
  return p;
}

}  // namespace composite_layout

// Each listed axis (every axis by default) padded in turn (PadAxis); mode "wrap" from opset
// 19, attributes instead of inputs before opset 11 ("paddings" at opset 1).
absl::Status MapPad(NodeContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const std::string mode, ctx.StringAttr("mode", "constant"));
  const bool wrap_known = ctx.opset() >= 19;
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      !(wrap_known && mode == "wrap")) {
    return ctx.Error(absl::StrCat("mode '", mode, "' is not one of constant, edge, reflect",
                                  wrap_known ? ", wrap" : ""));
  }
  SLUICE_ASSIGN_OR_RETURN(composite_layout::PadParams p, composite_layout::PadParamsOf(ctx));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const int64_t rank = x.var().shape().rank();
  if (p.axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) p.axes.push_back(i);
  }
  const auto n = static_cast<int64_t>(p.axes.size());
  if (static_cast<int64_t>(p.pads.size()) != 2 * n) {
    return ctx.Error(absl::StrCat("pads [", absl::StrJoin(p.pads, ","), "] must hold ", 2 * n,
                                  " values (a begin and an end for each of ", n, " axes)"));
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  Value out = x;
  for (int64_t i = 0; i < n; ++i) {
    SLUICE_ASSIGN_OR_RETURN(const int64_t axis, NormalizeAxis(ctx, p.axes[i], rank));
    if (seen[axis]) return ctx.Error(absl::StrCat("axes repeat axis ", axis));
    seen[axis] = true;
    SLUICE_ASSIGN_OR_RETURN(
        out, composite_layout::PadAxis(ctx, out, axis, p.pads[i], p.pads[i + n], mode, p.value));
  }
  return ctx.SetOutput(0, out);
}

// x broadcast with the constant shape (NumPy's rules, both ways): where(true of that shape,
// x, x), which copies x's elements exactly. All-constant inputs fold at import.
absl::Status MapExpand(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  if (ctx.num_inputs() != 2) return ctx.Error("needs two inputs, input and shape");
  if (AllInputsConstant(ctx)) return MapFoldOnly(ctx);
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> dims, ctx.ConstantInts(1, "shape"));
  absl::StatusOr<Shape> shape = Shape::Make(dims);
  if (!shape.ok()) return ctx.Error(shape.status().message());
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value all, Built(ctx, fn::FillConstant(*shape, 1.0, DataType::kBool)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(all, x, x)));
  return ctx.SetOutput(0, out);
}

// out[p] = data[p with its `axis` coordinate replaced by indices[p]], as a gather from data
// flattened at flat index base[p] + wrapped(indices[p]) * stride(axis), base made at import.
// An index out of range becomes -(size + 1), which the gather refuses: a constant one at
// import, naming it, a computed one at run time.
absl::Status MapGatherElements(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(Value data, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const InputType index_type, TypeOfInput(ctx, 1));
  const Shape shape = data.var().shape();
  const Shape& ishape = index_type.shape;
  const int64_t rank = shape.rank();
  if (ishape.rank() != rank || rank == 0 ||
      (index_type.dtype != DataType::kI32 && index_type.dtype != DataType::kI64)) {
    return ctx.Error(absl::StrCat("indices (", DataTypeName(index_type.dtype), ", ",
                                  ishape.ToString(), ") must be I32 or I64 of data's rank (",
                                  shape.ToString(), ")"));
  }
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank));
  const Shape::Dims strides = shape.Strides();
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && ishape.dim(static_cast<int>(d)) > shape.dim(static_cast<int>(d))) {
      return ctx.Error(absl::StrCat("indices ", ishape.ToString(), " exceed data ",
                                    shape.ToString(), " along axis ", d));
    }
  }
  const int64_t size = shape.NumElements(), dim = shape.dim(static_cast<int>(axis));
  const Shape::Dims istrides = ishape.Strides();
  std::vector<int64_t> base(static_cast<size_t>(ishape.NumElements()));
  for (int64_t p = 0; p < static_cast<int64_t>(base.size()); ++p) {
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t coord = (p / istrides[d]) % ishape.dim(static_cast<int>(d));
      if (d != axis) base[p] += coord * strides[d];
    }
  }
  const HostTensor* constant = ctx.state().Constant(ctx.node().input(1));
  Value flat_index = data;
  if (constant != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, FoldInts(ctx, *constant, "indices"));
    for (size_t p = 0; p < idx.size(); ++p) {
      if (idx[p] < -dim || idx[p] >= dim) {
        return ctx.Error(absl::StrCat("index ", idx[p], " (element ", p,
                                      " of the indices) is out of range [", -dim, ", ", dim,
                                      ") for axis ", axis, " of the data"));
      }
      base[p] += (idx[p] < 0 ? idx[p] + dim : idx[p]) * strides[axis];
    }
    SLUICE_ASSIGN_OR_RETURN(
        flat_index,
        ImportConstant(ctx, "flat_index", HostTensor::FromVector(base, Shape(ishape.dims()))));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value idx, ctx.Input(1));
    if (index_type.dtype != DataType::kI64) {
      SLUICE_ASSIGN_OR_RETURN(idx, Built(ctx, fn::Cast(idx, DataType::kI64)));
    }
    SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, DataType::kI64));
    SLUICE_ASSIGN_OR_RETURN(Value extent,
                            ScalarConstant(ctx, static_cast<double>(dim), DataType::kI64));
    SLUICE_ASSIGN_OR_RETURN(Value negative, Built(ctx, fn::LessThan(idx, zero)));
    SLUICE_ASSIGN_OR_RETURN(Value shifted, Built(ctx, fn::Add(idx, extent)));
    SLUICE_ASSIGN_OR_RETURN(Value wrapped, Built(ctx, fn::Where(negative, shifted, idx)));
    SLUICE_ASSIGN_OR_RETURN(Value above_zero, Built(ctx, fn::GreaterEqual(wrapped, zero)));
    SLUICE_ASSIGN_OR_RETURN(Value below_dim, Built(ctx, fn::LessThan(wrapped, extent)));
    SLUICE_ASSIGN_OR_RETURN(Value in_range, Built(ctx, fn::LogicalAnd(above_zero, below_dim)));
    SLUICE_ASSIGN_OR_RETURN(
        Value stride, ScalarConstant(ctx, static_cast<double>(strides[axis]), DataType::kI64));
    SLUICE_ASSIGN_OR_RETURN(Value offset, Built(ctx, fn::Mul(wrapped, stride)));
    SLUICE_ASSIGN_OR_RETURN(
        Value bases,
        ImportConstant(ctx, "base_index", HostTensor::FromVector(base, Shape(ishape.dims()))));
    SLUICE_ASSIGN_OR_RETURN(Value sum, Built(ctx, fn::Add(bases, offset)));
    SLUICE_ASSIGN_OR_RETURN(Value invalid,
                            ScalarConstant(ctx, static_cast<double>(-(size + 1)), DataType::kI64));
    SLUICE_ASSIGN_OR_RETURN(flat_index, Built(ctx, fn::Where(in_range, sum, invalid)));
  }
  SLUICE_ASSIGN_OR_RETURN(Value flat, Built(ctx, fn::Reshape(data, {size})));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Gather(flat, flat_index, 0)));
  return ctx.SetOutput(0, out);
}

// Each axis i repeated repeats[i] times: a gather along it at [0, 1, ..., d-1, 0, 1, ...].
absl::Status MapTile(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> repeats, ctx.ConstantInts(1, "repeats"));
  const int64_t rank = x.var().shape().rank();
  if (static_cast<int64_t>(repeats.size()) != rank) {
    return ctx.Error(absl::StrCat("repeats [", absl::StrJoin(repeats, ","), "] must hold ", rank,
                                  " values, one per axis of the input"));
  }
  Value out = x;
  for (int64_t axis = 0; axis < rank; ++axis) {
    const int64_t r = repeats[axis];
    const int64_t size = x.var().shape().dim(static_cast<int>(axis));
    if (r < 0) return ctx.Error(absl::StrCat("repeats[", axis, "] is negative"));
    if (r == 1) continue;
    if (r == 0 || size == 0) {
      SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Slice(out, {0}, {0}, {axis})));
      continue;
    }
    std::vector<int64_t> index(static_cast<size_t>(size * r));
    for (size_t o = 0; o < index.size(); ++o) index[o] = static_cast<int64_t>(o) % size;
    SLUICE_ASSIGN_OR_RETURN(out, composite_layout::GatherAlong(ctx, out, axis, index));
  }
  return ctx.SetOutput(0, out);
}

// SpaceToDepth: [N, C, H, W] as [N, C, H/b, b, W/b, b], permuted (DCR: the block offsets
// first, CRD: the channel first) to [N, C b b, H/b, W/b]. DepthToSpace: the inverse.
absl::Status MapSpaceToDepth(NodeContext& ctx) {
  const bool to_depth = ctx.node().op_type() == "SpaceToDepth";
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"blocksize", "mode"}));
  if (!ctx.HasAttr("blocksize")) return ctx.Error("attribute 'blocksize' is required");
  SLUICE_ASSIGN_OR_RETURN(const int64_t b, ctx.IntAttr("blocksize", 1));
  SLUICE_ASSIGN_OR_RETURN(const std::string mode, ctx.StringAttr("mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") {
    return ctx.Error(absl::StrCat("mode '", mode, "' is neither DCR nor CRD"));
  }
  const bool dcr = mode == "DCR";
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const std::vector<int64_t> d = composite_layout::DimsOf(x);
  if (d.size() != 4 || b <= 0) {
    return ctx.Error(absl::StrCat("input has shape ", x.var().shape().ToString(), " and blocksize ",
                                  b, "; needs [N, C, H, W] and a positive blocksize"));
  }
  std::vector<int64_t> split, perm, joined;
  if (to_depth) {
    if (d[2] % b != 0 || d[3] % b != 0) {
      return ctx.Error(absl::StrCat("H and W of ", x.var().shape().ToString(),
                                    " are not multiples of blocksize ", b));
    }
    split = {d[0], d[1], d[2] / b, b, d[3] / b, b};
    perm = dcr ? std::vector<int64_t>{0, 3, 5, 1, 2, 4} : std::vector<int64_t>{0, 1, 3, 5, 2, 4};
    joined = {d[0], d[1] * b * b, d[2] / b, d[3] / b};
  } else {
    if (d[1] % (b * b) != 0) {
      return ctx.Error(absl::StrCat("C of ", x.var().shape().ToString(),
                                    " is not a multiple of blocksize^2 (", b * b, ")"));
    }
    const int64_t c = d[1] / (b * b);
    split = dcr ? std::vector<int64_t>{d[0], b, b, c, d[2], d[3]}
                : std::vector<int64_t>{d[0], c, b, b, d[2], d[3]};
    perm = dcr ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    joined = {d[0], c, d[2] * b, d[3] * b};
  }
  SLUICE_ASSIGN_OR_RETURN(Value blocks, Built(ctx, fn::Reshape(x, split)));
  SLUICE_ASSIGN_OR_RETURN(Value moved, Built(ctx, fn::Transpose(blocks, perm)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Reshape(moved, joined)));
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
