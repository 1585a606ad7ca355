// Mappers for ops that move, reshape or reduce over axes (node_table.h).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace {

int64_t Product(absl::Span<const int64_t> dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= dims[i];
  return n;
}

// The node's axes: from attribute "axes" before `input_from_opset`, from input 1 after.
// `present` says whether any were given.
absl::StatusOr<std::vector<int64_t>> AxesOf(const NodeContext& ctx, int64_t input_from_opset,
                                            bool* present) {
  if (ctx.opset() < input_from_opset) {
    *present = ctx.HasAttr("axes");
    return ctx.IntsAttr("axes", {});
  }
  *present = ctx.HasInput(1);
  if (!*present) return std::vector<int64_t>{};
  return ctx.ConstantInts(1, "axes");
}

absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const NodeContext& ctx,
                                                   std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& axis : axes) {
    SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank));
  }
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return ctx.Error(absl::StrCat("axes [", absl::StrJoin(axes, ","), "] repeat an axis"));
  }
  return axes;
}

}  // namespace

absl::StatusOr<int64_t> NormalizeAxis(const NodeContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Opset 13 on: along one axis. Before: over the dimensions from `axis` on, as one (the input
// taken as a matrix), which the mapping does with a reshape on each side.
absl::Status MapSoftmax(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const Shape shape = x.var().shape();
  const int64_t rank = shape.rank();
  const bool log = ctx.node().op_type() == "LogSoftmax";
  auto softmax = [&](const Value& v, int64_t axis) {
    return Built(ctx, log ? fn::LogSoftmax(v, axis) : fn::Softmax(v, axis));
  };
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", ctx.opset() >= 13 ? -1 : 1));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, std::max<int64_t>(rank, 1)));
  Value out = x;
  if (ctx.opset() >= 13 || axis == rank - 1) {
    SLUICE_ASSIGN_OR_RETURN(out, softmax(x, axis));
  } else {
    const auto dims = shape.dims();
    const std::vector<int64_t> matrix = {Product(dims, 0, axis), Product(dims, axis, rank)};
    SLUICE_ASSIGN_OR_RETURN(Value flat, Built(ctx, fn::Reshape(x, matrix)));
    SLUICE_ASSIGN_OR_RETURN(Value y, softmax(flat, 1));
    SLUICE_ASSIGN_OR_RETURN(
        out, Built(ctx, fn::Reshape(y, std::vector<int64_t>(dims.begin(), dims.end()))));
  }
  return ctx.SetOutput(0, out);
}

absl::Status MapReduce(NodeContext& ctx) {
  const bool sum = ctx.node().op_type() == "ReduceSum";
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axes", "keepdims", "noop_with_empty_axes"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  bool present = false;
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx, sum ? 13 : 18, &present));
  SLUICE_ASSIGN_OR_RETURN(bool keepdims, ctx.FlagAttr("keepdims", true));
  SLUICE_ASSIGN_OR_RETURN(bool noop, ctx.FlagAttr("noop_with_empty_axes", false));
  Value out = x;
  if (axes.empty() && noop != 0) {
    SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, fn::Assign(x)));
    return ctx.SetOutput(0, out);
  }
  const int64_t rank = x.var().shape().rank();
  SLUICE_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, std::move(axes), rank));
  if (axes.empty()) {  // every axis
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
  }
  SLUICE_ASSIGN_OR_RETURN(out, Built(ctx, sum ? fn::ReduceSum(x, axes, keepdims != 0)
                                              : fn::ReduceMean(x, axes, keepdims != 0)));
  return ctx.SetOutput(0, out);
}

absl::Status MapReshape(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"allowzero"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> target, ctx.ConstantInts(1, "the new shape"));
  SLUICE_ASSIGN_OR_RETURN(bool allowzero, ctx.FlagAttr("allowzero", false));
  const Shape shape = x.var().shape();
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && allowzero != 0) {
      return ctx.Error(absl::StrCat("shape entry ", i,
                                    " is a literal 0 (allowzero 1), which is "
                                    "not supported: Sluice's reshape reads 0 as the input's "
                                    "dimension"));
    }
    if (target[i] == 0 && allowzero == 0) {  // 0 copies the input's dimension
      if (static_cast<int>(i) >= shape.rank()) {
        return ctx.Error(
            absl::StrCat("shape entry ", i, " is 0 but the input has rank ", shape.rank()));
      }
      target[i] = shape.dim(static_cast<int>(i));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Reshape(x, target)));
  return ctx.SetOutput(0, out);
}

absl::Status MapFlatten(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const Shape shape = x.var().shape();
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 1));
  if (axis < 0) axis += shape.rank();
  if (axis < 0 || axis > shape.rank()) {
    return ctx.Error(absl::StrCat("axis is out of range for rank ", shape.rank()));
  }
  const auto dims = shape.dims();
  const std::vector<int64_t> target = {Product(dims, 0, axis), Product(dims, axis, dims.size())};
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Reshape(x, target)));
  return ctx.SetOutput(0, out);
}

// Both as a reshape: Squeeze drops the given size-1 dimensions (every one when no axes are
// given); Unsqueeze inserts size-1 dimensions at the given positions of the output.
absl::Status MapSqueeze(NodeContext& ctx) {
  const bool squeeze = ctx.node().op_type() == "Squeeze";
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axes"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  bool present = false;
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(ctx, 13, &present));
  const Shape shape = x.var().shape();
  const auto dims = shape.dims();
  const auto rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> target;
  if (squeeze) {
    SLUICE_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, std::move(axes), rank));
    for (int64_t i = 0; i < rank; ++i) {
      const bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
      if (listed && dims[i] != 1) {
        return ctx.Error(absl::StrCat("axis ", i, " has size ", dims[i], ", not 1"));
      }
      if (listed || (!present && dims[i] == 1)) continue;
      target.push_back(dims[i]);
    }
  } else {
    if (!present) return ctx.Error("axes are required");
    const int64_t out_rank = rank + static_cast<int64_t>(axes.size());
    SLUICE_ASSIGN_OR_RETURN(axes, NormalizeAxes(ctx, std::move(axes), out_rank));
    size_t next = 0;
    for (int64_t i = 0; i < out_rank; ++i) {
      const bool listed = std::find(axes.begin(), axes.end(), i) != axes.end();
      target.push_back(listed ? 1 : dims[next++]);
    }
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Reshape(x, target)));
  return ctx.SetOutput(0, out);
}

absl::Status MapTranspose(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"perm"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const int64_t rank = x.var().shape().rank();
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) reversed[i] = rank - 1 - i;
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.IntsAttr("perm", reversed));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Transpose(x, perm)));
  return ctx.SetOutput(0, out);
}

absl::Status MapConcat(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> xs, ctx.Inputs());
  if (xs.empty()) return ctx.Error("needs at least one input");
  if (!ctx.HasAttr("axis")) return ctx.Error("attribute 'axis' is required");
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, xs[0].var().shape().rank()));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Concat(xs, axis)));
  return ctx.SetOutput(0, out);
}

// Split into the outputs: sizes from `split` (an attribute before opset 13, a constant input
// since), else equal parts, or with num_outputs (opset 18) parts of ceil(dim / n) and a
// smaller last one. Equal parts are one split op; unequal ones a slice op each.
absl::Status MapSplit(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis", "split", "num_outputs"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const Shape shape = x.var().shape();
  SLUICE_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, shape.rank()));
  const int64_t parts = ctx.num_outputs();
  if (parts < 1) return ctx.Error("has no outputs");
  std::vector<int64_t> sizes;
  if (ctx.opset() < 13) {
    SLUICE_ASSIGN_OR_RETURN(sizes, ctx.IntsAttr("split", {}));
  } else if (ctx.HasInput(1)) {
    SLUICE_ASSIGN_OR_RETURN(sizes, ctx.ConstantInts(1, "the split sizes"));
  }
  const int64_t dim = shape.dim(static_cast<int>(axis));
  if (sizes.empty() && ctx.HasAttr("num_outputs") && dim % parts != 0) {
    SLUICE_ASSIGN_OR_RETURN(const int64_t n, ctx.IntAttr("num_outputs", parts));
    if (n != parts) {
      return ctx.Error(absl::StrCat("num_outputs is ", n, " but the node has ", parts, " outputs"));
    }
    const int64_t chunk = dim / parts + (dim % parts != 0 ? 1 : 0);  // ceil, without overflow
    for (int64_t i = 0, left = dim; i < parts; ++i, left -= std::min(chunk, left)) {
      sizes.push_back(std::min(chunk, left));
    }
  }
  if (sizes.empty()) {
    if (dim % parts != 0) {
      return ctx.Error(absl::StrCat("dimension ", axis, " (", dim, ") does not split into ", parts,
                                    " equal parts, and no split sizes are given"));
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> pieces, Built(ctx, fn::Split(x, parts, axis)));
    for (int i = 0; i < static_cast<int>(pieces.size()); ++i) {
      SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, pieces[i]));
    }
    return absl::OkStatus();
  }
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0 || size > dim - total) {
      return ctx.Error(absl::StrCat("split sizes [", absl::StrJoin(sizes, ","),
                                    "] are negative or add up to more than dimension ", axis, " (",
                                    dim, ")"));
    }
    total += size;
  }
  if (total != dim || static_cast<int64_t>(sizes.size()) != parts) {
    return ctx.Error(absl::StrCat("split sizes [", absl::StrJoin(sizes, ","), "] must be ", parts,
                                  " sizes (one per output) adding up to dimension ", axis, " (",
                                  dim, ")"));
  }
  int64_t begin = 0;
  for (int i = 0; i < static_cast<int>(parts); ++i) {
    const int64_t end = begin + sizes[static_cast<size_t>(i)];
    if (ctx.WantsOutput(i)) {
      SLUICE_ASSIGN_OR_RETURN(Value piece, Built(ctx, fn::Slice(x, {begin}, {end}, {axis})));
      SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, piece));
    }
    begin = end;
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::onnx::internal
