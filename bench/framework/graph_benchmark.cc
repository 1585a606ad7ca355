// Graphs called from eager code (framework/graph), with default options throughout.
//
//   BM_Graph_CallTrivial/<sim>   kCalls calls of a graph computing x + 1 on a [4] f32
//                                tensor, each output dropped, then one sync; ns per call
//                                (what a call costs when calls stream: issue and run
//                                overlap). sim 0: cpu, 1: sim:0. Peer: TensorFlow's
//                                tf.function, 233 µs per call on this machine kind.
//   BM_Graph_CallTrivialRead/<sim>  one call and a read of its output per iteration: the
//                                latency of a call whose result the caller waits for.
//   BM_Graph_TrainStep/<sim>     the demo model's training step (Linear(16->1) + MSE +
//                                Adam, 16x16 batch) as a graph called from eager, with a read
//                                of the loss: one step per iteration. Beside it, from the
//                                same binary and model:
//   BM_Graph_EagerTrainStep/<sim>    the same step in eager autograd (nn::Linear, Backward,
//                                eager::Adam, loss read);
//   BM_Graph_ExecutorStep/<sim>  the same step through Executor::Run with host feeds and
//                                fetch (a PreparedRun: BM_Executor_DemoStep/0's loop, one
//                                compute stream on either device).
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "framework/autograd/autograd.h"
#include "framework/builder/losses.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/graph/graph.h"
#include "framework/models/linear_regression.h"
#include "framework/models/linear_regression_graph.h"
#include "framework/training/eager_layers.h"
#include "framework/training/eager_optimizers.h"

namespace sluice::framework::graph::graph_benchmark {
namespace {

constexpr int kCalls = 1000;

eager::Context NewContext() {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.enable_cuda = false;
  return eager::Context::Create(options).value();
}

Device DeviceArg(const benchmark::State& state) {
  return state.range(0) == 0 ? Device::Cpu() : Device(DeviceType::kSim, 0);
}

Graph PlusOne(const eager::Context& ctx) {
  return Graph::Create(
             ctx,
             [](Trace&, const std::vector<Value>& in) -> absl::StatusOr<std::vector<Value>> {
               SLUICE_ASSIGN_OR_RETURN(Value y, fn::Scale(in[0], 1.0, 1.0));
               return std::vector<Value>{y};
             },
             {.name = "plus_one"})
      .value();
}

void BM_Graph_CallTrivial(benchmark::State& state) {
  eager::Context ctx = NewContext();
  const Device device = DeviceArg(state);
  Graph g = PlusOne(ctx);
  const eager::Tensor x = ctx.FromVector<float>({1, 2, 3, 4}, Shape({4}), device).value();
  SLUICE_CHECK(g({x}).ok());  // traced outside the timing
  SLUICE_CHECK(ctx.Sync().ok());
  for (auto _ : state) {
    for (int i = 0; i < kCalls; ++i) {
      absl::StatusOr<std::vector<eager::Tensor>> out = g({x});
      SLUICE_CHECK(out.ok());
    }
    SLUICE_CHECK(ctx.Sync().ok());
  }
  state.SetItemsProcessed(state.iterations() * kCalls);
  state.counters["ns_per_call"] = benchmark::Counter(
      static_cast<double>(kCalls) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(device.ToString());
}
BENCHMARK(BM_Graph_CallTrivial)->ArgName("sim")->Arg(0)->Arg(1)->UseRealTime();

void BM_Graph_CallTrivialRead(benchmark::State& state) {
  eager::Context ctx = NewContext();
  const Device device = DeviceArg(state);
  Graph g = PlusOne(ctx);
  const eager::Tensor x = ctx.FromVector<float>({1, 2, 3, 4}, Shape({4}), device).value();
  SLUICE_CHECK(g({x}).ok());
  float sum = 0;
  for (auto _ : state) {
    std::vector<eager::Tensor> out = g({x}).value();
    sum += out[0].ToVector<float>().value()[0];
  }
  benchmark::DoNotOptimize(sum);
  state.SetLabel(device.ToString());
}
BENCHMARK(BM_Graph_CallTrivialRead)
    ->ArgName("sim")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The demo model's initial parameters (the static startup program's) and batch, on `device`.
struct Demo {
  explicit Demo(const benchmark::State& state)
      : ctx(NewContext()),
        device(DeviceArg(state)),
        model(BuildLinearRegression(&ctx.registry()).value()) {
    ExecutorOptions options;
    options.interpreter.device = device;
    executor = std::make_unique<Executor>(&ctx.registry(), ctx.vm(), options);
    initial = executor->Run(model.startup->desc(), {}, {model.weight, model.bias}, &scope)
                  .value()
                  .fetches;
  }
  eager::Tensor Upload(const HostTensor& h) {
    return ctx.FromBytes(h.dtype, h.shape, h.bytes, device).value();
  }
  eager::Context ctx;
  Device device;
  LinearRegression model;
  std::unique_ptr<Executor> executor;
  Scope scope;
  std::vector<HostTensor> initial;  // weight, bias
};

void BM_Graph_TrainStep(benchmark::State& state) {
  Demo demo(state);
  eager::Tensor w = demo.Upload(demo.initial[0]);
  eager::Tensor b = demo.Upload(demo.initial[1]);
  Graph step = Graph::Create(demo.ctx, LinearRegressionStep(w, b), {.name = "step"}).value();
  const eager::Tensor x = demo.Upload(LinearRegressionInput());
  const eager::Tensor y = demo.Upload(LinearRegressionTarget());
  SLUICE_CHECK(step({x, y}).ok());
  float loss = 0;
  for (auto _ : state) {
    std::vector<eager::Tensor> out = step({x, y}).value();
    loss = out[0].ToVector<float>().value()[0];
  }
  state.counters["loss"] = loss;
  state.SetLabel(demo.device.ToString());
}
BENCHMARK(BM_Graph_TrainStep)
    ->ArgName("sim")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Graph_EagerTrainStep(benchmark::State& state) {
  Demo demo(state);
  eager::nn::Linear linear =
      eager::nn::Linear::FromParameters(demo.Upload(demo.initial[0]), demo.Upload(demo.initial[1]))
          .value();
  eager::AdamOptions adam_options;
  adam_options.learning_rate = 0.01;
  eager::Adam adam = eager::Adam::Create(linear.parameters(), adam_options).value();
  const eager::Tensor x = demo.Upload(LinearRegressionInput());
  const eager::Tensor y = demo.Upload(LinearRegressionTarget());
  float loss_value = 0;
  for (auto _ : state) {
    const eager::Tensor prediction = linear(x).value();
    const Value loss = nn::MseLoss(Value(prediction), Value(y)).value();
    SLUICE_CHECK(autograd::Backward(loss.tensor()).ok());
    SLUICE_CHECK(adam.Step().ok());
    adam.ZeroGrad();
    loss_value = loss.tensor().ToVector<float>().value()[0];
  }
  state.counters["loss"] = loss_value;
  state.SetLabel(demo.device.ToString());
}
BENCHMARK(BM_Graph_EagerTrainStep)
    ->ArgName("sim")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_Graph_ExecutorStep(benchmark::State& state) {
  Demo demo(state);
  const Feeds feeds = {{demo.model.x, LinearRegressionInput()},
                       {demo.model.y, LinearRegressionTarget()}};
  const PreparedRun run = demo.executor
                              ->Prepare(demo.model.main->desc(), {demo.model.x, demo.model.y},
                                        {demo.model.loss}, &demo.scope)
                              .value();
  float loss = 0;
  for (auto _ : state) {
    RunResult result = demo.executor->Run(run, feeds).value();
    loss = result.fetches[0].ToVector<float>()[0];
  }
  state.counters["loss"] = loss;
  state.SetLabel(demo.device.ToString());
}
BENCHMARK(BM_Graph_ExecutorStep)
    ->ArgName("sim")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sluice::framework::graph::graph_benchmark
