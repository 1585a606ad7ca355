#include "tools/stress_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "stress/eager_stress.h"
#include "stress/stress_control_flow_runner.h"
#include "tools/interrupt_watcher.h"
#include "tools/options.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

struct StressOptions {
  int programs = 100;
  int jitter_us = 0;
  uint64_t seed = 1;
  bool no_soft_sync = false;
  bool expect_errors = false;
  std::string scheduling = "dedicated";
  int timeout_s = 120;
  int streams = 4;
  bool control_flow = false;
  bool keep_temporaries = false;
  double fail_rate = 0;
  std::string fault_kinds = "all";
  bool swallow_faults = false;
  // Options whose meaning or default depends on the mode: unset unless given.
  std::optional<int> tensors, ops, devices, depth, max_trips;
  std::optional<int64_t> elements;
  std::optional<Device> device;
  std::string record_path;
  stress::StressShape shape;          // the eager mode's, filled in by Resolve
  stress::ControlFlowShape cf_shape;  // --control-flow's, filled in by Resolve
};

// An integer option that stays unset unless given; `default_text` is what --help shows.
template <typename T>
void AddOptionalInteger(OptionParser& parser, std::string name, std::string value_name,
                        std::string help, T min, T max, std::string default_text,
                        std::optional<T>* out) {
  parser.AddValue(std::move(name), std::move(value_name), std::move(help), std::move(default_text),
                  [min, max, out](absl::string_view text) {
                    T value;
                    if (!absl::SimpleAtoi(text, &value) || value < min || value > max) {
                      return absl::InvalidArgumentError(
                          absl::StrCat("'", text, "' is not an integer in [", min, ", ", max, "]"));
                    }
                    *out = value;
                    return absl::OkStatus();
                  });
}

void DeclareOptions(OptionParser& parser, StressOptions* o) {
  parser.AddInteger("--programs", "N", "programs to run", 1, 100000000, &o->programs);
  parser.AddInteger("--streams", "K", "compute streams per sim device", 1, 64, &o->streams);
  AddOptionalInteger(parser, "--devices", "D", "sim devices (not with --control-flow: sim:0)", 1,
                     ep::Runtime::kMaxSimDevices, "2", &o->devices);
  parser.AddInteger<uint64_t>("--seed", "S", "seed of programs and sim delays", 0, INT64_MAX,
                              &o->seed);
  parser.AddInteger("--jitter-us", "J", "random delay of up to J us before each sim work item", 0,
                    1000000, &o->jitter_us);
  parser.AddFlag("--no-soft-sync",
                 "emit no sync instructions (with --control-flow: the interpreter's "
                 "skip_stream_analysis): the run must then report errors, which proves the "
                 "checks can fail",
                 &o->no_soft_sync);
  parser.AddFlag("--expect-errors",
                 "exit 0 only if errors were reported (for --no-soft-sync in CI)",
                 &o->expect_errors);
  AddOptionalInteger(parser, "--tensors", "T",
                     "tensors per program (with --control-flow: fed vectors)", 1, 10000,
                     "8; 3 with --control-flow", &o->tensors);
  AddOptionalInteger(parser, "--ops", "M",
                     "random ops per program after the initial fills (with --control-flow: "
                     "statements of block 0)",
                     0, 1000000, "40; 10 with --control-flow", &o->ops);
  AddOptionalInteger<int64_t>(parser, "--elements", "E", "floats per tensor", 1, 1 << 24,
                              "64; 8 with --control-flow", &o->elements);
  parser.AddChoice("--scheduling", "X", "dedicated (a scheduler thread) or caller",
                   {"dedicated", "caller"}, &o->scheduling);
  parser.AddInteger("--timeout-s", "T",
                    "a program (with --control-flow: a run) taking longer counts as a hang", 1,
                    86400, &o->timeout_s);
  parser.AddString("--record", "FILE",
                   "record every instruction (docs/instruction_record_format.md); `sluice replay "
                   "FILE` re-executes the run and checks the final tensors of the last program "
                   "(not with --control-flow)",
                   &o->record_path);
  parser.AddFlag("--control-flow",
                 "random static programs with cond and while instead, run through the "
                 "executor on sim:0 with K compute streams (see above)",
                 &o->control_flow);
  parser.AddValue(
      "--device", "DEV", "--control-flow: where the programs run, sim:0 or cpu (no jitter there)",
      "sim:0", [o](absl::string_view text) -> absl::Status {
        SLUICE_ASSIGN_OR_RETURN(const Device device, Device::Parse(text));
        if (device != Device(DeviceType::kSim, 0) && device != Device::Cpu()) {
          return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not sim:0 or cpu"));
        }
        o->device = device;
        return absl::OkStatus();
      });
  parser.AddFlag("--keep-temporaries",
                 "--control-flow: the interpreter keeps temporaries' storage across runs (no GC "
                 "plan), so each program's second run overwrites what its first one read",
                 &o->keep_temporaries);
  parser.AddValue("--fail-rate", "P",
                  "inject faults: each op's kernel, each of its sim work items (a device error) "
                  "and each allocation of a tensor fails with probability P, deterministically "
                  "from --seed; every fault must surface at its program's sync point naming the "
                  "op, what depends on it must be skipped, and everything else must still match "
                  "(not with --control-flow or --record)",
                  "0", [o](absl::string_view text) -> absl::Status {
                    double value;
                    if (!absl::SimpleAtod(text, &value) || !(value >= 0 && value <= 1)) {
                      return absl::InvalidArgumentError(
                          absl::StrCat("'", text, "' is not a probability in [0, 1]"));
                    }
                    o->fail_rate = value;
                    return absl::OkStatus();
                  });
  parser.AddChoice("--fault-kinds", "K",
                   "with --fail-rate: which faults to inject (all, kernel, device or allocation)",
                   {"all", "kernel", "device", "allocation"}, &o->fault_kinds);
  parser.AddFlag("--swallow-faults",
                 "with --fail-rate: injected kernel faults are swallowed (the kernel returns OK "
                 "without doing its work), so the run must report unreported faults and wrong "
                 "results: proves the fault checks can fail (use with --expect-errors)",
                 &o->swallow_faults);
  AddOptionalInteger(parser, "--depth", "L",
                     "--control-flow: nesting levels of cond and while below block 0", 0, 6, "2",
                     &o->depth);
  AddOptionalInteger(parser, "--max-trips", "R", "--control-flow: a loop runs 0..R iterations", 0,
                     1000000, "4", &o->max_trips);
}

// Checks the options that belong to one mode only and fills in that mode's shape; a usage
// error message, or "".
std::string Resolve(StressOptions* o) {
  if (o->fail_rate == 0 && (o->fault_kinds != "all" || o->swallow_faults)) {
    return "options '--fault-kinds' and '--swallow-faults' need --fail-rate";
  }
  if (o->control_flow) {
    if (o->fail_rate > 0) return "option '--fail-rate' does not apply to --control-flow";
    if (o->devices) return "option '--devices' does not apply to --control-flow (sim:0 only)";
    if (!o->record_path.empty()) return "option '--record' does not apply to --control-flow";
    o->cf_shape.streams = o->streams;
    o->cf_shape.inputs = o->tensors.value_or(o->cf_shape.inputs);
    o->cf_shape.ops = o->ops.value_or(o->cf_shape.ops);
    o->cf_shape.elements = o->elements.value_or(o->cf_shape.elements);
    o->cf_shape.depth = o->depth.value_or(o->cf_shape.depth);
    o->cf_shape.max_trips = o->max_trips.value_or(o->cf_shape.max_trips);
    return "";
  }
  if (o->fail_rate > 0 && !o->record_path.empty()) {
    return "option '--fail-rate' does not combine with --record (a replay would not fail alike)";
  }
  if (o->device) return "option '--device' needs --control-flow";
  if (o->keep_temporaries) return "option '--keep-temporaries' needs --control-flow";
  if (o->depth) return "option '--depth' needs --control-flow";
  if (o->max_trips) return "option '--max-trips' needs --control-flow";
  o->shape.streams = o->streams;
  o->shape.sim_devices = o->devices.value_or(o->shape.sim_devices);
  o->shape.tensors = o->tensors.value_or(o->shape.tensors);
  o->shape.ops = o->ops.value_or(o->shape.ops);
  o->shape.elements = o->elements.value_or(o->shape.elements);
  return "";
}

// --control-flow: runs the programs and prints the JSON line; the exit code.
int ControlFlowMain(const StressOptions& o) {
  stress::ControlFlowStressOptions options;
  options.programs = o.programs;
  options.seed = o.seed;
  options.streams = o.streams;
  options.device = o.device.value_or(options.device);
  options.jitter_us = o.jitter_us;
  options.no_soft_sync = o.no_soft_sync;
  options.keep_temporaries = o.keep_temporaries;
  options.scheduling = o.scheduling == "caller" ? vm::VmOptions::Scheduling::kCallerThread
                                                : vm::VmOptions::Scheduling::kDedicatedThread;
  options.timeout_s = o.timeout_s;
  options.shape = o.cf_shape;
  options.progress = true;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<stress::ControlFlowStressTotals> totals = stress::RunControlFlowStress(options);
  if (!totals.ok()) return ReportFailure("stress", totals.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "sluice stress: %.2f s\n", seconds);
  if (!totals->first_problem.empty()) {
    std::fprintf(stderr, "first problem: %s\n", totals->first_problem.c_str());
  }
  std::printf("%s\n", totals->ToJson().c_str());
  std::fflush(stdout);
  const int exit = totals->problems() == o.expect_errors ? kExitOk : kExitFailure;
  if (totals->abandoned) {
    std::fprintf(stderr, "sluice stress: a hung run could not be cancelled; leaving\n");
    std::fflush(stderr);
    std::_Exit(exit);  // the VM cannot shut down under it
  }
  return exit;
}

// The eager mode: runs the programs and prints the JSON line; the exit code.
int EagerMain(const StressOptions& o) {
  stress::EagerStressOptions options;
  options.programs = o.programs;
  options.seed = o.seed;
  options.shape = o.shape;
  options.jitter_us = o.jitter_us;
  options.soft_sync = !o.no_soft_sync;
  options.scheduling = o.scheduling == "caller" ? vm::VmOptions::Scheduling::kCallerThread
                                                : vm::VmOptions::Scheduling::kDedicatedThread;
  options.timeout_s = o.timeout_s;
  options.record_path = o.record_path;
  options.progress = true;
  options.fail_rate = o.fail_rate;
  if (o.fault_kinds != "all") {
    options.kernel_faults = o.fault_kinds == "kernel";
    options.device_faults = o.fault_kinds == "device";
    options.allocation_faults = o.fault_kinds == "allocation";
  }
  options.swallow_kernel_faults = o.swallow_faults;
  // SIGINT/SIGTERM: the programs in flight are cancelled and the run ends with a message.
  // Declared after `stop`, so it is gone before what its action touches.
  stress::StressStop stop;
  absl::StatusOr<std::unique_ptr<InterruptWatcher>> watcher = InterruptWatcher::Install();
  if (!watcher.ok()) return ReportFailure("stress", watcher.status());
  (*watcher)->SetAction([&stop] { stop.Stop(); });
  options.stop = &stop;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<stress::EagerStressTotals> totals = stress::RunEagerStress(options);
  if (!totals.ok()) return ReportFailure("stress", totals.status());
  if (totals->interrupted) {
    std::printf("%s\n", totals->ToJson().c_str());
    std::fprintf(stderr, "sluice stress: %s after %lld of %d programs\n",
                 (*watcher)->Message().c_str(), static_cast<long long>(totals->programs),
                 options.programs);
    return 128 + (*watcher)->signal();
  }
  const int exit = totals->problems() == o.expect_errors ? kExitOk : kExitFailure;
  if (totals->abandoned) {
    std::fprintf(stderr, "first problem: %s\n", totals->first_problem.c_str());
    std::fprintf(stderr, "sluice stress: a hung program could not be shut down; leaving\n");
    std::printf("%s\n", totals->ToJson().c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(exit);  // the VM cannot shut down under the hung program
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "sluice stress: %.2f s; %s\n", seconds, totals->vm_stats.c_str());
  if (!totals->first_sync_error.empty()) {
    std::fprintf(stderr, "first sync error: %s\n", totals->first_sync_error.c_str());
  }
  if (!totals->first_problem.empty()) {
    std::fprintf(stderr, "first problem: %s\n", totals->first_problem.c_str());
  }
  if (!totals->shutdown_error.empty()) {
    std::fprintf(stderr, "shutdown: %s\n", totals->shutdown_error.c_str());
  }
  std::printf("%s\n", totals->ToJson().c_str());
  return exit;
}

}  // namespace

int StressMain(int argc, char** argv) {
  StressOptions options;
  OptionParser parser(
      "stress",
      "Generates N random eager programs: T tensors of E floats placed on cpu and D sim\n"
      "devices, then M random ops (fill, add, mul, scale, copy) each on a random one of K\n"
      "streams of its output's device (copies may cross devices). Every program runs\n"
      "through the VM with the sync checker on; every tensor is then read back and compared\n"
      "bit for bit with a sequential host reference. Ends with one JSON line:\n"
      "  {\"programs\":..,\"instructions\":..,\"mismatches\":..,\"sync_errors\":..,\"hangs\":..}\n"
      "mismatches counts tensors that differ, sync_errors accesses the checker found\n"
      "unordered, hangs programs that did not finish within the timeout.\n"
      "With --fail-rate P faults are injected: kernels that fail, sim work items that fail\n"
      "(device errors) and allocations that fail (tensors are then created by the op that\n"
      "first writes them, whose error a refused allocation is). Each program then checks that "
      "every injected fault surfaced\n"
      "at its sync point (its reads and Sync) in an error naming the op that failed, that\n"
      "every tensor depending on a failed op reads back as an error, and that every other\n"
      "tensor still matches the reference bit for bit. The JSON line adds\n"
      "  \"faults_injected\",\"faults_reported\",\"faults_unnamed\",\n"
      "  \"wrong_independent_results\",\"dependents_not_skipped\"\n"
      "(faults whose error did not name the op; independent tensors that read back wrong or\n"
      "as errors; dependent tensors that read back as data).\n"
      "\n"
      "With --control-flow: N random static programs instead, each block 0 a sequence of M\n"
      "statements over T fed vectors of E floats and two fed scalars: elementwise ops (add,\n"
      "sub, mul, max, min, scale, relu), conds on comparisons of earlier values, whiles\n"
      "with a counter running 0..R times, loop-carried values and captured outer values,\n"
      "nested down to L levels; about half of block 0's ops pinned to random streams. Each\n"
      "program runs twice (two feed sets) through an executor on sim:0 (or --device cpu)\n"
      "with K compute streams, the sync checker on; every fetched value is compared bit for bit "
      "with a\n"
      "sequential host evaluation of the program. Ends with one JSON line:\n"
      "  {\"programs\":..,\"runs\":..,\"conds\":..,\"whiles\":..,\"stream_waits\":..,\n"
      "   \"pipelined_loops\":..,\"compared\":..,\"mismatches\":..,\"sync_errors\":..,\n"
      "   \"programs_with_sync_errors\":..,\"hangs\":..,\"run_errors\":..}\n"
      "stream_waits counts the cross-stream waits of the lowered programs,\n"
      "pipelined_loops their loops whose iterations overlap (cpu, K >= 2), mismatches\n"
      "fetched values that differ, programs_with_sync_errors the programs whose runs made\n"
      "the checker report, hangs runs not done within the timeout (then cancelled),\n"
      "run_errors runs that failed.\n",
      "Exit status: 0 when no mismatch, sync error, hang or failed run was found, and with\n"
      "--fail-rate every fault was reported naming its op and no result was wrong (with\n"
      "--expect-errors: when at least one was), 1 otherwise or when the run could not be\n"
      "set up, 2 for bad options.\n");
  DeclareOptions(parser, &options);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;
  if (const std::string error = Resolve(&options); !error.empty()) {
    std::fprintf(stderr, "%s\n", parser.UsageError(error).c_str());
    return kExitUsage;
  }
  if (options.control_flow) return ControlFlowMain(options);

  return EagerMain(options);
}

}  // namespace sluice::tools
