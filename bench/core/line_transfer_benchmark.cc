// What moving one cache line between two cores costs on this machine: the floor under
// every hand-off between the VM's threads (an eager op's records and blobs travel from the
// producer to the scheduler and the worker and back), quoted next to the eager figures in
// docs/benchmarks.md.
//
//   BM_Machine_LineRoundTrip   two threads take turns writing one atomic on its own line;
//                              items = round trips (each moves the line there and back).
#include <atomic>
#include <cstdint>
#include <thread>

#include "benchmark/benchmark.h"

namespace sluice::line_transfer_benchmark {
namespace {

void BM_Machine_LineRoundTrip(benchmark::State& state) {
  alignas(64) std::atomic<int64_t> turn{0};
  // The partner answers every odd value with the next even one (which it then waits past)
  // until the value turns negative.
  std::thread partner([&] {
    while (true) {
      const int64_t now = turn.load(std::memory_order_acquire);
      if (now < 0) return;
      if ((now & 1) != 0) turn.store(now + 1, std::memory_order_release);
    }
  });
  int64_t value = 0;
  for (auto _ : state) {
    turn.store(value + 1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != value + 2) {
    }
    value += 2;
  }
  turn.store(-1, std::memory_order_release);
  partner.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Machine_LineRoundTrip)->UseRealTime();

}  // namespace
}  // namespace sluice::line_transfer_benchmark
