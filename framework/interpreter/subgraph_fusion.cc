#include "framework/interpreter/subgraph_fusion.h"

#include <functional>
#include <queue>
#include <utility>

#include "framework/compiler/partition.h"
#include "framework/compiler/replay_kernels.h"
#include "framework/interpreter/dependency_builder.h"

namespace sluice::framework {
namespace {

// The nodes not `skip`ped in a topological order of `preds` (per node, over the same indices;
// skipped nodes have none and are no one's), the ready node of smallest `key` first. Shorter
// than the nodes not skipped only if `preds` has a cycle.
std::vector<int> TopologicalOrder(const std::vector<std::vector<int>>& preds,
                                  const std::vector<int>& key, const std::vector<bool>& skip) {
  const size_t n = preds.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> waiting(n, 0);
  for (size_t b = 0; b < n; ++b) {
    for (int a : preds[b]) {
      succ[static_cast<size_t>(a)].push_back(static_cast<int>(b));
      ++waiting[b];
    }
  }
  using Ready = std::pair<int, int>;  // (key, node)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  for (size_t v = 0; v < n; ++v) {
    if (!skip[v] && waiting[v] == 0) ready.push({key[v], static_cast<int>(v)});
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int v = ready.top().second;
    ready.pop();
    order.push_back(v);
    for (int w : succ[static_cast<size_t>(v)]) {
      if (--waiting[static_cast<size_t>(w)] == 0) ready.push({key[static_cast<size_t>(w)], w});
    }
  }
  return order;
}

// The partitioner's view of the block's ops and variables.
std::vector<compiler::PartitionGroup> PartitionFuncs(const std::vector<OpFunc>& funcs,
                                                     const VarTable& vars,
                                                     const DependencyGraph& deps) {
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
  return compiler::Partition(ops, pvars);
}

}  // namespace

FusionResult FuseSubgraphs(std::vector<OpFunc>& funcs, const VarTable& vars,
                           compiler::Compiler& compiler) {
  FusionResult result;
  const DependencyGraph deps = BuildDependencies(AccessesOf(funcs), vars.size());
  const std::vector<compiler::PartitionGroup> groups = PartitionFuncs(funcs, vars, deps);
  if (groups.empty()) return result;

  // Compile each group; a compiled group's ops become one node (index funcs.size() + k),
  // which sorts where its first op was.
  const size_t n = funcs.size();
  std::vector<int> node_of(n);
  for (size_t f = 0; f < n; ++f) node_of[f] = static_cast<int>(f);
  std::vector<int> key(n);
  for (size_t f = 0; f < n; ++f) key[f] = static_cast<int>(f);
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
    for (int f : group.ops) node_of[static_cast<size_t>(f)] = static_cast<int>(n + fused.size());
    key.push_back(group.ops.front());  // ascending: its first op
    fused.push_back(std::move(func));
    result.compiled.push_back(*std::move(compiled));
    ++result.stats.subgraphs;
    result.stats.fused_ops += static_cast<int64_t>(group.ops.size());
  }
  if (fused.empty()) return result;

  // The contracted graph: surviving funcs and fused nodes, edges from the op dependences (a
  // fused node gets the union of its ops' edges from outside it); absorbed funcs drop out.
  const size_t total = n + fused.size();
  std::vector<std::vector<int>> preds(total);
  std::vector<bool> absorbed(total, false);
  size_t live = total;
  for (size_t f = 0; f < n; ++f) {
    const int b = node_of[f];
    if (b != static_cast<int>(f)) {
      absorbed[f] = true;
      --live;
    }
    for (int p : deps.predecessors[f]) {
      const int a = node_of[static_cast<size_t>(p)];
      if (a != b) preds[static_cast<size_t>(b)].push_back(a);
    }
  }
  const std::vector<int> order = TopologicalOrder(preds, key, absorbed);
  if (order.size() != live) {
    // A cycle after contraction (the partition's rules forbid one): run everything unfused
    // rather than drop the ops on it. `funcs` is untouched so far.
    result.stats.fallbacks += result.stats.subgraphs;
    result.stats.subgraphs = 0;
    result.stats.fused_ops = 0;
    result.compiled.clear();
    return result;
  }
  std::vector<OpFunc> ordered;
  ordered.reserve(live);
  for (int v : order) {
    const size_t u = static_cast<size_t>(v);
    ordered.push_back(u < n ? std::move(funcs[u]) : std::move(fused[u - n]));
  }
  funcs = std::move(ordered);
  return result;
}

}  // namespace sluice::framework
