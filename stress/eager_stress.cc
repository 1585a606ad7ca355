#include "stress/eager_stress.h"

#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/fault_injecting_allocator.h"
#include "core/fault_injector.h"
#include "core/status.h"
#include "ep/runtime.h"
#include "ops/kernel_registry.h"
#include "ops/stress_kernels.h"
#include "stress/fault_injection.h"
#include "vm/instructions_builder.h"
#include "vm/sync_checker.h"

namespace sluice::stress {
namespace {

void NoteProblem(EagerStressTotals* totals, std::string problem) {
  if (totals->first_problem.empty()) totals->first_problem = std::move(problem);
}

// Everything a program's run touches. Shared with the thread that runs the program, so
// that a hung run can be left behind with all of it (the VM cannot shut down under it).
struct RunState {
  ops::KernelRegistry kernels;  // outlives the VM, which may run them until it shuts down
  // Fault injection (null / empty without it). The injectors and the allocators outlive
  // the runtime's devices and the blobs whose storage they hand out.
  std::unique_ptr<FaultInjector> kernel_faults, device_faults, allocation_faults;
  ops::KernelRegistry fault_kernels;  // wrappers around `kernels`
  std::deque<FaultInjectingAllocator> allocators;
  std::unique_ptr<ep::Runtime> runtime;
  std::unique_ptr<vm::VirtualMachine> machine;
  // The program's tensors; the last program's stay alive until shutdown, so that a
  // recording ends with their checksums.
  std::vector<vm::BlobRef> blobs;
  // The ops' origins (fault injection), alive until the program's Sync retired its calls.
  std::vector<std::unique_ptr<StressOpOrigin>> origins;
  EagerStressTotals totals;
};

int64_t FaultsFired(const RunState& state) {
  int64_t fired = 0;
  for (const auto* faults :
       {&state.kernel_faults, &state.device_faults, &state.allocation_faults}) {
    if (*faults != nullptr) fired += (*faults)->fired();
  }
  return fired;
}

// Checks one program's run under fault injection (see EagerStressOptions::fail_rate):
// `reads[t]` is tensor t's read, `errors` every error its Sync surfaced, `fired_before`
// the faults fired before the program. Adds the findings to `totals`.
void CheckFaults(const StressProgram& program, int64_t elements,
                 const std::vector<absl::StatusOr<std::vector<uint8_t>>>& reads,
                 const std::vector<absl::Status>& errors, int64_t fired_before, int64_t fired_after,
                 EagerStressTotals* totals) {
  const int64_t injected = fired_after - fired_before;
  totals->faults_injected += injected;
  // The faults seen, each with whether an error carrying it named its op.
  struct Seen {
    bool named = false;
    std::string example;  // an error carrying it, for the problem's message
  };
  absl::flat_hash_map<std::string, Seen> seen;
  std::vector<bool> failed(program.ops.size(), false);
  auto trace = [&](const absl::Status& error) {
    const FaultTrace faults = TraceFaults(error.message());
    if (faults.faults.empty()) {
      ++totals->op_errors;
      NoteProblem(totals, absl::StrCat("an error no injected fault explains: ", error.ToString()));
      return;
    }
    // The first fault of an error is its cause; the op the error names is the one that
    // failed (a skipped op's error is its cause's, unchanged).
    const bool named = faults.op >= 0 && static_cast<size_t>(faults.op) < program.ops.size() &&
                       faults.kernel == program.ops[faults.op].KernelName();
    if (named) failed[faults.op] = true;
    Seen& entry = seen[faults.faults.front()];
    entry.named = entry.named || named;
    if (entry.example.empty()) entry.example = error.ToString();
  };
  for (const absl::Status& error : errors) trace(error);
  for (const auto& read : reads) {
    if (!read.ok()) trace(read.status());
  }
  int64_t unnamed = 0;
  for (const auto& [fault, entry] : seen) {
    if (entry.named) continue;
    ++unnamed;
    NoteProblem(totals,
                absl::StrCat(fault, ": no error names the op that failed: ", entry.example));
  }
  totals->faults_unnamed += unnamed;
  totals->faults_reported += static_cast<int64_t>(seen.size());
  if (static_cast<int64_t>(seen.size()) != injected) {
    NoteProblem(totals, absl::StrFormat("%d fault(s) injected in a program, %d reported", injected,
                                        seen.size()));
  }
  const std::vector<bool> tainted = TaintedTensors(program, failed);
  const std::vector<std::vector<float>> expected = RunStressReference(program, elements);
  for (size_t t = 0; t < reads.size(); ++t) {
    const auto& read = reads[t];
    if (tainted[t]) {
      if (read.ok()) {
        ++totals->dependents_not_skipped;
        NoteProblem(totals, absl::StrFormat("tensor t%d depends on a failed op but holds data", t));
      }
      continue;
    }
    if (!read.ok()) {
      ++totals->wrong_independent_results;
      NoteProblem(totals, absl::StrFormat("tensor t%d depends on no failed op but reads as %s", t,
                                          read.status().ToString()));
    } else if (std::memcmp(read->data(), expected[t].data(), read->size()) != 0) {
      ++totals->wrong_independent_results;
      ++totals->mismatches;
      NoteProblem(totals, absl::StrFormat("tensor t%d depends on no failed op but differs from the "
                                          "reference",
                                          t));
    }
  }
}

vm::AttrMap OpAttrs(const StressOp& op) {
  vm::AttrMap attrs;
  if (op.kind == StressOp::Kind::kFill) attrs.Set("value", static_cast<double>(op.value));
  if (op.kind == StressOp::Kind::kScale) {
    attrs.Set("alpha", static_cast<double>(op.value)).Set("beta", static_cast<double>(op.beta));
  }
  return attrs;
}

// RunProgram under fault injection (EagerStressOptions::fail_rate). Tensors are created by
// their first writer, as an eager dispatcher creates an op's output: through an allocator of
// the tensor's own (a FaultInjectingAllocator keyed by program and tensor, so the same
// allocations fail on every run), whose refusal is the op's error, returned at once by
// NewBlob — eager blobs allocate when created, never inside an instruction. A tensor
// without a blob (its allocation failed, or an op reading such a tensor was not issued)
// carries that error: ops reading it are not issued and their output loses its blob too;
// the next op writing it allocates again. Everything else goes through the VM.
absl::Status RunFaultProgram(const StressProgram& program, uint64_t program_index,
                             const EagerStressOptions& options, RunState* state) {
  vm::VirtualMachine* machine = state->machine.get();
  vm::InstructionsBuilder builder(machine);
  builder.set_soft_sync(options.soft_sync);
  const int64_t elements = options.shape.elements;
  const size_t tensors = program.tensor_home.size();
  std::vector<vm::BlobRef>& blobs = state->blobs;
  blobs.assign(tensors, nullptr);
  std::vector<absl::Status> missing(tensors);  // why a tensor has no blob
  std::vector<FaultInjectingAllocator*> allocators;
  for (size_t t = 0; t < tensors; ++t) {
    SLUICE_ASSIGN_OR_RETURN(ep::Device * device,
                            state->runtime->GetDevice(program.tensor_home[t].device));
    state->allocators.emplace_back(&device->allocator(), state->allocation_faults.get(),
                                   (program_index << 16) | t);
    allocators.push_back(&state->allocators.back());
  }
  state->origins.clear();
  std::vector<absl::Status> errors;  // dispatch errors, then the Sync's
  const int64_t fired_before = FaultsFired(*state);
  for (size_t i = 0; i < program.ops.size(); ++i) {
    const StressOp& op = program.ops[i];
    const int y = op.y;
    const int operands[] = {op.a, op.b};
    absl::Status absent;
    for (int x : operands) {
      if (x >= 0 && blobs[x] == nullptr && absent.ok()) absent = missing[x];
    }
    if (!absent.ok()) {  // not issued: its output carries the cause, as a skipped op's would
      blobs[y] = nullptr;
      missing[y] = absent;
      continue;
    }
    if (blobs[y] == nullptr) {
      SLUICE_ASSIGN_OR_RETURN(vm::Stream * home, machine->GetStream(program.tensor_home[y]));
      absl::StatusOr<vm::BlobRef> blob = machine->NewBlob(home, DataType::kF32, Shape({elements}),
                                                          absl::StrFormat("t%d", y), allocators[y]);
      if (!blob.ok()) {
        // The op's error, named as the VM names an op's (its origin included).
        missing[y] = absl::Status(blob.status().code(),
                                  absl::StrCat("op '", op.KernelName(), "' (stress op ", i,
                                               "): ", blob.status().message()));
        errors.push_back(missing[y]);
        continue;
      }
      blobs[y] = *std::move(blob);
    }
    SLUICE_ASSIGN_OR_RETURN(vm::Stream * stream, machine->GetStream(op.stream));
    SLUICE_ASSIGN_OR_RETURN(const vm::OpKernel* kernel, state->fault_kernels.Find(op.KernelName()));
    vm::BlobList inputs;
    for (int x : operands) {
      if (x >= 0) inputs.push_back(blobs[x]);
    }
    vm::AttrMap attrs = OpAttrs(op);
    // The op's place in the run keys its kernel fault: the same ops fail on every run.
    attrs.Set(std::string(kFaultKeyAttr),
              static_cast<int64_t>((program_index << 24) | static_cast<uint64_t>(i)));
    state->origins.push_back(std::make_unique<StressOpOrigin>(static_cast<int>(i)));
    builder.set_origin(state->origins.back().get());
    SLUICE_RETURN_IF_ERROR(
        builder.Call(*kernel, std::move(inputs), {blobs[y]}, std::move(attrs), stream));
  }
  builder.set_origin(nullptr);
  std::vector<absl::StatusOr<std::vector<uint8_t>>> reads;
  for (size_t t = 0; t < tensors; ++t) {
    if (blobs[t] == nullptr) {
      reads.push_back(missing[t]);
    } else {
      reads.push_back(builder.ReadBlob(blobs[t]));
    }
  }
  machine->Sync(&errors).IgnoreError();  // its first error is among those it appends
  CheckFaults(program, elements, reads, errors, fired_before, FaultsFired(*state), &state->totals);
  return absl::OkStatus();
}

// Runs one program through the VM; adds its findings to `state->totals`. A failed read or
// sync is an op error (the program still counts); an error is returned only when the
// program's instructions could not be issued.
absl::Status RunProgram(const StressProgram& program, uint64_t program_index,
                        const EagerStressOptions& options, RunState* state) {
  if (options.fail_rate > 0) return RunFaultProgram(program, program_index, options, state);
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
    SLUICE_RETURN_IF_ERROR(
        builder.Call(*kernel, std::move(inputs), {blobs[op.y]}, OpAttrs(op), stream));
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
  std::string json = absl::StrFormat(
      "{\"programs\":%d,\"instructions\":%d,\"mismatches\":%d,\"sync_errors\":%d,\"hangs\":%d",
      programs, instructions, mismatches, sync_errors, hangs);
  if (fault_injection) {
    absl::StrAppendFormat(&json,
                          ",\"faults_injected\":%d,\"faults_reported\":%d,\"faults_unnamed\":%d,"
                          "\"wrong_independent_results\":%d,\"dependents_not_skipped\":%d",
                          faults_injected, faults_reported, faults_unnamed,
                          wrong_independent_results, dependents_not_skipped);
  }
  return json + "}";
}

namespace {

// The ranges `sluice stress` accepts and the combinations it refuses.
absl::Status CheckEagerStressOptions(const EagerStressOptions& options) {
  // The generator draws indices modulo these counts.
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
  if (!(options.fail_rate >= 0 && options.fail_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stress: fail_rate ", options.fail_rate, " is outside 0..1"));
  }
  const bool faults = options.fail_rate > 0;
  if (faults && !options.record_path.empty()) {
    return absl::InvalidArgumentError(
        "stress: fault injection does not combine with a recording (a replay would not fail "
        "alike)");
  }
  return absl::OkStatus();
}

// The run's runtime (sim devices with the jitter and device faults asked for), its VM
// (sync-checked, recording when asked), the stress kernels and the fault injectors.
absl::Status SetUpEagerStress(const EagerStressOptions& options, RunState* state) {
  const bool faults = options.fail_rate > 0;
  state->totals.fault_injection = faults;
  ep::RuntimeOptions runtime_options;
  runtime_options.num_sim_devices = options.shape.sim_devices;
  runtime_options.sim.seed = options.seed;
  runtime_options.sim.max_jitter_us = options.jitter_us;
  if (faults) {
    // One injector per kind, each with a seed of its own drawn from `seed`.
    auto injector = [&](bool on, uint64_t salt, const char* what) {
      return std::make_unique<FaultInjector>(on ? options.fail_rate : 0.0,
                                             options.seed * 0x9e3779b97f4a7c15ull + salt, what);
    };
    state->kernel_faults = injector(options.kernel_faults, 1, "kernel");
    state->device_faults = injector(options.device_faults, 2, "device");
    state->allocation_faults = injector(options.allocation_faults, 3, "allocation");
    if (options.device_faults) runtime_options.sim.device_faults = state->device_faults.get();
  }
  runtime_options.enable_cuda = false;
  SLUICE_ASSIGN_OR_RETURN(state->runtime, ep::Runtime::Create(runtime_options));
  vm::VmOptions vm_options;
  vm_options.check_sync = true;
  vm_options.record_path = options.record_path;
  vm_options.scheduling = options.scheduling;
  SLUICE_ASSIGN_OR_RETURN(state->machine,
                          vm::VirtualMachine::Create(state->runtime.get(), vm_options));
  SLUICE_RETURN_IF_ERROR(ops::RegisterStressKernels(&state->kernels));
  if (faults) {
    SLUICE_RETURN_IF_ERROR(RegisterFaultInjectingKernels(state->kernels, state->kernel_faults.get(),
                                                         options.swallow_kernel_faults,
                                                         &state->fault_kernels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EagerStressTotals> RunEagerStress(const EagerStressOptions& options) {
  SLUICE_RETURN_IF_ERROR(CheckEagerStressOptions(options));
  auto state = std::make_shared<RunState>();
  SLUICE_RETURN_IF_ERROR(SetUpEagerStress(options, state.get()));
  const vm::SyncChecker& checker = *state->machine->sync_checker();

  if (options.stop != nullptr) options.stop->Attach(state->machine.get());
  // Detached before the VM shuts down below (or is left behind by a hang).
  absl::Cleanup detach = [&options] {
    if (options.stop != nullptr) options.stop->Detach();
  };
  const auto stopped = [&options] { return options.stop != nullptr && options.stop->stopped(); };
  bool interrupted = false;
  int reported_percent = 0;
  for (int p = 0; p < options.programs; ++p) {
    if (stopped()) {
      interrupted = true;
      break;
    }
    const EagerStressTotals before = state->totals;
    auto program = std::make_shared<const StressProgram>(
        GenerateStressProgram(options.shape, options.seed * 1000003 + p));
    auto run_status = std::make_shared<absl::Status>();
    auto finished = std::make_shared<absl::Notification>();
    // The program runs on its own thread so that a hang is detected instead of inherited.
    // The thread holds what it uses, so that a hung one can be left behind.
    std::thread runner([state, program, run_status, finished, options, p] {
      *run_status = RunProgram(*program, static_cast<uint64_t>(p), options, state.get());
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
    if (stopped()) {  // cut short: its failures and checks are the cancellation's
      state->totals = before;
      interrupted = true;
      break;
    }
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
  std::move(detach).Invoke();
  EagerStressTotals totals = std::move(state->totals);
  totals.interrupted = interrupted;
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

// Shutdown runs under the lock: Detach waits for it, so the VM, which the run shuts down and
// destroys only after detaching, outlives the call. Shutdown(kCancel) waits only for launched
// work, which never waits for this object.
void StressStop::Stop() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  stopped_ = true;
  if (vm_ != nullptr) (void)vm_->Shutdown(vm::ShutdownMode::kCancel);
}

bool StressStop::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

void StressStop::Attach(vm::VirtualMachine* vm) {
  absl::MutexLock lock(&mu_);
  vm_ = vm;
  if (stopped_) (void)vm_->Shutdown(vm::ShutdownMode::kCancel);
}

void StressStop::Detach() {
  absl::MutexLock lock(&mu_);
  vm_ = nullptr;
}

}  // namespace sluice::stress
