// Sim provider: ordering, asynchrony, errors, events, device-side waits, copies, faults.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/fault_injector.h"
#include "ep/runtime.h"

namespace sluice::ep::sim_stream_test {
namespace {

std::unique_ptr<Runtime> MakeRuntime(int sims = 2, int jitter_us = 0, uint64_t seed = 1,
                                     size_t memory = size_t{1} << 26) {
  RuntimeOptions options;
  options.num_sim_devices = sims;
  options.sim.max_jitter_us = jitter_us;
  options.sim.seed = seed;
  options.sim.memory_bytes = memory;
  options.enable_cuda = false;
  auto runtime = Runtime::Create(options);
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return *std::move(runtime);
}

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

TEST(SimStreamTest, RunsTasksInFifoOrder) {
  auto runtime = MakeRuntime(1, /*jitter_us=*/20);
  Stream* stream = *runtime->GetStream("sim:0/compute");
  std::vector<int> seen;  // written by the stream thread only; read after Sync
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(stream
                    ->Launch([&seen, i] {
                      seen.push_back(i);
                      return absl::OkStatus();
                    })
                    .ok());
  }
  ASSERT_TRUE(stream->Sync().ok());
  ASSERT_EQ(seen.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(seen[i], i);
}

TEST(SimStreamTest, LaunchIsAsynchronous) {
  auto runtime = MakeRuntime(1);
  Stream* stream = *runtime->GetStream("sim:0/compute");
  absl::Notification release, ran;
  ASSERT_TRUE(stream
                  ->Launch([&] {
                    release.WaitForNotification();
                    ran.Notify();
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_FALSE(ran.HasBeenNotified());  // Launch returned while the task is blocked
  release.Notify();
  ASSERT_TRUE(stream->Sync().ok());
  EXPECT_TRUE(ran.HasBeenNotified());
}

TEST(SimStreamTest, SyncReturnsAndClearsFirstError) {
  auto runtime = MakeRuntime(1);
  Stream* stream = *runtime->GetStream("sim:0/compute");
  std::atomic<int> after{0};
  ASSERT_TRUE(stream->Launch([] { return absl::InvalidArgumentError("first"); }).ok());
  ASSERT_TRUE(stream->Launch([]() -> absl::Status { throw std::runtime_error("second"); }).ok());
  ASSERT_TRUE(stream
                  ->Launch([&] {
                    after.fetch_add(1);
                    return absl::OkStatus();
                  })
                  .ok());
  absl::Status status = stream->Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "sim:0/compute")) << status;
  EXPECT_TRUE(Contains(status.message(), "first")) << status;
  EXPECT_EQ(after.load(), 1);  // later work still ran
  EXPECT_TRUE(stream->Sync().ok());
  ASSERT_TRUE(stream->Launch([]() -> absl::Status { throw std::runtime_error("thrown"); }).ok());
  status = stream->Sync();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(Contains(status.message(), "thrown")) << status;
}

TEST(SimEventTest, RecordQuerySyncAndNeverRecorded) {
  auto runtime = MakeRuntime(1);
  Device* device = *runtime->GetDevice("sim:0");
  Stream* stream = *device->GetStream(StreamType::kCompute);
  PooledEvent event = *device->event_pool().Borrow();
  EXPECT_TRUE(event->Query());  // never recorded
  absl::Notification release;
  ASSERT_TRUE(stream
                  ->Launch([&] {
                    release.WaitForNotification();
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(stream->RecordEvent(event.get()).ok());
  EXPECT_FALSE(event->Query());
  release.Notify();
  EXPECT_TRUE(event->Sync().ok());
  EXPECT_TRUE(event->Query());
}

// B waits on the device side for A's event: B's task must observe A's effect even though A
// is held back, and the host is not blocked by the wait.
void CheckDeviceSideWait(Stream* a, Stream* b, EventPool& pool) {
  absl::Notification release;
  int value = 0;  // written by A's thread, read by B's after the wait
  int observed = -1;
  ASSERT_TRUE(a->Launch([&] {
                 release.WaitForNotification();
                 value = 42;
                 return absl::OkStatus();
               }).ok());
  PooledEvent event = *pool.Borrow();
  ASSERT_TRUE(a->RecordEvent(event.get()).ok());
  ASSERT_TRUE(b->WaitEvent(event.get()).ok());
  ASSERT_TRUE(b->Launch([&] {
                 observed = value;
                 return absl::OkStatus();
               }).ok());
  event.Reset();  // returning the event once the wait is enqueued is allowed
  release.Notify();
  ASSERT_TRUE(b->Sync().ok());
  EXPECT_EQ(observed, 42);
}

TEST(SimEventTest, DeviceSideWaitAcrossStreams) {
  auto runtime = MakeRuntime(1, /*jitter_us=*/30);
  Device* device = *runtime->GetDevice("sim:0");
  CheckDeviceSideWait(*device->GetStream(StreamType::kCompute, 0),
                      *device->GetStream(StreamType::kCompute, 1), device->event_pool());
}

TEST(SimEventTest, DeviceSideWaitAcrossDevices) {
  auto runtime = MakeRuntime(2, /*jitter_us=*/30);
  Device* sim1 = *runtime->GetDevice("sim:1");
  CheckDeviceSideWait(*sim1->GetStream(StreamType::kCompute), *runtime->GetStream("sim:0/compute"),
                      sim1->event_pool());
}

// A wait captures the generation recorded at call time. Re-recording the same event on
// another stream must neither release the earlier wait early nor extend it.
TEST(SimEventTest, WaitCapturesRecordedPointAtCallTime) {
  auto runtime = MakeRuntime(1);
  Device* device = *runtime->GetDevice("sim:0");
  Stream* a = *device->GetStream(StreamType::kCompute, 0);
  Stream* b = *device->GetStream(StreamType::kCompute, 1);
  Stream* c = *device->GetStream(StreamType::kCompute, 2);
  PooledEvent event = *device->event_pool().Borrow();
  absl::Notification release_a, release_c, b_ran;
  ASSERT_TRUE(a->Launch([&] {
                 release_a.WaitForNotification();
                 return absl::OkStatus();
               }).ok());
  ASSERT_TRUE(a->RecordEvent(event.get()).ok());  // generation 1: held by A
  ASSERT_TRUE(b->WaitEvent(event.get()).ok());    // B waits for generation 1
  ASSERT_TRUE(b->Launch([&] {
                 b_ran.Notify();
                 return absl::OkStatus();
               }).ok());
  ASSERT_TRUE(c->RecordEvent(event.get()).ok());  // generation 2 on C: done at once
  ASSERT_TRUE(c->Sync().ok());
  EXPECT_FALSE(b_ran.HasBeenNotified());  // not released by generation 2
  // Now the reverse: generation 3 on C is held; releasing A must release B.
  ASSERT_TRUE(c->Launch([&] {
                 release_c.WaitForNotification();
                 return absl::OkStatus();
               }).ok());
  ASSERT_TRUE(c->RecordEvent(event.get()).ok());
  release_a.Notify();
  b_ran.WaitForNotification();  // B ran although generation 3 is still open
  EXPECT_FALSE(event->Query());
  release_c.Notify();
  ASSERT_TRUE(c->Sync().ok());
  EXPECT_TRUE(event->Query());
}

TEST(EventPoolTest, ReusesEventsAndCountsThem) {
  auto runtime = MakeRuntime(1);
  EventPool& pool = (*runtime->GetDevice("sim:0"))->event_pool();
  {
    PooledEvent a = *pool.Borrow();
    PooledEvent b = *pool.Borrow();
  }
  for (int i = 0; i < 10; ++i) PooledEvent e = *pool.Borrow();
  EXPECT_EQ(pool.created(), 2);
  EXPECT_EQ(pool.reused(), 10);
  EXPECT_EQ(pool.idle(), 2u);
}

TEST(EventPoolTest, ConcurrentBorrowReturn) {
  auto runtime = MakeRuntime(1);
  Device* device = *runtime->GetDevice("sim:0");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([device, t] {
      Stream* stream = *device->GetStream(StreamType::kCompute, t);
      for (int i = 0; i < 500; ++i) {
        PooledEvent event = *device->event_pool().Borrow();
        EXPECT_TRUE(stream->RecordEvent(event.get()).ok());
      }
      EXPECT_TRUE(stream->Sync().ok());
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(device->event_pool().created() + device->event_pool().reused(), 2000);
  EXPECT_LE(device->event_pool().created(), 4);
}

// A chain of increments hopping across 4 streams on 2 devices, ordered only by pooled events
// and device-side waits, under random delays: every hop must see the previous one.
int RunChain(Runtime* runtime, bool with_waits, int hops) {
  std::vector<Stream*> streams;
  for (const char* name : {"sim:0/compute", "sim:0/compute:1", "sim:1/compute", "sim:1/h2d"}) {
    streams.push_back(*runtime->GetStream(name));
  }
  std::mt19937 rng(7);
  std::atomic<int> counter{0};  // atomic so a missing wait is a wrong value, not a data race
  int mismatches = 0;
  absl::Mutex mu;
  Stream* previous = nullptr;
  for (int hop = 0; hop < hops; ++hop) {
    Stream* stream = streams[rng() % streams.size()];
    if (with_waits && previous != nullptr && previous != stream) {
      PooledEvent event = *previous->device()->event_pool().Borrow();
      EXPECT_TRUE(previous->RecordEvent(event.get()).ok());
      EXPECT_TRUE(stream->WaitEvent(event.get()).ok());
    }
    EXPECT_TRUE(stream
                    ->Launch([&counter, &mismatches, &mu, hop] {
                      if (counter.load() != hop) {
                        absl::MutexLock lock(&mu);
                        ++mismatches;
                      }
                      counter.store(hop + 1);
                      return absl::OkStatus();
                    })
                    .ok());
    previous = stream;
  }
  for (Stream* s : streams) EXPECT_TRUE(s->Sync().ok());
  absl::MutexLock lock(&mu);
  return mismatches;
}

TEST(SimStreamTest, RandomChainAcrossStreamsIsOrderedByWaits) {
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto runtime = MakeRuntime(2, /*jitter_us=*/40, seed);
    EXPECT_EQ(RunChain(runtime.get(), /*with_waits=*/true, 300), 0) << "seed " << seed;
  }
}

// Proves the previous test can fail: without the waits, jitter reorders the chain.
TEST(SimStreamTest, RandomChainWithoutWaitsIsMisordered) {
  int mismatches = 0;
  for (uint64_t seed = 1; seed <= 5 && mismatches == 0; ++seed) {
    auto runtime = MakeRuntime(2, /*jitter_us=*/40, seed);
    mismatches += RunChain(runtime.get(), /*with_waits=*/false, 300);
  }
  EXPECT_GT(mismatches, 0);
}

TEST(SimDeviceTest, CopiesAreCheckedAndOrdered) {
  auto runtime = MakeRuntime(2);
  Device* sim0 = *runtime->GetDevice("sim:0");
  Device* sim1 = *runtime->GetDevice("sim:1");
  Stream* s0 = *sim0->GetStream(StreamType::kHost2Device);
  std::vector<int> host(256), back(256, 0);
  for (int i = 0; i < 256; ++i) host[i] = i * 3;
  const size_t bytes = host.size() * sizeof(int);
  void* d0 = *sim0->allocator().Allocate(bytes, s0->id());
  void* d1 = *sim1->allocator().Allocate(bytes, s0->id());
  ASSERT_TRUE(s0->Memcpy(d0, host.data(), bytes, CopyKind::kHostToDevice).ok());
  ASSERT_TRUE(s0->Memcpy(d1, d0, bytes, CopyKind::kDeviceToDevice).ok());  // peer copy
  ASSERT_TRUE(s0->Memcpy(back.data(), d0, bytes, CopyKind::kDeviceToHost).ok());
  ASSERT_TRUE(s0->Sync().ok());
  EXPECT_EQ(back, host);

  // Pointers that do not match the kind are rejected before anything is enqueued.
  absl::Status bad = s0->Memcpy(back.data(), host.data(), bytes, CopyKind::kHostToDevice);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.message(), "host-to-device")) << bad;
  EXPECT_TRUE(Contains(bad.message(), "sim:0")) << bad;
  bad = s0->Memcpy(d1, host.data(), bytes, CopyKind::kHostToDevice);  // sim:1 memory
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.message(), "sim:1 device memory")) << bad;
  bad = s0->Memcpy(back.data(), host.data(), bytes, CopyKind::kDeviceToHost);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  sim0->allocator().Deallocate(d0);
  sim1->allocator().Deallocate(d1);
}

TEST(SimDeviceTest, AllocationFailureKeepsExistingMemory) {
  auto runtime = MakeRuntime(1, 0, 1, /*memory=*/1 << 20);
  Device* device = *runtime->GetDevice("sim:0");
  Stream* stream = *device->GetStream(StreamType::kCompute);
  auto* a = static_cast<char*>(*device->allocator().Allocate(512 << 10, stream->id()));
  std::memset(a, 7, 512 << 10);
  absl::StatusOr<void*> b = device->allocator().Allocate(768 << 10, stream->id());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(Contains(b.status().message(), "sim:0")) << b.status();
  EXPECT_EQ(a[0], 7);
  EXPECT_EQ(a[(512 << 10) - 1], 7);
  device->allocator().Deallocate(a);
}

TEST(SimDeviceTest, RecordStreamDelaysReuseUntilOtherStreamIsDone) {
  auto runtime = MakeRuntime(1);
  Device* device = *runtime->GetDevice("sim:0");
  Stream* a = *device->GetStream(StreamType::kCompute, 0);
  Stream* b = *device->GetStream(StreamType::kCompute, 1);
  void* block = *device->allocator().Allocate(4096, a->id());
  absl::Notification release;
  ASSERT_TRUE(b->Launch([&] {
                 release.WaitForNotification();
                 return absl::OkStatus();
               }).ok());
  device->allocator().RecordStream(block, b->id());
  device->allocator().Deallocate(block);
  void* next = *device->allocator().Allocate(4096, a->id());
  EXPECT_NE(next, block);  // B may still be using it
  release.Notify();
  ASSERT_TRUE(b->Sync().ok());
  void* again = *device->allocator().Allocate(4096, a->id());
  EXPECT_EQ(again, block);  // B's fence is done: back to its owner
  device->allocator().Deallocate(next);
  device->allocator().Deallocate(again);
}

TEST(SimDeviceTest, WaitOnForeignEventIsInvalid) {
  auto runtime = MakeRuntime(2);
  Stream* s0 = *runtime->GetStream("sim:0/compute");
  Device* sim1 = *runtime->GetDevice("sim:1");
  PooledEvent other = *sim1->event_pool().Borrow();
  absl::Status status = s0->RecordEvent(other.get());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "sim:1")) << status;

  class FakeCudaEvent final : public Event {
   public:
    FakeCudaEvent() : Event(sluice::Device(DeviceType::kCuda, 0)) {}
    bool Query() override { return true; }
    absl::Status Sync() override { return absl::OkStatus(); }
  } cuda_event;
  status = s0->WaitEvent(&cuda_event);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(status.message(), "cuda:0")) << status;
}

TEST(DeviceTest, DestroyStreamDrainsPendingWork) {
  auto runtime = MakeRuntime(1);
  Device* device = *runtime->GetDevice("sim:0");
  Stream* stream = *device->GetStream(StreamType::kCompute);
  absl::Notification release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(stream
                  ->Launch([&] {
                    release.WaitForNotification();
                    return absl::OkStatus();
                  })
                  .ok());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(stream
                    ->Launch([&] {
                      ran.fetch_add(1);
                      return absl::OkStatus();
                    })
                    .ok());
  }
  std::thread releaser([&] { release.Notify(); });
  EXPECT_TRUE(device->DestroyStream(stream).ok());
  releaser.join();
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(device->DestroyStream(stream).code(), absl::StatusCode::kInvalidArgument);
  // The same key gives a fresh stream afterwards.
  EXPECT_TRUE((*device->GetStream(StreamType::kCompute))->Sync().ok());
}

TEST(RuntimeTest, DestroyingRuntimeDrainsWork) {
  std::atomic<int> ran{0};
  {
    auto runtime = MakeRuntime(2, /*jitter_us=*/10);
    for (const char* name : {"sim:0/compute", "sim:1/d2h"}) {
      Stream* stream = *runtime->GetStream(name);
      for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(stream
                        ->Launch([&] {
                          ran.fetch_add(1);
                          return absl::OkStatus();
                        })
                        .ok());
      }
    }
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(RuntimeTest, BadDeviceStringsAreClearErrors) {
  auto runtime = MakeRuntime(2);
  absl::StatusOr<Device*> d = runtime->GetDevice("gpu:0");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(d.status().message(), "gpu:0")) << d.status();
  d = runtime->GetDevice("sim:x");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  d = runtime->GetDevice("sim:9");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(d.status().message(), "sim:0, sim:1")) << d.status();
  d = runtime->GetDevice("cuda:0");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<Stream*> s = runtime->GetStream("sim:0/warp");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(s.status().message(), "warp")) << s.status();
  RuntimeOptions options;
  options.num_sim_devices = 99;
  EXPECT_EQ(Runtime::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuDeviceTest, RunsInlineAndWaitsOnSimEventsByBlocking) {
  auto runtime = MakeRuntime(1);
  Stream* cpu = *runtime->GetStream("cpu");
  EXPECT_FALSE(cpu->IsAsync());
  int x = 0;
  ASSERT_TRUE(cpu->Launch([&] {
                   x = 1;
                   return absl::OkStatus();
                 })
                  .ok());
  EXPECT_EQ(x, 1);
  EXPECT_EQ(cpu->Launch([] { return absl::AbortedError("no"); }).code(),
            absl::StatusCode::kAborted);
  Device* sim = *runtime->GetDevice("sim:0");
  Stream* stream = *sim->GetStream(StreamType::kCompute);
  PooledEvent event = *sim->event_pool().Borrow();
  int value = 0;
  ASSERT_TRUE(stream
                  ->Launch([&] {
                    value = 5;
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE(stream->RecordEvent(event.get()).ok());
  ASSERT_TRUE(cpu->WaitEvent(event.get()).ok());  // blocks until the sim work is done
  EXPECT_EQ(value, 5);
  PooledEvent cpu_event = *(*runtime->GetDevice("cpu"))->event_pool().Borrow();
  ASSERT_TRUE(cpu->RecordEvent(cpu_event.get()).ok());
  EXPECT_TRUE(cpu_event->Query());
  EXPECT_TRUE(stream->WaitEvent(cpu_event.get()).ok());
}

TEST(SimStreamTest, InjectedDeviceFaultsRunTheHandlerInStreamOrder) {
  FaultInjector faults(0.3, 9, "device");
  RuntimeOptions options;
  options.num_sim_devices = 1;
  options.sim.device_faults = &faults;
  options.enable_cuda = false;
  auto runtime = Runtime::Create(options).value();
  Stream* stream = *runtime->GetStream("sim:0/compute");
  std::vector<int> ran, failed;  // the stream thread only; read after Sync
  std::vector<std::string> errors;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(stream
                    ->LaunchFallible(
                        [&ran, i] {
                          ran.push_back(i);
                          return absl::OkStatus();
                        },
                        [&failed, &errors, i](const absl::Status& error) {
                          failed.push_back(i);
                          errors.emplace_back(error.message());
                        })
                    .ok());
    // Plain launches never fail.
    ASSERT_TRUE(stream->Launch([] { return absl::OkStatus(); }).ok());
  }
  // The handler reports the error: it is not also the stream's.
  EXPECT_TRUE(stream->Sync().ok());
  EXPECT_EQ(static_cast<int64_t>(failed.size()), faults.fired());
  EXPECT_EQ(ran.size() + failed.size(), 200u);
  EXPECT_GT(failed.size(), 20u);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].find("sim:0/compute"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("injected device fault #1"), std::string::npos) << errors[0];
  // In stream order, each item once.
  std::vector<int> all = ran;
  all.insert(all.end(), failed.begin(), failed.end());
  std::sort(all.begin(), all.end());
  for (int i = 0; i < 200; ++i) EXPECT_EQ(all[i], i);
}

TEST(SimStreamTest, WithoutInjectorFallibleWorkAlwaysRuns) {
  auto runtime = MakeRuntime(1);
  Stream* stream = *runtime->GetStream("sim:0/compute");
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(stream
                    ->LaunchFallible(
                        [&ran] {
                          ran.fetch_add(1);
                          return absl::OkStatus();
                        },
                        [](const absl::Status&) { ADD_FAILURE() << "failed without injector"; })
                    .ok());
  }
  EXPECT_TRUE(stream->Sync().ok());
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace sluice::ep::sim_stream_test
