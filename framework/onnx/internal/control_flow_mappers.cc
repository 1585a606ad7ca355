// Mappers for ONNX's control flow (node_table.h): If becomes a `cond` and Loop a `while`
// (framework/builder/control_flow.h), their subgraphs mapped into the sub-blocks through the
// same node walk as the top-level graph (graph_walk.h).
//
// An If whose condition is a constant at import is its taken branch, inlined.
//
// Subgraphs read outer values by name, as sub-blocks capture them. Sluice's control flow is
// static: both branches of an If yield the same dtypes and shapes, and a Loop's carried
// values keep theirs; anything else is refused naming the node.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/functional_ops.h"
#include "framework/onnx/internal/graph_walk.h"
#include "framework/onnx/internal/host_fold.h"
#include "framework/onnx/internal/mapper_util.h"
#include "framework/onnx/internal/node_table.h"

namespace sluice::framework::onnx::internal {
namespace {

// The graph attribute `name`; InvalidArgument naming the node when absent.
absl::StatusOr<const ::onnx::GraphProto*> GraphAttr(const NodeContext& ctx,
                                                    absl::string_view name) {
  const ::onnx::AttributeProto* attr = ctx.FindAttr(name);
  if (attr == nullptr || attr->type() != ::onnx::AttributeProto::GRAPH) {
    return ctx.Error(absl::StrCat("attribute '", name, "' (a graph) is required"));
  }
  return &attr->g();
}

// A bool tensor of one element as a scalar (a cond's predicate, a loop's condition).
absl::StatusOr<Value> BoolScalar(const NodeContext& ctx, const Value& v, absl::string_view what) {
  const Var& var = v.var();
  if (var.dtype() != DataType::kBool || var.shape().NumElements() != 1) {
    return ctx.Error(absl::StrCat(what, " must be one bool, not ", DataTypeName(var.dtype()),
                                  var.shape().ToString()));
  }
  if (var.shape().rank() == 0) return v;
  return Built(ctx, fn::Reshape(v, {}));
}

// Maps `graph`'s nodes into the current block and returns its outputs' values.
absl::StatusOr<std::vector<Value>> MapSubgraph(NodeContext& ctx, const ::onnx::GraphProto& graph) {
  SLUICE_RETURN_IF_ERROR(BindInitializers(graph, ctx.state()));
  SLUICE_RETURN_IF_ERROR(MapGraphNodes(graph, ctx.opset(), ctx.state()));
  std::vector<Value> outputs;
  for (const auto& output : graph.output()) {
    absl::StatusOr<Var> var = ctx.state().VarOf(output.name());
    if (!var.ok()) {
      return ctx.Error(absl::StrCat("subgraph '", graph.name(), "' output '", output.name(),
                                    "': ", var.status().message()));
    }
    outputs.emplace_back(*std::move(var));
  }
  return outputs;
}

// An If whose condition is known at import (a constant: shape arithmetic, as ONNX's function
// expansions test an input's rank) is its taken branch, mapped into the current block; the
// other branch is not imported. Outputs the branch folded stay constants.
absl::Status InlineTakenBranch(NodeContext& ctx, const HostTensor& cond,
                               const ::onnx::GraphProto& then_graph,
                               const ::onnx::GraphProto& else_graph) {
  if (cond.dtype != DataType::kBool || cond.shape.NumElements() != 1) {
    return ctx.Error(absl::StrCat("the condition must be one bool, not ", DataTypeName(cond.dtype),
                                  cond.shape.ToString()));
  }
  const ::onnx::GraphProto& taken = HostLoad<bool>(cond, 0) ? then_graph : else_graph;
  SLUICE_RETURN_IF_ERROR(BindInitializers(taken, ctx.state()));
  SLUICE_RETURN_IF_ERROR(MapGraphNodes(taken, ctx.opset(), ctx.state()));
  for (int i = 0; i < taken.output_size(); ++i) {
    const std::string& name = taken.output(i).name();
    if (const HostTensor* folded = ctx.state().Constant(name)) {
      ctx.SetConstantOutput(i, *folded);
      continue;
    }
    absl::StatusOr<Var> var = ctx.state().VarOf(name);
    if (!var.ok()) {
      return ctx.Error(absl::StrCat("subgraph '", taken.name(), "' output '", name,
                                    "': ", var.status().message()));
    }
    SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, Value(*std::move(var))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MapIf(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"then_branch", "else_branch"}));
  SLUICE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* then_graph, GraphAttr(ctx, "then_branch"));
  SLUICE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* else_graph, GraphAttr(ctx, "else_branch"));
  for (const ::onnx::GraphProto* g : {then_graph, else_graph}) {
    if (g->output_size() != ctx.num_outputs()) {
      return ctx.Error(absl::StrCat("branch '", g->name(), "' has ", g->output_size(),
                                    " outputs; the node has ", ctx.num_outputs()));
    }
  }
  if (const HostTensor* known =
          ctx.HasInput(0) ? ctx.state().Constant(ctx.node().input(0)) : nullptr) {
    return InlineTakenBranch(ctx, *known, *then_graph, *else_graph);
  }
  SLUICE_ASSIGN_OR_RETURN(Value cond, ctx.Input(0));
  SLUICE_ASSIGN_OR_RETURN(cond, BoolScalar(ctx, cond, "the condition"));
  absl::StatusOr<std::vector<Value>> outs = fn::Cond(
      cond, [&]() { return MapSubgraph(ctx, *then_graph); },
      [&]() { return MapSubgraph(ctx, *else_graph); });
  if (!outs.ok()) {
    // A node's own error names it already; the builder's (branches that differ) does not.
    if (absl::StrContains(outs.status().message(), ctx.Describe())) return outs.status();
    return ctx.Error(outs.status().message());
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, (*outs)[i]));
  }
  return absl::OkStatus();
}

// Loop(M, cond, v...) with body(i, cond, v...) -> (cond, v...): a while over (i, cond, v...)
// whose condition is cond (and i < M when M is given) and whose body maps the subgraph with
// its inputs bound to the current values, then steps i.
absl::Status MapLoop(NodeContext& ctx) {
  SLUICE_RETURN_IF_ERROR(ctx.OnlyAttrs({"body"}));
  SLUICE_ASSIGN_OR_RETURN(const ::onnx::GraphProto* body, GraphAttr(ctx, "body"));
  const int carried = ctx.num_inputs() - 2;
  if (carried < 0) return ctx.Error("needs inputs M and cond (either may be empty)");
  if (body->input_size() != carried + 2 || body->output_size() < carried + 1) {
    return ctx.Error(absl::StrCat("the body takes ", body->input_size(), " inputs and gives ",
                                  body->output_size(), " outputs; ", carried + 2, " and ",
                                  carried + 1, " expected"));
  }
  if (body->output_size() > carried + 1) {
    return ctx.Error("scan outputs (body outputs past the carried values) are not supported");
  }
  std::vector<Value> init;
  SLUICE_ASSIGN_OR_RETURN(Value zero, Built(ctx, fn::FillConstant(Shape{}, 0.0, DataType::kI64)));
  init.push_back(zero);
  if (ctx.HasInput(1)) {
    SLUICE_ASSIGN_OR_RETURN(Value c, ctx.Input(1));
    SLUICE_ASSIGN_OR_RETURN(c, BoolScalar(ctx, c, "cond"));
    init.push_back(c);
  } else {
    SLUICE_ASSIGN_OR_RETURN(Value yes, Built(ctx, fn::FillConstant(Shape{}, 1.0, DataType::kBool)));
    init.push_back(yes);
  }
  for (int i = 0; i < carried; ++i) {
    SLUICE_ASSIGN_OR_RETURN(Value v, ctx.Input(i + 2));
    init.push_back(v);
  }
  std::optional<Value> trip_count;
  if (ctx.HasInput(0)) {
    SLUICE_ASSIGN_OR_RETURN(Value m, ctx.Input(0));
    if (m.var().dtype() != DataType::kI64 || m.var().shape().NumElements() != 1) {
      return ctx.Error("M must be one int64");
    }
    if (m.var().shape().rank() != 0) {
      SLUICE_ASSIGN_OR_RETURN(m, Built(ctx, fn::Reshape(m, {})));
    }
    trip_count = m;
  }
  auto cond_fn = [&](const std::vector<Value>& vars) -> absl::StatusOr<Value> {
    if (!trip_count.has_value()) return Built(ctx, fn::Assign(vars[1]));
    SLUICE_ASSIGN_OR_RETURN(Value below, Built(ctx, fn::LessThan(vars[0], *trip_count)));
    return Built(ctx, fn::LogicalAnd(below, vars[1]));
  };
  auto body_fn = [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
    for (int i = 0; i < body->input_size(); ++i) {
      ctx.state().BindVar(body->input(i).name(), vars[static_cast<size_t>(i)].var());
    }
    SLUICE_ASSIGN_OR_RETURN(std::vector<Value> outs, MapSubgraph(ctx, *body));
    std::vector<Value> next;
    SLUICE_ASSIGN_OR_RETURN(Value step, Built(ctx, fn::Increment(vars[0], 1.0)));
    next.push_back(step);
    SLUICE_ASSIGN_OR_RETURN(Value c, BoolScalar(ctx, outs[0], "the body's condition output"));
    next.push_back(c);
    for (size_t i = 1; i < outs.size(); ++i) next.push_back(outs[i]);
    return next;
  };
  absl::StatusOr<std::vector<Value>> outs = fn::WhileLoop(cond_fn, body_fn, init);
  if (!outs.ok()) {
    if (absl::StrContains(outs.status().message(), ctx.Describe())) return outs.status();
    return ctx.Error(outs.status().message());
  }
  for (int i = 0; i < carried; ++i) {
    SLUICE_RETURN_IF_ERROR(ctx.SetOutput(i, (*outs)[static_cast<size_t>(i) + 2]));
  }
  return absl::OkStatus();
}

}  // namespace sluice::framework::onnx::internal
