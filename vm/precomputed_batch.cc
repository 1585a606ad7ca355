#include "vm/precomputed_batch.h"

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "vm/producer_port.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {

int PrecomputedBatch::AddOpCall(const OpKernel& kernel, BlobList inputs, BlobList outputs,
                                std::shared_ptr<const AttrMap> attrs, Stream* stream) {
  Node node;
  node.kind = InstructionKind::kOpCall;
  node.kernel = &kernel;
  node.stream = stream;
  node.attrs = std::move(attrs);
  node.inputs = std::move(inputs);
  node.outputs = std::move(outputs);
  nodes_.push_back(std::move(node));
  return size() - 1;
}

int PrecomputedBatch::AddStreamWait(BlobList blobs, Stream* from, Stream* to) {
  Node node;
  node.kind = InstructionKind::kStreamWait;
  node.stream = from;
  node.wait_target = to;
  node.outputs = std::move(blobs);
  nodes_.push_back(std::move(node));
  return size() - 1;
}

int PrecomputedBatch::AddRecordEvent(BlobList blobs, Stream* stream) {
  Node node;
  node.kind = InstructionKind::kRecordEvent;
  node.stream = stream;
  node.outputs = std::move(blobs);
  nodes_.push_back(std::move(node));
  return size() - 1;
}

int PrecomputedBatch::AddRelease(BlobRef blob, Stream* stream) {
  Node node;
  node.kind = InstructionKind::kRelease;
  node.stream = stream;
  node.outputs.push_back(std::move(blob));
  nodes_.push_back(std::move(node));
  return size() - 1;
}

absl::Status PrecomputedBatch::AddEdge(int from, int to) {
  if (from < 0 || to >= size() || from >= to) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge ", from, " -> ", to, ": need 0 <= from < to < ", size()));
  }
  nodes_[to].predecessors.push_back(from);
  ++edges_;
  return absl::OkStatus();
}

absl::Status PrecomputedBatch::Validate() const {
  for (int i = 0; i < size(); ++i) {
    const Node& node = nodes_[i];
    if (node.stream == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("batch node ", i, ": null stream"));
    }
    for (const BlobRef& blob : node.inputs) {
      if (blob == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("batch node ", i, ": null blob"));
    }
    for (const BlobRef& blob : node.outputs) {
      if (blob == nullptr)
        return absl::InvalidArgumentError(absl::StrCat("batch node ", i, ": null blob"));
    }
    if (node.kind == InstructionKind::kStreamWait) {
      if (node.wait_target == nullptr || !CanStreamWait(*node.stream, *node.wait_target)) {
        return absl::InvalidArgumentError(
            absl::StrCat("batch node ", i, ": a StreamWait needs ", kStreamWaitRule));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status PrecomputedBatch::Submit(VirtualMachine* vm) {
  if (validated_ != nodes_.size()) {
    SLUICE_RETURN_IF_ERROR(Validate());
    validated_ = nodes_.size();
  }
  if (nodes_.empty()) return absl::OkStatus();
  ProducerPort port(vm);
  SLUICE_RETURN_IF_ERROR(port.ReserveBatch(static_cast<int64_t>(nodes_.size())));
  instructions_.resize(nodes_.size());
  Chain<Instruction> part;
  bool first = true;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    Instruction* instruction = port.Allocate(cache_);
    instruction->kind = node.kind;
    instruction->stream = node.stream;
    instruction->wait_target = node.wait_target;
    instruction->kernel = node.kernel;
    instruction->attrs = node.attrs;
    instruction->inputs = ToPtrs(node.inputs);
    instruction->outputs = ToPtrs(node.outputs);
    instruction->precomputed = true;
    for (int p : node.predecessors) instruction->predecessors.push_back(instructions_[p]);
    instructions_[i] = instruction;
    part.PushBack(instruction);
    const bool last = i + 1 == nodes_.size();
    if (part.size == kPartSize || last) {
      port.SubmitBatchPart(std::move(part), first, last);
      part = Chain<Instruction>();
      first = false;
    }
  }
  // Give unused cached instructions back so the batch never holds VM memory between runs.
  port.ReturnUnused(std::move(cache_));
  cache_ = Chain<Instruction>();
  return absl::OkStatus();
}

}  // namespace sluice::vm
