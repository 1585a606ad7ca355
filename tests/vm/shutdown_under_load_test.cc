// Shutdown under load: a VM with 10^4 instructions in flight over eight sim streams on two
// devices with jitter, plus a chain on the cpu stream (each held back by a gate, so they are
// really in flight), is destroyed (Shutdown(kFinish): every instruction runs, the values are
// exact) or cancelled (Shutdown(kCancel): what had not launched is skipped and its results
// poisoned with Cancelled — on sim, ops are launched into the device's queue at once and
// finish, as on a GPU, so each sim result is exact or Cancelled; the cpu chain behind its
// gate never launched — and nothing hangs), and leaves no memory behind. Each scenario repeats 100
// times in the default scheduling (10 in caller-thread scheduling), in parts: CI runs this binary
// under ThreadSanitizer, where a lost wake-up or a race in the shutdown path shows up as a hang or
// a report.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::shutdown_under_load_test {
namespace {

using testing::Gate;
using testing::GateKernel;
using ::testing::HasSubstr;
using testing::HostF32;
using testing::OrderLog;
using testing::Tag;
using testing::VmHarness;
using testing::WaitForShutdownBarrier;
using Scheduling = VmOptions::Scheduling;

constexpr int kStreams = 8;          // sim:0 and sim:1, four compute streams each
constexpr int kOpsPerStream = 1250;  // 10^4 op calls, plus the waits soft sync adds
constexpr int kCpuOps = 1000;        // behind the gate on the cpu stream
constexpr int kCrossEvery = 100;     // every 100th op on a stream reads the next stream's x
constexpr int64_t kN = 8;

// The repetitions of a scenario are split into parts, one test each, so that CI's gtest
// shards (two at once under ThreadSanitizer) share them evenly: 4 x 25 in the default
// scheduling, 2 x 5 in caller-thread scheduling.
struct Part {
  Scheduling scheduling;
  int index;
  int repetitions;
};
std::vector<Part> AllParts() {
  struct Split {
    Scheduling scheduling;
    int parts;
    int repetitions_each;
  };
  constexpr Split kSplits[] = {{Scheduling::kDedicatedThread, 4, 25},
                               {Scheduling::kCallerThread, 2, 5}};
  std::vector<Part> parts;
  for (const Split& split : kSplits) {
    for (int i = 0; i < split.parts; ++i) {
      parts.push_back({split.scheduling, i, split.repetitions_each});
    }
  }
  return parts;
}

std::string StreamName(int s) { return absl::StrCat("sim:", s / 4, "/compute:", s % 4); }

int64_t BytesInUse(ep::Runtime& runtime, const char* device) {
  return runtime.GetDevice(device).value()->caching_allocator().stats().bytes_in_use;
}

// The load: x[s] = s on each stream, a gated op on each stream (x[s] = 0 once the gate
// opens), then kOpsPerStream ops per stream, most x[s] += 1, every kCrossEvery-th
// x[s] = x[s] + x[s+1] (a read across streams, so soft sync adds waits and events). Returns
// the values the program computes in order (what soft sync must give).
struct Load {
  std::vector<BlobRef> x;
  std::vector<float> expected;
  BlobRef cpu;  // kCpuOps x += 1 behind a gate on cpu, from 0
};

Load SubmitLoad(VmHarness& h, const GateKernel& gated) {
  Load load;
  for (int s = 0; s < kStreams; ++s) {
    load.x.push_back(h.NewF32(StreamName(s), kN, absl::StrCat("x", s)));
    EXPECT_TRUE(h.Fill(load.x[s], s, StreamName(s)).ok());
  }
  EXPECT_TRUE(h.vm->Sync().ok());
  load.expected.assign(kStreams, 0.0f);
  for (int s = 0; s < kStreams; ++s) {
    EXPECT_TRUE(
        h.builder->Call(gated, {}, {load.x[s]}, Tag(absl::StrCat("G", s), 0), h.S(StreamName(s)))
            .ok());
  }
  const AttrMap plus_one = AttrMap().Set("alpha", 1.0).Set("beta", 1.0);
  load.cpu = h.NewF32("cpu", kN, "cpu");
  EXPECT_TRUE(h.builder->Call(gated, {}, {load.cpu}, Tag("Gcpu", 0), h.S("cpu")).ok());
  for (int i = 0; i < kCpuOps; ++i) {
    EXPECT_TRUE(h.builder->Call(h.K("scale"), {load.cpu}, {load.cpu}, plus_one, h.S("cpu")).ok());
  }
  for (int i = 0; i < kOpsPerStream; ++i) {
    for (int s = 0; s < kStreams; ++s) {
      const int next = (s + 1) % kStreams;
      absl::Status called;
      if (i % kCrossEvery == kCrossEvery - 1) {
        called = h.Add(load.x[s], load.x[next], load.x[s], StreamName(s));
        load.expected[s] += load.expected[next];
      } else {
        called =
            h.builder->Call(h.K("scale"), {load.x[s]}, {load.x[s]}, plus_one, h.S(StreamName(s)));
        load.expected[s] += 1;
      }
      EXPECT_TRUE(called.ok()) << called;
    }
  }
  return load;
}

ep::RuntimeOptions Jittery() {
  ep::RuntimeOptions options;
  options.sim.max_jitter_us = 2;
  return options;
}

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  return options;
}

class ShutdownUnderLoadTest : public ::testing::TestWithParam<Part> {
 protected:
  Scheduling scheduling() const { return GetParam().scheduling; }
};

TEST_P(ShutdownUnderLoadTest, DestroyingTheVmRunsTenThousandInFlightInstructions) {
  for (int rep = 0; rep < GetParam().repetitions; ++rep) {
    SCOPED_TRACE(absl::StrCat("repetition ", rep));
    Gate gate;
    GateKernel gated(&gate);
    absl::Cleanup open_gate = [&gate] { gate.Open(); };
    VmHarness h(Options(scheduling()), Jittery());
    Load load = SubmitLoad(h, gated);
    ASSERT_GE(h.vm->stats().max_in_flight, kStreams * kOpsPerStream) << h.vm->stats().ToString();

    const int64_t barriers = h.vm->stats().barriers;
    // Open only once shutdown has begun: the VM is destroyed with all of it in flight. The
    // opener reads the VM's stats while its destructor waits in Shutdown, which cannot end
    // before the gate opens, so the VM is alive for every read.
    VirtualMachine* const machine = h.vm.get();
    std::thread opener([&gate, machine, barriers] {
      EXPECT_TRUE(WaitForShutdownBarrier(machine, barriers));
      gate.Open();
    });
    h.builder.reset();
    h.vm.reset();  // Shutdown(kFinish)
    opener.join();

    EXPECT_EQ(gated.runs(), kStreams + 1);
    for (int s = 0; s < kStreams; ++s) {
      ASSERT_FALSE(load.x[s]->poisoned()) << load.x[s]->poison();
      EXPECT_EQ(HostF32(*load.x[s]), std::vector<float>(kN, load.expected[s])) << "x" << s;
    }
    EXPECT_EQ(HostF32(*load.cpu), std::vector<float>(kN, kCpuOps));
    load.x.clear();
    load.cpu.reset();
    for (const char* device : {"cpu", "sim:0", "sim:1"}) {
      EXPECT_EQ(BytesInUse(*h.runtime, device), 0) << device;
    }
  }
}

TEST_P(ShutdownUnderLoadTest, CancellingSkipsWhatHasNotLaunchedAndLeavesNothingBehind) {
  for (int rep = 0; rep < GetParam().repetitions; ++rep) {
    SCOPED_TRACE(absl::StrCat("repetition ", rep));
    Gate gate;
    OrderLog log;
    GateKernel gated(&gate, &log);
    absl::Cleanup open_gate = [&gate] { gate.Open(); };
    VmHarness h(Options(scheduling()), Jittery());
    Load load = SubmitLoad(h, gated);
    // Every gated op holds its stream; on cpu, nothing behind it can launch before the cancel.
    for (int s = 0; s < kStreams; ++s) ASSERT_TRUE(log.WaitFor(absl::StrCat("G", s, ":start")));
    ASSERT_TRUE(log.WaitFor("Gcpu:start"));
    const VmStats before = h.vm->stats();
    ASSERT_GE(before.max_in_flight, kStreams * kOpsPerStream) << before.ToString();

    absl::Status status;
    std::thread shutter([&] { status = h.vm->Shutdown(ShutdownMode::kCancel); });
    EXPECT_TRUE(WaitForShutdownBarrier(h.vm.get(), before.barriers));
    gate.Open();
    shutter.join();
    SLUICE_EXPECT_OK(status);

    EXPECT_EQ(gated.runs(), kStreams + 1);
    const VmStats after = h.vm->stats();
    EXPECT_GE(after.skipped - before.skipped, kCpuOps) << after.ToString();
    const absl::Status cpu_poison = load.cpu->poison();
    EXPECT_EQ(cpu_poison.code(), absl::StatusCode::kCancelled) << cpu_poison;
    EXPECT_THAT(cpu_poison.message(), HasSubstr("cancelled by shutdown"));
    for (int s = 0; s < kStreams; ++s) {  // launched before the cancel: ran; else cancelled
      if (load.x[s]->poisoned()) {
        EXPECT_EQ(load.x[s]->poison().code(), absl::StatusCode::kCancelled) << "x" << s;
      } else {
        EXPECT_EQ(HostF32(*load.x[s]), std::vector<float>(kN, load.expected[s])) << "x" << s;
      }
    }
    // The VM takes nothing after shutdown, and says so.
    EXPECT_FALSE(h.Fill(load.x[0], 1, StreamName(0)).ok());
    load.x.clear();
    load.cpu.reset();
    h.builder.reset();
    h.vm.reset();
    for (const char* device : {"cpu", "sim:0", "sim:1"}) {
      EXPECT_EQ(BytesInUse(*h.runtime, device), 0) << device;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SchedulingPart, ShutdownUnderLoadTest, ::testing::ValuesIn(AllParts()),
                         [](const ::testing::TestParamInfo<Part>& info) {
                           return absl::StrCat(testing::SchedulingName(info.param.scheduling),
                                               "_part", info.param.index);
                         });

}  // namespace
}  // namespace sluice::vm::shutdown_under_load_test
