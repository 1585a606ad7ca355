#include "framework/interpreter/dependency_builder.h"

#include <algorithm>
#include <functional>

namespace sluice::framework {

namespace {

// The access state of the walk over the ops in program order.
class DependenceFinder {
 public:
  DependenceFinder(int num_vars, DependencyStats& stats)
      : last_writer_(num_vars, -1), readers_(num_vars), stats_(stats) {}

  // Op b's predecessors by the RAW, WAW, WAR and random rules, highest first, each once;
  // then records b's accesses (after the edges: an in-place op reads the old writer).
  void Find(const OpAccess& op, int b, std::vector<int>& preds) {
    preds.clear();
    for (int var : op.reads) {
      if (last_writer_[var] >= 0 && last_writer_[var] != b) {
        preds.push_back(last_writer_[var]);
        ++stats_.raw;
      }
    }
    for (int var : op.writes) {
      if (last_writer_[var] >= 0 && last_writer_[var] != b) {
        preds.push_back(last_writer_[var]);
        ++stats_.waw;
      }
      for (int reader : readers_[var]) {
        if (reader == b) continue;
        preds.push_back(reader);
        ++stats_.war;
      }
    }
    if (op.random) {
      if (last_random_ >= 0) {
        preds.push_back(last_random_);
        ++stats_.random;
      }
      last_random_ = b;
    }
    for (int var : op.reads) readers_[var].push_back(b);
    for (int var : op.writes) {
      last_writer_[var] = b;
      readers_[var].clear();
    }
    std::sort(preds.begin(), preds.end(), std::greater<int>());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    stats_.unique += static_cast<int64_t>(preds.size());
  }

 private:
  std::vector<int> last_writer_;
  std::vector<std::vector<int>> readers_;
  int last_random_ = -1;
  DependencyStats& stats_;
};

// The transitive-edge shrink of op b's predecessors (`preds`, highest first) into `kept`
// (ascending), over the kept edges of the ops before b.
class EdgeShrinker {
 public:
  EdgeShrinker(int n, int max_walk) : stamp_(n, -1), max_walk_(max_walk) {}

  void Shrink(const std::vector<int>& preds, int b, DependencyGraph& graph) {
    std::vector<int>& kept = graph.predecessors[b];
    if (preds.size() <= 1) {
      kept.assign(preds.begin(), preds.end());
      graph.stats.kept += static_cast<int64_t>(kept.size());
      return;
    }
    // Highest first: a predecessor can only be reached through a higher-numbered one.
    const int floor = preds.back();
    int walked = 0;
    bool gave_up = false;
    for (int a : preds) {
      if (stamp_[a] == b) {
        ++graph.stats.shrunk;
        continue;
      }
      kept.push_back(a);
      if (gave_up) continue;
      // Mark everything `a` depends on (down to `floor`) as reaching b.
      stack_.push_back(a);
      while (!stack_.empty() && !gave_up) {
        const int v = stack_.back();
        stack_.pop_back();
        for (int p : graph.predecessors[v]) {
          if (p < floor || stamp_[p] == b) continue;
          stamp_[p] = b;
          stack_.push_back(p);
          if (++walked > max_walk_) gave_up = true;
        }
      }
      stack_.clear();
    }
    std::sort(kept.begin(), kept.end());
    graph.stats.kept += static_cast<int64_t>(kept.size());
  }

 private:
  // Walk state, reused across ops: stamp_[v] == b marks v as known to reach b.
  std::vector<int> stamp_;
  std::vector<int> stack_;
  const int max_walk_;
};

}  // namespace

DependencyGraph BuildDependencies(const std::vector<OpAccess>& ops, int num_vars, int max_walk) {
  const int n = static_cast<int>(ops.size());
  DependencyGraph graph;
  graph.predecessors.resize(n);
  DependenceFinder finder(num_vars, graph.stats);
  EdgeShrinker shrinker(n, max_walk);
  std::vector<int> preds;
  for (int b = 0; b < n; ++b) {
    finder.Find(ops[b], b, preds);
    shrinker.Shrink(preds, b, graph);
  }
  return graph;
}

}  // namespace sluice::framework
