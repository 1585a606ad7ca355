// The VM tools: replaying an instruction record and the eager stress run, over the
// sluice_stress library.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "capi/internal/handles.h"
#include "capi/sluice_c_api.h"
#include "core/status.h"
#include "stress/eager_stress.h"
#include "stress/record_replay.h"
#include "vm/replayer.h"

using sluice::capi::Guard;
using sluice::capi::NotNull;

extern "C" {

SluiceStatus* sluice_replay(const char* path, const char* device_map, int standard_ops,
                            int check_sync, int32_t repeat, SluiceReplayReport* report) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(path, fn, "path"));
    SLUICE_RETURN_IF_ERROR(NotNull(report, fn, "report"));
    if (repeat < 1) {
      return absl::InvalidArgumentError(absl::StrCat(fn, ": repeat ", repeat, " is < 1"));
    }
    sluice::stress::RecordReplayOptions options;
    options.path = path;
    if (device_map != nullptr && *device_map != '\0') {
      if (absl::Status mapped = sluice::vm::AddDeviceMapping(device_map, &options.device_map);
          !mapped.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(fn, ": device_map: ", mapped.message()));
      }
    }
    options.standard_ops = standard_ops != 0;
    options.check_sync = check_sync != 0;
    options.repeat = repeat;
    SLUICE_ASSIGN_OR_RETURN(const sluice::stress::RecordReplayTotals totals,
                            sluice::stress::ReplayRecordFile(options));
    SluiceReplayReport r{};
    r.instructions = totals.instructions;
    r.checksums_compared = totals.checksums;
    r.checksum_mismatches = static_cast<int64_t>(totals.mismatches.size());
    r.checksums_skipped = totals.skipped;
    r.sync_errors = totals.sync_errors;
    r.op_errors = totals.op_error.empty() && totals.shutdown_error.empty() ? 0 : 1;
    std::string problem = totals.op_error;
    if (problem.empty() && !totals.mismatches.empty()) {
      const sluice::vm::ChecksumMismatch& m = totals.mismatches.front();
      problem = absl::StrCat(path, ":", m.line, ": ", m.blob,
                             m.released ? ": storage was released in the replay"
                                        : ": checksum differs from the recorded one");
    }
    if (problem.empty()) problem = totals.first_sync_error;
    if (problem.empty()) problem = totals.shutdown_error;
    sluice::capi::CopyText(problem, r.first_problem, sizeof(r.first_problem));
    *report = r;
    return absl::OkStatus();
  });
}

void sluice_stress_options_init(SluiceStressOptions* options) {
  if (options == nullptr) return;
  const sluice::stress::EagerStressOptions defaults;
  std::memset(options, 0, sizeof(*options));
  options->programs = defaults.programs;
  options->seed = defaults.seed;
  options->streams = defaults.shape.streams;
  options->sim_devices = defaults.shape.sim_devices;
  options->tensors = defaults.shape.tensors;
  options->ops = defaults.shape.ops;
  options->elements = defaults.shape.elements;
  options->jitter_us = defaults.jitter_us;
  options->soft_sync = defaults.soft_sync ? 1 : 0;
  options->caller_scheduling = 0;
  options->timeout_s = defaults.timeout_s;
  options->record_path = nullptr;
  options->progress = 0;
}

SluiceStatus* sluice_stress_run(const SluiceStressOptions* options, SluiceStressTotals* totals) {
  return Guard(__func__, [&, fn = __func__]() -> absl::Status {
    SLUICE_RETURN_IF_ERROR(NotNull(options, fn, "options"));
    SLUICE_RETURN_IF_ERROR(NotNull(totals, fn, "totals"));
    // RunEagerStress checks the ranges `sluice stress` accepts (InvalidArgument naming the
    // option).
    sluice::stress::EagerStressOptions run;
    run.programs = options->programs;
    run.seed = options->seed;
    run.shape.streams = options->streams;
    run.shape.sim_devices = options->sim_devices;
    run.shape.tensors = options->tensors;
    run.shape.ops = options->ops;
    run.shape.elements = options->elements;
    run.jitter_us = options->jitter_us;
    run.soft_sync = options->soft_sync != 0;
    run.scheduling = options->caller_scheduling != 0
                         ? sluice::vm::VmOptions::Scheduling::kCallerThread
                         : sluice::vm::VmOptions::Scheduling::kDedicatedThread;
    run.timeout_s = options->timeout_s;
    run.record_path = options->record_path == nullptr ? "" : options->record_path;
    run.progress = options->progress != 0;
    SLUICE_ASSIGN_OR_RETURN(const sluice::stress::EagerStressTotals result,
                            sluice::stress::RunEagerStress(run));
    SluiceStressTotals t{};
    t.programs = result.programs;
    t.instructions = result.instructions;
    t.mismatches = result.mismatches;
    t.sync_errors = result.sync_errors;
    t.hangs = result.hangs;
    t.op_errors = result.op_errors;
    t.abandoned = result.abandoned ? 1 : 0;
    std::string problem = result.first_problem;
    if (problem.empty() && !result.first_sync_error.empty()) {
      problem = absl::StrCat("sync error: ", result.first_sync_error);
    }
    sluice::capi::CopyText(problem, t.first_problem, sizeof(t.first_problem));
    *totals = t;
    return absl::OkStatus();
  });
}

}  // extern "C"
