// Replayer: runs a RecordedProgram (vm/record_reader.h) on a VirtualMachine — the same
// instructions, in file order, on the same streams or on a device mapping — and compares
// the final blobs with the checksums the recording run stored. `sluice replay` is a thin
// command over it; BM_Replay_Noop measures it.
//
// How each recorded line is replayed:
//  - eager instructions (op, wait, record, release, access) are submitted as eager
//    instructions: the engine derives their dependences from their blobs exactly as it did
//    when they were recorded. The recorded StreamWait/RecordEvent instructions are replayed
//    as they are (no soft sync is added, none is dropped), except a StreamWait that the
//    device map put between streams that cannot wait on each other (two cpu streams of one
//    worker, as sim:0=cpu makes of sim's compute and copy streams; two devices; one stream): it
//    becomes a RecordEvent on its source, the soft sync the builder writes for such a pair
//    (the engine then orders the blobs' users; on one worker they run in order anyway);
//  - a batch is submitted as one precomputed chain with its recorded edges. Its StepSequences
//    with cross-sequence waits (`waits=`, format version 2) are rebuilt as StepSequences with
//    the same waits, one instruction each, when their streams can run lanes
//    (VirtualMachine::CanRunLanes) and ReplayOptions::rebuild_lanes is set. Otherwise each
//    step is its own instruction and each wait orders the awaited step before it as the
//    interpreter orders streams without lanes: an engine edge from cpu work the engine
//    releases in time, a StreamWait within a device, a RecordEvent across devices (the
//    same order of the work, kept by the engine and the devices instead of the sequences);
//  - a barrier is a host sync point (VirtualMachine::Sync): later lines are submitted after
//    it, as the recording host did. The first kernel error a sync reports is kept;
//  - `access ... write` puts the recorded bytes back; `access ... read` runs an empty read;
//  - an op recorded with an expansion (a control-flow op; format version 4) runs the steps
//    it ran when recorded, in order on its stream, as one sequence in its place: the loop's
//    iterations as they happened, not decided again. The expansion's blobs live to the end.
// Blobs are created at first use and dropped after their last use unless a checksum names
// them, so memory stays bounded by the program's live set.
#ifndef SLUICE_VM_REPLAYER_H_
#define SLUICE_VM_REPLAYER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/stream_id.h"
#include "vm/kernel.h"
#include "vm/record_reader.h"
#include "vm/release_count.h"
#include "vm/replay_plan.h"

namespace sluice::vm {

class StepSequence;
class Stream;
class ThreadCtx;
class VirtualMachine;

// Finds the kernel for a recorded op name on the stream it will run on, for the dtype of
// its first input (of its first output when it has no inputs; f32 when it has neither):
// the rule ops::OpRegistry keys kernels by.
using KernelLookup = std::function<absl::StatusOr<const OpKernel*>(
    absl::string_view op, const StreamKey& stream, DataType dtype)>;

// Recorded device ("cuda:0") -> device to run on ("sim:0"). Unmapped devices run as is.
using DeviceMap = absl::flat_hash_map<std::string, std::string>;
// Adds "FROM=TO[,FROM=TO...]" to `map`. InvalidArgument naming the bad pair (unparsable
// device, missing '=', a device mapped twice).
absl::Status AddDeviceMapping(absl::string_view spec, DeviceMap* map);

struct ReplayOptions {
  DeviceMap device_map;
  // Consecutive eager instructions submitted as one chain (1..max_in_flight).
  int eager_chain = 64;
  // Rebuild recorded sequences with waits as StepSequences where the streams allow (see the
  // file comment); false: always replay their steps as instructions with edges.
  bool rebuild_lanes = true;
};

struct ChecksumMismatch {
  uint64_t blob_id = 0;  // recorded id
  std::string blob;      // "blob #3 'w'"
  uint64_t expected = 0;
  uint64_t actual = 0;
  bool released = false;  // the replay had freed the blob's storage
  int line = 0;           // the checksum's line
};

struct ReplayResult {
  int64_t instructions = 0;  // recorded instructions replayed
  int64_t checksums_compared = 0;
  int64_t checksums_skipped = 0;  // blobs on memory the host cannot read (cuda)
  int64_t lane_sequences = 0;     // StepSequences rebuilt with their waits
  int64_t expansions = 0;         // control-flow ops run as the steps they ran when recorded
  std::vector<ChecksumMismatch> mismatches;
  absl::Status op_error;  // the first kernel error a sync point reported (OK if none)
};

// Thread-compatible: one Run at a time. The VM and the program must outlive it.
class Replayer {
 public:
  ~Replayer();
  // Resolves every stream (after the device map) and kernel up front. InvalidArgument /
  // NotFound naming the record line for an unknown stream, device or op, or a shared
  // release the mapping moved off the host.
  static absl::StatusOr<std::unique_ptr<Replayer>> Create(VirtualMachine* vm,
                                                          const RecordedProgram* program,
                                                          const KernelLookup& kernels,
                                                          ReplayOptions options = {});

  // Runs the whole program once (new blobs each time), ends with a sync, then, if `verify`,
  // compares checksums. An error status only for what stops the replay itself (the VM
  // refusing work); kernel errors and mismatches are in the result.
  absl::StatusOr<ReplayResult> Run(bool verify = true);

 private:
  class Runner;  // one Run's state (replayer.cc)
  Replayer(VirtualMachine* vm, const RecordedProgram* program, ReplayOptions options);
  absl::StatusOr<Stream*> ResolveStream(absl::string_view recorded, int line) const;
  // The kernel of op line `r` on `stream`; errors name the line.
  absl::StatusOr<const OpKernel*> ResolveKernel(const RecordedInstruction& r, const Stream& stream,
                                                const KernelLookup& kernels) const;
  // Create's steps: each blob's stream, each line's stream, target and kernel (the
  // topology the plan is made on), each expansion's kernels.
  absl::Status ResolveBlobs();
  absl::Status ResolveInstructions(const KernelLookup& kernels);
  absl::Status ResolveExpansions(const KernelLookup& kernels);
  // `stream`'s dense index in topology_, added with its facts on first sight.
  int StreamIndex(Stream* stream);
  Stream* StreamOf(int instruction) const {
    return streams_[topology_.instruction_stream[instruction]];
  }
  // The count shared by the drops of `r`'s blob (a release line with drops=K): one per
  // blob and K for the whole replay, as every batch drops it K times.
  ReleaseCount* ReleaseCountFor(const RecordedInstruction& r);

  VirtualMachine* const vm_;
  const RecordedProgram* const program_;
  const ReplayOptions options_;
  std::vector<Stream*> streams_;  // by dense index
  absl::flat_hash_map<Stream*, int> stream_index_;
  absl::flat_hash_map<const ThreadCtx*, int> worker_index_;
  ReplayTopology topology_;
  ReplayPlan plan_;
  std::vector<const OpKernel*> kernels_;  // per instruction (null: none, or an expansion)
  std::vector<Stream*> blob_streams_;     // per blob: where it is created
  // Per expansion, per step: its kernel (null for a release).
  std::vector<std::vector<const OpKernel*>> expansion_kernels_;
  // Sequences rebuilt by the current Run; kept until the work that runs them is complete.
  std::vector<std::unique_ptr<StepSequence>> sequences_;
  std::atomic<uint32_t> run_{0};  // the rebuilt sequences' run number (one per batch)
  // Shared releases' counts by (blob index, drops); they outlive every Run's work.
  absl::flat_hash_map<std::pair<int, int>, std::unique_ptr<ReleaseCount>> release_counts_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_REPLAYER_H_
