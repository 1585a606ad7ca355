#include "framework/interpreter/gc_plan.h"

#include <algorithm>
#include <utility>

#include "vm/kernel.h"

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
    const vm::OpKernel* kernel = funcs[f].kernel;
    for (size_t i = 0; i < funcs[f].inputs.size(); ++i) {
      // A read of the shape alone keeps no storage alive (vm::OpKernel::ReadsShapeOnly).
      if (kernel != nullptr && kernel->ReadsShapeOnly(static_cast<int>(i))) continue;
      const int v = funcs[f].inputs[i];
      if (a.accessors[v].empty() || a.accessors[v].back() != f) a.accessors[v].push_back(f);
    }
    for (int v : funcs[f].accumulates) {
      if (a.accessors[v].empty() || a.accessors[v].back() != f) a.accessors[v].push_back(f);
    }
    for (int v : funcs[f].outputs) {
      if (a.accessors[v].empty() || a.accessors[v].back() != f) a.accessors[v].push_back(f);
      if (a.first_writer[v] < 0) a.first_writer[v] = f;
    }
  }
  return a;
}

// Whether every func in `accessors` (ascending) on a stream other than that of the last
// one is a transitive predecessor of the last. A backward walk from the last over funcs no
// older than the first accessor, bounded: a walk that grows too long answers no (the
// release then stays where it was, which is always correct).
bool LastAccessorFollowsTheOthers(const std::vector<int>& accessors, const DependencyGraph& deps,
                                  const std::vector<int>& func_stream) {
  constexpr int kMaxWalk = 512;
  const int last = accessors.back();
  const int oldest = accessors.front();
  std::vector<int> pending;
  for (int a : accessors) {
    if (func_stream[a] != func_stream[last]) pending.push_back(a);
  }
  if (pending.empty()) return true;
  std::vector<int> stack = {last};
  std::vector<int> seen = {last};
  while (!stack.empty() && !pending.empty()) {
    const int f = stack.back();
    stack.pop_back();
    for (int p : deps.predecessors[f]) {
      if (p < oldest || std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
      if (static_cast<int>(seen.size()) >= kMaxWalk) return false;
      seen.push_back(p);
      stack.push_back(p);
      pending.erase(std::remove(pending.begin(), pending.end(), p), pending.end());
    }
  }
  return pending.empty();
}

// One release node to be, of `var` on `stream`, depending on the funcs `preds` (it goes
// after the last of them).
struct PlannedRelease {
  int var = -1;
  int stream = -1;
  std::vector<int> preds;  // funcs
  int drops = 0;           // see Node::drops
};

// Where variable `v`, touched by `accessors` (ascending), is released: appends to
// `after[f]` the release(s) that follow func f.
void PlanRelease(int v, const std::vector<int>& accessors, int home,
                 const std::vector<int>& func_stream, const std::vector<bool>& host_stream,
                 const DependencyGraph& deps, std::vector<std::vector<PlannedRelease>>& after) {
  const int last = func_stream[accessors.back()];
  auto touchers_on = [&](int s) {
    std::vector<int> on;
    for (int a : accessors) {
      if (func_stream[a] == s) on.push_back(a);
    }
    return on;
  };
  // Another stream than home must run on the host (its memory is reusable by any stream).
  const bool may_move =
      home == last || (OnHostStream(host_stream, home) && OnHostStream(host_stream, last));
  if (may_move && LastAccessorFollowsTheOthers(accessors, deps, func_stream)) {
    after[accessors.back()].push_back(PlannedRelease{v, last, touchers_on(last), 0});
    return;
  }
  // Unordered touchers on several host streams: a drop on each, after its last touch.
  std::vector<int> streams;  // distinct, in order of last touch
  bool all_host = true;      // home included: the first writer is a toucher
  for (auto it = accessors.rbegin(); it != accessors.rend(); ++it) {
    const int s = func_stream[*it];
    all_host = all_host && OnHostStream(host_stream, s);
    if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
  }
  if (all_host && streams.size() > 1) {
    for (int s : streams) {
      PlannedRelease drop{v, s, touchers_on(s), static_cast<int>(streams.size())};
      const int after_func = drop.preds.back();
      after[after_func].push_back(std::move(drop));
    }
    return;
  }
  after[accessors.back()].push_back(PlannedRelease{v, home, accessors, 0});
}

}  // namespace

std::vector<Node> PlanNodes(const std::vector<OpFunc>& funcs, const VarTable& vars,
                            const DependencyGraph& deps, const std::vector<int>& func_stream,
                            bool release_temporaries, const std::vector<bool>& host_stream) {
  const int n = static_cast<int>(funcs.size());
  const Accesses access = CollectAccesses(funcs, vars.size());
  std::vector<std::vector<PlannedRelease>> releases_after(n);
  if (release_temporaries) {
    for (int v = 0; v < vars.size(); ++v) {
      const VarSlot& var = vars.slots[v];
      if (var.kind != VarKind::kTemp || var.fetched || access.accessors[v].empty()) continue;
      PlanRelease(v, access.accessors[v], func_stream[access.first_writer[v]], func_stream,
                  host_stream, deps, releases_after);
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
    // Slot order after each func (PlanRelease ran over the slots in order).
    for (const PlannedRelease& planned : releases_after[f]) {
      Node release;
      release.var = planned.var;
      release.stream = planned.stream;
      release.drops = planned.drops;
      for (int a : planned.preds) release.preds.push_back(node_of_func[a]);
      nodes.push_back(std::move(release));
    }
  }
  return nodes;
}

}  // namespace sluice::framework
