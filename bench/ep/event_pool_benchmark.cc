// EventPool against creating and destroying an event each time (sim provider). On a real
// GPU the gap is larger still: cudaEventCreate/Destroy can serialize asynchronous launches.
#include <benchmark/benchmark.h>

#include "bench/ep/bench_runtime.h"
#include "core/status.h"
#include "ep/runtime.h"

namespace sluice::ep::event_pool_benchmark {
namespace {

void BM_EventPool_BorrowReturn(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Device* device = *runtime->GetDevice("sim:0");
  for (auto _ : state) {
    absl::StatusOr<PooledEvent> event = device->event_pool().Borrow();
    benchmark::DoNotOptimize(event->get());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["created"] = static_cast<double>(device->event_pool().created());
}
BENCHMARK(BM_EventPool_BorrowReturn);

void BM_Event_CreateDestroy(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Device* device = *runtime->GetDevice("sim:0");
  for (auto _ : state) {
    absl::StatusOr<std::unique_ptr<Event>> event = device->CreateEvent();
    benchmark::DoNotOptimize(event->get());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Event_CreateDestroy);

// Borrow, record on a stream and return: the cost the VM pays per cross-stream sync.
void BM_EventPool_BorrowRecordReturn(benchmark::State& state) {
  auto runtime = MakeBenchRuntime();
  Device* device = *runtime->GetDevice("sim:0");
  Stream* stream = *device->GetStream(StreamType::kCompute);
  for (auto _ : state) {
    absl::StatusOr<PooledEvent> event = device->event_pool().Borrow();
    SLUICE_CHECK(stream->RecordEvent(event->get()).ok());
  }
  SLUICE_CHECK(stream->Sync().ok());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventPool_BorrowRecordReturn);

}  // namespace
}  // namespace sluice::ep::event_pool_benchmark
