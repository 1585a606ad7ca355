// Schemas of the norm family: batch normalization with given statistics (inference) and layer
// normalization, and their grad ops. X and every float operand are f32 or f64, all of one
// dtype. Shape rules live in ops/internal/norm_shapes.h, shared with the kernels. Sums over
// many elements are taken in double in a fixed order on every device, so a result does not
// depend on threads or launch geometry.
//
//   batch_norm_infer  X [N, C, D...], Scale [C], Bias [C], Mean [C], Var [C] -> Out like X
//                     attr epsilon=1e-5: Out = (X - Mean) / sqrt(Var + epsilon) * Scale + Bias
//                     per channel (dim 1; a rank-1 X [N] is one channel), in X's dtype as
//                     written (ONNX BatchNormalization with training_mode=0).
//                     grad: batch_norm_infer_grad (every input's gradient)
//   batch_norm_infer_grad
//                     X, Scale, Mean, Var, OutGrad -> XGrad, ScaleGrad, BiasGrad, MeanGrad,
//                     VarGrad   with s = sqrt(Var + epsilon) and sums over N and D...:
//                     XGrad = OutGrad Scale / s, ScaleGrad = sum(OutGrad (X - Mean)) / s,
//                     BiasGrad = sum(OutGrad), MeanGrad = -sum(OutGrad) Scale / s,
//                     VarGrad = -Scale sum(OutGrad (X - Mean)) / (2 s^3)
//   layer_norm        X, Scale, Bias (optional) -> Out, Mean, InvStdDev
//                     attrs axis=-1 (in [-rank, rank)), epsilon=1e-5. Each row of X over the
//                     dims [axis, rank) is normalized: Mean = sum(x) / n, InvStdDev =
//                     1 / sqrt(sum((x - Mean)^2) / n + epsilon) (both in double, then rounded
//                     to X's dtype), Out = (X - Mean) * InvStdDev * Scale + Bias. Scale has the
//                     normalized dims (leading 1s may be added or dropped), Bias Scale's dtype
//                     and shape; Mean and InvStdDev have X's dims before axis and 1 for the
//                     others (ONNX LayerNormalization, opset 17). With n = 0, Mean and
//                     InvStdDev are NaN. grad: layer_norm_grad. Mean and InvStdDev are
//                     statistics saved for it: no gradient flows back through them (as in
//                     PyTorch's native_layer_norm).
//   layer_norm_grad   X, Scale, Mean, InvStdDev, OutGrad -> XGrad, ScaleGrad, BiasGrad
//                     attr axis. With xhat = (X - Mean) InvStdDev and d = OutGrad Scale, per
//                     row: XGrad = InvStdDev (d - mean(d) - xhat mean(d xhat)); over rows:
//                     ScaleGrad = sum(OutGrad xhat), BiasGrad = sum(OutGrad). BiasGrad (Scale's
//                     shape) is left out when the caller asks for no tensor in that slot (the
//                     forward op had no Bias): the kernels then take two outputs.
// None of them is elementwise; none declares an in-place pair.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/norm_shapes.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
namespace norm_ops {
namespace {

using Metas = std::vector<std::vector<TensorMeta>>;

// A shape rule's error as the op's error ("op 'layer_norm': ...").
template <typename V>
absl::StatusOr<V> AsOpError(const InferContext& ctx, absl::StatusOr<V> value) {
  if (!value.ok()) return ctx.Error(value.status().message());
  return value;
}
absl::Status AsOpError(const InferContext& ctx, absl::Status status) {
  if (!status.ok()) return ctx.Error(status.message());
  return status;
}

// X and the per-channel operands at `slots` (names `names`).
absl::StatusOr<norm::BatchNormDims> CheckBatchNormOperands(
    const InferContext& ctx, std::initializer_list<std::pair<int, const char*>> channel_operands) {
  const TensorMeta& x = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(norm::BatchNormDims d, AsOpError(ctx, norm::BatchNormShapes(x)));
  for (const auto& [slot, name] : channel_operands) {
    SLUICE_RETURN_IF_ERROR(AsOpError(ctx, norm::CheckChannelOperand(name, ctx.input(slot), x, d)));
  }
  return d;
}

absl::StatusOr<Metas> InferBatchNorm(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(
      CheckBatchNormOperands(ctx, {{1, "Scale"}, {2, "Bias"}, {3, "Mean"}, {4, "Var"}}).status());
  return Single(ctx.input(0));
}

absl::StatusOr<Metas> InferBatchNormGrad(const InferContext& ctx) {
  SLUICE_RETURN_IF_ERROR(
      CheckBatchNormOperands(ctx, {{1, "Scale"}, {2, "Mean"}, {3, "Var"}}).status());
  SLUICE_RETURN_IF_ERROR(
      AsOpError(ctx, norm::RequireMeta("OutGrad", ctx.input(4), ctx.input(0), "X's")));
  const TensorMeta& channel = ctx.input(1);
  return Metas{{ctx.input(0)}, {channel}, {channel}, {channel}, {channel}};
}

absl::StatusOr<norm::LayerNormDims> LayerNormDimsOf(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, AsOpError(ctx, ctx.attrs().GetInt("axis")));
  const TensorMeta& x = ctx.input(0);
  SLUICE_ASSIGN_OR_RETURN(norm::LayerNormDims d, AsOpError(ctx, norm::LayerNormShapes(x, axis)));
  SLUICE_RETURN_IF_ERROR(AsOpError(ctx, norm::CheckScale(ctx.input(1), x, d)));
  return d;
}

absl::StatusOr<Metas> InferLayerNorm(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(ctx));
  const TensorMeta& x = ctx.input(0);
  if (!ctx.inputs(2).empty()) {
    SLUICE_RETURN_IF_ERROR(
        AsOpError(ctx, norm::RequireMeta("Bias", ctx.input(2), ctx.input(1), "Scale's")));
  }
  const TensorMeta stats{x.dtype, d.stats};
  return Metas{{x}, {stats}, {stats}};
}

absl::StatusOr<Metas> InferLayerNormGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(const norm::LayerNormDims d, LayerNormDimsOf(ctx));
  const TensorMeta& x = ctx.input(0);
  const TensorMeta stats{x.dtype, d.stats};
  SLUICE_RETURN_IF_ERROR(
      AsOpError(ctx, norm::RequireMeta("Mean", ctx.input(2), stats, "layer_norm's Mean")));
  SLUICE_RETURN_IF_ERROR(AsOpError(
      ctx, norm::RequireMeta("InvStdDev", ctx.input(3), stats, "layer_norm's InvStdDev")));
  SLUICE_RETURN_IF_ERROR(AsOpError(ctx, norm::RequireMeta("OutGrad", ctx.input(4), x, "X's")));
  Metas out = {{x}, {ctx.input(1)}, {ctx.input(1)}};
  if (ctx.output_count(2) == 0) out[2].clear();  // no Bias, no BiasGrad
  return out;
}

std::vector<GradOpDesc> BatchNormGrad(const GradContext& g) {
  return {GradOp("batch_norm_infer_grad",
                 {{"X", g.Input("X")},
                  {"Scale", g.Input("Scale")},
                  {"Mean", g.Input("Mean")},
                  {"Var", g.Input("Var")},
                  {"OutGrad", g.OutputGrad("Out")}},
                 {{"XGrad", g.InputGrad("X")},
                  {"ScaleGrad", g.InputGrad("Scale")},
                  {"BiasGrad", g.InputGrad("Bias")},
                  {"MeanGrad", g.InputGrad("Mean")},
                  {"VarGrad", g.InputGrad("Var")}},
                 GradAttrs(g, {"epsilon"}))};
}

std::vector<GradOpDesc> LayerNormGrad(const GradContext& g) {
  std::vector<std::pair<std::string, std::vector<std::string>>> outputs = {
      {"XGrad", g.InputGrad("X")}, {"ScaleGrad", g.InputGrad("Scale")}};
  if (!g.Input("Bias").empty()) outputs.emplace_back("BiasGrad", g.InputGrad("Bias"));
  return {GradOp("layer_norm_grad",
                 {{"X", g.Input("X")},
                  {"Scale", g.Input("Scale")},
                  {"Mean", g.Output("Mean")},
                  {"InvStdDev", g.Output("InvStdDev")},
                  {"OutGrad", g.OutputGrad("Out")}},
                 std::move(outputs), GradAttrs(g, {"axis"}))};
}

}  // namespace
}  // namespace norm_ops

absl::Status RegisterNormOps(OpRegistry* registry) {
  const double epsilon = 1e-5;
  const int64_t last = -1;
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("batch_norm_infer")
                                                      .Input("X")
                                                      .Input("Scale")
                                                      .Input("Bias")
                                                      .Input("Mean")
                                                      .Input("Var")
                                                      .Output("Out")
                                                      .Attr("epsilon", AttrType::kFloat, epsilon)
                                                      .Infer(norm_ops::InferBatchNorm)
                                                      .Grad(norm_ops::BatchNormGrad)));
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(OpSchema("batch_norm_infer_grad")
                                                      .Input("X")
                                                      .Input("Scale")
                                                      .Input("Mean")
                                                      .Input("Var")
                                                      .Input("OutGrad")
                                                      .Output("XGrad")
                                                      .Output("ScaleGrad")
                                                      .Output("BiasGrad")
                                                      .Output("MeanGrad")
                                                      .Output("VarGrad")
                                                      .Attr("epsilon", AttrType::kFloat, epsilon)
                                                      .Infer(norm_ops::InferBatchNormGrad)));
  SLUICE_RETURN_IF_ERROR(
      registry->RegisterSchema(OpSchema("layer_norm")
                                   .Input("X")
                                   .Input("Scale")
                                   .Input("Bias", /*variadic=*/false, /*optional=*/true)
                                   .Output("Out")
                                   .Output("Mean")
                                   .Output("InvStdDev")
                                   .Attr("axis", AttrType::kInt, last)
                                   .Attr("epsilon", AttrType::kFloat, epsilon)
                                   .Infer(norm_ops::InferLayerNorm)
                                   .Grad(norm_ops::LayerNormGrad)));
  return registry->RegisterSchema(OpSchema("layer_norm_grad")
                                      .Input("X")
                                      .Input("Scale")
                                      .Input("Mean")
                                      .Input("InvStdDev")
                                      .Input("OutGrad")
                                      .Output("XGrad")
                                      .Output("ScaleGrad")
                                      .Output("BiasGrad")
                                      .Attr("axis", AttrType::kInt, last)
                                      .Infer(norm_ops::InferLayerNormGrad));
}

}  // namespace sluice::ops::internal
