// ONNX GridSample (opsets 16 and 20 on, 2-D and 3-D) as a composition (node_table.h). The grid
// is a value computed at run time, so every step is an op on it:
//
//   per spatial axis a (the grid's last dimension lists the axes innermost first):
//     v      = the grid's coordinate, denormalized: (g + 1) / 2 * (D - 1) with
//              align_corners, else ((g + 1) * D - 1) / 2; rounded half to even (nearest)
//     v      = outside [lo, hi] (-0.5 and D - 0.5, or 0 and D - 1 with align_corners):
//              clamped to [0, D - 1] (border) or reflected into [lo, hi] (reflection)
//     taps   = v itself (nearest), floor(v) + {0, 1} with weights 1 - f, f (linear), or
//              floor(v) + {-1, 0, 1, 2} with Keys' cubic weights of f (cubic), f = v - floor(v)
//     a tap outside [0, D - 1] reads 0 (zeros), the nearest edge (border) or its reflection
//   Y = the sum over every combination of the axes' taps of the product of their weights
//       times X gathered at their positions: X is viewed as [N * D1 * ... * DS, C] rows, each
//       combination one gather of rows by a flat index computed in int64.
//
// ONNX's reference interpolates one axis at a time; this sums the products in another order,
// so results agree to rounding. Refused, naming the node: other ranks, other modes.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
// File-local helpers, in a namespace of their own: a unity build compiles this file with the
// other mappers.
namespace grid_sample_mapping {

enum class Padding { kZeros, kBorder, kReflection };

// One tap along an axis: its position (a float tensor of whole numbers) and weight (null:
// 1).
struct Tap {
  Value position;
  std::optional<Value> weight;
};

// Builds the elementwise ops over tensors of the grid's shape [N, O...].
class Ops {
 public:
  Ops(NodeContext& ctx, DataType dtype) : ctx_(ctx), dtype_(dtype) {}

  absl::StatusOr<Value> Const(double v) { return ScalarConstant(ctx_, v, dtype_); }
  absl::StatusOr<Value> Affine(const Value& x, double scale, double bias) {
    return Built(ctx_, fn::Scale(x, scale, bias));
  }
  absl::StatusOr<Value> Floor(const Value& x) { return Built(ctx_, fn::Floor(x)); }
  absl::StatusOr<Value> Round(const Value& x) { return Built(ctx_, fn::Round(x)); }
  absl::StatusOr<Value> Clip(const Value& x, double lo, double hi) {
    return Built(ctx_, fn::Clip(x, lo, hi));
  }
  absl::StatusOr<Value> Add(const Value& x, const Value& y) { return Built(ctx_, fn::Add(x, y)); }
  absl::StatusOr<Value> Sub(const Value& x, const Value& y) { return Built(ctx_, fn::Sub(x, y)); }
  absl::StatusOr<Value> Mul(const Value& x, const Value& y) { return Built(ctx_, fn::Mul(x, y)); }
  absl::StatusOr<Value> Where(const Value& c, const Value& x, const Value& y) {
    return Built(ctx_, fn::Where(c, x, y));
  }
  // x < lo or x > hi.
  absl::StatusOr<Value> Outside(const Value& x, double lo, double hi) {
    SLUICE_ASSIGN_OR_RETURN(Value l, Const(lo));
    SLUICE_ASSIGN_OR_RETURN(Value h, Const(hi));
    SLUICE_ASSIGN_OR_RETURN(Value below, Built(ctx_, fn::LessThan(x, l)));
    SLUICE_ASSIGN_OR_RETURN(Value above, Built(ctx_, fn::GreaterThan(x, h)));
    return Built(ctx_, fn::LogicalOr(below, above));
  }
  // x reflected into [lo, hi] by the nearer border until inside (ONNX's _gs_reflect); x where
  // already inside.
  absl::StatusOr<Value> Reflect(const Value& x, double lo, double hi) {
    const double range = hi - lo;
    SLUICE_ASSIGN_OR_RETURN(Value outside, Outside(x, lo, hi));
    if (range <= 0) {  // one position: everything reflects onto it
      SLUICE_ASSIGN_OR_RETURN(Value at, Const(lo));
      return Where(outside, at, x);
    }
    SLUICE_ASSIGN_OR_RETURN(Value l, Const(lo));
    SLUICE_ASSIGN_OR_RETURN(Value below, Built(ctx_, fn::LessThan(x, l)));
    SLUICE_ASSIGN_OR_RETURN(Value from_lo, Affine(x, -1.0, lo));  // lo - x
    SLUICE_ASSIGN_OR_RETURN(Value from_hi, Affine(x, 1.0, -hi));  // x - hi
    SLUICE_ASSIGN_OR_RETURN(Value dx, Where(below, from_lo, from_hi));
    SLUICE_ASSIGN_OR_RETURN(Value turns, Affine(dx, 1.0 / range, 0.0));
    SLUICE_ASSIGN_OR_RETURN(turns, Floor(turns));
    SLUICE_ASSIGN_OR_RETURN(Value whole, Affine(turns, range, 0.0));
    SLUICE_ASSIGN_OR_RETURN(Value r, Sub(dx, whole));
    SLUICE_ASSIGN_OR_RETURN(Value half, Affine(turns, 0.5, 0.0));
    SLUICE_ASSIGN_OR_RETURN(half, Floor(half));
    SLUICE_ASSIGN_OR_RETURN(half, Affine(half, 2.0, 0.0));
    SLUICE_ASSIGN_OR_RETURN(Value parity, Sub(turns, half));
    SLUICE_ASSIGN_OR_RETURN(Value zero, Const(0.0));
    SLUICE_ASSIGN_OR_RETURN(Value even, Built(ctx_, fn::Equal(parity, zero)));
    // lo + r when (below and even) or (above and odd), else hi - r.
    SLUICE_ASSIGN_OR_RETURN(Value odd_turn, Built(ctx_, fn::LogicalXor(below, even)));
    SLUICE_ASSIGN_OR_RETURN(Value up, Affine(r, 1.0, lo));
    SLUICE_ASSIGN_OR_RETURN(Value down, Affine(r, -1.0, hi));
    SLUICE_ASSIGN_OR_RETURN(Value reflected, Where(odd_turn, down, up));
    return Where(outside, reflected, x);
  }
  // Keys' cubic weight (a = -0.75) at distance |t| (t in [0, 2]), `t` a tensor.
  absl::StatusOr<Value> Cubic(const Value& t, bool near) {
    constexpr double a = -0.75;
    SLUICE_ASSIGN_OR_RETURN(Value t2, Mul(t, t));
    SLUICE_ASSIGN_OR_RETURN(Value t3, Mul(t2, t));
    // near (|t| <= 1): (a + 2) t^3 - (a + 3) t^2 + 1; far: a t^3 - 5a t^2 + 8a t - 4a.
    SLUICE_ASSIGN_OR_RETURN(Value c3, Affine(t3, near ? a + 2 : a, 0.0));
    SLUICE_ASSIGN_OR_RETURN(Value c2, Affine(t2, near ? -(a + 3) : -5 * a, near ? 1.0 : -4 * a));
    SLUICE_ASSIGN_OR_RETURN(Value sum, Add(c3, c2));
    if (near) return sum;
    SLUICE_ASSIGN_OR_RETURN(Value c1, Affine(t, 8 * a, 0.0));
    return Add(sum, c1);
  }

 private:
  NodeContext& ctx_;
  DataType dtype_;
};

// The taps of one spatial axis of size `size` for the coordinates `g` (the grid's, [N, O...]).
absl::StatusOr<std::vector<Tap>> AxisTaps(Ops& ops, const Value& g, int64_t size,
                                          const std::string& mode, Padding padding,
                                          bool align_corners) {
  const double d = static_cast<double>(size);
  SLUICE_ASSIGN_OR_RETURN(Value v, align_corners ? ops.Affine(g, (d - 1) / 2, (d - 1) / 2)
                                                 : ops.Affine(g, d / 2, (d - 1) / 2));
  if (mode == "nearest") {
    SLUICE_ASSIGN_OR_RETURN(v, ops.Round(v));
  }
  const double lo = align_corners ? 0.0 : -0.5, hi = align_corners ? d - 1 : d - 0.5;
  if (padding == Padding::kBorder) {
    SLUICE_ASSIGN_OR_RETURN(Value outside, ops.Outside(v, lo, hi));
    SLUICE_ASSIGN_OR_RETURN(Value clamped, ops.Clip(v, 0.0, d - 1));
    SLUICE_ASSIGN_OR_RETURN(v, ops.Where(outside, clamped, v));
  } else if (padding == Padding::kReflection) {
    SLUICE_ASSIGN_OR_RETURN(v, ops.Reflect(v, lo, hi));
  }
  std::vector<Tap> taps;
  if (mode == "nearest") {
    taps.push_back({v, std::nullopt});
    return taps;
  }
  SLUICE_ASSIGN_OR_RETURN(Value base, ops.Floor(v));
  SLUICE_ASSIGN_OR_RETURN(Value f, ops.Sub(v, base));
  if (mode == "linear") {
    SLUICE_ASSIGN_OR_RETURN(Value w0, ops.Affine(f, -1.0, 1.0));
    SLUICE_ASSIGN_OR_RETURN(Value next, ops.Affine(base, 1.0, 1.0));
    taps.push_back({base, w0});
    taps.push_back({next, f});
    return taps;
  }
  // cubic: taps base - 1 .. base + 2 at distances f + 1, f, 1 - f, 2 - f.
  const double offsets[4] = {-1, 0, 1, 2};
  for (int i = 0; i < 4; ++i) {
    SLUICE_ASSIGN_OR_RETURN(
        Value distance, i < 2 ? ops.Affine(f, 1.0, -offsets[i]) : ops.Affine(f, -1.0, offsets[i]));
    SLUICE_ASSIGN_OR_RETURN(Value w, ops.Cubic(distance, i == 1 || i == 2));
    SLUICE_ASSIGN_OR_RETURN(Value position, ops.Affine(base, 1.0, offsets[i]));
    taps.push_back({position, w});
  }
  return taps;
}

}  // namespace grid_sample_mapping

absl::Status MapGridSample(NodeContext& ctx) {
  using namespace grid_sample_mapping;  // NOLINT(build/namespaces): this file's helpers
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"align_corners", "mode", "padding_mode"}));
  SLUICE_ASSIGN_OR_RETURN(const bool align_corners, ctx.FlagAttr("align_corners", false));
  SLUICE_ASSIGN_OR_RETURN(std::string mode,
                          ctx.StringAttr("mode", ctx.opset() < 20 ? "bilinear" : "linear"));
  if (mode == "bilinear") mode = "linear";  // opset 16's names
  if (mode == "bicubic") mode = "cubic";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return ctx.Error(absl::StrCat("mode '", mode, "' is not nearest, linear or cubic"));
  }
  SLUICE_ASSIGN_OR_RETURN(const std::string padding_name, ctx.StringAttr("padding_mode", "zeros"));
  Padding padding = Padding::kZeros;
  if (padding_name == "border") {
    padding = Padding::kBorder;
  } else if (padding_name == "reflection") {
    padding = Padding::kReflection;
  } else if (padding_name != "zeros") {
    return ctx.Error(
        absl::StrCat("padding_mode '", padding_name, "' is not zeros, border or reflection"));
  }
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value grid, ctx.Input(1));
  const Shape xs = x.var().shape(), gs = grid.var().shape();
  const int64_t spatial = xs.rank() - 2;
  const DataType dtype = x.var().dtype();
  if ((spatial != 2 && spatial != 3) || gs.rank() != xs.rank() || gs.dim(0) != xs.dim(0) ||
      gs.dim(gs.rank() - 1) != spatial) {
    return ctx.Error(absl::StrCat("X ", xs.ToString(), " and grid ", gs.ToString(),
                                  " must be [N, C, D...] and [N, O..., ", spatial,
                                  "] with 2 or 3 spatial axes"));
  }
  if ((dtype != DataType::kF32 && dtype != DataType::kF64) || grid.var().dtype() != dtype) {
    return ctx.Error("X and grid must both be FLOAT or both DOUBLE");
  }
  const int64_t n = xs.dim(0), c = xs.dim(1);
  int64_t positions = 1;  // per image
  for (int64_t a = 0; a < spatial; ++a) positions *= xs.dim(static_cast<int>(2 + a));
  std::vector<int64_t> out_dims = {n};  // [N, O...]
  for (int i = 1; i + 1 < gs.rank(); ++i) out_dims.push_back(gs.dim(i));
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, {n}, int64_t{1} << 24).status());  // image_row

  Ops ops(ctx, dtype);
  // Per axis its taps; the grid's coordinate for spatial axis a is entry spatial - 1 - a.
  std::vector<std::vector<Tap>> taps(static_cast<size_t>(spatial));
  for (int64_t a = 0; a < spatial; ++a) {
    const int64_t entry = spatial - 1 - a;
    SLUICE_ASSIGN_OR_RETURN(Value g,
                            Built(ctx, fn::Slice(grid, {entry}, {entry + 1}, {gs.rank() - 1})));
    SLUICE_ASSIGN_OR_RETURN(g, Built(ctx, fn::Reshape(g, out_dims)));
    SLUICE_ASSIGN_OR_RETURN(
        taps[a], AxisTaps(ops, g, xs.dim(static_cast<int>(2 + a)), mode, padding, align_corners));
  }
  // X as rows [N * positions, C].
  std::vector<int64_t> perm = {0};
  for (int64_t a = 0; a < spatial; ++a) perm.push_back(2 + a);
  perm.push_back(1);
  SLUICE_ASSIGN_OR_RETURN(Value rows, Built(ctx, fn::Transpose(x, perm)));
  SLUICE_ASSIGN_OR_RETURN(rows, Built(ctx, fn::Reshape(rows, {n * positions, c})));
  // Each image's first row, [N, 1, ...], as an int64 constant.
  std::vector<int64_t> base_dims(out_dims.size(), 1);
  base_dims[0] = n;
  HostTensor base = NewTensor(DataType::kI64, Shape(base_dims));
  for (int64_t i = 0; i < n; ++i) HostStore<int64_t>(base, i, i * positions);
  SLUICE_ASSIGN_OR_RETURN(Value image_row, ImportConstant(ctx, "image_row", std::move(base)));

  // Each tap's int64 index into its axis (clamped; NaN as 0) and weight (times 0 where a
  // zeros-padded tap falls outside).
  struct Ready {
    Value index;
    std::optional<Value> weight;
  };
  std::vector<std::vector<Ready>> ready(static_cast<size_t>(spatial));
  for (int64_t a = 0; a < spatial; ++a) {
    const double d = static_cast<double>(xs.dim(static_cast<int>(2 + a)));
    for (const Tap& t : taps[a]) {
      Value p = t.position;
      std::optional<Value> w = t.weight;
      if (padding == Padding::kZeros) {
        SLUICE_ASSIGN_OR_RETURN(Value outside, ops.Outside(p, 0.0, d - 1));
        SLUICE_ASSIGN_OR_RETURN(Value zero, ops.Const(0.0));
        SLUICE_ASSIGN_OR_RETURN(Value one, ops.Const(1.0));
        SLUICE_ASSIGN_OR_RETURN(Value keep, ops.Where(outside, zero, one));
        if (w.has_value()) {
          SLUICE_ASSIGN_OR_RETURN(keep, ops.Mul(*w, keep));
        }
        w = keep;
      } else if (padding == Padding::kReflection) {
        SLUICE_ASSIGN_OR_RETURN(
            p, ops.Reflect(p, align_corners ? 0.0 : -0.5, align_corners ? d - 1 : d - 0.5));
      }
      SLUICE_ASSIGN_OR_RETURN(Value nan, Built(ctx, fn::NotEqual(p, p)));
      SLUICE_ASSIGN_OR_RETURN(Value zero, ops.Const(0.0));
      SLUICE_ASSIGN_OR_RETURN(p, ops.Where(nan, zero, p));
      SLUICE_ASSIGN_OR_RETURN(p, Built(ctx, fn::Clip(p, 0.0, d - 1)));
      SLUICE_ASSIGN_OR_RETURN(Value index, Built(ctx, fn::Cast(p, DataType::kI64)));
      ready[a].push_back({index, w});
    }
  }
  // Every combination of the axes' taps: a gather of rows by the flat index, times the
  // product of the weights.
  std::optional<Value> sum;
  std::vector<size_t> pick(static_cast<size_t>(spatial), 0);
  for (bool more = true; more;) {
    Value flat = image_row;
    std::optional<Value> weight;
    int64_t stride = positions;
    for (int64_t a = 0; a < spatial; ++a) {
      stride /= xs.dim(static_cast<int>(2 + a));
      const Ready& r = ready[a][pick[a]];
      Value term = r.index;
      if (stride != 1) {
        SLUICE_ASSIGN_OR_RETURN(Value s,
                                ScalarConstant(ctx, static_cast<double>(stride), DataType::kI64));
        SLUICE_ASSIGN_OR_RETURN(term, Built(ctx, fn::Mul(term, s)));
      }
      SLUICE_ASSIGN_OR_RETURN(flat, Built(ctx, fn::Add(flat, term)));
      if (r.weight.has_value()) {
        if (weight.has_value()) {
          SLUICE_ASSIGN_OR_RETURN(weight, ops.Mul(*weight, *r.weight));
        } else {
          weight = r.weight;
        }
      }
    }
    SLUICE_ASSIGN_OR_RETURN(Value picked, Built(ctx, fn::Gather(rows, flat, 0)));  // [N, O..., C]
    if (weight.has_value()) {
      std::vector<int64_t> wd = out_dims;
      wd.push_back(1);
      SLUICE_ASSIGN_OR_RETURN(Value w, Built(ctx, fn::Reshape(*weight, wd)));
      SLUICE_ASSIGN_OR_RETURN(picked, ops.Mul(picked, w));
    }
    if (sum.has_value()) {
      SLUICE_ASSIGN_OR_RETURN(picked, ops.Add(*sum, picked));
    }
    sum = picked;
    // The next combination (the last axis fastest).
    more = false;
    for (int64_t a = spatial - 1; a >= 0; --a) {
      if (++pick[a] < ready[a].size()) {
        more = true;
        break;
      }
      pick[a] = 0;
    }
  }
  // [N, O..., C] -> [N, C, O...].
  std::vector<int64_t> back = {0, static_cast<int64_t>(out_dims.size())};
  for (size_t i = 1; i < out_dims.size(); ++i) back.push_back(static_cast<int64_t>(i));
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Transpose(*sum, back)));
  return ctx.SetOutput(0, y);
}

}  // namespace sluice::framework::onnx::internal
