// Eager front-end overhead and a small training-shaped step.
//
//   BM_Eager_TinyAdd   a 1-element f32 `add` issued kOps times (each adds to the previous
//                      result), then one sync: nanoseconds per op, everything included
//                      (dispatch, inference, allocation, soft sync, VM, kernel, release).
//   BM_Eager_MlpStep   one step of a 16x16 chain: matmul + relu + scale, three layers, then
//                      a read of the result; items = ops.
// Argument: 0 cpu, 1 sim:0.
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/eager/functional.h"

namespace sluice::eager {
namespace {

constexpr int kOps = 100000;

Context NewContext() {
  ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  return Context::Create(options).value();
}

Device DeviceArg(const benchmark::State& state) {
  return state.range(0) == 0 ? Device(DeviceType::kCpu, 0) : Device(DeviceType::kSim, 0);
}

void BM_Eager_TinyAdd(benchmark::State& state) {
  Context ctx = NewContext();
  const Device device = DeviceArg(state);
  Tensor one = ctx.FromVector(std::vector<float>{1.0f}, Shape({1}), device).value();
  for (auto _ : state) {
    Tensor acc = one;
    for (int i = 0; i < kOps; ++i) acc = Add(acc, one).value();
    SLUICE_CHECK(ctx.Sync().ok());
    state.PauseTiming();
    SLUICE_CHECK(acc.ToVector<float>().value()[0] == kOps + 1.0f);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  state.SetLabel(device.ToString());
}
BENCHMARK(BM_Eager_TinyAdd)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Eager_MlpStep(benchmark::State& state) {
  Context ctx = NewContext();
  const Device device = DeviceArg(state);
  std::vector<Tensor> weights;
  for (int l = 0; l < 3; ++l) {
    weights.push_back(
        UniformRandom(ctx, Shape({16, 16}), -0.25, 0.25, 7 + l, DataType::kF32, device).value());
  }
  Tensor x = UniformRandom(ctx, Shape({16, 16}), -1, 1, 3, DataType::kF32, device).value();
  for (auto _ : state) {
    Tensor h = x;
    for (const Tensor& w : weights) {
      h = Matmul(h, w).value();
      h = Relu(h).value();
      h = Scale(h, 0.5).value();
    }
    benchmark::DoNotOptimize(h.ToVector<float>().value());
  }
  state.SetItemsProcessed(state.iterations() * 9);
  state.SetLabel(device.ToString());
}
BENCHMARK(BM_Eager_MlpStep)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
}  // namespace sluice::eager
