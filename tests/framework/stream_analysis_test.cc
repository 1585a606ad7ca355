// AnalyzeStreams as a pure function of hand-built graphs (no VM): a wait implied by an
// earlier wait is pruned, a dependence on an asynchronous stream of another device becomes
// one RecordEvent per producer, the engine orders cpu work by plain edges, a diamond over
// two streams; and random graphs on random stream descriptions, where every cross-stream
// dependence must be covered by a sync or a plain edge the engine honours, checked with a
// vector-clock reference computed here, and the dispatch order must respect every edge.
#include "framework/interpreter/stream_analysis.h"

#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "framework/interpreter/segments.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::stream_analysis_test {
namespace {

using Kind = StreamItem::Kind;
using ::testing::ElementsAre;

const Device kCpu(DeviceType::kCpu, 0);
const Device kSim0(DeviceType::kSim, 0);
const Device kSim1(DeviceType::kSim, 1);

StreamInfo Async(Device device, int worker = 0) { return StreamInfo{device, false, worker}; }
StreamInfo Host(int worker) { return StreamInfo{kCpu, true, worker}; }

// A graph of op nodes (node i runs op i), built node by node.
struct Graph {
  std::vector<Node> nodes;
  std::vector<double> start;

  int Add(int stream, std::vector<int> preds, double at) {
    Node node;
    node.op = static_cast<int>(nodes.size());
    node.stream = stream;
    node.preds = std::move(preds);
    nodes.push_back(std::move(node));
    start.push_back(at);
    return static_cast<int>(nodes.size()) - 1;
  }

  StreamPlan Analyze(const std::vector<StreamInfo>& streams, bool fuse = true, bool skip = false) {
    segments = FormSegments(nodes, fuse);
    return AnalyzeStreams(nodes, segments, start, streams, skip);
  }

  std::vector<Segment> segments;
};

int Count(const StreamPlan& plan, Kind kind) {
  return static_cast<int>(std::count_if(plan.items.begin(), plan.items.end(),
                                        [&](const StreamItem& i) { return i.kind == kind; }));
}

// The plan's dispatch order is a permutation with every edge going forward, and each edge
// goes to a strictly larger key.
void ExpectOrderRespectsEdges(const StreamPlan& plan) {
  ASSERT_EQ(plan.order.size(), plan.items.size());
  std::vector<int> rank(plan.items.size(), -1);
  for (size_t r = 0; r < plan.order.size(); ++r) rank[plan.order[r]] = static_cast<int>(r);
  for (int r : rank) ASSERT_GE(r, 0);
  for (const auto& [from, to] : plan.edges) {
    EXPECT_LT(rank[from], rank[to]) << from << "->" << to;
    EXPECT_LT(plan.items[from].key, plan.items[to].key);
  }
}

TEST(StreamAnalysisTest, WaitImpliedByAnEarlierWaitIsPruned) {
  // Stream 0: a0, a1 (a0 feeds another stream, so two segments). Stream 1: b0 needs a1,
  // then b1 needs a0 — already known complete through b0's wait for a1.
  Graph g;
  const int a0 = g.Add(0, {}, 0);
  const int a1 = g.Add(0, {a0}, 1);
  const int b0 = g.Add(1, {a1}, 2);
  g.Add(1, {a0, b0}, 3);
  const StreamPlan plan = g.Analyze({Async(kSim0), Async(kSim0)});
  EXPECT_EQ(plan.stream_waits, 1);
  EXPECT_EQ(plan.record_events, 0);
  EXPECT_EQ(Count(plan, Kind::kStreamWait), 1);
  ExpectOrderRespectsEdges(plan);
}

TEST(StreamAnalysisTest, ConsumersInProducerOrderNeedTwoWaits) {
  // b0 needs a0, then b1 needs a1: the second wait is new information.
  Graph g;
  const int a0 = g.Add(0, {}, 0);
  const int a1 = g.Add(0, {}, 1);
  const int b0 = g.Add(1, {a0}, 1);
  g.Add(1, {a1, b0}, 2);
  const StreamPlan plan = g.Analyze({Async(kSim0), Async(kSim0)});
  EXPECT_EQ(plan.stream_waits, 2);
  ExpectOrderRespectsEdges(plan);
}

TEST(StreamAnalysisTest, CrossDeviceDependenceRecordsOneEventPerProducer) {
  // An asynchronous sim stream feeds two consumers on another device: one RecordEvent after
  // the producer, both consumers depend on it.
  Graph g;
  const int p = g.Add(0, {}, 0);
  g.Add(1, {p}, 1);
  g.Add(2, {p}, 1);
  const StreamPlan plan = g.Analyze({Async(kSim0), Async(kSim1), Host(0)});
  EXPECT_EQ(plan.record_events, 1);
  EXPECT_EQ(plan.stream_waits, 0);
  ASSERT_EQ(Count(plan, Kind::kRecordEvent), 1);
  int record = -1;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    if (plan.items[i].kind == Kind::kRecordEvent) record = static_cast<int>(i);
  }
  EXPECT_EQ(plan.items[record].from, 0);
  int into_record = 0, out_of_record = 0;
  for (const auto& [from, to] : plan.edges) {
    into_record += to == record;
    out_of_record += from == record;
  }
  EXPECT_EQ(into_record, 1);
  EXPECT_EQ(out_of_record, 2);
  ExpectOrderRespectsEdges(plan);
}

TEST(StreamAnalysisTest, EngineOrdersCpuWorkByPlainEdges) {
  // cpu -> sim and cpu -> cpu stream of the same worker: plain edges. cpu -> cpu stream of
  // another worker: a StreamWait (honoured on the host).
  Graph g;
  const int p = g.Add(0, {}, 0);
  g.Add(1, {p}, 1);
  g.Add(2, {p}, 1);
  g.Add(3, {p}, 1);
  const StreamPlan plan = g.Analyze({Host(0), Async(kSim0), Host(0), Host(1)});
  EXPECT_EQ(plan.stream_waits, 1);
  EXPECT_EQ(plan.record_events, 0);
  for (const StreamItem& item : plan.items) {
    if (item.kind == Kind::kStreamWait) {
      EXPECT_EQ(item.from, 0);
      EXPECT_EQ(item.to, 3);
    }
  }
  EXPECT_EQ(plan.edges.size(), 4u);  // p->sim, p->cpu same worker, p->wait, wait->consumer
  ExpectOrderRespectsEdges(plan);
}

TEST(StreamAnalysisTest, SkippingTheAnalysisLeavesPlainEdges) {
  Graph g;
  const int p = g.Add(0, {}, 0);
  g.Add(1, {p}, 1);
  const StreamPlan plan = g.Analyze({Async(kSim0), Async(kSim0)}, /*fuse=*/true, /*skip=*/true);
  EXPECT_EQ(plan.stream_waits + plan.record_events, 0);
  EXPECT_THAT(plan.edges, ElementsAre(std::make_pair(0, 1)));
}

TEST(StreamAnalysisTest, DiamondOverTwoStreams) {
  // top (s0) feeds left (s0) and right (s1); bottom (s0) joins them.
  Graph g;
  const int top = g.Add(0, {}, 0);
  const int left = g.Add(0, {top}, 1);
  const int right = g.Add(1, {top}, 1);
  g.Add(0, {left, right}, 2);
  const StreamPlan plan = g.Analyze({Async(kSim0), Async(kSim0)});
  // Segments: [top] (feeds s1), [left], [right], [bottom] (needs s1): one wait each way.
  ASSERT_EQ(g.segments.size(), 4u);
  EXPECT_THAT(g.segments[0].nodes, ElementsAre(top));
  EXPECT_THAT(g.segments[1].nodes, ElementsAre(left));
  EXPECT_EQ(plan.stream_waits, 2);
  EXPECT_EQ(Count(plan, Kind::kSequence), 4);
  std::vector<std::pair<int, int>> waits;  // (from, to) streams
  for (const StreamItem& item : plan.items) {
    if (item.kind == Kind::kStreamWait) waits.emplace_back(item.from, item.to);
  }
  EXPECT_THAT(waits, ElementsAre(std::make_pair(0, 1), std::make_pair(1, 0)));
  // The wait for `top` goes out right behind it: before `left` in dispatch order.
  const auto rank = [&](int item) {
    return std::find(plan.order.begin(), plan.order.end(), item) - plan.order.begin();
  };
  int first_wait = -1, left_seq = -1;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    if (plan.items[i].kind == Kind::kStreamWait && first_wait < 0) first_wait = static_cast<int>(i);
    if (plan.items[i].kind == Kind::kSequence && plan.items[i].segment == 1)
      left_seq = static_cast<int>(i);
  }
  EXPECT_LT(rank(first_wait), rank(left_seq));
  ExpectOrderRespectsEdges(plan);
}

// --- Randomized: every cross-stream dependence covered, checked by a reference. ---

bool EngineOrders(const StreamInfo& from, const StreamInfo& to) {
  return from.synchronous && !(to.synchronous && from.worker != to.worker);
}

// What each segment knows complete when it starts, from the plan alone: its stream's
// previous segment, and what each sync or honoured plain edge into it carries.
void ExpectEveryDependenceCovered(const std::vector<Node>& nodes,
                                  const std::vector<Segment>& segments,
                                  const std::vector<StreamInfo>& streams, const StreamPlan& plan) {
  const int k = static_cast<int>(streams.size());
  std::vector<int> seq_of(segments.size(), -1);
  std::vector<int> producer(plan.items.size(), -1);  // the segment a sync item follows
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const StreamItem& item = plan.items[i];
    if (item.kind == Kind::kSequence) seq_of[item.segment] = static_cast<int>(i);
    if (item.kind == Kind::kStreamWait) producer[i] = item.from_segment;
  }
  std::vector<std::vector<int>> into(plan.items.size());
  for (const auto& [from, to] : plan.edges) {
    into[to].push_back(from);
    if (plan.items[to].kind == Kind::kRecordEvent) {
      ASSERT_EQ(plan.items[from].kind, Kind::kSequence);
      producer[to] = plan.items[from].segment;
    }
  }
  std::vector<std::vector<int>> clock(segments.size());  // after the segment
  std::vector<std::vector<int>> stream_known(k, std::vector<int>(k, -1));
  for (size_t c = 0; c < segments.size(); ++c) {
    const int s = segments[c].stream;
    std::vector<int> known = stream_known[s];
    auto merge = [&](int seg) {
      for (int i = 0; i < k; ++i) known[i] = std::max(known[i], clock[seg][i]);
    };
    for (int from : into[seq_of[c]]) {
      const StreamItem& item = plan.items[from];
      if (item.kind == Kind::kSequence) {
        const int t = segments[item.segment].stream;
        if (t == s || EngineOrders(streams[t], streams[s])) merge(item.segment);
      } else {
        ASSERT_GE(producer[from], 0);
        if (item.kind == Kind::kStreamWait) {
          EXPECT_EQ(streams[item.from].device, streams[s].device);
        } else {
          EXPECT_NE(streams[item.from].device, streams[s].device);
        }
        merge(producer[from]);
      }
    }
    for (int b : segments[c].nodes) {
      for (int p : nodes[b].preds) {
        const Segment& ps = segments[nodes[p].segment];
        if (ps.stream == s) continue;
        EXPECT_GE(known[ps.stream], ps.position)
            << "segment " << c << " does not know segment " << nodes[p].segment << " complete";
      }
    }
    known[s] = segments[c].position;
    clock[c] = known;
    stream_known[s] = known;
  }
}

TEST(StreamAnalysisTest, RandomGraphsHaveEveryCrossStreamDependenceCovered) {
  std::mt19937 rng(20261125);
  int waits = 0, records = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int k = 1 + static_cast<int>(rng() % 4);
    std::vector<StreamInfo> streams;
    for (int s = 0; s < k; ++s) {
      const int kind = static_cast<int>(rng() % 3);
      const int worker = static_cast<int>(rng() % 3);
      streams.push_back(kind == 0 ? Host(worker) : Async(kind == 1 ? kSim0 : kSim1, worker));
    }
    Graph g;
    std::vector<double> free_at(k, 0);
    const int n = 2 + static_cast<int>(rng() % 30);
    for (int b = 0; b < n; ++b) {
      const int s = static_cast<int>(rng() % k);
      std::vector<int> preds;
      double ready = free_at[s];
      for (int p = std::max(0, b - 8); p < b; ++p) {
        if (rng() % 4 == 0) {
          preds.push_back(p);
          ready = std::max(ready, g.start[p] + 1);
        }
      }
      g.Add(s, preds, ready);
      free_at[s] = ready + 1;
    }
    const StreamPlan plan = g.Analyze(streams, /*fuse=*/rng() % 4 != 0);
    ExpectEveryDependenceCovered(g.nodes, g.segments, streams, plan);
    ExpectOrderRespectsEdges(plan);
    waits += plan.stream_waits;
    records += plan.record_events;
    if (HasFailure()) break;
  }
  // The cases exercised both kinds of sync.
  EXPECT_GT(waits, 0);
  EXPECT_GT(records, 0);
}

}  // namespace
}  // namespace sluice::framework::stream_analysis_test
