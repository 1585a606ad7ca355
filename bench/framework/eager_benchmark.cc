// Eager front-end overhead and a small training-shaped step.
//
//   BM_Eager_TinyAdd   a 1-element f32 `add` issued kOps times (each adds to the previous
//                      result), then one sync: nanoseconds per op, everything included
//                      (dispatch, inference, allocation, soft sync, VM, kernel, release).
//   BM_Eager_MlpStep   one step of a 16x16 chain: matmul + relu + scale, three layers, then
//                      a read of the result; items = ops.
// Arguments: device (0 cpu, 1 sim:0), scheduling (0 dedicated thread, 1 caller threads);
// TinyAdd also: 1 = abseil's Mutex deadlock detection off.
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "core/status.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"

namespace sluice::eager::eager_benchmark {
namespace {

constexpr int kOps = 100000;

Context NewContext(const benchmark::State& state) {
  ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  options.vm.scheduling = state.range(1) == 0 ? vm::VmOptions::Scheduling::kDedicatedThread
                                              : vm::VmOptions::Scheduling::kCallerThread;
  return Context::Create(options).value();
}

Device DeviceArg(const benchmark::State& state) {
  return state.range(0) == 0 ? Device(DeviceType::kCpu, 0) : Device(DeviceType::kSim, 0);
}

// Debian's abseil runs Mutex deadlock detection (a global lock graph update per Lock); the
// third argument turns it off for the run, as an embedder calling
// absl::SetMutexDeadlockDetectionMode(kIgnore) would.
struct DeadlockDetectionOff {
  explicit DeadlockDetectionOff(bool off) : off_(off) {
    if (off_) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  ~DeadlockDetectionOff() {
    if (off_) absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kAbort);
  }
  const bool off_;
};

void BM_Eager_TinyAdd(benchmark::State& state) {
  DeadlockDetectionOff detection(state.range(2) != 0);
  Context ctx = NewContext(state);
  const Device device = DeviceArg(state);
  Tensor one = ctx.FromVector(std::vector<float>{1.0f}, Shape({1}), device).value();
  double issue_seconds = 0;  // in the loop, before the sync
  double sync_seconds = 0;   // in the final sync: how far the VM is behind the caller
  for (auto _ : state) {
    Tensor acc = one;
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < kOps; ++i) acc = fn::Add(acc, one).value();
    const auto issued = std::chrono::steady_clock::now();
    SLUICE_CHECK(ctx.Sync().ok());
    issue_seconds += std::chrono::duration<double>(issued - begin).count();
    sync_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - issued).count();
    state.PauseTiming();
    SLUICE_CHECK(acc.ToVector<float>().value()[0] == kOps + 1.0f);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  state.SetLabel(absl::StrCat(device.ToString(), state.range(1) == 0 ? " dedicated" : " caller"));
  // How the VM saw the loop: the share of calls and releases that ran fused, of the
  // temporaries that stayed private to their run, and of the outputs that reused a parked
  // private blob (all depend on the scheduler's timing).
  const vm::VmStats stats = ctx.vm()->stats();
  const double ops = static_cast<double>(stats.op_calls + stats.releases);
  state.counters["fused"] = ops > 0 ? static_cast<double>(stats.fused_steps) / ops : 0;
  state.counters["private"] =
      stats.releases > 0 ? static_cast<double>(stats.private_blobs) / stats.releases : 0;
  state.counters["recycled"] =
      stats.op_calls > 0 ? static_cast<double>(stats.recycled_blobs) / stats.op_calls : 0;
  state.counters["sync_share"] = sync_seconds / (issue_seconds + sync_seconds);
  state.counters["evicted"] =
      stats.op_calls > 0 ? static_cast<double>(stats.evicted_blobs) / stats.op_calls : 0;
}
BENCHMARK(BM_Eager_TinyAdd)
    ->ArgNames({"sim", "caller", "no_deadlock_check"})
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Eager_MlpStep(benchmark::State& state) {
  Context ctx = NewContext(state);
  const Device device = DeviceArg(state);
  std::vector<Tensor> weights;
  for (int l = 0; l < 3; ++l) {
    weights.push_back(
        fn::UniformRandom(ctx, Shape({16, 16}), -0.25, 0.25, 7 + l, DataType::kF32, device)
            .value());
  }
  Tensor x = fn::UniformRandom(ctx, Shape({16, 16}), -1, 1, 3, DataType::kF32, device).value();
  for (auto _ : state) {
    Tensor h = x;
    for (const Tensor& w : weights) {
      h = fn::Matmul(h, w).value();
      h = fn::Relu(h).value();
      h = fn::Scale(h, 0.5).value();
    }
    benchmark::DoNotOptimize(h.ToVector<float>().value());
  }
  state.SetItemsProcessed(state.iterations() * 9);
  state.SetLabel(absl::StrCat(device.ToString(), state.range(1) == 0 ? " dedicated" : " caller"));
}
BENCHMARK(BM_Eager_MlpStep)
    ->ArgNames({"sim", "caller"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseRealTime();

}  // namespace
}  // namespace sluice::eager::eager_benchmark
