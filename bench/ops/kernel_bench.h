// The fixture the ops benchmarks share: a runtime with only the cpu device, its intra-op pool
// `threads` wide (0: the host's hardware threads; 1: every kernel on its VM worker alone), a
// VM, the standard ops, and f32 blobs filled through the fill_constant kernel.
//
// One benchmark thread at a time; not thread-safe.
#ifndef SLUICE_BENCH_OPS_KERNEL_BENCH_H_
#define SLUICE_BENCH_OPS_KERNEL_BENCH_H_

#include <memory>

#include "core/status.h"
#include "ep/runtime.h"
#include "ops/op_registry.h"
#include "ops/standard_ops.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::ops {

struct KernelBench {
  explicit KernelBench(int threads) {
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 0;
    runtime_options.enable_cuda = false;
    runtime_options.cpu.intra_op_threads = threads;
    runtime = ep::Runtime::Create(runtime_options).value();
    vm = vm::VirtualMachine::Create(runtime.get()).value();
    SLUICE_CHECK(RegisterStandardOps(&registry).ok());
    builder = std::make_unique<vm::InstructionsBuilder>(vm.get());
    cpu = vm->GetStream("cpu").value();
  }
  // A new f32 blob of `shape` on the cpu stream, every element `value`.
  vm::BlobRef Filled(const Shape& shape, double value) {
    auto blob = vm->NewBlob(cpu, DataType::kF32, shape).value();
    SLUICE_CHECK(
        builder->Call(*Kernel("fill_constant"), {}, {blob}, vm::AttrMap().Set("value", value), cpu)
            .ok());
    return blob;
  }
  // The f32 cpu kernel of `op`.
  const vm::OpKernel* Kernel(const char* op) {
    return registry.FindKernel(op, DeviceType::kCpu, DataType::kF32).value();
  }

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  OpRegistry registry;
  std::unique_ptr<vm::InstructionsBuilder> builder;
  vm::Stream* cpu = nullptr;
};

}  // namespace sluice::ops

#endif  // SLUICE_BENCH_OPS_KERNEL_BENCH_H_
