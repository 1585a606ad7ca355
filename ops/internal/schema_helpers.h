// Small building blocks the op families share when they declare schemas: common inference
// rules and attribute readers that report errors the way InferContext does.
#ifndef SLUICE_OPS_INTERNAL_SCHEMA_HELPERS_H_
#define SLUICE_OPS_INTERNAL_SCHEMA_HELPERS_H_

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "ops/op_schema.h"

namespace sluice::ops::internal {

// Out has the dtype and shape of input slot `slot` (its first tensor).
InferFn SameAsInput(int slot = 0);

// The "shape" attribute (non-negative dims) and the "dtype" attribute ("f32", ...).
absl::StatusOr<Shape> ShapeAttr(const InferContext& ctx, absl::string_view name = "shape");
absl::StatusOr<DataType> DtypeAttr(const InferContext& ctx, absl::string_view name = "dtype");

// "f32[2, 3]": a tensor's dtype and shape, as error messages name them.
std::string MetaText(const TensorMeta& m);

// InvalidArgument unless `meta` has a floating dtype (f32/f64).
absl::Status RequireFloat(const InferContext& ctx, const TensorMeta& meta, absl::string_view what);

// `value`, or its error as the op's (a shape rule's error, "op 'matmul': ...").
template <typename V>
absl::StatusOr<V> InOp(const InferContext& ctx, absl::StatusOr<V> value) {
  if (!value.ok()) return ctx.Error(value.status().message());
  return value;
}

// A one-output result.
inline std::vector<std::vector<TensorMeta>> Single(TensorMeta meta) { return {{std::move(meta)}}; }

// GradOpDesc from slot lists: {{"X", {...}}, ...}.
GradOpDesc GradOp(std::string type,
                  std::vector<std::pair<std::string, std::vector<std::string>>> inputs,
                  std::vector<std::pair<std::string, std::vector<std::string>>> outputs,
                  vm::AttrMap attrs = {});

// The forward op's attributes `names` (those it has), for its grad op.
vm::AttrMap GradAttrs(const GradContext& g, std::initializer_list<const char*> names);

}  // namespace sluice::ops::internal

#endif  // SLUICE_OPS_INTERNAL_SCHEMA_HELPERS_H_
