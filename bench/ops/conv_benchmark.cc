// The conv family's host kernels on the shapes of bench/peers/onnxruntime_mlp.py's CNN (batch
// 16, 1x28x28: Conv 3x3 pad 1 to 8 channels, MaxPool 2x2, Conv 3x3 pad 1 to 16 channels,
// MaxPool 2x2), one OpCall + Sync per iteration on the cpu stream.
//
//   BM_Kernel_Conv2d     layer 0 ([16, 1, 28, 28] * [8, 1, 3, 3]) or 1 ([16, 8, 14, 14] *
//                        [16, 8, 3, 3]); items = multiply-adds.
//   BM_Kernel_MaxPool2d  2x2, stride 2, on [16, 8, 28, 28] (layer 0) or [16, 16, 14, 14];
//                        items = output elements.
// The second argument is the cpu device's intra-op pool width (0: the host's hardware
// threads; 1: every kernel on its VM worker alone).
#include <cstdint>
#include <memory>
#include <vector>

#include "bench/ops/kernel_bench.h"
#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/standard_ops.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops::conv_benchmark {
namespace {

using Ints = std::vector<int64_t>;

void BM_Kernel_Conv2d(benchmark::State& state) {
  const bool second = state.range(0) == 1;
  KernelBench b(static_cast<int>(state.range(1)));
  const int64_t c = second ? 8 : 1, m = second ? 16 : 8, size = second ? 14 : 28;
  auto x = b.Filled(Shape({16, c, size, size}), 0.5);
  auto w = b.Filled(Shape({m, c, 3, 3}), 0.25);
  auto out = b.vm->NewBlob(b.cpu, DataType::kF32, Shape({16, m, size, size})).value();
  const vm::AttrMap attrs = vm::AttrMap()
                                .Set("strides", Ints{1, 1})
                                .Set("pads", Ints{1, 1, 1, 1})
                                .Set("dilations", Ints{1, 1})
                                .Set("groups", int64_t{1});
  const vm::OpKernel* conv = b.Kernel("conv2d");
  for (auto _ : state) {
    SLUICE_CHECK(b.builder->Call(*conv, {x, w}, {out}, attrs, b.cpu).ok());
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * 16 * m * size * size * c * 9);
}
BENCHMARK(BM_Kernel_Conv2d)->ArgsProduct({{0, 1}, {0, 1}})->UseRealTime();

void BM_Kernel_MaxPool2d(benchmark::State& state) {
  const bool second = state.range(0) == 1;
  KernelBench b(static_cast<int>(state.range(1)));
  const int64_t c = second ? 16 : 8, size = second ? 14 : 28;
  auto x = b.Filled(Shape({16, c, size, size}), 0.5);
  auto out = b.vm->NewBlob(b.cpu, DataType::kF32, Shape({16, c, size / 2, size / 2})).value();
  const vm::AttrMap attrs = vm::AttrMap()
                                .Set("kernel", Ints{2, 2})
                                .Set("strides", Ints{2, 2})
                                .Set("pads", Ints{0, 0, 0, 0})
                                .Set("dilations", Ints{1, 1})
                                .Set("ceil_mode", int64_t{0});
  const vm::OpKernel* pool = b.Kernel("max_pool2d");
  for (auto _ : state) {
    SLUICE_CHECK(b.builder->Call(*pool, {x}, {out}, attrs, b.cpu).ok());
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * 16 * c * (size / 2) * (size / 2));
}
BENCHMARK(BM_Kernel_MaxPool2d)->ArgsProduct({{0, 1}, {0, 1}})->UseRealTime();

}  // namespace
}  // namespace sluice::ops::conv_benchmark
