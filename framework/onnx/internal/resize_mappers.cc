// ONNX Resize (opset 10 on) and Upsample (7 to 9) as compositions of gathers (node_table.h).
//
// Resize is separable: each resized axis in turn maps every output position y to a source
// coordinate x (coordinate_transformation_mode), then to n taps, source indices next to x
// clamped to the input with a weight each (mode: nearest, linear, cubic; antialias widens
// the linear and cubic filters when downsampling; exclude_outside drops the taps past the
// edges and renormalizes). The importer computes the taps on the host in double, as ONNX's
// reference does, so only the scales or sizes must be constants, and emits per axis
//
//   out = sum over taps t of gather(x, index_t, axis) * weight_t   (weights broadcast along
//                                                                  the axis)
//
// or one gather alone where every output takes one source element (nearest, and integer
// ratios). tf_crop_and_resize's points outside the region of interest take
// extrapolation_value (a where over a mask made at import). The output has floor(scale *
// size) elements along an axis given scales, the sizes themselves (keep_aspect_ratio_policy
// applied) given sizes. Resize 10 and Upsample take asymmetric coordinates and the floor for
// nearest, as Upsample's reference (a repeat) does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
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
namespace resize_mapping {

// The node's interpolation settings.
struct ResizeMode {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

// One axis: output position i reads index[i * n + t] with weight[i * n + t], t < n;
// extrapolated[i] (tf_crop_and_resize) takes the extrapolation value instead.
struct AxisTaps {
  int64_t n = 0;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<bool> extrapolated;
};

double CubicWeight(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// The filter's weights for a source coordinate whose distance past the tap on its left is
// `ratio` (in (0, 1]), ONNX's reference's coefficient functions.
std::vector<double> Coefficients(const ResizeMode& m, double ratio, double scale) {
  if (m.mode == "nearest") {
    if (ratio == 1.0) return {0.0, 1.0};
    bool right = ratio > 0.5;  // round_prefer_floor
    if (m.nearest == "round_prefer_ceil") right = ratio >= 0.5;
    if (m.nearest == "floor") right = false;
    if (m.nearest == "ceil") right = true;
    return {right ? 0.0 : 1.0, right ? 1.0 : 0.0};
  }
  std::vector<double> c;
  const double s = std::min(scale, 1.0);
  if (m.mode == "linear" && !m.antialias) return {1 - ratio, ratio};
  if (m.mode == "linear") {
    const int64_t start = static_cast<int64_t>(std::floor(-1 / s)) + 1;
    for (int64_t i = start; i < start + 2 - 2 * start; ++i) {
      c.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
    }
  } else if (!m.antialias) {
    for (double x : {1 + ratio, ratio, 1 - ratio, 2 - ratio})
      c.push_back(CubicWeight(x, m.cubic_a));
    return c;
  } else {
    const int64_t start = static_cast<int64_t>(std::floor(-2 / s)) + 1;
    for (int64_t i = start; i < 2 - start; ++i) {
      c.push_back(CubicWeight(s * (static_cast<double>(i) - ratio), m.cubic_a));
    }
  }
  double sum = 0.0;
  for (double v : c) sum += v;
  for (double& v : c) v /= sum;
  return c;
}

// The source coordinate of output position y; sets *outside for tf_crop_and_resize's
// points past the input.
double SourceCoordinate(const ResizeMode& m, double y, double scale, int64_t in, int64_t out,
                        double roi_start, double roi_end, bool* outside) {
  const double width = scale * static_cast<double>(in);  // ONNX's output_width, unrounded
  const double last = static_cast<double>(in - 1);
  if (m.transform == "align_corners") return width == 1 ? 0.0 : y * last / (width - 1);
  if (m.transform == "asymmetric") return y / scale;
  if (m.transform == "tf_crop_and_resize") {
    double x = width == 1 ? (roi_end - roi_start) * last / 2
                          : y * (roi_end - roi_start) * last / (width - 1);
    x += roi_start * last;
    *outside = x < 0 || x > last;
    return x;
  }
  if (m.transform == "pytorch_half_pixel") return width == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (m.transform == "half_pixel_symmetric") {
    const double offset = static_cast<double>(in) / 2 * (1 - static_cast<double>(out) / width);
    return offset + (y + 0.5) / scale - 0.5;
  }
  return (y + 0.5) / scale - 0.5;  // half_pixel
}

AxisTaps TapsOf(const ResizeMode& m, int64_t in, int64_t out, double scale, double roi_start,
                double roi_end) {
  AxisTaps taps;
  for (int64_t i = 0; i < out; ++i) {
    bool outside = false;
    const double x =
        SourceCoordinate(m, static_cast<double>(i), scale, in, out, roi_start, roi_end, &outside);
    const double floor_x = std::floor(x);
    const double ratio = x == floor_x ? 1.0 : x - floor_x;
    std::vector<double> c = Coefficients(m, ratio, scale);
    const int64_t n = static_cast<int64_t>(c.size());
    taps.n = n;
    // The n taps nearest x, ties to the smaller index, in edge-padded coordinates.
    const int64_t pad = (n + 1) / 2;
    const double padded = x + static_cast<double>(pad);
    const double p = std::floor(padded);
    const double frac = padded - p;
    int64_t offset = 0;
    if (n % 2 == 0) {
      offset = frac == 0 ? -(n / 2) : -(n / 2) + 1;
    } else {
      offset = frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1;
    }
    const int64_t start = static_cast<int64_t>(p) + offset - pad;
    if (m.exclude_outside) {
      double sum = 0.0;
      for (int64_t t = 0; t < n; ++t) {
        if (start + t < 0 || start + t >= in) c[t] = 0.0;
        sum += c[t];
      }
      for (double& v : c) v /= sum == 0 ? 1.0 : sum;
    }
    for (int64_t t = 0; t < n; ++t) {
      taps.index.push_back(std::clamp<int64_t>(start + t, 0, in - 1));
      taps.weight.push_back(c[t]);
    }
    taps.extrapolated.push_back(outside);
  }
  return taps;
}

// A constant of `dtype` shaped [out, 1, ..., 1] (rank - axis dimensions) from `values`.
template <typename T>
HostTensor AlongAxis(DataType dtype, const std::vector<T>& values, int64_t rank, int64_t axis) {
  std::vector<int64_t> dims(static_cast<size_t>(rank - axis), 1);
  dims[0] = static_cast<int64_t>(values.size());
  HostTensor t = NewTensor(dtype, Shape(dims));
  (void)DispatchDtype(dtype, [&](auto tag) {
    using V = decltype(tag);
    for (size_t i = 0; i < values.size(); ++i) {
      HostStore<V>(t, static_cast<int64_t>(i), static_cast<V>(values[i]));
    }
    return 0;
  });
  return t;
}

// x resized along `axis` by `taps`.
absl::StatusOr<Value> ResizeAxis(NodeContext& ctx, const ResizeMode& m, const Value& x,
                                 int64_t axis, const AxisTaps& taps) {
  const int64_t rank = x.var().shape().rank();
  const DataType dtype = x.var().dtype();
  const int64_t out = static_cast<int64_t>(taps.extrapolated.size());
  // One tap per output position with weight 1 and the others 0: a gather alone.
  bool single = true;
  std::vector<int64_t> chosen(static_cast<size_t>(out), -1);
  for (int64_t i = 0; i < out && single; ++i) {
    for (int64_t t = 0; t < taps.n; ++t) {
      const double w = taps.weight[i * taps.n + t];
      if (w == 1.0 && chosen[i] < 0) {
        chosen[i] = taps.index[i * taps.n + t];
      } else if (w != 0.0) {
        single = false;
      }
    }
    single = single && chosen[i] >= 0 && !taps.extrapolated[i];
  }
  if (single) {
    HostTensor index = NewTensor(DataType::kI64, Shape({out}));
    for (int64_t i = 0; i < out; ++i) HostStore<int64_t>(index, i, chosen[i]);
    SLUICE_ASSIGN_OR_RETURN(Value idx, ImportConstant(ctx, "resize_index", std::move(index)));
    return Built(ctx, fn::Gather(x, idx, axis));
  }
  if (dtype != DataType::kF32 && dtype != DataType::kF64) {
    return ctx.Error(absl::StrCat("X is ", DataTypeName(dtype), "; ", m.mode,
                                  " interpolation takes FLOAT and DOUBLE only"));
  }
  std::optional<Value> sum;
  for (int64_t t = 0; t < taps.n; ++t) {
    std::vector<int64_t> index(static_cast<size_t>(out));
    std::vector<double> weight(static_cast<size_t>(out));
    bool any = false;
    for (int64_t i = 0; i < out; ++i) {
      index[i] = taps.index[i * taps.n + t];
      weight[i] = taps.extrapolated[i] ? 0.0 : taps.weight[i * taps.n + t];
      any = any || weight[i] != 0.0;
    }
    if (!any) continue;
    HostTensor idx_tensor = NewTensor(DataType::kI64, Shape({out}));
    for (int64_t i = 0; i < out; ++i) HostStore<int64_t>(idx_tensor, i, index[i]);
    SLUICE_ASSIGN_OR_RETURN(Value idx, ImportConstant(ctx, "resize_index", std::move(idx_tensor)));
    SLUICE_ASSIGN_OR_RETURN(
        Value w, ImportConstant(ctx, "resize_weight", AlongAxis(dtype, weight, rank, axis)));
    SLUICE_ASSIGN_OR_RETURN(Value g, Built(ctx, fn::Gather(x, idx, axis)));
    SLUICE_ASSIGN_OR_RETURN(Value term, Built(ctx, fn::Mul(g, w)));
    if (sum.has_value()) {
      SLUICE_ASSIGN_OR_RETURN(term, Built(ctx, fn::Add(*sum, term)));
    }
    sum = term;
  }
  if (!sum.has_value()) {  // every point extrapolated: zeros of the output's shape
    const Shape xs = x.var().shape();
    std::vector<int64_t> dims(xs.dims().begin(), xs.dims().end());
    dims[axis] = out;
    SLUICE_ASSIGN_OR_RETURN(sum, Built(ctx, fn::FillConstant(Shape(dims), 0.0, dtype)));
  }
  if (std::find(taps.extrapolated.begin(), taps.extrapolated.end(), true) !=
      taps.extrapolated.end()) {
    std::vector<bool> mask = taps.extrapolated;
    SLUICE_ASSIGN_OR_RETURN(
        Value where,
        ImportConstant(ctx, "resize_extrapolated", AlongAxis(DataType::kBool, mask, rank, axis)));
    SLUICE_ASSIGN_OR_RETURN(Value fill, ScalarConstant(ctx, m.extrapolation, dtype));
    SLUICE_ASSIGN_OR_RETURN(sum, Built(ctx, fn::Where(where, fill, *sum)));
  }
  return *sum;
}

absl::StatusOr<std::vector<double>> ConstantDoubles(const NodeContext& ctx, int i,
                                                    absl::string_view why) {
  SLUICE_ASSIGN_OR_RETURN(const HostTensor* t, ctx.ConstantInput(i, why));
  std::vector<double> out;
  SLUICE_RETURN_IF_ERROR(DispatchDtype(t->dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return ctx.Error(absl::StrCat(why, " must be numbers, not BOOL"));
    } else {
      for (int64_t k = 0; k < t->shape.NumElements(); ++k) {
        out.push_back(static_cast<double>(HostLoad<T>(*t, k)));
      }
      return absl::OkStatus();
    }
  }));
  return out;
}

bool Known(absl::string_view value, std::initializer_list<absl::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

// Scales (or sizes) per axis of x: `scales` holds one per listed axis, or every axis.
absl::Status Resize(NodeContext& ctx, const ResizeMode& m, Value x, std::vector<double> scales,
                    std::vector<int64_t> sizes, std::vector<int64_t> axes, std::vector<double> roi,
                    absl::string_view policy) {
  const Shape shape = x.var().shape();
  const int64_t rank = shape.rank();
  if (axes.empty()) {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  for (int64_t& a : axes) {
    SLUICE_ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, rank));
  }
  for (size_t k = 0; k < axes.size(); ++k) {
    if (std::find(axes.begin(), axes.begin() + static_cast<std::ptrdiff_t>(k), axes[k]) !=
        axes.begin() + static_cast<std::ptrdiff_t>(k)) {
      return ctx.Error(absl::StrCat("axes name axis ", axes[k], " twice"));
    }
    if (shape.dim(static_cast<int>(axes[k])) < 1) {
      return ctx.Error(absl::StrCat("axis ", axes[k], " of X ", shape.ToString(),
                                    " is empty; there is nothing to resize"));
    }
  }
  for (double v : roi) {
    if (!std::isfinite(v) || std::fabs(v) > double(int64_t{1} << 20)) {
      return ctx.Error(absl::StrCat("roi holds ", v,
                                    "; a region of interest must be finite "
                                    "and within +-2^20"));
    }
  }
  const size_t count = axes.size();
  if (scales.empty() == sizes.empty()) {
    return ctx.Error("exactly one of scales and sizes must be given");
  }
  if ((!scales.empty() && scales.size() != count) || (!sizes.empty() && sizes.size() != count)) {
    return ctx.Error(absl::StrCat("scales or sizes have ", std::max(scales.size(), sizes.size()),
                                  " values for ", count, " axes"));
  }
  if (!roi.empty() && roi.size() != 2 * count) {
    return ctx.Error(absl::StrCat("roi has ", roi.size(), " values; ", 2 * count, " expected"));
  }
  std::vector<int64_t> out(count);
  if (!sizes.empty()) {
    scales.resize(count);
    for (size_t k = 0; k < count; ++k) {
      if (sizes[k] < 1) return ctx.Error(absl::StrCat("sizes[", k, "] is ", sizes[k]));
      scales[k] = static_cast<double>(sizes[k]) / static_cast<double>(shape.dim(axes[k]));
      out[k] = sizes[k];
    }
    if (policy != "stretch") {
      const double s = policy == "not_larger" ? *std::min_element(scales.begin(), scales.end())
                                              : *std::max_element(scales.begin(), scales.end());
      for (size_t k = 0; k < count; ++k) {
        scales[k] = s;
        const double o = s * static_cast<double>(shape.dim(axes[k])) + 0.5;
        if (!(o >= 1) || o > static_cast<double>(int64_t{1} << 20)) {
          return ctx.Error(absl::StrCat("keep_aspect_ratio_policy ", policy, " gives axis ",
                                        axes[k], " ", o, " elements (1 to 2^20)"));
        }
        out[k] = static_cast<int64_t>(o);
      }
    }
  } else {
    for (size_t k = 0; k < count; ++k) {
      const double o = scales[k] * static_cast<double>(shape.dim(axes[k]));
      if (!(scales[k] > 0) || !(o >= 1) || o > static_cast<double>(int64_t{1} << 31)) {
        return ctx.Error(absl::StrCat("scales[", k, "] is ", scales[k], ": the output would have ",
                                      o, " elements along axis ", axes[k]));
      }
      out[k] = static_cast<int64_t>(o);
    }
  }
  for (size_t k = 0; k < count; ++k) {
    const int64_t in = shape.dim(axes[k]);
    const double roi_start = roi.empty() ? 0.0 : roi[k];
    const double roi_end = roi.empty() ? 1.0 : roi[count + k];
    if (out[k] > (int64_t{1} << 20)) {
      return ctx.Error(absl::StrCat("the output would have ", out[k], " elements along axis ",
                                    axes[k], " (at most 2^20)"));
    }
    if (scales[k] == 1.0 && out[k] == in &&
        (m.transform != "tf_crop_and_resize" || (roi_start == 0.0 && roi_end == 1.0))) {
      continue;  // this axis keeps its size and values
    }
    // Taps per output: at most 4, or about 4 / scale with antialias when downsampling.
    const double taps_per_output =
        m.antialias && scales[k] < 1.0 ? std::ceil(4.0 / scales[k]) + 4 : 4.0;
    if (taps_per_output * static_cast<double>(out[k]) > static_cast<double>(int64_t{1} << 24)) {
      return ctx.Error(absl::StrCat("resizing axis ", axes[k], " to ", out[k], " at scale ",
                                    scales[k], " takes more than 2^24 taps"));
    }
    const AxisTaps taps = TapsOf(m, in, out[k], scales[k], roi_start, roi_end);
    SLUICE_ASSIGN_OR_RETURN(x, ResizeAxis(ctx, m, x, axes[k], taps));
  }
  if (!ctx.state().IsBoundVar(x.var().name())) return ctx.SetOutput(0, x);
  SLUICE_ASSIGN_OR_RETURN(Value copy, Built(ctx, fn::Assign(x)));  // nothing resized
  return ctx.SetOutput(0, copy);
}

}  // namespace resize_mapping

absl::Status MapResize(NodeContext& ctx) {
  using namespace resize_mapping;  // NOLINT(build/namespaces): this file's helpers
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs(
      {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
       "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy", "scales"}));
  const bool upsample = ctx.node().op_type() == "Upsample";
  const bool legacy = upsample || ctx.opset() < 11;  // asymmetric, nearest by floor
  ResizeMode m;
  SLUICE_ASSIGN_OR_RETURN(m.mode, ctx.StringAttr("mode", "nearest"));
  if (!Known(m.mode, {"nearest", "linear", "cubic"}) || (m.mode == "cubic" && legacy)) {
    return ctx.Error(absl::StrCat("mode '", m.mode, "' is not one ONNX defines here"));
  }
  if (legacy) {
    m.transform = "asymmetric";
    m.nearest = "floor";
  } else {
    SLUICE_ASSIGN_OR_RETURN(m.transform,
                            ctx.StringAttr("coordinate_transformation_mode", "half_pixel"));
    SLUICE_ASSIGN_OR_RETURN(m.nearest, ctx.StringAttr("nearest_mode", "round_prefer_floor"));
    SLUICE_ASSIGN_OR_RETURN(m.cubic_a, ctx.FloatAttr("cubic_coeff_a", -0.75));
    SLUICE_ASSIGN_OR_RETURN(m.exclude_outside, ctx.FlagAttr("exclude_outside", false));
    SLUICE_ASSIGN_OR_RETURN(m.extrapolation, ctx.FloatAttr("extrapolation_value", 0.0));
    SLUICE_ASSIGN_OR_RETURN(m.antialias, ctx.FlagAttr("antialias", false));
  }
  if (!Known(m.transform, {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                           "align_corners", "asymmetric", "tf_crop_and_resize"})) {
    return ctx.Error(absl::StrCat("coordinate_transformation_mode '", m.transform, "' is unknown"));
  }
  if (!Known(m.nearest, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})) {
    return ctx.Error(absl::StrCat("nearest_mode '", m.nearest, "' is unknown"));
  }
  if (m.antialias && m.mode == "nearest") return ctx.Error("antialias applies to linear and cubic");
  SLUICE_ASSIGN_OR_RETURN(const std::string policy,
                          ctx.StringAttr("keep_aspect_ratio_policy", "stretch"));
  if (!Known(policy, {"stretch", "not_larger", "not_smaller"})) {
    return ctx.Error(absl::StrCat("keep_aspect_ratio_policy '", policy, "' is unknown"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.IntsAttr("axes", {}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
  if (upsample && ctx.opset() < 9) {
    const ::onnx::AttributeProto* attr = ctx.FindAttr("scales");
    if (attr == nullptr) return ctx.Error("attribute 'scales' is required");
    scales.assign(attr->floats().begin(), attr->floats().end());
  } else if (legacy) {
    SLUICE_ASSIGN_OR_RETURN(scales, ConstantDoubles(ctx, 1, "scales"));
  } else {
    // An empty scales tensor stands for an absent one (opset 11's form with sizes).
    if (ctx.HasInput(2)) {
      SLUICE_ASSIGN_OR_RETURN(scales, ConstantDoubles(ctx, 2, "scales"));
    }
    if (ctx.HasInput(3)) {
      SLUICE_ASSIGN_OR_RETURN(sizes, ctx.ConstantInts(3, "sizes"));
    }
    if (m.transform == "tf_crop_and_resize") {
      SLUICE_ASSIGN_OR_RETURN(roi, ConstantDoubles(ctx, 1, "roi"));
    }
  }
  return Resize(ctx, m, x, std::move(scales), std::move(sizes), std::move(axes), std::move(roi),
                policy);
}

}  // namespace sluice::framework::onnx::internal
