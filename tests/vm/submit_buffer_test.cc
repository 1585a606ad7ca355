// Held-back submission (ProducerPort::SubmitBuffered): while the scheduler is busy, an
// InstructionsBuilder's calls wait in its buffer and reach the engine together. These tests
// hold the scheduler inside a barrier callback, so that calls are held back for certain,
// then check that nothing depends on the producer coming back: the scheduler takes held-back
// work itself once it is free; a blob dropped while its op is held back is kept alive until
// the op ran; a batch submitted later, a builder going away, and Sync all hand over first;
// a tiny VM (backpressure) never waits on work held back by its own producer. Caller-thread
// scheduling holds nothing back.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/vm/test_kernels.h"
#include "tests/vm/vm_test_util.h"
#include "vm/precomputed_batch.h"
#include "vm/producer_port.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::submit_buffer_test {
namespace {

using testing::Gate;
using testing::HostF32;
using testing::LogKernel;
using testing::OrderLog;
using testing::SchedulerHold;
using testing::Tag;
using testing::VmHarness;
using testing::WaitUntil;

class SubmitBufferTest : public ::testing::Test {
 protected:
  SubmitBufferTest() {
    auto kernel = std::make_unique<LogKernel>(&log_);
    log_kernel_ = kernel.get();
    EXPECT_TRUE(h_.kernels.Register(std::move(kernel)).ok());
    // Held-back submission one instruction per call: fusion would join the calls these
    // tests count (fusion_test.cc covers runs).
    h_.builder->set_fusion(false);
  }
  absl::Status Log(const std::string& tag, const BlobRef& out) {
    return h_.builder->Call(*log_kernel_, {}, {out}, Tag(tag, 1.0), h_.S("cpu"));
  }

  VmHarness h_;
  OrderLog log_;
  const OpKernel* log_kernel_ = nullptr;
};

TEST_F(SubmitBufferTest, SchedulerTakesHeldBackWorkWithoutTheProducer) {
  ASSERT_GT(ProducerPort(h_.vm.get()).max_buffered(), 3);
  BlobRef y = h_.NewF32("cpu", 1, "y");
  SchedulerHold hold(h_.builder.get());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Log(absl::StrCat("t", i), y).ok());
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 3);
  hold.Release();
  // No Sync, no further call: the scheduler must come for them by itself.
  ASSERT_TRUE(log_.WaitFor("t2:end")) << log_.ToString();
  EXPECT_LT(log_.IndexOf("t0:end"), log_.IndexOf("t1:start"));
  EXPECT_LT(log_.IndexOf("t1:end"), log_.IndexOf("t2:start"));
  EXPECT_TRUE(WaitUntil([&] { return ProducerPort(h_.vm.get()).held_back() == 0; }));
  EXPECT_TRUE(h_.vm->Sync().ok());
}

// The scheduler's next pass after the hold handles a completion (so it does not go idle
// and take buffers first) and the dropped blob: it must count the held-back op's use of the
// blob before deciding to delete it. Under ASan a premature delete shows as a write to
// freed memory.
TEST_F(SubmitBufferTest, BlobDroppedWhileItsOpIsHeldBackLivesUntilTheOpRan) {
  Gate worker_gate, scheduler_gate;
  std::atomic<bool> held{false};
  auto gate_kernel = std::make_unique<testing::GateKernel>(&worker_gate, &log_, "gated");
  const OpKernel* gated = gate_kernel.get();
  ASSERT_TRUE(h_.kernels.Register(std::move(gate_kernel)).ok());
  // A completion to come: gated work on a worker of its own.
  BlobRef q = h_.NewF32("cpu/compute:1", 1, "q");
  ASSERT_TRUE(h_.builder->Call(*gated, {}, {q}, Tag("gated"), h_.S("cpu/compute:1")).ok());
  ASSERT_TRUE(log_.WaitFor("gated:start")) << log_.ToString();
  // Hold the scheduler where it retires an access of another blob.
  BlobRef z = h_.NewF32("cpu", 1, "z");
  ASSERT_TRUE(h_.builder
                  ->AccessBlob(
                      z, /*write=*/false, [](void*, size_t) { return absl::OkStatus(); },
                      [&](const Instruction&) {
                        held.store(true);
                        scheduler_gate.Wait();
                      })
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return held.load(); }));
  BlobRef y = h_.NewF32("cpu", 4096, "dropped");
  ASSERT_TRUE(Log("w", y).ok());
  ASSERT_EQ(ProducerPort(h_.vm.get()).held_back(), 1);
  y.reset();  // the last reference: the blob is buried while its writer is held back
  worker_gate.Open();
  ASSERT_TRUE(log_.WaitFor("gated:end")) << log_.ToString();
  absl::SleepFor(testing::kMisbehaveWindow);  // the completion reaches the engine
  scheduler_gate.Open();
  ASSERT_TRUE(log_.WaitFor("w:end")) << log_.ToString();
  EXPECT_TRUE(h_.vm->Sync().ok());
}

TEST_F(SubmitBufferTest, LaterBatchSeesHeldBackWrites) {
  BlobRef x = h_.NewF32("cpu", 4, "x"), y = h_.NewF32("cpu", 4, "y");
  SchedulerHold hold(h_.builder.get());
  ASSERT_TRUE(h_.Fill(x, 7.0, "cpu").ok());
  ASSERT_EQ(ProducerPort(h_.vm.get()).held_back(), 1);
  PrecomputedBatch batch;
  batch.AddOpCall(h_.K("scale"), {x}, {y},
                  std::make_shared<const AttrMap>(AttrMap().Set("alpha", 2.0)), h_.S("cpu"));
  ASSERT_TRUE(batch.Submit(h_.vm.get()).ok());
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);  // handed over ahead of the batch
  hold.Release();
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_EQ(HostF32(*y), std::vector<float>(4, 14.0f));
}

TEST_F(SubmitBufferTest, DestroyedBuilderHandsOver) {
  BlobRef y = h_.NewF32("cpu", 1, "y");
  SchedulerHold hold(h_.builder.get());
  {
    InstructionsBuilder second(h_.vm.get());
    ASSERT_TRUE(second.Call(*log_kernel_, {}, {y}, Tag("second", 1.0), h_.S("cpu")).ok());
    EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 1);
  }
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);
  hold.Release();
  ASSERT_TRUE(log_.WaitFor("second:end")) << log_.ToString();
}

TEST_F(SubmitBufferTest, OtherBuilderMethodsAndStatsHandOverFirst) {
  BlobRef y = h_.NewF32("cpu", 1, "y");
  SchedulerHold hold(h_.builder.get());
  const int64_t before = h_.vm->stats().instructions;
  ASSERT_TRUE(Log("a", y).ok());
  ASSERT_EQ(ProducerPort(h_.vm.get()).held_back(), 1);
  EXPECT_EQ(h_.vm->stats().instructions, before + 1);  // counted, so handed over
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);
  ASSERT_TRUE(Log("b", y).ok());
  ASSERT_EQ(ProducerPort(h_.vm.get()).held_back(), 1);
  ASSERT_TRUE(h_.builder->RecordEvent({y}, h_.S("cpu")).ok());
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);
  ASSERT_TRUE(Log("c", y).ok());
  h_.builder->Flush();
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);
  hold.Release();
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_LT(log_.IndexOf("a:end"), log_.IndexOf("b:start"));
  EXPECT_LT(log_.IndexOf("b:end"), log_.IndexOf("c:start"));
}

TEST_F(SubmitBufferTest, FullBufferIsHandedOverAtOnce) {
  BlobRef y = h_.NewF32("cpu", 1, "y");
  SchedulerHold hold(h_.builder.get());
  const int64_t limit = ProducerPort(h_.vm.get()).max_buffered();
  for (int64_t i = 0; i < limit - 1; ++i) ASSERT_TRUE(Log(absl::StrCat("t", i), y).ok());
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), limit - 1);
  ASSERT_TRUE(Log("last", y).ok());
  EXPECT_EQ(ProducerPort(h_.vm.get()).held_back(), 0);
  hold.Release();
  ASSERT_TRUE(h_.vm->Sync().ok());
  EXPECT_TRUE(log_.Contains("last:end"));
}

// A VM with room for 8 instructions holds back at most 2; thousands of calls from two
// threads still finish (a producer waiting for room hands its own buffer over first).
TEST(SubmitBufferBackpressureTest, TinyVmNeverWaitsOnItsOwnHeldBackWork) {
  VmOptions options;
  options.max_in_flight = 8;
  VmHarness h(options);
  EXPECT_EQ(ProducerPort(h.vm.get()).max_buffered(), 2);
  constexpr int kCalls = 2000;
  BlobRef a = h.NewF32("cpu", 1, "a"), b = h.NewF32("cpu/compute:1", 1, "b");
  std::thread other([&] {
    InstructionsBuilder builder(h.vm.get());
    for (int i = 0; i < kCalls; ++i) {
      ASSERT_TRUE(builder
                      .Call(h.K("fill"), {}, {b}, AttrMap().Set("value", static_cast<double>(i)),
                            h.S("cpu/compute:1"))
                      .ok());
    }
  });
  for (int i = 0; i < kCalls; ++i) ASSERT_TRUE(h.Fill(a, static_cast<double>(i), "cpu").ok());
  other.join();
  ASSERT_TRUE(h.vm->Sync().ok());
  EXPECT_EQ(HostF32(*a), std::vector<float>{kCalls - 1.0f});
  EXPECT_EQ(HostF32(*b), std::vector<float>{kCalls - 1.0f});
}

TEST(SubmitBufferCallerThreadTest, HoldsNothingBack) {
  VmOptions options;
  options.scheduling = VmOptions::Scheduling::kCallerThread;
  VmHarness h(options);
  EXPECT_EQ(ProducerPort(h.vm.get()).max_buffered(), 1);
  BlobRef y = h.NewF32("cpu", 1, "y");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(h.Fill(y, static_cast<double>(i), "cpu").ok());
    EXPECT_EQ(ProducerPort(h.vm.get()).held_back(), 0);
  }
  ASSERT_TRUE(h.vm->Sync().ok());
}

}  // namespace
}  // namespace sluice::vm::submit_buffer_test
