// PlanStorageHandoffs on hand-built graphs (PlanNodes and FormSegments make the nodes and
// segments, as Build does): in a chain of same-shaped temporaries each release hands its
// storage to the next first write and the chain runs on two blobs; a fetched temporary
// takes nothing and its allocation ends the waiting releases' chances; a different shape,
// an allocation in between, or another stream stops a hand-off (another segment of the
// same stream does not); one release goes to one
// taker; and random graphs keep the rule (checked against a reading of it written apart).
#include "framework/interpreter/storage_handoff.h"

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/interpreter/gc_plan.h"
#include "framework/interpreter/segments.h"
#include "gtest/gtest.h"
#include "tests/framework/lowered_graph_test_util.h"
#include "vm/blob.h"

namespace sluice::framework::storage_handoff_test {
namespace {

using graph_test::Func;

const Shape kSmall({4});
const Shape kLarge({8});

// Slots of the given shapes, all temporaries, each bound to a blob of its own (never run:
// only identity matters).
VarTable Temps(const std::vector<Shape>& shapes) {
  VarTable table;
  for (size_t v = 0; v < shapes.size(); ++v) {
    VarSlot& slot = graph_test::AddSlot(table, absl::StrCat("t", v), VarKind::kTemp);
    slot.device = Device(DeviceType::kCpu, 0);
    slot.shape = shapes[v];
    slot.blob = vm::BlobRef(new vm::Blob(v + 1, slot.device, slot.dtype, slot.shape, ""));
  }
  return table;
}

struct Planned {
  std::vector<Node> nodes;
  int handoffs = 0;
};

// One stream; dependences: each func after every earlier func touching one of its slots.
Planned Plan(const std::vector<OpFunc>& funcs, VarTable& vars, bool fuse = true,
             std::vector<int> streams = {}, std::vector<bool> host = {true, true}) {
  DependencyGraph deps;
  deps.predecessors.resize(funcs.size());
  for (size_t f = 0; f < funcs.size(); ++f) {
    for (size_t e = 0; e < f; ++e) {
      bool shared = false;
      for (int a : funcs[f].inputs) {
        for (int b : funcs[e].outputs) shared |= a == b;
      }
      for (int a : funcs[f].outputs) {
        for (int b : funcs[e].inputs) shared |= a == b;
        for (int b : funcs[e].outputs) shared |= a == b;
      }
      if (shared) deps.predecessors[f].push_back(static_cast<int>(e));
    }
  }
  if (streams.empty()) streams.assign(funcs.size(), 0);
  Planned out;
  out.nodes = PlanNodes(funcs, vars, deps, streams, /*release_temporaries=*/true);
  const std::vector<Segment> segments = FormSegments(out.nodes, fuse);
  out.handoffs = PlanStorageHandoffs(funcs, segments, out.nodes, vars, host);
  return out;
}

int ReleaseSteps(const std::vector<Node>& nodes) {
  int n = 0;
  for (const Node& node : nodes) n += node.op < 0 && node.handoff_to < 0;
  return n;
}

TEST(StorageHandoffTest, ChainRunsOnTwoBlobsAndTheFetchedEndAllocates) {
  // t_i = g(t_{i-1}), t5 fetched.
  VarTable vars = Temps(std::vector<Shape>(6, kSmall));
  vars.slots[5].fetched = true;
  std::vector<OpFunc> funcs = {Func({}, {0})};
  for (int i = 1; i < 6; ++i) funcs.push_back(Func({i - 1}, {i}));
  const Planned p = Plan(funcs, vars);
  // r(t0) -> t2, r(t1) -> t3, r(t2) -> t4; r(t3) waits, and t5's allocation ends that.
  EXPECT_EQ(p.handoffs, 3);
  EXPECT_EQ(ReleaseSteps(p.nodes), 2);
  EXPECT_EQ(vars.slots[2].blob.get(), vars.slots[0].blob.get());
  EXPECT_EQ(vars.slots[4].blob.get(), vars.slots[0].blob.get());
  EXPECT_EQ(vars.slots[3].blob.get(), vars.slots[1].blob.get());
  EXPECT_NE(vars.slots[1].blob.get(), vars.slots[0].blob.get());
  EXPECT_NE(vars.slots[5].blob.get(), vars.slots[3].blob.get());
  for (const Node& node : p.nodes) {
    if (node.op >= 0 || node.handoff_to < 0) continue;
    EXPECT_EQ(node.handoff_to, node.var + 2) << "release of t" << node.var;
  }
}

TEST(StorageHandoffTest, OtherShapeAllocationInBetweenOrOtherStreamStopsIt) {
  {
    // t0 (small) released before t2 (large) is first written: no taker.
    VarTable vars = Temps({kSmall, kSmall, kLarge, kLarge});
    vars.slots[3].fetched = true;
    const Planned p = Plan({Func({}, {0}), Func({0}, {1}), Func({1}, {2}), Func({2}, {3})}, vars);
    EXPECT_EQ(p.handoffs, 0);
  }
  {
    // r(t0), then t2 (large) allocated, then t3 (small, t0's shape): t0's storage would
    // sit beside t2's — no hand-off.
    VarTable vars = Temps({kSmall, kSmall, kLarge, kSmall});
    vars.slots[3].fetched = false;
    const Planned p =
        Plan({Func({}, {0}), Func({0}, {1}), Func({1}, {2}), Func({1, 2}, {3})}, vars);
    for (const Node& node : p.nodes) {
      if (node.op < 0 && node.var == 0) EXPECT_EQ(node.handoff_to, -1);
    }
    EXPECT_NE(vars.slots[3].blob.get(), vars.slots[0].blob.get());
  }
  {
    // A chain with fusion off (every node its own segment) still runs in order on its
    // stream: hand-offs as in one segment. Its second half on another stream: none from
    // the first half's releases to it.
    VarTable vars = Temps(std::vector<Shape>(6, kSmall));
    std::vector<OpFunc> funcs = {Func({}, {0})};
    for (int i = 1; i < 6; ++i) funcs.push_back(Func({i - 1}, {i}));
    const Planned one = Plan(funcs, vars, /*fuse=*/false);
    EXPECT_EQ(one.handoffs, 4);
    // On a device stream, only within a segment: none here.
    VarTable device = Temps(std::vector<Shape>(6, kSmall));
    EXPECT_EQ(Plan(funcs, device, /*fuse=*/false, {}, /*host=*/{false}).handoffs, 0);
    VarTable split = Temps(std::vector<Shape>(6, kSmall));
    const Planned two = Plan(funcs, split, /*fuse=*/true, {0, 0, 0, 1, 1, 1});
    for (const Node& node : two.nodes) {
      if (node.op >= 0 || node.handoff_to < 0) continue;
      EXPECT_NE(node.handoff_to, 3) << "t3 is first written on stream 1";
      EXPECT_NE(node.handoff_to, 4) << "t4 is first written on stream 1";
    }
  }
}

TEST(StorageHandoffTest, OneReleaseGoesToOneTaker) {
  // f2 first-writes t2 and t3 (t3 listed twice) when only t0's release waits: t2 takes it,
  // t3 allocates. Then t1's release goes to f3's t4.
  VarTable vars = Temps(std::vector<Shape>(5, kSmall));
  const Planned p =
      Plan({Func({}, {0}), Func({0}, {1}), Func({1}, {2, 3, 3}), Func({2, 3}, {4})}, vars);
  EXPECT_EQ(p.handoffs, 2);
  EXPECT_EQ(vars.slots[2].blob.get(), vars.slots[0].blob.get());
  EXPECT_EQ(vars.slots[4].blob.get(), vars.slots[1].blob.get());
  EXPECT_NE(vars.slots[3].blob.get(), vars.slots[0].blob.get());
  EXPECT_NE(vars.slots[3].blob.get(), vars.slots[1].blob.get());
}

// The rule read apart from the pass, over random one- and two-stream graphs: every hand-off
// is from a release to a same-shaped first write later in the same segment, with no other
// first write between that allocates; each release gives once and each slot takes once.
TEST(StorageHandoffTest, RandomGraphsKeepTheRule) {
  for (int seed = 0; seed < 300; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937 rng(seed);
    const int n_vars = 4 + seed % 9;
    std::vector<Shape> shapes;
    for (int v = 0; v < n_vars; ++v) shapes.push_back(rng() % 3 == 0 ? kLarge : kSmall);
    VarTable vars = Temps(shapes);
    std::vector<vm::Blob*> original;
    for (const VarSlot& slot : vars.slots) original.push_back(slot.blob.get());
    std::vector<OpFunc> funcs;
    std::vector<bool> written(n_vars, false);
    std::vector<int> streams;
    const int n_funcs = 3 + seed % 17;
    for (int f = 0; f < n_funcs; ++f) {
      std::vector<int> in, out;
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
        const int v = static_cast<int>(rng() % n_vars);
        if (written[v]) in.push_back(v);
      }
      out.push_back(static_cast<int>(rng() % n_vars));
      written[out.back()] = true;
      funcs.push_back(Func(in, out));
      streams.push_back(seed % 2 == 0 ? 0 : static_cast<int>(rng() % 2));
    }
    if (rng() % 2 == 0) vars.slots[funcs.back().outputs[0]].fetched = true;
    const Planned p =
        Plan(funcs, vars, /*fuse=*/true, streams,
             seed % 3 == 0 ? std::vector<bool>{false, false} : std::vector<bool>{true, true});

    std::vector<int> first_node(n_vars, -1);  // node of each slot's first write
    for (size_t b = 0; b < p.nodes.size(); ++b) {
      if (p.nodes[b].op < 0) continue;
      for (int v : funcs[p.nodes[b].op].outputs) {
        if (first_node[v] < 0) first_node[v] = static_cast<int>(b);
      }
    }
    std::vector<int> takes(n_vars, 0);
    for (const Node& node : p.nodes) {
      if (node.op < 0 && node.handoff_to >= 0) ++takes[node.handoff_to];
    }
    int seen = 0;
    for (size_t r = 0; r < p.nodes.size(); ++r) {
      const Node& node = p.nodes[r];
      if (node.op >= 0 || node.handoff_to < 0) continue;
      ++seen;
      const int y = node.handoff_to;
      EXPECT_EQ(vars.slots[y].shape, vars.slots[node.var].shape);
      EXPECT_FALSE(vars.slots[y].fetched);
      const int w = first_node[y];
      ASSERT_GT(w, static_cast<int>(r));
      EXPECT_EQ(p.nodes[w].stream, node.stream);
      if (seed % 3 == 0) EXPECT_EQ(p.nodes[w].segment, node.segment);  // device streams
      EXPECT_EQ(node.drops, 0);
      for (int b = static_cast<int>(r) + 1; b < w; ++b) {
        if (p.nodes[b].op < 0 || p.nodes[b].stream != node.stream) continue;
        for (int v : funcs[p.nodes[b].op].outputs) {
          // A first write between them must itself take released storage.
          EXPECT_TRUE(first_node[v] != b || takes[v] == 1)
              << "t" << v << " is allocated between the release of t" << node.var << " and t" << y
              << "'s first write";
        }
      }
    }
    EXPECT_EQ(seen, p.handoffs);
    for (int v = 0; v < n_vars; ++v) {
      EXPECT_LE(takes[v], 1);
      if (takes[v] == 0) EXPECT_EQ(vars.slots[v].blob.get(), original[v]);
    }
  }
}

}  // namespace
}  // namespace sluice::framework::storage_handoff_test
