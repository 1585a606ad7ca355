// Subgraph compilation benchmarks (docs/benchmarks.md, "Subgraph compilation"):
//   BM_Compiled_ElementwiseChain    y = ((((x*1.5+0.5)*x-0.25)*0.75+x)*x-1.0), eight ops on
//                                   2^24 f32 through the Executor with default options
//                                   (the chain compiled into one kernel)
//   BM_Compiled_ElementwiseChainUnfused  the same with compile_subgraphs off (eight kernels)
//   BM_Memcpy_Large                 memcpy of the chain's output bytes (64 MiB), the floor
//   BM_Compiled_TileProgramOnly     the compiled chain's TileProgram run directly (no VM)
//   BM_Compiler_ColdCompile         partition-free compile of the chain's subgraph, cache cold
//   BM_Compiler_CacheHit            the same lookup, cache warm, key made once (MakeKey)
//   BM_Compiler_MakeKey             making that key (the subgraph's text and hash)
//   BM_Compiled_GatedMlpStep/C/I/A  one training step of the gated MLP with Adam
//                                   (framework/models/gated_mlp.h: 64x32 batch, two hidden
//                                   layers of 64) on cpu; C = 1 compilation on, 0 off; I = 1
//                                   the in-place pass on, 0 off; A = 1 the add-to pass on, 0
//                                   off (counters: peak_bytes, the plan's peak temporary
//                                   bytes, inplace reuses and addto_sums)
// The chain benchmarks read x and write y once per iteration: bytes processed = 2 * 4 * 2^24.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "framework/compiler/compiler.h"
#include "framework/compiler/cpu/tile_program.h"
#include "framework/compiler/subgraph.h"
#include "framework/executor/executor.h"
#include "framework/ir/program_desc.h"
#include "framework/models/gated_mlp.h"
#include "ops/standard_ops.h"
#include "vm/virtual_machine.h"

namespace sluice::framework::compiler_benchmark {
namespace {

constexpr int64_t kChainElements = int64_t{1} << 24;

ir::VarDesc Var(const std::string& name, int64_t n, bool persistable) {
  ir::VarDesc var;
  var.name = name;
  var.shape = Shape({n});
  var.persistable = persistable;
  return var;
}

ir::OpDesc Scale(const std::string& x, const std::string& out, double scale, double bias) {
  ir::OpDesc op;
  op.type = "scale";
  op.inputs.emplace_back("X", std::vector<std::string>{x});
  op.outputs.emplace_back("Out", std::vector<std::string>{out});
  op.attrs.Set("scale", scale).Set("bias", bias);
  return op;
}

ir::OpDesc Binary(const std::string& type, const std::string& x, const std::string& y,
                  const std::string& out) {
  ir::OpDesc op;
  op.type = type;
  op.inputs.emplace_back("X", std::vector<std::string>{x});
  op.inputs.emplace_back("Y", std::vector<std::string>{y});
  op.outputs.emplace_back("Out", std::vector<std::string>{out});
  return op;
}

// x (persistable) -> y (persistable), eight ops.
ir::ProgramDesc ChainProgram(int64_t n) {
  ir::ProgramDesc program;
  ir::BlockDesc& b = program.mutable_global_block();
  SLUICE_CHECK(b.AddVar(Var("x", n, true)).ok());
  SLUICE_CHECK(b.AddVar(Var("y", n, true)).ok());
  for (int i = 1; i <= 7; ++i) SLUICE_CHECK(b.AddVar(Var("t" + std::to_string(i), n, false)).ok());
  b.AppendOp(Scale("x", "t1", 1.5, 0.0));   // x*1.5
  b.AppendOp(Scale("t1", "t2", 1.0, 0.5));  // +0.5
  b.AppendOp(Binary("mul", "t2", "x", "t3"));
  b.AppendOp(Scale("t3", "t4", 1.0, -0.25));
  b.AppendOp(Scale("t4", "t5", 0.75, 0.0));
  b.AppendOp(Binary("add", "t5", "x", "t6"));
  b.AppendOp(Binary("mul", "t6", "x", "t7"));
  b.AppendOp(Scale("t7", "y", 1.0, -1.0));
  return program;
}

ir::ProgramDesc ChainStartup(int64_t n) {
  ir::ProgramDesc program;
  ir::BlockDesc& b = program.mutable_global_block();
  SLUICE_CHECK(b.AddVar(Var("x", n, true)).ok());
  ir::OpDesc fill;
  fill.type = "uniform_random";
  fill.outputs.emplace_back("Out", std::vector<std::string>{"x"});
  fill.attrs.Set("shape", std::vector<int64_t>{n}).Set("seed", int64_t{7});
  b.AppendOp(std::move(fill));
  return program;
}

struct Engine {
  Engine() {
    ep::RuntimeOptions options;
    options.num_sim_devices = 1;
    options.enable_cuda = false;
    runtime = ep::Runtime::Create(options).value();
    vm = vm::VirtualMachine::Create(runtime.get(), vm::VmOptions{}).value();
    SLUICE_CHECK(ops::RegisterStandardOps(&registry).ok());
  }
  ~Engine() { SLUICE_CHECK(vm->Shutdown().ok()); }
  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> vm;
  ops::OpRegistry registry;
};

void RunChain(benchmark::State& state, bool compile) {
  Engine engine;
  ExecutorOptions options;
  options.interpreter.compile_subgraphs = compile;
  Executor executor(&engine.registry, engine.vm.get(), options);
  Scope scope;
  SLUICE_CHECK(executor.Run(ChainStartup(kChainElements), {}, {}, &scope).ok());
  const ir::ProgramDesc program = ChainProgram(kChainElements);
  const PreparedRun prepared = executor.Prepare(program, {}, {}, &scope).value();
  SLUICE_CHECK(executor.Run(prepared, {}).ok());  // warm up: first allocations
  for (auto _ : state) {
    SLUICE_CHECK(executor.Run(prepared, {}).ok());
  }
  const LoweringStats& lowering = prepared.lowering();
  state.counters["kernels"] = static_cast<double>(lowering.ops);
  state.counters["fused_ops"] = static_cast<double>(lowering.fused_ops);
  state.SetBytesProcessed(state.iterations() * 2 * kChainElements * 4);
}

void BM_Compiled_ElementwiseChain(benchmark::State& state) { RunChain(state, true); }
BENCHMARK(BM_Compiled_ElementwiseChain)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Compiled_ElementwiseChainUnfused(benchmark::State& state) { RunChain(state, false); }
BENCHMARK(BM_Compiled_ElementwiseChainUnfused)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Memcpy_Large(benchmark::State& state) {
  std::vector<float> from(static_cast<size_t>(kChainElements), 1.0f);
  std::vector<float> to(static_cast<size_t>(kChainElements), 0.0f);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size() * sizeof(float));
    benchmark::DoNotOptimize(to.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kChainElements * 4);
}
BENCHMARK(BM_Memcpy_Large)->Unit(benchmark::kMillisecond)->UseRealTime();

// The chain's subgraph, as the partitioning pass builds it.
compiler::Subgraph ChainSubgraph(int64_t n) {
  using compiler::ExprNode;
  using compiler::ExprOp;
  compiler::Subgraph g;
  g.domain = Shape({n});
  g.inputs.push_back({DataType::kF32, Shape({n})});
  auto node = [&](ExprOp op, int a, int b = -1, double p0 = 0, double p1 = 0) {
    ExprNode e;
    e.op = op;
    e.args[0] = a;
    e.args[1] = b;
    e.params[0] = p0;
    e.params[1] = p1;
    g.nodes.push_back(e);
    return g.num_values() - 1;
  };
  int v = node(ExprOp::kScale, 0, -1, 1.5, 0.0);
  v = node(ExprOp::kScale, v, -1, 1.0, 0.5);
  v = node(ExprOp::kMul, v, 0);
  v = node(ExprOp::kScale, v, -1, 1.0, -0.25);
  v = node(ExprOp::kScale, v, -1, 0.75, 0.0);
  v = node(ExprOp::kAdd, v, 0);
  v = node(ExprOp::kMul, v, 0);
  v = node(ExprOp::kScale, v, -1, 1.0, -1.0);
  g.outputs.push_back(v);
  g.fused = {"scale", "scale", "mul", "scale", "scale", "add", "mul", "scale"};
  return g;
}

void BM_Compiled_TileProgramOnly(benchmark::State& state) {
  const compiler::cpu::TileProgram program =
      compiler::cpu::TileProgram::Compile(ChainSubgraph(kChainElements)).value();
  std::vector<float> x(static_cast<size_t>(kChainElements), 0.5f);
  std::vector<float> y(static_cast<size_t>(kChainElements), 0.0f);
  const void* in[] = {x.data()};
  void* out[] = {y.data()};
  // Split as a cpu kernel splits it: over an intra-op pool of the host's hardware threads.
  IntraOpPool pool;
  const ParallelScope parallel(&pool, nullptr, nullptr);
  for (auto _ : state) {
    SLUICE_CHECK(program.Run(in, out, parallel).ok());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * kChainElements * 4);
}
BENCHMARK(BM_Compiled_TileProgramOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Compiler_ColdCompile(benchmark::State& state) {
  const compiler::Subgraph g = ChainSubgraph(kChainElements);
  for (auto _ : state) {
    compiler::Compiler compiler;  // an empty cache every time
    benchmark::DoNotOptimize(compiler.Compile(g, DeviceType::kCpu).value());
  }
}
BENCHMARK(BM_Compiler_ColdCompile);

void BM_Compiler_CacheHit(benchmark::State& state) {
  const compiler::Subgraph g = ChainSubgraph(kChainElements);
  compiler::Compiler compiler;
  const compiler::CompileKey key = compiler::Compiler::MakeKey(g, DeviceType::kCpu);
  SLUICE_CHECK(compiler.Compile(key, g).ok());
  for (auto _ : state) {
    benchmark::DoNotOptimize(compiler.Compile(key, g).value());
  }
}
BENCHMARK(BM_Compiler_CacheHit);

void BM_Compiler_MakeKey(benchmark::State& state) {
  const compiler::Subgraph g = ChainSubgraph(kChainElements);
  for (auto _ : state) {
    benchmark::DoNotOptimize(compiler::Compiler::MakeKey(g, DeviceType::kCpu));
  }
}
BENCHMARK(BM_Compiler_MakeKey);

void BM_Compiled_GatedMlpStep(benchmark::State& state) {
  Engine engine;
  const GatedMlpOptions mlp;
  GatedMlp model = BuildGatedMlp(&engine.registry, mlp).value();
  ExecutorOptions options;
  options.interpreter.compile_subgraphs = state.range(0) != 0;
  options.interpreter.inplace = state.range(1) != 0;
  options.interpreter.addto = state.range(2) != 0;
  Executor executor(&engine.registry, engine.vm.get(), options);
  Scope scope;
  SLUICE_CHECK(executor.Run(model.startup->desc(), {}, {}, &scope).ok());
  const Feeds feeds = {{model.x, GatedMlpInput(mlp)}, {model.y, GatedMlpTarget(mlp)}};
  const PreparedRun step =
      executor.Prepare(model.main->desc(), {model.x, model.y}, {model.loss}, &scope).value();
  SLUICE_CHECK(executor.Run(step, feeds).ok());
  for (auto _ : state) {
    SLUICE_CHECK(executor.Run(step, feeds).ok());
  }
  state.counters["kernels"] = static_cast<double>(step.lowering().ops);
  state.counters["fused_ops"] = static_cast<double>(step.lowering().fused_ops);
  state.counters["peak_bytes"] = static_cast<double>(step.lowering().peak_temporary_bytes);
  state.counters["inplace"] = static_cast<double>(step.lowering().inplace_reuses);
  state.counters["addto_sums"] = static_cast<double>(step.lowering().addto_sums);
  state.SetItemsProcessed(state.iterations());
}
// Arguments: subgraph compilation (1 on, the default), the in-place pass (1 on, the
// default), the add-to pass (0 off, the default).
BENCHMARK(BM_Compiled_GatedMlpStep)
    ->Args({1, 1, 0})
    ->Args({0, 1, 0})
    ->Args({1, 0, 0})
    ->Args({0, 0, 0})
    ->Args({1, 1, 1})
    ->Args({0, 1, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
}  // namespace sluice::framework::compiler_benchmark
