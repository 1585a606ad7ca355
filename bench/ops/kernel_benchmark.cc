// Host kernel throughput against a plain memcpy, in bytes moved per second.
//
//   BM_Kernel_AddLarge   f32 add of two n-element tensors into a third on the cpu stream,
//                        one OpCall + Sync per iteration (a few microseconds of VM overhead,
//                        negligible at these sizes); bytes = 3 * n * 4 (two reads, one write).
//   BM_Memcpy_Large      memcpy of n floats; bytes = 2 * n * 4 (one read, one write).
//   BM_Kernel_Matmul     f32 [n x n] x [n x n] matmul on the cpu stream, one OpCall + Sync
//                        per iteration; items = n^3 multiply-adds.
// The second argument of the kernel benchmarks is the cpu device's intra-op pool width
// (ep::CpuOptions::intra_op_threads): 0, the default, is the host's hardware threads; 1 runs
// every kernel on its VM worker alone (the labelled one-thread variant).
#include <cstring>
#include <memory>
#include <vector>

#include "bench/ops/kernel_bench.h"
#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/op_dispatcher.h"
#include "ops/standard_ops.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::kernel_benchmark {
namespace {

void BM_Kernel_AddLarge(benchmark::State& state) {
  const int64_t n = state.range(0);
  KernelBench b(static_cast<int>(state.range(1)));
  auto x = b.Filled(Shape({n}), 1.0);
  auto y = b.Filled(Shape({n}), 2.0);
  auto out = b.vm->NewBlob(b.cpu, DataType::kF32, Shape({n})).value();
  const vm::OpKernel* add = b.Kernel("add");
  for (auto _ : state) {
    SLUICE_CHECK(b.builder->Call(*add, {x, y}, {out}, nullptr, b.cpu).ok());
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * 4);
}
BENCHMARK(BM_Kernel_AddLarge)->ArgsProduct({{1 << 16, 1 << 20, 1 << 24}, {0, 1}})->UseRealTime();

void BM_Kernel_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  KernelBench b(static_cast<int>(state.range(1)));
  auto x = b.Filled(Shape({n, n}), 0.5);
  auto y = b.Filled(Shape({n, n}), 0.25);
  auto out = b.vm->NewBlob(b.cpu, DataType::kF32, Shape({n, n})).value();
  const vm::OpKernel* matmul = b.Kernel("matmul");
  const vm::AttrMap attrs =
      vm::AttrMap().Set("transpose_x", int64_t{0}).Set("transpose_y", int64_t{0});
  for (auto _ : state) {
    SLUICE_CHECK(b.builder->Call(*matmul, {x, y}, {out}, attrs, b.cpu).ok());
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * n * n * n);
  const vm::VmStats stats = b.vm->stats();
  state.counters["regions"] = static_cast<double>(stats.parallel_regions);
  state.counters["helped"] = stats.parallel_chunks == 0
                                 ? 0.0
                                 : static_cast<double>(stats.parallel_helped_chunks) /
                                       static_cast<double>(stats.parallel_chunks);
}
BENCHMARK(BM_Kernel_Matmul)->ArgsProduct({{128, 256, 512}, {0, 1}})->UseRealTime();

void BM_Memcpy_Large(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> src(n, 1.0f), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * n * 4);
}
BENCHMARK(BM_Memcpy_Large)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

}  // namespace
}  // namespace sluice::ops::kernel_benchmark
