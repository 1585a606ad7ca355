#include "stress/eager_stress.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"

namespace sluice::stress {
namespace {

// Everything a program's run touches. Shared with the thread that runs the program, so
// that a hung run can be left behind with all of it (the VM cannot shut down under it).
struct RunState {
  ops::KernelRegistry kernels;  // outlives the VM, which may run them until it shuts down
  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> machine;
  // The program's tensors; the last program's stay alive until shutdown, so that a
  // recording ends with their checksums.
  std::vector<vm::BlobRef> blobs;
  EagerStressTotals totals;
};

void NoteProblem(EagerStressTotals* totals, std::string problem) {
  if (totals->first_problem.empty()) totals->first_problem = std::move(problem);
}

// Runs one program through the VM; adds its findings to `state->totals`. A failed read or
// sync is an op error (the program still counts); an error is returned only when the
// program's instructions could not be issued.
absl::Status RunProgram(const StressProgram& program, const EagerStressOptions& options,
                        RunState* state) {
  vm::VirtualMachine* machine = state->machine.get();
  vm::InstructionsBuilder builder(machine);
  builder.set_soft_sync(options.soft_sync);
  const int64_t elements = options.shape.elements;
  std::vector<vm::BlobRef>& blobs = state->blobs;
  EagerStressTotals* totals = &state->totals;
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
    SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* kernel, state->kernels.Find(op.KernelName()));
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
      NoteProblem(totals, bytes.status().ToString());
      continue;
    }
    if (std::memcmp(bytes->data(), expected[t].data(), bytes->size()) != 0) {
      ++totals->mismatches;
      NoteProblem(totals, absl::StrFormat("tensor t%d differs from the reference", t));
    }
  }
  const absl::Status synced = machine->Sync();
  if (!synced.ok()) {
    ++totals->op_errors;
    NoteProblem(totals, synced.ToString());
  }
  return absl::OkStatus();
}

}  // namespace

std::string EagerStressTotals::ToJson() const {
  return absl::StrFormat(
      "{\"programs\":%d,\"instructions\":%d,\"mismatches\":%d,\"sync_errors\":%d,\"hangs\":%d}",
      programs, instructions, mismatches, sync_errors, hangs);
}

absl::StatusOr<EagerStressTotals> RunEagerStress(const EagerStressOptions& options) {
  // The ranges `sluice stress` accepts; the generator draws indices modulo these counts.
  const struct {
    const char* name;
    int64_t value, min, max;
  } kRanges[] = {{"programs", options.programs, 1, 100000000},
                 {"streams", options.shape.streams, 1, 64},
                 {"sim_devices", options.shape.sim_devices, 1, ep::Runtime::kMaxSimDevices},
                 {"tensors", options.shape.tensors, 1, 10000},
                 {"ops", options.shape.ops, 0, 1000000},
                 {"elements", options.shape.elements, 1, int64_t{1} << 24},
                 {"jitter_us", options.jitter_us, 0, 1000000},
                 {"timeout_s", options.timeout_s, 1, 86400}};
  for (const auto& r : kRanges) {
    if (r.value < r.min || r.value > r.max) {
      return absl::InvalidArgumentError(
          absl::StrCat("stress: ", r.name, " ", r.value, " is outside ", r.min, "..", r.max));
    }
  }
  auto state = std::make_shared<RunState>();
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = options.shape.sim_devices;
  runtime_options.sim.seed = options.seed;
  runtime_options.sim.max_jitter_us = options.jitter_us;
  runtime_options.enable_cuda = false;
  SLUICE_ASSIGN_OR_RETURN(state->runtime, ep::Runtime::Create(runtime_options));
  vm::VmOptions vm_options;
  vm_options.check_sync = true;
  vm_options.record_path = options.record_path;
  vm_options.scheduling = options.scheduling;
  SLUICE_ASSIGN_OR_RETURN(state->machine,
                          vm::VirtualMachine::Create(state->runtime.get(), vm_options));
  SLUICE_RETURN_IF_ERROR(ops::RegisterStressKernels(&state->kernels));
  const vm::SyncChecker& checker = *state->machine->sync_checker();

  int reported_percent = 0;
  for (int p = 0; p < options.programs; ++p) {
    auto program = std::make_shared<const StressProgram>(
        GenerateStressProgram(options.shape, options.seed * 1000003 + p));
    auto run_status = std::make_shared<absl::Status>();
    auto finished = std::make_shared<absl::Notification>();
    // The program runs on its own thread so that a hang is detected instead of inherited.
    // The thread holds what it uses, so that a hung one can be left behind.
    std::thread runner([state, program, run_status, finished, options] {
      *run_status = RunProgram(*program, options, state.get());
      finished->Notify();
    });
    if (!finished->WaitForNotificationWithTimeout(absl::Seconds(options.timeout_s))) {
      // A hung VM cannot be shut down cleanly: the runner keeps the state alive for as long
      // as it runs, and the totals are a copy taken now.
      runner.detach();
      EagerStressTotals totals = state->totals;
      ++totals.hangs;
      totals.programs = p + 1;
      totals.instructions = state->machine->stats().instructions;
      totals.sync_errors = checker.violation_count();
      totals.abandoned = true;
      NoteProblem(&totals,
                  absl::StrFormat("program %d did not finish within %d s", p, options.timeout_s));
      return totals;
    }
    runner.join();
    if (!run_status->ok()) {
      return absl::Status(run_status->code(),
                          absl::StrCat("program ", p, ": ", run_status->message()));
    }
    ++state->totals.programs;
    const int percent = static_cast<int>(100LL * (p + 1) / options.programs);
    if (options.progress && (percent >= reported_percent + 10 || p + 1 == options.programs)) {
      reported_percent = percent - percent % 10;
      std::fprintf(
          stderr, "sluice stress: %d/%d programs (%d%%), %lld sync errors, %lld mismatches\n",
          p + 1, options.programs, percent, static_cast<long long>(checker.violation_count()),
          static_cast<long long>(state->totals.mismatches));
    }
  }
  EagerStressTotals totals = std::move(state->totals);
  totals.sync_errors = checker.violation_count();
  if (const std::vector<vm::SyncViolation> violations = checker.violations(); !violations.empty()) {
    totals.first_sync_error = violations.front().ToString();
  }
  const vm::VmStats stats = state->machine->stats();
  totals.instructions = stats.instructions;
  totals.vm_stats = stats.ToString();
  if (const absl::Status shutdown = state->machine->Shutdown(); !shutdown.ok()) {
    totals.shutdown_error = shutdown.ToString();
  }
  return totals;
}

}  // namespace sluice::stress
