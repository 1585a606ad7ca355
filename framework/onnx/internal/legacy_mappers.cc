// Mappers for the forms the common ops had before NumPy broadcasting came in (opset 7; Max,
// Min, Sum and Mean: opset 8), as PyTorch's exporter wrote them at opset 6 (node_table.h).
//
// Add, Sub, Mul, Div and Pow broadcast B onto A only with attribute broadcast 1, and then
// only in the legacy way: B has one element, or B's dims line up with a run of A's dims
// starting at attribute `axis` (by default, A's last dims), each equal to A's or 1 (PyTorch
// wrote B [2, 1] at axis 0 for A [2, 3]; ONNX's 6 -> 7 version converter reads it so). That
// is B reshaped with trailing 1s and then broadcast NumPy's way, which the binary ops do.
// Opset 1's consumed_inputs (a hint for in-place buffers) is read as nothing.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace {

// InvalidArgument naming the node's attributes outside `known` (and, before opset 6,
// consumed_inputs).
absl::Status CheckAttrs(const NodeContext& ctx, std::initializer_list<absl::string_view> known) {
  std::vector<std::string> unknown;
  for (const ::onnx::AttributeProto& attr : ctx.node().attribute()) {
    if (ctx.opset() < 6 && attr.name() == "consumed_inputs") continue;
    if (absl::c_linear_search(known, attr.name())) continue;
    unknown.push_back(absl::StrCat("'", attr.name(), "'"));
  }
  if (unknown.empty()) return absl::OkStatus();
  return ctx.Error(absl::StrCat("attribute ", absl::StrJoin(unknown, ", "),
                                " is not supported by this importer"));
}

// B's dims made ready for NumPy's broadcasting onto A under the legacy rule: unchanged when
// attribute broadcast is 0 (they must be A's); with broadcast 1, [] for a B of one element
// (and rank at most A's), else B's dims (each A's dim at axis + i, or 1) followed by a 1 for
// each of A's dims after B's run. InvalidArgument naming the node when B does not align.
absl::StatusOr<std::vector<int64_t>> LegacyBDims(const NodeContext& ctx, const Shape& a,
                                                 const Shape& b) {
  SLUICE_ASSIGN_OR_RETURN(const bool broadcast, ctx.FlagAttr("broadcast", false));
  std::vector<int64_t> dims(b.dims().begin(), b.dims().end());
  if (!broadcast) {
    if (a != b) {
      return ctx.Error(absl::StrCat("B's shape ", b.ToString(), " differs from A's shape ",
                                    a.ToString(),
                                    " and attribute broadcast is not 1 (before opset 7, B "
                                    "broadcasts only with broadcast 1)"));
    }
    return dims;
  }
  if (b.rank() > a.rank()) {
    return ctx.Error(
        absl::StrCat("B's shape ", b.ToString(), " has more dims than A's shape ", a.ToString()));
  }
  if (b.NumElements() == 1) return std::vector<int64_t>{};
  int64_t axis = a.rank() - b.rank();
  if (ctx.HasAttr("axis")) {
    SLUICE_ASSIGN_OR_RETURN(axis, ctx.IntAttr("axis", axis));
    SLUICE_ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, a.rank()));
  }
  bool aligned = axis + b.rank() <= a.rank();
  for (int i = 0; aligned && i < b.rank(); ++i) {
    aligned = b.dim(i) == 1 || b.dim(i) == a.dim(static_cast<int>(axis) + i);
  }
  if (!aligned) {
    return ctx.Error(absl::StrCat(
        "B's shape ", b.ToString(), " does not line up with A's dims from axis ", axis,
        " (A's shape ", a.ToString(), "; before opset 7, each dim of B must be A's or 1)"));
  }
  dims.insert(dims.end(), static_cast<size_t>(a.rank() - axis - b.rank()), 1);
  return dims;
}

// Whether `from` broadcasts NumPy's way to `to` without changing it.
bool BroadcastsTo(const Shape& from, const Shape& to) {
  if (from.rank() > to.rank()) return false;
  for (int i = 1; i <= from.rank(); ++i) {
    const int64_t d = from.dim(from.rank() - i);
    if (d != 1 && d != to.dim(to.rank() - i)) return false;
  }
  return true;
}

absl::StatusOr<Value> Reshaped(const NodeContext& ctx, const Value& x,
                               const std::vector<int64_t>& dims) {
  const Shape now = x.var().shape();
  if (std::equal(now.dims().begin(), now.dims().end(), dims.begin(), dims.end())) return x;
  return Built(ctx, fn::Reshape(x, dims));
}

using BinaryFn = absl::StatusOr<Value> (*)(const Value&, const Value&);

BinaryFn LegacyBinaryOf(absl::string_view type) {
  if (type == "Add" || type == "Sum" || type == "Mean") return fn::Add;
  if (type == "Sub") return fn::Sub;
  if (type == "Mul") return fn::Mul;
  if (type == "Div") return fn::Div;
  if (type == "Max") return fn::Maximum;
  if (type == "Min") return fn::Minimum;
  return nullptr;
}

}  // namespace

absl::Status MapLegacyBinary(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAttrs(ctx, {"broadcast", "axis"}));
  if (ctx.num_inputs() != 2) return ctx.Error("needs two inputs");
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const InputType b_type, TypeOfInput(ctx, 1));
  SLUICE_ASSIGN_OR_RETURN(const std::vector<int64_t> b_dims,
                          LegacyBDims(ctx, a.var().shape(), b_type.shape));
  if (ctx.node().op_type() == "Pow") {
    // As at later opsets: Sluice's pow takes the exponent as a number.
    SLUICE_ASSIGN_OR_RETURN(const double exponent, ctx.ConstantScalar(1, "the exponent"));
    SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Pow(a, exponent)));
    return ctx.SetOutput(0, out);
  }
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(b, Reshaped(ctx, b, b_dims));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, LegacyBinaryOf(ctx.node().op_type())(a, b)));
  return ctx.SetOutput(0, out);
}

absl::Status MapLegacyVariadic(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAttrs(ctx, {}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<Value> xs, ctx.Inputs());
  if (xs.empty()) return ctx.Error("needs at least one input");
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].var().shape() != xs[0].var().shape()) {
      return ctx.Error(absl::StrCat("input ", i, "'s shape ", xs[i].var().shape().ToString(),
                                    " differs from input 0's ", xs[0].var().shape().ToString(),
                                    " (before opset 8 the inputs do not broadcast)"));
    }
  }
  const std::string& type = ctx.node().op_type();
  Value acc = xs[0];
  if (xs.size() == 1) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, fn::Assign(acc)));
  }
  for (size_t i = 1; i < xs.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, LegacyBinaryOf(type)(acc, xs[i])));
  }
  if (type == "Mean" && xs.size() > 1) {
    SLUICE_ASSIGN_OR_RETURN(acc, Built(ctx, fn::Scale(acc, 1.0 / static_cast<double>(xs.size()))));
  }
  return ctx.SetOutput(0, acc);
}

// Y = alpha * op(A) op(B) + beta * C. C is required; it must be [M, N], or, with attribute
// broadcast 1, broadcast to [M, N] NumPy's way (ONNX's Gemm 6 -> 7 version converter and its
// reference implementation read it so).
absl::Status MapLegacyGemm(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAttrs(ctx, {"alpha", "beta", "transA", "transB", "broadcast"}));
  SLUICE_ASSIGN_OR_RETURN(const double alpha, ctx.FloatAttr("alpha", 1.0));
  SLUICE_ASSIGN_OR_RETURN(const double beta, ctx.FloatAttr("beta", 1.0));
  SLUICE_ASSIGN_OR_RETURN(const bool trans_a, ctx.FlagAttr("transA", false));
  SLUICE_ASSIGN_OR_RETURN(const bool trans_b, ctx.FlagAttr("transB", false));
  SLUICE_ASSIGN_OR_RETURN(const bool broadcast, ctx.FlagAttr("broadcast", false));
  if (!ctx.HasInput(2)) return ctx.Error("input C is required before opset 7");
  SLUICE_ASSIGN_OR_RETURN(Value a, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(Value b, ctx.Input(1));
  if (a.var().shape().rank() != 2 || b.var().shape().rank() != 2) {
    return ctx.Error(absl::StrCat("A and B must be matrices; they have shapes ",
                                  a.var().shape().ToString(), " and ", b.var().shape().ToString()));
  }
  SLUICE_ASSIGN_OR_RETURN(Value y, Built(ctx, fn::Matmul(a, b, trans_a, trans_b)));
  const Shape mn = y.var().shape();
  SLUICE_ASSIGN_OR_RETURN(const InputType c_type, TypeOfInput(ctx, 2));
  if (broadcast ? !BroadcastsTo(c_type.shape, mn) : c_type.shape != mn) {
    return ctx.Error(absl::StrCat(
        "C's shape ", c_type.shape.ToString(), broadcast ? " does not broadcast to " : " is not ",
        "the product's shape ", mn.ToString(), broadcast ? "" : " (attribute broadcast is not 1)"));
  }
  if (alpha != 1.0) {
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Scale(y, alpha)));
  }
  if (beta != 0.0) {
    SLUICE_ASSIGN_OR_RETURN(Value c, ctx.Input(2));
    if (beta != 1.0) {
      SLUICE_ASSIGN_OR_RETURN(c, Built(ctx, fn::Scale(c, beta)));
    }
    SLUICE_ASSIGN_OR_RETURN(y, Built(ctx, fn::Add(y, c)));
  }
  return ctx.SetOutput(0, y);
}

// slope * X where X < 0, else X. The slope broadcasts to X NumPy's way, or, as ONNX's
// reference implementation reads the opset-6 form, a 1-D slope of d values applies along
// the one dim of X of size d (X's channels, for PyTorch's exports).
absl::Status MapLegacyPRelu(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(CheckAttrs(ctx, {}));
  SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(const InputType slope_type, TypeOfInput(ctx, 1));
  const Shape xs = x.var().shape();
  const Shape& ss = slope_type.shape;
  std::vector<int64_t> slope_dims(ss.dims().begin(), ss.dims().end());
  if (!BroadcastsTo(ss, xs)) {
    const absl::Span<const int64_t> x_dims = xs.dims();
    const int64_t matches = ss.rank() == 1 ? absl::c_count(x_dims, ss.dim(0)) : 0;
    if (matches != 1) {
      return ctx.Error(absl::StrCat("slope of shape ", ss.ToString(),
                                    " neither broadcasts to X's shape ", xs.ToString(),
                                    " nor matches exactly one of its dims"));
    }
    const auto axis = absl::c_find(x_dims, ss.dim(0)) - x_dims.begin();
    slope_dims.insert(slope_dims.end(), static_cast<size_t>(xs.rank() - axis - 1), 1);
  }
  SLUICE_ASSIGN_OR_RETURN(Value slope, ctx.Input(1));
  SLUICE_ASSIGN_OR_RETURN(slope, Reshaped(ctx, slope, slope_dims));
  SLUICE_ASSIGN_OR_RETURN(Value zero, ScalarConstant(ctx, 0.0, x.var().dtype()));
  SLUICE_ASSIGN_OR_RETURN(Value negative, Built(ctx, fn::LessThan(x, zero)));
  SLUICE_ASSIGN_OR_RETURN(Value scaled, Built(ctx, fn::Mul(x, slope)));
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::Where(negative, scaled, x)));
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
