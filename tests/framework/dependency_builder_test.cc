// BuildDependencies: each rule (RAW, WAR, WAW, in-place, random order) on crafted access
// lists with exact statistics; the transitive shrink (chains, diamonds, a shared early
// writer read by a long chain, the max_walk bound); and a randomized comparison against a
// naive edge list and its transitive closure computed here.
#include "framework/interpreter/dependency_builder.h"

#include <algorithm>
#include <bitset>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::dependency_builder_test {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

OpAccess Access(std::vector<int> reads, std::vector<int> writes, bool random = false) {
  OpAccess op;
  op.reads = std::move(reads);
  op.writes = std::move(writes);
  op.random = random;
  return op;
}

void ExpectStats(const DependencyStats& s, int64_t raw, int64_t war, int64_t waw, int64_t random,
                 int64_t unique, int64_t shrunk, int64_t kept) {
  EXPECT_EQ(s.raw, raw);
  EXPECT_EQ(s.war, war);
  EXPECT_EQ(s.waw, waw);
  EXPECT_EQ(s.random, random);
  EXPECT_EQ(s.unique, unique);
  EXPECT_EQ(s.shrunk, shrunk);
  EXPECT_EQ(s.kept, kept);
}

TEST(DependencyBuilderTest, EmptyProgram) {
  DependencyGraph g = BuildDependencies({}, 4);
  EXPECT_THAT(g.predecessors, IsEmpty());
  ExpectStats(g.stats, 0, 0, 0, 0, 0, 0, 0);
}

TEST(DependencyBuilderTest, ReadAfterWrite) {
  // 0 writes v0; 1 reads v0; 2 reads v0 and v1 (v1 never written: no edge).
  DependencyGraph g =
      BuildDependencies({Access({}, {0}), Access({0}, {2}), Access({0, 1}, {3})}, /*num_vars=*/4);
  ASSERT_EQ(g.predecessors.size(), 3u);
  EXPECT_THAT(g.predecessors[0], IsEmpty());
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  EXPECT_THAT(g.predecessors[2], ElementsAre(0));
  ExpectStats(g.stats, /*raw=*/2, 0, 0, 0, /*unique=*/2, /*shrunk=*/0, /*kept=*/2);
}

TEST(DependencyBuilderTest, ReadersDoNotDependOnEachOther) {
  DependencyGraph g =
      BuildDependencies({Access({}, {0}), Access({0}, {1}), Access({0}, {2}), Access({0}, {3})}, 4);
  for (int b = 1; b <= 3; ++b) EXPECT_THAT(g.predecessors[b], ElementsAre(0)) << b;
  ExpectStats(g.stats, 3, 0, 0, 0, 3, 0, 3);
}

TEST(DependencyBuilderTest, WriteAfterReadWaitsForEveryReader) {
  // Readers 0, 1, 2 of v0 (never written before), then op 3 overwrites v0.
  DependencyGraph g =
      BuildDependencies({Access({0}, {1}), Access({0}, {2}), Access({0}, {3}), Access({}, {0})}, 4);
  EXPECT_THAT(g.predecessors[3], ElementsAre(0, 1, 2));
  ExpectStats(g.stats, 0, /*war=*/3, 0, 0, 3, 0, 3);
}

TEST(DependencyBuilderTest, WriteAfterReadOnlySinceTheLastWrite) {
  // 0 reads v0; 1 writes v0 (WAR on 0); 2 reads v0 (RAW on 1); 3 writes v0: WAW on 1 and WAR
  // on 2 only (reader 0 came before the last write). 1 reaches 3 through 2: shrunk.
  DependencyGraph g =
      BuildDependencies({Access({0}, {1}), Access({}, {0}), Access({0}, {2}), Access({}, {0})}, 3);
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  EXPECT_THAT(g.predecessors[2], ElementsAre(1));
  EXPECT_THAT(g.predecessors[3], ElementsAre(2));
  ExpectStats(g.stats, /*raw=*/1, /*war=*/2, /*waw=*/1, 0, /*unique=*/4, /*shrunk=*/1,
              /*kept=*/3);
}

TEST(DependencyBuilderTest, WriteAfterWrite) {
  DependencyGraph g =
      BuildDependencies({Access({}, {0}), Access({}, {1}), Access({}, {0}), Access({}, {0})}, 2);
  EXPECT_THAT(g.predecessors[1], IsEmpty());
  EXPECT_THAT(g.predecessors[2], ElementsAre(0));
  EXPECT_THAT(g.predecessors[3], ElementsAre(2));
  ExpectStats(g.stats, 0, 0, /*waw=*/2, 0, 2, 0, 2);
}

TEST(DependencyBuilderTest, InPlaceUpdate) {
  // 0 writes v0; 1 and 2 read it; 3 updates v0 in place (reads and writes it): it depends on
  // the old writer (RAW, and WAW on the same op) and on both readers (WAR). The edge from 0
  // is implied by the readers, so only the WAR edges are kept. The in-place op is not its
  // own reader: op 4 overwriting v0 depends on 3 only.
  DependencyGraph g = BuildDependencies(
      {Access({}, {0}), Access({0}, {1}), Access({0}, {2}), Access({0}, {0}), Access({}, {0})}, 3);
  EXPECT_THAT(g.predecessors[3], ElementsAre(1, 2));
  EXPECT_THAT(g.predecessors[4], ElementsAre(3));
  // raw: 1, 2, 3 read v0 written by 0; waw: 3 (old writer 0) and 4 (writer 3); war: 3 on
  // {1, 2} only (3's own read precedes its write, so 4 finds no reader).
  ExpectStats(g.stats, /*raw=*/3, /*war=*/2, /*waw=*/2, 0, /*unique=*/6, /*shrunk=*/1,
              /*kept=*/5);
}

TEST(DependencyBuilderTest, InPlaceUpdateWithoutReaders) {
  DependencyGraph g = BuildDependencies({Access({}, {0}), Access({0}, {0}), Access({0}, {0})}, 1);
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  EXPECT_THAT(g.predecessors[2], ElementsAre(1));
  ExpectStats(g.stats, /*raw=*/2, /*war=*/0, /*waw=*/2, 0, /*unique=*/2, 0, 2);
}

TEST(DependencyBuilderTest, RandomOpsKeepProgramOrder) {
  // Random ops touching disjoint variables still chain; non-random ops are not in the chain.
  DependencyGraph g =
      BuildDependencies({Access({}, {0}, true), Access({}, {1}), Access({}, {2}, true),
                         Access({}, {3}), Access({}, {4}, true)},
                        5);
  EXPECT_THAT(g.predecessors[0], IsEmpty());
  EXPECT_THAT(g.predecessors[1], IsEmpty());
  EXPECT_THAT(g.predecessors[2], ElementsAre(0));
  EXPECT_THAT(g.predecessors[3], IsEmpty());
  EXPECT_THAT(g.predecessors[4], ElementsAre(2));
  ExpectStats(g.stats, 0, 0, 0, /*random=*/2, 2, 0, 2);
}

TEST(DependencyBuilderTest, RandomEdgeDeduplicatedWithDataEdge) {
  // Op 1 reads op 0's output and both are random: one distinct edge found by two rules.
  DependencyGraph g = BuildDependencies({Access({}, {0}, true), Access({0}, {1}, true)}, 2);
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  ExpectStats(g.stats, /*raw=*/1, 0, 0, /*random=*/1, /*unique=*/1, 0, /*kept=*/1);
}

TEST(DependencyBuilderTest, ShrinkDropsTheImpliedEdgeOfATriangle) {
  // a=0 writes v0, b=1 reads v0 writes v1, c=2 reads v0 and v1: a→c is implied by a→b→c.
  DependencyGraph g =
      BuildDependencies({Access({}, {0}), Access({0}, {1}), Access({0, 1}, {2})}, 3);
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  EXPECT_THAT(g.predecessors[2], ElementsAre(1));
  ExpectStats(g.stats, /*raw=*/3, 0, 0, 0, /*unique=*/3, /*shrunk=*/1, /*kept=*/2);
}

TEST(DependencyBuilderTest, ShrinkKeepsBothSidesOfADiamond) {
  // 0 → {1, 2} → 3: neither side implies the other; 3 also reads v0 (implied, dropped).
  DependencyGraph g = BuildDependencies(
      {Access({}, {0}), Access({0}, {1}), Access({0}, {2}), Access({0, 1, 2}, {3})}, 4);
  EXPECT_THAT(g.predecessors[1], ElementsAre(0));
  EXPECT_THAT(g.predecessors[2], ElementsAre(0));
  EXPECT_THAT(g.predecessors[3], ElementsAre(1, 2));
  ExpectStats(g.stats, /*raw=*/5, 0, 0, 0, /*unique=*/5, /*shrunk=*/1, /*kept=*/4);
}

TEST(DependencyBuilderTest, LongChainReadingTheFirstWriterKeepsOnlyChainEdges) {
  // Op 0 writes v0; op i >= 1 reads v0 and v_i (written by op i - 1, none for i = 1) and
  // writes v_{i+1}. Every edge 0→i for i >= 2 is implied by the chain.
  constexpr int kOps = 1000;
  std::vector<OpAccess> ops;
  ops.push_back(Access({}, {0}));
  ops.push_back(Access({0}, {2}));
  for (int i = 2; i < kOps; ++i) ops.push_back(Access({0, i}, {i + 1}));
  DependencyGraph g = BuildDependencies(ops, kOps + 1);
  for (int i = 1; i < kOps; ++i) {
    ASSERT_THAT(g.predecessors[i], ElementsAre(i - 1)) << "op " << i;
  }
  ExpectStats(g.stats, /*raw=*/1 + 2 * (kOps - 2), 0, 0, 0, /*unique=*/1 + 2 * (kOps - 2),
              /*shrunk=*/kOps - 2, /*kept=*/kOps - 1);
}

TEST(DependencyBuilderTest, SmallMaxWalkKeepsARedundantEdge) {
  // A chain 0→1→2→3→4, and op 5 reads what 4 and 0 wrote. 0 reaches 5 through the chain, but
  // the walk from 4 may visit only one node before giving up: the edge 0→5 stays (a
  // superset of the needed edges, never fewer).
  std::vector<OpAccess> ops = {Access({}, {0}),  Access({0}, {1}), Access({1}, {2}),
                               Access({2}, {3}), Access({3}, {4}), Access({4, 0}, {5})};
  DependencyGraph full = BuildDependencies(ops, 6);
  EXPECT_THAT(full.predecessors[5], ElementsAre(4));
  EXPECT_EQ(full.stats.shrunk, 1);
  DependencyGraph bounded = BuildDependencies(ops, 6, /*max_walk=*/1);
  EXPECT_THAT(bounded.predecessors[5], ElementsAre(0, 4));
  EXPECT_EQ(bounded.stats.shrunk, 0);
  EXPECT_EQ(bounded.stats.kept, full.stats.kept + 1);
  EXPECT_EQ(bounded.stats.unique, full.stats.unique);
  for (int b = 0; b < 5; ++b) EXPECT_EQ(bounded.predecessors[b], full.predecessors[b]);
}

// --- Randomized comparison with a naive edge list. ---

constexpr int kMaxOps = 200;
using Reach = std::bitset<kMaxOps>;

// Edges by the four rules, computed the obvious way, with per-rule counts.
struct NaiveEdges {
  std::vector<std::set<int>> preds;
  int64_t raw = 0, war = 0, waw = 0, random = 0;
};

NaiveEdges Naive(const std::vector<OpAccess>& ops, int num_vars) {
  const int n = static_cast<int>(ops.size());
  NaiveEdges e;
  e.preds.resize(n);
  for (int b = 0; b < n; ++b) {
    // Scan the history backwards for every variable b touches.
    for (int v : ops[b].reads) {
      for (int a = b - 1; a >= 0; --a) {
        const std::vector<int>& w = ops[a].writes;
        if (std::find(w.begin(), w.end(), v) != w.end()) {
          e.preds[b].insert(a);
          ++e.raw;
          break;
        }
      }
    }
    for (int v : ops[b].writes) {
      for (int a = b - 1; a >= 0; --a) {
        const std::vector<int>& w = ops[a].writes;
        const std::vector<int>& r = ops[a].reads;
        // The last writer ends the scan; an in-place writer is not also a reader of its own
        // new value.
        if (std::find(w.begin(), w.end(), v) != w.end()) {
          e.preds[b].insert(a);
          ++e.waw;
          break;
        }
        if (std::find(r.begin(), r.end(), v) != r.end()) {
          e.preds[b].insert(a);
          ++e.war;
        }
      }
    }
    if (ops[b].random) {
      for (int a = b - 1; a >= 0; --a) {
        if (ops[a].random) {
          e.preds[b].insert(a);
          ++e.random;
          break;
        }
      }
    }
  }
  (void)num_vars;
  return e;
}

// reach[b]: every op b depends on, directly or transitively.
template <typename PredList>
std::vector<Reach> Closure(const std::vector<PredList>& preds) {
  std::vector<Reach> reach(preds.size());
  for (size_t b = 0; b < preds.size(); ++b) {
    for (int a : preds[b]) {
      reach[b] |= reach[a];
      reach[b].set(a);
    }
  }
  return reach;
}

std::vector<OpAccess> RandomProgram(uint32_t seed, int n, int num_vars) {
  std::mt19937 rng(seed);
  auto below = [&](int k) { return static_cast<int>(rng() % static_cast<uint32_t>(k)); };
  auto distinct = [&](int count) {
    std::vector<int> vars;
    while (static_cast<int>(vars.size()) < count) {
      const int v = below(num_vars);
      if (std::find(vars.begin(), vars.end(), v) == vars.end()) vars.push_back(v);
    }
    return vars;
  };
  std::vector<OpAccess> ops;
  for (int i = 0; i < n; ++i) {
    OpAccess op;
    op.reads = distinct(below(4));                                             // 0..3 reads
    op.writes = distinct(1 + below(2));                                        // 1..2 writes
    if (below(5) == 0 && !op.reads.empty()) op.writes.push_back(op.reads[0]);  // in place
    std::sort(op.writes.begin(), op.writes.end());
    op.writes.erase(std::unique(op.writes.begin(), op.writes.end()), op.writes.end());
    op.random = below(8) == 0;
    ops.push_back(std::move(op));
  }
  return ops;
}

TEST(DependencyBuilderTest, RandomProgramsMatchTheNaiveClosure) {
  constexpr int kVars = 30;
  for (uint32_t seed : {1u, 2u, 3u, 17u, 4242u, 90001u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<OpAccess> ops = RandomProgram(seed, kMaxOps, kVars);
    const NaiveEdges naive = Naive(ops, kVars);
    const DependencyGraph g = BuildDependencies(ops, kVars);
    ASSERT_EQ(g.predecessors.size(), ops.size());

    int64_t unique = 0, kept = 0;
    for (int b = 0; b < kMaxOps; ++b) {
      unique += static_cast<int64_t>(naive.preds[b].size());
      kept += static_cast<int64_t>(g.predecessors[b].size());
      const std::vector<int>& p = g.predecessors[b];
      ASSERT_TRUE(std::is_sorted(p.begin(), p.end())) << "op " << b;
      ASSERT_EQ(std::adjacent_find(p.begin(), p.end()), p.end()) << "op " << b;
      for (int a : p) ASSERT_TRUE(naive.preds[b].contains(a)) << a << "→" << b << " not found";
    }
    EXPECT_EQ(g.stats.raw, naive.raw);
    EXPECT_EQ(g.stats.war, naive.war);
    EXPECT_EQ(g.stats.waw, naive.waw);
    EXPECT_EQ(g.stats.random, naive.random);
    EXPECT_EQ(g.stats.unique, unique);
    EXPECT_EQ(g.stats.kept, kept);
    EXPECT_EQ(g.stats.shrunk, unique - kept);
    EXPECT_GT(g.stats.shrunk, 0);  // the programs are dense enough to have implied edges

    const std::vector<Reach> want = Closure(naive.preds);
    const std::vector<Reach> got = Closure(g.predecessors);
    for (int b = 0; b < kMaxOps; ++b) ASSERT_EQ(got[b], want[b]) << "op " << b;

    // Minimal: a kept edge a→b is implied by the others only if another kept predecessor c
    // of b already depends on a (paths into b end in one of its kept edges).
    for (int b = 0; b < kMaxOps; ++b) {
      for (int a : g.predecessors[b]) {
        for (int c : g.predecessors[b]) {
          ASSERT_FALSE(c != a && got[c].test(a)) << a << "→" << b << " is implied through " << c;
        }
      }
    }
  }
}

TEST(DependencyBuilderTest, RandomProgramsWithABoundedWalkStayConservative) {
  constexpr int kVars = 30;
  for (uint32_t seed : {5u, 6u, 7u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<OpAccess> ops = RandomProgram(seed, kMaxOps, kVars);
    const NaiveEdges naive = Naive(ops, kVars);
    const DependencyGraph full = BuildDependencies(ops, kVars);
    for (int max_walk : {0, 1, 3, 10}) {
      const DependencyGraph g = BuildDependencies(ops, kVars, max_walk);
      EXPECT_EQ(g.stats.unique, full.stats.unique);
      EXPECT_EQ(g.stats.kept + g.stats.shrunk, g.stats.unique);
      EXPECT_GE(g.stats.kept, full.stats.kept) << "max_walk " << max_walk;
      for (int b = 0; b < kMaxOps; ++b) {
        for (int a : g.predecessors[b]) ASSERT_TRUE(naive.preds[b].contains(a));
      }
      const std::vector<Reach> want = Closure(naive.preds);
      const std::vector<Reach> got = Closure(g.predecessors);
      for (int b = 0; b < kMaxOps; ++b) {
        ASSERT_EQ(got[b], want[b]) << "op " << b << " max_walk " << max_walk;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::framework::dependency_builder_test
