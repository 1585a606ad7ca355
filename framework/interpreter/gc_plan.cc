#include "framework/interpreter/gc_plan.h"

#include <utility>

namespace sluice::framework {

namespace {

// Who touches each variable, in func order (each func once), and who writes it first.
struct Accesses {
  std::vector<std::vector<int>> accessors;  // per var slot
  std::vector<int> first_writer;            // per var slot; -1 when no func writes it
};

Accesses CollectAccesses(const std::vector<OpFunc>& funcs, int num_vars) {
  Accesses a;
  a.accessors.resize(num_vars);
  a.first_writer.assign(num_vars, -1);
  for (int f = 0; f < static_cast<int>(funcs.size()); ++f) {
    for (int v : funcs[f].inputs) {
      if (a.accessors[v].empty() || a.accessors[v].back() != f) a.accessors[v].push_back(f);
    }
    for (int v : funcs[f].outputs) {
      if (a.accessors[v].empty() || a.accessors[v].back() != f) a.accessors[v].push_back(f);
      if (a.first_writer[v] < 0) a.first_writer[v] = f;
    }
  }
  return a;
}

}  // namespace

std::vector<Node> PlanNodes(const std::vector<OpFunc>& funcs, const VarTable& vars,
                            const DependencyGraph& deps, const std::vector<int>& func_stream,
                            bool release_temporaries) {
  const int n = static_cast<int>(funcs.size());
  const Accesses access = CollectAccesses(funcs, vars.size());
  std::vector<std::vector<int>> releases_after(n);
  if (release_temporaries) {
    for (int v = 0; v < vars.size(); ++v) {
      const VarSlot& var = vars.slots[v];
      if (var.kind != VarKind::kTemp || var.fetched || access.accessors[v].empty()) continue;
      releases_after[access.accessors[v].back()].push_back(v);
    }
  }
  std::vector<Node> nodes;
  std::vector<int> node_of_func(n, -1);
  for (int f = 0; f < n; ++f) {
    Node node;
    node.op = f;
    node.stream = func_stream[f];
    for (int p : deps.predecessors[f]) node.preds.push_back(node_of_func[p]);
    node_of_func[f] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
    for (int v : releases_after[f]) {
      Node release;
      release.var = v;
      release.stream = func_stream[access.first_writer[v]];
      for (int a : access.accessors[v]) release.preds.push_back(node_of_func[a]);
      nodes.push_back(std::move(release));
    }
  }
  return nodes;
}

}  // namespace sluice::framework
