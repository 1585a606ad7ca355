// Helpers the convolution mappers share (conv_mappers.cc defines them; conv_mappers.cc and
// conv_transpose_mappers.cc use them): the image and attribute checks every conv-family node
// makes, and the reshapes that run a 1-D node as the 2-D op. Private to framework/onnx/.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_CONV_MAPPING_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_CONV_MAPPING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/shape.h"
#include "framework/builder/value.h"
#include "framework/onnx/internal/node_context.h"

namespace sluice::framework::onnx::internal::conv_mapping {

// X's static shape, checked to be [N, C, L] or [N, C, H, W], or (`volumes`: 3-D Conv and
// the pools) [N, C, D, H, W]; InvalidArgument naming the node and `name` otherwise.
absl::StatusOr<Shape> ImageShape(const NodeContext& ctx, const Value& x, absl::string_view name,
                                 bool volumes = false);

// Attribute `name` with `per_axis` entries per spatial axis (`spatial`), `fallback` (each)
// when absent.
absl::StatusOr<std::vector<int64_t>> PerAxis(const NodeContext& ctx, absl::string_view name,
                                             int spatial, int64_t fallback, int per_axis = 1);

// The node's kernel_shape, required when `from` (W's spatial dims) is empty, else checked
// to equal it.
absl::StatusOr<std::vector<int64_t>> KernelShape(const NodeContext& ctx, int spatial,
                                                 const std::vector<int64_t>& from);

// `v` of shape [N, C, L] as [N, C, 1, L]; 2-D shapes unchanged.
absl::StatusOr<Value> To2d(const NodeContext& ctx, const Value& v);

// A 2-D result back to the node's rank (`rank` 3: [N, C, 1, L] to [N, C, L]).
absl::StatusOr<Value> FromTo2d(const NodeContext& ctx, const Value& v, int rank);

}  // namespace sluice::framework::onnx::internal::conv_mapping

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_CONV_MAPPING_H_
