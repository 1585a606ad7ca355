// Small helpers the node mappers share. Private to framework/onnx/.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "framework/onnx/internal/node_context.h"

namespace sluice::framework::onnx::internal {

// `built` (a builder call's result), or its error prefixed with the node's description, so
// that a shape the builder refuses names the ONNX node it came from.
template <typename T>
absl::StatusOr<T> Built(const NodeContext& ctx, absl::StatusOr<T> built) {
  if (built.ok()) return built;
  return ctx.Error(built.status().message());
}

// `axis` in [-rank, rank) made non-negative; InvalidArgument naming the node otherwise.
absl::StatusOr<int64_t> NormalizeAxis(const NodeContext& ctx, int64_t axis, int64_t rank);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_
