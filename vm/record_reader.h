// RecordReader: parses an instruction record (docs/instruction_record_format.md, written by
// vm/recorder.h) into a RecordedProgram — plain data, checked line by line, with no VM
// involved. The Replayer runs what this produces.
#ifndef SLUICE_VM_RECORD_READER_H_
#define SLUICE_VM_RECORD_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/data_type.h"
#include "core/shape.h"
#include "vm/attrs.h"
#include "vm/instruction.h"

namespace sluice::vm {

// Value types; thread-compatible.
struct RecordedBlob {
  uint64_t id = 0;     // the id in the recording run
  std::string device;  // "sim:0"
  DataType dtype = DataType::kF32;
  Shape shape;
  std::string stream;  // first-use stream, "sim:0/compute"
  std::string name;
  int line = 0;
};

struct RecordedInstruction {
  InstructionKind kind = InstructionKind::kOpCall;
  uint64_t seq = 0;
  std::string stream;                    // empty for barriers
  std::string wait_target;               // StreamWait only
  std::string kernel;                    // OpCall only
  std::shared_ptr<const AttrMap> attrs;  // OpCall only; null when empty
  // Indices into RecordedProgram::blobs.
  std::vector<int> inputs;
  std::vector<int> outputs;
  // Precomputed instructions: batch index (-1: eager) and predecessors as indices within
  // the batch.
  int batch = -1;
  std::vector<int> after;
  // A step of a StepSequence (the lines of a batch sharing `seq`) that first waited for
  // other sequences of the batch (format version 2, `waits=`): the source's number, how
  // many of its steps (lines) had to pass, and the batch position of the last of them.
  struct Wait {
    uint64_t source_seq = 0;
    int steps = 0;
    int source_position = 0;
  };
  std::vector<Wait> waits;
  // Release: the number of drops of a shared release (format version 3, `drops=`): the
  // batch's release lines of this blob with the same count free its storage together, at
  // the last of them (vm/release_count.h); 0 for a plain release.
  int drops = 0;
  // AccessBlob writes: index into RecordedProgram::data (-1: none).
  int data = -1;
  // OpCalls of a kernel that ran steps of its own (control flow; format version 4): index
  // into RecordedProgram::expansions (-1: none). Replay runs those steps in its place.
  int expansion = -1;
  int line = 0;
};

// What a control-flow op ran, as the recorder wrote it (`expand`): its steps in launch
// order, on the op's stream. The steps are op and release lines.
struct RecordedExpansion {
  int instruction = 0;  // index into RecordedProgram::instructions: the op it expands
  std::vector<RecordedInstruction> steps;
  int line = 0;
};

struct RecordedChecksum {
  int blob = 0;  // index into RecordedProgram::blobs
  uint64_t checksum = 0;
  int line = 0;
};

struct RecordedProgram {
  std::string source;  // file path (or "<memory>"), for messages
  std::vector<RecordedBlob> blobs;
  std::vector<RecordedInstruction> instructions;  // in file order
  std::vector<std::vector<uint8_t>> data;         // host bytes of AccessBlob writes
  std::vector<RecordedChecksum> checksums;
  std::vector<RecordedExpansion> expansions;
  // Batch b spans instructions [batch_begin[b], batch_begin[b] + batch_size[b]).
  std::vector<int> batch_begin;
  std::vector<int> batch_size;
};

// Parses `text` (format versions Recorder::kOldestReadableVersion to kFormatVersion).
// Errors (InvalidArgument, or DataLoss for a truncated file) name `source:LINE` and what is
// wrong: an unknown directive, a bad number, an unknown blob id, a batch with fewer lines
// than announced, a wait for steps not written before it, an expansion of no recorded op
// or with fewer steps than announced, a missing `end` line, an unsupported version.
absl::StatusOr<RecordedProgram> ParseRecord(absl::string_view text,
                                            absl::string_view source = "<memory>");
// Reads and parses a file (NotFound / InvalidArgument naming the path when unreadable).
absl::StatusOr<RecordedProgram> ReadRecordFile(const std::string& path);

}  // namespace sluice::vm

#endif  // SLUICE_VM_RECORD_READER_H_
