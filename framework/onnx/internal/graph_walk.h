// Mapping a list of ONNX nodes, in order, into the program's current block: the loop that
// the top-level graph and every subgraph (If's branches, Loop's body) share. Private to
// framework/onnx/.
//
// Functions only; thread-compatible (one import, one thread).
#ifndef SLUICE_FRAMEWORK_ONNX_INTERNAL_GRAPH_WALK_H_
#define SLUICE_FRAMEWORK_ONNX_INTERNAL_GRAPH_WALK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "framework/onnx/internal/node_context.h"
#include "onnx/onnx_pb.h"

namespace sluice::framework::onnx::internal {

// Whether `domain` names ONNX's default domain ("" or "ai.onnx").
bool IsDefaultOnnxDomain(const std::string& domain);

// Binds `graph`'s initializers (a subgraph may have its own) as constants; InvalidArgument
// naming one that cannot be read, or when the graph has sparse initializers.
absl::Status BindInitializers(const ::onnx::GraphProto& graph, GraphState& state);

// Maps `graph`'s nodes in order through the node table (constant folding first), checking
// each output's shape against ONNX's inference where GraphState has it. A node of another
// domain is Unimplemented naming it. Its initializers must be bound already.
absl::Status MapGraphNodes(const ::onnx::GraphProto& graph, int64_t opset, GraphState& state);

}  // namespace sluice::framework::onnx::internal

#endif  // SLUICE_FRAMEWORK_ONNX_INTERNAL_GRAPH_WALK_H_
