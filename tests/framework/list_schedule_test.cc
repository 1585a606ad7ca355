// AssignStreams on hand-built funcs and dependence graphs: one stream keeps everything in
// program order, independent chains spread over two streams and stay on them, a high
// cross-stream cost keeps a chain together, fixed streams are kept (and occupy their
// stream when it is one being filled), and start times respect every dependence.
#include "framework/interpreter/list_schedule.h"

#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::framework::list_schedule_test {
namespace {

using ::testing::ElementsAre;

const Device kSim(DeviceType::kSim, 0);

std::vector<OpFunc> Funcs(int n) {
  std::vector<OpFunc> funcs(n);
  for (OpFunc& f : funcs) f.device = kSim;
  return funcs;
}

DependencyGraph Deps(std::vector<std::vector<int>> preds) {
  DependencyGraph g;
  g.predecessors = std::move(preds);
  return g;
}

std::vector<int> Streams(const std::vector<OpFunc>& funcs) {
  std::vector<int> streams;
  for (const OpFunc& f : funcs) streams.push_back(f.stream.has_value() ? f.stream->index : -1);
  return streams;
}

ListScheduleOptions On(int streams, double cross = 2.0) {
  return ListScheduleOptions{kSim, streams, cross};
}

TEST(ListScheduleTest, OneStreamRunsInProgramOrder) {
  std::vector<OpFunc> funcs = Funcs(3);
  const std::vector<double> start = AssignStreams(funcs, Deps({{}, {}, {0, 1}}), On(1));
  EXPECT_THAT(start, ElementsAre(0, 1, 2));
  EXPECT_THAT(Streams(funcs), ElementsAre(0, 0, 0));
  EXPECT_EQ(funcs[0].stream->device, kSim);
  EXPECT_EQ(funcs[0].stream->type, StreamType::kCompute);
}

TEST(ListScheduleTest, IndependentChainsSpreadAndStay) {
  // a0 b0 a1 b1 a2 b2 join: chains a and b interleaved in program order.
  std::vector<OpFunc> funcs = Funcs(7);
  const DependencyGraph deps = Deps({{}, {}, {0}, {1}, {2}, {3}, {4, 5}});
  const std::vector<double> start = AssignStreams(funcs, deps, On(2));
  EXPECT_THAT(Streams(funcs), ElementsAre(0, 1, 0, 1, 0, 1, 0));
  EXPECT_THAT(start, ElementsAre(0, 0, 1, 1, 2, 2, 5));  // the join pays the cross cost
}

TEST(ListScheduleTest, TiesGoToTheStreamOfTheLatestInput) {
  // With no cross cost both streams tie for op 2; it follows its input (op 1, stream 1).
  std::vector<OpFunc> funcs = Funcs(3);
  AssignStreams(funcs, Deps({{}, {}, {1}}), On(2, /*cross=*/0));
  EXPECT_THAT(Streams(funcs), ElementsAre(0, 1, 1));
}

TEST(ListScheduleTest, HighCrossCostKeepsAChainTogether) {
  // A fork (0 → 1, 0 → 2) then a join: with a cross cost of 10 a second stream never pays.
  std::vector<OpFunc> funcs = Funcs(4);
  AssignStreams(funcs, Deps({{}, {0}, {0}, {1, 2}}), On(2, /*cross=*/10));
  EXPECT_THAT(Streams(funcs), ElementsAre(0, 0, 0, 0));
  std::vector<OpFunc> cheap = Funcs(4);
  AssignStreams(cheap, Deps({{}, {0}, {0}, {1, 2}}), On(2, /*cross=*/0));
  EXPECT_THAT(Streams(cheap), ElementsAre(0, 0, 1, 0));
}

TEST(ListScheduleTest, FixedStreamsAreKeptAndOccupyTheirStream) {
  std::vector<OpFunc> funcs = Funcs(3);
  funcs[0].stream = StreamKey{kSim, StreamType::kCompute, 0};
  funcs[1].stream = StreamKey{kSim, StreamType::kHost2Device, 0};  // not a filled stream
  const std::vector<double> start = AssignStreams(funcs, Deps({{}, {}, {}}), On(2));
  EXPECT_EQ(funcs[1].stream->type, StreamType::kHost2Device);
  EXPECT_THAT(start, ElementsAre(0, 0, 0));
  EXPECT_EQ(funcs[2].stream->index, 1);  // compute 0 is busy until 1
}

TEST(ListScheduleTest, RandomGraphsStartAfterTheirInputs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<std::vector<int>> preds(n);
    for (int b = 1; b < n; ++b) {
      for (int p = 0; p < b; ++p) {
        if (rng() % 5 == 0) preds[b].push_back(p);
      }
    }
    std::vector<OpFunc> funcs = Funcs(n);
    const int lanes = 1 + static_cast<int>(rng() % 3);
    const double cross = static_cast<double>(rng() % 4);
    const std::vector<double> start = AssignStreams(funcs, Deps(preds), On(lanes, cross));
    std::vector<std::vector<double>> busy(lanes);
    for (int b = 0; b < n; ++b) {
      ASSERT_TRUE(funcs[b].stream.has_value());
      const int lane = funcs[b].stream->index;
      ASSERT_GE(lane, 0);
      ASSERT_LT(lane, lanes);
      for (int p : preds[b]) {
        const double gap = funcs[p].stream->index == lane ? 0 : cross;
        EXPECT_GE(start[b], start[p] + 1 + gap) << "trial " << trial << " op " << b;
      }
      for (double t : busy[lane]) EXPECT_GE(start[b], t + 1);  // one op at a time per stream
      busy[lane].push_back(start[b]);
    }
  }
}

}  // namespace
}  // namespace sluice::framework::list_schedule_test
