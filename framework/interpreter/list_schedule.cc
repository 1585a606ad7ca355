#include "framework/interpreter/list_schedule.h"

#include <algorithm>
#include <limits>

namespace sluice::framework {

namespace {

// The schedule's state: when each stream is next free, when each placed func is done, and
// its stream (-1: not one of the streams being filled). Pricing an edge between streams
// keeps the ops that feed each other on one stream unless another would start sooner by
// more than the syncs cost: every cross-stream edge splits a fused sequence and costs a
// sync.
class ListScheduler {
 public:
  ListScheduler(int funcs, int lanes, double cross)
      : lanes_(lanes), cross_(cross), lane_free_(lanes, 0), done_(funcs, 0), lane_of_(funcs, -1) {}

  // Returns the start of func `b`, on its fixed stream.
  double PlaceFixed(int b, const OpFunc& func, const std::vector<int>& preds,
                    const Device& device) {
    double ready = 0;
    for (int p : preds) ready = std::max(ready, done_[p]);
    if (func.stream->type == StreamType::kCompute && func.stream->device == device &&
        func.stream->index < lanes_) {
      lane_of_[b] = func.stream->index;
      const double start = std::max(ready, lane_free_[lane_of_[b]]);
      done_[b] = lane_free_[lane_of_[b]] = start + 1;
    } else {
      done_[b] = ready + 1;
    }
    return done_[b] - 1;
  }

  // Picks a lane for func `b`; returns its start and sets `lane`.
  double PlaceFree(int b, const std::vector<int>& preds, int& lane) {
    int pred_lane = -1;
    double pred_done = -1;
    for (int p : preds) {
      if (lane_of_[p] >= 0 && done_[p] > pred_done) {
        pred_done = done_[p];
        pred_lane = lane_of_[p];
      }
    }
    int best = 0;
    double best_start = 0;
    double best_score = std::numeric_limits<double>::infinity();
    for (int candidate = 0; candidate < lanes_; ++candidate) {
      double start = lane_free_[candidate];
      int from_elsewhere = 0;
      for (int p : preds) {
        const bool other = lane_of_[p] >= 0 && lane_of_[p] != candidate;
        start = std::max(start, done_[p] + (other ? cross_ : 0.0));
        from_elsewhere += other ? 1 : 0;
      }
      const double score = start + cross_ * from_elsewhere;
      if (score < best_score || (score == best_score && candidate == pred_lane)) {
        best = candidate;
        best_start = start;
        best_score = score;
      }
    }
    lane_of_[b] = best;
    done_[b] = lane_free_[best] = best_start + 1;
    lane = best;
    return best_start;
  }

 private:
  const int lanes_;
  const double cross_;
  std::vector<double> lane_free_;
  std::vector<double> done_;
  std::vector<int> lane_of_;
};

}  // namespace

std::vector<double> AssignStreams(std::vector<OpFunc>& funcs, const DependencyGraph& deps,
                                  const ListScheduleOptions& options) {
  const int n = static_cast<int>(funcs.size());
  ListScheduler scheduler(n, std::max(1, options.compute_streams),
                          std::max(0.0, options.cross_stream_cost));
  std::vector<double> start(n, 0);
  for (int b = 0; b < n; ++b) {
    OpFunc& func = funcs[b];
    if (func.stream.has_value()) {
      start[b] = scheduler.PlaceFixed(b, func, deps.predecessors[b], options.device);
      continue;
    }
    int lane = 0;
    start[b] = scheduler.PlaceFree(b, deps.predecessors[b], lane);
    func.stream = StreamKey{func.device, StreamType::kCompute, lane};
  }
  return start;
}

}  // namespace sluice::framework
