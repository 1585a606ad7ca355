// The GC plan: the graph's nodes — each op func, followed by the releases of the
// temporaries it is the last to touch. A func touches its outputs, the outputs it adds into
// (OpFunc::accumulates) and its inputs, except those its kernel reads the shape of alone
// (vm::OpKernel::ReadsShapeOnly: add_grad's X and Y), which keep no storage alive. A temporary (not
// fed, fetched or persistable) that some func touches is released after every func that touches it,
// in one of three ways:
//  - ordered: every toucher on another stream than the last toucher's is a transitive
//    predecessor of the last, so one release right after the last toucher, depending on
//    the touchers of its stream alone, needs no wait; it runs on the last toucher's stream
//    when that and the first writer's stream run on the host (host memory is reusable by
//    any stream once its users are done), else on the first writer's;
//  - shared: otherwise, when every toucher runs on the host and they span several
//    streams, a drop on each of those streams after its last touch (Node::drops); the last
//    drop to run frees the storage (vm/release_count.h), so no stream waits for another;
//  - waiting: otherwise one release on the first writer's stream (the stream its storage
//    is allocated for), depending on every toucher.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_
#define SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_

#include <vector>

#include "framework/interpreter/dependency_builder.h"
#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

// Nodes in order: func f's node (predecessors: the nodes of deps.predecessors[f]), then
// the release nodes that follow f, by slot (each depending on the touchers named above).
// `func_stream[f]` is func f's stream index; `host_stream[s]` whether stream s runs on the
// host (StreamInfo::synchronous; empty: none does). Without `release_temporaries`, one
// node per func and no release. Every temporary that is released has a writer among the
// funcs (ResolveOps refuses a read before any write). Pure function.
std::vector<Node> PlanNodes(const std::vector<OpFunc>& funcs, const VarTable& vars,
                            const DependencyGraph& deps, const std::vector<int>& func_stream,
                            bool release_temporaries, const std::vector<bool>& host_stream = {});

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_GC_PLAN_H_
