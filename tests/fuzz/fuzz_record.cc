// Fuzz target: the instruction record reader (vm/record_reader.h,
// docs/instruction_record_format.md), then a replay on the sim provider of what it accepts,
// as `sluice replay` runs it: with the stress kernels, and with the op library's when the
// stress kernels cannot run it. The reader's errors must be InvalidArgument or DataLoss; a
// replay may refuse the record or report mismatches (fuzzed data rarely matches its
// checksums), but it may not crash, leak or hang.
//
// Records that declare more than kMaxBlobBytes of tensors or kMaxInstructions instructions
// are read but not replayed: they are legitimate, but allocating gigabytes per input would
// make the fuzzer test the allocator's limits instead of the replayer.
#include <cstddef>
#include <cstdint>

#include "core/data_type.h"
#include "stress/record_replay.h"
#include "tests/fuzz/fuzz_check.h"
#include "vm/record_reader.h"

namespace {

constexpr int64_t kMaxBlobBytes = int64_t{16} << 20;
constexpr size_t kMaxInstructions = 4096;

bool SmallEnough(const sluice::vm::RecordedProgram& program) {
  if (program.instructions.size() > kMaxInstructions) return false;
  int64_t bytes = 0;
  for (const sluice::vm::RecordedBlob& blob : program.blobs) {
    const int64_t n = blob.shape.NumElements();
    if (n > kMaxBlobBytes) return false;
    bytes += n * static_cast<int64_t>(sluice::SizeOf(blob.dtype));
    if (bytes > kMaxBlobBytes) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fuzz = sluice::fuzz;
  absl::StatusOr<sluice::vm::RecordedProgram> program =
      sluice::vm::ParseRecord(fuzz::AsText(data, size), "fuzz.record");
  if (!program.ok()) {
    fuzz::CheckInputError(program.status(), "ParseRecord");
    return 0;
  }
  if (!SmallEnough(*program)) return 0;
  sluice::stress::RecordReplayOptions options;
  options.check_sync = true;
  absl::StatusOr<sluice::stress::RecordReplayTotals> replayed =
      sluice::stress::ReplayRecord(*program, options);
  if (!replayed.ok()) {
    options.standard_ops = true;
    replayed = sluice::stress::ReplayRecord(*program, options);
  }
  (void)replayed;
  return 0;
}
