// The subgraph compiler end to end (InterpreterOptions::compile_subgraphs): random
// elementwise programs with broadcasting, the demo and a gated MLP trained with Adam give
// the same bits compiled and unfused, on cpu and on two sim streams with the sync checker;
// a compile that fails runs the group unfused; the trace names what a compiled kernel fused.
// The rule tested: the compiler neither reassociates nor contracts (a * b + c is two
// roundings, as unfused), so compiled results are bitwise equal to unfused ones — within
// 0 ulp, inside the 2-ulp bound the issue allows.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ep/cuda/ptx_compiler.h"
#include "framework/compiler/compiler.h"
#include "framework/compiler/cuda/cuda_source.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/models/gated_mlp.h"
#include "framework/models/linear_regression.h"
#include "gtest/gtest.h"
#include "tests/framework/compiled_program_test_util.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::compiled_program_test {
namespace {

using compiled_test::MakeRandomElementwiseProgram;
using compiled_test::RunCompiledAndUnfused;

TEST(CompiledProgramTest, RandomProgramsMatchUnfusedOnCpu) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  int64_t subgraphs = 0, fused = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto outcome = RunCompiledAndUnfused(
        *context, MakeRandomElementwiseProgram(seed, /*on_streams=*/false), program_test::kCpu, 1);
    EXPECT_EQ(outcome.max_ulp, 0);
    subgraphs += outcome.compiled_subgraphs;
    fused += outcome.fused_ops;
  }
  // The programs do fuse (this test compares something).
  EXPECT_GT(subgraphs, 40);
  EXPECT_GT(fused, 2 * subgraphs - 1);
}

TEST(CompiledProgramTest, RandomProgramsMatchUnfusedOnTwoSimStreams) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(context, nullptr);
  int64_t subgraphs = 0;
  for (uint32_t seed = 101; seed <= 140; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto outcome = RunCompiledAndUnfused(
        *context, MakeRandomElementwiseProgram(seed, /*on_streams=*/true), program_test::kSim, 2);
    EXPECT_EQ(outcome.max_ulp, 0);
    subgraphs += outcome.compiled_subgraphs;
  }
  EXPECT_GT(subgraphs, 40);
  EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0)
      << context->vm()->sync_checker()->status().message();
}

// The comparison above would see a contracted (fused multiply-add) or reassociated
// evaluation: both move results by at least one ulp on these inputs.
TEST(CompiledProgramTest, UlpComparisonSeesContractionAndReassociation) {
  int contracted = 0, reassociated = 0;
  for (int i = 1; i <= 1000; ++i) {
    const float x = std::sin(0.37f * i) * 3.0f;
    volatile float scale = 1.5f, bias = 0.5f;  // volatile: no constant folding, no contraction
    const float product = x * scale;
    const float separate = product + bias;
    const float fused = std::fma(x, static_cast<float>(scale), static_cast<float>(bias));
    if (compiled_test::UlpDistance(separate, fused) > 0) ++contracted;
    const float left = (x + bias) + scale;
    const float right = x + (static_cast<float>(bias) + static_cast<float>(scale));
    if (compiled_test::UlpDistance(left, right) > 0) ++reassociated;
  }
  EXPECT_GT(contracted, 0);
  EXPECT_GT(reassociated, 0);
}

// A training program: its programs, feeds and fetches, built on a registry.
struct TrainingProgram {
  ir::ProgramDesc startup;
  ir::ProgramDesc main;
  Feeds feeds;
  std::vector<std::string> fetches;
};
using ProgramFactory = std::function<TrainingProgram(const ops::OpRegistry*)>;

struct TrainingRun {
  std::vector<std::vector<uint8_t>> fetched;  // every step's fetches, in order
  LoweringStats lowering;
};

// `steps` steps of the program `make` builds, compiled or not, in a fresh context with the
// sync checker on.
TrainingRun Train(const ProgramFactory& make, const Device& device, int streams, bool compile,
                  int steps) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  const TrainingProgram program = make(&context->registry());
  ExecutorOptions options;
  options.interpreter.device = device;
  options.interpreter.compute_streams = streams;
  options.interpreter.compile_subgraphs = compile;
  Executor executor(&context->registry(), context->vm(), options);
  Scope scope;
  EXPECT_TRUE(executor.Run(program.startup, {}, {}, &scope).ok());
  TrainingRun run;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<RunResult> result =
        executor.Run(program.main, program.feeds, program.fetches, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) break;
    for (const HostTensor& t : result->fetches) run.fetched.push_back(t.bytes);
  }
  run.lowering = executor.LastLowering().value();
  EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0);
  return run;
}

TrainingProgram Demo(const ops::OpRegistry* registry) {
  LinearRegression model = BuildLinearRegression(registry).value();
  return {model.startup->desc(),
          model.main->desc(),
          {{model.x, LinearRegressionInput()}, {model.y, LinearRegressionTarget()}},
          {model.loss, model.weight}};
}

TEST(CompiledProgramTest, DemoLossesAreTheSameCompiledAndUnfused) {
  for (const Device& device : {program_test::kCpu, program_test::kSim}) {
    SCOPED_TRACE(device.ToString());
    const int streams = device.type() == DeviceType::kSim ? 2 : 1;
    const TrainingRun compiled = Train(Demo, device, streams, true, 20);
    EXPECT_EQ(compiled.fetched, Train(Demo, device, streams, false, 20).fetched);
    EXPECT_GT(compiled.lowering.compiled_subgraphs, 0);
  }
}

TrainingProgram SmallGatedMlp(const ops::OpRegistry* registry) {
  GatedMlpOptions mlp;
  mlp.batch = 16;
  mlp.features = 8;
  mlp.hidden = 12;
  GatedMlp model = BuildGatedMlp(registry, mlp).value();
  return {model.startup->desc(),
          model.main->desc(),
          {{model.x, GatedMlpInput(mlp)}, {model.y, GatedMlpTarget(mlp)}},
          {model.loss}};
}

TEST(CompiledProgramTest, GatedMlpWithAdamLossesAreTheSameCompiledAndUnfused) {
  for (const Device& device : {program_test::kCpu, program_test::kSim}) {
    SCOPED_TRACE(device.ToString());
    const int streams = device.type() == DeviceType::kSim ? 2 : 1;
    const TrainingRun compiled = Train(SmallGatedMlp, device, streams, true, 15);
    const TrainingRun unfused = Train(SmallGatedMlp, device, streams, false, 15);
    EXPECT_EQ(compiled.fetched, unfused.fetched);
    ASSERT_EQ(compiled.fetched.size(), 15u);
    // Training moves the loss (the comparison is of a real run).
    EXPECT_NE(compiled.fetched.front(), compiled.fetched.back());
    // Forward (tanh, sigmoid, mul, scale, add, relu) and backward parts both fuse.
    EXPECT_GE(compiled.lowering.compiled_subgraphs, 4);
    EXPECT_GE(compiled.lowering.fused_ops, 12);
    EXPECT_LT(compiled.lowering.ops, unfused.lowering.ops);
  }
}

TEST(CompiledProgramTest, FailedCompilesRunUnfusedAndAreCounted) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  compiler::CompilerOptions limits;
  limits.max_nodes = 2;  // every larger group fails to compile
  auto compiler = std::make_shared<compiler::Compiler>(limits);
  int64_t fallbacks = 0;
  for (uint32_t seed = 1; seed <= 10; ++seed) {
    const compiled_test::RandomElementwiseProgram r = MakeRandomElementwiseProgram(seed, false);
    std::vector<HostTensor> results[2];
    for (int compiled = 0; compiled < 2; ++compiled) {
      ExecutorOptions options;
      options.interpreter.compile_subgraphs = compiled == 1;
      options.compiler = compiler;
      Executor executor(&context->registry(), context->vm(), options);
      Scope scope;
      ASSERT_TRUE(executor.Run(r.startup, {}, {}, &scope).ok());
      absl::StatusOr<RunResult> result = executor.Run(r.main, r.feeds, r.fetches, &scope);
      ASSERT_TRUE(result.ok()) << result.status();
      results[compiled] = result->fetches;
      if (compiled == 1) fallbacks += executor.LastLowering()->compile_fallbacks;
    }
    for (size_t f = 0; f < r.fetches.size(); ++f) {
      EXPECT_TRUE(compiled_test::SameValues(results[0][f], results[1][f])) << r.fetches[f];
    }
  }
  EXPECT_GT(fallbacks, 0);
  EXPECT_GT(compiler->stats().failures, 0);  // cached: each failing key failed once
}

TEST(CompiledProgramTest, TraceShowsOneSliceNamingTheFusedOps) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  using program_test::Op;
  ir::ProgramDesc p;
  ir::BlockDesc& b = p.mutable_global_block();
  const Shape shape({4, 8});
  for (const char* v : {"x", "a", "c", "d"}) program_test::AddVar(b, program_test::Var(v, shape));
  b.AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("mul", {{"X", {"a"}}, {"Y", {"x"}}}, {{"Out", {"c"}}}));
  b.AppendOp(Op("relu", {{"X", {"c"}}}, {{"Out", {"d"}}}));
  Executor executor(&context->registry(), context->vm());
  Scope scope;
  const std::string path = ::testing::TempDir() + "/compiled_program_trace.json";
  std::remove(path.c_str());
  RunOptions run_options;
  run_options.trace_path = path;
  absl::StatusOr<RunResult> result =
      executor.Run(p, {{"x", program_test::Filled(shape, 0.5f)}}, {"d"}, &scope, run_options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(executor.LastLowering()->compiled_subgraphs, 1);
  EXPECT_EQ(executor.LastLowering()->fused_ops, 3);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  EXPECT_NE(json.find("\"name\":\"fused[exp+mul+relu]\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"name\":\"exp\""), std::string::npos) << json;
  const std::vector<float> d = result->fetches[0].ToVector<float>();
  const float e = std::exp(0.5f) * 0.5f;
  for (float v : d) EXPECT_NEAR(v, e, 1e-6f);
}

// A path that leaves a group through an op that precedes the group being extended: op 4
// must not join {2}, or contracting {2, 4} and {0, 3} closes a cycle through the reduction,
// and the ops on it would not run (c and d, persistable, would keep the startup's -7).
TEST(CompiledProgramTest, PathsThroughEarlierGroupsPreventFusion) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  using program_test::Op;
  using program_test::Var;
  ir::ProgramDesc startup, main;
  ir::BlockDesc& b = main.mutable_global_block();
  ir::BlockDesc& s = startup.mutable_global_block();
  for (const auto& [name, dims] : std::vector<std::pair<std::string, Shape>>{{"x", Shape({2, 3})},
                                                                             {"y", Shape({3})},
                                                                             {"a", Shape({2, 3})},
                                                                             {"h", Shape({3})},
                                                                             {"bv", Shape({3})}}) {
    program_test::AddVar(b, Var(name, dims));
  }
  for (ir::BlockDesc* block : {&b, &s}) {
    program_test::AddVar(*block, Var("c", Shape({2, 3}), true));
    program_test::AddVar(*block, Var("d", Shape({3}), true));
  }
  s.AppendOp(Op("fill_constant", {}, {{"Out", {"c"}}}, program_test::Fill(Shape({2, 3}), -7)));
  s.AppendOp(Op("fill_constant", {}, {{"Out", {"d"}}}, program_test::Fill(Shape({3}), -7)));
  b.AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"a"}}}));
  b.AppendOp(Op("reduce_sum", {{"X", {"a"}}}, {{"Out", {"h"}}},
                vm::AttrMap().Set("axes", std::vector<int64_t>{0}).Set("keepdim", int64_t{0})));
  b.AppendOp(Op("exp", {{"X", {"y"}}}, {{"Out", {"bv"}}}));
  b.AppendOp(Op("add", {{"X", {"a"}}, {"Y", {"bv"}}}, {{"Out", {"c"}}}));
  b.AppendOp(Op("add", {{"X", {"h"}}, {"Y", {"bv"}}}, {{"Out", {"d"}}}));
  const Feeds feeds = {
      {"x", HostTensor::FromVector(std::vector<float>{0, 1, 2, 0, 1, 2}, Shape({2, 3}))},
      {"y", HostTensor::FromVector(std::vector<float>{0, 0.5f, 1}, Shape({3}))}};
  std::vector<HostTensor> results[2];
  for (int compiled = 0; compiled < 2; ++compiled) {
    ExecutorOptions options;
    options.interpreter.compile_subgraphs = compiled == 1;
    Executor executor(&context->registry(), context->vm(), options);
    Scope scope;
    ASSERT_TRUE(executor.Run(startup, {}, {}, &scope).ok());
    absl::StatusOr<RunResult> result = executor.Run(main, feeds, {"c", "d"}, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    results[compiled] = result->fetches;
    if (compiled == 1) EXPECT_EQ(executor.LastLowering()->compiled_subgraphs, 1);
  }
  for (int f = 0; f < 2; ++f) {
    EXPECT_TRUE(compiled_test::SameValues(results[0][f], results[1][f])) << f;
    for (float v : results[1][f].ToVector<float>()) EXPECT_GT(v, 0.0f);
  }
}

// The cuda back end compiles the kernels of these programs to PTX with NVRTC, no GPU needed
// (all 10^3 programs' kernels: framework_long_tests).
TEST(CompiledProgramTest, KernelsOfRandomProgramsCompileToPtx) {
  if (absl::IsUnimplemented(ep::CompileToPtx("", "probe.cu").status())) {
    GTEST_SKIP() << "built without CUDA";
  }
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  const std::vector<compiler::Subgraph> graphs =
      compiled_test::SubgraphsOfRandomPrograms(*context, 1, 10);
  ASSERT_GT(graphs.size(), 10u);
  for (const compiler::Subgraph& g : graphs) {
    absl::StatusOr<compiler::CudaSource> source = compiler::GenerateCudaSource(g);
    ASSERT_TRUE(source.ok()) << source.status();
    absl::StatusOr<std::string> ptx = ep::CompileToPtx(source->source, source->entry + ".cu");
    ASSERT_TRUE(ptx.ok()) << g.ToText() << ": " << ptx.status();
    EXPECT_NE(ptx->find(".entry " + source->entry), std::string::npos);
  }
}

}  // namespace
}  // namespace sluice::framework::compiled_program_test
