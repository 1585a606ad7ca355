// Shutdown tests: Shutdown(kFinish) runs every pending instruction (a gated backlog released
// from another thread); Shutdown(kCancel) skips what is not launched yet (Cancelled) and lets
// launched work finish; destroying a VM with work in flight finishes it; Shutdown is
// idempotent and returns the pending error once; submitting afterwards fails; loops of
// create/submit/shutdown leave no memory behind. Under both scheduling modes.
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
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::shutdown_test {
namespace {

using testing::FailKernel;
using testing::Gate;
using testing::GateKernel;
using ::testing::HasSubstr;
using testing::HostF32;
using testing::kMisbehaveWindow;
using testing::LogKernel;
using testing::OrderLog;
using testing::SlowKernel;
using testing::Tag;
using testing::VmHarness;
using testing::WaitForShutdownBarrier;
using testing::WaitUntil;
using Scheduling = VmOptions::Scheduling;

VmOptions Options(Scheduling scheduling) {
  VmOptions options;
  options.scheduling = scheduling;
  return options;
}

std::vector<float> Filled(int64_t n, float value) { return std::vector<float>(n, value); }

constexpr const char* kDevices[] = {"cpu", "sim:0", "sim:1"};

int64_t BytesInUse(ep::Runtime& runtime, const char* device) {
  return runtime.GetDevice(device).value()->caching_allocator().stats().bytes_in_use;
}

AttrMap PlusOne() { return AttrMap().Set("alpha", 1.0).Set("beta", 1.0); }

class ShutdownTest : public ::testing::TestWithParam<Scheduling> {};

TEST_P(ShutdownTest, FinishRunsEveryPendingInstruction) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  constexpr int64_t kN = 32;
  BlobRef x = h.NewF32("sim:0/compute", kN, "x");
  BlobRef y = h.NewF32("sim:1/compute", kN, "y");
  BlobRef c = h.NewF32("cpu", kN, "c");
  SLUICE_ASSERT_OK(h.Write(x, Filled(kN, 0)));
  SLUICE_ASSERT_OK(h.vm->Sync());

  // Everything below waits, directly or not, for the gated op.
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("G", 1), h.S("sim:0/compute")));
  for (int i = 0; i < 100; ++i) {
    SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {x}, {x}, PlusOne(), h.S("sim:0/compute")));
  }
  SLUICE_ASSERT_OK(h.builder->Call(h.K("copy"), {x}, {y}, AttrMap(), h.S("sim:1/compute")));
  for (int i = 0; i < 50; ++i) {
    SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {y}, {y}, PlusOne(), h.S("sim:1/compute")));
  }
  SLUICE_ASSERT_OK(h.builder->Call(h.K("copy"), {y}, {c}, AttrMap(), h.S("cpu")));
  for (int i = 0; i < 50; ++i) {
    SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {c}, {c}, PlusOne(), h.S("cpu")));
  }
  // Temporaries whose last reference goes away while their work is pending.
  for (int i = 0; i < 10; ++i) {
    BlobRef t = h.NewF32("sim:0/h2d", kN, "t");
    SLUICE_ASSERT_OK(h.builder->Call(h.K("copy"), {x}, {t}, AttrMap(), h.S("sim:0/h2d")));
  }
  EXPECT_EQ(gated.runs(), 0);

  std::atomic<bool> released_early{false};
  const int64_t barriers = h.vm->stats().barriers;
  std::thread opener([&] {
    if (!WaitForShutdownBarrier(h.vm.get(), barriers)) released_early = true;
    absl::SleepFor(kMisbehaveWindow);
    gate.Open();
  });
  const absl::Status status = h.vm->Shutdown(ShutdownMode::kFinish);
  opener.join();
  SLUICE_EXPECT_OK(status);
  EXPECT_FALSE(released_early);
  EXPECT_EQ(gated.runs(), 1);
  EXPECT_EQ(HostF32(*x), Filled(kN, 101));
  EXPECT_EQ(HostF32(*y), Filled(kN, 151));
  EXPECT_EQ(HostF32(*c), Filled(kN, 201));
  const VmStats stats = h.vm->stats();
  EXPECT_EQ(stats.skipped, 0) << stats.ToString();
  EXPECT_EQ(stats.op_calls, 1 + 100 + 1 + 50 + 1 + 50 + 10) << stats.ToString();

  h.builder.reset();
  h.vm.reset();
  x.reset();
  y.reset();
  c.reset();
  for (const char* device : kDevices) EXPECT_EQ(BytesInUse(*h.runtime, device), 0) << device;
}

TEST_P(ShutdownTest, CancelSkipsWorkNotYetLaunched) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  SlowKernel slow(absl::Milliseconds(5), &log);
  LogKernel reader(&log, "reader");
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("cpu", 8, "x");
  SLUICE_ASSERT_OK(h.Write(x, Filled(8, 0)));
  SLUICE_ASSERT_OK(h.vm->Sync());
  const VmStats before = h.vm->stats();

  // The gated op holds the cpu worker: the slow ops queued behind it on cpu are dispatched but
  // not launched; the readers on sim:1 wait for a RecordEvent on cpu after the gated op.
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("G", 2), h.S("cpu")));
  ASSERT_TRUE(log.WaitFor("G:start")) << log.ToString();
  constexpr int kSlow = 100;
  constexpr int kReaders = 20;
  std::vector<BlobRef> outputs;
  for (int i = 0; i < kSlow; ++i) {
    outputs.push_back(h.NewF32("cpu", 8, absl::StrCat("s", i)));
    SLUICE_ASSERT_OK(
        h.builder->Call(slow, {}, {outputs.back()}, Tag(absl::StrCat("S", i), 1), h.S("cpu")));
  }
  for (int i = 0; i < kReaders; ++i) {
    outputs.push_back(h.NewF32("sim:1/compute", 8, absl::StrCat("r", i)));
    SLUICE_ASSERT_OK(h.builder->Call(reader, {x}, {outputs.back()}, Tag(absl::StrCat("R", i), 3),
                                     h.S("sim:1/compute")));
  }

  std::atomic<bool> returned{false};
  absl::Status status;
  const int64_t barriers = h.vm->stats().barriers;
  std::thread shutter([&] {
    status = h.vm->Shutdown(ShutdownMode::kCancel);
    returned = true;
  });
  ASSERT_TRUE(WaitForShutdownBarrier(h.vm.get(), barriers));
  absl::SleepFor(kMisbehaveWindow);
  // Launched work finishes even when cancelling: the gated op still holds Shutdown.
  EXPECT_FALSE(returned);
  gate.Open();
  shutter.join();
  SLUICE_EXPECT_OK(status);

  EXPECT_EQ(gated.runs(), 1);
  EXPECT_EQ(HostF32(*x), Filled(8, 2));
  EXPECT_EQ(slow.launches(), 0) << log.ToString();
  EXPECT_EQ(reader.launches(), 0) << log.ToString();
  const VmStats after = h.vm->stats();
  EXPECT_EQ(after.record_events - before.record_events, 1) << after.ToString();
  EXPECT_EQ(after.skipped - before.skipped, kSlow + kReaders + 1) << after.ToString();
  for (const BlobRef& output : outputs) {
    const absl::Status poison = output->poison();
    EXPECT_EQ(poison.code(), absl::StatusCode::kCancelled) << output->DebugName() << ": " << poison;
    EXPECT_THAT(poison.message(), HasSubstr("cancelled by shutdown"));
  }
}

TEST_P(ShutdownTest, CancelLetsLaunchedWorkFinish) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  LogKernel logger(&log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  BlobRef x = h.NewF32("sim:0/compute", 8, "x");
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("G", 4), h.S("sim:0/compute")));
  // Same stream: launched at once, queued on the device behind the gated op.
  constexpr int kLaunched = 20;
  std::vector<BlobRef> outputs;
  for (int i = 0; i < kLaunched; ++i) {
    outputs.push_back(h.NewF32("sim:0/compute", 8));
    SLUICE_ASSERT_OK(h.builder->Call(logger, {x}, {outputs.back()}, Tag(absl::StrCat("L", i), i),
                                     h.S("sim:0/compute")));
  }
  ASSERT_TRUE(log.WaitFor(absl::StrCat("L", kLaunched - 1, ":launch"))) << log.ToString();
  EXPECT_EQ(logger.starts(), 0);

  absl::Status status;
  const int64_t barriers = h.vm->stats().barriers;
  std::thread shutter([&] { status = h.vm->Shutdown(ShutdownMode::kCancel); });
  ASSERT_TRUE(WaitForShutdownBarrier(h.vm.get(), barriers));
  gate.Open();
  shutter.join();
  SLUICE_EXPECT_OK(status);
  EXPECT_EQ(logger.runs(), kLaunched) << log.ToString();
  EXPECT_EQ(h.vm->stats().skipped, 0);
  for (int i = 0; i < kLaunched; ++i) {
    EXPECT_FALSE(outputs[i]->poisoned());
    EXPECT_EQ(HostF32(*outputs[i]), Filled(8, i));
    EXPECT_TRUE(log.Contains(absl::StrCat("L", i, ":saw=4"))) << log.ToString();
  }
}

// A write launched before the cancellation (its host work still queued) must not clear the
// poison of a later write to the same blob that the cancellation skipped: the blob's last
// writer did not run, so it stays poisoned.
TEST_P(ShutdownTest, CancelledWriteStaysPoisonedAfterAnEarlierWriteRuns) {
  Gate stream_gate;
  Gate cpu_gate;
  OrderLog log;
  GateKernel hold_stream(&stream_gate, &log, "hold_stream");
  GateKernel hold_cpu(&cpu_gate, &log, "hold_cpu");
  LogKernel writer(&log, "writer");
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gates = [&] {
    stream_gate.Open();
    cpu_gate.Open();
  };
  BlobRef g = h.NewF32("sim:0/compute", 8, "g");
  BlobRef d = h.NewF32("sim:0/compute", 8, "d");
  BlobRef y = h.NewF32("cpu", 8, "y");

  // W1 is launched behind the gated G on sim:0/compute; its host work has not run.
  SLUICE_ASSERT_OK(h.builder->Call(hold_stream, {}, {g}, Tag("G", 0), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("G:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(writer, {}, {d}, Tag("W1", 1), h.S("sim:0/compute")));
  ASSERT_TRUE(log.WaitFor("W1:launch")) << log.ToString();
  // W2 (same stream, writes d) waits for gated cpu work on y, so it is not dispatched yet.
  SLUICE_ASSERT_OK(h.builder->Call(hold_cpu, {}, {y}, Tag("C", 0), h.S("cpu")));
  ASSERT_TRUE(log.WaitFor("C:start")) << log.ToString();
  SLUICE_ASSERT_OK(h.builder->Call(writer, {y}, {d}, Tag("W2", 2), h.S("sim:0/compute")));
  const VmStats before = h.vm->stats();

  absl::Status status;
  std::thread shutter([&] { status = h.vm->Shutdown(ShutdownMode::kCancel); });
  ASSERT_TRUE(WaitForShutdownBarrier(h.vm.get(), before.barriers));
  cpu_gate.Open();
  // The RecordEvent on cpu and W2 are cancelled while W1's host work is still queued.
  ASSERT_TRUE(WaitUntil([&] { return h.vm->stats().skipped >= before.skipped + 2; }));
  EXPECT_FALSE(log.Contains("W1:end"));
  stream_gate.Open();
  shutter.join();
  SLUICE_EXPECT_OK(status);

  EXPECT_TRUE(log.Contains("W1:end")) << log.ToString();
  EXPECT_FALSE(log.Contains("W2:launch")) << log.ToString();
  EXPECT_EQ(d->poison().code(), absl::StatusCode::kCancelled)
      << "d's last writer was cancelled, yet d reads as valid: " << HostF32(*d)[0];
}

TEST_P(ShutdownTest, DestroyingTheVmWithWorkInFlightFinishesIt) {
  Gate gate;
  OrderLog log;
  GateKernel gated(&gate, &log);
  VmHarness h(Options(GetParam()));
  absl::Cleanup open_gate = [&gate] { gate.Open(); };
  constexpr int64_t kN = 64;
  BlobRef x = h.NewF32("sim:1/compute", kN, "x");
  BlobRef y = h.NewF32("cpu", kN, "y");
  SLUICE_ASSERT_OK(h.builder->Call(gated, {}, {x}, Tag("G", 10), h.S("sim:1/compute")));
  for (int i = 0; i < 30; ++i) {
    SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {x}, {x}, PlusOne(), h.S("sim:1/compute")));
    BlobRef t = h.NewF32("sim:0/compute", kN);  // dropped with its copy pending
    SLUICE_ASSERT_OK(h.builder->Call(h.K("copy"), {x}, {t}, AttrMap(), h.S("sim:0/compute")));
  }
  SLUICE_ASSERT_OK(h.builder->Call(h.K("copy"), {x}, {y}, AttrMap(), h.S("cpu")));
  SLUICE_ASSERT_OK(h.builder->Call(h.K("scale"), {y}, {y}, PlusOne(), h.S("cpu")));

  std::thread opener([&] {
    absl::SleepFor(kMisbehaveWindow);
    gate.Open();
  });
  h.builder.reset();
  h.vm.reset();  // Shutdown(kFinish)
  opener.join();
  EXPECT_EQ(gated.runs(), 1);
  EXPECT_FALSE(x->poisoned() || y->poisoned());
  EXPECT_EQ(HostF32(*x), Filled(kN, 40));
  EXPECT_EQ(HostF32(*y), Filled(kN, 41));
  x.reset();
  y.reset();
  for (const char* device : kDevices) EXPECT_EQ(BytesInUse(*h.runtime, device), 0) << device;
}

TEST_P(ShutdownTest, IdempotentAndReturnsThePendingErrorOnce) {
  FailKernel fail(FailKernel::When::kHostWork, absl::DataLossError("boom"), "explode");
  VmHarness h(Options(GetParam()));
  BlobRef x = h.NewF32("sim:0/compute", 4, "x");
  SLUICE_ASSERT_OK(h.builder->Call(fail, {}, {x}, AttrMap(), h.S("sim:0/compute")));
  const absl::Status first = h.vm->Shutdown();
  EXPECT_EQ(first.code(), absl::StatusCode::kDataLoss) << first;
  EXPECT_THAT(first.message(), HasSubstr("op 'explode'"));
  SLUICE_EXPECT_OK(h.vm->Shutdown());
  SLUICE_EXPECT_OK(h.vm->Shutdown(ShutdownMode::kCancel));
  EXPECT_EQ(h.vm->stats().errors, 1);
}

TEST_P(ShutdownTest, SubmittingAfterShutdownFails) {
  VmHarness h(Options(GetParam()));
  BlobRef x = h.NewF32("sim:0/compute", 4, "x");
  BlobRef y = h.NewF32("sim:0/compute", 4, "y");
  Stream* compute = h.S("sim:0/compute");
  Stream* h2d = h.S("sim:0/h2d");
  SLUICE_ASSERT_OK(h.Write(x, {1, 2, 3, 4}));
  SLUICE_ASSERT_OK(h.vm->Shutdown());
  const int64_t instructions = h.vm->stats().instructions;
  auto expect_shut = [](const absl::Status& status) {
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    EXPECT_THAT(status.message(), HasSubstr("shut down"));
  };
  expect_shut(h.Add(x, x, y, "sim:0/compute"));
  expect_shut(h.Write(x, {5, 6, 7, 8}));
  expect_shut(h.Read(x).status());
  expect_shut(h.builder->Barrier([] {}));
  expect_shut(h.builder->RecordEvent({x}, compute));
  expect_shut(h.builder->StreamWait({x}, compute, h2d));
  expect_shut(h.vm->Sync());
  PrecomputedBatch batch;
  batch.AddOpCall(h.K("copy"), {x}, {y}, nullptr, compute);
  expect_shut(batch.Submit(h.vm.get()));
  expect_shut(h.vm->GetStream("sim:1/d2h").status());  // never created before
  SLUICE_EXPECT_OK(h.vm->GetStream("sim:0/compute"));  // created before: still there
  EXPECT_EQ(h.vm->stats().instructions, instructions);
  EXPECT_EQ(HostF32(*x), (std::vector<float>{1, 2, 3, 4}));
}

// Many VMs over one Runtime, each given work and ended by Shutdown(kFinish), Shutdown(kCancel)
// or destruction. Results are checked where the work ran; memory goes back every time.
TEST_P(ShutdownTest, CreateSubmitShutdownLoop) {
  std::unique_ptr<ep::Runtime> runtime =
      ep::Runtime::Create(ep::RuntimeOptions{.enable_cuda = false}).value();
  ops::KernelRegistry kernels;
  SLUICE_ASSERT_OK(ops::RegisterStressKernels(&kernels));
  auto k = [&kernels](absl::string_view name) -> const OpKernel& {
    return *kernels.Find(name).value();
  };
  constexpr int64_t kN = 128;
  for (int iteration = 0; iteration < 30; ++iteration) {
    SCOPED_TRACE(absl::StrCat("iteration ", iteration));
    std::unique_ptr<VirtualMachine> vm =
        VirtualMachine::Create(runtime.get(), Options(GetParam())).value();
    auto builder = std::make_unique<InstructionsBuilder>(vm.get());
    auto s = [&vm](absl::string_view key) { return vm->GetStream(key).value(); };
    auto blob = [&](absl::string_view stream) {
      return vm->NewBlob(s(stream), DataType::kF32, Shape({kN})).value();
    };
    BlobRef a = blob("cpu"), b = blob("sim:0/compute"), d = blob("sim:0/h2d"),
            c = blob("sim:1/compute");
    SLUICE_ASSERT_OK(builder->Call(k("fill"), {}, {a}, AttrMap().Set("value", 1.0), s("cpu")));
    SLUICE_ASSERT_OK(builder->Call(k("copy"), {a}, {b}, AttrMap(), s("sim:0/compute")));
    SLUICE_ASSERT_OK(
        builder->Call(k("scale"), {b}, {b}, AttrMap().Set("alpha", 2.0), s("sim:0/compute")));
    SLUICE_ASSERT_OK(builder->Call(k("copy"), {b}, {d}, AttrMap(), s("sim:0/h2d")));
    SLUICE_ASSERT_OK(builder->Call(k("add"), {d, d}, {d}, AttrMap(), s("sim:0/h2d")));
    SLUICE_ASSERT_OK(builder->Call(k("copy"), {d}, {c}, AttrMap(), s("sim:1/compute")));
    SLUICE_ASSERT_OK(builder->Call(k("scale"), {c}, {c}, PlusOne(), s("sim:1/compute")));
    if (iteration % 4 == 0) {
      absl::StatusOr<std::vector<uint8_t>> read = builder->ReadBlob(c);
      SLUICE_ASSERT_OK(read);
      EXPECT_EQ(reinterpret_cast<const float*>(read->data())[kN - 1], 5.0f);
    }
    for (int i = 0; i < 20; ++i) {  // more pending work on every stream
      SLUICE_ASSERT_OK(builder->Call(k("scale"), {a}, {a}, AttrMap().Set("alpha", 1.0), s("cpu")));
      SLUICE_ASSERT_OK(
          builder->Call(k("scale"), {c}, {c}, AttrMap().Set("alpha", 1.0), s("sim:1/compute")));
    }
    std::vector<std::pair<BlobRef, float>> expected = {{a, 1}, {b, 2}, {d, 4}, {c, 5}};
    const int mode = iteration % 3;
    if (mode == 0) {
      SLUICE_EXPECT_OK(vm->Shutdown(ShutdownMode::kFinish));
    } else if (mode == 1) {
      SLUICE_EXPECT_OK(vm->Shutdown(ShutdownMode::kCancel));
    }
    builder.reset();
    vm.reset();
    for (const auto& [ref, value] : expected) {
      if (mode == 1) {
        // Cancelled: how far the work got depends on timing. That an unpoisoned blob holds
        // its final value is checked deterministically by
        // CancelledWriteStaysPoisonedAfterAnEarlierWriteRuns.
        if (ref->poisoned()) {
          EXPECT_EQ(ref->poison().code(), absl::StatusCode::kCancelled) << ref->poison();
        }
      } else {
        EXPECT_FALSE(ref->poisoned()) << ref->poison();
        EXPECT_EQ(HostF32(*ref), Filled(kN, value)) << ref->DebugName();
      }
    }
    expected.clear();
    a.reset();
    b.reset();
    c.reset();
    d.reset();
    for (const char* device : kDevices) EXPECT_EQ(BytesInUse(*runtime, device), 0) << device;
  }
}

SLUICE_INSTANTIATE_FOR_SCHEDULING(ShutdownTest);

}  // namespace
}  // namespace sluice::vm::shutdown_test
