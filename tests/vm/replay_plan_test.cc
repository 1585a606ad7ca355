// PlanReplay (vm/replay_plan.h) on small records and hand-made topologies, without a VM:
// last uses and laziness, StreamWaits the mapping cannot express, lanes rebuilt or not, and
// how waits outside lanes are ordered. Plus a randomized check (fixed seeds) that every
// plan of random eager records drops each blob after its last use and never before.
#include "vm/replay_plan.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::vm::replay_plan_test {
namespace {

using ::testing::ElementsAre;

RecordedProgram Parse(const std::string& body) {
  absl::StatusOr<RecordedProgram> program =
      ParseRecord(absl::StrCat("sluice-instructions 4\n", body, "end\n"));
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *std::move(program) : RecordedProgram();
}

const Device kCpu(DeviceType::kCpu, 0);
const Device kSim0(DeviceType::kSim, 0);
const Device kSim1(DeviceType::kSim, 1);

// Every instruction on the stream `streams[instruction_stream[i]]`.
ReplayTopology Topology(std::vector<ReplayStreamFacts> streams, std::vector<int> stream_of,
                        std::vector<int> wait_target = {}) {
  ReplayTopology topology;
  topology.streams = std::move(streams);
  topology.instruction_wait_target = wait_target;
  topology.instruction_wait_target.resize(stream_of.size(), -1);
  topology.instruction_stream = std::move(stream_of);
  return topology;
}

TEST(ReplayPlanTest, LastUsesLazinessAndKeptBlobs) {
  // Blob 1 is written, read, released and written again (lazy); blob 2 is last read by
  // instruction 3; blob 3 has a checksum (kept).
  const RecordedProgram program = Parse(
      "blob 1 cpu f32 4 cpu/compute t\n"
      "blob 2 cpu f32 4 cpu/compute x\n"
      "blob 3 cpu f32 4 cpu/compute y\n"
      "op 1 cpu/compute fill in= out=1 attrs=\n"
      "op 2 cpu/compute relu in=1 out=2 attrs=\n"
      "release 3 cpu/compute blob=1\n"
      "op 4 cpu/compute add in=2,2 out=1 attrs=\n"
      "op 5 cpu/compute relu in=1 out=3 attrs=\n"
      "checksum 3 0000000000000001\n");
  const ReplayPlan plan =
      PlanReplay(program, Topology({{kCpu, true, 0}}, {0, 0, 0, 0, 0}), /*rebuild_lanes=*/true);
  EXPECT_THAT(plan.last_use, ElementsAre(4, 3, -1));
  EXPECT_THAT(plan.lazy, ElementsAre(true, false, false));
  EXPECT_THAT(plan.wait_as_record, ElementsAre(false, false, false, false, false));
}

// One recorded StreamWait from stream 0 to stream 1, on the given facts.
bool WaitReplayedAsRecord(ReplayStreamFacts from, ReplayStreamFacts to, bool one_stream = false) {
  const RecordedProgram program = Parse(
      "blob 1 sim:0 f32 4 sim:0/h2d\n"
      "wait 1 sim:0/h2d sim:0/compute blobs=1\n");
  std::vector<ReplayStreamFacts> streams = {from};
  if (!one_stream) streams.push_back(to);
  const ReplayPlan plan =
      PlanReplay(program, Topology(streams, {0}, {one_stream ? 0 : 1}), /*rebuild_lanes=*/true);
  return plan.wait_as_record[0];
}

TEST(ReplayPlanTest, AStreamWaitTheMappingCannotExpressBecomesARecord) {
  // As recorded: two streams of one asynchronous device.
  EXPECT_FALSE(WaitReplayedAsRecord({kSim0, false, 0}, {kSim0, false, 0}));
  // sim:0=cpu: cpu streams of one worker; of two workers the worker waits on the host.
  EXPECT_TRUE(WaitReplayedAsRecord({kCpu, true, 0}, {kCpu, true, 0}));
  EXPECT_FALSE(WaitReplayedAsRecord({kCpu, true, 0}, {kCpu, true, 1}));
  // The two streams on two devices, or both on one stream.
  EXPECT_TRUE(WaitReplayedAsRecord({kSim0, false, 0}, {kSim1, false, 1}));
  EXPECT_TRUE(WaitReplayedAsRecord({kSim0, false, 0}, {kSim0, false, 0}, /*one_stream=*/true));
}

// The format document's example: sequences #4 (stream 0) and #5 (stream 1) waiting on each
// other.
const char kTwoLanes[] =
    "blob 1 cpu f32 4 cpu/compute\n"
    "blob 2 cpu f32 4 cpu/compute\n"
    "blob 3 cpu f32 4 cpu/compute\n"
    "blob 4 cpu f32 4 cpu/compute\n"
    "blob 5 cpu f32 4 cpu/compute\n"
    "batch 5\n"
    "op 4 cpu/compute:1 add in=2,1 out=3 after= attrs=\n"
    "op 5 cpu/compute add in=1,1 out=4 after= attrs=\n"
    "op 5 cpu/compute add in=4,3 out=4 after=1 waits=4:1 attrs=\n"
    "op 4 cpu/compute:1 add in=4,3 out=5 after=0 waits=5:2 attrs=\n"
    "op 5 cpu/compute add in=5,4 out=2 after=2 waits=4:2 attrs=\n";

TEST(ReplayPlanTest, SequencesWithWaitsBecomeLanesOnlyOnHostStreamsWithOwnWorkers) {
  const RecordedProgram program = Parse(kTwoLanes);
  const std::vector<int> stream_of = {0, 1, 1, 0, 1};
  const ReplayPlan lanes =
      PlanReplay(program, Topology({{kCpu, true, 0}, {kCpu, true, 1}}, stream_of), true);
  ASSERT_EQ(lanes.lanes.size(), 1u);
  EXPECT_THAT(lanes.lanes[0].lane, ElementsAre(0, 1, 1, 0, 1));
  EXPECT_THAT(lanes.lanes[0].positions[0], ElementsAre(0, 3));
  EXPECT_THAT(lanes.lanes[0].positions[1], ElementsAre(1, 2, 4));

  // One worker for both, an asynchronous device, or lanes turned off: none rebuilt.
  for (const ReplayTopology& topology :
       {Topology({{kCpu, true, 0}, {kCpu, true, 0}}, stream_of),
        Topology({{kSim0, false, 0}, {kSim0, false, 0}}, stream_of)}) {
    EXPECT_TRUE(PlanReplay(program, topology, true).lanes[0].lane.empty());
  }
  EXPECT_TRUE(PlanReplay(program, Topology({{kCpu, true, 0}, {kCpu, true, 1}}, stream_of), false)
                  .lanes[0]
                  .lane.empty());
}

TEST(ReplayPlanTest, WaitsOutsideLanesAreOrderedAsTheInterpreterOrdersStreams) {
  const RecordedProgram program = Parse(kTwoLanes);
  const std::vector<int> stream_of = {0, 1, 1, 0, 1};
  const auto orders = [&](std::vector<ReplayStreamFacts> streams) {
    const ReplayPlan plan = PlanReplay(program, Topology(streams, stream_of), false);
    std::vector<ReplayWaitOrder> out;
    for (int i : {2, 3, 4}) {
      EXPECT_EQ(plan.wait_orders[i].size(), 1u);
      out.push_back(plan.wait_orders[i][0]);
    }
    return out;
  };
  // One asynchronous device: device-side waits.
  EXPECT_THAT(orders({{kSim0, false, 0}, {kSim0, false, 1}}),
              ElementsAre(ReplayWaitOrder::kStreamWait, ReplayWaitOrder::kStreamWait,
                          ReplayWaitOrder::kStreamWait));
  // Two devices: record events.
  EXPECT_THAT(orders({{kSim0, false, 0}, {kSim1, false, 1}}),
              ElementsAre(ReplayWaitOrder::kRecordEvent, ReplayWaitOrder::kRecordEvent,
                          ReplayWaitOrder::kRecordEvent));
  // cpu streams of one worker: the engine orders them; of two workers, the consumer's
  // worker waits on the host (a StreamWait).
  EXPECT_THAT(orders({{kCpu, true, 0}, {kCpu, true, 0}}),
              ElementsAre(ReplayWaitOrder::kEngineEdge, ReplayWaitOrder::kEngineEdge,
                          ReplayWaitOrder::kEngineEdge));
  EXPECT_THAT(orders({{kCpu, true, 0}, {kCpu, true, 1}}),
              ElementsAre(ReplayWaitOrder::kStreamWait, ReplayWaitOrder::kStreamWait,
                          ReplayWaitOrder::kStreamWait));
  // cpu work feeding sim: the engine releases it in time.
  EXPECT_THAT(orders({{kSim0, false, 0}, {kCpu, true, 1}}),
              ElementsAre(ReplayWaitOrder::kRecordEvent, ReplayWaitOrder::kEngineEdge,
                          ReplayWaitOrder::kRecordEvent));
}

// Random eager records (fixed seeds): a blob's last use is the last line naming it, unless a
// checksum keeps it; it is lazy exactly when a line uses it after a release of it.
TEST(ReplayPlanTest, RandomRecordsDropEachBlobAfterItsLastUse) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    std::mt19937 rng(seed);
    const int blobs = 2 + static_cast<int>(rng() % 6);
    std::string body;
    for (int b = 1; b <= blobs; ++b) body += absl::StrCat("blob ", b, " cpu f32 4 cpu/compute\n");
    std::vector<int> last(blobs, -1);
    std::vector<bool> released(blobs, false), lazy(blobs, false), kept(blobs, false);
    const int lines = 1 + static_cast<int>(rng() % 20);
    for (int n = 0; n < lines; ++n) {
      const int a = static_cast<int>(rng() % blobs);
      const int b = static_cast<int>(rng() % blobs);
      if (rng() % 4 == 0) {
        body += absl::StrCat("release ", n + 1, " cpu/compute blob=", a + 1, "\n");
        released[a] = true;
      } else {
        body +=
            absl::StrCat("op ", n + 1, " cpu/compute relu in=", a + 1, " out=", b + 1, " attrs=\n");
        lazy[a] = lazy[a] || released[a];
        lazy[b] = lazy[b] || released[b];
        last[b] = n;
      }
      last[a] = n;
    }
    for (int b = 0; b < blobs; ++b) {
      if (rng() % 3 == 0) {
        body += absl::StrCat("checksum ", b + 1, " 0000000000000000\n");
        kept[b] = true;
      }
    }
    const RecordedProgram program = Parse(body);
    const ReplayPlan plan =
        PlanReplay(program, Topology({{kCpu, true, 0}}, std::vector<int>(lines, 0)), true);
    for (int b = 0; b < blobs; ++b) {
      EXPECT_EQ(plan.last_use[b], kept[b] ? -1 : last[b]) << "seed " << seed << " blob " << b;
      EXPECT_EQ(plan.lazy[b], lazy[b]) << "seed " << seed << " blob " << b;
    }
  }
}

}  // namespace
}  // namespace sluice::vm::replay_plan_test
