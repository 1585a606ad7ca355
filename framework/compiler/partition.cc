#include "framework/compiler/partition.h"

#include <algorithm>
#include <queue>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace sluice::framework::compiler {
namespace {

struct Group {
  std::vector<int> ops;
  int first = 0;  // smallest op index
  int last = 0;   // largest op index
};

// The contracted graph so far: ops, each in at most one group.
class Contraction {
 public:
  Contraction(const std::vector<PartitionOp>& ops)
      : ops_(ops), group_of_(ops.size(), -1), stamp_(ops.size(), 0), group_stamp_() {}

  int group_of(int op) const { return group_of_[static_cast<size_t>(op)]; }
  const Group& group(int g) const { return groups_[static_cast<size_t>(g)]; }
  int num_groups() const { return static_cast<int>(groups_.size()); }

  int NewGroup(int op) {
    groups_.push_back({{op}, op, op});
    group_stamp_.push_back(0);
    group_of_[static_cast<size_t>(op)] = num_groups() - 1;
    return num_groups() - 1;
  }
  void Join(int g, int op) {
    Group& group = groups_[static_cast<size_t>(g)];
    group.ops.push_back(op);
    group.first = std::min(group.first, op);
    group.last = std::max(group.last, op);
    group_of_[static_cast<size_t>(op)] = g;
  }

  // True when some path leads from group `g` to op `u` through a node outside `g` (then
  // contracting u into g would close a cycle). Walks backwards from u's predecessors over
  // the contracted graph, skipping nodes wholly before the lowest position a path from g can
  // reach (ReachableFloor): edges point forward, and only entering a group that spans
  // backwards leads to a lower position.
  // The lowest op index a path from group `g` can reach: g's first op, lowered to the first
  // op of every group that ends at or after the floor so far (a path can enter such a group
  // at its late op and leave it from its early one), to a fixed point.
  int ReachableFloor(int g) const {
    int floor = group(g).first;
    for (bool lowered = true; lowered;) {
      lowered = false;
      for (const Group& h : groups_) {
        if (h.last >= floor && h.first < floor) {
          floor = h.first;
          lowered = true;
        }
      }
    }
    return floor;
  }

  bool PathAround(int g, int u) {
    ++epoch_;
    std::vector<int> stack;  // op indices; a group is entered through any of its ops
    auto push_preds_of_op = [&](int op) {
      for (int p : ops_[static_cast<size_t>(op)].preds) stack.push_back(p);
    };
    for (int p : ops_[static_cast<size_t>(u)].preds) {
      if (group_of(p) != g) stack.push_back(p);
    }
    const int start = ReachableFloor(g);
    while (!stack.empty()) {
      const int op = stack.back();
      stack.pop_back();
      const int h = group_of(op);
      if (h == g) return true;
      if (h >= 0) {
        if (group_stamp_[static_cast<size_t>(h)] == epoch_) continue;
        group_stamp_[static_cast<size_t>(h)] = epoch_;
        if (group(h).last < start) continue;
        for (int member : group(h).ops) push_preds_of_op(member);
      } else {
        if (stamp_[static_cast<size_t>(op)] == epoch_) continue;
        stamp_[static_cast<size_t>(op)] = epoch_;
        if (op < start) continue;
        push_preds_of_op(op);
      }
    }
    return false;
  }

 private:
  const std::vector<PartitionOp>& ops_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
  std::vector<uint64_t> stamp_;
  std::vector<uint64_t> group_stamp_;
  uint64_t epoch_ = 0;
};

std::vector<ValueMeta> MetasOf(const std::vector<int>& ids, const std::vector<PartitionVar>& vars) {
  std::vector<ValueMeta> metas;
  metas.reserve(ids.size());
  for (int v : ids) metas.push_back(vars[static_cast<size_t>(v)].meta);
  return metas;
}

// The subgraph of `ops` (ascending); false when it writes nothing visible.
bool Describe(const std::vector<PartitionOp>& all, const std::vector<PartitionVar>& vars,
              const std::vector<std::vector<int>>& readers, const std::vector<int>& group_ops,
              PartitionGroup& out) {
  const absl::flat_hash_set<int> members(group_ops.begin(), group_ops.end());
  absl::flat_hash_map<int, int> value_of;  // variable -> value id (the latest version)
  absl::flat_hash_map<int, int> input_of;  // variable -> input value id
  std::vector<int> written;
  Subgraph& g = out.graph;
  const PartitionOp& first = all[static_cast<size_t>(group_ops.front())];
  g.domain = vars[static_cast<size_t>(first.outputs[0])].meta.shape;
  // Inputs first: the value ids of inputs precede the nodes', so collect them in a pass
  // before appending any node.
  for (int o : group_ops) {
    const PartitionOp& op = all[static_cast<size_t>(o)];
    for (int v : op.inputs) {
      if (value_of.contains(v) || input_of.contains(v)) continue;
      const int id = static_cast<int>(g.inputs.size());
      input_of[v] = id;
      g.inputs.push_back(
          {vars[static_cast<size_t>(v)].meta.dtype, vars[static_cast<size_t>(v)].meta.shape});
      out.input_vars.push_back(v);
    }
    for (int v : op.outputs) value_of[v] = -1;  // written inside: later reads are internal
  }
  value_of.clear();
  for (int o : group_ops) {
    const PartitionOp& op = all[static_cast<size_t>(o)];
    std::vector<int> args;
    for (int v : op.inputs) {
      auto it = value_of.find(v);
      args.push_back(it != value_of.end() ? it->second : input_of.at(v));
    }
    absl::StatusOr<std::vector<int>> results =
        AppendOp(op.type, op.attrs, args, MetasOf(op.outputs, vars), g);
    if (!results.ok()) return false;
    for (size_t k = 0; k < op.outputs.size(); ++k) {
      value_of[op.outputs[k]] = (*results)[k];
      written.push_back(op.outputs[k]);
    }
    g.fused.push_back(op.type);
  }
  for (int v : written) {
    bool visible = vars[static_cast<size_t>(v)].pinned;
    for (int r : readers[static_cast<size_t>(v)]) visible = visible || !members.contains(r);
    if (!visible) continue;
    const int value = value_of.at(v);
    if (std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end()) continue;
    g.outputs.push_back(value);
    out.output_vars.push_back(v);
  }
  out.ops = group_ops;
  return !g.outputs.empty() && g.Validate().ok();
}

}  // namespace

std::vector<PartitionGroup> Partition(const std::vector<PartitionOp>& ops,
                                      const std::vector<PartitionVar>& vars,
                                      const PartitionOptions& options) {
  const int n = static_cast<int>(ops.size());
  std::vector<int> writes(vars.size(), 0);
  std::vector<int> producer(vars.size(), -1);
  std::vector<std::vector<int>> readers(vars.size());
  for (int u = 0; u < n; ++u) {
    for (int v : ops[static_cast<size_t>(u)].outputs) {
      ++writes[static_cast<size_t>(v)];
      producer[static_cast<size_t>(v)] = u;
    }
    for (int v : ops[static_cast<size_t>(u)].inputs) readers[static_cast<size_t>(v)].push_back(u);
  }
  Contraction contraction(ops);
  for (int u = 0; u < n; ++u) {
    const PartitionOp& op = ops[static_cast<size_t>(u)];
    if (!op.eligible || op.outputs.empty()) continue;
    bool single_writes = true;
    for (int v : op.outputs) single_writes = single_writes && writes[static_cast<size_t>(v)] == 1;
    if (!single_writes ||
        !IsFusible(op.type, op.attrs, MetasOf(op.inputs, vars), MetasOf(op.outputs, vars))) {
      continue;
    }
    const ValueMeta& out = vars[static_cast<size_t>(op.outputs[0])].meta;
    // Candidate groups: those of this op's producers, nearest first.
    std::vector<int> candidates;
    for (int v : op.inputs) {
      const int p = producer[static_cast<size_t>(v)];
      if (p < 0 || p >= u || writes[static_cast<size_t>(v)] != 1) continue;
      const int g = contraction.group_of(p);
      if (g >= 0 && std::find(candidates.begin(), candidates.end(), g) == candidates.end()) {
        candidates.push_back(g);
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [&](int a, int b) { return contraction.group(a).last > contraction.group(b).last; });
    int joined = -1;
    for (int g : candidates) {
      const PartitionOp& head = ops[static_cast<size_t>(contraction.group(g).ops.front())];
      const ValueMeta& domain = vars[static_cast<size_t>(head.outputs[0])].meta;
      if (head.device != op.device || head.stream != op.stream || domain.shape != out.shape ||
          domain.dtype != out.dtype) {
        continue;
      }
      if (contraction.PathAround(g, u)) continue;
      contraction.Join(g, u);
      joined = g;
      break;
    }
    if (joined < 0) contraction.NewGroup(u);
  }
  std::vector<PartitionGroup> result;
  for (int g = 0; g < contraction.num_groups(); ++g) {
    std::vector<int> members = contraction.group(g).ops;
    if (static_cast<int>(members.size()) < options.min_ops) continue;
    std::sort(members.begin(), members.end());
    PartitionGroup group;
    if (Describe(ops, vars, readers, members, group)) result.push_back(std::move(group));
  }
  return result;
}

bool ContractionIsAcyclic(const std::vector<PartitionOp>& ops,
                          const std::vector<PartitionGroup>& groups) {
  const int n = static_cast<int>(ops.size());
  std::vector<int> node_of(ops.size());
  for (int u = 0; u < n; ++u) node_of[static_cast<size_t>(u)] = u;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int u : groups[g].ops) node_of[static_cast<size_t>(u)] = n + static_cast<int>(g);
  }
  const int nodes = n + static_cast<int>(groups.size());
  std::vector<absl::flat_hash_set<int>> succ(static_cast<size_t>(nodes));
  std::vector<int> indegree(static_cast<size_t>(nodes), 0);
  for (int u = 0; u < n; ++u) {
    for (int p : ops[static_cast<size_t>(u)].preds) {
      const int a = node_of[static_cast<size_t>(p)], b = node_of[static_cast<size_t>(u)];
      if (a != b && succ[static_cast<size_t>(a)].insert(b).second)
        ++indegree[static_cast<size_t>(b)];
    }
  }
  std::vector<int> ready;
  for (int v = 0; v < nodes; ++v) {
    if (indegree[static_cast<size_t>(v)] == 0) ready.push_back(v);
  }
  int seen = 0;
  while (!ready.empty()) {
    const int v = ready.back();
    ready.pop_back();
    ++seen;
    for (int w : succ[static_cast<size_t>(v)]) {
      if (--indegree[static_cast<size_t>(w)] == 0) ready.push_back(w);
    }
  }
  return seen == nodes;
}

}  // namespace sluice::framework::compiler
