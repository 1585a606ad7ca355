// Engine tests: read-after-write, write-after-read and write-after-write order proven with a
// gated first access and an order log, over several stream routes; independent work not
// serialized; the launched-vs-done edge rule (a same-stream or StreamWait successor is
// dispatched while its predecessor still runs, a successor on another device waits for
// completion); precomputed batches; random programs checked against a sequential reference;
// several producer threads. Every test runs under both scheduling modes.
#include "vm/internal/engine.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/sync_checker.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::engine_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
using testing::SchedulingName;
using testing::Shared;
using testing::Tag;
using testing::VmHarness;
using Scheduling = VmOptions::Scheduling;

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  options.check_sync = true;
  return options;
}

ep::RuntimeOptions Jitter(uint64_t seed) {
  ep::RuntimeOptions options;
  options.sim.seed = seed;
  options.sim.max_jitter_us = 30;
  return options;
}

std::vector<float> Filled(int64_t n, float value) { return std::vector<float>(n, value); }

// --- Hazards: the second access to a blob must not run before the gated first one ends. ---

enum class Hazard { kRaw, kWar, kWaw };

struct Route {
  const char* name;
  const char* first;   // stream of the gated first access (the blob lives there)
  const char* second;  // stream of the second access
  bool soft_sync;
  // The second access is not even launched before the first completes (a completion edge);
  // otherwise it may be launched at once and only its execution waits (stream order).
  bool successor_waits;
  int stream_waits;  // sync instructions soft sync must emit for the second access
  int record_events;
};

constexpr Route kRoutes[] = {
    {"SameStream", "sim:0/compute", "sim:0/compute", true, false, 0, 0},
    {"StreamWait", "sim:0/compute", "sim:0/h2d", true, false, 1, 0},
    {"CrossDevice", "sim:0/compute", "sim:1/compute", true, true, 0, 1},
    {"SimToCpu", "sim:1/compute", "cpu", true, true, 0, 1},
    // No soft sync: the edge from cpu work to another ThreadCtx comes from the engine alone.
    {"CpuToSimEngineOnly", "cpu", "sim:0/compute", false, true, 0, 0},
};
constexpr int kNumRoutes = sizeof(kRoutes) / sizeof(kRoutes[0]);

class HazardTest : public ::testing::TestWithParam<std::tuple<Scheduling, Hazard, int>> {};

TEST_P(HazardTest, SecondAccessWaitsForGatedFirstAccess) {
  const auto [scheduling, hazard, route_index] = GetParam();
  const Route& route = kRoutes[route_index];
  Gate gate;
  OrderLog log;
  GateKernel first(&gate, &log, "first");
  LogKernel second(&log, "second");
  VmHarness h(Options(scheduling));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  h.builder->set_soft_sync(route.soft_sync);

  constexpr int64_t kN = 64;
  BlobRef x = h.NewF32(route.first, kN, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(kN, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const VmStats before = h.vm->stats();

  // A writes 2 (RAW, WAW) or reads (WAR); B reads (RAW) or writes 3 (WAR, WAW).
  const bool a_writes = hazard != Hazard::kWar;
  const bool b_writes = hazard != Hazard::kRaw;
  SLUICE_ASSERT_OK(h.builder->Call(first, a_writes ? BlobList{} : BlobList{x},
                                   a_writes ? BlobList{x} : BlobList{},
                                   a_writes ? Tag("A", 2) : Tag("A"), h.S(route.first)));
  ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(second, b_writes ? BlobList{} : BlobList{x},
                                   b_writes ? BlobList{x} : BlobList{},
                                   b_writes ? Tag("B", 3) : Tag("B"), h.S(route.second)));
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log.Contains("B:start")) << log.ToString();
  if (route.successor_waits) {
    EXPECT_FALSE(log.Contains("B:launch")) << log.ToString();
  }

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  const int a_end = log.IndexOf("A:end");
  const int b_start = log.IndexOf("B:start");
  ASSERT_GE(a_end, 0) << log.ToString();
  ASSERT_GE(b_start, 0) << log.ToString();
  EXPECT_LT(a_end, b_start) << log.ToString();
  if (route.successor_waits) {
    EXPECT_LT(a_end, log.IndexOf("B:launch")) << log.ToString();
  }

  // Counted before the read: reading a blob another device used last adds its own sync.
  const VmStats after = h.vm->stats();
  const std::vector<float> final_x = h.Read(x).value();
  switch (hazard) {
    case Hazard::kRaw:
      EXPECT_TRUE(log.Contains("B:saw=2")) << log.ToString();
      EXPECT_EQ(final_x, Filled(kN, 2));
      break;
    case Hazard::kWar:
      EXPECT_TRUE(log.Contains("A:saw=1")) << log.ToString();
      EXPECT_EQ(final_x, Filled(kN, 3));
      break;
    case Hazard::kWaw:
      EXPECT_EQ(final_x, Filled(kN, 3));
      break;
  }
  EXPECT_EQ(after.stream_waits - before.stream_waits, route.stream_waits) << after.ToString();
  EXPECT_EQ(after.record_events - before.record_events, route.record_events) << after.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

std::string HazardTestName(
    const ::testing::TestParamInfo<std::tuple<Scheduling, Hazard, int>>& info) {
  const auto [scheduling, hazard, route] = info.param;
  const char* hazard_name = hazard == Hazard::kRaw ? "Raw" : hazard == Hazard::kWar ? "War" : "Waw";
  return absl::StrCat(SchedulingName(scheduling), "_", hazard_name, "_", kRoutes[route].name);
}

INSTANTIATE_TEST_SUITE_P(
    All, HazardTest,
    ::testing::Combine(::testing::Values(Scheduling::kDedicatedThread, Scheduling::kCallerThread),
                       ::testing::Values(Hazard::kRaw, Hazard::kWar, Hazard::kWaw),
                       ::testing::Range(0, kNumRoutes)),
    HazardTestName);

// --- Tests under each scheduling mode. ---

class EngineTest : public ::testing::TestWithParam<Scheduling> {};

TEST_P(EngineTest, IndependentBlobsAreNotSerializedBehindAGatedOp) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:0/compute", 16, "x");
  BlobRef y = h.NewF32("sim:1/compute", 16, "y");
  BlobRef z = h.NewF32("cpu", 16, "z");
  BlobRef w = h.NewF32("sim:0/h2d", 16, "w");

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 1), h.S("sim:0/compute")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {}, {y}, Tag("B", 2), h.S("sim:1/compute")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {}, {z}, Tag("C", 3), h.S("cpu")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {}, {w}, Tag("D", 4), h.S("sim:0/h2d")));
  // All three finish while A is still blocked.
  ASSERT_TRUE(log.WaitFor("B:end")) << log.ToString();
  ASSERT_TRUE(log.WaitFor("C:end")) << log.ToString();
  ASSERT_TRUE(log.WaitFor("D:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("A:end")) << log.ToString();

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.Read(x).value(), Filled(16, 1));
  EXPECT_EQ(h.Read(y).value(), Filled(16, 2));
  EXPECT_EQ(h.Read(z).value(), Filled(16, 3));
  EXPECT_EQ(h.Read(w).value(), Filled(16, 4));
  EXPECT_EQ(h.vm->stats().stream_waits + h.vm->stats().record_events, 0);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

// Two reads of one blob do not conflict: the engine adds no edge between them. (With soft sync
// on, the builder would order uses on different streams through sync instructions, so it is
// off here.)
TEST_P(EngineTest, ReadsOfOneBlobAreNotSerialized) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  h.builder->set_soft_sync(false);
  BlobRef x = h.NewF32("sim:0/compute", 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 5)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  SLUICE_ASSERT_OK(h.builder->Call(gated, {x}, {}, Tag("A"), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("B"), h.S("sim:1/compute")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("C"), h.S("cpu")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("D"), h.S("sim:0/h2d")));
  ASSERT_TRUE(log.WaitFor("B:end")) << log.ToString();
  ASSERT_TRUE(log.WaitFor("C:end")) << log.ToString();
  ASSERT_TRUE(log.WaitFor("D:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("A:saw=5")) << log.ToString();
  EXPECT_TRUE(log.Contains("B:saw=5") && log.Contains("C:saw=5") && log.Contains("D:saw=5"))
      << log.ToString();

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_TRUE(log.Contains("A:saw=5")) << log.ToString();
  EXPECT_EQ(h.vm->stats().stream_waits + h.vm->stats().record_events, 0);
}

// Launched-vs-done: an edge into the same stream is satisfied once the predecessor is
// dispatched, so the successor is launched while the predecessor's host work still blocks.
TEST_P(EngineTest, SameStreamSuccessorIsLaunchedWhilePredecessorRuns) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:0/compute", 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 2), h.S("sim:0/compute")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("B"), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("B:launch")) << "B was not launched while A ran: " << log.ToString();
  EXPECT_FALSE(log.Contains("A:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("B:start")) << log.ToString();

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("B:start")) << log.ToString();
  EXPECT_TRUE(log.Contains("B:saw=2")) << log.ToString();
  EXPECT_EQ(h.vm->stats().stream_waits + h.vm->stats().record_events, 0);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

// A StreamWait into the successor's stream orders it on the device: the successor is launched
// at once, and runs only after the predecessor.
TEST_P(EngineTest, StreamWaitSuccessorIsLaunchedWhilePredecessorRuns) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:0/compute", 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 2), h.S("sim:0/compute")));
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("B"), h.S("sim:0/h2d")));
  ASSERT_TRUE(log.WaitFor("B:launch")) << "B was not launched while A ran: " << log.ToString();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log.Contains("A:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("B:start")) << log.ToString();

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("B:start")) << log.ToString();
  EXPECT_TRUE(log.Contains("B:saw=2")) << log.ToString();
  EXPECT_EQ(h.vm->stats().stream_waits, 1);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

// Across devices (another sim device, or cpu) the successor waits for the predecessor's
// completion: it is not launched while the predecessor is gated.
TEST_P(EngineTest, OtherDeviceSuccessorIsLaunchedOnlyAfterCompletion) {
  for (const char* consumer : {"sim:1/compute", "cpu"}) {
    SCOPED_TRACE(consumer);
    Gate gate;
    OrderLog log;
    GateKernel gated(&gate, &log);
    LogKernel logger(&log);
    VmHarness h(Options(GetParam()));
    absl::Cleanup open_gate = [&gate] { gate.Open(); };
    BlobRef x = h.NewF32("sim:0/compute", 16, "x");
    SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
    SLUICE_ASSERT_OK(h.vm->Sync());

    SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 2), h.S("sim:0/compute")));
    SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("B"), h.S(consumer)));
    ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
    absl::SleepFor(kMisbehaveWindow);
    EXPECT_FALSE(log.Contains("B:launch")) << log.ToString();

    gate.Open();
    SLUICE_ASSERT_OK(h.vm->Sync());
    EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("B:launch")) << log.ToString();
    EXPECT_TRUE(log.Contains("B:saw=2")) << log.ToString();
    EXPECT_EQ(h.vm->stats().record_events, 1);
    EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
  }
}

// The engine adds no device order of its own between an ordinary instruction on an
// asynchronous stream and a user elsewhere (docs/design.md, "The VM"): without the sync soft
// sync would emit, the reader is not held back, and the sync checker reports the race
// instead of the engine hiding it.
TEST_P(EngineTest, MissingSyncIsReportedByTheCheckerNotHidden) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  h.builder->set_soft_sync(false);
  BlobRef x = h.NewF32("sim:0/compute", 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("A", 2), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {}, Tag("B"), h.S("sim:1/compute")));
  ASSERT_TRUE(log.WaitFor("B:end")) << log.ToString();
  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_GE(h.vm->sync_checker()->violation_count(), 1);
}

// --- Precomputed batches. ---

TEST_P(EngineTest, PrecomputedEdgesAreHonoured) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("cpu", 16, "x");
  BlobRef y = h.NewF32("sim:1/compute", 16, "y");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.Write(y, Filled(16, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  PrecomputedBatch batch;
  const int a = batch.AddOpCall(gated, {}, {x}, Shared(Tag("A", 2)), h.S("cpu"));
  const int b = batch.AddOpCall(logger, {x}, {}, Shared(Tag("B")), h.S("sim:0/compute"));
  const int c = batch.AddOpCall(logger, {}, {y}, Shared(Tag("C", 5)), h.S("sim:1/compute"));
  const int d = batch.AddOpCall(logger, {y}, {}, Shared(Tag("D")), h.S("sim:1/compute"));
  SLUICE_ASSERT_OK(batch.AddEdge(a, b));
  SLUICE_ASSERT_OK(batch.AddEdge(c, d));
  EXPECT_EQ(batch.edges(), 2);
  SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));

  // c -> d runs while a is gated; b waits for a (cpu work of another ThreadCtx: completion).
  ASSERT_TRUE(log.WaitFor("A:start")) << log.ToString();
  ASSERT_TRUE(log.WaitFor("D:end")) << log.ToString();
  EXPECT_TRUE(log.Contains("D:saw=5")) << log.ToString();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_FALSE(log.Contains("B:launch")) << log.ToString();

  gate.Open();
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_LT(log.IndexOf("A:end"), log.IndexOf("B:launch")) << log.ToString();
  EXPECT_TRUE(log.Contains("B:saw=2")) << log.ToString();
  EXPECT_EQ(h.vm->stats().op_calls, 4);
}

// One batch over three streams and two devices with its own sync nodes, submitted many times
// (a step each, with a sync point between steps as the interpreter does). Each step adds 3.
TEST_P(EngineTest, PrecomputedBatchResubmittedManyTimes) {
  VmHarness h(Options(GetParam()), Jitter(11));
  constexpr int64_t kN = 4096;
  constexpr int kSteps = 100;
  BlobRef acc = h.NewF32("sim:0/compute", kN, "acc");
  BlobRef t = h.NewF32("sim:0/compute", kN, "t");
  BlobRef u = h.NewF32("sim:0/h2d", kN, "u");
  BlobRef c = h.NewF32("sim:1/compute", kN, "c");
  SLUICE_ASSERT_OK(h.Write(acc, Filled(kN, 0)));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const VmStats before = h.vm->stats();

  auto plus_one = Shared(AttrMap().Set("alpha", 1.0).Set("beta", 1.0));
  Stream* compute = h.S("sim:0/compute");
  Stream* h2d = h.S("sim:0/h2d");
  Stream* other = h.S("sim:1/compute");
  PrecomputedBatch batch;
  std::vector<int> nodes;
  nodes.push_back(batch.AddOpCall(h.K("scale"), {acc}, {t}, plus_one, compute));
  nodes.push_back(batch.AddStreamWait({t}, compute, h2d));
  nodes.push_back(batch.AddOpCall(h.K("scale"), {t}, {u}, plus_one, h2d));
  nodes.push_back(batch.AddRecordEvent({u}, h2d));
  nodes.push_back(batch.AddOpCall(h.K("copy"), {u}, {c}, nullptr, other));
  nodes.push_back(batch.AddRecordEvent({c}, other));
  nodes.push_back(batch.AddOpCall(h.K("scale"), {c}, {acc}, plus_one, compute));
  for (size_t i = 1; i < nodes.size(); ++i) SLUICE_ASSERT_OK(batch.AddEdge(nodes[i - 1], nodes[i]));
  SLUICE_ASSERT_OK(batch.AddEdge(nodes[0], nodes[6]));  // acc: write after read
  EXPECT_EQ(batch.edges(), 7);

  for (int step = 0; step < kSteps; ++step) {
    SLUICE_ASSERT_OK(batch.Submit(h.vm.get()));
    SLUICE_ASSERT_OK(h.vm->Sync());
  }
  EXPECT_EQ(h.Read(acc).value(), Filled(kN, 3 * kSteps));
  EXPECT_EQ(h.Read(t).value(), Filled(kN, 3 * kSteps - 2));
  EXPECT_EQ(h.Read(u).value(), Filled(kN, 3 * kSteps - 1));
  EXPECT_EQ(h.Read(c).value(), Filled(kN, 3 * kSteps - 1));
  const VmStats after = h.vm->stats();
  EXPECT_EQ(after.op_calls - before.op_calls, 4 * kSteps);
  EXPECT_EQ(after.stream_waits - before.stream_waits, kSteps);
  EXPECT_EQ(after.record_events - before.record_events, 2 * kSteps);
  EXPECT_EQ(after.skipped, 0);
}

// --- Random programs against a sequential reference. ---

// Streams of cpu, sim:0 and sim:1.
const std::vector<std::vector<std::string>>& StreamsByDevice() {
  static const auto* const streams = new std::vector<std::vector<std::string>>{
      {"cpu"}, {"sim:0/compute", "sim:0/compute:1", "sim:0/h2d"}, {"sim:1/compute", "sim:1/d2h"}};
  return *streams;
}

bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Runs a random program of fill/add/mul/scale/copy (and a few reads and releases) over
// `num_blobs` fresh f32 blobs on random streams through `builder`, mirroring every op on a
// sequential reference. Elementwise operands share the output's device; copies may cross
// devices. Reads back a blob now and then, and every blob at the end. Returns the mismatches
// and adds the number of op calls submitted to `op_calls`.
std::vector<std::string> RunRandomProgram(VmHarness& h, InstructionsBuilder& builder, uint64_t seed,
                                          int num_blobs, int num_ops, int64_t* op_calls) {
  constexpr int64_t kN = 257;
  constexpr float kFills[] = {-2, -1, -0.5f, 0.5f, 1, 1.5f, 2, 3};
  constexpr float kAlphas[] = {-1, 0.5f, 1, 2};
  constexpr float kBetas[] = {-1, 0, 0.25f, 1};
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](size_t k) { return static_cast<int>(rng() % k); };
  std::vector<std::string> failures;
  struct Slot {
    BlobRef blob;
    int device = 0;
    std::vector<float> ref;
  };
  std::vector<Slot> slots(num_blobs);
  auto random_stream = [&](int device) {
    const std::vector<std::string>& streams = StreamsByDevice()[device];
    return streams[uniform(streams.size())];
  };
  auto submitted = [&](const absl::Status& status, absl::string_view what) {
    if (!status.ok())
      failures.push_back(absl::StrCat("seed ", seed, " ", what, ": ", status.ToString()));
    return status.ok();
  };
  auto fresh = [&](int i) {
    Slot& slot = slots[i];
    absl::StatusOr<BlobRef> blob = h.vm->NewBlob(h.S(random_stream(slot.device)), DataType::kF32,
                                                 Shape({kN}), absl::StrCat("b", i));
    if (!submitted(blob.status(), "NewBlob")) return;
    slot.blob = *blob;
    const float v = kFills[uniform(std::size(kFills))];
    slot.ref.assign(kN, v);
    submitted(builder.Call(h.K("fill"), {}, {slot.blob}, AttrMap().Set("value", double{v}),
                           h.S(random_stream(slot.device))),
              "fill");
    ++*op_calls;
  };
  auto check = [&](int i, int at) {
    absl::StatusOr<std::vector<uint8_t>> bytes = builder.ReadBlob(slots[i].blob);
    if (!submitted(bytes.status(), absl::StrCat("read b", i))) return;
    std::vector<float> got(kN);
    std::memcpy(got.data(), bytes->data(), bytes->size());
    for (int64_t k = 0; k < kN; ++k) {
      if (!SameFloat(got[k], slots[i].ref[k])) {
        failures.push_back(absl::StrCat("seed ", seed, " after op ", at, ": b", i, "[", k,
                                        "] = ", got[k], ", want ", slots[i].ref[k]));
        return;
      }
    }
  };
  auto same_device = [&](int y) {
    while (true) {
      const int j = uniform(num_blobs);
      if (slots[j].device == slots[y].device) return j;
    }
  };

  for (int i = 0; i < num_blobs; ++i) {
    slots[i].device = i % 3;
    fresh(i);
  }
  for (int op = 0; op < num_ops && failures.empty(); ++op) {
    const int kind = uniform(100);
    const int y = uniform(num_blobs);
    Slot& out = slots[y];
    Stream* stream = h.S(random_stream(out.device));
    std::vector<float> result(kN);
    if (kind < 12) {
      const float v = kFills[uniform(std::size(kFills))];
      submitted(
          builder.Call(h.K("fill"), {}, {out.blob}, AttrMap().Set("value", double{v}), stream),
          "fill");
      result.assign(kN, v);
    } else if (kind < 48) {
      const bool add = kind < 32;
      const int a = same_device(y);
      const int b = same_device(y);
      submitted(builder.Call(h.K(add ? "add" : "mul"), {slots[a].blob, slots[b].blob}, {out.blob},
                             AttrMap(), stream),
                add ? "add" : "mul");
      for (int64_t k = 0; k < kN; ++k) {
        result[k] = add ? slots[a].ref[k] + slots[b].ref[k] : slots[a].ref[k] * slots[b].ref[k];
      }
    } else if (kind < 68) {
      const int a = same_device(y);
      const float alpha = kAlphas[uniform(std::size(kAlphas))];
      const float beta = kBetas[uniform(std::size(kBetas))];
      submitted(
          builder.Call(h.K("scale"), {slots[a].blob}, {out.blob},
                       AttrMap().Set("alpha", double{alpha}).Set("beta", double{beta}), stream),
          "scale");
      for (int64_t k = 0; k < kN; ++k) result[k] = alpha * slots[a].ref[k] + beta;
    } else if (kind < 88) {
      const int a = uniform(num_blobs);  // any device
      submitted(builder.Call(h.K("copy"), {slots[a].blob}, {out.blob}, AttrMap(), stream), "copy");
      result = slots[a].ref;
    } else if (kind < 95) {
      check(uniform(num_blobs), op);
      continue;
    } else {
      submitted(builder.Release(out.blob), "release");
      fresh(y);
      continue;
    }
    ++*op_calls;
    out.ref = std::move(result);
  }
  for (int i = 0; i < num_blobs && failures.empty(); ++i) check(i, num_ops);
  return failures;
}

class RandomProgramTest : public ::testing::TestWithParam<std::tuple<Scheduling, int>> {};

TEST_P(RandomProgramTest, MatchesSequentialReference) {
  const auto [scheduling, seed] = GetParam();
  VmHarness h(Options(scheduling), Jitter(seed));
  int64_t op_calls = 0;
  const std::vector<std::string> failures =
      RunRandomProgram(h, *h.builder, static_cast<uint64_t>(seed), 9, 300, &op_calls);
  EXPECT_TRUE(failures.empty()) << absl::StrJoin(failures, "\n");
  SLUICE_EXPECT_OK(h.vm->Sync());
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.op_calls, op_calls) << stats.ToString();
  EXPECT_EQ(stats.skipped, 0) << stats.ToString();
  EXPECT_GT(stats.stream_waits, 0) << stats.ToString();
  EXPECT_GT(stats.record_events, 0) << stats.ToString();
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomProgramTest,
                         ::testing::Combine(::testing::Values(Scheduling::kDedicatedThread,
                                                              Scheduling::kCallerThread),
                                            ::testing::Range(1, 7)),
                         [](const ::testing::TestParamInfo<std::tuple<Scheduling, int>>& info) {
                           return absl::StrCat(SchedulingName(std::get<0>(info.param)), "_Seed",
                                               std::get<1>(info.param));
                         });

// Several threads, each with its own builder and blobs, submit random programs to one VM at
// once over shared streams.
TEST_P(EngineTest, ProducersOnSeveralThreadsWithDisjointBlobs) {
  VmHarness h(Options(GetParam()), Jitter(5));
  constexpr int kThreads = 4;
  std::vector<std::vector<std::string>> failures(kThreads);
  std::vector<int64_t> op_calls(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      InstructionsBuilder builder(h.vm.get());
      failures[t] = RunRandomProgram(h, builder, 100 + t, 6, 150, &op_calls[t]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  int64_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(failures[t].empty()) << "thread " << t << ":\n" << absl::StrJoin(failures[t], "\n");
    total += op_calls[t];
  }
  SLUICE_EXPECT_OK(h.vm->Sync());
  EXPECT_EQ(h.vm->stats().op_calls, total);
  EXPECT_EQ(h.vm->stats().skipped, 0);
  EXPECT_EQ(h.vm->sync_checker()->violation_count(), 0) << h.vm->sync_checker()->status();
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(EngineTest);

}  // namespace
}  // namespace sluice::vm::engine_test
