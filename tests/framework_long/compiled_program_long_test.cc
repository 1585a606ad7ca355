// 10^3 random elementwise programs with broadcasting (tests/framework/
// compiled_program_test_util.h), each run compiled and unfused on cpu and on two sim streams
// with the sync checker: bitwise equal fetches, no sync violation. Then the same compiled
// programs without the stream analysis, which must report violations: the checker sees the
// accesses of compiled kernels (the clean runs above are not clean by accident).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ep/cuda/ptx_compiler.h"
#include "framework/compiler/cuda/cuda_source.h"
#include "framework/executor/executor.h"
#include "gtest/gtest.h"
#include "tests/framework/compiled_program_test_util.h"
#include "tests/framework/program_test_util.h"
#include "vm/sync_checker.h"

namespace sluice::framework::compiled_program_long_test {
namespace {

using compiled_test::MakeRandomElementwiseProgram;
using compiled_test::RunCompiledAndUnfused;

constexpr uint32_t kPrograms = 1000;

TEST(CompiledProgramLongTest, ThousandRandomProgramsMatchUnfusedOnCpu) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  int64_t subgraphs = 0, fused = 0, max_ulp = 0;
  for (uint32_t seed = 1; seed <= kPrograms; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto outcome = RunCompiledAndUnfused(
        *context, MakeRandomElementwiseProgram(seed, /*on_streams=*/false), program_test::kCpu, 1);
    subgraphs += outcome.compiled_subgraphs;
    fused += outcome.fused_ops;
    max_ulp = std::max(max_ulp, outcome.max_ulp);
    if (HasFailure()) break;
  }
  EXPECT_EQ(max_ulp, 0);
  EXPECT_GT(subgraphs, kPrograms);
  std::printf("cpu: %u programs, %lld compiled subgraphs, %lld fused ops\n", kPrograms,
              static_cast<long long>(subgraphs), static_cast<long long>(fused));
}

TEST(CompiledProgramLongTest, ThousandRandomProgramsMatchUnfusedOnTwoSimStreams) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(context, nullptr);
  int64_t subgraphs = 0, max_ulp = 0;
  for (uint32_t seed = 1; seed <= kPrograms; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto outcome = RunCompiledAndUnfused(
        *context, MakeRandomElementwiseProgram(seed, /*on_streams=*/true), program_test::kSim, 2);
    subgraphs += outcome.compiled_subgraphs;
    max_ulp = std::max(max_ulp, outcome.max_ulp);
    if (HasFailure()) break;
  }
  EXPECT_EQ(max_ulp, 0);
  EXPECT_GT(subgraphs, kPrograms);
  EXPECT_EQ(context->vm()->sync_checker()->violation_count(), 0)
      << context->vm()->sync_checker()->status().message();
}

TEST(CompiledProgramLongTest, WithoutStreamAnalysisTheCheckerReportsViolations) {
  std::unique_ptr<eager::Context> context = program_test::NewContext(1, /*check_sync=*/true);
  ASSERT_NE(context, nullptr);
  int64_t subgraphs = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    const compiled_test::RandomElementwiseProgram r = MakeRandomElementwiseProgram(seed, true);
    ExecutorOptions options;
    options.interpreter.device = program_test::kSim;
    options.interpreter.compute_streams = 2;
    options.interpreter.skip_stream_analysis = true;
    Executor executor(&context->registry(), context->vm(), options);
    Scope scope;
    (void)executor.Run(r.startup, {}, {}, &scope);
    (void)executor.Run(r.main, r.feeds, r.fetches, &scope);  // may fail: nothing orders it
    if (absl::StatusOr<LoweringStats> lowering = executor.LastLowering(); lowering.ok()) {
      subgraphs += lowering->compiled_subgraphs;
    }
  }
  EXPECT_GT(subgraphs, 0);
  EXPECT_GT(context->vm()->sync_checker()->violation_count(), 0);
}

// Every kernel the partitioning pass forms for the 10^3 programs compiles to PTX with NVRTC
// (no GPU needed), on two threads. NVRTC's start-up dominates a kernel this small, so the
// kernels compile kKernelsPerUnit to a unit, each in a namespace of its own (its helpers stay
// apart; an extern "C" entry keeps its name), and every entry must appear in the unit's PTX.
// A unit that fails compiles its kernels one by one, to name the first that fails alone.
constexpr size_t kKernelsPerUnit = 64;

TEST(CompiledProgramLongTest, EveryKernelOfTheThousandProgramsCompilesToPtx) {
  if (absl::IsUnimplemented(ep::CompileToPtx("", "probe.cu").status())) {
    GTEST_SKIP() << "built without CUDA";
  }
  std::unique_ptr<eager::Context> context = program_test::NewContext(0);
  ASSERT_NE(context, nullptr);
  const std::vector<compiler::Subgraph> graphs =
      compiled_test::SubgraphsOfRandomPrograms(*context, 1, kPrograms);
  ASSERT_GT(graphs.size(), kPrograms);
  std::vector<compiler::CudaSource> sources;
  for (const compiler::Subgraph& g : graphs) {
    absl::StatusOr<compiler::CudaSource> source = compiler::GenerateCudaSource(g);
    ASSERT_TRUE(source.ok()) << g.ToText() << ": " << source.status();
    sources.push_back(*std::move(source));
  }
  // Compiles sources [begin, end) as one unit; false if it fails or an entry is missing.
  auto compiles = [&](size_t begin, size_t end, std::string* why) {
    std::string unit;
    for (size_t i = begin; i < end; ++i) {
      absl::StrAppend(&unit, "namespace k", i, " {\n", sources[i].source, "}\n");
    }
    absl::StatusOr<std::string> ptx = ep::CompileToPtx(unit, absl::StrCat("unit_", begin, ".cu"));
    if (!ptx.ok()) {
      *why = ptx.status().ToString();
      return false;
    }
    for (size_t i = begin; i < end; ++i) {
      if (ptx->find(".entry " + sources[i].entry) == std::string::npos) {
        *why = "no entry " + sources[i].entry;
        return false;
      }
    }
    return true;
  };
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  std::string first_failure;
  absl::Mutex mu;
  auto worker = [&] {
    for (size_t begin = next.fetch_add(kKernelsPerUnit); begin < sources.size();
         begin = next.fetch_add(kKernelsPerUnit)) {
      const size_t end = std::min(sources.size(), begin + kKernelsPerUnit);
      std::string why;
      if (compiles(begin, end, &why)) continue;
      for (size_t i = begin; i < end; ++i) {
        if (compiles(i, i + 1, &why)) continue;
        absl::MutexLock lock(&mu);
        if (failures++ == 0) first_failure = graphs[i].ToText() + ": " + why;
      }
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  std::printf("%zu kernels compiled to PTX, %zu to a unit\n", sources.size(), kKernelsPerUnit);
}

}  // namespace
}  // namespace sluice::framework::compiled_program_long_test
