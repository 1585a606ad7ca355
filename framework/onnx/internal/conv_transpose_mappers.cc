// The mapper for ONNX's ConvTranspose (node_table.h), 1-D and 2-D, onto conv2d_grad's XGrad
// (ops/conv_ops.cc): a transposed convolution is the gradient, with respect to its input, of
// the convolution that maps the ConvTranspose's output back onto its input. That forward
// conv reads ONNX's W [C, M / group, kH, kW] as it is (C its output channels), with the
// node's strides, dilations and group, and with the pads that crop the full transposed
// result, s * (in - 1) + dilation * (k - 1) + 1 per axis, to the node's output. X enters as
// OutGrad; conv2d_grad's X operand, which gives XGrad its shape, is a zero tensor (the op
// reads its values only for WGrad, which this mapping drops).
//
// The cost of that: conv2d_grad also computes WGrad, as many multiply-adds as XGrad, into a
// discarded tensor of W's shape. A zero-insertion conv2d would avoid it but multiplies the
// work by the product of the strides instead; a dedicated transposed-conv op (conv2d_grad's
// XGrad half) would avoid both.
//
// Shapes are static, so pads, auto_pad and output_shape resolve at import. An output larger
// than the full result (output_padding past the end padding, or an output_shape that asks
// for it) reads as zeros there: up to stride - 1 trailing positions come from the forward
// conv's geometry (its windows never reach them), anything more from concatenated zeros.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/builder/program.h"
#include "framework/onnx/internal/conv_mapping.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace conv_transpose_mapping {

// floor(v / 2), as ONNX's reference computes the split of a total padding (negative totals
// included: an output_shape beyond the full result).
int64_t FloorHalf(int64_t v) { return v >= 0 ? v / 2 : -((1 - v) / 2); }

// One spatial axis of the mapping.
struct Axis {
  int64_t in = 0;      // X's size
  int64_t kernel = 1;  // W's
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t crop_begin = 0;  // pads[start] (negative: zeros added before)
  int64_t crop_end = 0;    // pads[end] - output_padding (negative: zeros added after)

  int64_t Full() const { return stride * (in - 1) + dilation * (kernel - 1) + 1; }
  int64_t Out() const { return Full() - crop_begin - crop_end; }
  // The forward conv's pads and input size (conv2d_grad's X): the crops that are cropping,
  // plus up to stride - 1 trailing zeros its windows never read.
  int64_t ConvPadBegin() const { return std::max<int64_t>(crop_begin, 0); }
  int64_t ConvPadEnd() const { return std::max<int64_t>(crop_end, 0); }
  int64_t Slack() const { return std::min<int64_t>(std::max<int64_t>(-crop_end, 0), stride - 1); }
  int64_t ConvIn() const { return Full() - ConvPadBegin() - ConvPadEnd() + Slack(); }
  // Zeros concatenated around conv2d_grad's XGrad.
  int64_t ZerosBefore() const { return std::max<int64_t>(-crop_begin, 0); }
  int64_t ZerosAfter() const { return std::max<int64_t>(-crop_end, 0) - Slack(); }
};

// `v` with `before` and `after` zeros along `axis`.
absl::StatusOr<Value> ZeroExtend(const NodeContext& ctx, const Value& v, int axis, int64_t before,
                                 int64_t after) {
  if (before == 0 && after == 0) return v;
  std::vector<Value> parts;
  const Shape s = v.var().shape();
  std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
  for (const int64_t n : {before, int64_t{-1}, after}) {
    if (n == -1) {
      parts.push_back(v);
    } else if (n > 0) {
      dims[axis] = n;
      SLUICE_ASSIGN_OR_RETURN(Value zeros,
                              Built(ctx, fn::FillConstant(Shape(dims), 0.0, v.var().dtype())));
      parts.push_back(zeros);
    }
  }
  return Built(ctx, fn::Concat(parts, axis));
}

// The node's axes: attributes checked, pads resolved from pads, auto_pad or output_shape.
absl::StatusOr<std::vector<Axis>> AxesOf(const NodeContext& ctx, const Shape& x_shape,
                                         const std::vector<int64_t>& kernel) {
  const int spatial = x_shape.rank() - 2;
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                          conv_mapping::PerAxis(ctx, "strides", spatial, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations,
                          conv_mapping::PerAxis(ctx, "dilations", spatial, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                          conv_mapping::PerAxis(ctx, "pads", spatial, 0, 2));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                          conv_mapping::PerAxis(ctx, "output_padding", spatial, 0));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> output_shape, ctx.IntsAttr("output_shape", {}));
  SLUICE_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      auto_pad != "VALID") {
    return ctx.Error(absl::StrCat("auto_pad '", auto_pad,
                                  "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  // output_shape may also hold N and C (as ONNX Runtime reads it): the spatial dims are last.
  if (output_shape.size() == static_cast<size_t>(spatial + 2)) {
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  }
  if (!output_shape.empty() && output_shape.size() != static_cast<size_t>(spatial)) {
    return ctx.Error(absl::StrCat("output_shape [", absl::StrJoin(output_shape, ", "), "] has ",
                                  output_shape.size(), " entries; the input has ", spatial,
                                  " spatial axes"));
  }
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  // A total padding's odd element goes to the end for SAME_UPPER and to the beginning
  // otherwise; opsets 1 to 10 state the opposite.
  const bool odd_at_end = (auto_pad == "SAME_UPPER") != (ctx.opset() < 11);
  std::vector<Axis> axes(static_cast<size_t>(spatial));
  for (int i = 0; i < spatial; ++i) {
    Axis& a = axes[i];
    if (strides[i] < 1 || dilations[i] < 1 || output_padding[i] < 0 || pads[i] < 0 ||
        pads[spatial + i] < 0) {
      return ctx.Error(absl::StrCat("strides [", absl::StrJoin(strides, ", "), "] and dilations [",
                                    absl::StrJoin(dilations, ", "), "] must be positive, pads [",
                                    absl::StrJoin(pads, ", "), "] and output_padding [",
                                    absl::StrJoin(output_padding, ", "), "] not negative"));
    }
    a.in = x_shape.dim(2 + i);
    a.kernel = kernel[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    int64_t begin = pads[i], end = pads[spatial + i];
    if (!output_shape.empty() || same) {
      const int64_t out = output_shape.empty() ? a.in * a.stride : output_shape[i];
      const int64_t total = a.Full() + output_padding[i] - out;
      begin = odd_at_end ? FloorHalf(total) : total - FloorHalf(total);
      end = total - begin;
    } else if (auto_pad == "VALID") {
      begin = end = 0;
    }
    a.crop_begin = begin;
    a.crop_end = end - output_padding[i];
    if (a.Out() < 1 || a.ConvIn() < 1) {
      return ctx.Error(absl::StrCat("spatial axis ", i, " of X (size ", a.in, ") gives ",
                                    a.Out() < 1 ? "an output of size " : "a computed part of size ",
                                    a.Out() < 1 ? a.Out() : a.ConvIn(), " (full result ", a.Full(),
                                    ", pads ", begin, " and ", end, ", output_padding ",
                                    output_padding[i], ")"));
    }
  }
  return axes;
}

}  // namespace conv_transpose_mapping

absl::Status MapConvTranspose(NodeContext& ctx) {
  namespace ct = conv_transpose_mapping;
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"auto_pad", "dilations", "group", "kernel_shape",
                                        "output_padding", "output_shape", "pads", "strides"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value w, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(const Shape x_shape, conv_mapping::ImageShape(ctx, x, "X"));
  const Shape w_shape = w.var().shape();
  SLUICE_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  const int64_t c = x_shape.dim(1);
  if (group < 1 || group > (int64_t{1} << 20) || c % group != 0 ||
      w_shape.rank() != x_shape.rank() || w_shape.dim(0) != c) {
    return ctx.Error(absl::StrCat("W has shape ", w_shape.ToString(), " and group is ", group,
                                  "; for X of shape ", x_shape.ToString(), " W needs rank ",
                                  x_shape.rank(), " and ", c,
                                  " input channels ([C, M / group, k...]), group must divide ", c));
  }
  const int64_t m = w_shape.dim(1) * group;
  const int spatial = x_shape.rank() - 2;
  const std::vector<int64_t> w_kernel(w_shape.dims().begin() + 2, w_shape.dims().end());
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          conv_mapping::KernelShape(ctx, spatial, w_kernel));
  SLUICE_ASSIGN_OR_RETURN(std::vector<ct::Axis> axes, ct::AxesOf(ctx, x_shape, kernel));
  if (spatial == 1) {  // [N, C, 1, L]: a unit H axis
    ct::Axis unit;
    unit.in = 1;
    axes.insert(axes.begin(), unit);
  }
  const ct::Axis& h = axes[0];
  const ct::Axis& wd = axes[1];

  SLUICE_ASSIGN_OR_RETURN(Value x2, conv_mapping::To2d(ctx, x));
  SLUICE_ASSIGN_OR_RETURN(Value w2, conv_mapping::To2d(ctx, w));
  SLUICE_ASSIGN_OR_RETURN(
      Value zeros, Built(ctx, fn::FillConstant(Shape({x_shape.dim(0), m, h.ConvIn(), wd.ConvIn()}),
                                               0.0, x.var().dtype())));
  const vm::AttrMap attrs =
      vm::AttrMap()
          .Set("strides", std::vector<int64_t>{h.stride, wd.stride})
          .Set("pads", std::vector<int64_t>{h.ConvPadBegin(), wd.ConvPadBegin(), h.ConvPadEnd(),
                                            wd.ConvPadEnd()})
          .Set("dilations", std::vector<int64_t>{h.dilation, wd.dilation})
          .Set("groups", group);
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> grads,
                          Built(ctx, AppendOp(ctx.state().program(), "conv2d_grad",
                                              {{zeros.var()}, {w2.var()}, {x2.var()}}, attrs)));
  Value y = grads[0][0];
  SLUICE_ASSIGN_OR_RETURN(y, ct::ZeroExtend(ctx, y, 2, h.ZerosBefore(), h.ZerosAfter()));
  SLUICE_ASSIGN_OR_RETURN(y, ct::ZeroExtend(ctx, y, 3, wd.ZerosBefore(), wd.ZerosAfter()));
  if (ctx.HasInput(2)) {
    SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(2));
    const Shape b_shape = b.var().shape();
    if (b_shape != Shape({m})) {
      return ctx.Error(absl::StrCat("B has shape ", b_shape.ToString(), "; it must be [", m,
                                    "] (W's output channels times group)"));
    }
    SLUICE_ASSIGN_OR_RETURN(Value column, Built(ctx, fn::Reshape(b, {m, 1, 1})));
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Add(y, column)));
  }
  SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::FromTo2d(ctx, y, x_shape.rank()));
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
