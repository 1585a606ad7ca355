#include "tools/stress_command.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "tools/options.h"
#include "tools/stress_program.h"
#include "vm/instructions_builder.h"
#include "vm/virtual_machine.h"

namespace sluice::tools {
namespace {

struct Options {
  int programs = 100;
  int jitter_us = 0;
  uint64_t seed = 1;
  bool no_soft_sync = false;
  bool expect_errors = false;
  std::string scheduling = "dedicated";
  int timeout_s = 120;
  std::string record_path;
  StressShape shape;
};

struct Totals {
  int64_t programs = 0;
  int64_t instructions = 0;
  int64_t mismatches = 0;  // tensors whose final contents differ from the reference
  int64_t sync_errors = 0;
  int64_t hangs = 0;
  int64_t op_errors = 0;
  std::string first_problem;
};

void DeclareOptions(OptionParser& parser, Options* o) {
  parser.AddInteger("--programs", "N", "programs to run", 1, 100000000, &o->programs);
  parser.AddInteger("--streams", "K", "compute streams per sim device", 1, 64, &o->shape.streams);
  parser.AddInteger("--devices", "D", "sim devices", 1, ep::Runtime::kMaxSimDevices,
                    &o->shape.sim_devices);
  parser.AddInteger<uint64_t>("--seed", "S", "seed of programs and sim delays", 0, INT64_MAX,
                              &o->seed);
  parser.AddInteger("--jitter-us", "J", "random delay of up to J us before each sim work item", 0,
                    1000000, &o->jitter_us);
  parser.AddFlag("--no-soft-sync",
                 "emit no sync instructions: the run must then report errors, which proves the "
                 "checks can fail",
                 &o->no_soft_sync);
  parser.AddFlag("--expect-errors",
                 "exit 0 only if errors were reported (for --no-soft-sync in CI)",
                 &o->expect_errors);
  parser.AddInteger("--tensors", "T", "tensors per program", 1, 10000, &o->shape.tensors);
  parser.AddInteger("--ops", "M", "random ops per program after the initial fills", 0, 1000000,
                    &o->shape.ops);
  parser.AddInteger<int64_t>("--elements", "E", "floats per tensor", 1, 1 << 24,
                             &o->shape.elements);
  parser.AddChoice("--scheduling", "X", "dedicated (a scheduler thread) or caller",
                   {"dedicated", "caller"}, &o->scheduling);
  parser.AddInteger("--timeout-s", "T", "a program running longer counts as a hang", 1, 86400,
                    &o->timeout_s);
  parser.AddString("--record", "FILE",
                   "record every instruction (docs/instruction_record_format.md); `sluice replay "
                   "FILE` re-executes the run and checks the final tensors of the last program",
                   &o->record_path);
}

// Runs one program through the VM; adds its findings to `totals`. A failed VM call is an
// op error (the program still counts). The program's tensors are left in `blobs` (the last
// program's stay alive until shutdown, so that a recording ends with their checksums).
absl::Status RunProgram(const StressProgram& program, const Options& options,
                        vm::VirtualMachine* machine, const ops::KernelRegistry& kernels,
                        Totals* totals, std::vector<vm::BlobRef>& blobs) {
  vm::InstructionsBuilder builder(machine);
  builder.set_soft_sync(!options.no_soft_sync);
  const int64_t elements = options.shape.elements;
  blobs.clear();
  for (size_t t = 0; t < program.tensor_home.size(); ++t) {
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * home, machine->GetStream(program.tensor_home[t]));
    SLUICE_ASSIGN_OR_RETURN(
        vm::BlobRef blob,
        machine->NewBlob(home, DataType::kF32, Shape({elements}), absl::StrFormat("t%d", t)));
    blobs.push_back(std::move(blob));
  }
  for (const StressOp& op : program.ops) {
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * stream, machine->GetStream(op.stream));
    SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* kernel, kernels.Find(op.KernelName()));
    vm::BlobList inputs;
    if (op.a >= 0) inputs.push_back(blobs[op.a]);
    if (op.b >= 0) inputs.push_back(blobs[op.b]);
    vm::AttrMap attrs;
    if (op.kind == StressOp::Kind::kFill) attrs.Set("value", static_cast<double>(op.value));
    if (op.kind == StressOp::Kind::kScale) {
      attrs.Set("alpha", static_cast<double>(op.value)).Set("beta", static_cast<double>(op.beta));
    }
    SLUICE_RETURN_IF_ERROR(
        builder.Call(*kernel, std::move(inputs), {blobs[op.y]}, std::move(attrs), stream));
  }
  const std::vector<std::vector<float>> expected = RunStressReference(program, elements);
  for (size_t t = 0; t < blobs.size(); ++t) {
    absl::StatusOr<std::vector<uint8_t>> bytes = builder.ReadBlob(blobs[t]);
    if (!bytes.ok()) {
      ++totals->op_errors;
      if (totals->first_problem.empty()) totals->first_problem = bytes.status().ToString();
      continue;
    }
    if (std::memcmp(bytes->data(), expected[t].data(), bytes->size()) != 0) {
      ++totals->mismatches;
      if (totals->first_problem.empty()) {
        totals->first_problem = absl::StrFormat("tensor t%d differs from the reference", t);
      }
    }
  }
  const absl::Status synced = machine->Sync();
  if (!synced.ok()) {
    ++totals->op_errors;
    if (totals->first_problem.empty()) totals->first_problem = synced.ToString();
  }
  return absl::OkStatus();
}

}  // namespace

int StressMain(int argc, char** argv) {
  Options options;
  OptionParser parser(
      "stress",
      "Generates N random eager programs: T tensors of E floats placed on cpu and D sim\n"
      "devices, then M random ops (fill, add, mul, scale, copy) each on a random one of K\n"
      "streams of its output's device (copies may cross devices). Every program runs\n"
      "through the VM with the sync checker on; every tensor is then read back and compared\n"
      "bit for bit with a sequential host reference. Ends with one JSON line:\n"
      "  {\"programs\":..,\"instructions\":..,\"mismatches\":..,\"sync_errors\":..,\"hangs\":..}\n"
      "mismatches counts tensors that differ, sync_errors accesses the checker found\n"
      "unordered, hangs programs that did not finish within the timeout.\n",
      "Exit status: 0 when no mismatch, sync error or hang was found (with\n"
      "--expect-errors: when at least one was), 1 otherwise or when the run could not be\n"
      "set up, 2 for bad options.\n");
  DeclareOptions(parser, &options);
  if (std::optional<int> exit = ParseCommandLine(parser, argc, argv)) return *exit;

  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = options.shape.sim_devices;
  runtime_options.sim.seed = options.seed;
  runtime_options.sim.max_jitter_us = options.jitter_us;
  runtime_options.enable_cuda = false;
  absl::StatusOr<std::unique_ptr<ep::Runtime>> runtime = ep::Runtime::Create(runtime_options);
  if (!runtime.ok()) return ReportFailure("stress", runtime.status());
  vm::VmOptions vm_options;
  vm_options.check_sync = true;
  vm_options.record_path = options.record_path;
  vm_options.scheduling = options.scheduling == "caller"
                              ? vm::VmOptions::Scheduling::kCallerThread
                              : vm::VmOptions::Scheduling::kDedicatedThread;
  absl::StatusOr<std::unique_ptr<vm::VirtualMachine>> machine =
      vm::VirtualMachine::Create(runtime->get(), vm_options);
  if (!machine.ok()) return ReportFailure("stress", machine.status());
  ops::KernelRegistry kernels;
  if (absl::Status registered = ops::RegisterStressKernels(&kernels); !registered.ok()) {
    return ReportFailure("stress", registered);
  }

  Totals totals;
  std::vector<vm::BlobRef> blobs;
  const auto start = std::chrono::steady_clock::now();
  int reported_percent = 0;
  for (int p = 0; p < options.programs; ++p) {
    const StressProgram program = GenerateStressProgram(options.shape, options.seed * 1000003 + p);
    absl::Status run_status;
    absl::Notification finished;
    // The program runs on its own thread so that a hang is detected instead of inherited.
    std::thread runner([&] {
      run_status = RunProgram(program, options, machine->get(), kernels, &totals, blobs);
      finished.Notify();
    });
    if (!finished.WaitForNotificationWithTimeout(absl::Seconds(options.timeout_s))) {
      ++totals.hangs;
      std::fprintf(stderr, "sluice stress: program %d did not finish within %d s\n", p,
                   options.timeout_s);
      // A hung VM cannot be shut down cleanly: report and leave.
      std::printf(
          "{\"programs\":%d,\"instructions\":%lld,\"mismatches\":%lld,\"sync_errors\":%lld,"
          "\"hangs\":%lld}\n",
          p + 1, static_cast<long long>((*machine)->stats().instructions),
          static_cast<long long>(totals.mismatches),
          static_cast<long long>((*machine)->sync_checker()->violation_count()),
          static_cast<long long>(totals.hangs));
      std::fflush(stdout);
      runner.detach();
      std::_Exit(options.expect_errors ? kExitOk : kExitFailure);
    }
    runner.join();
    if (!run_status.ok()) {
      std::fprintf(stderr, "sluice stress: program %d: %s\n", p, run_status.ToString().c_str());
      return kExitFailure;
    }
    ++totals.programs;
    const int percent = static_cast<int>(100LL * (p + 1) / options.programs);
    if (percent >= reported_percent + 10 || p + 1 == options.programs) {
      reported_percent = percent - percent % 10;
      std::fprintf(stderr,
                   "sluice stress: %d/%d programs (%d%%), %lld sync errors, %lld mismatches\n",
                   p + 1, options.programs, percent,
                   static_cast<long long>((*machine)->sync_checker()->violation_count()),
                   static_cast<long long>(totals.mismatches));
    }
  }
  totals.sync_errors = (*machine)->sync_checker()->violation_count();
  const std::vector<vm::SyncViolation> violations = (*machine)->sync_checker()->violations();
  totals.instructions = (*machine)->stats().instructions;
  const vm::VmStats stats = (*machine)->stats();
  const absl::Status shutdown = (*machine)->Shutdown();
  blobs.clear();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::fprintf(stderr, "sluice stress: %.2f s; %s\n", seconds, stats.ToString().c_str());
  if (!violations.empty()) {
    std::fprintf(stderr, "first sync error: %s\n", violations.front().ToString().c_str());
  }
  if (!totals.first_problem.empty()) {
    std::fprintf(stderr, "first problem: %s\n", totals.first_problem.c_str());
  }
  if (!shutdown.ok()) std::fprintf(stderr, "shutdown: %s\n", shutdown.ToString().c_str());
  std::printf(
      "{\"programs\":%lld,\"instructions\":%lld,\"mismatches\":%lld,\"sync_errors\":%lld,"
      "\"hangs\":%lld}\n",
      static_cast<long long>(totals.programs), static_cast<long long>(totals.instructions),
      static_cast<long long>(totals.mismatches), static_cast<long long>(totals.sync_errors),
      static_cast<long long>(totals.hangs));
  const bool errors =
      totals.mismatches > 0 || totals.sync_errors > 0 || totals.hangs > 0 || totals.op_errors > 0;
  return errors == options.expect_errors ? kExitOk : kExitFailure;
}

}  // namespace sluice::tools
