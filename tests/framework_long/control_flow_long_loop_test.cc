// Long control-flow runs, kept out of the sanitizer builds (.ci/run runs this binary in the
// Release test stage only): a 10^5-iteration loop on two sim streams with jitter and the
// sync checker on. Memory stays flat — a run's peak device bytes are the same after 10^3
// and after 10^5 iterations, since frames are reused and each iteration's temporaries are
// released within it — the checker sees no violation over
// every step of every iteration, and the loop computes what the host computes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "framework/builder/program.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "gtest/gtest.h"
#include "ops/standard_ops.h"
#include "tests/framework/control_flow_programs.h"
#include "vm/sync_checker.h"

namespace sluice::framework::control_flow_long_loop_test {
namespace {

TEST(ControlFlowLongLoop, MemoryStaysFlatOverTenToTheFiveIterationsOnSim) {
  eager::ContextOptions options;
  options.runtime.num_sim_devices = 1;
  options.runtime.sim.max_jitter_us = 1;  // half the items sleep (about 50 us each)
  options.runtime.sim.seed = 5;
  options.runtime.enable_cuda = false;
  options.vm.check_sync = true;
  eager::Context context = eager::Context::Create(options).value();
  ops::OpRegistry registry;
  ASSERT_TRUE(ops::RegisterStandardOps(&registry).ok());
  Program main(&registry), startup(&registry);
  std::vector<std::string> fetches;
  {
    ProgramGuard guard(main, startup);
    const Var i = Data("i", Shape()).value();
    const Var n = Data("n", Shape()).value();
    const Var x = Data("x", Shape({4})).value();
    // Work on both sides of the loop, so that two streams have something to order.
    const Value x2 = fn::Scale(x, 0.5).value();
    absl::StatusOr<std::vector<Value>> out = control_flow_programs::CountingLoop(i, n, x2);
    ASSERT_TRUE(out.ok()) << out.status();
    const Value y = fn::Add((*out)[1], x2).value();
    fetches = {(*out)[0].var().name(), y.var().name()};
  }
  ExecutorOptions executor_options;
  executor_options.interpreter.device = Device(DeviceType::kSim, 0);
  executor_options.interpreter.compute_streams = 2;
  Executor executor(&context.registry(), context.vm(), executor_options);
  Scope scope;
  const std::vector<float> x0 = {1, -2, 0.25f, 3};
  auto run = [&](int n) -> std::optional<RunResult> {
    absl::StatusOr<RunResult> result = executor.Run(
        main.desc(),
        {{"i", HostTensor::FromVector(std::vector<float>{0}, Shape())},
         {"n", HostTensor::FromVector(std::vector<float>{static_cast<float>(n)}, Shape())},
         {"x", HostTensor::FromVector(x0, Shape({4}))}},
        fetches, &scope);
    EXPECT_TRUE(result.ok()) << n << ": " << result.status();
    if (!result.ok()) return std::nullopt;
    return *std::move(result);
  };
  // A first run allocates what the graph then keeps (the frames' kept blobs, among them
  // the condition's predicate): runs after it start with those in use. Its peak is not
  // compared; the 10^3- and 10^5-iteration runs after it must peak at the same bytes.
  ASSERT_TRUE(run(10).has_value());
  int64_t first_peak = 0;
  for (int n : {1000, 100000}) {
    std::optional<RunResult> result = run(n);
    ASSERT_TRUE(result.has_value());
    float i = 0;
    std::memcpy(&i, result->fetches[0].bytes.data(), 4);
    EXPECT_EQ(i, static_cast<float>(n));
    std::vector<float> y(4);
    std::memcpy(y.data(), result->fetches[1].bytes.data(), 16);
    for (size_t k = 0; k < 4; ++k) {
      float want = x0[k] * 0.5f;
      for (int it = 0; it < n; ++it) want = want * 1.0001f + 0.5f;
      EXPECT_NEAR(y[k], want + x0[k] * 0.5f, 1e-3 * std::abs(want)) << n << " element " << k;
    }
    if (first_peak == 0) {
      first_peak = result->stats.peak_bytes;
      EXPECT_GT(first_peak, 0);
    } else {
      EXPECT_EQ(result->stats.peak_bytes, first_peak) << n;
    }
  }
  EXPECT_EQ(context.vm()->sync_checker()->violation_count(), 0);
}

}  // namespace
}  // namespace sluice::framework::control_flow_long_loop_test
