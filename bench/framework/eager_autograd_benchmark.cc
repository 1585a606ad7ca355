// Eager autograd: a training step, and what recording costs per op.
//
//   BM_Eager_MlpTrainStep/<sim>/<caller>
//                                one training step per iteration (caller 0: default options;
//                                1: caller-thread scheduling, labelled as such): the
//                                model 3 x (matmul by a 16x16 weight, relu, scale 0.5) on a
//                                16x16 input; the loss mean((out - target)^2); Backward; an
//                                SGD update in place (lr 0.01) with the gradients zeroed;
//                                a read of the loss value. sim 0: cpu, 1: sim:0.
//                                Peer: BM_Torch_MlpTrainStep (libtorch, same run, when
//                                CMake found it: torch_peer_benchmark.cc).
//   BM_Eager_TinyAddGrad/<grad>  kOps dependent 1-element adds, then one sync, with the
//                                first operand requiring a gradient (grad 1: every add is
//                                recorded) or not (grad 0: BM_Eager_TinyAdd's loop); ns per
//                                op. Each run ends by dropping the graph unused.
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/functional.h"
#include "framework/eager/context.h"
#include "framework/training/eager_optimizers.h"

namespace sluice::eager::eager_autograd_benchmark {
namespace {

// `caller`: the VM's caller-thread scheduling instead of its default dedicated thread.
Context NewContext(bool caller = false) {
  ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  if (caller) options.vm.scheduling = vm::VmOptions::Scheduling::kCallerThread;
  return Context::Create(options).value();
}

void BM_Eager_MlpTrainStep(benchmark::State& state) {
  Context ctx = NewContext(state.range(1) == 1);
  const Device device = state.range(0) == 0 ? Device::Cpu() : Device(DeviceType::kSim, 0);
  std::vector<Tensor> weights;
  for (int l = 0; l < 3; ++l) {
    weights.push_back(
        fn::UniformRandom(ctx, Shape({16, 16}), -0.25, 0.25, 7 + l, DataType::kF32, device)
            .value());
    SLUICE_CHECK(autograd::SetRequiresGrad(weights.back()).ok());
  }
  const Tensor x =
      fn::UniformRandom(ctx, Shape({16, 16}), -1, 1, 3, DataType::kF32, device).value();
  const Tensor target =
      fn::UniformRandom(ctx, Shape({16, 16}), -1, 1, 4, DataType::kF32, device).value();
  Sgd sgd = Sgd::Create(weights, 0.01).value();
  float loss_value = 0;
  for (auto _ : state) {
    Tensor h = x;
    for (const Tensor& w : weights) {
      h = fn::Matmul(h, w).value();
      h = fn::Relu(h).value();
      h = fn::Scale(h, 0.5).value();
    }
    const Tensor loss = fn::ReduceMean(fn::Square(fn::Sub(h, target).value()).value()).value();
    SLUICE_CHECK(autograd::Backward(loss).ok());
    SLUICE_CHECK(sgd.Step().ok());
    sgd.ZeroGrad();
    loss_value = loss.ToVector<float>().value()[0];
  }
  state.counters["loss"] = loss_value;
  state.SetLabel(device.ToString());
}
BENCHMARK(BM_Eager_MlpTrainStep)
    ->ArgNames({"sim", "caller"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseRealTime();

constexpr int kOps = 100000;

void BM_Eager_TinyAddGrad(benchmark::State& state) {
  Context ctx = NewContext();
  const Tensor one = ctx.FromVector(std::vector<float>{1.0f}, Shape({1})).value();
  for (auto _ : state) {
    Tensor x = ctx.FromVector(std::vector<float>{0.0f}, Shape({1})).value();
    if (state.range(0) == 1) SLUICE_CHECK(autograd::SetRequiresGrad(x).ok());
    Tensor acc = x;
    for (int i = 0; i < kOps; ++i) acc = fn::Add(acc, one).value();
    SLUICE_CHECK(ctx.Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * kOps);
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(kOps) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Eager_TinyAddGrad)
    ->ArgName("grad")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice::eager::eager_autograd_benchmark
