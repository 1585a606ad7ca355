// The GC plan: the graph's nodes — each op func, followed by the releases of the
// temporaries it is the last to touch. A temporary (not fed, fetched or persistable) that
// some func touches is released once, after every func that touches it, on the stream of
// the func that first writes it (the stream its storage is allocated for).
#ifndef SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_
#define SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_

#include <vector>

#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// Nodes in order: func f's node (predecessors: the nodes of deps.predecessors[f]), then
// the releases after f (predecessors: every func touching the variable), in slot order.
// `func_stream[f]` is func f's stream index. Without `release_temporaries`, one node per
// func and no release. Every temporary that is released has a writer among the funcs
// (ResolveOps refuses a read before any write). Pure function.
std::vector<Node> PlanNodes(const std::vector<OpFunc>& funcs, const VarTable& vars,
                            const DependencyGraph& deps, const std::vector<int>& func_stream,
                            bool release_temporaries);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_
