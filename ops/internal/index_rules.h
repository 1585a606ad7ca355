// Shape rules of the index family (gather, slice, where and their grads; ops/index_ops.cc),
// shared by the schemas' inference, the host kernels (ops/cpu/index_kernels.cc) and the cuda
// kernels (ops/cuda/index_op_kernels.cc), so that every device accepts exactly the operands
// the schema does and reads the same elements. Errors are InvalidArgument messages without
// the "op '...': " prefix (the caller adds it) that name the operand or attribute at fault.
//
// Functions over values; thread-safe.
#ifndef SLUICE_OPS_INTERNAL_INDEX_RULES_H_
#define SLUICE_OPS_INTERNAL_INDEX_RULES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/shape.h"
#include "ops/op_schema.h"
#include "vm/attrs.h"

namespace sluice::ops::internal::index {

// "X f32[2, 3]": an operand as the messages name it.
std::string Describe(absl::string_view name, const TensorMeta& meta);

// gather: Out[o, k, i] = X[o, Index[k], i], X viewed as [outer, size, inner] around the axis
// and Index flattened to `count` entries; Out's shape is X.shape[:axis] + Index.shape +
// X.shape[axis + 1:].
struct GatherDims {
  int axis = 0;  // in [0, rank)
  int64_t outer = 1;
  int64_t size = 0;
  int64_t inner = 1;
  int64_t count = 0;
  Shape out;
};
// X of any dtype and rank >= 1, Index of i32 or i64 and any shape, `axis` in [-rank, rank).
absl::StatusOr<GatherDims> GatherShapes(const TensorMeta& x, const TensorMeta& index, int64_t axis);

// An index of gather is valid in [-size, size) (negative ones count from the end, as ONNX's
// Gather): its position along `size`, or -1 when it is out of range.
inline int64_t ResolveIndex(int64_t value, int64_t size) {
  if (value < -size || value >= size) return -1;
  return value < 0 ? value + size : value;
}
// The run-time error of an index out of range: "Index[3] = 7 is out of range [-5, 5) for
// axis 1 of X".
std::string BadIndexMessage(int64_t position, int64_t value, int64_t size, int axis);

// slice: Out[j_0, ..., j_r] = X[first_0 + j_0 step_0, ..., first_r + j_r step_r].
struct SliceDims {
  Shape out;
  Shape::Dims first;  // per dim of X: the first index read (0 where the dim is not sliced)
  Shape::Dims step;   // per dim of X: 1 where the dim is not sliced; never 0
};
// From the attributes starts and ends (required, one entry per sliced axis), axes (empty: 0,
// 1, ... for as many entries) and steps (empty: all 1), with ONNX's Slice semantics: negative
// starts and ends count from the end, then they are clamped to [0, dim] going forward and to
// [0, dim - 1] (start) and [-1, dim - 1] (end) going backward (a negative step). Axes may be
// negative and must not repeat; a step must not be 0. X of any dtype.
absl::StatusOr<SliceDims> SliceShapes(const TensorMeta& x, const vm::AttrMap& attrs);

// where: Cond bool; X and Y of one dtype; Out the NumPy broadcast of the three shapes.
absl::StatusOr<Shape> WhereShape(const TensorMeta& cond, const TensorMeta& x, const TensorMeta& y);

}  // namespace sluice::ops::internal::index

#endif  // SLUICE_OPS_INTERNAL_INDEX_RULES_H_
