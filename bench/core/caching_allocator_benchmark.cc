// Benchmarks for core/caching_allocator.h: the cost of a cached allocate/free pair on one
// stream, against plain malloc/free of the same sizes in the same pattern.
//
// Each iteration allocates a fixed pattern of sizes, touches the first byte of each block (a
// kernel would write it; for fresh pages this is where the page fault is paid), then frees them
// all. Argument 0 is the size set: 0 = small tensors (256 B .. 16 KiB), 1 = large tensors
// (256 KiB .. 4 MiB).
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "core/caching_allocator.h"

namespace sluice::caching_allocator_benchmark {
namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * kKiB;

// The allocation pattern of one iteration, mixing sizes as a tensor program does.
std::vector<size_t> SizePattern(int64_t set) {
  if (set == 0) {
    return {256,      1 * kKiB,  4 * kKiB, 16 * kKiB, 512,      2 * kKiB,  8 * kKiB, 256,
            1 * kKiB, 16 * kKiB, 4 * kKiB, 768,       3 * kKiB, 12 * kKiB, 2 * kKiB, 6 * kKiB};
  }
  return {256 * kKiB, 1 * kMiB,   4 * kMiB, 512 * kKiB, 2 * kMiB, 256 * kKiB,
          768 * kKiB, 1 * kMiB,   3 * kMiB, 512 * kKiB, 2 * kMiB, 1536 * kKiB,
          4 * kMiB,   256 * kKiB, 1 * kMiB, 640 * kKiB};
}

std::string SetLabel(int64_t set) { return set == 0 ? "256B..16KiB" : "256KiB..4MiB"; }

// Host memory from aligned_alloc, standing in for a device's. Thread-safe (stateless).
class AlignedRawAllocator final : public RawAllocator {
 public:
  static constexpr size_t kAlignment = 256;

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; the caching allocator rounds to 512.
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* ptr = std::aligned_alloc(kAlignment, rounded);
    if (ptr == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("aligned_alloc of ", bytes, " failed"));
    }
    return ptr;
  }
  void Free(void* ptr, size_t bytes) override { std::free(ptr); }
  std::string Name() const override { return "host memory (aligned_alloc)"; }
};

void Touch(void* ptr) {
  *static_cast<volatile char*>(ptr) = 1;
  benchmark::DoNotOptimize(ptr);
}

void BM_CachingAllocator_ReuseSameStream(benchmark::State& state) {
  // Debian's abseil is built with deadlock detection on (kAbort): every Mutex::Lock updates
  // a global lock graph. The `no_deadlock_check` variant measures the allocator itself, as
  // an embedder that calls absl::SetMutexDeadlockDetectionMode(kIgnore) would run it.
  const bool no_deadlock_check = state.range(1) != 0;
  if (no_deadlock_check) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<size_t> sizes = SizePattern(state.range(0));
  AlignedRawAllocator raw;
  StreamOrderedCachingAllocator allocator(&raw, /*fences=*/nullptr);
  const StreamId stream(0);
  std::vector<void*> ptrs(sizes.size());
  for (auto _ : state) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      absl::StatusOr<void*> ptr = allocator.Allocate(sizes[i], stream);
      if (!ptr.ok()) {
        state.SkipWithError(std::string(ptr.status().message()).c_str());
        return;
      }
      ptrs[i] = *ptr;
      Touch(ptrs[i]);
    }
    for (void* ptr : ptrs) allocator.Deallocate(ptr);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(sizes.size()));
  state.SetLabel(SetLabel(state.range(0)));
  const AllocatorStats stats = allocator.stats();
  state.counters["raw_allocs"] = static_cast<double>(stats.num_raw_allocations);
  if (no_deadlock_check) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort);
}
BENCHMARK(BM_CachingAllocator_ReuseSameStream)
    ->ArgNames({"large", "no_deadlock_check"})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({1, 1});

void BM_Malloc_SameSizes(benchmark::State& state) {
  const std::vector<size_t> sizes = SizePattern(state.range(0));
  std::vector<void*> ptrs(sizes.size());
  for (auto _ : state) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      ptrs[i] = std::malloc(sizes[i]);
      if (ptrs[i] == nullptr) {
        state.SkipWithError("malloc failed");
        return;
      }
      Touch(ptrs[i]);
    }
    for (void* ptr : ptrs) std::free(ptr);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(sizes.size()));
  state.SetLabel(SetLabel(state.range(0)));
}
BENCHMARK(BM_Malloc_SameSizes)->ArgName("large")->Arg(0)->Arg(1);

}  // namespace
}  // namespace sluice::caching_allocator_benchmark
