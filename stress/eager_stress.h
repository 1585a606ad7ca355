// The run loop of `sluice stress` (eager mode): N random eager programs
// (stress/stress_program.h) over cpu and sim streams, each issued through an
// InstructionsBuilder into one VM with the sync checker on, every tensor then read back and
// compared bit for bit with the sequential host reference. Counts mismatches, sync errors
// (the checker's violations), hangs (programs not finished within a timeout) and failed
// reads.
//
// Thread-compatible: one call at a time per process is the intended use (it creates a
// Runtime and VM of its own).
#ifndef SLUICE_STRESS_EAGER_STRESS_H_
#define SLUICE_STRESS_EAGER_STRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "stress/stress_program.h"
#include "vm/virtual_machine.h"

namespace sluice::stress {

struct EagerStressOptions {
  int programs = 100;
  uint64_t seed = 1;  // of the programs (program p: seed * 1000003 + p) and the sim delays
  StressShape shape;  // sim devices, streams per sim device, tensors, ops, elements
  int jitter_us = 0;  // the sim provider's random delay before each work item
  // InstructionsBuilder::set_soft_sync: without it no sync instructions are emitted, so the
  // checker must report the unordered accesses.
  bool soft_sync = true;
  vm::VmOptions::Scheduling scheduling = vm::VmOptions::Scheduling::kDedicatedThread;
  int timeout_s = 120;      // a program taking longer is a hang
  std::string record_path;  // VmOptions::record_path: every instruction to this file
  bool progress = false;    // a line on stderr every 10% of the programs
};

struct EagerStressTotals {
  int64_t programs = 0;  // programs run (a hung one included)
  int64_t instructions = 0;
  int64_t mismatches = 0;   // tensors whose final contents differ from the reference
  int64_t sync_errors = 0;  // the checker's violation count
  int64_t hangs = 0;
  int64_t op_errors = 0;  // failed reads and syncs
  // A hung program: the VM cannot be shut down under it, so it was left behind (leaked)
  // with its runtime, and the totals stop there.
  bool abandoned = false;
  std::string first_problem;     // "" when there was none
  std::string first_sync_error;  // the checker's first violation, or ""
  std::string vm_stats;          // VmStats::ToString() at the end ("" when abandoned)
  std::string shutdown_error;    // the VM's failed shutdown, or ""

  bool problems() const { return mismatches + sync_errors + hangs + op_errors > 0; }
  // One JSON line: {"programs":..,"instructions":..,"mismatches":..,"sync_errors":..,
  // "hangs":..}.
  std::string ToJson() const;
};

// Errors (nothing to count): InvalidArgument naming an option outside the range `sluice
// stress` accepts; the runtime, VM or kernels could not be set up, or a program's
// instructions could not be issued (the message names the program).
absl::StatusOr<EagerStressTotals> RunEagerStress(const EagerStressOptions& options);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_EAGER_STRESS_H_
