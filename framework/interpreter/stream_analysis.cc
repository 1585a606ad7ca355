#include "framework/interpreter/stream_analysis.h"

#include <algorithm>
#include <functional>
#include <utility>

namespace sluice::framework {

namespace {

constexpr double kStep = 1e-3;  // keeps an item strictly after what it depends on

using Clock = std::vector<int>;  // per stream: the last segment position known complete

void Merge(Clock& into, const Clock& from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
}

class StreamAnalyzer {
 public:
  StreamAnalyzer(const std::vector<Node>& nodes, const std::vector<Segment>& segments,
                 const std::vector<double>& op_start, const std::vector<StreamInfo>& streams,
                 bool skip)
      : nodes_(nodes),
        segments_(segments),
        op_start_(op_start),
        streams_(streams),
        skip_(skip),
        known_(streams.size(), Clock(streams.size(), -1)),
        clock_(segments.size()),
        seq_item_(segments.size(), -1),
        record_item_(segments.size(), -1),
        last_on_stream_(streams.size(), -1) {}

  StreamPlan Run() {
    SegmentTimes();
    for (int c = 0; c < static_cast<int>(segments_.size()); ++c) AddSegment(c);
    std::vector<int>& order = plan_.order;
    order.resize(plan_.items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return plan_.items[a].key < plan_.items[b].key; });
    return std::move(plan_);
  }

 private:
  // Each segment's span in list-schedule time; a release takes no time, right after the
  // latest op it follows.
  void SegmentTimes() {
    seg_start_.resize(segments_.size());
    seg_end_.resize(segments_.size());
    for (size_t c = 0; c < segments_.size(); ++c) {
      double first = -1, last = 0;
      for (int b : segments_[c].nodes) {
        const Node& node = nodes_[b];
        double t = 0;
        if (node.op >= 0) {
          t = op_start_[node.op];
        } else {
          for (int p : node.preds) {
            if (nodes_[p].op >= 0) t = std::max(t, op_start_[nodes_[p].op] + 1);
          }
        }
        if (first < 0) first = t;
        last = std::max(last, t + (node.op >= 0 ? 1.0 : 0.0));
      }
      seg_start_[c] = std::max(first, 0.0);
      seg_end_[c] = std::max(last, seg_start_[c]);
    }
  }

  // The other segments `c` depends on, latest first, each once.
  std::vector<int> ProducerSegments(int c) const {
    std::vector<int> preds;
    for (int b : segments_[c].nodes) {
      for (int p : nodes_[b].preds) {
        if (nodes_[p].segment != c) preds.push_back(nodes_[p].segment);
      }
    }
    std::sort(preds.begin(), preds.end(), std::greater<int>());
    preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
    return preds;
  }

  // cpu work for a stream of the same worker, or for a device: the engine orders it (by
  // dispatch, or by completion). Between cpu streams of two workers a StreamWait, which
  // the consumer's worker honours on the host, avoids the round trip through the
  // scheduler a completion edge costs.
  bool EngineOrders(int from, int to) const {
    const StreamInfo& f = streams_[from];
    const StreamInfo& t = streams_[to];
    const bool waits_on_host = f.synchronous && t.synchronous && f.worker != t.worker;
    return f.synchronous && !waits_on_host;
  }

  void AddItem(const StreamItem& item) { plan_.items.push_back(item); }
  int LastItem() const { return static_cast<int>(plan_.items.size()) - 1; }

  // The sync segment `c` on stream `s` needs for its dependence on segment `p` of another
  // stream: the item `c` must wait for, or -1 when earlier syncs imply it.
  int SyncFor(int p, int c, int s) {
    const int t = segments_[p].stream;
    if (skip_ || EngineOrders(t, s)) return seq_item_[p];
    if (known_[s][t] >= segments_[p].position) return -1;
    // Just before the end of p's segment in list-schedule time, so that the sync goes out
    // right behind p's sequence — ahead of the next segment of p's stream, which starts at
    // that same time and would otherwise delay the consumer by a whole segment.
    const double after_p = std::max(seg_end_[p] - kStep / 2, plan_.items[seq_item_[p]].key + kStep);
    int sync;
    if (streams_[t].device == streams_[s].device) {
      AddItem({StreamItem::Kind::kStreamWait, c, t, s, after_p, p});
      sync = LastItem();
      plan_.edges.emplace_back(seq_item_[p], sync);
      ++plan_.stream_waits;
    } else {
      if (record_item_[p] < 0) {
        AddItem({StreamItem::Kind::kRecordEvent, -1, t, -1, after_p});
        record_item_[p] = LastItem();
        plan_.edges.emplace_back(seq_item_[p], record_item_[p]);
        ++plan_.record_events;
      }
      sync = record_item_[p];
    }
    Merge(known_[s], clock_[p]);
    return sync;
  }

  void AddSegment(int c) {
    const int s = segments_[c].stream;
    std::vector<int> incoming;  // items this segment waits for
    if (last_on_stream_[s] >= 0) incoming.push_back(seq_item_[last_on_stream_[s]]);
    for (int p : ProducerSegments(c)) {
      if (segments_[p].stream == s) continue;  // ordered by the stream chain
      const int sync = SyncFor(p, c, s);
      if (sync >= 0) incoming.push_back(sync);
    }
    std::sort(incoming.begin(), incoming.end());
    incoming.erase(std::unique(incoming.begin(), incoming.end()), incoming.end());
    double key = seg_start_[c];
    for (int from : incoming) key = std::max(key, plan_.items[from].key + kStep);
    AddItem({StreamItem::Kind::kSequence, c, -1, s, key});
    seq_item_[c] = LastItem();
    for (int from : incoming) plan_.edges.emplace_back(from, seq_item_[c]);
    clock_[c] = known_[s];
    clock_[c][s] = segments_[c].position;
    known_[s] = clock_[c];
    last_on_stream_[s] = c;
  }

  const std::vector<Node>& nodes_;
  const std::vector<Segment>& segments_;
  const std::vector<double>& op_start_;
  const std::vector<StreamInfo>& streams_;
  const bool skip_;
  StreamPlan plan_;
  std::vector<double> seg_start_, seg_end_;
  std::vector<Clock> known_;  // per stream: what it knows complete so far
  std::vector<Clock> clock_;  // per segment: what is complete once it is
  std::vector<int> seq_item_;
  std::vector<int> record_item_;
  std::vector<int> last_on_stream_;
};

}  // namespace

StreamPlan AnalyzeStreams(const std::vector<Node>& nodes, const std::vector<Segment>& segments,
                          const std::vector<double>& op_start,
                          const std::vector<StreamInfo>& streams, bool skip_stream_analysis) {
  return StreamAnalyzer(nodes, segments, op_start, streams, skip_stream_analysis).Run();
}

}  // namespace sluice::framework
