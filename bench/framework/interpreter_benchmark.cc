// The static-graph interpreter against the limits of the same DAG: a oneTBB flow graph and a
// plain sequential loop. Three shapes (seeded, the same in every runner):
//   Chain      op i reads op i-1's output;
//   Wide       op 0 writes x, ops 1..n-1 each read x;
//   RandomDag  op i reads one or two outputs of the previous 32 ops.
// Ops are "bench_noop" (no work: what remains is engine overhead) or "bench_spin" (about
// 5 us of busy work on the stream, like a small kernel). Items = ops, so the reported time
// per item is the cost per op. The interpreter runs through Executor::Run (one batch
// submission and one completion barrier per iteration, through a PreparedRun so the program is not
// re-hashed): chain and wide on cpu, the random DAG on sim:0 with ops spread over two compute
// streams (each sim stream is a thread).
//   BM_Interpreter_Build/N   Interpreter::Build of a random DAG of N ops (no run).
//   *_RandomDagWorkLoaded    RandomDagWork with one core kept busy by a spinning thread
//                            for the duration (outside load).
//   *_RandomDagUneven        RandomDagWork with op costs of 1 to 9 us (seeded), cpu.
//   BM_Interpreter_ChainShapes  Chain with values of three sizes in turn: the GC plan's
//                            releases cannot hand storage on (every release frees, every
//                            op allocates).
// Counters: instructions and syncs per run, release steps and storage hand-offs per run,
// peak_bytes of the runs (the allocator's, max over the timed runs).
// Environment, for investigations (defaults are what docs/benchmarks.md reports):
//   SLUICE_BENCH_SPIN_NS=N   VmOptions::spin of the VM's threads (default 20000);
//   SLUICE_BENCH_IDLE_SPIN_NS=N  VmOptions::idle_spin of its workers (default 200000);
//   SLUICE_BENCH_CALLER_THREAD=1  caller-thread scheduling instead of a scheduler thread;
//   SLUICE_BENCH_LANES=0     InterpreterOptions::lane_sequences off (instruction-level lowering);
//   SLUICE_BENCH_WORK_SHARING=0  InterpreterOptions::work_sharing off (cpu streams as lanes
//                            instead of one shared step graph);
//   SLUICE_BENCH_TRACE=FILE  after the timed loop, one more run writes a Chrome trace;
//   SLUICE_BENCH_CROSS_COST=X  InterpreterOptions::cross_stream_cost (default 2; 0 is the
//                            start-time-only list schedule of earlier figures).
//   BM_Executor_DemoStep/D/C one training step of the demo program (Linear(16->1) + MSE +
//                            Adam, 16x16 input; framework/models/linear_regression.h) through
//                            a PreparedRun, feeds staged and the loss fetched: D = 0 cpu,
//                            1 sim:0 over two compute streams; C = 1 subgraph compilation on
//                            (the default), 0 off.
//   BM_Executor_DeviceResidentStep/D/1  the same step with I/O binding: x and y fed as blobs on
//                            the program's device, the loss fetched as one (no host copy).
//                            The difference to DemoStep is the binding's cost or saving.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/interpreter.h"
#include "framework/ir/program_desc.h"
#include "framework/models/linear_regression.h"
#include "ops/cpu/host_kernel.h"
#include "ops/op_registry.h"
#include "ops/op_schema.h"
#include "ops/standard_ops.h"
#include "tbb/flow_graph.h"
#include "tbb/global_control.h"
#include "tests/busy_core.h"
#include "vm/instructions_builder.h"
#include "vm/kernel.h"
#include "vm/virtual_machine.h"

namespace sluice::framework::interpreter_benchmark {
namespace {

constexpr int64_t kSpinNs = 5000;

void Spin(int64_t ns) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < end) {
  }
}

using sluice::testing::BusyCore;  // outside load (the "Loaded" variants)

// --- The DAGs. ---
struct Dag {
  std::vector<std::vector<int>> preds;  // per op, earlier ops it reads
  std::vector<int64_t> spin_ns;         // per op, its work with "bench_spin" (empty: kSpinNs)
  int64_t SpinNs(int op) const { return spin_ns.empty() ? kSpinNs : spin_ns[op]; }
};

Dag Chain(int n) {
  Dag dag;
  dag.preds.resize(n);
  for (int i = 1; i < n; ++i) dag.preds[i] = {i - 1};
  return dag;
}

Dag Wide(int n) {
  Dag dag;
  dag.preds.resize(n);
  for (int i = 1; i < n; ++i) dag.preds[i] = {0};
  return dag;
}

Dag RandomDag(int n, uint64_t seed = 7) {
  Dag dag;
  dag.preds.resize(n);
  std::mt19937_64 rng(seed);
  for (int i = 1; i < n; ++i) {
    const int window = std::min(i, 32);
    const int count = 1 + static_cast<int>(rng() % 2);
    for (int k = 0; k < count; ++k) {
      const int p = i - 1 - static_cast<int>(rng() % window);
      if (std::find(dag.preds[i].begin(), dag.preds[i].end(), p) == dag.preds[i].end()) {
        dag.preds[i].push_back(p);
      }
    }
  }
  return dag;
}

// RandomDag whose ops take 1 to 9 us of work (seeded; 5 us on average): uneven costs that
// no schedule made before the run knows.
Dag UnevenRandomDag(int n, uint64_t seed = 11) {
  Dag dag = RandomDag(n);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) dag.spin_ns.push_back(1000 + static_cast<int64_t>(rng() % 9) * 1000);
  return dag;
}

// --- Ops for the interpreter. ---
class NoopKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "bench_noop"; }
  absl::Status Launch(vm::KernelContext&) const override { return absl::OkStatus(); }
};

class SpinKernel final : public vm::OpKernel {
 public:
  absl::string_view name() const override { return "bench_spin"; }
  absl::Status Launch(vm::KernelContext& ctx) const override {
    const int64_t ns = ctx.attrs().GetInt("ns").value_or(kSpinNs);
    return ctx.LaunchHostWork([ns] {
      Spin(ns);
      return absl::OkStatus();
    });
  }
};

absl::Status RegisterBenchOps(ops::OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(ops::RegisterStandardOps(registry));
  for (const char* name : {"bench_noop", "bench_spin"}) {
    SLUICE_RETURN_IF_ERROR(registry->RegisterSchema(
        ops::OpSchema(name)
            .Input("X", /*variadic=*/true, /*optional=*/true)
            .Output("Out")
            .Attr("size", ops::AttrType::kInt, vm::AttrValue(int64_t{1}))
            .Attr("ns", ops::AttrType::kInt, vm::AttrValue(kSpinNs))
            .Infer([](const ops::InferContext& ctx)
                       -> absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>> {
              const int64_t size = ctx.attrs().GetInt("size").value_or(1);
              return std::vector<std::vector<ops::TensorMeta>>{{{DataType::kF32, Shape({size})}}};
            })));
  }
  std::shared_ptr<const vm::OpKernel> noop = std::make_shared<NoopKernel>();
  std::shared_ptr<const vm::OpKernel> spin = std::make_shared<SpinKernel>();
  SLUICE_RETURN_IF_ERROR(registry->RegisterKernel(
      "bench_noop", {DeviceType::kCpu, DeviceType::kSim}, DataType::kF32, noop));
  return registry->RegisterKernel("bench_spin", {DeviceType::kCpu, DeviceType::kSim},
                                  DataType::kF32, spin);
}

// `shapes` > 1: op i's output has i % shapes + 1 elements (so no two values two ops apart
// share a shape); else every output has one.
ir::ProgramDesc ToProgram(const Dag& dag, bool spin, int shapes = 1) {
  ir::ProgramDesc program;
  ir::BlockDesc& block = program.mutable_global_block();
  const int n = static_cast<int>(dag.preds.size());
  auto size_of = [shapes](int i) { return shapes > 1 ? int64_t{i % shapes + 1} : int64_t{1}; };
  for (int i = 0; i < n; ++i) {
    ir::VarDesc var;
    var.name = "v" + std::to_string(i);
    var.shape = Shape({size_of(i)});
    SLUICE_CHECK(block.AddVar(var).ok());
  }
  for (int i = 0; i < n; ++i) {
    ir::OpDesc op;
    op.type = spin ? "bench_spin" : "bench_noop";
    std::vector<std::string> inputs;
    for (int p : dag.preds[i]) inputs.push_back("v" + std::to_string(p));
    if (!inputs.empty()) op.inputs.emplace_back("X", inputs);
    op.outputs.emplace_back("Out", std::vector<std::string>{"v" + std::to_string(i)});
    if (shapes > 1) op.attrs.Set("size", size_of(i));
    if (spin && !dag.spin_ns.empty()) op.attrs.Set("ns", dag.spin_ns[i]);
    block.AppendOp(std::move(op));
  }
  return program;
}

struct Engine {
  Engine() {
    ep::RuntimeOptions options;
    options.num_sim_devices = 1;
    options.enable_cuda = false;
    runtime = ep::Runtime::Create(options).value();
    vm::VmOptions vm_options;
    if (const char* spin = std::getenv("SLUICE_BENCH_SPIN_NS"))
      vm_options.spin = std::chrono::nanoseconds(std::atoll(spin));
    if (const char* idle = std::getenv("SLUICE_BENCH_IDLE_SPIN_NS"))
      vm_options.idle_spin = std::chrono::nanoseconds(std::atoll(idle));
    if (std::getenv("SLUICE_BENCH_CALLER_THREAD") != nullptr)
      vm_options.scheduling = vm::VmOptions::Scheduling::kCallerThread;
    vm = vm::VirtualMachine::Create(runtime.get(), vm_options).value();
    SLUICE_CHECK(RegisterBenchOps(&registry).ok());
  }
  ~Engine() { SLUICE_CHECK(vm->Shutdown().ok()); }
  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  ops::OpRegistry registry;
};

// Arguments: ops, then 0/1 = keep / release temporaries (the GC plan).
// `shapes`: see ToProgram. `loaded`: a BusyCore runs beside the timed loop.
void RunInterpreter(benchmark::State& state, const Dag& dag, bool spin, Device device, int streams,
                    int shapes = 1, bool loaded = false) {
  Engine engine;
  ExecutorOptions options;
  options.interpreter.device = device;
  options.interpreter.compute_streams = streams;
  if (const char* lanes = std::getenv("SLUICE_BENCH_LANES"))
    options.interpreter.lane_sequences = std::atoi(lanes) != 0;
  if (const char* sharing = std::getenv("SLUICE_BENCH_WORK_SHARING"))
    options.interpreter.work_sharing = std::atoi(sharing) != 0;
  if (const char* cost = std::getenv("SLUICE_BENCH_CROSS_COST"))
    options.interpreter.cross_stream_cost = std::atof(cost);
  options.interpreter.release_temporaries = state.range(1) != 0;
  Executor executor(&engine.registry, engine.vm.get(), options);
  Scope scope;
  const ir::ProgramDesc program = ToProgram(dag, spin, shapes);
  const PreparedRun prepared = executor.Prepare(program, {}, {}, &scope).value();
  SLUICE_CHECK(executor.Run(prepared, {}).ok());  // warm up: first allocations
  int64_t peak_bytes = 0;
  {
    std::optional<BusyCore> load;
    if (loaded) load.emplace();
    for (auto _ : state) {
      absl::StatusOr<RunResult> result = executor.Run(prepared, {});
      SLUICE_CHECK(result.ok());
      peak_bytes = std::max(peak_bytes, result->stats.peak_bytes);
    }
  }
  if (const char* trace = std::getenv("SLUICE_BENCH_TRACE")) {
    // One more run, traced, for a look at the timeline (not part of the measurement).
    RunOptions traced;
    traced.trace_path = trace;
    SLUICE_CHECK(executor.Run(prepared, {}, traced).ok());
  }
  const LoweringStats lowering = executor.LastLowering().value();
  state.counters["instructions"] = static_cast<double>(lowering.instructions);
  state.counters["graph_tasks"] = static_cast<double>(lowering.graph_tasks);
  state.counters["syncs"] = static_cast<double>(lowering.stream_waits + lowering.record_events);
  state.counters["releases"] = static_cast<double>(lowering.releases);
  state.counters["handoffs"] = static_cast<double>(lowering.storage_handoffs);
  state.counters["drops"] = static_cast<double>(lowering.shared_releases);
  state.counters["peak_bytes"] = static_cast<double>(peak_bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(dag.preds.size()));
}

// oneTBB flow graph: one continue_node per op, edges from its predecessors.
void RunTbb(benchmark::State& state, const Dag& dag, bool spin, bool loaded = false) {
  tbb::flow::graph graph;
  const int n = static_cast<int>(dag.preds.size());
  std::vector<std::unique_ptr<tbb::flow::continue_node<tbb::flow::continue_msg>>> nodes;
  nodes.reserve(n);
  for (int i = 0; i < n; ++i) {
    nodes.push_back(std::make_unique<tbb::flow::continue_node<tbb::flow::continue_msg>>(
        graph, [spin, ns = dag.SpinNs(i)](const tbb::flow::continue_msg&) {
          if (spin) Spin(ns);
          benchmark::ClobberMemory();
        }));
  }
  std::vector<int> roots;
  for (int i = 0; i < n; ++i) {
    if (dag.preds[i].empty()) roots.push_back(i);
    for (int p : dag.preds[i]) tbb::flow::make_edge(*nodes[p], *nodes[i]);
  }
  std::optional<BusyCore> load;
  if (loaded) load.emplace();
  for (auto _ : state) {
    for (int r : roots) nodes[r]->try_put(tbb::flow::continue_msg());
    graph.wait_for_all();
  }
  load.reset();
  state.SetItemsProcessed(state.iterations() * n);
}

// The limit: the ops' bodies called in program order.
void RunSequential(benchmark::State& state, const Dag& dag, bool spin, bool loaded = false) {
  const int n = static_cast<int>(dag.preds.size());
  std::vector<float> values(n, 0.0f);
  std::optional<BusyCore> load;
  if (loaded) load.emplace();
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      if (spin) Spin(dag.SpinNs(i));
      float v = 1.0f;
      for (int p : dag.preds[i]) v += values[p];
      values[i] = v;
    }
    benchmark::DoNotOptimize(values.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

const Device kCpu(DeviceType::kCpu, 0);
const Device kSim(DeviceType::kSim, 0);

void BM_Interpreter_Chain(benchmark::State& s) {
  RunInterpreter(s, Chain(s.range(0)), false, kCpu, 1);
}
void BM_TbbFlowGraph_Chain(benchmark::State& s) { RunTbb(s, Chain(s.range(0)), false); }
void BM_Sequential_Chain(benchmark::State& s) { RunSequential(s, Chain(s.range(0)), false); }
void BM_Interpreter_Wide(benchmark::State& s) {
  RunInterpreter(s, Wide(s.range(0)), false, kCpu, 1);
}
void BM_TbbFlowGraph_Wide(benchmark::State& s) { RunTbb(s, Wide(s.range(0)), false); }
void BM_Sequential_Wide(benchmark::State& s) { RunSequential(s, Wide(s.range(0)), false); }
void BM_Interpreter_RandomDag(benchmark::State& s) {
  RunInterpreter(s, RandomDag(s.range(0)), false, kSim, 2);
}
void BM_TbbFlowGraph_RandomDag(benchmark::State& s) { RunTbb(s, RandomDag(s.range(0)), false); }
void BM_Sequential_RandomDag(benchmark::State& s) {
  RunSequential(s, RandomDag(s.range(0)), false);
}
// Third argument: 0 = sim:0 (each compute stream a thread of the simulated device, the
// ThreadCtx launching onto them), 1 = cpu (each compute stream a worker of its own, the
// kernels run on it).
void BM_Interpreter_RandomDagWork(benchmark::State& s) {
  RunInterpreter(s, RandomDag(s.range(0)), true, s.range(2) == 0 ? kSim : kCpu, 2);
  s.SetLabel(s.range(2) == 0 ? "sim:0, 2 streams" : "cpu, 2 streams");
}
void BM_TbbFlowGraph_RandomDagWork(benchmark::State& s) { RunTbb(s, RandomDag(s.range(0)), true); }
void BM_Sequential_RandomDagWork(benchmark::State& s) {
  RunSequential(s, RandomDag(s.range(0)), true);
}
// The same with one core kept busy by a spinning thread for the duration (BusyCore).
void BM_Interpreter_RandomDagWorkLoaded(benchmark::State& s) {
  RunInterpreter(s, RandomDag(s.range(0)), true, s.range(2) == 0 ? kSim : kCpu, 2, 1,
                 /*loaded=*/true);
  s.SetLabel(s.range(2) == 0 ? "sim:0, 2 streams, one core busy" : "cpu, 2 streams, one core busy");
}
void BM_TbbFlowGraph_RandomDagWorkLoaded(benchmark::State& s) {
  RunTbb(s, RandomDag(s.range(0)), true, /*loaded=*/true);
}
void BM_Sequential_RandomDagWorkLoaded(benchmark::State& s) {
  RunSequential(s, RandomDag(s.range(0)), true, /*loaded=*/true);
}
// The random DAG with uneven op costs (UnevenRandomDag), on cpu over two streams: a schedule
// fixed before the run (lanes) cannot know them; workers that take whatever is ready can.
void BM_Interpreter_RandomDagUneven(benchmark::State& s) {
  RunInterpreter(s, UnevenRandomDag(s.range(0)), true, kCpu, 2);
  s.SetLabel("cpu, 2 streams");
}
void BM_TbbFlowGraph_RandomDagUneven(benchmark::State& s) {
  RunTbb(s, UnevenRandomDag(s.range(0)), true);
}
void BM_Sequential_RandomDagUneven(benchmark::State& s) {
  RunSequential(s, UnevenRandomDag(s.range(0)), true);
}
// A chain whose values take three sizes in turn: no value two ops later shares a released
// one's shape, so every release frees and every op allocates (no storage hand-off).
void BM_Interpreter_ChainShapes(benchmark::State& s) {
  RunInterpreter(s, Chain(s.range(0)), false, kCpu, 1, /*shapes=*/3);
}

#define SLUICE_DAG_ARGS(n) \
  ->Args({n, 0})->Args({n, 1})->Unit(benchmark::kMicrosecond)->UseRealTime()
BENCHMARK(BM_Interpreter_Chain) SLUICE_DAG_ARGS(10000);
BENCHMARK(BM_TbbFlowGraph_Chain)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sequential_Chain)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_Wide) SLUICE_DAG_ARGS(10000);
BENCHMARK(BM_TbbFlowGraph_Wide)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sequential_Wide)->Arg(10000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_RandomDag) SLUICE_DAG_ARGS(2000);
BENCHMARK(BM_TbbFlowGraph_RandomDag)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sequential_RandomDag)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_RandomDagWork)
    ->ArgsProduct({{2000}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_TbbFlowGraph_RandomDagWork)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sequential_RandomDagWork)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_RandomDagWorkLoaded)
    ->ArgsProduct({{2000}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_TbbFlowGraph_RandomDagWorkLoaded)
    ->Arg(2000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Sequential_RandomDagWorkLoaded)
    ->Arg(2000)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_Interpreter_RandomDagUneven)
    ->Args({2000, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_TbbFlowGraph_RandomDagUneven)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sequential_RandomDagUneven)->Arg(2000)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Interpreter_ChainShapes) SLUICE_DAG_ARGS(10000);

void BM_Interpreter_Build(benchmark::State& state) {
  Engine engine;
  const ir::ProgramDesc program = ToProgram(RandomDag(state.range(0)), false);
  InterpreterOptions options;
  options.device = kSim;
  options.compute_streams = 2;
  for (auto _ : state) {
    Scope scope;
    auto interpreter =
        Interpreter::Build(program, &engine.registry, engine.vm.get(), &scope, {}, {}, options);
    SLUICE_CHECK(interpreter.ok());
    benchmark::DoNotOptimize(interpreter->get());
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Interpreter_Build)->Arg(100000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The demo program on an executor, its startup program run. Arguments: 0 = cpu, 1 = sim:0
// with two compute streams; then 1 = subgraph compilation on (the default), 0 = off.
struct DemoExecutor {
  explicit DemoExecutor(const benchmark::State& state)
      : model(BuildLinearRegression(&engine.registry).value()),
        options(Options(state)),
        executor(&engine.registry, engine.vm.get(), options) {
    SLUICE_CHECK(executor.Run(model.startup->desc(), {}, {}, &scope).ok());
  }
  static ExecutorOptions Options(const benchmark::State& state) {
    ExecutorOptions options;
    if (state.range(0) == 1) {
      options.interpreter.device = kSim;
      options.interpreter.compute_streams = 2;
    }
    options.interpreter.compile_subgraphs = state.range(1) != 0;
    return options;
  }
  Engine engine;
  LinearRegression model;
  ExecutorOptions options;
  Executor executor;
  Scope scope;
};

void BM_Executor_DemoStep(benchmark::State& state) {
  DemoExecutor demo(state);
  LinearRegression& model = demo.model;
  Executor& executor = demo.executor;
  Scope& scope = demo.scope;
  const Feeds feeds = {{model.x, LinearRegressionInput()}, {model.y, LinearRegressionTarget()}};
  const PreparedRun step =
      executor.Prepare(model.main->desc(), {model.x, model.y}, {model.loss}, &scope).value();
  for (auto _ : state) {
    absl::StatusOr<RunResult> result = executor.Run(step, feeds);
    SLUICE_CHECK(result.ok());
  }
  state.counters["ops"] = static_cast<double>(step.lowering().ops);
  state.counters["instructions"] = static_cast<double>(step.lowering().instructions);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Executor_DemoStep)
    ->Args({0, 1})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// BM_Executor_DemoStep with I/O binding: x and y are blobs already on the program's device
// (written once, before the timed loop) and the loss stays there (a new blob per step,
// dropped). Nothing crosses the host; each step copies x and y device to device and waits
// on the host for those copies before its graph is submitted. Argument as above.
void BM_Executor_DeviceResidentStep(benchmark::State& state) {
  DemoExecutor demo(state);
  Engine& engine = demo.engine;
  LinearRegression& model = demo.model;
  const ExecutorOptions& options = demo.options;
  Executor& executor = demo.executor;
  Scope& scope = demo.scope;
  vm::Stream* home =
      engine.vm->GetStream(StreamKey{options.interpreter.device, StreamType::kCompute, 0}).value();
  BlobFeeds feeds;
  {
    vm::InstructionsBuilder builder(engine.vm.get());
    for (const auto& [name, value] : {std::pair{model.x, LinearRegressionInput()},
                                      std::pair{model.y, LinearRegressionTarget()}}) {
      vm::BlobRef blob = engine.vm->NewBlob(home, value.dtype, value.shape).value();
      SLUICE_CHECK(builder.WriteBlob(blob, value.bytes).ok());
      feeds.emplace_back(name, std::move(blob));
    }
  }
  IoBinding io;
  io.device_feeds = {model.x, model.y};
  io.device_fetches = {model.loss};
  const PreparedRun step =
      executor.Prepare(model.main->desc(), {model.x, model.y}, {model.loss}, &scope, io).value();
  const vm::VmStats before = engine.vm->stats();
  for (auto _ : state) {
    absl::StatusOr<RunResult> result = executor.Run(step, {}, feeds);
    SLUICE_CHECK(result.ok());
  }
  const vm::VmStats after = engine.vm->stats();
  SLUICE_CHECK(after.host_to_device_copies == before.host_to_device_copies &&
               after.device_to_host_copies == before.device_to_host_copies);
  state.counters["ops"] = static_cast<double>(step.lowering().ops);
  state.counters["instructions"] = static_cast<double>(step.lowering().instructions);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Executor_DeviceResidentStep)
    ->Args({0, 1})
    ->Args({1, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace sluice::framework::interpreter_benchmark
