#include "framework/interpreter/subgraph_fusion.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "framework/compiler/compiled_kernel.h"
#include "framework/compiler/partition.h"
#include "framework/interpreter/dependency_builder.h"

namespace sluice::framework {
namespace {

// `funcs` in a topological order of `preds` (per func, over the same indices), the smallest
// index first among the ready ones.
std::vector<OpFunc> TopologicalOrder(std::vector<OpFunc> funcs,
                                     const std::vector<std::vector<int>>& preds) {
  const size_t n = funcs.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> waiting(n, 0);
  for (size_t b = 0; b < n; ++b) {
    for (int a : preds[b]) {
      succ[static_cast<size_t>(a)].push_back(static_cast<int>(b));
      ++waiting[b];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t v = 0; v < n; ++v) {
    if (waiting[v] == 0) ready.push(static_cast<int>(v));
  }
  std::vector<OpFunc> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int v = ready.top();
    ready.pop();
    order.push_back(std::move(funcs[static_cast<size_t>(v)]));
    for (int w : succ[static_cast<size_t>(v)]) {
      if (--waiting[static_cast<size_t>(w)] == 0) ready.push(w);
    }
  }
  return order;  // shorter than `funcs` only if `preds` has a cycle
}

}  // namespace

FusionResult FuseSubgraphs(std::vector<OpFunc>& funcs, const VarTable& vars,
                           compiler::Compiler& compiler) {
  FusionResult result;
  const DependencyGraph deps = BuildDependencies(AccessesOf(funcs), vars.size());
  std::vector<compiler::PartitionOp> ops(funcs.size());
  for (size_t f = 0; f < funcs.size(); ++f) {
    const OpFunc& func = funcs[f];
    compiler::PartitionOp& op = ops[f];
    op.type = func.type;
    op.attrs = func.attrs.get();
    op.inputs = func.inputs;
    op.outputs = func.outputs;
    op.device = func.device;
    op.stream = func.stream;
    // Block ops with a schema only: not control flow, not inserted copies, not random.
    op.eligible = func.schema != nullptr && func.source >= 0 && !func.random;
    op.preds = deps.predecessors[f];
  }
  std::vector<compiler::PartitionVar> pvars(vars.slots.size());
  for (size_t v = 0; v < vars.slots.size(); ++v) {
    const VarSlot& slot = vars.slots[v];
    pvars[v].meta = {slot.dtype, slot.shape};
    pvars[v].pinned = slot.kind != VarKind::kTemp || slot.fetched || slot.device_fetch;
  }
  const std::vector<compiler::PartitionGroup> groups = compiler::Partition(ops, pvars);
  if (groups.empty()) return result;

  // Compile each group; a compiled group's ops become one node (index funcs.size() + k).
  std::vector<int> node_of(funcs.size());
  for (size_t f = 0; f < funcs.size(); ++f) node_of[f] = static_cast<int>(f);
  std::vector<OpFunc> fused;
  for (const compiler::PartitionGroup& group : groups) {
    const OpFunc& head = funcs[static_cast<size_t>(group.ops.front())];
    compiler::CompileCall call;
    absl::StatusOr<std::shared_ptr<const compiler::CompiledSubgraph>> compiled =
        compiler.Compile(group.graph, head.device.type(), &call);
    result.stats.cache_hits += call.hit ? 1 : 0;
    result.stats.compile_ns += call.compile_ns;
    if (!compiled.ok() || (*compiled)->kernel() == nullptr) {
      ++result.stats.fallbacks;
      continue;
    }
    OpFunc func;
    func.type = std::string((*compiled)->kernel()->name());
    func.kernel = (*compiled)->kernel();
    auto attrs = std::make_shared<vm::AttrMap>();
    attrs->Set(compiler::kSubgraphAttr, group.graph.ToText());
    func.attrs = std::move(attrs);
    func.device = head.device;
    func.stream = head.stream;
    func.inputs = group.input_vars;
    func.outputs = group.output_vars;
    for (int f : group.ops)
      node_of[static_cast<size_t>(f)] = static_cast<int>(funcs.size() + fused.size());
    fused.push_back(std::move(func));
    result.compiled.push_back(*std::move(compiled));
    ++result.stats.subgraphs;
    result.stats.fused_ops += static_cast<int64_t>(group.ops.size());
  }
  if (fused.empty()) return result;

  // The contracted graph: surviving funcs and fused nodes, edges from the op dependences.
  const size_t total = funcs.size() + fused.size();
  std::vector<std::vector<int>> preds(total);
  for (size_t f = 0; f < funcs.size(); ++f) {
    const int b = node_of[f];
    for (int p : deps.predecessors[f]) {
      const int a = node_of[static_cast<size_t>(p)];
      if (a != b) preds[static_cast<size_t>(b)].push_back(a);
    }
  }
  std::vector<OpFunc> original = funcs;  // what runs should the contraction be cyclic
  std::vector<OpFunc> nodes;
  nodes.reserve(total);
  for (OpFunc& func : funcs) nodes.push_back(std::move(func));
  for (OpFunc& func : fused) nodes.push_back(std::move(func));
  // Absorbed funcs drop out: give them no edges and filter them after ordering.
  std::vector<bool> absorbed(total, false);
  for (size_t f = 0; f < node_of.size(); ++f) absorbed[f] = node_of[f] != static_cast<int>(f);
  // A fused node sorts where its first op was: map each node to a priority by renumbering.
  std::vector<int> first_op(total);
  for (size_t v = 0; v < total; ++v) first_op[v] = static_cast<int>(v);
  for (size_t f = funcs.size(); f-- > 0;) {
    if (absorbed[f]) first_op[static_cast<size_t>(node_of[f])] = static_cast<int>(f);
  }
  // Renumber nodes by (first op) so that TopologicalOrder's smallest-index rule follows the
  // program order.
  std::vector<int> live;
  for (size_t v = 0; v < total; ++v) {
    if (!absorbed[v]) live.push_back(static_cast<int>(v));
  }
  std::sort(live.begin(), live.end(), [&](int a, int b) {
    return first_op[static_cast<size_t>(a)] < first_op[static_cast<size_t>(b)];
  });
  std::vector<int> rank(total, -1);
  for (size_t r = 0; r < live.size(); ++r) rank[static_cast<size_t>(live[r])] = static_cast<int>(r);
  std::vector<OpFunc> ranked(live.size());
  std::vector<std::vector<int>> ranked_preds(live.size());
  for (size_t r = 0; r < live.size(); ++r) {
    const size_t v = static_cast<size_t>(live[r]);
    ranked[r] = std::move(nodes[v]);
    for (int a : preds[v]) {
      const int ra = rank[static_cast<size_t>(a)];
      if (std::find(ranked_preds[r].begin(), ranked_preds[r].end(), ra) == ranked_preds[r].end()) {
        ranked_preds[r].push_back(ra);
      }
    }
  }
  // Absorbed funcs' edges point at their group through node_of: preds of a fused node are
  // the union of its ops' preds outside it (collected above via node_of of each op).
  std::vector<OpFunc> ordered = TopologicalOrder(std::move(ranked), ranked_preds);
  if (ordered.size() != live.size()) {
    // A cycle after contraction (the partition's rules forbid one): run everything unfused
    // rather than drop the ops on it.
    funcs = std::move(original);
    result.stats.fallbacks += result.stats.subgraphs;
    result.stats.subgraphs = 0;
    result.stats.fused_ops = 0;
    result.compiled.clear();
    return result;
  }
  funcs = std::move(ordered);
  return result;
}

}  // namespace sluice::framework
