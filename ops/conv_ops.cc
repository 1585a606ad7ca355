// Schemas of the conv family: 2-D convolution and pooling over NCHW images, f32 or f64. The
// geometry (attributes, output sizes, operand checks) lives in ops/internal/conv_geometry.h,
// shared with the kernels.
//
//   conv2d          X [N, C, H, W], W [M, C / groups, kH, kW] -> Out [N, M, oH, oW]
//                   attrs strides=[1, 1], pads=[0, 0, 0, 0] (top, left, bottom, right),
//                   dilations=[1, 1], groups=1. Out[n, m] = sum over the group's channels c
//                   and taps (i, j) of X[n, c, oh * sH - top + i * dH, ow * sW - left + j * dW]
//                   * W[m, c, i, j], padding reading as 0. No bias operand: a bias is an add
//                   of B reshaped to [M, 1, 1] (broadcast), whose gradient the add's own grad
//                   gives (the op table's generator has no optional operands, and the add
//                   fuses with a following activation).       grad: conv2d_grad
//   conv2d_grad     X, W, OutGrad -> XGrad, WGrad   (same attrs)
//   max_pool2d      X [N, C, H, W] -> Out [N, C, oH, oW]
//                   attrs kernel (required, 2 ints), strides=[] (empty: the kernel, as
//                   Paddle's and PyTorch's default), pads=[0, 0, 0, 0] (each smaller than the
//                   kernel), dilations=[1, 1], ceil_mode=0. The largest tap inside the input
//                   (padding never wins, as in ONNX); NaN propagates. grad: max_pool2d_grad
//   max_pool2d_grad X, OutGrad -> XGrad   each OutGrad element goes to its window's first
//                   arg-max in window order (row-major taps), recomputed from X
//   avg_pool2d      X -> Out   the max pool's attrs and count_include_pad=0: the mean of the
//                   taps inside the input, or (1) the sum over the taps inside the padded
//                   extent [-pad_begin, size + pad_end) divided by their count (a window that
//                   ceil_mode extends past the end padding counts only what lies within it)
//                   grad: avg_pool2d_grad
//   avg_pool2d_grad X, OutGrad -> XGrad   OutGrad / divisor spread over the window's taps
//                   inside the input (X is read for its shape)
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ops/internal/conv_geometry.h"
#include "ops/internal/op_families.h"
#include "ops/internal/schema_helpers.h"

namespace sluice::ops::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other families' schemas.
namespace conv_schema {

using Metas = std::vector<std::vector<TensorMeta>>;

absl::Status RequireMeta(const InferContext& ctx, absl::string_view name, const TensorMeta& have,
                         const TensorMeta& want, absl::string_view why) {
  if (have == want) return absl::OkStatus();
  return ctx.Error(
      absl::StrCat(name, " ", MetaText(have), " must be ", MetaText(want), " (", why, ")"));
}

absl::StatusOr<Metas> InferConv(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(conv::Conv2dDims d,
                          InOp(ctx, conv::Conv2dShapes(ctx.input(0), ctx.input(1), ctx.attrs())));
  return Single({ctx.input(0).dtype, d.out});
}

absl::StatusOr<Metas> InferConvGrad(const InferContext& ctx) {
  SLUICE_ASSIGN_OR_RETURN(conv::Conv2dDims d,
                          InOp(ctx, conv::Conv2dShapes(ctx.input(0), ctx.input(1), ctx.attrs())));
  SLUICE_RETURN_IF_ERROR(
      RequireMeta(ctx, "OutGrad", ctx.input(2), {ctx.input(0).dtype, d.out}, "the shape of Out"));
  return Metas{{ctx.input(0)}, {ctx.input(1)}};
}

InferFn InferPool(bool average) {
  return [average](const InferContext& ctx) -> absl::StatusOr<Metas> {
    SLUICE_ASSIGN_OR_RETURN(conv::Pool2dDims d,
                            InOp(ctx, conv::Pool2dShapes(ctx.input(0), ctx.attrs(), average)));
    return Single({ctx.input(0).dtype, d.out});
  };
}

InferFn InferPoolGrad(bool average) {
  return [average](const InferContext& ctx) -> absl::StatusOr<Metas> {
    SLUICE_ASSIGN_OR_RETURN(conv::Pool2dDims d,
                            InOp(ctx, conv::Pool2dShapes(ctx.input(0), ctx.attrs(), average)));
    SLUICE_RETURN_IF_ERROR(
        RequireMeta(ctx, "OutGrad", ctx.input(1), {ctx.input(0).dtype, d.out}, "the shape of Out"));
    return Single(ctx.input(0));
  };
}

std::vector<GradOpDesc> ConvGrad(const GradContext& g) {
  return {GradOp("conv2d_grad",
                 {{"X", g.Input("X")}, {"W", g.Input("W")}, {"OutGrad", g.OutputGrad("Out")}},
                 {{"XGrad", g.InputGrad("X")}, {"WGrad", g.InputGrad("W")}},
                 GradAttrs(g, {"strides", "pads", "dilations", "groups"}))};
}

GradMaker PoolGrad(std::string grad_op) {
  return [grad_op](const GradContext& g) {
    return std::vector<GradOpDesc>{GradOp(
        grad_op, {{"X", g.Input("X")}, {"OutGrad", g.OutputGrad("Out")}},
        {{"XGrad", g.InputGrad("X")}},
        GradAttrs(g,
                  {"kernel", "strides", "pads", "dilations", "ceil_mode", "count_include_pad"}))};
  };
}

// conv2d's attributes, on the op and on its grad.
OpSchema& ConvAttrs(OpSchema& schema) {
  return schema.Attr("strides", AttrType::kInts, std::vector<int64_t>{1, 1})
      .Attr("pads", AttrType::kInts, std::vector<int64_t>{0, 0, 0, 0})
      .Attr("dilations", AttrType::kInts, std::vector<int64_t>{1, 1})
      .Attr("groups", AttrType::kInt, int64_t{1});
}

// A pool's attributes (count_include_pad for the average pools).
OpSchema& PoolAttrs(OpSchema& schema, bool average) {
  schema.Attr("kernel", AttrType::kInts, std::nullopt)
      .Attr("strides", AttrType::kInts, std::vector<int64_t>{})
      .Attr("pads", AttrType::kInts, std::vector<int64_t>{0, 0, 0, 0})
      .Attr("dilations", AttrType::kInts, std::vector<int64_t>{1, 1})
      .Attr("ceil_mode", AttrType::kInt, int64_t{0});
  if (average) schema.Attr("count_include_pad", AttrType::kInt, int64_t{0});
  return schema;
}

}  // namespace conv_schema

absl::Status RegisterConvOps(OpRegistry* registry) {
  OpSchema conv("conv2d");
  conv.Input("X")
      .Input("W")
      .Output("Out")
      .Infer(conv_schema::InferConv)
      .Grad(conv_schema::ConvGrad);
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(conv_schema::ConvAttrs(conv)));
  OpSchema conv_grad("conv2d_grad");
  conv_grad.Input("X").Input("W").Input("OutGrad").Output("XGrad").Output("WGrad").Infer(
      conv_schema::InferConvGrad);
  SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(conv_schema::ConvAttrs(conv_grad)));
  for (const bool average : {false, true}) {
    const std::string op = average ? "avg_pool2d" : "max_pool2d";
    const std::string grad_op = absl::StrCat(op, "_grad");
    OpSchema pool(op);
    pool.Input("X")
        .Output("Out")
        .Infer(conv_schema::InferPool(average))
        .Grad(conv_schema::PoolGrad(grad_op));
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(conv_schema::PoolAttrs(pool, average)));
    OpSchema pool_grad(grad_op);
    pool_grad.Input("X").Input("OutGrad").Output("XGrad").Infer(
        conv_schema::InferPoolGrad(average));
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(conv_schema::PoolAttrs(pool_grad, average)));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::internal
