// The run loop of `sluice stress --control-flow`: N random programs with cond and while
// (stress/stress_control_flow.h), each run through an Executor on one device with the sync
// checker on, every fetched value compared bit for bit with the sequential reference
// (stress/stress_reference.h). Counts mismatches, sync errors (the checker's violations),
// hangs (runs not finished within a timeout, then cancelled) and failed runs.
//
// Thread-compatible: one call at a time per process is the intended use (it creates a
// Runtime and VM of its own).
#ifndef SLUICE_STRESS_STRESS_CONTROL_FLOW_RUNNER_H_
#define SLUICE_STRESS_STRESS_CONTROL_FLOW_RUNNER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/device.h"
#include "stress/stress_control_flow.h"
#include "vm/virtual_machine.h"

namespace sluice::stress {

struct ControlFlowStressOptions {
  int programs = 100;
  uint64_t seed = 1;  // of the programs (program p: seed * 1000003 + p) and the sim delays
  Device device{DeviceType::kSim, 0};
  int streams = 2;  // the interpreter's compute streams and the generator's stream pins
  int jitter_us = 0;
  // InterpreterOptions::skip_stream_analysis: no StreamWait / RecordEvent across streams,
  // so the checker must report the unordered accesses.
  bool no_soft_sync = false;
  // InterpreterOptions::release_temporaries = false: temporaries keep their storage across
  // runs, so a program's second run writes the blobs its first run read.
  bool keep_temporaries = false;
  vm::VmOptions::Scheduling scheduling = vm::VmOptions::Scheduling::kDedicatedThread;
  int timeout_s = 120;     // a run taking longer is a hang: it is cancelled and counted
  ControlFlowShape shape;  // its `streams` is replaced by `streams` above
  bool progress = false;   // a line on stderr every 10% of the programs
};

struct ControlFlowStressTotals {
  int64_t programs = 0;
  int64_t runs = 0;   // programs x feed sets that completed
  int64_t conds = 0;  // cond / while ops generated, at any depth
  int64_t whiles = 0;
  int64_t stream_waits = 0;  // StreamWaits in the lowered block-0 graphs (cross-stream edges)
  // Block-0 loops whose iterations overlap (parallel_iterations > 1, cpu lanes)
  int64_t pipelined_loops = 0;
  int64_t compared = 0;                   // fetched values compared with the reference
  int64_t mismatches = 0;                 // fetched values that differ from the reference
  int64_t sync_errors = 0;                // the checker's violation count
  int64_t programs_with_sync_errors = 0;  // programs during whose runs the count grew
  int64_t hangs = 0;
  int64_t run_errors = 0;  // runs that returned an error
  // A hung run that a cancel did not end: the VM cannot be shut down, so it was left
  // behind (leaked) and the totals stop there.
  bool abandoned = false;
  std::string first_problem;

  bool problems() const { return mismatches + sync_errors + hangs + run_errors > 0; }
  // One JSON line: {"programs":..,"runs":..,...,"run_errors":..}.
  std::string ToJson() const;
};

// Errors (nothing to count): InvalidArgument naming an option outside the range `sluice
// stress --control-flow` accepts; the runtime or VM could not be created, a generated program
// could not be built or evaluated by the reference (a generator bug), or a run could not be
// submitted.
absl::StatusOr<ControlFlowStressTotals> RunControlFlowStress(
    const ControlFlowStressOptions& options);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_STRESS_CONTROL_FLOW_RUNNER_H_
