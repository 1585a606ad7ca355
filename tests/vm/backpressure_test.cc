// Backpressure tests: with a small max_in_flight and a gated kernel holding every submitted
// instruction, a producer blocks in Call (and in PrecomputedBatch::Submit) once the bound is
// reached and resumes when the gate opens; the high-water mark never exceeds the bound; a
// producer blocked at shutdown is released with an error; many producers under a small bound
// still compute the right values. Under both scheduling modes.
#include <atomic>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::backpressure_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using ::testing::HasSubstr;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
using testing::SchedulingName;
using testing::Tag;
using testing::VmHarness;
using testing::WaitUntil;
using Scheduling = VmOptions::Scheduling;

constexpr int64_t kBound = 8;

VmOptions Bounded(Scheduling scheduling, int64_t max_in_flight = kBound) {
  VmOptions options;
  options.scheduling = scheduling;
  options.max_in_flight = max_in_flight;
  // The bound counts instructions, and a fused run is one instruction of up to
  // max_fused_steps calls: these tests count calls (fusion_test.cc bounds runs).
  options.max_fused_steps = 0;
  return options;
}

std::vector<float> Filled(int64_t n, float value) { return std::vector<float>(n, value); }

AttrMap PlusOne() { return AttrMap().Set("alpha", 1.0).Set("beta", 1.0); }

class BackpressureStreamTest
    : public ::testing::TestWithParam<std::tuple<Scheduling, const char*>> {};

// The gated op and the ops behind it on its stream cannot retire until the gate opens, so
// exactly kBound calls return and the next one blocks.
TEST_P(BackpressureStreamTest, ProducerBlocksWhileFullAndCompletesAfterRelease) {
  // Not a structured binding: the lambda below captures `stream`, which clang 14 (the
  // sanitizer build's compiler) does not allow for a binding.
  const Scheduling scheduling = std::get<0>(GetParam());
  const char* const stream = std::get<1>(GetParam());
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  VmHarness h(Bounded(scheduling));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32(stream, 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 0)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  constexpr int kCalls = 40;
  std::atomic<int> returned{0};
  std::atomic<bool> finished{false};
  std::vector<absl::Status> statuses(kCalls);
  std::thread producer([&] {
    InstructionsBuilder builder(h.vm.get());
    statuses[0] = builder.Call(gated, {}, {x}, Tag("G", 1), h.S(stream));
    returned.fetch_add(1);
    for (int i = 1; i < kCalls; ++i) {
      statuses[i] = builder.Call(h.K("scale"), {x}, {x}, PlusOne(), h.S(stream));
      returned.fetch_add(1);
    }
    finished = true;
  });
  ASSERT_TRUE(WaitUntil([&] { return returned.load() >= kBound; })) << returned.load();
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_EQ(returned.load(), kBound);
  EXPECT_FALSE(finished.load());
  EXPECT_EQ(gated.runs(), 0);

  gate.Open();
  producer.join();
  EXPECT_EQ(returned.load(), kCalls);
  for (const absl::Status& status : statuses) SLUICE_EXPECT_OK(status);
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.Read(x).value(), Filled(16, kCalls));
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.max_in_flight, kBound) << stats.ToString();
  EXPECT_GT(stats.submit_waits, 0) << stats.ToString();
}

INSTANTIATE_TEST_SUITE_P(
    All, BackpressureStreamTest,
    ::testing::Combine(::testing::Values(Scheduling::kDedicatedThread, Scheduling::kCallerThread),
                       ::testing::Values("sim:0/compute", "cpu")),
    [](const ::testing::TestParamInfo<std::tuple<Scheduling, const char*>>& info) {
      return absl::StrCat(SchedulingName(std::get<0>(info.param)), "_",
                          std::string(std::get<1>(info.param)) == "cpu" ? "Cpu" : "Sim");
    });

class BackpressureTest : public ::testing::TestWithParam<Scheduling> {};

TEST_P(BackpressureTest, BatchSubmitBlocksWhileFull) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Bounded(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  Stream* stream = h.S("sim:0/compute");
  PrecomputedBatch batch;  // 5 instructions: two runs do not fit in 8
  int last = batch.AddOpCall(gated, {}, {}, nullptr, stream);
  for (int i = 0; i < 4; ++i) {
    const int node = batch.AddOpCall(logger, {}, {}, nullptr, stream);
    SLUICE_ASSERT_OK(batch.AddEdge(last, node));
    last = node;
  }
  PrecomputedBatch too_big;
  for (int i = 0; i < kBound + 1; ++i) too_big.AddOpCall(logger, {}, {}, nullptr, stream);
  const absl::Status rejected = too_big.Submit(h.vm.get());
  EXPECT_EQ(rejected.code(), absl::StatusCode::kInvalidArgument) << rejected;
  EXPECT_THAT(rejected.message(), HasSubstr("max_in_flight"));
  EXPECT_EQ(h.vm->stats().instructions, 0);

  constexpr int kRuns = 4;
  std::atomic<int> submitted{0};
  std::vector<absl::Status> statuses(kRuns);
  std::thread producer([&] {
    for (int i = 0; i < kRuns; ++i) {
      statuses[i] = batch.Submit(h.vm.get());
      submitted.fetch_add(1);
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return submitted.load() >= 1; }));
  absl::SleepFor(kMisbehaveWindow);
  EXPECT_EQ(submitted.load(), 1);
  gate.Open();
  producer.join();
  for (const absl::Status& status : statuses) SLUICE_EXPECT_OK(status);
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(gated.runs(), kRuns);
  EXPECT_EQ(logger.runs(), 4 * kRuns);
  const VmStats stats = h.vm->stats();
  EXPECT_LE(stats.max_in_flight, kBound) << stats.ToString();
  EXPECT_GT(stats.submit_waits, 0) << stats.ToString();
}

// Shutdown closes the VM: a producer waiting for room gets an error instead of waiting for
// ever, and what was submitted before still runs.
TEST_P(BackpressureTest, ShutdownReleasesABlockedProducer) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  VmHarness h(Bounded(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:1/compute", 16, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(16, 0)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  std::atomic<int> accepted{0};
  absl::Status refused;
  std::thread producer([&] {
    InstructionsBuilder builder(h.vm.get());
    absl::Status status = builder.Call(gated, {}, {x}, Tag("G", 1), h.S("sim:1/compute"));
    while (status.ok()) {
      accepted.fetch_add(1);
      status = builder.Call(h.K("scale"), {x}, {x}, PlusOne(), h.S("sim:1/compute"));
    }
    refused = status;
  });
  ASSERT_TRUE(WaitUntil([&] { return accepted.load() >= kBound; }));
  absl::Status shutdown;
  std::thread shutter([&] { shutdown = h.vm->Shutdown(ShutdownMode::kFinish); });
  producer.join();  // released by the shutdown, not by the gate
  EXPECT_EQ(accepted.load(), kBound);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_EQ(gated.runs(), 0);
  gate.Open();
  shutter.join();
  SLUICE_EXPECT_OK(shutdown);
  EXPECT_EQ(testing::HostF32(*x), Filled(16, kBound));
  EXPECT_LE(h.vm->stats().max_in_flight, kBound);
}

// Producers on several threads, each with its own builder and blobs across cpu and two sim
// devices (so calls carry sync instructions), under a small bound.
TEST_P(BackpressureTest, ManyProducersUnderASmallBound) {
  VmHarness h(Bounded(GetParam()));
  constexpr int kThreads = 3;
  constexpr int kSteps = 100;
  constexpr int64_t kN = 64;
  std::vector<std::vector<std::string>> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](const absl::Status& status, absl::string_view what) {
        if (!status.ok()) failures[t].push_back(absl::StrCat(what, ": ", status.ToString()));
        return !status.ok();
      };
      InstructionsBuilder builder(h.vm.get());
      BlobRef p = h.NewF32("cpu", kN), q = h.NewF32("sim:0/compute", kN),
              r = h.NewF32("sim:1/compute", kN);
      if (fail(builder.Call(h.K("fill"), {}, {p}, AttrMap().Set("value", static_cast<double>(t)),
                            h.S("cpu")),
               "fill")) {
        return;
      }
      for (int i = 1; i <= kSteps; ++i) {
        // p += 1 (cpu); q = p (sim:0); r = q + q (sim:1).
        if (fail(builder.Call(h.K("scale"), {p}, {p}, PlusOne(), h.S("cpu")), "scale") ||
            fail(builder.Call(h.K("copy"), {p}, {q}, AttrMap(), h.S("sim:0/compute")), "copy") ||
            fail(builder.Call(h.K("add"), {q, q}, {r}, AttrMap(), h.S("sim:1/compute")), "add")) {
          return;
        }
        if (i % 25 == 0) {
          absl::StatusOr<std::vector<uint8_t>> bytes = builder.ReadBlob(r);
          if (fail(bytes.status(), "read")) return;
          const float got = reinterpret_cast<const float*>(bytes->data())[kN - 1];
          if (got != 2.0f * (t + i)) {
            failures[t].push_back(absl::StrCat("step ", i, ": r = ", got, ", want ", 2 * (t + i)));
          }
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(failures[t].empty()) << "thread " << t << ": " << failures[t].front();
  }
  SLUICE_EXPECT_OK(h.vm->Sync());
  const VmStats stats = h.vm->stats();
  EXPECT_LE(stats.max_in_flight, kBound) << stats.ToString();
  EXPECT_EQ(stats.op_calls, kThreads * (1 + 3 * kSteps)) << stats.ToString();
}

// A bound of 1 still runs work one instruction at a time; a call that needs a sync
// instruction as well cannot fit and is refused rather than waiting for ever.
TEST_P(BackpressureTest, BoundOfOne) {
  VmHarness h(Bounded(GetParam(), 1));
  BlobRef x = h.NewF32("sim:0/compute", 8, "x");
  BlobRef y = h.NewF32("sim:1/compute", 8, "y");
  SLUICE_ASSERT_OK(h.Write(x, Filled(8, 1)));
  for (int i = 0; i < 20; ++i) {
    SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {x}, {x}, PlusOne(), h.S("sim:0/compute")));
  }
  SLUICE_ASSERT_OK(h.vm->Sync());
  EXPECT_EQ(h.Read(x).value(), Filled(8, 21));
  const absl::Status refused =
      h.builder->Call(h.K("copy"), {x}, {y}, AttrMap(), h.S("sim:1/compute"));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("max_in_flight"));
  EXPECT_EQ(h.vm->stats().max_in_flight, 1);
  SLUICE_EXPECT_OK(h.vm->Sync());
}

// A call refused for not fitting under the bound submits nothing, so it must not change what
// later calls assume about the blobs' last streams: a read of `a` must still be ordered after
// the gated write of `a` on its stream.
TEST_P(BackpressureTest, RefusedCallLeavesSoftSyncStateUntouched) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  VmHarness h(Bounded(GetParam(), 2));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef a = h.NewF32("sim:0/compute", 8, "a");
  BlobRef b = h.NewF32("cpu", 8, "b");
  BlobRef y = h.NewF32("sim:1/compute", 8, "y");
  SLUICE_ASSERT_OK(h.Write(a, Filled(8, 1)));
  SLUICE_ASSERT_OK(h.Write(b, Filled(8, 1)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {a}, Tag("G", 5), h.S("sim:0/compute")));
  // Two syncs (from sim:0/compute and from cpu) plus the op: 3 > 2.
  const absl::Status refused = h.Add(a, b, y, "sim:1/compute");
  ASSERT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  const int64_t instructions = h.vm->stats().instructions;

  const int64_t access_blobs = h.vm->stats().access_blobs;
  absl::StatusOr<std::vector<float>> read;
  std::thread reader([&] { read = h.Read(a); });
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().access_blobs > access_blobs; }));
  absl::SleepFor(kMisbehaveWindow);
  gate.Open();
  reader.join();
  SLUICE_ASSERT_OK(read);
  EXPECT_EQ(*read, Filled(8, 5)) << "the read did not wait for the gated write";
  EXPECT_EQ(h.vm->stats().instructions, instructions + 1);
  SLUICE_EXPECT_OK(h.vm->Sync());
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(BackpressureTest);

}  // namespace
}  // namespace sluice::vm::backpressure_test
