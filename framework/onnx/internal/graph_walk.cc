#include "framework/onnx/internal/graph_walk.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/onnx/internal/node_table.h"
#include "framework/onnx/internal/tensor_proto.h"

namespace sluice::framework::onnx::internal {
namespace {

// Checks each output the node defined against ONNX's inferred shape, when there is one.
absl::Status CrossCheckShapes(const NodeContext& ctx, GraphState& state,
                              const absl::flat_hash_map<std::string, Shape>* inferred) {
  if (inferred == nullptr) return absl::OkStatus();
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.WantsOutput(i)) continue;
    const std::string& name = ctx.node().output(i);
    auto it = inferred->find(name);
    if (it == inferred->end()) continue;
    Shape shape;
    if (const HostTensor* constant = state.Constant(name)) {
      shape = constant->shape;
    } else {
      SLUICE_ASSIGN_OR_RETURN(Var var, state.VarOf(name));
      shape = var.shape();
    }
    if (shape != it->second) {
      return absl::InternalError(absl::StrCat(ctx.Describe(), ": output '", name, "' has shape ",
                                              shape.ToString(), " here but ", it->second.ToString(),
                                              " by ONNX's shape inference (an importer bug)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool IsDefaultOnnxDomain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

absl::Status BindInitializers(const ::onnx::GraphProto& graph, GraphState& state) {
  for (const auto& init : graph.initializer()) {
    absl::StatusOr<HostTensor> value = HostTensorOfProto(init);
    if (!value.ok()) return absl::InvalidArgumentError(value.status().message());
    state.BindConstant(init.name(), *std::move(value));
  }
  if (graph.sparse_initializer_size() > 0) {
    return absl::InvalidArgumentError("sparse initializers are not supported");
  }
  return absl::OkStatus();
}

absl::Status MapGraphNodes(const ::onnx::GraphProto& graph, int64_t opset, GraphState& state) {
  for (const auto& node : graph.node()) {
    NodeContext ctx(node, opset, &state);
    if (!IsDefaultOnnxDomain(node.domain())) {
      return absl::UnimplementedError(absl::StrCat(ctx.Describe(), ": domain '", node.domain(),
                                                   "' is not supported (only the default "
                                                   "ONNX domain is)"));
    }
    SLUICE_ASSIGN_OR_RETURN(const NodeMapping* mapping, FindNodeMapping(ctx));
    // Shape arithmetic on constants becomes a constant (TryFoldConstants).
    SLUICE_ASSIGN_OR_RETURN(const bool folded, TryFoldConstants(ctx));
    if (!folded) SLUICE_RETURN_IF_ERROR(mapping->map(ctx));
    SLUICE_RETURN_IF_ERROR(CrossCheckShapes(ctx, state, state.inferred_shapes()));
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::onnx::internal
