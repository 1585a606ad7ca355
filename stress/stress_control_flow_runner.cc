#include "stress/stress_control_flow_runner.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "framework/eager/context.h"
#include "framework/executor/executor.h"
#include "framework/interpreter/scope.h"
#include "stress/stress_reference.h"
#include "vm/sync_checker.h"

namespace sluice::stress {
namespace {

// How long a cancelled hung run gets to end before it is abandoned.
constexpr absl::Duration kCancelGrace = absl::Seconds(10);

void NoteProblem(ControlFlowStressTotals* totals, std::string problem) {
  if (totals->first_problem.empty()) totals->first_problem = std::move(problem);
}

// The fetched values against the reference's; counts the ones that differ.
void Compare(const std::vector<framework::HostTensor>& got,
             const std::vector<framework::HostTensor>& want, const std::vector<std::string>& names,
             const std::string& where, ControlFlowStressTotals* totals) {
  for (size_t i = 0; i < want.size(); ++i) {
    ++totals->compared;
    const bool same = i < got.size() && got[i].dtype == want[i].dtype &&
                      got[i].shape == want[i].shape && got[i].bytes == want[i].bytes;
    if (same) continue;
    ++totals->mismatches;
    std::string detail;
    if (i < got.size() && got[i].dtype == DataType::kF32 &&
        got[i].bytes.size() == want[i].bytes.size()) {
      const std::vector<float> g = got[i].ToVector<float>();
      const std::vector<float> w = want[i].ToVector<float>();
      for (size_t k = 0; k < g.size(); ++k) {
        if (std::memcmp(&g[k], &w[k], sizeof(float)) == 0) continue;
        detail = absl::StrFormat(" (element %d: %g, reference %g)", k, g[k], w[k]);
        break;
      }
    }
    NoteProblem(totals,
                absl::StrCat(where, ": '", names[i], "' differs from the reference", detail));
  }
}

}  // namespace

std::string ControlFlowStressTotals::ToJson() const {
  return absl::StrFormat(
      "{\"programs\":%d,\"runs\":%d,\"conds\":%d,\"whiles\":%d,\"stream_waits\":%d,"
      "\"pipelined_loops\":%d,\"compared\":%d,\"mismatches\":%d,\"sync_errors\":%d,\"programs_with_"
      "sync_errors\":%d,"
      "\"hangs\":%d,\"run_errors\":%d}",
      programs, runs, conds, whiles, stream_waits, pipelined_loops, compared, mismatches,
      sync_errors, programs_with_sync_errors, hangs, run_errors);
}

namespace {

// The ranges `sluice stress --control-flow` accepts (the generator draws modulo these).
absl::Status CheckControlFlowStressOptions(const ControlFlowStressOptions& options) {
  const struct {
    const char* name;
    int64_t value, min, max;
  } kRanges[] = {{"programs", options.programs, 1, 100000000},
                 {"streams", options.streams, 1, 64},
                 {"inputs", options.shape.inputs, 1, 10000},
                 {"ops", options.shape.ops, 0, 1000000},
                 {"depth", options.shape.depth, 0, 6},
                 {"max_trips", options.shape.max_trips, 0, 1000000},
                 {"elements", options.shape.elements, 1, int64_t{1} << 24},
                 {"jitter_us", options.jitter_us, 0, 1000000},
                 {"timeout_s", options.timeout_s, 1, 86400}};
  for (const auto& r : kRanges) {
    if (r.value < r.min || r.value > r.max) {
      return absl::InvalidArgumentError(absl::StrCat("stress --control-flow: ", r.name, " ",
                                                     r.value, " is outside ", r.min, "..", r.max));
    }
  }
  return absl::OkStatus();
}

// One sim device with the options' jitter, a sync-checked VM.
absl::StatusOr<std::unique_ptr<eager::Context>> NewStressContext(
    const ControlFlowStressOptions& options) {
  eager::ContextOptions context_options;
  context_options.runtime.num_sim_devices = 1;
  context_options.runtime.sim.seed = options.seed;
  context_options.runtime.sim.max_jitter_us = options.jitter_us;
  context_options.runtime.enable_cuda = false;
  context_options.vm.check_sync = true;
  context_options.vm.scheduling = options.scheduling;
  SLUICE_ASSIGN_OR_RETURN(eager::Context created, eager::Context::Create(context_options));
  return std::make_unique<eager::Context>(std::move(created));
}

// Every tenth of the programs (and the last), when options.progress.
void ReportProgress(const ControlFlowStressOptions& options, int p, const vm::SyncChecker& checker,
                    const ControlFlowStressTotals& totals, int* reported_percent_out) {
  int& reported_percent = *reported_percent_out;
  const int percent = static_cast<int>(100LL * (p + 1) / options.programs);
  if (options.progress && (percent >= reported_percent + 10 || p + 1 == options.programs)) {
    reported_percent = percent - percent % 10;
    std::fprintf(stderr,
                 "sluice stress: %d/%d control-flow programs (%d%%), %lld sync errors, %lld "
                 "mismatches, %lld hangs\n",
                 p + 1, options.programs, percent,
                 static_cast<long long>(checker.violation_count()),
                 static_cast<long long>(totals.mismatches), static_cast<long long>(totals.hangs));
  }
}

}  // namespace

absl::StatusOr<ControlFlowStressTotals> RunControlFlowStress(
    const ControlFlowStressOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckControlFlowStressOptions(options));
  // Held by pointer so that a run that never ends can be left behind with them.
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<eager::Context> context, NewStressContext(options));
  framework::ExecutorOptions executor_options;
  executor_options.interpreter.device = options.device;
  executor_options.interpreter.compute_streams = options.streams;
  executor_options.interpreter.skip_stream_analysis = options.no_soft_sync;
  executor_options.interpreter.release_temporaries = !options.keep_temporaries;
  auto executor =
      std::make_unique<framework::Executor>(&context->registry(), context->vm(), executor_options);
  const vm::SyncChecker& checker = *context->vm()->sync_checker();
  ControlFlowShape shape = options.shape;
  shape.streams = options.streams;

  ControlFlowStressTotals totals;
  int reported_percent = 0;
  for (int p = 0; p < options.programs; ++p) {
    const uint64_t seed = options.seed * 1000003 + static_cast<uint64_t>(p);
    absl::StatusOr<ControlFlowProgram> generated =
        GenerateControlFlowProgram(context->registry(), shape, seed);
    if (!generated.ok()) {
      return absl::InternalError(
          absl::StrCat("generating program ", p, ": ", generated.status().ToString()));
    }
    totals.conds += generated->conds;
    totals.whiles += generated->whiles;
    framework::Scope scope;
    const int64_t violations_before = checker.violation_count();
    for (size_t set = 0; set < generated->feed_sets.size(); ++set) {
      const std::string where = absl::StrCat("program ", p, " (seed ", seed, ") run ", set);
      const framework::Feeds& feeds = generated->feed_sets[set];
      absl::StatusOr<std::vector<framework::HostTensor>> want =
          EvaluateReference(generated->program, feeds, generated->fetches);
      if (!want.ok()) {
        return absl::InternalError(absl::StrCat(where, ": reference: ", want.status().ToString()));
      }
      auto finished = std::make_shared<absl::Notification>();
      absl::StatusOr<std::shared_ptr<framework::RunHandle>> submitted = executor->RunAsync(
          generated->program, feeds, generated->fetches, &scope,
          [finished](const absl::StatusOr<framework::RunResult>&) { finished->Notify(); });
      if (!submitted.ok()) {
        return absl::InternalError(
            absl::StrCat(where, ": not submitted: ", submitted.status().ToString()));
      }
      const std::shared_ptr<framework::RunHandle> handle = *std::move(submitted);
      if (!finished->WaitForNotificationWithTimeout(absl::Seconds(options.timeout_s))) {
        ++totals.hangs;
        NoteProblem(&totals,
                    absl::StrCat(where, ": did not finish within ", options.timeout_s, " s"));
        handle->Cancel();
        if (!finished->WaitForNotificationWithTimeout(kCancelGrace)) {
          totals.abandoned = true;
          totals.sync_errors = checker.violation_count();
          // The VM cannot shut down under a run that never ends: leave both behind.
          (void)executor.release();
          (void)context.release();
          return totals;
        }
      }
      const absl::StatusOr<framework::RunResult>& result = handle->Wait();
      if (!result.ok()) {
        if (!absl::IsCancelled(result.status())) {
          ++totals.run_errors;
          NoteProblem(&totals, absl::StrCat(where, ": ", result.status().ToString()));
        }
        continue;
      }
      ++totals.runs;
      if (set == 0) {
        if (absl::StatusOr<framework::LoweringStats> lowering = executor->LastLowering();
            lowering.ok()) {
          totals.stream_waits += lowering->stream_waits;
          totals.pipelined_loops += lowering->pipelined_loops;
        }
      }
      Compare(result->fetches, *want, generated->fetches, where, &totals);
    }
    ++totals.programs;
    if (checker.violation_count() > violations_before) ++totals.programs_with_sync_errors;
    ReportProgress(options, p, checker, totals, &reported_percent);
  }
  executor.reset();
  const absl::Status shutdown = context->vm()->Shutdown();
  totals.sync_errors = checker.violation_count();
  if (totals.sync_errors > 0) {
    const std::vector<vm::SyncViolation> violations = checker.violations();
    if (!violations.empty()) {
      NoteProblem(&totals, absl::StrCat("sync error: ", violations.front().ToString()));
    }
  }
  if (!shutdown.ok()) {
    ++totals.run_errors;
    NoteProblem(&totals, absl::StrCat("shutdown: ", shutdown.ToString()));
  }
  return totals;
}

}  // namespace sluice::stress
