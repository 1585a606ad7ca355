// Mappers for ONNX's convolution and pooling (node_table.h): Conv, MaxPool and AveragePool
// onto conv2d, max_pool2d and avg_pool2d (ops/conv_ops.cc), LpPool onto avg_pool2d of |x|^p
// (times the window's size, to the power 1/p), GlobalAveragePool onto reduce_mean,
// GlobalMaxPool onto max_pool2d over the whole image.
//
// Shapes are static at import, so auto_pad (SAME_UPPER, SAME_LOWER, VALID) becomes explicit
// pads here. A 1-D node ([N, C, L]) runs as the 2-D op on [N, C, 1, L] (reshapes on either
// side); 3-D and higher are refused. Conv's bias is an add of B reshaped to [M, 1, 1].
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/conv_mapping.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// Helpers in a namespace of their own: a unity build compiles this file with the other
// mappers. Those conv_mapping.h declares are shared with conv_transpose_mappers.cc.
namespace conv_mapping {

// A node's window attributes, made 2-D: kernel, strides, dilations [h, w] and pads [top,
// left, bottom, right].
struct Window2d {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;
};

// X's static shape, checked to be [N, C, L] or [N, C, H, W].
absl::StatusOr<Shape> ImageShape(const NodeContext& ctx, const Value& x, absl::string_view name) {
  const Shape shape = x.var().shape();
  if (shape.rank() != 3 && shape.rank() != 4) {
    return ctx.Error(absl::StrCat(name, " has shape ", shape.ToString(),
                                  "; only 1-D ([N, C, L]) and 2-D ([N, C, H, W]) inputs are "
                                  "supported"));
  }
  return shape;
}

// Attribute `name` with one entry per spatial axis (`spatial`), `fallback` (per axis) when
// absent.
absl::StatusOr<std::vector<int64_t>> PerAxis(const NodeContext& ctx, absl::string_view name,
                                             int spatial, int64_t fallback, int per_axis) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> v, ctx.IntsAttr(name, {}));
  if (v.empty()) return std::vector<int64_t>(static_cast<size_t>(spatial * per_axis), fallback);
  if (static_cast<int>(v.size()) != spatial * per_axis) {
    return ctx.Error(absl::StrCat("attribute '", name, "' has ", v.size(), " entries [",
                                  absl::StrJoin(v, ", "), "]; the input has ", spatial,
                                  " spatial axes, so it needs ", spatial * per_axis));
  }
  return v;
}

// The node's window over input `x_shape` with kernel `kernel` (one entry per spatial axis):
// auto_pad resolved to explicit pads, then lifted to 2-D.
absl::StatusOr<Window2d> WindowOf(const NodeContext& ctx, const Shape& x_shape,
                                  std::vector<int64_t> kernel) {
  const int spatial = x_shape.rank() - 2;
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> strides, PerAxis(ctx, "strides", spatial, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dilations, PerAxis(ctx, "dilations", spatial, 1));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> pads, PerAxis(ctx, "pads", spatial, 0, 2));
  SLUICE_ASSIGN_OR_RETURN(std::string auto_pad, ctx.StringAttr("auto_pad", "NOTSET"));
  for (int i = 0; i < spatial; ++i) {
    if (strides[i] < 1 || dilations[i] < 1) {
      return ctx.Error(absl::StrCat("strides [", absl::StrJoin(strides, ", "), "] and dilations [",
                                    absl::StrJoin(dilations, ", "), "] must be positive"));
    }
  }
  if (auto_pad == "VALID") {
    pads.assign(pads.size(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // The output keeps ceil(in / stride) positions; the padding that takes, split evenly,
    // the odd one at the end (SAME_UPPER) or the beginning (SAME_LOWER).
    for (int i = 0; i < spatial; ++i) {
      const int64_t in = x_shape.dim(2 + i);
      const int64_t out = (in + strides[i] - 1) / strides[i];
      const int64_t extent = dilations[i] * (kernel[i] - 1) + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + extent - in);
      const int64_t small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[spatial + i] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return ctx.Error(absl::StrCat("auto_pad '", auto_pad,
                                  "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"));
  }
  Window2d w;
  if (spatial == 1) {
    w.kernel = {1, kernel[0]};
    w.strides = {1, strides[0]};
    w.dilations = {1, dilations[0]};
    w.pads = {0, pads[0], 0, pads[1]};
  } else {
    w.kernel = std::move(kernel);
    w.strides = std::move(strides);
    w.dilations = std::move(dilations);
    w.pads = std::move(pads);
  }
  return w;
}

// `v` of shape [N, C, L] as [N, C, 1, L]; 2-D shapes unchanged.
absl::StatusOr<Value> To2d(const NodeContext& ctx, const Value& v) {
  const Shape s = v.var().shape();
  if (s.rank() == 4) return v;
  return Built(ctx, fn::Reshape(v, {s.dim(0), s.dim(1), 1, s.dim(2)}));
}

// A 2-D result back to the node's rank (`rank` 3: [N, C, 1, L] to [N, C, L]).
absl::StatusOr<Value> FromTo2d(const NodeContext& ctx, const Value& v, int rank) {
  if (rank == 4) return v;
  const Shape s = v.var().shape();
  return Built(ctx, fn::Reshape(v, {s.dim(0), s.dim(1), s.dim(3)}));
}

// The node's kernel_shape, required for the pools, checked against `from` (W's spatial dims)
// for Conv.
absl::StatusOr<std::vector<int64_t>> KernelShape(const NodeContext& ctx, int spatial,
                                                 const std::vector<int64_t>& from) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.IntsAttr("kernel_shape", {}));
  if (kernel.empty()) {
    if (from.empty()) return ctx.Error("attribute 'kernel_shape' is required");
    return from;
  }
  if (static_cast<int>(kernel.size()) != spatial) {
    return ctx.Error(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ", "), "] has ",
                                  kernel.size(), " entries; the input has ", spatial,
                                  " spatial axes"));
  }
  if (!from.empty() && kernel != from) {
    return ctx.Error(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ", "),
                                  "] differs from W's spatial dims [", absl::StrJoin(from, ", "),
                                  "]"));
  }
  for (int64_t k : kernel) {
    if (k < 1) {
      return ctx.Error(
          absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ", "), "] must be positive"));
    }
  }
  return kernel;
}

}  // namespace conv_mapping

absl::Status MapConv(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(
      ctx.OnlyAttrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value w, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(const Shape x_shape, conv_mapping::ImageShape(ctx, x, "X"));
  const Shape w_shape = w.var().shape();
  if (w_shape.rank() != x_shape.rank()) {
    return ctx.Error(absl::StrCat("W has shape ", w_shape.ToString(), "; for X of shape ",
                                  x_shape.ToString(), " it needs rank ", x_shape.rank()));
  }
  const int spatial = x_shape.rank() - 2;
  const std::vector<int64_t> w_kernel(w_shape.dims().begin() + 2, w_shape.dims().end());
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          conv_mapping::KernelShape(ctx, spatial, w_kernel));
  SLUICE_ASSIGN_OR_RETURN(conv_mapping::Window2d win,
                          conv_mapping::WindowOf(ctx, x_shape, std::move(kernel)));
  SLUICE_ASSIGN_OR_RETURN(int64_t group, ctx.IntAttr("group", 1));
  SLUICE_ASSIGN_OR_RETURN(Value x2, conv_mapping::To2d(ctx, x));
  SLUICE_ASSIGN_OR_RETURN(Value w2, conv_mapping::To2d(ctx, w));
  SLUICE_ASSIGN_OR_RETURN(
      Value y, Built(ctx, fn::Conv2d(x2, w2, win.strides, win.pads, win.dilations, group)));
  if (ctx.HasInput(2)) {
    SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(2));
    const Shape b_shape = b.var().shape();
    if (b_shape != Shape({w_shape.dim(0)})) {
      return ctx.Error(absl::StrCat("B has shape ", b_shape.ToString(), "; it must be [",
                                    w_shape.dim(0), "] (W's output channels)"));
    }
    SLUICE_ASSIGN_OR_RETURN(Value column, Built(ctx, fn::Reshape(b, {w_shape.dim(0), 1, 1})));
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Add(y, column)));
  }
  SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::FromTo2d(ctx, y, x_shape.rank()));
  return ctx.SetOutput(0, y);
}

absl::Status MapPool(NodeContext& ctx) {
  const bool max = ctx.node().op_type() == "MaxPool";
  const bool lp = ctx.node().op_type() == "LpPool";
  int64_t p = 2;
  if (lp) {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs(
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"}));
    SLUICE_ASSIGN_OR_RETURN(p, ctx.IntAttr("p", 2));
    if (p < 1) return ctx.Error(absl::StrCat("p is ", p, "; it must be 1 or more"));
  } else if (max) {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                          "pads", "storage_order", "strides"}));
    if (ctx.WantsOutput(1)) {
      return ctx.Error("the Indices output (the arg-max positions) is not supported");
    }
    SLUICE_ASSIGN_OR_RETURN(bool storage_order, ctx.FlagAttr("storage_order", false));
    if (storage_order != 0) {
      return ctx.Error(absl::StrCat("storage_order=", storage_order,
                                    " is not supported (it orders the Indices output, which "
                                    "is not supported either)"));
    }
  } else {
    SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                          "kernel_shape", "pads", "strides"}));
  }
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const Shape x_shape, conv_mapping::ImageShape(ctx, x, "X"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          conv_mapping::KernelShape(ctx, x_shape.rank() - 2, {}));
  SLUICE_ASSIGN_OR_RETURN(conv_mapping::Window2d win,
                          conv_mapping::WindowOf(ctx, x_shape, std::move(kernel)));
  SLUICE_ASSIGN_OR_RETURN(bool ceil_mode, ctx.FlagAttr("ceil_mode", false));
  SLUICE_ASSIGN_OR_RETURN(bool count_include_pad, ctx.FlagAttr("count_include_pad", false));
  SLUICE_ASSIGN_OR_RETURN(Value x2, conv_mapping::To2d(ctx, x));
  Value y = x2;
  if (lp) {
    // (sum over the window of |x|^p)^(1/p): the padding adds |0|^p = 0 to each sum.
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Abs(x2)));
    if (p > 1) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Pow(y, static_cast<double>(p))));
    }
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::AvgPool2d(y, win.kernel, win.strides, win.pads,
                                                        win.dilations, ceil_mode != 0,
                                                        /*count_include_pad=*/true)));
    SLUICE_ASSIGN_OR_RETURN(
        y, Built(ctx, fn::Scale(y, static_cast<double>(win.kernel[0] * win.kernel[1]))));
    if (p > 1) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Pow(y, 1.0 / static_cast<double>(p))));
    }
  } else if (max) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::MaxPool2d(x2, win.kernel, win.strides, win.pads,
                                                        win.dilations, ceil_mode != 0)));
  } else {
    SLUICE_ASSIGN_OR_RETURN(
        y, Built(ctx, fn::AvgPool2d(x2, win.kernel, win.strides, win.pads, win.dilations,
                                    ceil_mode != 0, count_include_pad != 0)));
  }
  SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::FromTo2d(ctx, y, x_shape.rank()));
  return ctx.SetOutput(0, y);
}

// GlobalAveragePool: the mean over every spatial axis, kept as size 1. GlobalMaxPool: X
// [N, C, spatial...] viewed as [N, C, 1, S], one max_pool2d window of [1, S], then [N, C,
// 1, ...]. Any rank of 3 or more.
absl::Status MapGlobalPool(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  const Shape s = x.var().shape();
  if (s.rank() < 3) {
    return ctx.Error(absl::StrCat("X has shape ", s.ToString(),
                                  "; it needs rank 3 or more ([N, C, spatial...])"));
  }
  std::vector<int64_t> axes;
  std::vector<int64_t> out_dims = {s.dim(0), s.dim(1)};
  int64_t size = 1;
  for (int d = 2; d < s.rank(); ++d) {
    axes.push_back(d);
    out_dims.push_back(1);
    size *= s.dim(d);
  }
  Value y = x;
  if (ctx.node().op_type() == "GlobalAveragePool") {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::ReduceMean(x, axes, /*keepdim=*/true)));
    return ctx.SetOutput(0, y);
  }
  SLUICE_ASSIGN_OR_RETURN(Value flat, Built(ctx, fn::Reshape(x, {s.dim(0), s.dim(1), 1, size})));
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::MaxPool2d(flat, {1, size}, {1, 1})));
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Reshape(y, out_dims)));
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
