// Host kernel throughput against a plain memcpy, in bytes moved per second.
//
//   BM_Kernel_AddLarge   f32 add of two n-element tensors into a third on the cpu stream,
//                        one OpCall + Sync per iteration (a few microseconds of VM overhead,
//                        negligible at these sizes); bytes = 3 * n * 4 (two reads, one write).
//   BM_Memcpy_Large      memcpy of n floats; bytes = 2 * n * 4 (one read, one write).
#include <cstring>
#include <memory>
#include <vector>

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
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = 0;
  runtime_options.enable_cuda = false;
  auto runtime = ep::Runtime::Create(runtime_options).value();
  auto vm = vm::VirtualMachine::Create(runtime.get()).value();
  OpRegistry registry;
  SLUICE_CHECK(RegisterStandardOps(&registry).ok());
  vm::InstructionsBuilder builder(vm.get());
  vm::Stream* cpu = vm->GetStream("cpu").value();
  auto x = vm->NewBlob(cpu, DataType::kF32, Shape({n})).value();
  auto y = vm->NewBlob(cpu, DataType::kF32, Shape({n})).value();
  auto out = vm->NewBlob(cpu, DataType::kF32, Shape({n})).value();
  const vm::OpKernel* fill =
      registry.FindKernel("fill_constant", DeviceType::kCpu, DataType::kF32).value();
  SLUICE_CHECK(builder.Call(*fill, {}, {x}, vm::AttrMap().Set("value", 1.0), cpu).ok());
  SLUICE_CHECK(builder.Call(*fill, {}, {y}, vm::AttrMap().Set("value", 2.0), cpu).ok());
  const vm::OpKernel* add = registry.FindKernel("add", DeviceType::kCpu, DataType::kF32).value();
  for (auto _ : state) {
    SLUICE_CHECK(builder.Call(*add, {x, y}, {out}, nullptr, cpu).ok());
    SLUICE_CHECK(vm->Sync().ok());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * 4);
}
BENCHMARK(BM_Kernel_AddLarge)->Arg(1 << 16)->Arg(1 << 20)->Arg(1 << 24)->UseRealTime();

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
