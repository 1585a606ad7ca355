// Subgraph fusion in the interpreter's pipeline (interpreter.h): after ResolveAndPlace,
// the partitioning pass (framework/compiler/partition.h) groups fusible op funcs; each group
// the compiler compiles for its device becomes one op func running the compiled kernel,
// reading the group's inputs and writing its visible outputs (the main graph's variables,
// which the GC plan frees as any others: the group never frees them — Paddle's
// skip_gc_vars). A group that fails to compile keeps its ops, unfused, and is counted. The
// funcs are then put in a topological order of the contracted graph (stable: program order
// wherever the dependences allow), so the passes after see a program that means the same.
// Pure function of its inputs but for the compiler's cache; thread-compatible.
#ifndef SLUICE_FRAMEWORK_INTERPRETER_SUBGRAPH_FUSION_H_
#define SLUICE_FRAMEWORK_INTERPRETER_SUBGRAPH_FUSION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "framework/compiler/compiler.h"
#include "framework/interpreter/lowered_graph.h"

namespace sluice::framework {

struct FusionStats {
  int64_t subgraphs = 0;   // groups replaced by a compiled kernel
  int64_t fused_ops = 0;   // ops inside them
  int64_t fallbacks = 0;   // groups whose compile failed (run unfused)
  int64_t cache_hits = 0;  // of the compiles this build asked for
  int64_t compile_ns = 0;  // time this build spent compiling (cache misses)
};

struct FusionResult {
  FusionStats stats;
  // Keep the compiled kernels alive as long as the funcs that name them.
  std::vector<std::shared_ptr<const compiler::CompiledSubgraph>> compiled;
};

// Rewrites `funcs` (kernels chosen) in place. `vars`' fed, fetched and persistable slots stay
// visible.
FusionResult FuseSubgraphs(std::vector<OpFunc>& funcs, const VarTable& vars,
                           compiler::Compiler& compiler);

}  // namespace sluice::framework

#endif  // SLUICE_FRAMEWORK_INTERPRETER_SUBGRAPH_FUSION_H_
