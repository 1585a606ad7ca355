// Mappers for ONNX's convolution and pooling (node_table.h): Conv, MaxPool and AveragePool
// onto conv2d, max_pool2d and avg_pool2d (ops/conv_ops.cc), LpPool onto avg_pool2d of |x|^p
// (times the window's size, to the power 1/p), GlobalAveragePool onto reduce_mean,
// GlobalMaxPool onto max_pool2d over the whole image.
//
// Shapes are static at import, so auto_pad (SAME_UPPER, SAME_LOWER, VALID) becomes explicit
// pads here. A 1-D node ([N, C, L]) runs as the 2-D op on [N, C, 1, L] (reshapes on either
// side); 3-D pools run as two 2-D pools (Pool3d), a 3-D Conv as one conv2d over depth taps
// stacked next to the channels (Conv3d); higher ranks are refused. Conv's bias is an add of B
// reshaped to [M, 1, 1].
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/conv_mapping.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// Helpers in a namespace of their own: a unity build compiles this file with the other
// mappers. Those conv_mapping.h declares are shared with conv_transpose_mappers.cc.
namespace conv_mapping {

// The largest size a window attribute (kernel, stride, dilation, pad) may hold: the geometry's
// sums and products of these with a dimension then stay within int64.
constexpr int64_t kAttrBound = int64_t{1} << 20;

// A node's window attributes, made 2-D: kernel, strides, dilations [h, w] and pads [top,
// left, bottom, right].
struct Window2d {
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;
};

// X's static shape, checked to be [N, C, L] or [N, C, H, W], or (`volumes`: the pools)
// [N, C, D, H, W].
absl::StatusOr<Shape> ImageShape(const NodeContext& ctx, const Value& x, absl::string_view name,
                                 bool volumes) {
  const Shape shape = x.var().shape();
  if (shape.rank() != 3 && shape.rank() != 4 && !(volumes && shape.rank() == 5)) {
    return ctx.Error(
        absl::StrCat(name, " has shape ", shape.ToString(), "; only 1-D ([N, C, L])",
                     volumes ? ", 2-D and 3-D ([N, C, D, H, W])" : " and 2-D ([N, C, H, W])",
                     " inputs are supported"));
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
  for (int64_t e : v) {
    if (e < -kAttrBound || e > kAttrBound) {  // keeps the geometry's sums and products in range
      return ctx.Error(absl::StrCat("attribute '", name, "' holds ", e, "; at most 2^20 in size"));
    }
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
    if (strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[spatial + i] < 0) {
      return ctx.Error(absl::StrCat("strides [", absl::StrJoin(strides, ", "), "] and dilations [",
                                    absl::StrJoin(dilations, ", "), "] must be positive, pads [",
                                    absl::StrJoin(pads, ", "), "] not negative"));
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

// Which pooling op: max_pool2d, or avg_pool2d dividing by the taps inside the input or by
// those inside the padded extent (count_include_pad).
enum class PoolKind { kMax, kAverage, kAverageWithPadding };

absl::StatusOr<Value> Pool2d(const NodeContext& ctx, PoolKind kind, const Value& x,
                             const Window2d& w, bool ceil_mode) {
  if (kind == PoolKind::kMax) {
    return Built(ctx, fn::MaxPool2d(x, w.kernel, w.strides, w.pads, w.dilations, ceil_mode));
  }
  return Built(ctx, fn::AvgPool2d(x, w.kernel, w.strides, w.pads, w.dilations, ceil_mode,
                                  kind == PoolKind::kAverageWithPadding));
}

// A 3-D pool of x [N, C, D, H, W] (`w` holds three axes; pads [d0, h0, w0, d1, h1, w1]) as
// two 2-D pools: over (H, W) with the depth folded into the channels, then over D with H and
// W flattened into one axis. The max, the sums and the tap counts of an average all factor
// over the axes (a window is a box, and ceil_mode and the padding act per axis), so this is
// the 3-D pool exactly.
absl::StatusOr<Value> Pool3d(const NodeContext& ctx, PoolKind kind, const Value& x,
                             const Window2d& w, bool ceil_mode) {
  const Shape s = x.var().shape();
  const int64_t n = s.dim(0), c = s.dim(1), d = s.dim(2);
  Window2d plane{{w.kernel[1], w.kernel[2]},
                 {w.strides[1], w.strides[2]},
                 {w.dilations[1], w.dilations[2]},
                 {w.pads[1], w.pads[2], w.pads[4], w.pads[5]}};
  Window2d depth{
      {w.kernel[0], 1}, {w.strides[0], 1}, {w.dilations[0], 1}, {w.pads[0], 0, w.pads[3], 0}};
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Reshape(x, {n, c * d, s.dim(3), s.dim(4)})));
  SLUICE_ASSIGN_OR_RETURN(y, Pool2d(ctx, kind, y, plane, ceil_mode));
  const int64_t oh = y.var().shape().dim(2), ow = y.var().shape().dim(3);
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Reshape(y, {n, c, d, oh * ow})));
  SLUICE_ASSIGN_OR_RETURN(y, Pool2d(ctx, kind, y, depth, ceil_mode));
  return Built(ctx, fn::Reshape(y, {n, c, y.var().shape().dim(2), oh, ow}));
}

// A 3-D convolution of x [N, C, D, H, W] by w [M, C / group, kD, kH, kW] (`win` holds three
// axes; pads [d0, h0, w0, d1, h1, w1]) as one conv2d: the depth is padded with zeros, each
// depth tap i gathers the input planes od * sD + i * dD for every output depth od, the taps
// are stacked next to the channels ([N, D', C, kD, H, W] viewed as [N * D', C * kD, H, W]),
// and W viewed as [M, C / group * kD, kH, kW] takes them in the same (channel, tap) order,
// a group's channels still contiguous. Returns [N, M, D', H', W'].
absl::StatusOr<Value> Conv3d(NodeContext& ctx, const Value& x, const Value& w, const Window2d& win,
                             int64_t group) {
  const Shape s = x.var().shape();
  const Shape ws = w.var().shape();
  const int64_t n = s.dim(0), c = s.dim(1), d = s.dim(2), h = s.dim(3), wd = s.dim(4);
  const int64_t kd = ws.dim(2), sd = win.strides[0], dd = win.dilations[0];
  const int64_t d0 = win.pads[0], d1 = win.pads[3];
  const int64_t padded = d + d0 + d1;
  const int64_t od = (padded - dd * (kd - 1) - 1) / sd + 1;
  if (od < 1) {
    return ctx.Error(absl::StrCat("the kernel's depth extent ", dd * (kd - 1) + 1,
                                  " exceeds the padded input depth ", padded));
  }
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, {kd, od}, int64_t{1} << 24).status());
  Value xp = x;
  if (d0 > 0 || d1 > 0) {
    std::vector<Value> parts;
    if (d0 > 0) {
      SLUICE_ASSIGN_OR_RETURN(Value zeros, Built(ctx, fn::FillConstant(Shape({n, c, d0, h, wd}),
                                                                       0.0, x.var().dtype())));
      parts.push_back(zeros);
    }
    parts.push_back(x);
    if (d1 > 0) {
      SLUICE_ASSIGN_OR_RETURN(Value zeros, Built(ctx, fn::FillConstant(Shape({n, c, d1, h, wd}),
                                                                       0.0, x.var().dtype())));
      parts.push_back(zeros);
    }
    SLUICE_ASSIGN_OR_RETURN(xp, Built(ctx, fn::Concat(parts, 2)));
  }
  std::vector<Value> taps;
  for (int64_t i = 0; i < kd; ++i) {
    HostTensor index = NewTensor(DataType::kI64, Shape({od}));
    for (int64_t o = 0; o < od; ++o) HostStore<int64_t>(index, o, o * sd + i * dd);
    SLUICE_ASSIGN_OR_RETURN(Value idx, ImportConstant(ctx, "depth_tap", std::move(index)));
    SLUICE_ASSIGN_OR_RETURN(Value tap, Built(ctx, fn::Gather(xp, idx, 2)));
    SLUICE_ASSIGN_OR_RETURN(tap, Built(ctx, fn::Reshape(tap, {n, c, 1, od, h, wd})));
    taps.push_back(tap);
  }
  Value stacked = taps[0];
  if (kd > 1) {
    SLUICE_ASSIGN_OR_RETURN(stacked, Built(ctx, fn::Concat(taps, 2)));  // [N, C, kD, D', H, W]
  }
  SLUICE_ASSIGN_OR_RETURN(stacked, Built(ctx, fn::Transpose(stacked, {0, 3, 1, 2, 4, 5})));
  SLUICE_ASSIGN_OR_RETURN(stacked, Built(ctx, fn::Reshape(stacked, {n * od, c * kd, h, wd})));
  SLUICE_ASSIGN_OR_RETURN(
      Value w2, Built(ctx, fn::Reshape(w, {ws.dim(0), ws.dim(1) * kd, ws.dim(3), ws.dim(4)})));
  Window2d plane{{win.kernel[1], win.kernel[2]},
                 {win.strides[1], win.strides[2]},
                 {win.dilations[1], win.dilations[2]},
                 {win.pads[1], win.pads[2], win.pads[4], win.pads[5]}};
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Conv2d(stacked, w2, plane.strides, plane.pads,
                                                         plane.dilations, group)));
  const Shape ys = y.var().shape();  // [N * D', M, H', W']
  SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Reshape(y, {n, od, ys.dim(1), ys.dim(2), ys.dim(3)})));
  return Built(ctx, fn::Transpose(y, {0, 2, 1, 3, 4}));
}

// The node's kernel_shape, required for the pools, checked against `from` (W's spatial dims)
// for Conv.
absl::StatusOr<std::vector<int64_t>> KernelShape(const NodeContext& ctx, int spatial,
                                                 const std::vector<int64_t>& from) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel, ctx.IntsAttr("kernel_shape", {}));
  for (int64_t k : kernel) {
    if (k < 1 || k > kAttrBound) {
      return ctx.Error(absl::StrCat("kernel_shape [", absl::StrJoin(kernel, ", "),
                                    "] must hold sizes from 1 to 2^20"));
    }
  }
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
  SLUICE_ASSIGN_OR_RETURN(const Shape x_shape,
                          conv_mapping::ImageShape(ctx, x, "X", /*volumes=*/true));
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
  Value y = x;
  if (spatial == 3) {
    if (group < 1 || w_shape.dim(1) * group != x_shape.dim(1) || w_shape.dim(0) % group != 0) {
      return ctx.Error(absl::StrCat("W ", w_shape.ToString(), " does not fit X ",
                                    x_shape.ToString(), " in ", group, " groups"));
    }
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::Conv3d(ctx, x, w, win, group));
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value x2, conv_mapping::To2d(ctx, x));
    SLUICE_ASSIGN_OR_RETURN(Value w2, conv_mapping::To2d(ctx, w));
    SLUICE_ASSIGN_OR_RETURN(
        y, Built(ctx, fn::Conv2d(x2, w2, win.strides, win.pads, win.dilations, group)));
  }
  if (ctx.HasInput(2)) {
    SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(2));
    const Shape b_shape = b.var().shape();
    if (b_shape != Shape({w_shape.dim(0)})) {
      return ctx.Error(absl::StrCat("B has shape ", b_shape.ToString(), "; it must be [",
                                    w_shape.dim(0), "] (W's output channels)"));
    }
    std::vector<int64_t> column_dims(static_cast<size_t>(std::max(spatial, 2)) + 1, 1);
    column_dims[0] = w_shape.dim(0);  // [M, 1, 1], or [M, 1, 1, 1] for a 3-D y
    SLUICE_ASSIGN_OR_RETURN(Value column, Built(ctx, fn::Reshape(b, column_dims)));
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Add(y, column)));
  }
  if (spatial < 3) {
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::FromTo2d(ctx, y, x_shape.rank()));
  }
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
  SLUICE_ASSIGN_OR_RETURN(const Shape x_shape,
                          conv_mapping::ImageShape(ctx, x, "X", /*volumes=*/true));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> kernel,
                          conv_mapping::KernelShape(ctx, x_shape.rank() - 2, {}));
  int64_t volume = 1;
  for (int64_t k : kernel) volume *= k;
  SLUICE_ASSIGN_OR_RETURN(conv_mapping::Window2d win,
                          conv_mapping::WindowOf(ctx, x_shape, std::move(kernel)));
  SLUICE_ASSIGN_OR_RETURN(bool ceil_mode, ctx.FlagAttr("ceil_mode", false));
  SLUICE_ASSIGN_OR_RETURN(bool count_include_pad, ctx.FlagAttr("count_include_pad", false));
  if (lp && ceil_mode) {
    // The sum is an average over the padded window times its size, so every window must lie
    // inside the padded extent; with ceil_mode the last one may stick out past it.
    const int64_t axes = static_cast<int64_t>(win.kernel.size());
    for (int64_t a = 0; a < axes; ++a) {
      const int64_t in = x_shape.rank() == 3 ? (a == 0 ? 1 : x_shape.dim(2))
                                             : x_shape.dim(static_cast<int>(2 + a));
      const int64_t begin = win.pads[a], end = win.pads[axes + a];
      const int64_t extent = win.dilations[a] * (win.kernel[a] - 1) + 1;
      const int64_t span = in + begin + end - extent;
      if (span < 0) continue;  // no window (the op refuses it)
      int64_t out = (span + win.strides[a] - 1) / win.strides[a] + 1;
      if ((out - 1) * win.strides[a] >= in + begin) --out;  // ONNX's ceil_mode rule
      if ((out - 1) * win.strides[a] + extent > in + begin + end) {
        return ctx.Error(
            "LpPool with ceil_mode 1 whose last window passes the padding is not "
            "supported (its sum would count fewer taps)");
      }
    }
  }
  // LpPool: (sum over the window of |x|^p)^(1/p), the sum an average over the padded window
  // (the padding adds |0|^p = 0) times its size.
  const conv_mapping::PoolKind kind = max  ? conv_mapping::PoolKind::kMax
                                      : lp ? conv_mapping::PoolKind::kAverageWithPadding
                                      : count_include_pad
                                          ? conv_mapping::PoolKind::kAverageWithPadding
                                          : conv_mapping::PoolKind::kAverage;
  Value y = x;
  if (lp) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Abs(x)));
    if (p > 1) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Pow(y, static_cast<double>(p))));
    }
  }
  if (x_shape.rank() == 5) {
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::Pool3d(ctx, kind, y, win, ceil_mode));
  } else {
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::To2d(ctx, y));
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::Pool2d(ctx, kind, y, win, ceil_mode));
    SLUICE_ASSIGN_OR_RETURN(y, conv_mapping::FromTo2d(ctx, y, x_shape.rank()));
  }
  if (lp) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Scale(y, static_cast<double>(volume))));
    if (p > 1) {
      SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Pow(y, 1.0 / static_cast<double>(p))));
    }
  }
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
