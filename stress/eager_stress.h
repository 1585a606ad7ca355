// The run loop of `sluice stress` (eager mode): N random eager programs
// (stress/stress_program.h) over cpu and sim streams, each issued through an
// InstructionsBuilder into one VM with the sync checker on, every tensor then read back and
// compared bit for bit with the sequential host reference. Counts mismatches, sync errors
// (the checker's violations), hangs (programs not finished within a timeout) and failed
// reads. With EagerStressOptions::fail_rate it injects faults (stress/fault_injection.h)
// and checks how the VM reports them and what it skips.
//
// Thread-compatible: one call at a time per process is the intended use (it creates a
// Runtime and VM of its own).
#ifndef SLUICE_STRESS_EAGER_STRESS_H_
#define SLUICE_STRESS_EAGER_STRESS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "stress/stress_program.h"
#include "vm/virtual_machine.h"

namespace sluice::stress {

// Stops a run from another thread (the CLI's interrupt watcher): Stop() cancels what the
// run's VM has in flight (Shutdown(kCancel): launched work finishes, the rest is skipped) and
// the run returns after the current program, with EagerStressTotals::interrupted set.
// Thread-safe; Stop() may come before the run has a VM (it is cancelled as it attaches), and
// returns once the cancel has taken effect.
class StressStop {
 public:
  void Stop();
  bool stopped() const;

  // The run's side: Stop() cancels `vm` from now until Detach (at once when already stopped).
  void Attach(vm::VirtualMachine* vm);
  void Detach();

 private:
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  vm::VirtualMachine* vm_ ABSL_GUARDED_BY(mu_) = nullptr;
};

struct EagerStressOptions {
  int programs = 100;
  uint64_t seed = 1;  // of the programs (program p: seed * 1000003 + p) and the sim delays
  StressShape shape;  // sim devices, streams per sim device, tensors, ops, elements
  int jitter_us = 0;  // the sim provider's random delay before each work item
  // InstructionsBuilder::set_soft_sync: without it no sync instructions are emitted, so the
  // checker must report the unordered accesses.
  bool soft_sync = true;
  vm::VmOptions::Scheduling scheduling = vm::VmOptions::Scheduling::kDedicatedThread;
  int timeout_s = 120;         // a program taking longer is a hang
  std::string record_path;     // VmOptions::record_path: every instruction to this file
  bool progress = false;       // a line on stderr every 10% of the programs
  StressStop* stop = nullptr;  // optional; must outlive the run

  // Fault injection (stress/fault_injection.h): with fail_rate > 0 each op's kernel fails,
  // each of its work items on a sim stream fails (a device error), and each allocation of
  // a tensor's storage fails, each with probability fail_rate, deterministically from
  // `seed`. Tensors are then created by their first writer (as an eager dispatcher creates
  // an op's output), so that a failed allocation is that op's error, returned by NewBlob at
  // once. Every program then checks that each injected
  // fault surfaced at its sync point (the program's reads and Sync) under the name of the
  // op that failed, that the tensors that depend on a failed op read back as errors, and
  // that every other tensor still matches the reference bit for bit. In [0, 1].
  double fail_rate = 0;
  // Which hooks inject (all by default); for runs of one kind alone.
  bool kernel_faults = true;
  bool device_faults = true;
  bool allocation_faults = true;
  // A check of the checks: a kernel fault is injected but swallowed (the kernel returns OK
  // without doing its work), so it is neither reported nor poisons anything; the run must
  // then count unreported faults and wrong independent results.
  bool swallow_kernel_faults = false;
};

struct EagerStressTotals {
  int64_t programs = 0;  // programs run (a hung one included)
  int64_t instructions = 0;
  int64_t mismatches = 0;   // tensors whose final contents differ from the reference
  int64_t sync_errors = 0;  // the checker's violation count
  int64_t hangs = 0;
  int64_t op_errors = 0;  // failed reads and syncs (with fail_rate: errors no fault explains)
  // With fail_rate > 0 (see EagerStressOptions): faults the hooks injected; those found as
  // the cause of an error at their program's sync point; those whose error did not name
  // the failed op ("op 'KERNEL' ... (stress op I)"); tensors that depend on no failed op
  // but read back wrong or as an error; tensors that depend on one but read back as data
  // (an op that should have been skipped ran, or its poison was lost).
  int64_t faults_injected = 0;
  int64_t faults_reported = 0;
  int64_t faults_unnamed = 0;
  int64_t wrong_independent_results = 0;
  int64_t dependents_not_skipped = 0;
  bool fault_injection = false;  // fail_rate > 0: ToJson adds the fields above
  // A hung program: the VM cannot be shut down under it, so it was left behind (leaked)
  // with its runtime, and the totals stop there.
  bool abandoned = false;
  // StressStop::Stop ended the run early: `programs` counts those that finished before it,
  // and the checks of the program it cut short are not counted.
  bool interrupted = false;
  std::string first_problem;     // "" when there was none
  std::string first_sync_error;  // the checker's first violation, or ""
  std::string vm_stats;          // VmStats::ToString() at the end ("" when abandoned)
  std::string shutdown_error;    // the VM's failed shutdown, or ""

  bool problems() const {
    return mismatches + sync_errors + hangs + op_errors + faults_unnamed +
                   wrong_independent_results + dependents_not_skipped >
               0 ||
           faults_reported != faults_injected;
  }
  // One JSON line: {"programs":..,"instructions":..,"mismatches":..,"sync_errors":..,
  // "hangs":..}; with fault injection also "faults_injected", "faults_reported",
  // "faults_unnamed", "wrong_independent_results" and "dependents_not_skipped".
  std::string ToJson() const;
};

// Errors (nothing to count): InvalidArgument naming an option outside the range `sluice
// stress` accepts (or fail_rate with record_path: a replay would not fail alike); the runtime, VM
// or kernels could not be set up, or a program's instructions could not be issued (the message
// names the program).
absl::StatusOr<EagerStressTotals> RunEagerStress(const EagerStressOptions& options);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_EAGER_STRESS_H_
