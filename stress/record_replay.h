// Replaying an instruction record (docs/instruction_record_format.md) as `sluice replay`
// does: a Runtime and VM sized for the record (after device mapping), the stress kernels or
// the op library's (compiled subgraphs compiled again from the record), every recorded
// instruction re-executed, and the stored checksums compared with the replayed contents.
//
// Thread-compatible: each call creates a Runtime and VM of its own.
#ifndef SLUICE_STRESS_RECORD_REPLAY_H_
#define SLUICE_STRESS_RECORD_REPLAY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "vm/record_reader.h"
#include "vm/replayer.h"
#include "vm/virtual_machine.h"

namespace sluice::stress {

struct RecordReplayOptions {
  std::string path;
  vm::DeviceMap device_map;  // recorded device -> device to run on (vm::AddDeviceMapping)
  bool check_sync = false;   // the sync checker on; its violations are counted
  bool verify = true;        // compare the stored checksums
  int repeat = 1;            // replays of the record, each verified
  // The kernels op names refer to: the op library's (records of programs and eager code)
  // instead of the stress kernels (records of `sluice stress`).
  bool standard_ops = false;
  vm::VmOptions::Scheduling scheduling = vm::VmOptions::Scheduling::kDedicatedThread;
};

struct RecordReplayTotals {
  // The record: instructions, blobs and checksums it holds.
  int64_t recorded_instructions = 0, recorded_blobs = 0, recorded_checksums = 0;
  int64_t instructions = 0;  // replayed, over every repeat
  int64_t checksums = 0;     // compared
  int64_t skipped = 0;       // on memory the host cannot read
  std::vector<vm::ChecksumMismatch> mismatches;
  int64_t sync_errors = 0;
  std::string first_sync_error;  // "" when there was none
  std::string op_error;          // the first kernel error a sync point reported, or ""
  std::string shutdown_error;    // the VM's failed shutdown, or ""
  double seconds = 0;            // the replays

  bool ok() const {
    return mismatches.empty() && sync_errors == 0 && op_error.empty() && shutdown_error.empty();
  }
  // One JSON line: {"instructions":..,"checksums":..,"mismatches":..,"skipped":..,
  // "sync_errors":..,"seconds":..,"instructions_per_s":..}.
  std::string ToJson() const;
};

// Errors (nothing replayed): the file cannot be read or parsed (the error names the line),
// the runtime or VM cannot be created, an op or stream of the record cannot be resolved, or
// a replay fails to run.
absl::StatusOr<RecordReplayTotals> ReplayRecordFile(const RecordReplayOptions& options);

// The same for a record already parsed (vm::ParseRecord); `options.path` is not read.
absl::StatusOr<RecordReplayTotals> ReplayRecord(const vm::RecordedProgram& program,
                                                const RecordReplayOptions& options);

}  // namespace sluice::stress

#endif  // SLUICE_STRESS_RECORD_REPLAY_H_
