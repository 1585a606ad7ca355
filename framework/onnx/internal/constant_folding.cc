// Constant folding at import (node_table.h): Sluice programs are static, so the shape
// arithmetic that exporters emit (PyTorch's Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape) is computed here on the host, exactly, and its results become constants that
// later nodes read as attributes. Plain loops over HostTensor bytes; FLOAT, DOUBLE, INT32,
// INT64 and BOOL where the op allows them. Integer arithmetic wraps, as ONNX Runtime's does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
namespace {

// Outputs the pre-mapper hook folds: larger ones stay ops over persistable inputs.
constexpr int64_t kHookMaxElements = 4096;
// Outputs the constant-only ops (no kernel) fold to at most; larger is refused.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;

// `v` as To, as ONNX's Cast converts; InvalidArgument for a NaN or out-of-range float to an
// integer (C++ leaves that undefined; the cast kernel then computes it at run time).
template <typename To, typename From>
absl::StatusOr<To> Convert(const NodeContext& ctx, From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    constexpr double kBound = static_cast<double>(std::numeric_limits<To>::max()) + 1.0;
    if (!(v > -kBound - 1.0 && v < kBound)) {
      return ctx.Error(absl::StrCat("cannot fold the cast of ", v, " to an integer"));
    }
    return static_cast<To>(v);
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    if (std::isfinite(v) && std::abs(v) > std::numeric_limits<float>::max()) {
      return v > 0 ? std::numeric_limits<float>::infinity()
                   : -std::numeric_limits<float>::infinity();
    }
    return static_cast<float>(v);
  } else {
    return static_cast<To>(v);  // integer narrowing wraps (C++20)
  }
}

// a + b, a - b or a * b (op '+', '-', '*'); integers wrap modulo 2^bits.
template <typename T>
T Wrapped(char op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    const U ua = static_cast<U>(a), ub = static_cast<U>(b);
    return static_cast<T>(op == '+' ? ua + ub : op == '-' ? ua - ub : ua * ub);
  } else {
    return op == '+' ? a + b : op == '-' ? a - b : a * b;
  }
}

// a op b for op Add Sub Mul Div (Wrapped); an integer division by zero or of the lowest
// value by -1 is InvalidArgument.
template <typename T>
absl::StatusOr<T> Arithmetic(const NodeContext& ctx, absl::string_view op, T a, T b) {
  if (op == "Add") return Wrapped('+', a, b);
  if (op == "Sub") return Wrapped('-', a, b);
  if (op == "Mul") return Wrapped('*', a, b);
  if constexpr (std::is_integral_v<T>) {
    if (b == 0 || (b == -1 && a == std::numeric_limits<T>::lowest())) {
      return ctx.Error(absl::StrCat("cannot fold the integer division ", a, " / ", b));
    }
  }
  return static_cast<T>(a / b);
}

// The comparison `op` (Equal Less LessOrEqual Greater GreaterOrEqual) of a and b.
template <typename T>
bool Compare(absl::string_view op, T a, T b) {
  if (op == "Equal") return a == b;
  if (op == "Less") return a < b;
  if (op == "LessOrEqual") return a <= b;
  if (op == "Greater") return a > b;
  return a >= b;
}

bool IsComparison(absl::string_view op) {
  return op == "Equal" || op == "Less" || op == "LessOrEqual" || op == "Greater" ||
         op == "GreaterOrEqual";
}

// Add Sub Mul Div Max Min (not BOOL), a comparison (numbers; Equal also BOOL) or And Or Xor
// (BOOL) of two constants of one dtype, NumPy broadcasting. Max and Min give NaN where either
// operand is NaN.
absl::StatusOr<HostTensor> FoldBinary(NodeContext& ctx, int64_t limit) {
  const std::string& op = ctx.node().op_type();
  const HostTensor& a = FoldInput(ctx, 0);
  const HostTensor& b = FoldInput(ctx, 1);
  if (a.dtype != b.dtype) return ctx.Error("the operands' data types differ");
  const bool compare = IsComparison(op);
  const bool logical = op == "And" || op == "Or" || op == "Xor";
  if ((a.dtype == DataType::kBool) != logical && !(op == "Equal" && a.dtype == DataType::kBool)) {
    return ctx.Error("operands of the wrong data type");
  }
  absl::StatusOr<Shape> broadcast = BroadcastShapes(a.shape, b.shape);
  if (!broadcast.ok()) return ctx.Error(broadcast.status().message());
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, broadcast->dims(), limit));
  const std::vector<int64_t> ia = BroadcastIndex(a.shape, shape);
  const std::vector<int64_t> ib = BroadcastIndex(b.shape, shape);
  HostTensor out = NewTensor(compare || logical ? DataType::kBool : a.dtype, shape);
  SLUICE_RETURN_IF_ERROR(DispatchDtype(a.dtype, [&](auto tag) -> absl::Status {
    using T = decltype(tag);
    for (size_t i = 0; i < ia.size(); ++i) {
      const T x = HostLoad<T>(a, ia[i]);
      const T y = HostLoad<T>(b, ib[i]);
      if constexpr (std::is_same_v<T, bool>) {
        HostStore<bool>(out, i,
                        op == "And"   ? x && y
                        : op == "Or"  ? x || y
                        : op == "Xor" ? x != y
                                      : x == y);
      } else if (compare) {
        HostStore<bool>(out, i, Compare<T>(op, x, y));
      } else if (op == "Max" || op == "Min") {
        T v = op == "Max" ? std::max(x, y) : std::min(x, y);
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(x) || std::isnan(y)) v = std::numeric_limits<T>::quiet_NaN();
        }
        HostStore<T>(out, i, v);
      } else {
        SLUICE_ASSIGN_OR_RETURN(T v, Arithmetic<T>(ctx, op, x, y));
        HostStore<T>(out, i, v);
      }
    }
    return absl::OkStatus();
  }));
  return out;
}

// not x for a BOOL x.
absl::StatusOr<HostTensor> FoldNot(NodeContext& ctx, int64_t limit) {
  const HostTensor& x = FoldInput(ctx, 0);
  if (x.dtype != DataType::kBool) return ctx.Error("Not of a non-BOOL operand");
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, x.shape.dims(), limit).status());
  HostTensor out = NewTensor(DataType::kBool, x.shape);
  for (int64_t i = 0; i < x.shape.NumElements(); ++i) {
    HostStore<bool>(out, i, !HostLoad<bool>(x, i));
  }
  return out;
}

// -x for a numeric x; integers wrap (the lowest value stays itself).
absl::StatusOr<HostTensor> FoldNeg(NodeContext& ctx, int64_t limit) {
  const HostTensor& x = FoldInput(ctx, 0);
  if (x.dtype == DataType::kBool) return ctx.Error("a BOOL operand");
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, x.shape.dims(), limit).status());
  HostTensor out = NewTensor(x.dtype, x.shape);
  DispatchDtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < x.shape.NumElements(); ++i) {
        HostStore<T>(out, i, Wrapped<T>('-', T(0), HostLoad<T>(x, i)));
      }
    }
  });
  return out;
}

// x converted to attribute `to` element by element (Convert).
absl::StatusOr<HostTensor> FoldCast(NodeContext& ctx, int64_t limit) {
  const HostTensor& x = FoldInput(ctx, 0);
  if (!ctx.HasAttr("to")) return ctx.Error("attribute 'to' is required");
  SLUICE_ASSIGN_OR_RETURN(int64_t to, ctx.IntAttr("to", 0));
  absl::StatusOr<DataType> dtype = DtypeOfOnnxType(static_cast<int32_t>(to), "the cast's type");
  if (!dtype.ok()) return ctx.Error(dtype.status().message());
  SLUICE_RETURN_IF_ERROR(FoldedShape(ctx, x.shape.dims(), limit).status());
  HostTensor out = NewTensor(*dtype, x.shape);
  SLUICE_RETURN_IF_ERROR(DispatchDtype(x.dtype, [&](auto from_tag) -> absl::Status {
    return DispatchDtype(*dtype, [&](auto to_tag) -> absl::Status {
      using From = decltype(from_tag);
      using To = decltype(to_tag);
      for (int64_t i = 0; i < x.shape.NumElements(); ++i) {
        SLUICE_ASSIGN_OR_RETURN(To v, (Convert<To, From>(ctx, HostLoad<From>(x, i))));
        HostStore<To>(out, i, v);
      }
      return absl::OkStatus();
    });
  }));
  return out;
}

// start + i * delta for i < max(ceil((limit - start) / delta), 0), exactly for integers.
absl::StatusOr<HostTensor> FoldRange(NodeContext& ctx, int64_t limit) {
  const DataType dtype = FoldInput(ctx, 0).dtype;
  for (int i = 0; i < 3; ++i) {
    const HostTensor& v = FoldInput(ctx, i);
    if (v.dtype != dtype || v.shape.NumElements() != 1 || dtype == DataType::kBool) {
      return ctx.Error("start, limit and delta must be scalars of one numeric data type");
    }
  }
  return DispatchDtype(dtype, [&](auto tag) -> absl::StatusOr<HostTensor> {
    using T = decltype(tag);
    const T start = HostLoad<T>(FoldInput(ctx, 0), 0), end = HostLoad<T>(FoldInput(ctx, 1), 0);
    const T delta = HostLoad<T>(FoldInput(ctx, 2), 0);
    if (delta == T(0)) return ctx.Error("delta is 0");
    int64_t n = 0;
    if constexpr (std::is_same_v<T, bool>) {
      return ctx.Error("BOOL is not a Range type");
    } else if constexpr (std::is_integral_v<T>) {
      // |end - start| and |delta| as unsigned: exact for every pair of values.
      const uint64_t span = delta > 0 ? (end > start ? uint64_t(end) - uint64_t(start) : 0)
                                      : (start > end ? uint64_t(start) - uint64_t(end) : 0);
      const uint64_t magnitude = delta > 0 ? uint64_t(delta) : 0 - uint64_t(delta);
      const uint64_t count = span / magnitude + (span % magnitude != 0 ? 1 : 0);
      if (count > static_cast<uint64_t>(limit)) return ctx.Error("the range is too long to fold");
      n = static_cast<int64_t>(count);
    } else {
      const double count = std::ceil(static_cast<double>(end - start) / double(delta));
      if (!(count <= static_cast<double>(limit))) {
        return ctx.Error("the range is not finite or too long to fold");
      }
      n = count > 0 ? static_cast<int64_t>(count) : 0;
    }
    HostTensor out = NewTensor(DataTypeOf<T>(), Shape{n});
    if constexpr (!std::is_same_v<T, bool>) {
      for (int64_t i = 0; i < n; ++i) {
        HostStore<T>(out, i, Wrapped<T>('+', start, Wrapped<T>('*', static_cast<T>(i), delta)));
      }
    }
    return out;
  });
}

// How many leading inputs the fold-only op type `op` requires.
int RequiredInputs(absl::string_view op, int64_t opset) {
  if (op == "Slice") return opset < 10 ? 1 : 3;
  if (op == "Where" || op == "Range") return 3;
  return op == "Gather" || op == "Expand" ? 2 : 1;
}

// InvalidArgument naming the attributes of the node that its op type does not have (or
// this importer does not read).
absl::Status CheckAttrs(const NodeContext& ctx) {
  const std::string& op = ctx.node().op_type();
  if (op == "Cast") return ctx.OnlyAttrs({"to", "saturate", "round_mode"});
  if (op == "Concat" || op == "Gather") return ctx.OnlyAttrs({"axis"});
  if (op == "Reshape") return ctx.OnlyAttrs({"allowzero"});
  if (op == "Squeeze" || op == "Unsqueeze") return ctx.OnlyAttrs({"axes"});
  if (op == "Slice" && ctx.opset() < 10) return ctx.OnlyAttrs({"starts", "ends", "axes"});
  if (op == "Range") return ctx.OnlyAttrs({"stash_type"});  // FLOAT16 and BFLOAT16 only
  return ctx.OnlyAttrs({});
}

// The node's value from its constant inputs, at most `limit` elements; InvalidArgument
// naming the node when its inputs or attributes are invalid or it does not fold.
absl::StatusOr<HostTensor> FoldConstantNode(NodeContext& ctx, int64_t limit) {
  const std::string& op = ctx.node().op_type();
  SLUICE_RETURN_IF_ERROR(CheckAttrs(ctx));
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min" ||
      op == "And" || op == "Or" || op == "Xor" || IsComparison(op)) {
    if (ctx.num_inputs() != 2 || !ctx.HasInput(0) || !ctx.HasInput(1)) {
      return ctx.Error("needs two inputs");
    }
    return FoldBinary(ctx, limit);
  }
  if (ctx.num_inputs() == 0 || !ctx.HasInput(0)) return ctx.Error("input 0 is required");
  if (op == "Neg") return FoldNeg(ctx, limit);
  if (op == "Not") return FoldNot(ctx, limit);
  if (op == "Cast") return FoldCast(ctx, limit);
  if (op == "Concat") return FoldConcat(ctx, limit);
  if (op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity") {
    return FoldReshapeLike(ctx, limit);
  }
  const int needed = RequiredInputs(op, ctx.opset());
  for (int i = 0; i < needed; ++i) {
    if (!ctx.HasInput(i)) return ctx.Error(absl::StrCat("input ", i, " is required"));
  }
  if (op == "Gather") return FoldGather(ctx, limit);
  if (op == "Slice") return FoldSlice(ctx, limit);
  if (op == "Where" || op == "Expand") return FoldWhereOrExpand(ctx, limit);
  if (op == "Range") return FoldRange(ctx, limit);
  return ctx.Error("this op type does not fold");
}

}  // namespace

// See node_table.h: folds only op types with a mapper of their own, up to 4096 elements.
absl::StatusOr<bool> TryFoldConstants(NodeContext& ctx) {
  static constexpr absl::string_view kFolded[] = {
      "Add",       "And",     "Cast",        "Concat",
      "Div",       "Equal",   "Greater",     "GreaterOrEqual",
      "Identity",  "Less",    "LessOrEqual", "Max",
      "Min",       "Mul",     "Neg",         "Not",
      "Or",        "Reshape", "Squeeze",     "Sub",
      "Unsqueeze", "Xor"};
  const std::string& op = ctx.node().op_type();
  if (std::find(std::begin(kFolded), std::end(kFolded), op) == std::end(kFolded) ||
      ctx.num_outputs() != 1 || !AllInputsConstant(ctx)) {
    return false;
  }
  // Before NumPy broadcasting (legacy_mappers.cc's rows), inputs of different shapes need
  // attribute broadcast, which no fold reads: the mapper aligns or refuses them.
  const absl::StatusOr<const NodeMapping*> row = FindNodeMapping(ctx);
  if (row.ok() && ((*row)->map == MapLegacyBinary || (*row)->map == MapLegacyVariadic)) {
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (!ctx.HasInput(0) || !ctx.HasInput(i)) return false;
      if (FoldInput(ctx, i).shape != FoldInput(ctx, 0).shape) return false;
    }
  }
  // Anything that does not fold (a bad node, a cast C++ leaves undefined, an integer
  // division by zero) is left to the op's mapper, which reports or computes it.
  absl::StatusOr<HostTensor> folded = FoldConstantNode(ctx, kHookMaxElements);
  if (!folded.ok()) return false;
  ctx.SetConstantOutput(0, *std::move(folded));
  return true;
}

// Folds the node (up to 2^24 elements) or names the input that is not a constant.
absl::Status MapFoldOnly(NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.HasInput(i) && ctx.state().Constant(ctx.node().input(i)) == nullptr) {
      return ctx.Error(absl::StrCat(ctx.node().op_type(),
                                    " is supported only on constant inputs (no kernel yet): "
                                    "input ",
                                    i, " '", ctx.node().input(i), "' is computed at run time"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(HostTensor value, FoldConstantNode(ctx, kMaxFoldedElements));
  ctx.SetConstantOutput(0, std::move(value));
  return absl::OkStatus();
}

// Shape (start and end clamped to [0, rank]) or Size of the input's static shape.
absl::Status MapShape(NodeContext& ctx) {
  const bool size = ctx.node().op_type() == "Size";
  SLUICE_RETURN_IF_ERROR(size ? ctx.OnlyAttrs({}) : ctx.OnlyAttrs({"start", "end"}));
  if (!ctx.HasInput(0)) return ctx.Error("input 0 is required");
  Shape shape;
  if (const HostTensor* constant = ctx.state().Constant(ctx.node().input(0))) {
    shape = constant->shape;
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value x, ctx.Input(0));
    shape = x.var().shape();
  }
  if (size) {
    HostTensor count = NewTensor(DataType::kI64, Shape());
    HostStore<int64_t>(count, 0, shape.NumElements());
    ctx.SetConstantOutput(0, std::move(count));
    return absl::OkStatus();
  }
  const int64_t rank = shape.rank();
  SLUICE_ASSIGN_OR_RETURN(int64_t start, ctx.IntAttr("start", 0));
  SLUICE_ASSIGN_OR_RETURN(int64_t end, ctx.IntAttr("end", rank));
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(shape.dim(static_cast<int>(i)));
  const auto n = static_cast<int64_t>(dims.size());
  ctx.SetConstantOutput(0, HostTensor::FromVector(dims, Shape{n}));
  return absl::OkStatus();
}

// The value attribute (default FLOAT 0) repeated to the constant shape.
absl::Status MapConstantOfShape(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"value"}));
  SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInts(0, "the shape"));
  HostTensor value = HostTensor::FromVector(std::vector<float>{0.0f}, Shape{1});
  if (const ::onnx::AttributeProto* attr = ctx.FindAttr("value")) {
    if (attr->type() != ::onnx::AttributeProto::TENSOR) {
      return ctx.Error("attribute 'value' must be a TENSOR");
    }
    absl::StatusOr<HostTensor> parsed = HostTensorOfProto(attr->t());
    if (!parsed.ok()) return ctx.Error(parsed.status().message());
    value = *std::move(parsed);
  }
  if (value.shape.NumElements() != 1) return ctx.Error("attribute 'value' must hold one value");
  SLUICE_ASSIGN_OR_RETURN(Shape shape, FoldedShape(ctx, dims, INT64_MAX));
  if (shape.NumElements() <= kHookMaxElements) {
    HostTensor out = NewTensor(value.dtype, shape);
    for (int64_t i = 0; i < shape.NumElements(); ++i) CopyElement(value, 0, out, i);
    ctx.SetConstantOutput(0, std::move(out));
    return absl::OkStatus();
  }
  double fill = 0.0;
  if (value.dtype == DataType::kI64) {
    const int64_t v = HostLoad<int64_t>(value, 0);
    if (v > (int64_t{1} << 53) || v < -(int64_t{1} << 53)) {
      return ctx.Error(absl::StrCat("the value ", v, " is not exact as a fill_constant value ",
                                    "(beyond 2^53) and the output is too large to fold"));
    }
    fill = static_cast<double>(v);
  } else {
    fill = DispatchDtype(value.dtype,
                         [&](auto tag) { return double(HostLoad<decltype(tag)>(value, 0)); });
  }
  SLUICE_ASSIGN_OR_RETURN(Value out, Built(ctx, fn::FillConstant(shape, fill, value.dtype)));
  return ctx.SetOutput(0, out);
}

}  // namespace sluice::framework::onnx::internal
