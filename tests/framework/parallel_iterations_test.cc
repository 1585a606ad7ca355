// Overlapping iterations (parallel_iterations > 1; framework/interpreter/control_flow/
// loop_pipeline.h) through the interpreter, under the sync checker:
//  - random loop bodies (fixed seeds) give the reference runner's bytes with 1, 2 and 4
//    iterations in flight, on one, two and three cpu streams, GC plan on and off, over
//    several runs of one lowered graph; and the loops that can overlap are lowered so;
//  - iterations do overlap, and never more than parallel_iterations at once;
//  - a failing op in an overlapped stage names its iteration and poisons what follows;
//    max_iterations, a poisoned loop input (the control step skipped: the helpers must not
//    wait for it), and a cancel end the run without a hang, and the next run works.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/cpu/host_kernel.h"
#include "ops/op_schema.h"
#include "ops/standard_ops.h"
#include "tests/framework/program_reference_runner.h"
#include "vm/sync_checker.h"

namespace sluice::framework::parallel_iterations_test {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSize = 16;

// test_busy: Out = X (f32), holding the op for 3 ms and counting how many run at once.
std::atomic<int> busy_now{0};
std::atomic<int> busy_most{0};
class Busy final : public ops::HostKernel {
 public:
  Busy() : HostKernel("test_busy") {}

 protected:
  absl::StatusOr<ops::HostWork> Prepare(const ops::HostArgs& args) const override {
    const float* x = args.inputs[0].as<float>();
    float* out = args.outputs[0].as<float>();
    const int64_t n = args.inputs[0].size;
    return ops::HostWork([x, out, n]() -> absl::Status {
      const int now = busy_now.fetch_add(1) + 1;
      int most = busy_most.load();
      while (now > most && !busy_most.compare_exchange_weak(most, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      std::copy(x, x + n, out);
      busy_now.fetch_sub(1);
      return absl::OkStatus();
    });
  }
};

// test_fail_at_3: Out = X for an f32 tensor whose first element is below 3; fails
// ("boom at 3") otherwise.
class FailAtThree final : public ops::HostKernel {
 public:
  FailAtThree() : HostKernel("test_fail_at_3") {}

 protected:
  absl::StatusOr<ops::HostWork> Prepare(const ops::HostArgs& args) const override {
    const float* x = args.inputs[0].as<float>();
    float* out = args.outputs[0].as<float>();
    const int64_t n = args.inputs[0].size;
    return ops::HostWork([x, out, n]() -> absl::Status {
      if (x[0] >= 3) return absl::InternalError(absl::StrCat("boom at ", x[0]));
      std::copy(x, x + n, out);
      return absl::OkStatus();
    });
  }
};

absl::Status RegisterTestOps(ops::OpRegistry& registry) {
  for (const char* name : {"test_busy", "test_fail_at_3"}) {
    SLUICE_RETURN_IF_ERROR(registry.RegisterSchema(
        ops::OpSchema(name).Input("X").Output("Out").Infer([](const ops::InferContext& ctx) {
          return absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>>(
              std::vector<std::vector<ops::TensorMeta>>{{ctx.input(0)}});
        })));
  }
  SLUICE_RETURN_IF_ERROR(registry.RegisterKernel("test_busy", DeviceType::kCpu, DataType::kF32,
                                                 std::make_unique<Busy>()));
  return registry.RegisterKernel("test_fail_at_3", DeviceType::kCpu, DataType::kF32,
                                 std::make_unique<FailAtThree>());
}

HostTensor Scalar(float v) { return HostTensor::FromVector(std::vector<float>{v}, Shape()); }

HostTensor Ramp(float from, float step) {
  std::vector<float> values(kSize);
  for (int64_t k = 0; k < kSize; ++k) values[static_cast<size_t>(k)] = from + step * k;
  return HostTensor::FromVector(values, Shape({kSize}));
}

// Replaces the value fed as `name`.
void SetFeed(Feeds& feeds, const std::string& name, HostTensor value) {
  for (auto& [fed, tensor] : feeds) {
    if (fed == name) tensor = std::move(value);
  }
}

float FirstFloat(const HostTensor& t) {
  float value = 0;
  std::memcpy(&value, t.bytes.data(), sizeof(float));
  return value;
}

// A random loop over loop variables i (a scalar counter, the condition i < n) and K = 1..3
// [16] f32 tensors, with captures c0, c1. The body draws 2..6 ops (tanh, scale, add, mul)
// over what is visible: the captures, i, the current tensors and earlier results; each
// tensor's next value is an op result, a capture, or another current tensor (a swap).
// Whether an op lands in the independent or the carried stage follows from what it reads.
struct RandomLoop {
  int vars = 1;
  std::vector<std::string> fetches;
};

absl::StatusOr<RandomLoop> BuildRandomLoop(uint64_t seed, int64_t parallel, Program& main,
                                           Program& startup) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  RandomLoop loop;
  loop.vars = 1 + uniform(3);
  ProgramGuard guard(main, startup);
  SLUICE_ASSIGN_OR_RETURN(const Var i, Data("i", Shape()));
  SLUICE_ASSIGN_OR_RETURN(const Var n, Data("n", Shape()));
  SLUICE_ASSIGN_OR_RETURN(const Var c0, Data("c0", Shape({kSize})));
  SLUICE_ASSIGN_OR_RETURN(const Var c1, Data("c1", Shape({kSize})));
  std::vector<Value> init = {i};
  for (int v = 0; v < loop.vars; ++v) {
    SLUICE_ASSIGN_OR_RETURN(const Var x, Data(absl::StrCat("x", v), Shape({kSize})));
    init.push_back(x);
  }
  const int ops = 2 + uniform(5);
  std::vector<int> choices;  // drawn once, so that every build of a seed is the same body
  for (int k = 0; k < 4 * ops + 2 * loop.vars; ++k) choices.push_back(uniform(1000));
  fn::WhileOptions options;
  options.parallel_iterations = parallel;
  options.max_iterations = 64;
  SLUICE_ASSIGN_OR_RETURN(
      std::vector<Value> out,
      fn::WhileLoop(
          [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
          [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
            size_t next_choice = 0;
            auto pick = [&](int n_options) { return choices[next_choice++] % n_options; };
            std::vector<Value> pool = {c0, c1};
            for (size_t v = 1; v < vars.size(); ++v) pool.push_back(vars[v]);
            SLUICE_ASSIGN_OR_RETURN(Value scaled_i, fn::Mul(c0, vars[0]));  // reads i only
            pool.push_back(scaled_i);
            std::vector<Value> results;
            for (int k = 0; k < ops; ++k) {
              const Value a = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
              const Value b = pool[static_cast<size_t>(pick(static_cast<int>(pool.size())))];
              absl::StatusOr<Value> r = absl::InternalError("no op drawn");
              switch (pick(4)) {
                case 0:
                  r = fn::Tanh(a);
                  break;
                case 1:
                  r = fn::Scale(a, 0.5, 0.125);
                  break;
                case 2: {
                  SLUICE_ASSIGN_OR_RETURN(Value s, fn::Add(a, b));
                  r = fn::Scale(s, 0.5);
                  break;
                }
                default: {
                  SLUICE_ASSIGN_OR_RETURN(Value t, fn::Tanh(b));
                  r = fn::Mul(a, t);
                  break;
                }
              }
              SLUICE_RETURN_IF_ERROR(r.status());
              pool.push_back(*r);
              results.push_back(*r);
            }
            SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
            std::vector<Value> next = {next_i};
            for (size_t v = 1; v < vars.size(); ++v) {
              switch (pick(4)) {
                case 0:  // another current tensor (or itself): a swap or a pass-through
                  next.push_back(vars[1 + static_cast<size_t>(pick(loop.vars))]);
                  break;
                case 1:
                  next.push_back(pick(2) == 0 ? Value(c0) : Value(c1));
                  break;
                default:
                  next.push_back(
                      results[static_cast<size_t>(pick(static_cast<int>(results.size())))]);
                  break;
              }
            }
            return next;
          },
          init, options));
  for (size_t v = 0; v < out.size(); ++v) loop.fetches.push_back(out[v].var().name());
  return loop;
}

class ParallelIterationsTest : public ::testing::Test {
 protected:
  ParallelIterationsTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 0;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
    SLUICE_CHECK(RegisterTestOps(registry_).ok());
  }

  std::vector<Feeds> RandomFeeds(int vars) const {
    std::vector<Feeds> runs;
    // 0, 1 and many iterations, on one lowered graph.
    for (float n : {7.0f, 0.0f, 1.0f, 12.0f}) {
      Feeds feeds = {{"i", Scalar(0)},
                     {"n", Scalar(n)},
                     {"c0", Ramp(-0.5f, 0.0625f)},
                     {"c1", Ramp(0.75f, -0.03125f)}};
      for (int v = 0; v < vars; ++v) {
        feeds.push_back({absl::StrCat("x", v), Ramp(0.1f * static_cast<float>(v), 0.01f)});
      }
      runs.push_back(std::move(feeds));
    }
    return runs;
  }

  std::vector<std::vector<uint8_t>> Reference(const ir::ProgramDesc& program,
                                              const std::vector<Feeds>& runs,
                                              const std::vector<std::string>& fetches) {
    return reference::FetchesOfRuns(*context_, program, runs, fetches);
  }

  // Every run's fetches through one prepared graph; `pipelined` gets the lowering's count.
  std::vector<std::vector<uint8_t>> RunAll(const ir::ProgramDesc& program,
                                           const std::vector<Feeds>& runs,
                                           const std::vector<std::string>& fetches,
                                           const InterpreterOptions& options, int64_t* pipelined) {
    ExecutorOptions executor_options;
    executor_options.interpreter = options;
    Executor executor(&registry_, context_->vm(), executor_options);
    Scope scope;
    std::vector<std::string> feed_names;
    for (const auto& [name, value] : runs[0]) feed_names.push_back(name);
    absl::StatusOr<PreparedRun> prepared = executor.Prepare(program, feed_names, fetches, &scope);
    EXPECT_TRUE(prepared.ok()) << prepared.status();
    std::vector<std::vector<uint8_t>> fetched;
    if (!prepared.ok()) return fetched;
    *pipelined = prepared->lowering().pipelined_loops;
    for (const Feeds& feeds : runs) {
      absl::StatusOr<RunResult> result = executor.Run(*prepared, feeds);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return fetched;
      for (const HostTensor& t : result->fetches) fetched.push_back(t.bytes);
    }
    return fetched;
  }

  int64_t violations() const { return context_->vm()->sync_checker()->violation_count(); }

  ops::OpRegistry registry_;
  std::optional<eager::Context> context_;
};

TEST_F(ParallelIterationsTest, RandomLoopsMatchTheReferenceWithAnyIterationsInFlight) {
  int pipelined_programs = 0;
  constexpr int kPrograms = 40;
  for (uint64_t seed = 1; seed <= kPrograms; ++seed) {
    for (int64_t parallel : {1, 2, 4}) {
      Program main(&registry_), startup(&registry_);
      absl::StatusOr<RandomLoop> loop = BuildRandomLoop(seed, parallel, main, startup);
      ASSERT_TRUE(loop.ok()) << loop.status();
      const std::vector<Feeds> runs = RandomFeeds(loop->vars);
      const std::vector<std::vector<uint8_t>> want = Reference(main.desc(), runs, loop->fetches);
      bool pipelined = false;
      for (int streams : {1, 2, 3}) {
        for (bool release : {true, false}) {
          InterpreterOptions options;
          options.compute_streams = streams;
          options.release_temporaries = release;
          int64_t loops = 0;
          EXPECT_EQ(RunAll(main.desc(), runs, loop->fetches, options, &loops), want)
              << "seed " << seed << ", parallel " << parallel << ", " << streams
              << " streams, release " << release;
          // Only a loop allowed more than one iteration in flight, with lanes to run them.
          if (parallel == 1 || streams == 1) {
            EXPECT_EQ(loops, 0) << "seed " << seed;
          }
          pipelined = pipelined || loops > 0;
        }
      }
      if (pipelined) ++pipelined_programs;
    }
  }
  EXPECT_EQ(violations(), 0);
  // Most random bodies have an op independent of the previous iteration (those without
  // one run sequentially): the overlapped path really ran.
  EXPECT_GE(pipelined_programs, kPrograms) << "of " << 2 * kPrograms;
}

// acc += busy(c * i) for 10 iterations, busy holding each op 3 ms: with three lanes and
// parallel_iterations 2, two iterations' busy ops run at once and never three; with
// parallel_iterations 1, one at a time.
TEST_F(ParallelIterationsTest, IterationsOverlapUpToParallelIterations) {
  for (int64_t parallel : {1, 2, 3}) {
    Program main(&registry_), startup(&registry_);
    std::string result;
    {
      ProgramGuard guard(main, startup);
      const Var i = Data("i", Shape()).value();
      const Var n = Data("n", Shape()).value();
      const Var c = Data("c", Shape({kSize})).value();
      const Var acc = Data("acc", Shape({kSize})).value();
      fn::WhileOptions options;
      options.parallel_iterations = parallel;
      absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
          [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
          [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
            SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
            SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(c, vars[0]));
            SLUICE_ASSIGN_OR_RETURN(std::vector<std::vector<Var>> busy,
                                    AppendOp(*CurrentMainProgram(), "test_busy", {{t.var()}}));
            SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], busy[0][0]));
            return std::vector<Value>{next_i, next_acc};
          },
          {i, acc}, options);
      ASSERT_TRUE(out.ok()) << out.status();
      result = (*out)[1].var().name();
    }
    ExecutorOptions executor_options;
    executor_options.interpreter.compute_streams = 3;
    Executor executor(&registry_, context_->vm(), executor_options);
    Scope scope;
    busy_most.store(0);
    absl::StatusOr<RunResult> ran = executor.Run(
        main.desc(), {{"i", Scalar(0)}, {"n", Scalar(10)}, {"c", Ramp(1, 0)}, {"acc", Ramp(0, 0)}},
        {result}, &scope);
    ASSERT_TRUE(ran.ok()) << ran.status();
    EXPECT_EQ(FirstFloat(ran->fetches[0]), 45.0f);  // 0 + 1 + ... + 9
    // The bound holds by construction; reaching it needs lane workers to start within
    // another's 3 ms op, which a loaded machine may not give for three, so the check
    // of overlap asks for two.
    EXPECT_LE(busy_most.load(), parallel) << "parallel_iterations " << parallel;
    EXPECT_GE(busy_most.load(), std::min<int64_t>(parallel, 2))
        << "parallel_iterations " << parallel;
  }
  EXPECT_EQ(violations(), 0);
}

// The benchmark's loop shape with two streams and a loop the driver alone decides: the
// counter and the condition form the driver stage, tanh(c * i) the independent one.
ir::ProgramDesc FailingLoop(ops::OpRegistry* registry, std::string* result,
                            std::optional<int64_t> max_iterations) {
  Program main(registry), startup(registry);
  ProgramGuard guard(main, startup);
  const Var i = Data("i", Shape()).value();
  const Var n = Data("n", Shape()).value();
  const Var c = Data("c", Shape({kSize})).value();
  const Var acc = Data("acc", Shape({kSize})).value();
  fn::WhileOptions options;
  options.parallel_iterations = 2;
  options.max_iterations = max_iterations;
  // acc += fail_at_3(c * i): the failing op is in the independent stage.
  std::vector<Value> out =
      fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                    [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                      SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(c, vars[0]));
                      SLUICE_ASSIGN_OR_RETURN(
                          std::vector<std::vector<Var>> checked,
                          AppendOp(*CurrentMainProgram(), "test_fail_at_3", {{t.var()}}));
                      SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], checked[0][0]));
                      return std::vector<Value>{next_i, next_acc};
                    },
                    {i, acc}, options)
          .value();
  *result = out[1].var().name();
  return main.desc();
}

TEST_F(ParallelIterationsTest, AFailingOverlappedOpNamesItsIterationAndTheNextRunWorks) {
  std::string result;
  const ir::ProgramDesc program = FailingLoop(&registry_, &result, std::nullopt);
  ExecutorOptions executor_options;
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&registry_, context_->vm(), executor_options);
  Scope scope;
  const Feeds bad = {{"i", Scalar(0)}, {"n", Scalar(6)}, {"c", Ramp(1, 0)}, {"acc", Ramp(0, 0)}};
  absl::StatusOr<PreparedRun> prepared =
      executor.Prepare(program, {"i", "n", "c", "acc"}, {result}, &scope);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->lowering().pipelined_loops, 1);
  absl::StatusOr<RunResult> failed = executor.Run(*prepared, bad);
  ASSERT_FALSE(failed.ok());
  // Iterations 3 and 4 may both be in flight, and either may fail first: the error names
  // the iteration that failed.
  const std::string message(failed.status().message());
  const bool third = absl::StrContains(message, "iteration 3 of block 0 op #0 'while'") &&
                     absl::StrContains(message, "boom at 3");
  const bool fourth = absl::StrContains(message, "iteration 4 of block 0 op #0 'while'") &&
                      absl::StrContains(message, "boom at 4");
  EXPECT_TRUE(third || fourth) << message;
  EXPECT_THAT(message, HasSubstr("'test_fail_at_3'"));
  Feeds good = bad;
  SetFeed(good, "n", Scalar(3));
  absl::StatusOr<RunResult> ran = executor.Run(*prepared, good);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(FirstFloat(ran->fetches[0]), 3.0f);  // 0 + 1 + 2
  EXPECT_EQ(violations(), 0);
}

TEST_F(ParallelIterationsTest, MaxIterationsEndsAnOverlappedLoop) {
  std::string result;
  const ir::ProgramDesc program = FailingLoop(&registry_, &result, 2);
  ExecutorOptions executor_options;
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&registry_, context_->vm(), executor_options);
  Scope scope;
  Feeds feeds = {{"i", Scalar(0)}, {"n", Scalar(3)}, {"c", Ramp(0, 0)}, {"acc", Ramp(0, 0)}};
  absl::StatusOr<RunResult> failed = executor.Run(program, feeds, {result}, &scope);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()),
              HasSubstr("block 0 op #0 'while': more than 2 iterations (max_iterations)"));
  SetFeed(feeds, "n", Scalar(2));
  absl::StatusOr<RunResult> ran = executor.Run(program, feeds, {result}, &scope);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(violations(), 0);
}

// A helper holds its lane's worker until the loop ends, so a lane gets one only when its
// later ops all wait for the loop anyway. Loop on compute:0; on compute:1 an op after the
// loop that does not read it (no helper there: pipelined_loops 0, the loop runs alone),
// or one that reads the loop's result (a helper: pipelined_loops 1). Same results.
TEST_F(ParallelIterationsTest, HelpersGoOnlyToLanesWithNothingElseToDo) {
  for (bool reads_loop : {false, true}) {
    Program main(&registry_), startup(&registry_);
    std::vector<std::string> fetches;
    {
      ProgramGuard guard(main, startup);
      const Var i = Data("i", Shape()).value();
      const Var n = Data("n", Shape()).value();
      const Var c = Data("c", Shape({kSize})).value();
      const Var acc = Data("acc", Shape({kSize})).value();
      fn::WhileOptions options;
      options.parallel_iterations = 2;
      std::vector<Value> out =
          fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                        [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                          SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                          SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(c, vars[0]));
                          SLUICE_ASSIGN_OR_RETURN(t, fn::Tanh(t));
                          SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], t));
                          return std::vector<Value>{next_i, next_acc};
                        },
                        {i, acc}, options)
              .value();
      const Value after = fn::Tanh(reads_loop ? out[1] : Value(c)).value();
      fetches = {out[1].var().name(), after.var().name()};
    }
    ir::ProgramDesc program = main.desc();
    for (ir::OpDesc& op : program.mutable_global_block().mutable_ops()) {
      op.attrs.Set(std::string(ir::kStreamAttr),
                   std::string(op.type == "tanh" ? "compute:1" : "compute:0"));
    }
    ExecutorOptions executor_options;
    executor_options.interpreter.compute_streams = 2;
    Executor executor(&registry_, context_->vm(), executor_options);
    Scope scope;
    absl::StatusOr<PreparedRun> prepared =
        executor.Prepare(program, {"i", "n", "c", "acc"}, fetches, &scope);
    ASSERT_TRUE(prepared.ok()) << prepared.status();
    EXPECT_EQ(prepared->lowering().lane_sequences, 2);
    EXPECT_EQ(prepared->lowering().pipelined_loops, reads_loop ? 1 : 0) << reads_loop;
    absl::StatusOr<RunResult> ran = executor.Run(
        *prepared, {{"i", Scalar(0)}, {"n", Scalar(5)}, {"c", Ramp(0.1f, 0)}, {"acc", Ramp(0, 0)}});
    ASSERT_TRUE(ran.ok()) << ran.status();
    float want = 0;
    for (int k = 0; k < 5; ++k) want += std::tanh(0.1f * static_cast<float>(k));
    EXPECT_FLOAT_EQ(FirstFloat(ran->fetches[0]), want);
  }
  EXPECT_EQ(violations(), 0);
}

// The loop reads a value whose producer failed: its control step is skipped, and the
// helper step in the other lane must learn that rather than wait for the run to open.
TEST_F(ParallelIterationsTest, ASkippedLoopDoesNotStrandItsHelpers) {
  std::string result;
  Program main(&registry_), startup(&registry_);
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var c = Data("c", Shape({kSize})).value();
    const Var acc = Data("acc", Shape({kSize})).value();
    std::vector<std::vector<Var>> checked =
        AppendOp(main, "test_fail_at_3", {{c}}).value();  // c[0] >= 3: fails
    const Var bad_c = checked[0][0];
    fn::WhileOptions options;
    options.parallel_iterations = 2;
    std::vector<Value> out =
        fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                      [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                        SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(bad_c, vars[0]));
                        SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], t));
                        return std::vector<Value>{next_i, next_acc};
                      },
                      {i, acc}, options)
            .value();
    result = out[1].var().name();
  }
  ExecutorOptions executor_options;
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&registry_, context_->vm(), executor_options);
  Scope scope;
  Feeds feeds = {{"i", Scalar(0)}, {"n", Scalar(4)}, {"c", Ramp(5, 0)}, {"acc", Ramp(0, 0)}};
  for (int run = 0; run < 3; ++run) {
    absl::StatusOr<RunResult> failed = executor.Run(main.desc(), feeds, {result}, &scope);
    ASSERT_FALSE(failed.ok());
    EXPECT_THAT(std::string(failed.status().message()), HasSubstr("boom at 5"));
  }
  SetFeed(feeds, "c", Ramp(1, 0));
  absl::StatusOr<RunResult> ran = executor.Run(main.desc(), feeds, {result}, &scope);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(FirstFloat(ran->fetches[0]), 6.0f);  // 0 + 1 + 2 + 3
}

// Cancel stops an overlapped loop within an iteration or so; the next run completes.
TEST_F(ParallelIterationsTest, CancelStopsAnOverlappedLoop) {
  std::string result;
  const ir::ProgramDesc program = FailingLoop(&registry_, &result, std::nullopt);
  ExecutorOptions executor_options;
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&registry_, context_->vm(), executor_options);
  Scope scope;
  // c = 0: fail_at_3 never fails; n large: the loop would run for minutes.
  Feeds feeds = {{"i", Scalar(0)}, {"n", Scalar(2e7f)}, {"c", Ramp(0, 0)}, {"acc", Ramp(0, 0)}};
  absl::StatusOr<std::shared_ptr<RunHandle>> handle =
      executor.RunAsync(program, feeds, {result}, &scope);
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::SleepFor(absl::Milliseconds(20));
  (*handle)->Cancel();
  const absl::StatusOr<RunResult>& cancelled = (*handle)->Wait();
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  SetFeed(feeds, "n", Scalar(3));
  SetFeed(feeds, "c", Ramp(1, 0));
  absl::StatusOr<RunResult> next = executor.Run(program, feeds, {result}, &scope);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(FirstFloat(next->fetches[0]), 3.0f);
  EXPECT_EQ(violations(), 0);
}

}  // namespace
}  // namespace sluice::framework::parallel_iterations_test
