#include "framework/interpreter/dependency_builder.h"

#include <algorithm>
#include <functional>

namespace sluice::framework {

DependencyGraph BuildDependencies(const std::vector<OpAccess>& ops, int num_vars, int max_walk) {
  const int n = static_cast<int>(ops.size());
  DependencyGraph graph;
  graph.predecessors.resize(n);
  DependencyStats& stats = graph.stats;

  std::vector<int> last_writer(num_vars, -1);
  std::vector<std::vector<int>> readers(num_vars);
  int last_random = -1;
  std::vector<int> preds;
  // Walk state, reused across ops: stamp[v] == b marks v as known to reach b.
  std::vector<int> stamp(n, -1);
  std::vector<int> stack;

  for (int b = 0; b < n; ++b) {
    const OpAccess& op = ops[b];
    preds.clear();
    for (int var : op.reads) {
      if (last_writer[var] >= 0 && last_writer[var] != b) {
        preds.push_back(last_writer[var]);
        ++stats.raw;
      }
    }
    for (int var : op.writes) {
      if (last_writer[var] >= 0 && last_writer[var] != b) {
        preds.push_back(last_writer[var]);
        ++stats.waw;
      }
      for (int reader : readers[var]) {
        if (reader == b) continue;
        preds.push_back(reader);
        ++stats.war;
      }
    }
    if (op.random) {
      if (last_random >= 0) {
        preds.push_back(last_random);
        ++stats.random;
      }
      last_random = b;
    }
    // Update the access state after the edges (an in-place op reads the old writer).
    for (int var : op.reads) readers[var].push_back(b);
    for (int var : op.writes) {
      last_writer[var] = b;
      readers[var].clear();
    }

    std::sort(preds.begin(), preds.end(), std::greater<int>());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    stats.unique += static_cast<int64_t>(preds.size());
    std::vector<int>& kept = graph.predecessors[b];
    if (preds.size() <= 1) {
      kept.assign(preds.begin(), preds.end());
      stats.kept += static_cast<int64_t>(kept.size());
      continue;
    }
    // Highest first: a predecessor can only be reached through a higher-numbered one.
    const int floor = preds.back();
    int walked = 0;
    bool gave_up = false;
    for (int a : preds) {
      if (stamp[a] == b) {
        ++stats.shrunk;
        continue;
      }
      kept.push_back(a);
      if (gave_up) continue;
      // Mark everything `a` depends on (down to `floor`) as reaching b.
      stack.push_back(a);
      while (!stack.empty() && !gave_up) {
        const int v = stack.back();
        stack.pop_back();
        for (int p : graph.predecessors[v]) {
          if (p < floor || stamp[p] == b) continue;
          stamp[p] = b;
          stack.push_back(p);
          if (++walked > max_walk) gave_up = true;
        }
      }
      stack.clear();
    }
    std::sort(kept.begin(), kept.end());
    stats.kept += static_cast<int64_t>(kept.size());
  }
  return graph;
}

}  // namespace sluice::framework
