// PrecomputedBatch: instructions with their dependence edges decided in advance — what the
// static-graph interpreter hands the VM each run. The engine takes the edges as given and
// skips deriving them from blobs, so a batch costs no dependence analysis per run. Sync
// instructions (StreamWait, RecordEvent) are part of the batch, placed by the producer.
#ifndef SLUICE_VM_PRECOMPUTED_BATCH_H_
#define SLUICE_VM_PRECOMPUTED_BATCH_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "core/intrusive_queue.h"
#include "vm/attrs.h"
#include "vm/blob.h"
#include "vm/instruction.h"
#include "vm/kernel.h"
#include "vm/stream.h"

namespace sluice::vm {

class VirtualMachine;

// Build once, Submit any number of times. Thread-compatible. Instructions of a batch do not
// take part in the eager dependence tracking: the producer orders a batch against other
// work on the same blobs (the interpreter runs one batch per step, or syncs between).
class PrecomputedBatch {
 public:
  PrecomputedBatch() = default;

  // Each returns the new node's index.
  int AddOpCall(const OpKernel& kernel, BlobList inputs, BlobList outputs,
                std::shared_ptr<const AttrMap> attrs, Stream* stream);
  int AddStreamWait(BlobList blobs, Stream* from, Stream* to);
  int AddRecordEvent(BlobList blobs, Stream* stream);
  int AddRelease(BlobRef blob, Stream* stream);
  // `to` depends on `from`. InvalidArgument unless 0 <= from < to < size().
  absl::Status AddEdge(int from, int to);

  int size() const { return static_cast<int>(nodes_.size()); }
  int64_t edges() const { return edges_; }

  // Checks the nodes (streams set, StreamWait between streams that can wait on each other;
  // once per node), waits for room for all of them, then instantiates and hands them over
  // in parts of kPartSize (VirtualMachine::SubmitBatchPart), so that the head of a large
  // batch runs while its tail is being built. All or nothing: on error nothing was
  // submitted.
  absl::Status Submit(VirtualMachine* vm);

  static constexpr size_t kPartSize = 128;

 private:
  struct Node {
    InstructionKind kind;
    Stream* stream = nullptr;
    Stream* wait_target = nullptr;
    const OpKernel* kernel = nullptr;
    std::shared_ptr<const AttrMap> attrs;
    BlobList inputs;
    BlobList outputs;
    std::vector<int> predecessors;
  };
  absl::Status Validate() const;

  std::vector<Node> nodes_;
  size_t validated_ = 0;                    // nodes_[0, validated_) passed Validate
  std::vector<Instruction*> instructions_;  // Submit's scratch: node index -> instruction
  int64_t edges_ = 0;
  Chain<Instruction> cache_;  // must be empty when the VM goes away
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_PRECOMPUTED_BATCH_H_
