#include "framework/compiler/buffer_plan.h"

#include <algorithm>

namespace sluice::framework::compiler {
namespace {

// Per value: the index of the last node that reads it; outputs: the last node. -1: unread.
std::vector<int> LastUse(const Subgraph& g) {
  const int n_in = static_cast<int>(g.inputs.size());
  const int last = static_cast<int>(g.nodes.size()) - 1;
  std::vector<int> last_use(static_cast<size_t>(g.num_values()), -1);
  for (int k = 0; k <= last; ++k) {
    const ExprNode& node = g.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < ExprOpArity(node.op); ++a) last_use[static_cast<size_t>(node.args[a])] = k;
  }
  for (int o : g.outputs) last_use[static_cast<size_t>(o)] = last;
  // A node value nobody reads is live at its own node only.
  for (int k = 0; k <= last; ++k) {
    int& use = last_use[static_cast<size_t>(n_in + k)];
    use = std::max(use, k);
  }
  return last_use;
}

}  // namespace

BufferPlan PlanBuffers(const Subgraph& g) {
  const int n_in = static_cast<int>(g.inputs.size());
  const std::vector<int> last_use = LastUse(g);
  BufferPlan plan;
  plan.buffer_of.assign(static_cast<size_t>(g.num_values()), -1);
  std::vector<int> free_buffers;  // a stack: the most recently freed is reused first (warm)
  int in_use = 0;
  for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
    const int value = n_in + k;
    int buffer;
    if (!free_buffers.empty()) {
      buffer = free_buffers.back();
      free_buffers.pop_back();
    } else {
      buffer = plan.num_buffers++;
    }
    plan.buffer_of[static_cast<size_t>(value)] = buffer;
    plan.steps.push_back({BufferStep::Kind::kMalloc, value, buffer});
    plan.peak_buffers = std::max(plan.peak_buffers, ++in_use);
    plan.steps.push_back({BufferStep::Kind::kCompute, value, buffer});
    // Values whose last reader this node is (its own value too, when nothing reads it),
    // once each, in value order.
    std::vector<int> dying;
    const ExprNode& node = g.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < ExprOpArity(node.op); ++a) dying.push_back(node.args[a]);
    dying.push_back(value);
    std::sort(dying.begin(), dying.end());
    dying.erase(std::unique(dying.begin(), dying.end()), dying.end());
    for (int v : dying) {
      if (v < n_in || last_use[static_cast<size_t>(v)] != k) continue;
      if (k == static_cast<int>(g.nodes.size()) - 1) continue;  // the end frees everything
      const int b = plan.buffer_of[static_cast<size_t>(v)];
      plan.steps.push_back({BufferStep::Kind::kFree, v, b});
      free_buffers.push_back(b);
      --in_use;
    }
  }
  return plan;
}

int LivenessBound(const Subgraph& g) {
  const int n_in = static_cast<int>(g.inputs.size());
  const std::vector<int> last_use = LastUse(g);
  int bound = 0;
  for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
    int live = 0;
    for (int j = 0; j <= k; ++j) {
      if (last_use[static_cast<size_t>(n_in + j)] >= k) ++live;
    }
    bound = std::max(bound, live);
  }
  return bound;
}

}  // namespace sluice::framework::compiler
