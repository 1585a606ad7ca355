// Shape rules of the nn family (matmul, reductions, softmax, cross entropy), shared by the
// schemas' inference (ops/nn_ops.cc) and the host kernels' operand checks
// (ops/cpu/nn_kernels.cc), so both accept exactly the same operands. Errors are
// InvalidArgument messages without the "op '...': " prefix; the caller adds it.
#ifndef SLUICE_OPS_CPU_NN_SHAPE_RULES_H_
#define SLUICE_OPS_CPU_NN_SHAPE_RULES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "ops/op_schema.h"
#include "vm/attrs.h"

namespace sluice::ops::internal::nn {

// "X f32[2, 3]".
inline std::string Describe(absl::string_view name, const TensorMeta& meta) {
  return absl::StrCat(name, " ", DataTypeName(meta.dtype), meta.shape.ToString());
}

// A 0/1 attribute such as transpose_x or keepdim.
inline absl::StatusOr<bool> FlagAttr(const vm::AttrMap& attrs, absl::string_view name) {
  absl::StatusOr<int64_t> value = attrs.GetInt(name);
  if (!value.ok()) return absl::InvalidArgumentError(value.status().message());
  if (*value != 0 && *value != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute '", name, "' must be 0 or 1, got ", *value));
  }
  return *value == 1;
}

// Leading dims of a shape (all but the last `drop`).
inline Shape LeadingDims(const Shape& shape, int drop) {
  return Shape(shape.dims().subspan(0, shape.rank() - drop));
}

// matmul: Out[..., m, n] = op(X)[..., m, k] * op(Y)[..., k, n], where op transposes the
// last two dims when the flag is set and the batch dims broadcast numpy-style.
struct MatmulDims {
  int64_t m = 0;
  int64_t k = 0;
  int64_t n = 0;
  Shape batch;  // the broadcast batch dims
  Shape out;    // batch + [m, n]
};

inline absl::StatusOr<MatmulDims> MatmulShapes(const TensorMeta& x, const TensorMeta& y,
                                               bool transpose_x, bool transpose_y) {
  const auto both = [&] {
    return absl::StrCat(Describe("X", x), " (transpose_x=", transpose_x ? 1 : 0, ") and ",
                        Describe("Y", y), " (transpose_y=", transpose_y ? 1 : 0, ")");
  };
  if (x.dtype != y.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(both(), " have different dtypes"));
  }
  if (!IsFloating(x.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(both(), ": matmul takes f32 or f64"));
  }
  if (x.shape.rank() < 2 || y.shape.rank() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(both(), ": both need rank >= 2 (reshape a vector to [1, n] or [n, 1])"));
  }
  const Shape& xs = x.shape;
  const Shape& ys = y.shape;
  MatmulDims d;
  d.m = transpose_x ? xs.dim(xs.rank() - 1) : xs.dim(xs.rank() - 2);
  d.k = transpose_x ? xs.dim(xs.rank() - 2) : xs.dim(xs.rank() - 1);
  const int64_t yk = transpose_y ? ys.dim(ys.rank() - 1) : ys.dim(ys.rank() - 2);
  d.n = transpose_y ? ys.dim(ys.rank() - 2) : ys.dim(ys.rank() - 1);
  if (d.k != yk) {
    return absl::InvalidArgumentError(
        absl::StrCat(both(), ": inner dims differ, X gives k=", d.k, " but Y gives k=", yk));
  }
  absl::StatusOr<Shape> batch = BroadcastShapes(LeadingDims(xs, 2), LeadingDims(ys, 2));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(both(), ": batch dims do not broadcast (", batch.status().message(), ")"));
  }
  d.batch = *batch;
  Shape::Dims out(d.batch.dims().begin(), d.batch.dims().end());
  out.push_back(d.m);
  out.push_back(d.n);
  d.out = Shape(absl::MakeConstSpan(out));
  return d;
}

// An axis in [-rank, rank), normalized to [0, rank).
inline absl::StatusOr<int> NormalizeAxis(int64_t axis, const TensorMeta& x,
                                         absl::string_view what) {
  const int rank = x.shape.rank();
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " is out of range for ", Describe(what, x), " of rank ", rank,
                     rank == 0 ? " (a scalar has no axes)"
                               : absl::StrCat(" (valid: ", -rank, "..", rank - 1, ")")));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// reduce_sum / reduce_mean: which axes of X are reduced (empty `axes`: all), the output
// shape (reduced dims dropped, or kept as 1 with keepdim) and the elements per output.
struct ReduceDims {
  std::vector<bool> reduced;  // per axis of X
  Shape out;
  int64_t count = 1;  // product of the reduced dims
};

inline absl::StatusOr<ReduceDims> ReduceShapes(const TensorMeta& x,
                                               const std::vector<int64_t>& axes, bool keepdim) {
  const int rank = x.shape.rank();
  ReduceDims d;
  d.reduced.assign(rank, axes.empty());
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", axis, " in axes [", absl::StrJoin(axes, ", "),
                       "] is out of range for ", Describe("X", x), " of rank ", rank,
                       rank == 0 ? "" : absl::StrCat(" (valid: ", -rank, "..", rank - 1, ")")));
    }
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    if (d.reduced[a]) {
      return absl::InvalidArgumentError(absl::StrCat("axis ", a, " appears twice in axes [",
                                                     absl::StrJoin(axes, ", "), "] for ",
                                                     Describe("X", x), " of rank ", rank));
    }
    d.reduced[a] = true;
  }
  Shape::Dims out;
  for (int i = 0; i < rank; ++i) {
    if (d.reduced[i]) {
      d.count *= x.shape.dim(i);
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(x.shape.dim(i));
    }
  }
  d.out = Shape(absl::MakeConstSpan(out));
  return d;
}

inline absl::StatusOr<ReduceDims> ReduceShapesFromAttrs(const TensorMeta& x,
                                                        const vm::AttrMap& attrs) {
  absl::StatusOr<std::vector<int64_t>> axes = attrs.GetInts("axes");
  if (!axes.ok()) return absl::InvalidArgumentError(axes.status().message());
  absl::StatusOr<bool> keepdim = FlagAttr(attrs, "keepdim");
  if (!keepdim.ok()) return keepdim.status();
  return ReduceShapes(x, *axes, *keepdim);
}

// X viewed as [outer, axis dim, inner] around one axis.
struct AxisView {
  int64_t outer = 1;
  int64_t dim = 1;
  int64_t inner = 1;
};

inline AxisView ViewAroundAxis(const Shape& shape, int axis) {
  AxisView v;
  for (int i = 0; i < shape.rank(); ++i) {
    if (i < axis) v.outer *= shape.dim(i);
    if (i > axis) v.inner *= shape.dim(i);
  }
  v.dim = shape.dim(axis);
  return v;
}

// softmax_with_cross_entropy: Logits [..., C] (float), Label [..., 1] (i64); the class axis
// must be the last. Returns C; the rows are Logits' elements / C. The grad op checks its
// Softmax input the same way (`logits_name` "Softmax").
inline absl::StatusOr<int64_t> CrossEntropyShapes(const TensorMeta& logits, const TensorMeta& label,
                                                  int64_t axis,
                                                  absl::string_view logits_name = "Logits") {
  if (!IsFloating(logits.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(logits_name, logits), " must be f32 or f64"));
  }
  absl::StatusOr<int> a = NormalizeAxis(axis, logits, logits_name);
  if (!a.ok()) return a.status();
  if (*a != logits.shape.rank() - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("axis ", axis, " of ", Describe(logits_name, logits),
                     " is not the last axis; only the last axis is supported"));
  }
  if (label.dtype != DataType::kI64) {
    return absl::InvalidArgumentError(absl::StrCat(Describe("Label", label),
                                                   " must be i64 (hard class indices) for ",
                                                   Describe(logits_name, logits)));
  }
  Shape::Dims want(logits.shape.dims().begin(), logits.shape.dims().end());
  want.back() = 1;
  if (label.shape != Shape(absl::MakeConstSpan(want))) {
    return absl::InvalidArgumentError(absl::StrCat(Describe("Label", label), " must have shape ",
                                                   Shape(absl::MakeConstSpan(want)).ToString(),
                                                   " for ", Describe(logits_name, logits)));
  }
  return logits.shape.dim(logits.shape.rank() - 1);
}

}  // namespace sluice::ops::internal::nn

#endif  // SLUICE_OPS_CPU_NN_SHAPE_RULES_H_
