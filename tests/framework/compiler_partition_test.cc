// Partition: crafted blocks with known groups (chains, diamonds, cycles that merging would
// close, pinned and externally read values, streams, devices, shapes, variables written
// twice, grad ops, sgd in place), and random blocks checked against the header's rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"
#include "framework/compiler/op_lowering.h"
#include "framework/compiler/partition.h"

namespace sluice::framework::compiler::compiler_partition_test {
namespace {

// A block under construction: variables, then ops in program order. Preds are derived from
// the reads and writes in program order (Finish).
class Block {
 public:
  int Var(Shape shape, bool pinned = false, DataType dtype = DataType::kF32) {
    PartitionVar var;
    var.meta = {dtype, std::move(shape)};
    var.pinned = pinned;
    vars_.push_back(var);
    return static_cast<int>(vars_.size()) - 1;
  }

  int Op(std::string type, std::vector<int> inputs, std::vector<int> outputs,
         const vm::AttrMap* attrs = nullptr) {
    PartitionOp op;
    op.type = std::move(type);
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    op.attrs = attrs;
    ops_.push_back(op);
    return static_cast<int>(ops_.size()) - 1;
  }

  // Attribute maps the block's ops point to (stable addresses).
  const vm::AttrMap* Scale(double scale, double bias) {
    attrs_.emplace_back();
    attrs_.back().Set("scale", scale).Set("bias", bias);
    return &attrs_.back();
  }
  const vm::AttrMap* Cast(DataType to) {
    attrs_.emplace_back();
    attrs_.back().Set("dtype", std::string(DataTypeName(to)));
    return &attrs_.back();
  }

  PartitionOp& op(int u) { return ops_[static_cast<size_t>(u)]; }
  std::vector<PartitionOp>& ops() { return ops_; }
  std::vector<PartitionVar>& vars() { return vars_; }

  // Computes every op's preds: read after write, write after read, write after write.
  void Finish() {
    std::vector<int> last_writer(vars_.size(), -1);
    std::vector<std::vector<int>> readers(vars_.size());  // since the last write
    for (size_t u = 0; u < ops_.size(); ++u) {
      std::set<int> preds;
      for (int v : ops_[u].inputs) {
        if (last_writer[static_cast<size_t>(v)] >= 0)
          preds.insert(last_writer[static_cast<size_t>(v)]);
      }
      for (int v : ops_[u].outputs) {
        if (last_writer[static_cast<size_t>(v)] >= 0)
          preds.insert(last_writer[static_cast<size_t>(v)]);
        for (int r : readers[static_cast<size_t>(v)]) preds.insert(r);
      }
      preds.erase(static_cast<int>(u));
      ops_[u].preds.assign(preds.begin(), preds.end());
      for (int v : ops_[u].inputs) readers[static_cast<size_t>(v)].push_back(static_cast<int>(u));
      for (int v : ops_[u].outputs) {
        last_writer[static_cast<size_t>(v)] = static_cast<int>(u);
        readers[static_cast<size_t>(v)].clear();
      }
    }
  }

  std::vector<PartitionGroup> Run(const PartitionOptions& options = {}) {
    Finish();
    return Partition(ops_, vars_, options);
  }

 private:
  std::vector<PartitionVar> vars_;
  std::vector<PartitionOp> ops_;
  std::deque<vm::AttrMap> attrs_;
};

// The group containing op `u`, or -1.
int GroupOf(const std::vector<PartitionGroup>& groups, int u) {
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int>& ops = groups[g].ops;
    if (std::find(ops.begin(), ops.end(), u) != ops.end()) return static_cast<int>(g);
  }
  return -1;
}

StreamKey Stream(Device device, int index) {
  StreamKey key;
  key.device = device;
  key.index = index;
  return key;
}

TEST(PartitionTest, ChainFusesIntoOneGroup) {
  Block b;
  const int x = b.Var({4, 8}, /*pinned=*/true);
  const int w = b.Var({8}, /*pinned=*/true);
  const int v1 = b.Var({4, 8});
  const int v2 = b.Var({4, 8});
  const int v3 = b.Var({4, 8});
  const int y = b.Var({4, 8}, /*pinned=*/true);
  b.Op("exp", {x}, {v1});
  b.Op("scale", {v1}, {v2}, b.Scale(2, 1));
  b.Op("relu", {v2}, {v3});
  b.Op("mul", {v3, w}, {y});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  const PartitionGroup& g = groups[0];
  EXPECT_EQ(g.ops, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(g.graph.fused, (std::vector<std::string>{"exp", "scale", "relu", "mul"}));
  EXPECT_EQ(g.input_vars, (std::vector<int>{x, w}));
  EXPECT_EQ(g.output_vars, (std::vector<int>{y}));
  EXPECT_EQ(g.graph.ToText(),
            "sg1/d:4x8/i:f32:4x8/i:f32:8/n:exp:f32:0/n:scale:f32:2:2:1/n:relu:f32:3/"
            "n:mul:f32:4:1/o:5/f:exp+scale+relu+mul");
  EXPECT_EQ(g.graph.KernelName(), "fused[exp+scale+relu+mul]");
  EXPECT_TRUE(g.graph.Validate().ok());
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
}

TEST(PartitionTest, DiamondFusesIntoOneGroup) {
  Block b;
  const int x = b.Var({5}, true);
  const int a = b.Var({5});
  const int l = b.Var({5});
  const int r = b.Var({5});
  const int d = b.Var({5}, true);
  b.Op("exp", {x}, {a});
  b.Op("relu", {a}, {l});
  b.Op("tanh", {a}, {r});
  b.Op("add", {l, r}, {d});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{d}));
  EXPECT_EQ(groups[0].graph.ToText(),
            "sg1/d:5/i:f32:5/n:exp:f32:0/n:relu:f32:1/n:tanh:f32:1/n:add:f32:2:3/o:4/"
            "f:exp+relu+tanh+add");
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
}

// a = exp(x); m = matmul(a, w) (not fusible); c = add(a, m): c joining a's group would
// make a cycle group -> matmul -> group.
TEST(PartitionTest, DoesNotMergeAcrossCycleThroughNonFusibleOp) {
  Block b;
  const int x = b.Var({4, 4}, true);
  const int w = b.Var({4, 4}, true);
  const int a = b.Var({4, 4});
  const int m = b.Var({4, 4});
  const int c = b.Var({4, 4}, true);
  b.Op("exp", {x}, {a});
  b.Op("matmul", {a, w}, {m});
  b.Op("add", {a, m}, {c});
  EXPECT_TRUE(b.Run().empty());  // two groups of one op each: nothing reported
  const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
  ASSERT_EQ(singles.size(), 2u);
  EXPECT_EQ(singles[0].ops, (std::vector<int>{0}));
  EXPECT_EQ(singles[1].ops, (std::vector<int>{2}));
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), singles));
}

// a = exp(x) (unfixed stream); b = relu(a), c = tanh(b) on a fixed stream (their own group);
// d = add(a, c) (unfixed): joining a's group would close group -> {b, c} -> group.
TEST(PartitionTest, DoesNotMergeAcrossCycleThroughAnotherGroup) {
  Block b;
  const StreamKey fixed = Stream(Device::Cpu(), 1);
  const int x = b.Var({6}, true);
  const int a = b.Var({6});
  const int v = b.Var({6});
  const int c = b.Var({6});
  const int d = b.Var({6}, true);
  b.Op("exp", {x}, {a});
  b.Op("relu", {a}, {v});
  b.op(1).stream = fixed;
  b.Op("tanh", {v}, {c});
  b.op(2).stream = fixed;
  b.Op("add", {a, c}, {d});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{1, 2}));
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
  const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
  EXPECT_NE(GroupOf(singles, 0), GroupOf(singles, 3));
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), singles));
}

// The path that closes the cycle runs through a group whose first op precedes the group
// being extended, and through an op that precedes it too:
//   0: a = exp(x)        [2, 3]  group X
//   1: h = reduce(a)     [3]     not fusible
//   2: b = exp(y)        [3]     group G
//   3: c = add(a, b)     [2, 3]  joins X (G's domain is [3])
//   4: d = add(h, b)     [3]     must not join G: G -> 3 (in X) ~ X -> 1 -> 4
// Contracting {2, 4} and {0, 3} gives G -> X -> reduce -> G.
TEST(PartitionTest, DoesNotMergeAcrossCycleThroughEarlierGroup) {
  Block b;
  const int x = b.Var({2, 3}, true);
  const int y = b.Var({3}, true);
  const int a = b.Var({2, 3});
  const int h = b.Var({3});
  const int bv = b.Var({3});
  const int c = b.Var({2, 3}, true);
  const int d = b.Var({3}, true);
  b.Op("exp", {x}, {a});
  b.Op("reduce_sum", {a}, {h});
  b.Op("exp", {y}, {bv});
  b.Op("add", {a, bv}, {c});
  b.Op("add", {h, bv}, {d});
  const std::vector<PartitionGroup> groups = b.Run();
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
  EXPECT_TRUE(GroupOf(groups, 4) < 0 || GroupOf(groups, 4) != GroupOf(groups, 2));
  const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), singles));
}

TEST(PartitionTest, PinnedIntermediatesBecomeOutputs) {
  Block b;
  const int x = b.Var({3, 2}, true);
  const int fetched = b.Var({3, 2}, true);
  const int internal = b.Var({3, 2});
  const int persistable = b.Var({3, 2}, true);
  const int fed = b.Var({3, 2}, true);  // fed before the block, written once in it
  const int last = b.Var({3, 2}, true);
  b.Op("exp", {x}, {fetched});
  b.Op("relu", {fetched}, {internal});
  b.Op("tanh", {internal}, {persistable});
  b.Op("sigmoid", {persistable}, {fed});
  b.Op("square", {fed}, {last});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{fetched, persistable, fed, last}));
  EXPECT_EQ(groups[0].graph.outputs.size(), 4u);
  EXPECT_EQ(groups[0].input_vars, (std::vector<int>{x}));
}

TEST(PartitionTest, ValuesReadOutsideTheGroupBecomeOutputs) {
  Block b;
  const int x = b.Var({8}, true);
  const int a = b.Var({8});
  const int v = b.Var({8});
  const int c = b.Var({8}, true);
  const int m = b.Var({8}, true);
  const int e = b.Var({8}, true);
  b.Op("exp", {x}, {a});
  b.Op("relu", {a}, {v});
  b.Op("tanh", {v}, {c});
  b.Op("reduce_sum", {v}, {m});  // not fusible, reads v after the group
  b.Op("add", {a, a}, {e});      // fusible type but not eligible (an inserted copy, say)
  b.op(4).eligible = false;
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{a, v, c}));
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
}

TEST(PartitionTest, DifferentStreamsOrDevicesNeverShareAGroup) {
  Block b;
  const Device sim0(DeviceType::kSim, 0);
  const Device sim1(DeviceType::kSim, 1);
  int prev = b.Var({16}, true);
  // A chain of ops, each placed as below; only neighbours placed alike may fuse.
  struct Placement {
    Device device;
    std::optional<StreamKey> stream;
  };
  const std::vector<Placement> placements = {
      {Device::Cpu(), std::nullopt},              // 0: unfixed, next to a fixed stream
      {Device::Cpu(), Stream(Device::Cpu(), 1)},  // 1: the same fixed stream as 2
      {Device::Cpu(), Stream(Device::Cpu(), 1)},  // 2
      {Device::Cpu(), Stream(Device::Cpu(), 2)},  // 3: another fixed stream
      {sim0, std::nullopt},                       // 4: the same device as 5, unfixed
      {sim0, std::nullopt},                       // 5
      {sim1, std::nullopt},                       // 6: another device
      {sim1, Stream(sim1, 0)},                    // 7: fixed next to unfixed
  };
  const char* types[] = {"exp", "relu", "tanh", "sigmoid"};
  for (size_t i = 0; i < placements.size(); ++i) {
    const int out = b.Var({16}, true);
    const int u = b.Op(types[i % 4], {prev}, {out});
    b.op(u).device = placements[i].device;
    b.op(u).stream = placements[i].stream;
    prev = out;
  }
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{1, 2}));
  EXPECT_EQ(groups[1].ops, (std::vector<int>{4, 5}));
  const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
  EXPECT_EQ(singles.size(), 6u);
  for (const PartitionGroup& g : singles) {
    for (int u : g.ops) {
      EXPECT_EQ(b.op(u).device, b.op(g.ops[0]).device);
      EXPECT_EQ(b.op(u).stream, b.op(g.ops[0]).stream);
    }
  }
}

TEST(PartitionTest, DifferentOutputShapeOrDtypeStartsANewGroup) {
  Block b;
  const int x = b.Var({3}, true);
  const int z = b.Var({2, 3}, true);
  const int a = b.Var({3});
  const int wide = b.Var({2, 3});
  const int wide2 = b.Var({2, 3}, true);
  const int a2 = b.Var({3}, true);
  const int d64 = b.Var({3}, false, DataType::kF64);
  const int e64 = b.Var({3}, true, DataType::kF64);
  b.Op("exp", {x}, {a});                             // 0: group A, domain [3]
  b.Op("add", {a, z}, {wide});                       // 1: broadcast to [2, 3]: group B
  b.Op("relu", {wide}, {wide2});                     // 2: B
  b.Op("tanh", {a}, {a2});                           // 3: A
  b.Op("cast", {a}, {d64}, b.Cast(DataType::kF64));  // 4: f64: group C
  b.Op("exp", {d64}, {e64});                         // 5: C
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{0, 3}));
  EXPECT_EQ(groups[1].ops, (std::vector<int>{1, 2}));
  EXPECT_EQ(groups[2].ops, (std::vector<int>{4, 5}));
  EXPECT_EQ(groups[1].graph.domain, Shape({2, 3}));
  EXPECT_EQ(groups[1].input_vars, (std::vector<int>{a, z}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{a, a2}));  // a is read by B and C
  EXPECT_EQ(groups[2].graph.ToText(), "sg1/d:3/i:f32:3/n:cast:f64:0/n:exp:f64:1/o:2/f:cast+exp");
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));
}

TEST(PartitionTest, VariableWrittenTwiceIsNotFused) {
  Block b;
  const int x = b.Var({4}, true);
  const int twice = b.Var({4});
  const int v = b.Var({4});
  const int c = b.Var({4}, true);
  b.Op("exp", {x}, {twice});   // 0: writes `twice`
  b.Op("relu", {twice}, {v});  // 1
  b.Op("tanh", {v}, {twice});  // 2: writes `twice` again
  b.Op("sqrt", {v}, {c});      // 3
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{1, 3}));
  EXPECT_EQ(groups[0].input_vars, (std::vector<int>{twice}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{v, c}));  // op 2 reads v
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), groups));

  // In place: x = relu(x) writes a fed variable whose first version nobody else made.
  Block in_place;
  const int p = in_place.Var({4}, true);
  const int q = in_place.Var({4}, true);
  in_place.Op("exp", {p}, {p});
  in_place.Op("relu", {p}, {p});
  in_place.Op("tanh", {p}, {q});
  EXPECT_EQ(in_place.Run({.min_ops = 1}).size(), 1u);  // tanh alone
}

TEST(PartitionTest, SingleOpGroupsAreNotReportedAndMinOpsApplies) {
  Block one;
  const int x = one.Var({4}, true);
  const int y = one.Var({4}, true);
  one.Op("exp", {x}, {y});
  EXPECT_TRUE(one.Run().empty());
  const std::vector<PartitionGroup> singles = one.Run({.min_ops = 1});
  ASSERT_EQ(singles.size(), 1u);
  EXPECT_EQ(singles[0].ops, (std::vector<int>{0}));
  EXPECT_EQ(singles[0].output_vars, (std::vector<int>{y}));

  Block chain;
  int prev = chain.Var({4}, true);
  for (int i = 0; i < 3; ++i) {
    const int out = chain.Var({4}, i == 2);
    chain.Op("relu", {prev}, {out});
    prev = out;
  }
  EXPECT_EQ(chain.Run({.min_ops = 3}).size(), 1u);
  EXPECT_TRUE(chain.Run({.min_ops = 4}).empty());
}

TEST(PartitionTest, BinaryGradOpsFuseOnlyWithoutBroadcasting) {
  // x, y, g of one shape: exp -> mul_grad -> add fuse; mul_grad is two nodes.
  Block b;
  const int x = b.Var({4, 3}, true);
  const int y = b.Var({4, 3}, true);
  const int g0 = b.Var({4, 3}, true);
  const int g = b.Var({4, 3});
  const int dx = b.Var({4, 3});
  const int dy = b.Var({4, 3});
  const int s = b.Var({4, 3}, true);
  b.Op("exp", {g0}, {g});
  b.Op("mul_grad", {x, y, g}, {dx, dy});
  b.Op("add", {dx, dy}, {s});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].graph.ToText(),
            "sg1/d:4x3/i:f32:4x3/i:f32:4x3/i:f32:4x3/n:exp:f32:0/n:mul:f32:3:2/n:mul:f32:3:1/"
            "n:add:f32:4:5/o:6/f:exp+mul_grad+add");

  // A broadcast operand (y of [3], so YGrad [3] reduces) keeps mul_grad out; so does a
  // broadcast OutGrad of the same output shape.
  for (const Shape& y_shape : {Shape({3}), Shape({4, 3})}) {
    const bool g_broadcast = y_shape == Shape({4, 3});
    Block bad;
    const int bx = bad.Var({4, 3}, true);
    const int by = bad.Var(y_shape, true);
    const int bg0 = bad.Var(g_broadcast ? Shape({1, 3}) : Shape({4, 3}), true);
    const int bg = bad.Var(g_broadcast ? Shape({1, 3}) : Shape({4, 3}));
    const int bdx = bad.Var({4, 3}, true);
    const int bdy = bad.Var(y_shape, true);
    bad.Op("exp", {bg0}, {bg});
    bad.Op("mul_grad", {bx, by, bg}, {bdx, bdy});
    EXPECT_TRUE(bad.Run().empty()) << y_shape.ToString();
    EXPECT_EQ(GroupOf(bad.Run({.min_ops = 1}), 1), -1) << y_shape.ToString();
  }
}

TEST(PartitionTest, SgdInPlaceFusesWithTheProducerOfItsGrad) {
  Block b;
  const int a = b.Var({4, 3}, true);
  const int c = b.Var({4, 3}, true);
  const int param = b.Var({4, 3}, true);  // persistable
  const int lr = b.Var({1}, true);
  const int grad = b.Var({4, 3});
  b.Op("mul", {a, c}, {grad});
  b.Op("sgd", {param, grad, lr}, {param});
  const std::vector<PartitionGroup> groups = b.Run();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].ops, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[0].input_vars, (std::vector<int>{a, c, param, lr}));
  EXPECT_EQ(groups[0].output_vars, (std::vector<int>{param}));
  EXPECT_EQ(groups[0].graph.ToText(),
            "sg1/d:4x3/i:f32:4x3/i:f32:4x3/i:f32:4x3/i:f32:1/n:mul:f32:0:1/n:sgd:f32:2:4:3/o:5/"
            "f:mul+sgd");
}

TEST(PartitionTest, ContractionIsAcyclicDetectsABadGrouping) {
  Block b;
  const int x = b.Var({4}, true);
  const int a = b.Var({4});
  const int m = b.Var({4});
  const int c = b.Var({4}, true);
  b.Op("exp", {x}, {a});
  b.Op("reduce_sum", {a}, {m});
  b.Op("add", {a, m}, {c});
  b.Finish();
  PartitionGroup bad;
  bad.ops = {0, 2};
  EXPECT_FALSE(ContractionIsAcyclic(b.ops(), {bad}));
  PartitionGroup fine;
  fine.ops = {1, 2};
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), {fine}));
  EXPECT_TRUE(ContractionIsAcyclic(b.ops(), {}));
  // Two groups each acyclic alone whose contraction together is cyclic: {0, 3}, {1, 2} with
  // 0 -> 1 and 2 -> 3.
  Block two;
  const int p = two.Var({4}, true);
  const int q = two.Var({4});
  const int r = two.Var({4});
  const int s = two.Var({4}, true);
  const int t = two.Var({4}, true);
  two.Op("exp", {p}, {q});
  two.Op("relu", {q}, {r});
  two.Op("tanh", {r}, {s});
  two.Op("add", {q, s}, {t});
  two.Finish();
  PartitionGroup g03, g12;
  g03.ops = {0, 3};
  g12.ops = {1, 2};
  EXPECT_TRUE(ContractionIsAcyclic(two.ops(), {g12}));
  EXPECT_FALSE(ContractionIsAcyclic(two.ops(), {g03}));
  EXPECT_FALSE(ContractionIsAcyclic(two.ops(), {g03, g12}));
}

// ---- Random blocks ----

// The numpy broadcast of a and b, if any.
std::optional<Shape> BroadcastOf(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    dims[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(absl::MakeConstSpan(dims));
}

// A block of `n` ops: fusible and non-fusible, some not eligible, random fixed streams and
// devices, broadcasting binary ops, f64 islands through casts, variables written twice and
// sgd updates in place.
void MakeRandomBlock(std::mt19937& rng, Block& b) {
  const std::vector<Shape> shapes = {{4, 3}, {3}, {1, 3}, {4, 1}, {2, 4, 3}, {}, {1}};
  auto uniform = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  const int n_in = 2 + uniform(4);
  for (int i = 0; i < n_in; ++i) {
    b.Var(shapes[static_cast<size_t>(uniform(static_cast<int>(shapes.size())))], true,
          chance(0.15) ? DataType::kF64 : DataType::kF32);
  }
  const int n_ops = 5 + uniform(36);
  const std::vector<Device> devices = {Device::Cpu(), Device(DeviceType::kSim, 0)};
  auto pick = [&]() { return uniform(static_cast<int>(b.vars().size())); };
  auto meta = [&](int v) { return b.vars()[static_cast<size_t>(v)].meta; };
  // An output variable of this metadata: usually new, sometimes one already written.
  auto output = [&](const Shape& shape, DataType dtype) {
    if (chance(0.08)) {
      for (int tries = 0; tries < 8; ++tries) {
        const int v = pick();
        if (meta(v).shape == shape && meta(v).dtype == dtype) return v;
      }
    }
    return b.Var(shape, chance(0.2), dtype);
  };
  const char* unary[] = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square"};
  const char* binary[] = {"add", "sub", "mul", "div", "max", "min"};
  const char* unary_grad[] = {"relu_grad", "sigmoid_grad", "tanh_grad",  "exp_grad",
                              "log_grad",  "sqrt_grad",    "square_grad"};
  const char* binary_grad[] = {"add_grad", "sub_grad", "mul_grad",
                               "div_grad", "max_grad", "min_grad"};
  for (int k = 0; k < n_ops; ++k) {
    const int kind = uniform(9);
    const int x = pick();
    const ValueMeta mx = meta(x);
    int u = -1;
    switch (kind) {
      case 0:
      case 1:
        u = b.Op(unary[uniform(7)], {x}, {output(mx.shape, mx.dtype)});
        break;
      case 2: {
        // The partner: broadcast-compatible, usually of the same dtype.
        int y = x;
        for (int tries = 0; tries < 8; ++tries) {
          const int c = pick();
          if (BroadcastOf(mx.shape, meta(c).shape).has_value() &&
              (meta(c).dtype == mx.dtype || chance(0.1))) {
            y = c;
            break;
          }
        }
        const Shape out = *BroadcastOf(mx.shape, meta(y).shape);
        u = b.Op(binary[uniform(6)], {x, y}, {output(out, mx.dtype)});
        break;
      }
      case 3: {
        int g = x;
        for (int tries = 0; tries < 8 && g == x; ++tries) {
          const int c = pick();
          if (meta(c).dtype == mx.dtype && (meta(c).shape == mx.shape || chance(0.2)) &&
              BroadcastOf(mx.shape, meta(c).shape) == mx.shape) {
            g = c;
          }
        }
        u = b.Op(unary_grad[uniform(7)], {x, g}, {output(mx.shape, mx.dtype)});
        break;
      }
      case 4: {
        std::vector<int> same = {x};
        for (int tries = 0; tries < 12 && same.size() < 3; ++tries) {
          const int c = pick();
          if (meta(c).dtype == mx.dtype && (meta(c).shape == mx.shape || chance(0.15))) {
            same.push_back(c);
          }
        }
        while (same.size() < 3) same.push_back(x);
        const Shape dy_shape = chance(0.85) ? meta(same[1]).shape : mx.shape;
        u = b.Op(binary_grad[uniform(6)], same,
                 {output(mx.shape, mx.dtype), output(dy_shape, mx.dtype)});
        break;
      }
      case 5: {
        const bool scale = chance(0.5);
        if (scale) {
          u = b.Op("scale", {x}, {output(mx.shape, mx.dtype)},
                   b.Scale(uniform(5) - 2, uniform(3) * 0.5));
        } else {
          const DataType to = mx.dtype == DataType::kF32 ? DataType::kF64 : DataType::kF32;
          u = b.Op("cast", {x}, {output(mx.shape, to)}, b.Cast(to));
        }
        break;
      }
      case 6: {
        // sgd on a pinned parameter, in place; lr one element.
        int g = x;
        for (int tries = 0; tries < 8; ++tries) {
          const int c = pick();
          if (meta(c).shape == mx.shape && meta(c).dtype == mx.dtype) g = c;
        }
        int param = x;
        if (!b.vars()[static_cast<size_t>(x)].pinned || chance(0.5)) {
          param = b.Var(mx.shape, true, mx.dtype);
        }
        const int lr = b.Var({1}, true, mx.dtype);
        u = b.Op("sgd", {param, g, lr}, {param});
        break;
      }
      case 7: {
        // Not fusible: a reduction to another shape, or a matmul-like op of two inputs.
        const Shape out = shapes[static_cast<size_t>(uniform(static_cast<int>(shapes.size())))];
        if (chance(0.5)) {
          u = b.Op("reduce_sum", {x}, {output(out, mx.dtype)});
        } else {
          u = b.Op("matmul", {x, pick()}, {output(out, mx.dtype)});
        }
        break;
      }
      default: {
        // A fusible type that is not eligible (control flow, inserted copies, ...).
        u = b.Op("relu", {x}, {output(mx.shape, mx.dtype)});
        b.op(u).eligible = false;
        break;
      }
    }
    if (chance(0.15)) b.op(u).device = devices[1];
    if (chance(0.25)) b.op(u).stream = Stream(b.op(u).device, uniform(2));
  }
}

// Every rule of partition.h that a result can be checked against, except acyclicity.
void CheckRules(Block& b, const std::vector<PartitionGroup>& groups, int min_ops,
                const std::string& where) {
  const std::vector<PartitionOp>& ops = b.ops();
  const std::vector<PartitionVar>& vars = b.vars();
  std::vector<int> writes(vars.size(), 0);
  std::vector<std::vector<int>> readers(vars.size());
  for (size_t u = 0; u < ops.size(); ++u) {
    for (int v : ops[u].outputs) ++writes[static_cast<size_t>(v)];
    for (int v : ops[u].inputs) readers[static_cast<size_t>(v)].push_back(static_cast<int>(u));
  }
  auto metas = [&](const std::vector<int>& ids) {
    std::vector<ValueMeta> m;
    for (int v : ids) m.push_back(vars[static_cast<size_t>(v)].meta);
    return m;
  };
  std::vector<int> group_of(ops.size(), -1);
  absl::flat_hash_set<int> outputs_seen;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const PartitionGroup& g = groups[gi];
    SCOPED_TRACE(where + " group " + std::to_string(gi) + ": " + g.graph.ToText());
    ASSERT_GE(static_cast<int>(g.ops.size()), min_ops);
    ASSERT_TRUE(std::is_sorted(g.ops.begin(), g.ops.end()));
    ASSERT_TRUE(g.graph.Validate().ok()) << g.graph.Validate();
    ASSERT_EQ(g.input_vars.size(), g.graph.inputs.size());
    ASSERT_EQ(g.output_vars.size(), g.graph.outputs.size());
    const PartitionOp& head = ops[static_cast<size_t>(g.ops[0])];
    const ValueMeta domain = vars[static_cast<size_t>(head.outputs[0])].meta;
    EXPECT_EQ(g.graph.domain, domain.shape);
    std::vector<std::string> types;
    absl::flat_hash_set<int> written;
    for (int u : g.ops) {
      const PartitionOp& op = ops[static_cast<size_t>(u)];
      ASSERT_EQ(group_of[static_cast<size_t>(u)], -1) << "op " << u << " in two groups";
      group_of[static_cast<size_t>(u)] = static_cast<int>(gi);
      types.push_back(op.type);
      EXPECT_TRUE(op.eligible) << "op " << u;
      EXPECT_TRUE(IsFusible(op.type, op.attrs, metas(op.inputs), metas(op.outputs))) << "op " << u;
      EXPECT_EQ(op.device, head.device) << "op " << u;
      EXPECT_EQ(op.stream, head.stream) << "op " << u;
      for (int v : op.outputs) {
        EXPECT_EQ(writes[static_cast<size_t>(v)], 1) << "op " << u << " var " << v;
        EXPECT_EQ(vars[static_cast<size_t>(v)].meta.shape, domain.shape) << "op " << u;
        EXPECT_EQ(vars[static_cast<size_t>(v)].meta.dtype, domain.dtype) << "op " << u;
        written.insert(v);
      }
      // Connected: every op after the first reads a value another member wrote before it.
      if (u != g.ops[0]) {
        bool fed_by_member = false;
        for (int v : op.inputs) {
          for (int w : g.ops) {
            if (w >= u) break;
            const std::vector<int>& outs = ops[static_cast<size_t>(w)].outputs;
            fed_by_member = fed_by_member || std::find(outs.begin(), outs.end(), v) != outs.end();
          }
        }
        EXPECT_TRUE(fed_by_member) << "op " << u << " joined without a producer in the group";
      }
    }
    EXPECT_EQ(g.graph.fused, types);
    for (size_t i = 0; i < g.input_vars.size(); ++i) {
      const int v = g.input_vars[i];
      EXPECT_EQ(g.graph.inputs[i].shape, vars[static_cast<size_t>(v)].meta.shape);
      EXPECT_EQ(g.graph.inputs[i].dtype, vars[static_cast<size_t>(v)].meta.dtype);
    }
    // Outputs: exactly the written vars that are pinned or read outside the group.
    std::set<int> want;
    for (int v : written) {
      bool visible = vars[static_cast<size_t>(v)].pinned;
      for (int r : readers[static_cast<size_t>(v)]) {
        visible = visible || std::find(g.ops.begin(), g.ops.end(), r) == g.ops.end();
      }
      if (visible) want.insert(v);
    }
    EXPECT_EQ(std::set<int>(g.output_vars.begin(), g.output_vars.end()), want);
    for (int v : g.output_vars) {
      EXPECT_TRUE(outputs_seen.insert(v).second) << "var " << v << " is output of two groups";
    }
  }
}

TEST(PartitionTest, RandomBlocksFollowTheRules) {
  int grouped_blocks = 0, multi_group_blocks = 0;
  for (int seed = 0; seed < 500; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    Block b;
    MakeRandomBlock(rng, b);
    const std::vector<PartitionGroup> groups = b.Run();
    CheckRules(b, groups, 2, "seed " + std::to_string(seed));
    const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
    CheckRules(b, singles, 1, "seed " + std::to_string(seed) + " (min_ops 1)");
    if (HasFatalFailure()) return;
    grouped_blocks += groups.empty() ? 0 : 1;
    multi_group_blocks += groups.size() >= 2 ? 1 : 0;
  }
  // The generator exercises fusion, not just rejection.
  EXPECT_GT(grouped_blocks, 300);
  EXPECT_GT(multi_group_blocks, 50);
}

// Seed 458 once failed by the same pruning as DoesNotMergeAcrossCycleThroughEarlierGroup:
// op 23 joined {14} although {14} -> 20 (in {4, 16, 20, 21}) ~ 4 -> cast 6 -> {7, 8} -> 23.
TEST(PartitionTest, RandomBlocksContractAcyclically) {
  std::vector<int> cyclic;
  for (int seed = 0; seed < 500; ++seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    Block b;
    MakeRandomBlock(rng, b);
    const std::vector<PartitionGroup> groups = b.Run();
    const std::vector<PartitionGroup> singles = Partition(b.ops(), b.vars(), {.min_ops = 1});
    if (!ContractionIsAcyclic(b.ops(), groups) || !ContractionIsAcyclic(b.ops(), singles)) {
      cyclic.push_back(seed);
    }
  }
  EXPECT_TRUE(cyclic.empty()) << cyclic.size() << " cyclic blocks, the first seed "
                              << cyclic.front();
}

}  // namespace
}  // namespace sluice::framework::compiler::compiler_partition_test
