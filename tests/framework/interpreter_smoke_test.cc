// End-to-end checks of the interpreter and executor on a hand-written program: the same
// numbers on cpu, on sim, and with ops spread over two sim compute streams under the sync
// checker; feeds and fetches round trip; the cache is used; bad input is refused before
// anything runs.
#include <cmath>

#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/interpreter.h"
#include "framework/ir/program_desc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::interpreter_smoke_test {
namespace {

using ::testing::HasSubstr;

using program_test::Op;
using program_test::Var;

// startup: w = 0.5; main: y = relu(x @ w) + x ; a second branch z = exp(x) * 2 on stream 1.
struct Programs {
  ir::ProgramDesc startup, main;
};

Programs MakePrograms(bool second_stream) {
  Programs p;
  ir::BlockDesc& s = p.startup.mutable_global_block();
  (void)s.AddVar(Var("w", Shape({4, 4}), true));
  s.AppendOp(Op("fill_constant", {}, {{"Out", {"w"}}},
                vm::AttrMap().Set("shape", std::vector<int64_t>{4, 4}).Set("value", 0.5)));
  ir::BlockDesc& m = p.main.mutable_global_block();
  (void)m.AddVar(Var("x", Shape({4, 4})));
  (void)m.AddVar(Var("w", Shape({4, 4}), true));
  for (const char* name : {"xw", "r", "y", "e", "z"}) (void)m.AddVar(Var(name, Shape({4, 4})));
  m.AppendOp(Op("matmul", {{"X", {"x"}}, {"Y", {"w"}}}, {{"Out", {"xw"}}}));
  m.AppendOp(Op("relu", {{"X", {"xw"}}}, {{"Out", {"r"}}}));
  m.AppendOp(Op("add", {{"X", {"r"}}, {"Y", {"x"}}}, {{"Out", {"y"}}}));
  vm::AttrMap on1;
  if (second_stream) on1.Set("stream", std::string("compute:1"));
  m.AppendOp(Op("exp", {{"X", {"x"}}}, {{"Out", {"e"}}}, on1));
  vm::AttrMap scale = on1;
  scale.Set("scale", 2.0);
  m.AppendOp(Op("scale", {{"X", {"e"}}}, {{"Out", {"z"}}}, scale));
  return p;
}

std::vector<float> Input() {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = std::sin(0.3f * i) - 0.2f;
  return x;
}

std::vector<std::vector<float>> RunOn(Device device, bool second_stream, bool check_sync,
                                      bool skip_analysis = false) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(/*sim_devices=*/1, check_sync);
  if (context == nullptr) return {};
  ExecutorOptions options;
  options.interpreter.device = device;
  options.interpreter.skip_stream_analysis = skip_analysis;
  Executor executor(&context->registry(), context->vm(), options);
  Scope scope;
  Programs p = MakePrograms(second_stream);
  EXPECT_TRUE(executor.Run(p.startup, {}, {}, &scope).ok());
  Feeds feeds = {{"x", HostTensor::FromVector(Input(), Shape({4, 4}))}};
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 3; ++step) {
    absl::StatusOr<RunResult> result = executor.Run(p.main, feeds, {"y", "z"}, &scope);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    if (step == 2) {
      out.push_back(result->fetches[0].ToVector<float>());
      out.push_back(result->fetches[1].ToVector<float>());
    }
  }
  const LoweringStats lowering = executor.LastLowering().value();
  if (second_stream) {
    // h2d, compute:0, compute:1, d2h; the branch on compute:1 waits for the copy of x.
    EXPECT_EQ(lowering.streams, 4);
    EXPECT_EQ(lowering.stream_waits > 0, !skip_analysis);
  }
  if (skip_analysis) {
    EXPECT_GT(context->vm()->sync_checker()->violation_count(), 0);
    return out;
  }
  EXPECT_EQ(executor.cache_misses(), 2);
  EXPECT_EQ(executor.cache_hits(), 2);
  if (check_sync) {
    vm::SyncChecker* checker = context->vm()->sync_checker();
    EXPECT_EQ(checker->violation_count(), 0);
  }
  return out;
}

TEST(InterpreterSmokeTest, SameNumbersOnCpuSimAndTwoStreams) {
  const std::vector<float> x = Input();
  std::vector<std::vector<float>> cpu = RunOn(Device(DeviceType::kCpu, 0), false, false);
  ASSERT_EQ(cpu.size(), 2u);
  // Reference by hand.
  for (int i = 0; i < 4; ++i) {
    float row = 0;
    for (int k = 0; k < 4; ++k) row += x[i * 4 + k] * 0.5f;
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(cpu[0][i * 4 + j], std::max(row, 0.0f) + x[i * 4 + j], 1e-6);
      EXPECT_NEAR(cpu[1][i * 4 + j], 2 * std::exp(x[i * 4 + j]), 1e-5);
    }
  }
  EXPECT_EQ(RunOn(Device(DeviceType::kSim, 0), false, true), cpu);
  EXPECT_EQ(RunOn(Device(DeviceType::kSim, 0), true, true), cpu);
}

// The run that proves the checker above can fail: without the stream analysis's waits, the
// same program on two sim streams is reported.
TEST(InterpreterSmokeTest, CheckerReportsMissingStreamWaits) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the run races on purpose; ThreadSanitizer would (rightly) stop it";
#endif
  RunOn(Device(DeviceType::kSim, 0), true, true, /*skip_analysis=*/true);
}

}  // namespace
}  // namespace sluice::framework::interpreter_smoke_test
