// Recorder: writes every instruction a VM receives — eager or precomputed — to a versioned
// text file (docs/instruction_record_format.md), so that `sluice replay` can run the same
// stream again, on the same or another device mapping, and compare the final blobs against
// the checksums written at shutdown.
#ifndef SLUICE_VM_RECORDER_H_
#define SLUICE_VM_RECORDER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "vm/blob.h"
#include "vm/execution_observer.h"
#include "vm/instruction.h"
#include "vm/kernel.h"

namespace sluice::vm {

// Thread-safe: the VM calls it from submitting threads, workers and the threads that run
// AccessBlob host code.
//
// The VM reaches it as its ExecutionObserver (the four events it writes, each forwarding to
// the Record* call beside it); a control-flow kernel reaches RecordExpansion directly
// through KernelContext::recorder() (RunLoggingSteps), a report only that kernel can make;
// the VM's owner writes the checksums and closes the file at shutdown.
class Recorder final : public ExecutionObserver {
 public:
  static constexpr int kFormatVersion = 4;
  // The oldest version ParseRecord still reads (version 1 has no `waits=` fields, version 2
  // no `drops=`).
  static constexpr int kOldestReadableVersion = 1;

  // Creates (truncates) `path` and writes the header. InvalidArgument naming the path when
  // it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Recorder>> Create(const std::string& path);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // --- ExecutionObserver. ---
  // RecordBlob with `stream`'s name.
  void OnBlobCreated(const BlobRef& blob, const Stream& stream) override;
  // RecordChain.
  void OnChainSubmitted(const Instruction* head) override { RecordChain(head); }
  // RecordExpansion (the empty expansion of a skipped control step).
  void OnControlExpanded(const Instruction& control,
                         absl::Span<const Instruction* const> steps) override {
    RecordExpansion(control, steps);
  }
  // RecordWrite.
  void OnHostWrite(uint64_t seq, absl::Span<const uint8_t> bytes) override {
    RecordWrite(seq, bytes);
  }

  // A new blob (its id, device, dtype, shape, first-use stream, name).
  void RecordBlob(const BlobRef& blob, const std::string& stream_name);
  // A submitted chain, in submission order (`precomputed` chains carry their edges).
  void RecordChain(const Instruction* head);
  // What a kernel that runs steps of its own (control flow; vm/step_log.h) ran when it ran
  // as `control` (an OpCall, or a step of a sequence: its stream and number are the
  // sequence's): an `expand` line naming `control` by number and operands, then `steps`
  // in launch order, on `control`'s stream. Called by the worker, after the kernel ran.
  void RecordExpansion(const Instruction& control, absl::Span<const Instruction* const> steps);
  // The bytes an AccessBlob write (instruction `seq`) put into its blob, so that replay can
  // reproduce host input without the host code.
  void RecordWrite(uint64_t seq, absl::Span<const uint8_t> bytes);
  // The final contents of a live blob (written at shutdown).
  void RecordChecksum(uint64_t blob_id, uint64_t checksum);
  // Live blobs, for the final checksums (weak: recording does not keep blobs alive).
  std::vector<BlobRef> LiveBlobs();
  // Flushes and closes the file; the first write error, if any. Idempotent.
  absl::Status Close();
  const std::string& path() const { return path_; }

 private:
  Recorder(std::string path, std::FILE* file);
  void WriteLine(const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<Blob>> blobs_ ABSL_GUARDED_BY(mu_);
};

// Runs `run` (a kernel's body that launches steps of its own) for the kernel running in
// `ctx`: with the VM recording and no step log installed yet (vm/step_log.h), under a log
// of its own, which the recorder then writes as the expansion of ctx's instruction;
// otherwise as is (a nested kernel adds to the enclosing log). Returns what `run` returns.
absl::Status RunLoggingSteps(KernelContext& ctx, absl::FunctionRef<absl::Status()> run);

// FNV-1a over bytes: the checksum recorded for final blobs and compared on replay.
uint64_t Checksum(absl::Span<const uint8_t> bytes);

}  // namespace sluice::vm

#endif  // SLUICE_VM_RECORDER_H_
