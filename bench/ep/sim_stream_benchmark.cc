// Latency and throughput of sim streams: the emulated accelerator every multi-stream test
// runs on.
#include <benchmark/benchmark.h>

#include "bench/ep/bench_runtime.h"
#include "core/status.h"
#include "ep/runtime.h"

namespace sluice::ep::sim_stream_benchmark {
namespace {

// One empty work item, from enqueue until the caller knows it is done (Sync).
void BM_SimStream_EnqueueToDone(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Stream* stream = *runtime->GetStream("sim:0/compute");
  for (auto _ : state) {
    SLUICE_CHECK(stream->Launch([]() { return absl::OkStatus(); }).ok());
    SLUICE_CHECK(stream->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SimStream_EnqueueToDone)->UseRealTime();

// Empty work items enqueued back to back, one Sync per batch of 1024: per-item throughput.
void BM_SimStream_EnqueueThroughput(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Stream* stream = *runtime->GetStream("sim:0/compute");
  for (auto _ : state) {
    for (int i = 0; i < 1024; ++i) {
      SLUICE_CHECK(stream->Launch([]() { return absl::OkStatus(); }).ok());
    }
    SLUICE_CHECK(stream->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * 1024);
}
BENCHMARK(BM_SimStream_EnqueueThroughput)->UseRealTime();

// Stream B waits on the device side for an event stream A recorded, then the host waits for
// B: the cost of one cross-stream hand-off.
void BM_SimStream_CrossStreamWait(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Device* device = *runtime->GetDevice("sim:0");
  Stream* a = *device->GetStream(StreamType::kCompute, 0);
  Stream* b = *device->GetStream(StreamType::kCompute, 1);
  for (auto _ : state) {
    absl::StatusOr<PooledEvent> event = device->event_pool().Borrow();
    SLUICE_CHECK(a->Launch([]() { return absl::OkStatus(); }).ok());
    SLUICE_CHECK(a->RecordEvent(event->get()).ok());
    SLUICE_CHECK(b->WaitEvent(event->get()).ok());
    SLUICE_CHECK(b->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SimStream_CrossStreamWait)->UseRealTime();

}  // namespace
}  // namespace sluice::ep::sim_stream_benchmark
