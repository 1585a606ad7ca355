// Small helpers the node mappers share. Private to framework/onnx/.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "framework/interpreter/host_tensor.h"
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

// [B, kv heads, S, size] -> [B, kv heads * reps, S, size], each head next to its copies (the
// key/value heads of grouped-query attention; attention_mappers.cc). At most 4096 copies.
absl::StatusOr<Value> RepeatHeads(const NodeContext& ctx, const Value& x, int64_t reps);

// log(1 + exp(x)) as relu(x) + log(1 + exp(-|x|)), ONNX Runtime's form: no overflow
// (activation_mappers.cc; Softplus, Mish and the recurrent ops' softplus).
absl::StatusOr<Value> StableSoftplus(const NodeContext& ctx, const Value& x);

// The mappers that compose existing ops (composite_mappers.cc):
// A rank-0 `value` of `dtype` (a fill_constant op), for the binary ops to broadcast.
absl::StatusOr<Value> ScalarConstant(const NodeContext& ctx, double value, DataType dtype);
// `value`, computed at import (a mask, an index table), as a persistable the program reads,
// as an initializer becomes; named after the node's first output and `what`.
absl::StatusOr<Value> ImportConstant(NodeContext& ctx, absl::string_view what, HostTensor value);
// Input i's dtype and static shape, without making a constant input a persistable (for an
// input only its type is read from: CastLike's target_type, EyeLike's input).
struct InputType {
  DataType dtype;
  Shape shape;
};
absl::StatusOr<InputType> TypeOfInput(NodeContext& ctx, int i);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_MAPPER_UTIL_H_
