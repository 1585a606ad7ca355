// Mappers for ONNX's Gather, Slice and Where (node_table.h): folded at import when every input
// is a constant (MapFoldOnly, as the shape arithmetic exporters emit), else the gather, slice
// and where ops. Slice's starts, ends, axes and steps become the op's attributes, so they must
// be constants (opset 10+ inputs; attributes before); Gather's indices and Where's operands
// may be computed.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace {

// Constant indices checked at import against data's static size along the axis, so that a
// model whose indices are initializers fails naming the node rather than at run time.
absl::Status CheckConstantGatherIndices(NodeContext& ctx, const Value& data, int64_t axis) {
  const HostTensor* indices = ctx.state().Constant(ctx.node().input(1));
  if (indices == nullptr) return absl::OkStatus();
  const Shape& shape = data.var().shape();
  SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, shape.rank()));
  const int64_t size = shape.dim(static_cast<int>(axis));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> values, FoldInts(ctx, *indices, "the indices"));
  for (size_t k = 0; k < values.size(); ++k) {
    if (values[k] < -size || values[k] >= size) {
      return ctx.Error(absl::StrCat("index ", values[k], " (element ", k,
                                    " of the indices) is out of range [", -size, ", ", size,
                                    ") for axis ", axis, " of the data"));
    }
  }
  return absl::OkStatus();
}

// Slice's starts, ends, axes and steps from the constant inputs 1-4 (opset 10+) or from the
// attributes (before); absent axes and steps stay empty (the op's defaults).
struct OnnxSliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
};
absl::StatusOr<OnnxSliceParams> SliceParamsOf(const NodeContext& ctx) {
  OnnxSliceParams p;
  if (ctx.opset() < 10) {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"starts", "ends", "axes"}));
    if (!ctx.HasAttr("starts") || !ctx.HasAttr("ends")) {
      return ctx.Error("attributes 'starts' and 'ends' are required");
    }
    SLUICE_ASSIGN_OR_RETURN(p.starts, ctx.IntsAttr("starts", {}));
    SLUICE_ASSIGN_OR_RETURN(p.ends, ctx.IntsAttr("ends", {}));
    SLUICE_ASSIGN_OR_RETURN(p.axes, ctx.IntsAttr("axes", {}));
    return p;
  }
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(p.starts, ctx.ConstantInts(1, "starts"));
  SLUICE_ASSIGN_OR_RETURN(p.ends, ctx.ConstantInts(2, "ends"));
  if (ctx.HasInput(3)) {
    SLUICE_ASSIGN_OR_RETURN(p.axes, ctx.ConstantInts(3, "axes"));
  }
  if (ctx.HasInput(4)) {
    SLUICE_ASSIGN_OR_RETURN(p.steps, ctx.ConstantInts(4, "steps"));
  }
  return p;
}

}  // namespace

absl::Status MapGather(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis"}));
  if (ctx.num_inputs() != 2 || !ctx.HasInput(0) || !ctx.HasInput(1)) {
    return ctx.Error("needs two inputs, data and indices");
  }
  if (AllInputsConstant(ctx)) return MapFoldOnly(ctx);
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, ctx.IntAttr("axis", 0));
  SLUICE_ASSIGN_OR_RETURN(Value data, ctx.Input(0));
  SLUICE_RETURN_IF_ERROR(CheckConstantGatherIndices(ctx, data, axis));
  SLUICE_ASSIGN_OR_RETURN(Value indices, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Gather(data, indices, axis)));
  return ctx.SetOutput(0, out);
}

absl::Status MapSlice(NodeContext& ctx) {
  if (!ctx.HasInput(0)) return ctx.Error("input 0 (data) is required");
  if (AllInputsConstant(ctx)) return MapFoldOnly(ctx);
  SLUICE_ASSIGN_OR_RETURN(OnnxSliceParams p, SliceParamsOf(ctx));
  SLUICE_ASSIGN_OR_RETURN(Value data, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value out,
                          Built(ctx, fn::Slice(data, p.starts, p.ends, p.axes, p.steps)));
  return ctx.SetOutput(0, out);
}

absl::Status MapWhere(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  if (ctx.num_inputs() != 3) return ctx.Error("needs three inputs, condition, X and Y");
  if (AllInputsConstant(ctx)) return MapFoldOnly(ctx);
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> in, ctx.Inputs());
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(in[0], in[1], in[2])));
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
