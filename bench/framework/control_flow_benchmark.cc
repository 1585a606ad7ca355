// Control flow through the interpreter, default options (GC plan on, default scheduling).
//
//   BM_Interpreter_WhileLoop/<n>      while i < n { i += 1; x = x * 1.0001 + 0.5 } on a [4]
//                                     f32 tensor on cpu, one run of a prepared program per
//                                     benchmark iteration; `per_iteration` is the time of one
//                                     loop iteration (the run's time over n).
//   BM_Interpreter_WhileLoop_Sim/<n>  the same on sim:0 (no jitter): the control step
//                                     enqueues each frame on the sim stream and waits for
//                                     each predicate (an event) before the next iteration.
//   BM_Interpreter_ParallelIterations/<p>
//                                     while i < n { i += 1; acc = acc + tanh(c * i) / 2 }
//                                     on [8192] f32 (the tanh chain, about 20 µs, depends
//                                     on i alone: iteration k + 1's chain can run beside
//                                     iteration k's), 200 iterations, two cpu compute
//                                     streams, parallel_iterations p; per_iteration as above;
//                                     `lanes` and `pipelined` say what the build made of it
//                                     (lane sequences; loops whose iterations overlap).
//
// Peers (docs/benchmarks.md): TensorFlow's tf.while_loop in a tf.function and
// PaddlePaddle's static while_loop, measured by their own scripts.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "ops/standard_ops.h"

namespace sluice::framework::control_flow_benchmark {
namespace {

void RunWhileLoop(benchmark::State& state, DeviceType device) {
  const int64_t n = state.range(0);
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = device == DeviceType::kSim ? 1 : 0;
  context_options.runtime.enable_cuda = false;
  eager::Context context = eager::Context::Create(context_options).value();
  ops::OpRegistry registry;
  SLUICE_CHECK(ops::RegisterStandardOps(&registry).ok());
  Program main(&registry), startup(&registry);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var limit = Data("n", Shape()).value();
    const Var x = Data("x", Shape({4})).value();
    std::vector<Value> out =
        fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], limit); },
                      [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                        SLUICE_ASSIGN_OR_RETURN(Value next_x, fn::Scale(vars[1], 1.0001, 0.5));
                        return std::vector<Value>{next_i, next_x};
                      },
                      {i, x})
            .value();
    fetches.push_back(out[1].var().name());
  }
  ExecutorOptions options;
  options.interpreter.device = Device(device, 0);
  Executor executor(&context.registry(), context.vm(), options);
  Scope scope;
  const Feeds feeds = {
      {"i", HostTensor::FromVector(std::vector<float>{0}, Shape())},
      {"n", HostTensor::FromVector(std::vector<float>{static_cast<float>(n)}, Shape())},
      {"x", HostTensor::FromVector(std::vector<float>{1, 2, 3, 4}, Shape({4}))}};
  const PreparedRun prepared =
      executor.Prepare(main.desc(), {"i", "n", "x"}, fetches, &scope).value();
  SLUICE_CHECK(executor.Run(prepared, feeds).ok());  // warm up: the frames' first allocations
  for (auto _ : state) {
    absl::StatusOr<RunResult> result = executor.Run(prepared, feeds);
    SLUICE_CHECK(result.ok());
    benchmark::DoNotOptimize(result->fetches);
  }
  state.counters["per_iteration"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

void BM_Interpreter_ParallelIterations(benchmark::State& state) {
  constexpr int64_t kIterations = 200;
  constexpr int64_t kSize = 8192;
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 0;
  context_options.runtime.enable_cuda = false;
  eager::Context context = eager::Context::Create(context_options).value();
  ops::OpRegistry registry;
  SLUICE_CHECK(ops::RegisterStandardOps(&registry).ok());
  Program main(&registry), startup(&registry);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var limit = Data("n", Shape()).value();
    const Var c = Data("c", Shape({kSize})).value();
    const Var acc = Data("acc", Shape({kSize})).value();
    fn::WhileOptions options;
    options.parallel_iterations = state.range(0);
    std::vector<Value> out =
        fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], limit); },
                      [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                        SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(c, vars[0]));
                        SLUICE_ASSIGN_OR_RETURN(t, fn::Tanh(t));
                        SLUICE_ASSIGN_OR_RETURN(t, fn::Scale(t, 0.5));
                        SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], t));
                        return std::vector<Value>{next_i, next_acc};
                      },
                      {i, acc}, options)
            .value();
    fetches.push_back(out[1].var().name());
  }
  ExecutorOptions options;
  options.interpreter.compute_streams = 2;
  Executor executor(&context.registry(), context.vm(), options);
  Scope scope;
  const Feeds feeds = {
      {"i", HostTensor::FromVector(std::vector<float>{0}, Shape())},
      {"n", HostTensor::FromVector(std::vector<float>{kIterations}, Shape())},
      {"c", HostTensor::FromVector(std::vector<float>(kSize, 0.001f), Shape({kSize}))},
      {"acc", HostTensor::FromVector(std::vector<float>(kSize, 0.0f), Shape({kSize}))}};
  const PreparedRun prepared =
      executor.Prepare(main.desc(), {"i", "n", "c", "acc"}, fetches, &scope).value();
  // What the build made of it: lanes, and whether the loop's iterations overlap there.
  state.counters["lanes"] = static_cast<double>(prepared.lowering().lane_sequences);
  state.counters["pipelined"] = static_cast<double>(prepared.lowering().pipelined_loops);
  SLUICE_CHECK(executor.Run(prepared, feeds).ok());
  for (auto _ : state) {
    absl::StatusOr<RunResult> result = executor.Run(prepared, feeds);
    SLUICE_CHECK(result.ok());
    benchmark::DoNotOptimize(result->fetches);
  }
  state.counters["per_iteration"] = benchmark::Counter(
      static_cast<double>(kIterations),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Interpreter_ParallelIterations)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Interpreter_WhileLoop(benchmark::State& state) { RunWhileLoop(state, DeviceType::kCpu); }
void BM_Interpreter_WhileLoop_Sim(benchmark::State& state) {
  RunWhileLoop(state, DeviceType::kSim);
}
BENCHMARK(BM_Interpreter_WhileLoop)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_WhileLoop_Sim)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace sluice::framework::control_flow_benchmark
