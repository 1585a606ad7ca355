// Shape rules of the norm family (batch_norm_infer, layer_norm and their grad ops), shared
// by the schemas' inference (ops/norm_ops.cc) and the kernels' operand checks (ops/cpu/
// norm_kernels.cc, ops/cuda/norm_op_kernels.cc), so that every device accepts exactly what
// the schema accepts. Errors are InvalidArgument messages without the "op '...': " prefix;
// the caller adds it. Stateless; any thread.
#ifndef SLUICE_OPS_INTERNAL_NORM_SHAPES_H_
#define SLUICE_OPS_INTERNAL_NORM_SHAPES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "ops/op_schema.h"

namespace sluice::ops::internal::norm {

// "Scale f32[3]".
inline std::string Describe(absl::string_view name, const TensorMeta& meta) {
  return absl::StrCat(name, " ", DataTypeName(meta.dtype), meta.shape.ToString());
}

// X of f32 or f64.
inline absl::Status RequireFloatX(const TensorMeta& x) {
  if (IsFloating(x.dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input ", Describe("X", x), " must be f32 or f64"));
}

// `have` (operand `name`) must be `want`, for the reason `why`.
inline absl::Status RequireMeta(absl::string_view name, const TensorMeta& have,
                                const TensorMeta& want, absl::string_view why) {
  if (have == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("input ", Describe(name, have), " must be ",
                                                 DataTypeName(want.dtype), want.shape.ToString(),
                                                 " (", why, ")"));
}

// ---- batch_norm_infer ----

// X [N, C, D1, ...] viewed as [outer, channels, inner]: outer = N, inner = D1 * ...; a rank-1
// X [N] has one channel (ONNX BatchNormalization).
struct BatchNormDims {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
};

inline absl::StatusOr<BatchNormDims> BatchNormShapes(const TensorMeta& x) {
  if (!IsFloating(x.dtype) || x.shape.rank() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input ", Describe("X", x), " must be f32 or f64 of rank >= 1 ([N, C, ...], or [N])"));
  }
  BatchNormDims d;
  d.outer = x.shape.dim(0);
  if (x.shape.rank() >= 2) {
    d.channels = x.shape.dim(1);
    for (int i = 2; i < x.shape.rank(); ++i) d.inner *= x.shape.dim(i);
  }
  return d;
}

// A per-channel operand (Scale, Bias, Mean, Var): X's dtype, shape [C].
inline absl::Status CheckChannelOperand(absl::string_view name, const TensorMeta& param,
                                        const TensorMeta& x, const BatchNormDims& d) {
  return RequireMeta(name, param, {x.dtype, Shape({d.channels})},
                     absl::StrCat("one value per channel of ", Describe("X", x)));
}

// ---- layer_norm ----

// X viewed as [rows, cols]: cols = the product of X's dims [axis, rank) (the normalized
// dims), rows the product of the others. Mean and InvStdDev have `stats`: X's dims before
// axis, then 1 for each normalized dim.
struct LayerNormDims {
  int axis = 0;  // non-negative
  int64_t rows = 1;
  int64_t cols = 1;
  Shape stats;
};

inline absl::StatusOr<LayerNormDims> LayerNormShapes(const TensorMeta& x, int64_t axis) {
  if (!IsFloating(x.dtype) || x.shape.rank() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", Describe("X", x), " must be f32 or f64 of rank >= 1"));
  }
  const int rank = x.shape.rank();
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(absl::StrCat("attribute 'axis' is ", axis, "; for ",
                                                   Describe("X", x), " it must be in [", -rank,
                                                   ", ", rank, ")"));
  }
  LayerNormDims d;
  d.axis = static_cast<int>(axis < 0 ? axis + rank : axis);
  Shape::Dims stats;
  for (int i = 0; i < rank; ++i) {
    if (i < d.axis) {
      d.rows *= x.shape.dim(i);
      stats.push_back(x.shape.dim(i));
    } else {
      d.cols *= x.shape.dim(i);
      stats.push_back(1);
    }
  }
  d.stats = Shape(absl::MakeConstSpan(stats));
  return d;
}

// Scale: X's dtype and X's dims [axis, rank), leading dims of 1 added or dropped ([4] and
// [1, 4] both fit dims [1, 4] or [4]). Its elements then lie in the order of a row of X.
inline absl::Status CheckScale(const TensorMeta& scale, const TensorMeta& x,
                               const LayerNormDims& d) {
  const auto trimmed = [](absl::Span<const int64_t> dims) {
    size_t first = 0;
    while (first < dims.size() && dims[first] == 1) ++first;
    return dims.subspan(first);
  };
  const absl::Span<const int64_t> normalized = x.shape.dims().subspan(d.axis);
  if (scale.dtype == x.dtype && trimmed(scale.shape.dims()) == trimmed(normalized)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("input ", Describe("Scale", scale), " must be ",
                                                 DataTypeName(x.dtype),
                                                 Shape(normalized).ToString(), " (the dims of ",
                                                 Describe("X", x), " from axis ", d.axis, " on)"));
}

}  // namespace sluice::ops::internal::norm

#endif  // SLUICE_OPS_INTERNAL_NORM_SHAPES_H_
