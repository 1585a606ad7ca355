// Instruction throughput through the VM. Each iteration submits a fixed number of
// instructions and waits for them (VirtualMachine::Sync), so the figure includes draining:
// items per second is what a producer can sustain, not how fast it can enqueue.
//
//   BM_Vm_OpCallNoop_Eager        InstructionsBuilder::Call of the no-op kernel on the cpu
//                                 stream: dynamic dependences (each call reads x, writes y)
//   BM_Vm_OpCallNoop_Precomputed  the same ops as one PrecomputedBatch with a chain of edges
//   BM_Vm_CrossStreamPingPong     a 1-float fill alternating between two sim:0 streams: every
//                                 op needs a StreamWait (device-side), items = ops
//   BM_Vm_CrossDevicePingPong     the same between sim:0 and sim:1: every op needs a
//                                 RecordEvent and a host-observed completion
// Argument 0: dedicated scheduler thread; 1: scheduling on the calling threads.
#include <chrono>
#include <cstdlib>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "vm/instructions_builder.h"
#include "vm/precomputed_batch.h"
#include "vm/virtual_machine.h"

namespace sluice::vm::vm_benchmark {
namespace {

constexpr int kOpsPerIteration = 4096;

struct Bench {
  explicit Bench(const benchmark::State& state) {
    ep::RuntimeOptions runtime_options;
    runtime_options.num_sim_devices = 2;
    runtime_options.enable_cuda = false;
    runtime = ep::Runtime::Create(runtime_options).value();
    VmOptions options;
    options.scheduling = state.range(0) == 0 ? VmOptions::Scheduling::kDedicatedThread
                                             : VmOptions::Scheduling::kCallerThread;
    if (const char* spin = std::getenv("SLUICE_BENCH_SPIN_NS")) {
      options.spin = std::chrono::nanoseconds(std::atoll(spin));
    }
    if (const char* idle = std::getenv("SLUICE_BENCH_IDLE_SPIN_NS")) {
      options.idle_spin = std::chrono::nanoseconds(std::atoll(idle));
    }
    vm = VirtualMachine::Create(runtime.get(), options).value();
    SLUICE_CHECK(ops::RegisterStressKernels(&kernels).ok());
    builder = std::make_unique<InstructionsBuilder>(vm.get());
  }
  ~Bench() {
    builder.reset();
    vm.reset();
  }
  Stream* S(absl::string_view key) { return vm->GetStream(key).value(); }
  const OpKernel& K(absl::string_view name) { return *kernels.Find(name).value(); }
  BlobRef Blob(absl::string_view stream, int64_t n) {
    return vm->NewBlob(S(stream), DataType::kF32, Shape({n})).value();
  }

  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<VirtualMachine> vm;
  ops::KernelRegistry kernels;
  std::unique_ptr<InstructionsBuilder> builder;
};

void SchedulingLabel(benchmark::State& state) {
  state.SetLabel(state.range(0) == 0 ? "dedicated" : "caller");
}

void BM_Vm_OpCallNoop_Eager(benchmark::State& state) {
  Bench b(state);
  Stream* cpu = b.S("cpu");
  BlobRef x = b.Blob("cpu", 1), y = b.Blob("cpu", 1);
  const OpKernel& noop = b.K("noop");
  for (auto _ : state) {
    for (int i = 0; i < kOpsPerIteration; ++i) {
      SLUICE_CHECK(b.builder->Call(noop, {x}, {y}, nullptr, cpu).ok());
    }
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
  SchedulingLabel(state);
}
BENCHMARK(BM_Vm_OpCallNoop_Eager)->Arg(0)->Arg(1)->UseRealTime();

void BM_Vm_OpCallNoop_Precomputed(benchmark::State& state) {
  Bench b(state);
  Stream* cpu = b.S("cpu");
  BlobRef x = b.Blob("cpu", 1), y = b.Blob("cpu", 1);
  PrecomputedBatch batch;
  for (int i = 0; i < kOpsPerIteration; ++i) {
    batch.AddOpCall(b.K("noop"), {x}, {y}, nullptr, cpu);
    if (i > 0) SLUICE_CHECK(batch.AddEdge(i - 1, i).ok());
  }
  for (auto _ : state) {
    SLUICE_CHECK(batch.Submit(b.vm.get()).ok());
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * kOpsPerIteration);
  SchedulingLabel(state);
}
BENCHMARK(BM_Vm_OpCallNoop_Precomputed)->Arg(0)->Arg(1)->UseRealTime();

void PingPong(benchmark::State& state, absl::string_view first, absl::string_view second) {
  Bench b(state);
  Stream* s[2] = {b.S(first), b.S(second)};
  BlobRef x = b.Blob(first, 1);
  const OpKernel& fill = b.K("fill");
  auto attrs = std::make_shared<const AttrMap>(AttrMap().Set("value", 1.0));
  constexpr int kOps = 256;
  for (auto _ : state) {
    for (int i = 0; i < kOps; ++i) {
      SLUICE_CHECK(b.builder->Call(fill, {}, {x}, attrs, s[i & 1]).ok());
    }
    SLUICE_CHECK(b.vm->Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  const VmStats stats = b.vm->stats();
  state.counters["syncs_per_op"] = static_cast<double>(stats.stream_waits + stats.record_events) /
                                   static_cast<double>(stats.op_calls);
  SchedulingLabel(state);
}

void BM_Vm_CrossStreamPingPong(benchmark::State& state) {
  PingPong(state, "sim:0/compute", "sim:0/h2d");
}
BENCHMARK(BM_Vm_CrossStreamPingPong)->Arg(0)->Arg(1)->UseRealTime();

void BM_Vm_CrossDevicePingPong(benchmark::State& state) {
  PingPong(state, "sim:0/compute", "sim:1/compute");
}
BENCHMARK(BM_Vm_CrossDevicePingPong)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
}  // namespace sluice::vm::vm_benchmark
