// Control flow through the interpreter (framework/interpreter/control_flow/): programs with
// cond and while, built with fn::Cond / fn::WhileLoop, give the reference runner's bytes on
// cpu and on sim (with jitter), each with one and two compute streams, with the GC plan on
// and off, under the sync checker, for several runs of one lowered graph (zero, one and
// many iterations; a cond in a loop; a loop in a loop). Exceeding max_iterations is an
// error naming the loop, and the next run works; an op failing inside a body names its
// block and the iteration.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/status.h"
#include "framework/builder/control_flow.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "framework/ir/control_flow.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/cpu/host_kernel.h"
#include "ops/op_schema.h"
#include "ops/standard_ops.h"
#include "tests/framework/control_flow_programs.h"
#include "tests/framework/program_reference_runner.h"
#include "vm/sync_checker.h"

namespace sluice::framework::interpreter_control_flow_test {
namespace {

using control_flow_programs::LoopWithCond;
using control_flow_programs::Nested;
using ::testing::HasSubstr;

// test_fail_from_3: Out = X for an f32 scalar X < 3; fails ("boom at 3") from 3 on. Host
// work: on sim it fails on the stream's thread, after the control step moved on.
class FailFromThree final : public ops::HostKernel {
 public:
  FailFromThree() : HostKernel("test_fail_from_3") {}

 protected:
  absl::StatusOr<ops::HostWork> Prepare(const ops::HostArgs& args) const override {
    const float* x = args.inputs[0].as<float>();
    float* out = args.outputs[0].as<float>();
    return ops::HostWork([x, out]() -> absl::Status {
      if (*x >= 3) return absl::InternalError(absl::StrCat("boom at ", *x));
      *out = *x;
      return absl::OkStatus();
    });
  }
};

// test_count: Out = X (f32), counting the runs of its work (skipped ones do not count).
std::atomic<int> count_runs{0};
class CountRuns final : public ops::HostKernel {
 public:
  CountRuns() : HostKernel("test_count") {}

 protected:
  absl::StatusOr<ops::HostWork> Prepare(const ops::HostArgs& args) const override {
    const float* x = args.inputs[0].as<float>();
    float* out = args.outputs[0].as<float>();
    const int64_t n = args.inputs[0].size;
    return ops::HostWork([x, out, n]() -> absl::Status {
      std::copy(x, x + n, out);
      count_runs.fetch_add(1);
      return absl::OkStatus();
    });
  }
};

absl::Status RegisterFailFromThree(ops::OpRegistry& registry) {
  SLUICE_RETURN_IF_ERROR(registry.RegisterSchema(
      ops::OpSchema("test_fail_from_3")
          .Input("X")
          .Output("Out")
          .Infer([](const ops::InferContext& ctx) {
            return absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>>(
                std::vector<std::vector<ops::TensorMeta>>{{ctx.input(0)}});
          })));
  SLUICE_RETURN_IF_ERROR(registry.RegisterSchema(
      ops::OpSchema("test_count").Input("X").Output("Out").Infer([](const ops::InferContext& ctx) {
        return absl::StatusOr<std::vector<std::vector<ops::TensorMeta>>>(
            std::vector<std::vector<ops::TensorMeta>>{{ctx.input(0)}});
      })));
  for (DeviceType device : {DeviceType::kCpu, DeviceType::kSim}) {
    SLUICE_RETURN_IF_ERROR(registry.RegisterKernel("test_fail_from_3", device, DataType::kF32,
                                                   std::make_unique<FailFromThree>()));
    SLUICE_RETURN_IF_ERROR(registry.RegisterKernel("test_count", device, DataType::kF32,
                                                   std::make_unique<CountRuns>()));
  }
  return absl::OkStatus();
}

class InterpreterControlFlowTest : public ::testing::Test {
 protected:
  InterpreterControlFlowTest() {
    eager::ContextOptions options;
    options.runtime.num_sim_devices = 1;
    options.runtime.sim.max_jitter_us = 20;
    options.runtime.sim.seed = 21;
    options.runtime.enable_cuda = false;
    options.vm.check_sync = true;
    context_.emplace(eager::Context::Create(options).value());
    SLUICE_CHECK(ops::RegisterStandardOps(&registry_).ok());
  }

  static constexpr Device kSim{DeviceType::kSim, 0};

  // Runs `program` once per feed set through an executor with `options`; the fetches of
  // every run, in order.
  std::vector<std::vector<uint8_t>> RunAll(const ir::ProgramDesc& program,
                                           const std::vector<Feeds>& runs,
                                           const std::vector<std::string>& fetches,
                                           const InterpreterOptions& options) {
    ExecutorOptions executor_options;
    executor_options.interpreter = options;
    Executor executor(&context_->registry(), context_->vm(), executor_options);
    Scope scope;
    std::vector<std::vector<uint8_t>> fetched;
    for (const Feeds& feeds : runs) {
      absl::StatusOr<RunResult> result = executor.Run(program, feeds, fetches, &scope);
      EXPECT_TRUE(result.ok()) << result.status();
      if (!result.ok()) return fetched;
      for (const HostTensor& t : result->fetches) fetched.push_back(t.bytes);
    }
    return fetched;
  }

  // The same runs through the reference runner.
  std::vector<std::vector<uint8_t>> Reference(const ir::ProgramDesc& program,
                                              const std::vector<Feeds>& runs,
                                              const std::vector<std::string>& fetches) {
    return reference::FetchesOfRuns(*context_, program, runs, fetches);
  }

  // Every option set gives the reference's bytes, and the checker saw no violation.
  void ExpectMatchesReference(const ir::ProgramDesc& program, const std::vector<Feeds>& runs,
                              const std::vector<std::string>& fetches) {
    const std::vector<std::vector<uint8_t>> want = Reference(program, runs, fetches);
    ASSERT_EQ(want.size(), runs.size() * fetches.size());
    for (Device device : {Device(DeviceType::kCpu, 0), kSim}) {
      for (int streams : {1, 2}) {
        for (bool release : {true, false}) {
          InterpreterOptions options;
          options.device = device;
          options.compute_streams = streams;
          options.release_temporaries = release;
          EXPECT_EQ(RunAll(program, runs, fetches, options), want)
              << device.ToString() << ", " << streams << " streams, release " << release;
        }
      }
    }
    EXPECT_EQ(context_->vm()->sync_checker()->violation_count(), 0);
  }

  // LoopWithCond built into `main` over feeds i, n, x [3] and w [3]; its fetch names.
  static std::vector<std::string> BuildLoopWithCond(Program& main, Program& startup) {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var x = Data("x", Shape({3})).value();
    const Var w = Data("w", Shape({3})).value();
    absl::StatusOr<std::vector<Value>> out = LoopWithCond(i, n, x, w);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::string> fetches;
    if (out.ok()) {
      for (const Value& v : *out) fetches.push_back(v.var().name());
    }
    return fetches;
  }

  static HostTensor Scalar(float v) {
    return HostTensor::FromVector(std::vector<float>{v}, Shape());
  }

  ops::OpRegistry registry_;
  std::optional<eager::Context> context_;
};

TEST_F(InterpreterControlFlowTest, LoopWithACondMatchesTheReference) {
  Program main(&registry_), startup(&registry_);
  const std::vector<std::string> fetches = BuildLoopWithCond(main, startup);
  ASSERT_EQ(fetches.size(), 2u);
  std::vector<Feeds> runs;
  // n = 0 (no iteration), 1, 9: every run reuses the one lowered graph.
  for (float n : {0.0f, 1.0f, 9.0f, 4.0f}) {
    runs.push_back(
        {{"i", Scalar(0)},
         {"n", Scalar(n)},
         {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
         {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}});
  }
  ExpectMatchesReference(main.desc(), runs, fetches);
}

// parallel_iterations is accepted and does not change results: 1 and 4 give the same bytes
// (cpu and sim, one and two streams, under the checker). Loops run one iteration at a time
// today (docs/design.md, "Parallel iterations"); this guards the results once they do not.
TEST_F(InterpreterControlFlowTest, ParallelIterationsOneAndFourGiveTheSameResults) {
  std::vector<std::vector<std::vector<uint8_t>>> results;
  for (int64_t parallel : {1, 4}) {
    Program main(&registry_), startup(&registry_);
    std::vector<std::string> fetches;
    {
      ProgramGuard guard(main, startup);
      const Var i = Data("i", Shape()).value();
      const Var n = Data("n", Shape()).value();
      const Var c = Data("c", Shape({64})).value();
      const Var acc = Data("acc", Shape({64})).value();
      fn::WhileOptions options;
      options.parallel_iterations = parallel;
      absl::StatusOr<std::vector<Value>> out =
          fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                        [&](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                          SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
                          SLUICE_ASSIGN_OR_RETURN(Value t, fn::Mul(c, vars[0]));
                          SLUICE_ASSIGN_OR_RETURN(t, fn::Tanh(t));
                          SLUICE_ASSIGN_OR_RETURN(Value next_acc, fn::Add(vars[1], t));
                          return std::vector<Value>{next_i, next_acc};
                        },
                        {i, acc}, options);
      ASSERT_TRUE(out.ok()) << out.status();
      fetches.push_back((*out)[1].var().name());
    }
    std::vector<float> ramp(64);
    for (int k = 0; k < 64; ++k) ramp[static_cast<size_t>(k)] = 0.01f * static_cast<float>(k - 32);
    const std::vector<Feeds> runs = {{{"i", Scalar(0)},
                                      {"n", Scalar(9)},
                                      {"c", HostTensor::FromVector(ramp, Shape({64}))},
                                      {"acc", HostTensor::FromVector(ramp, Shape({64}))}}};
    ExpectMatchesReference(main.desc(), runs, fetches);
    results.push_back(Reference(main.desc(), runs, fetches));
  }
  EXPECT_EQ(results[0], results[1]);
}

// A "stream" attribute on a control-flow op pins its control step like any op's, and a bad
// one is refused naming the op.
TEST_F(InterpreterControlFlowTest, StreamAttributePinsTheControlStep) {
  Program main(&registry_), startup(&registry_);
  const std::vector<std::string> fetches = BuildLoopWithCond(main, startup);
  ir::ProgramDesc program = main.desc();
  ir::OpDesc* loop = nullptr;
  for (ir::OpDesc& op : program.mutable_global_block().mutable_ops()) {
    if (op.type == ir::kWhileOp) loop = &op;
  }
  ASSERT_NE(loop, nullptr);
  const Feeds feeds = {
      {"i", Scalar(0)},
      {"n", Scalar(4)},
      {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
      {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}};
  Executor executor(&context_->registry(), context_->vm(), ExecutorOptions());
  Scope scope;
  loop->attrs.Set(std::string(ir::kStreamAttr), std::string("compute:1"));
  ASSERT_TRUE(executor.Run(program, feeds, fetches, &scope).ok());
  EXPECT_EQ(executor.LastLowering()->streams, 2);  // compute:0, and the loop's compute:1
  loop->attrs.Set(std::string(ir::kStreamAttr), std::string("sideways"));
  const absl::StatusOr<RunResult> bad = executor.Run(program, feeds, fetches, &scope);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'while': bad stream attribute"));
}

// A hand-written program need not list what its sub-blocks capture: the interpreter finds
// the outer reads itself (here `half`, made before the loop on whichever stream the
// schedule picks), and the checker verifies the loop is ordered after them.
TEST_F(InterpreterControlFlowTest, UnlistedCapturesAreFoundAndOrdered) {
  Program main(&registry_), startup(&registry_);
  const std::vector<std::string> fetches = BuildLoopWithCond(main, startup);
  ASSERT_EQ(fetches.size(), 2u);
  ir::ProgramDesc program = main.desc();
  int stripped = 0;
  for (int b = 0; b < program.num_blocks(); ++b) {
    for (ir::OpDesc& op : program.mutable_block(b).mutable_ops()) {
      if (!ir::IsControlFlowOp(op)) continue;
      const size_t before = op.inputs.size();
      std::erase_if(op.inputs, [](const auto& slot) { return slot.first == ir::kCapturedSlot; });
      stripped += static_cast<int>(before - op.inputs.size());
    }
  }
  ASSERT_EQ(stripped, 2);  // the loop's and the cond's
  ASSERT_TRUE(program.Validate().ok()) << program.Validate();
  const std::vector<Feeds> runs = {
      {{"i", Scalar(0)},
       {"n", Scalar(6)},
       {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
       {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}}};
  ExpectMatchesReference(program, runs, fetches);
}

// A temporary released just before the loop (t) has the shape of the loop's outputs: the
// GC plan hands its storage to the loop's first write, and the control step must write
// where the rest of the graph then reads.
TEST_F(InterpreterControlFlowTest, StorageHandedToALoopOutput) {
  Program main(&registry_), startup(&registry_);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var x = Data("x", Shape({3})).value();
    const Var w = Data("w", Shape({3})).value();
    const Value t = fn::Scale(x, 2.0).value();
    const Value u = fn::Relu(t).value();
    absl::StatusOr<std::vector<Value>> out = LoopWithCond(i, n, u, w);
    ASSERT_TRUE(out.ok()) << out.status();
    for (const Value& v : *out) fetches.push_back(v.var().name());
  }
  const std::vector<Feeds> runs = {
      {{"i", Scalar(0)},
       {"n", Scalar(5)},
       {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
       {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}}};
  ExpectMatchesReference(main.desc(), runs, fetches);
  // The hand-off this test is about happens (in some placement of the ops).
  int64_t handoffs = 0;
  for (int streams : {1, 2}) {
    ExecutorOptions executor_options;
    executor_options.interpreter.compute_streams = streams;
    executor_options.interpreter.compile_subgraphs = false;  // the hand-off is between ops
    // In place, relu would take t's storage at t's death, leaving no release to hand off.
    executor_options.interpreter.inplace = false;
    Executor executor(&context_->registry(), context_->vm(), executor_options);
    Scope scope;
    ASSERT_TRUE(executor.Run(main.desc(), runs[0], fetches, &scope).ok());
    handoffs += executor.LastLowering().value().storage_handoffs;
  }
  EXPECT_GT(handoffs, 0);
}

// Sub-block ops go through block 0's checks: a temporary inside a branch declared with a
// shape its op does not make (nothing Validate can see: it is not yielded) is refused
// before anything runs, naming the block, the op and the variable.
TEST_F(InterpreterControlFlowTest, SubBlockOpsAreCheckedLikeBlockZerosOps) {
  Program main(&registry_), startup(&registry_);
  const std::vector<std::string> fetches = BuildLoopWithCond(main, startup);
  ir::ProgramDesc program = main.desc();
  std::string culprit;
  for (int b = 1; b < program.num_blocks() && culprit.empty(); ++b) {
    for (const ir::OpDesc& op : program.block(b).ops()) {
      if (op.type != "tanh") continue;
      culprit = op.Output("Out")[0];
      program.mutable_block(b).FindMutableVar(culprit)->shape = Shape({2});
      break;
    }
  }
  ASSERT_FALSE(culprit.empty());
  ASSERT_TRUE(program.Validate().ok()) << program.Validate();
  Executor executor(&context_->registry(), context_->vm(), ExecutorOptions());
  Scope scope;
  const absl::StatusOr<RunResult> result = executor.Run(
      program,
      {{"i", Scalar(0)},
       {"n", Scalar(6)},
       {"x", HostTensor::FromVector(std::vector<float>{0.5f, -1.0f, 2.0f}, Shape({3}))},
       {"w", HostTensor::FromVector(std::vector<float>{1.0f, 2.0f, -0.5f}, Shape({3}))}},
      fetches, &scope);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr(absl::StrCat("op #0 'tanh': output '", culprit, "' is declared f32 [2]")));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("block "));
}

TEST_F(InterpreterControlFlowTest, LoopInALoopMatchesTheReference) {
  Program main(&registry_), startup(&registry_);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var x = Data("x", Shape({2})).value();
    const Var b = Data("b", Shape({2})).value();
    absl::StatusOr<std::vector<Value>> out = Nested(i, i, x, b);
    ASSERT_TRUE(out.ok()) << out.status();
    fetches.push_back((*out)[1].var().name());
  }
  const std::vector<Feeds> runs = {
      {{"i", Scalar(0)},
       {"x", HostTensor::FromVector(std::vector<float>{0.25f, -0.5f}, Shape({2}))},
       {"b", HostTensor::FromVector(std::vector<float>{1.0f, 0.125f}, Shape({2}))}}};
  ExpectMatchesReference(main.desc(), runs, fetches);
  // And the closed form, so that a reference bug could not hide one here.
  InterpreterOptions options;
  const std::vector<std::vector<uint8_t>> got = RunAll(main.desc(), runs, fetches, options);
  ASSERT_EQ(got.size(), 1u);
  std::vector<float> values(2);
  std::memcpy(values.data(), got[0].data(), 8);
  EXPECT_EQ(values, (std::vector<float>{27 * 0.25f + 26 * 1.0f, 27 * -0.5f + 26 * 0.125f}));
}

TEST_F(InterpreterControlFlowTest, MaxIterationsIsAnErrorNamingTheLoop) {
  Program main(&registry_), startup(&registry_);
  std::string result;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    fn::WhileOptions options;
    options.max_iterations = 5;
    absl::StatusOr<std::vector<Value>> out =
        fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                      [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value next, fn::Increment(vars[0]));
                        return std::vector<Value>{next};
                      },
                      {i}, options);
    ASSERT_TRUE(out.ok()) << out.status();
    result = (*out)[0].var().name();
  }
  ExecutorOptions executor_options;
  Executor executor(&context_->registry(), context_->vm(), executor_options);
  Scope scope;
  absl::StatusOr<RunResult> bad =
      executor.Run(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(6)}}, {result}, &scope);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("block 0 op #0 'while': more than 5 iterations (max_iterations)"));
  // Five iterations are allowed, and the graph still works.
  absl::StatusOr<RunResult> good =
      executor.Run(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(5)}}, {result}, &scope);
  ASSERT_TRUE(good.ok()) << good.status();
  float value = 0;
  std::memcpy(&value, good->fetches[0].bytes.data(), 4);
  EXPECT_EQ(value, 5.0f);
}

// An op failing inside a loop body names its block and op and the iteration of every
// enclosing loop — on sim too, where the failure happens on the stream's thread after the
// control step has enqueued later work; what depends on the loop is skipped, and a run
// that stays below the failing value works on the same graph.
TEST_F(InterpreterControlFlowTest, FailingBodyOpNamesItsBlockAndIteration) {
  ASSERT_TRUE(RegisterFailFromThree(registry_).ok());
  Program main(&registry_), startup(&registry_);
  std::string result;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    // while (i < n) { j = 0; while (j < 2) j += 1; i = fail_from_3(i) + j - 1 }
    absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
        [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
        [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
          SLUICE_ASSIGN_OR_RETURN(Value zero, fn::FillConstant(Shape(), 0.0));
          SLUICE_ASSIGN_OR_RETURN(Value two, fn::FillConstant(Shape(), 2.0));
          SLUICE_ASSIGN_OR_RETURN(
              std::vector<Value> inner,
              fn::WhileLoop([&](const std::vector<Value>& v) { return fn::LessThan(v[0], two); },
                            [](const std::vector<Value>& v) -> absl::StatusOr<std::vector<Value>> {
                              SLUICE_ASSIGN_OR_RETURN(Value next, fn::Increment(v[0]));
                              return std::vector<Value>{next};
                            },
                            {zero}));
          SLUICE_ASSIGN_OR_RETURN(
              std::vector<std::vector<Var>> checked,
              AppendOp(*CurrentMainProgram(), "test_fail_from_3", {{vars[0].var()}}));
          SLUICE_ASSIGN_OR_RETURN(Value sum, fn::Add(checked[0][0], inner[0]));
          SLUICE_ASSIGN_OR_RETURN(Value next, fn::Scale(sum, 1.0, -1.0));
          return std::vector<Value>{next};
        },
        {i});
    ASSERT_TRUE(out.ok()) << out.status();
    // What reads the loop's result: skipped when the loop failed.
    absl::StatusOr<std::vector<std::vector<Var>>> counted =
        AppendOp(main, "test_count", {{(*out)[0].var()}});
    ASSERT_TRUE(counted.ok()) << counted.status();
    result = (*counted)[0][0].name();
  }
  for (Device device : {Device(DeviceType::kCpu, 0), kSim}) {
    ExecutorOptions executor_options;
    executor_options.interpreter.device = device;
    Executor executor(&registry_, context_->vm(), executor_options);
    Scope scope;
    const int counted_before = count_runs.load();
    absl::StatusOr<RunResult> bad =
        executor.Run(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(6)}}, {result}, &scope);
    ASSERT_FALSE(bad.ok()) << device.ToString();
    EXPECT_EQ(count_runs.load(), counted_before) << device.ToString() << ": ran on a failed loop";
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInternal) << bad.status();
    EXPECT_THAT(std::string(bad.status().message()),
                HasSubstr("op #3 'test_fail_from_3', iteration 3 of block 0 op #0 'while'"))
        << bad.status();
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("boom at 3")) << bad.status();
    absl::StatusOr<RunResult> good =
        executor.Run(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(3)}}, {result}, &scope);
    ASSERT_TRUE(good.ok()) << device.ToString() << ": " << good.status();
    float value = 0;
    std::memcpy(&value, good->fetches[0].bytes.data(), 4);
    EXPECT_EQ(value, 3.0f) << device.ToString();
    EXPECT_EQ(count_runs.load(), counted_before + 1) << device.ToString();
  }
}

// With the GC plan on, an iteration's temporaries share storage by live range: a body with
// a chain of six 16 KiB temporaries holds a few of them, not all six (as it does with the
// plan off, when each has a blob of its own). Same results either way.
TEST_F(InterpreterControlFlowTest, IterationTemporariesShareStorageByLiveRange) {
  Program main(&registry_), startup(&registry_);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var x = Data("x", Shape({4096})).value();
    absl::StatusOr<std::vector<Value>> out = fn::WhileLoop(
        [&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
        [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
          SLUICE_ASSIGN_OR_RETURN(Value next_i, fn::Increment(vars[0]));
          Value t = vars[1];
          for (int k = 0; k < 6; ++k) {
            SLUICE_ASSIGN_OR_RETURN(t, k % 2 == 0 ? fn::Scale(t, 0.5, 0.25) : fn::Tanh(t));
          }
          return std::vector<Value>{next_i, t};
        },
        {i, x});
    ASSERT_TRUE(out.ok()) << out.status();
    fetches.push_back((*out)[1].var().name());
  }
  const Feeds feeds = {
      {"i", Scalar(0)},
      {"n", Scalar(3)},
      {"x", HostTensor::FromVector(std::vector<float>(4096, 0.5f), Shape({4096}))}};
  std::vector<int64_t> peak;
  std::vector<std::vector<uint8_t>> bytes;
  for (bool release : {true, false}) {
    ExecutorOptions executor_options;
    executor_options.interpreter.release_temporaries = release;
    Executor executor(&context_->registry(), context_->vm(), executor_options);
    Scope scope;
    ASSERT_TRUE(executor.Run(main.desc(), feeds, fetches, &scope).ok());  // frames allocated
    absl::StatusOr<RunResult> result = executor.Run(main.desc(), feeds, fetches, &scope);
    ASSERT_TRUE(result.ok()) << result.status();
    peak.push_back(result->stats.peak_bytes);
    bytes.push_back(result->fetches[0].bytes);
  }
  EXPECT_EQ(bytes[0], bytes[1]);
  constexpr int64_t kTemporary = 4096 * 4;
  EXPECT_LE(peak[0] + 3 * kTemporary, peak[1]) << "on " << peak[0] << ", off " << peak[1];
}

// The Chrome trace of a run has one "iteration K" slice per iteration of the loop, each
// naming the loop, on cpu and sim, besides the ops' slices.
TEST_F(InterpreterControlFlowTest, TraceShowsEveryIteration) {
  Program main(&registry_), startup(&registry_);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var x = Data("x", Shape({4})).value();
    absl::StatusOr<std::vector<Value>> out = control_flow_programs::CountingLoop(i, n, x);
    ASSERT_TRUE(out.ok()) << out.status();
    fetches.push_back((*out)[1].var().name());
  }
  for (Device device : {Device(DeviceType::kCpu, 0), kSim}) {
    ExecutorOptions executor_options;
    executor_options.interpreter.device = device;
    Executor executor(&context_->registry(), context_->vm(), executor_options);
    Scope scope;
    const std::string path = ::testing::TempDir() + "/control_flow_trace.json";
    std::remove(path.c_str());
    RunOptions run_options;
    run_options.trace_path = path;
    absl::StatusOr<RunResult> result =
        executor.Run(main.desc(),
                     {{"i", Scalar(0)},
                      {"n", Scalar(7)},
                      {"x", HostTensor::FromVector(std::vector<float>{1, 2, 3, 4}, Shape({4}))}},
                     fetches, &scope, run_options);
    ASSERT_TRUE(result.ok()) << result.status();
    std::ifstream file(path);
    const std::string json((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    auto count = [&json](const std::string& needle) {
      int n = 0;
      for (size_t at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) {
        ++n;
      }
      return n;
    };
    EXPECT_EQ(count("\"cat\":\"iteration\""), 7) << device.ToString();
    for (int k = 0; k < 7; ++k) {
      EXPECT_EQ(count(absl::StrCat("{\"name\":\"iteration ", k, "\"")), 1) << k;
    }
    EXPECT_EQ(count("\"loop\":\"block 0 op #0 'while'\""), 7) << device.ToString();
    // Every step of every iteration is a slice too: 7 x (less_than, increment, scale; the
    // yields are written in place, no copies), the last check, the entry and exit copies.
    EXPECT_GE(count("\"cat\":\"op\""), 7 * 3 + 1) << device.ToString();
  }
}

// Cancel stops a long loop before its next iteration; the scope stays usable and the next
// run of the same graph completes. (Without the control step's check before each
// iteration the cancelled run never ends: cancelled steps are skipped, so the condition
// is never recomputed. A run with the check removed hangs here.)
TEST_F(InterpreterControlFlowTest, CancelStopsALoopAndTheNextRunWorks) {
  Program main(&registry_), startup(&registry_);
  std::string result;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    absl::StatusOr<std::vector<Value>> out =
        fn::WhileLoop([&](const std::vector<Value>& vars) { return fn::LessThan(vars[0], n); },
                      [](const std::vector<Value>& vars) -> absl::StatusOr<std::vector<Value>> {
                        SLUICE_ASSIGN_OR_RETURN(Value next, fn::Increment(vars[0]));
                        return std::vector<Value>{next};
                      },
                      {i});
    ASSERT_TRUE(out.ok()) << out.status();
    result = (*out)[0].var().name();
  }
  Executor executor(&context_->registry(), context_->vm(), ExecutorOptions());
  Scope scope;
  absl::StatusOr<std::shared_ptr<RunHandle>> handle =
      executor.RunAsync(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(2e7f)}}, {result}, &scope);
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::SleepFor(absl::Milliseconds(20));
  (*handle)->Cancel();
  const absl::StatusOr<RunResult>& cancelled = (*handle)->Wait();
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  absl::StatusOr<RunResult> next =
      executor.Run(main.desc(), {{"i", Scalar(0)}, {"n", Scalar(3)}}, {result}, &scope);
  ASSERT_TRUE(next.ok()) << next.status();
  float value = 0;
  std::memcpy(&value, next->fetches[0].bytes.data(), 4);
  EXPECT_EQ(value, 3.0f);
}

}  // namespace
}  // namespace sluice::framework::interpreter_control_flow_test
