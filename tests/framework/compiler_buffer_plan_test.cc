// PlanBuffers and LivenessBound: crafted subgraphs whose plans are worked by hand (a chain, a
// value with several readers, outputs live to the end, a node nobody reads), and random valid
// subgraphs whose step lists are replayed against the buffer plan's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/compiler/buffer_plan.h"

namespace sluice::framework::compiler::compiler_buffer_plan_test {
namespace {

using Kind = BufferStep::Kind;

// A subgraph over [4] f32 with `n_in` inputs; nodes added in order.
struct GraphBuilder {
  Subgraph g;
  explicit GraphBuilder(int n_in) {
    g.domain = Shape({4});
    for (int i = 0; i < n_in; ++i) g.inputs.push_back({DataType::kF32, Shape({4})});
  }
  int Node(ExprOp op, std::vector<int> args) {
    ExprNode n;
    n.op = op;
    for (size_t a = 0; a < args.size(); ++a) n.args[a] = args[a];
    g.nodes.push_back(n);
    return g.num_values() - 1;
  }
};

std::string StepsText(const BufferPlan& plan) {
  std::string text;
  for (const BufferStep& s : plan.steps) {
    const char* kind = s.kind == Kind::kMalloc ? "M" : s.kind == Kind::kCompute ? "C" : "F";
    absl::StrAppend(&text, kind, s.value, "@", s.buffer, " ");
  }
  return text;
}

TEST(BufferPlanTest, ChainNeedsTwoBuffers) {
  GraphBuilder b(1);
  const int v1 = b.Node(ExprOp::kExp, {0});
  const int v2 = b.Node(ExprOp::kRelu, {v1});
  const int v3 = b.Node(ExprOp::kTanh, {v2});
  const int v4 = b.Node(ExprOp::kSqrt, {v3});
  b.g.outputs = {v4};
  ASSERT_TRUE(b.g.Validate().ok());
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(LivenessBound(b.g), 2);
  EXPECT_EQ(plan.peak_buffers, 2);
  EXPECT_EQ(plan.num_buffers, 2);
  EXPECT_EQ(plan.buffer_of, (std::vector<int>{-1, 0, 1, 0, 1}));
  // Each value is freed right after its only reader; the last node frees nothing.
  EXPECT_EQ(StepsText(plan), "M1@0 C1@0 M2@1 C2@1 F1@0 M3@0 C3@0 F2@1 M4@1 C4@1 ");
}

TEST(BufferPlanTest, ValueWithSeveralReadersLivesToTheLast) {
  // v1 = exp(x), v2 = relu(v1), v3 = tanh(v1), v4 = v2 + v3, v5 = v4 * v1.
  // Live at each node: {v1}, {v1 v2}, {v1 v2 v3}, {v1 v2 v3 v4}, {v1 v4 v5}: bound 4.
  GraphBuilder b(1);
  const int v1 = b.Node(ExprOp::kExp, {0});
  const int v2 = b.Node(ExprOp::kRelu, {v1});
  const int v3 = b.Node(ExprOp::kTanh, {v1});
  const int v4 = b.Node(ExprOp::kAdd, {v2, v3});
  const int v5 = b.Node(ExprOp::kMul, {v4, v1});
  b.g.outputs = {v5};
  ASSERT_TRUE(b.g.Validate().ok());
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(LivenessBound(b.g), 4);
  EXPECT_EQ(plan.peak_buffers, 4);
  EXPECT_EQ(plan.num_buffers, 4);
  // v2 and v3 die at v4 (freed in value order); v5 takes the buffer freed last (v3's).
  EXPECT_EQ(StepsText(plan), "M1@0 C1@0 M2@1 C2@1 M3@2 C3@2 M4@3 C4@3 F2@1 F3@2 M5@2 C5@2 ");
  EXPECT_EQ(plan.buffer_of, (std::vector<int>{-1, 0, 1, 2, 3, 2}));
}

TEST(BufferPlanTest, OutputsLiveToTheEnd) {
  // v1 = exp(x) (output, read by nobody), v2 = relu(x) (unread), v3 = tanh(x) (output).
  GraphBuilder b(1);
  const int v1 = b.Node(ExprOp::kExp, {0});
  const int v2 = b.Node(ExprOp::kRelu, {0});
  const int v3 = b.Node(ExprOp::kTanh, {0});
  b.g.outputs = {v3, v1};
  ASSERT_TRUE(b.g.Validate().ok());
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(LivenessBound(b.g), 2);
  EXPECT_EQ(plan.peak_buffers, 2);
  EXPECT_EQ(plan.num_buffers, 2);
  EXPECT_EQ(StepsText(plan), "M1@0 C1@0 M2@1 C2@1 F2@1 M3@1 C3@1 ");
  (void)v2;
}

TEST(BufferPlanTest, NodeNobodyReadsIsFreedAtOnce) {
  GraphBuilder b(2);
  const int dead = b.Node(ExprOp::kAdd, {0, 1});
  const int out = b.Node(ExprOp::kSub, {1, 0});
  b.g.outputs = {out};
  ASSERT_TRUE(b.g.Validate().ok());
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(LivenessBound(b.g), 1);
  EXPECT_EQ(plan.peak_buffers, 1);
  EXPECT_EQ(plan.num_buffers, 1);
  EXPECT_EQ(StepsText(plan), "M2@0 C2@0 F2@0 M3@0 C3@0 ");
  EXPECT_EQ(plan.buffer_of, (std::vector<int>{-1, -1, 0, 0}));
  (void)dead;
}

TEST(BufferPlanTest, RepeatedArgumentIsFreedOnce) {
  GraphBuilder b(1);
  const int v1 = b.Node(ExprOp::kExp, {0});
  const int v2 = b.Node(ExprOp::kMul, {v1, v1});
  const int v3 = b.Node(ExprOp::kDivGradY, {v2, v2, v2});
  const int v4 = b.Node(ExprOp::kNeg, {v3});
  b.g.outputs = {v4};
  ASSERT_TRUE(b.g.Validate().ok());
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(StepsText(plan), "M1@0 C1@0 M2@1 C2@1 F1@0 M3@0 C3@0 F2@1 M4@1 C4@1 ");
}

TEST(BufferPlanTest, SingleNode) {
  GraphBuilder b(3);
  b.g.outputs = {b.Node(ExprOp::kSgd, {0, 1, 2})};
  const BufferPlan plan = PlanBuffers(b.g);
  EXPECT_EQ(LivenessBound(b.g), 1);
  EXPECT_EQ(plan.peak_buffers, 1);
  EXPECT_EQ(plan.num_buffers, 1);
  EXPECT_EQ(StepsText(plan), "M3@0 C3@0 ");
}

// A random valid subgraph: 1..4 inputs, 1..40 nodes of random ops (arguments mostly recent
// values, f32 and f64 through casts), 1..4 distinct outputs.
Subgraph RandomGraph(std::mt19937& rng) {
  auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Subgraph g;
  g.domain = Shape({8});
  const int n_in = 1 + uniform(4);
  for (int i = 0; i < n_in; ++i) {
    g.inputs.push_back({uniform(4) == 0 ? DataType::kF64 : DataType::kF32, Shape({8})});
  }
  const int n_nodes = 1 + uniform(40);
  for (int k = 0; k < n_nodes; ++k) {
    const int values = g.num_values();
    // An argument: a recent value half of the time, else any earlier one.
    auto pick = [&]() {
      return uniform(2) == 0 ? std::max(0, values - 1 - uniform(4)) : uniform(values);
    };
    ExprNode n;
    n.op = static_cast<ExprOp>(uniform(kNumExprOps));
    const int first = pick();
    n.dtype = g.dtype_of(first);
    if (n.op == ExprOp::kCast) {
      n.dtype = uniform(2) == 0 ? DataType::kF32 : DataType::kF64;
      n.args[0] = first;
    } else {
      n.args[0] = first;
      for (int a = 1; a < ExprOpArity(n.op); ++a) {
        int v = pick();
        for (int tries = 0; tries < 8 && g.dtype_of(v) != n.dtype; ++tries) v = pick();
        n.args[a] = g.dtype_of(v) == n.dtype ? v : first;
      }
    }
    if (n.op == ExprOp::kScale) {
      n.params[0] = 2;
      n.params[1] = -1;
    }
    g.nodes.push_back(n);
  }
  const int n_out = 1 + uniform(std::min(4, n_nodes));
  while (static_cast<int>(g.outputs.size()) < n_out) {
    const int v = n_in + uniform(n_nodes);
    if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) g.outputs.push_back(v);
  }
  return g;
}

// Replays `plan` over `g`, checking every rule of buffer_plan.h. Returns the most buffers
// held at once.
int Replay(const Subgraph& g, const BufferPlan& plan) {
  const int n_in = static_cast<int>(g.inputs.size());
  const int n_nodes = static_cast<int>(g.nodes.size());
  const int n_values = g.num_values();
  // The last node reading each value, computed here from def-use.
  std::vector<int> last_reader(static_cast<size_t>(n_values), -1);
  for (int k = 0; k < n_nodes; ++k) {
    const ExprNode& node = g.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < ExprOpArity(node.op); ++a)
      last_reader[static_cast<size_t>(node.args[a])] = k;
  }
  auto is_output = [&](int v) {
    return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
  };
  EXPECT_EQ(plan.buffer_of.size(), static_cast<size_t>(n_values));
  for (int v = 0; v < n_in; ++v) EXPECT_EQ(plan.buffer_of[static_cast<size_t>(v)], -1);

  std::vector<int> holder(static_cast<size_t>(plan.num_buffers), -1);  // per buffer
  std::vector<int> held_in(static_cast<size_t>(n_values), -1);         // per value
  std::vector<bool> freed(static_cast<size_t>(n_values), false);
  int computed = 0;  // nodes computed so far
  int held = 0, peak = 0;
  size_t i = 0;
  for (int k = 0; k < n_nodes; ++k) {
    const int value = n_in + k;
    // Malloc, then Compute, of node k.
    if (i + 1 >= plan.steps.size()) {
      ADD_FAILURE() << "steps end before node " << k;
      return peak;
    }
    const BufferStep& m = plan.steps[i++];
    const BufferStep& c = plan.steps[i++];
    EXPECT_EQ(m.kind, Kind::kMalloc) << "node " << k;
    EXPECT_EQ(c.kind, Kind::kCompute) << "node " << k;
    EXPECT_EQ(m.value, value);
    EXPECT_EQ(c.value, value);
    EXPECT_EQ(m.buffer, c.buffer);
    EXPECT_EQ(m.buffer, plan.buffer_of[static_cast<size_t>(value)]);
    if (m.buffer < 0 || m.buffer >= plan.num_buffers) {
      ADD_FAILURE() << "node " << k << " buffer " << m.buffer;
      return peak;
    }
    EXPECT_EQ(holder[static_cast<size_t>(m.buffer)], -1)
        << "node " << k << " takes buffer " << m.buffer << " held by value "
        << holder[static_cast<size_t>(m.buffer)];
    holder[static_cast<size_t>(m.buffer)] = value;
    held_in[static_cast<size_t>(value)] = m.buffer;
    peak = std::max(peak, ++held);
    const ExprNode& node = g.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < ExprOpArity(node.op); ++a) {
      const int v = node.args[a];
      if (v < n_in) continue;
      const int b = held_in[static_cast<size_t>(v)];
      EXPECT_TRUE(b >= 0 && holder[static_cast<size_t>(b)] == v)
          << "node " << k << " reads value " << v << " whose buffer is not held";
    }
    ++computed;
    // Frees after node k.
    while (i < plan.steps.size() && plan.steps[i].kind == Kind::kFree) {
      const BufferStep& f = plan.steps[i++];
      const int v = f.value;
      EXPECT_GE(v, n_in) << "an input freed";
      if (v < n_in || v >= n_values) continue;
      EXPECT_FALSE(is_output(v)) << "output " << v << " freed after node " << k;
      EXPECT_FALSE(freed[static_cast<size_t>(v)]) << "value " << v << " freed twice";
      EXPECT_LT(v, n_in + computed) << "value " << v << " freed before it is computed";
      EXPECT_LE(last_reader[static_cast<size_t>(v)], k)
          << "value " << v << " freed after node " << k << " but read by node "
          << last_reader[static_cast<size_t>(v)];
      EXPECT_EQ(f.buffer, held_in[static_cast<size_t>(v)]);
      EXPECT_EQ(holder[static_cast<size_t>(f.buffer)], v);
      holder[static_cast<size_t>(f.buffer)] = -1;
      held_in[static_cast<size_t>(v)] = -1;
      freed[static_cast<size_t>(v)] = true;
      --held;
    }
  }
  EXPECT_EQ(i, plan.steps.size()) << "steps after the last node";
  // Every value that dies before the last node is freed (so buffers are reused), and at its
  // last use: its last reader, or its own node when nothing reads it.
  for (int v = n_in; v < n_values; ++v) {
    const int k = v - n_in;
    const int last_use = std::max(last_reader[static_cast<size_t>(v)], k);
    const bool dies_early = !is_output(v) && last_use < n_nodes - 1;
    EXPECT_EQ(freed[static_cast<size_t>(v)], dies_early) << "value " << v;
  }
  // Outputs are all held at the end.
  for (int o : g.outputs) EXPECT_GE(held_in[static_cast<size_t>(o)], 0) << "output " << o;
  return peak;
}

// The liveness bound, counted independently: at node k, the values defined at or before k
// whose last use (last reader, own node, or the end for an output) is at or after k.
int CountLive(const Subgraph& g) {
  const int n_in = static_cast<int>(g.inputs.size());
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> end(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) end[static_cast<size_t>(k)] = k;
  for (int k = 0; k < n; ++k) {
    const ExprNode& node = g.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < ExprOpArity(node.op); ++a) {
      if (node.args[a] >= n_in) end[static_cast<size_t>(node.args[a] - n_in)] = k;
    }
  }
  for (int o : g.outputs) end[static_cast<size_t>(o - n_in)] = n - 1;
  int best = 0;
  for (int k = 0; k < n; ++k) {
    int live = 0;
    for (int j = 0; j <= k; ++j) live += end[static_cast<size_t>(j)] >= k ? 1 : 0;
    best = std::max(best, live);
  }
  return best;
}

TEST(BufferPlanTest, RandomGraphsReachTheLivenessBound) {
  int reused = 0;
  for (int seed = 0; seed < 1000; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    const Subgraph g = RandomGraph(rng);
    ASSERT_TRUE(g.Validate().ok()) << g.Validate() << " seed " << seed;
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + g.ToText());
    const BufferPlan plan = PlanBuffers(g);
    const int bound = LivenessBound(g);
    EXPECT_EQ(bound, CountLive(g));
    EXPECT_EQ(plan.peak_buffers, bound);
    EXPECT_EQ(plan.num_buffers, bound);
    EXPECT_EQ(Replay(g, plan), plan.peak_buffers);
    if (HasFailure()) return;
    reused += plan.num_buffers < static_cast<int>(g.nodes.size()) ? 1 : 0;
  }
  EXPECT_GT(reused, 500);  // most graphs do reuse buffers
}

}  // namespace
}  // namespace sluice::framework::compiler::compiler_buffer_plan_test
