// The ONNX node table: for each op type of the default domain this importer maps, the
// opsets whose semantics it implements and the mapper that appends the Sluice ops. One row
// per (op type, opset range); docs/onnx.md prints the table (`sluice import --list-ops`).
//
// A row's range starts at the opset that gave the op the meaning its mapper implements and
// ends at kNewestCheckedOpset when every later version only widened the op's data types (a
// type Sluice lacks is refused when the tensor is made, naming it).
//
// Functions over a constant table; thread-safe.
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "framework/onnx/internal/node_context.h"

namespace sluice::framework::onnx::internal {

// The newest opset whose changes were read against this table (ONNX 1.20's opset 28).
inline constexpr int64_t kNewestCheckedOpset = 28;

using NodeMapper = absl::Status (*)(NodeContext& ctx);

struct NodeMapping {
  absl::string_view op_type;
  int64_t first_opset;
  int64_t last_opset;
  NodeMapper map;
  absl::string_view limits;  // what the mapping refuses, for the docs ("" when nothing)
};

// Every row, grouped by op type.
absl::Span<const NodeMapping> NodeMappings();

// The row for the context's node and opset. Unimplemented naming the node when no row has
// its op type; InvalidArgument naming the node and the ranges this build maps when the op
// type is known at other opsets.
absl::StatusOr<const NodeMapping*> FindNodeMapping(const NodeContext& ctx);

// The mappers (elementwise_mappers.cc, shape_mappers.cc).
absl::Status MapBinary(NodeContext& ctx);    // Add Sub Mul Div, comparisons, logical ops
absl::Status MapVariadic(NodeContext& ctx);  // Sum Mean Max Min
absl::Status MapUnary(NodeContext& ctx);     // Relu Sigmoid Tanh Exp Log Sqrt Abs Neg Not ...
absl::Status MapPow(NodeContext& ctx);
absl::Status MapClip(NodeContext& ctx);
absl::Status MapCast(NodeContext& ctx);
absl::Status MapIdentity(NodeContext& ctx);  // Identity, Dropout in inference
absl::Status MapConstant(NodeContext& ctx);
absl::Status MapMatMul(NodeContext& ctx);
absl::Status MapGemm(NodeContext& ctx);
absl::Status MapSoftmax(NodeContext& ctx);  // Softmax, LogSoftmax
absl::Status MapReduce(NodeContext& ctx);   // ReduceSum, ReduceMean
absl::Status MapReshape(NodeContext& ctx);
absl::Status MapFlatten(NodeContext& ctx);
absl::Status MapSqueeze(NodeContext& ctx);  // Squeeze, Unsqueeze
absl::Status MapTranspose(NodeContext& ctx);
absl::Status MapConcat(NodeContext& ctx);
absl::Status MapSplit(NodeContext& ctx);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_NODE_TABLE_H_
