// Mappers for the normalization ops (node_table.h): BatchNormalization in inference (onto
// batch_norm_infer, ops/norm_ops.cc) and LayerNormalization (onto layer_norm).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/builder/program.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace norm_mappers {
namespace {

// The attributes BatchNormalization has at the node's opset (this importer reads epsilon and
// checks spatial and training_mode; momentum only matters in training).
absl::Status CheckBatchNormAttrs(const NodeContext& ctx) {
  if (ctx.opset() >= 14) return ctx.OnlyAttrs({"epsilon", "momentum", "training_mode"});
  if (ctx.opset() >= 9) return ctx.OnlyAttrs({"epsilon", "momentum"});
  if (ctx.opset() >= 7) return ctx.OnlyAttrs({"epsilon", "momentum", "spatial"});
  return ctx.OnlyAttrs({"epsilon", "momentum", "spatial", "is_test"});
}

}  // namespace
}  // namespace norm_mappers

// Y = (X - input_mean) / sqrt(input_var + epsilon) * scale + B per channel. Opsets 6 to 8 have
// the same meaning with spatial = 1 (their default); spatial = 0 (statistics per element of
// [C, D1, ...]) is refused. Opset 6's is_test is ignored, as ONNX Runtime ignores it: these
// opsets are imported for inference. training_mode = 1 (opset 14 on: batch statistics) and the
// running-statistics outputs are refused.
absl::Status MapBatchNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(norm_mappers::CheckBatchNormAttrs(ctx));
  if (ctx.opset() < 9) {
    SLUICE_ASSIGN_OR_RETURN(const int64_t spatial, ctx.IntAttr("spatial", 1));
    if (spatial != 1) {
      return ctx.Error(absl::StrCat("spatial ", spatial,
                                    " (statistics per element, not per channel) is not supported"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(const bool training, ctx.FlagAttr("training_mode", false));
  if (training != 0) {
    return ctx.Error(
        "training_mode 1 (normalizing by the batch's statistics) is not supported: inference "
        "imports only");
  }
  for (int i = 1; i < ctx.num_outputs(); ++i) {
    if (ctx.WantsOutput(i)) {
      return ctx.Error(absl::StrCat(
          "output ", i, " ('", ctx.node().output(i),
          "', running or saved statistics of training) is not supported: inference imports only"));
    }
  }
  if (ctx.num_inputs() != 5) {
    return ctx.Error(absl::StrCat("needs five inputs (X, scale, B, input_mean, input_var), has ",
                                  ctx.num_inputs()));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> in, ctx.Inputs());
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, ctx.FloatAttr("epsilon", 1e-5));
  SLUICE_ASSIGN_OR_RETURN(
      Value out, Built(ctx, fn::BatchNormInfer(in[0], in[1], in[2], in[3], in[4], epsilon)));
  return ctx.SetOutput(0, out);
}

// Opset 17: Y = (X - Mean) * InvStdDev * Scale + B over X's dims [axis, rank), and the
// optional outputs Mean and InvStdDev (X's dtype; dims from axis on kept as 1). Scale must have
// those dims (leading 1s may be added or dropped) and B as many elements; stash_type is ignored
// (the statistics are computed in double, rounded to X's dtype).
absl::Status MapLayerNormalization(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"axis", "epsilon", "stash_type"}));
  SLUICE_ASSIGN_OR_RETURN(const int64_t axis, ctx.IntAttr("axis", -1));
  SLUICE_ASSIGN_OR_RETURN(const double epsilon, ctx.FloatAttr("epsilon", 1e-5));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value scale, ctx.Input(1));
  std::vector<std::vector<Var>> inputs = {{x.var()}, {scale.var()}, {}};
  if (ctx.HasInput(2)) {
    SLUICE_ASSIGN_OR_RETURN(Value bias, ctx.Input(2));
    const Shape& scale_shape = scale.var().shape();
    if (bias.var().shape() != scale_shape &&
        bias.var().shape().NumElements() == scale_shape.NumElements()) {
      // B as Scale's shape (they differ in leading 1s at most: layer_norm checks the rest).
      SLUICE_ASSIGN_OR_RETURN(
          bias, Built(ctx, fn::Reshape(bias, std::vector<int64_t>(scale_shape.dims().begin(),
                                                                  scale_shape.dims().end()))));
    }
    inputs[2].push_back(bias.var());
  }
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<std::vector<Var>> outputs,
      Built(ctx, AppendOp(ctx.state().program(), "layer_norm", inputs,
                          vm::AttrMap().Set("axis", axis).Set("epsilon", epsilon))));
  for (int i = 0; i < 3; ++i) {
    if (ctx.WantsOutput(i)) SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, outputs[i][0]));
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::onnx::internal
