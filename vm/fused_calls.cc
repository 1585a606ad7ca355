#include "vm/fused_calls.h"

#include <cstddef>
#include <utility>

#include "core/status.h"

namespace sluice::vm {
namespace {

// The lines of a step the producer writes: kind to attrs (Instruction's hot group).
constexpr size_t kStepLines = (offsetof(Instruction, attrs) + sizeof(Instruction::attrs) + 63) / 64;

// Blob::fuse_roles_ bits, valid while Blob::fuse_mark_ is the run's mark.
constexpr uint8_t kRead = 1;     // among the run's union inputs
constexpr uint8_t kWritten = 2;  // among the run's union outputs
constexpr uint8_t kBorn = 4;     // created for a step of the run (not in the union yet)
constexpr uint8_t kPrivate = 8;  // born and released in the run: never in the union

}  // namespace

Instruction& FusedCalls::NewStep() {
  if (size_ == steps_.size()) {
    ++size_;
    return steps_.emplace_back();
  }
  // A reused step: clear what steps use (kind and kernel are always set by the caller;
  // stream and seq by the worker), not a whole instruction.
  Instruction& step = steps_[size_++];
  // The worker ran these steps last (its core holds their lines): start taking the lines
  // of the step after next, which the op after this one fills, so that the writes there
  // find them here.
  if (size_ + 1 < steps_.size()) PrefetchForWrite(&steps_[size_ + 1], kStepLines);
  if (!step.inputs.empty()) step.inputs.clear();
  if (!step.outputs.empty()) step.outputs.clear();
  if (step.attrs != nullptr) step.attrs.reset();
  if (!step.status.ok()) step.status = absl::OkStatus();
  return step;
}

void FusedCalls::NoteOperands(Instruction* head, const Instruction& step, bool fresh_outputs) {
  for (Blob* blob : step.inputs) {
    if (blob->fuse_mark_ != mark_) {
      blob->fuse_mark_ = mark_;
      blob->fuse_roles_ = 0;
    }
    // A read of what an earlier step wrote (or created) is internal to the run.
    if ((blob->fuse_roles_ & (kRead | kWritten | kBorn)) != 0) continue;
    blob->fuse_roles_ |= kRead;
    head->inputs.push_back(blob);
  }
  for (Blob* blob : step.outputs) {
    if (blob->fuse_mark_ != mark_) {
      blob->fuse_mark_ = mark_;
      blob->fuse_roles_ = 0;
    } else if ((blob->fuse_roles_ & (kWritten | kBorn)) != 0) {
      continue;
    }
    if (fresh_outputs && blob->fuse_roles_ == 0) {
      // First seen here, created for this step: the union learns of it only if it is
      // still alive when the run closes.
      blob->fuse_roles_ = kBorn;
      born_.push_back(blob);
      continue;
    }
    blob->fuse_roles_ |= kWritten;
    head->outputs.push_back(blob);
  }
}

void FusedCalls::Close(Instruction* head) {
  for (Blob* blob : born_) {
    if (blob->fuse_mark_ == mark_ && (blob->fuse_roles_ & kPrivate) != 0) continue;
    blob->fuse_roles_ = static_cast<uint8_t>((blob->fuse_roles_ & ~kBorn) | kWritten);
    head->outputs.push_back(blob);
  }
  born_.clear();
}

void FusedCalls::DropPrivateHolds(absl::FunctionRef<void(Blob*)> last) {
  for (Blob* blob : private_) {
    if (blob->DropPrivateHold()) last(blob);
  }
  private_.clear();
}

void FusedCalls::Begin(Instruction* head, uint64_t mark) {
  SLUICE_CHECK(head->kind == InstructionKind::kOpCall || head->kind == InstructionKind::kRelease);
  size_ = 0;
  op_calls_ = 0;
  mark_ = mark;
  SLUICE_CHECK(born_.empty() && private_.empty());
  Instruction& first = NewStep();
  first.kind = head->kind;
  first.kernel = head->kernel;
  first.inputs = std::move(head->inputs);
  first.outputs = std::move(head->outputs);
  first.attrs = std::move(head->attrs);
  if (first.kind == InstructionKind::kOpCall) ++op_calls_;
  head->kind = InstructionKind::kOpCall;
  head->kernel = this;
  head->inputs.clear();
  head->outputs.clear();
  NoteOperands(head, first, head->fresh_outputs);
  head->fresh_outputs = false;
}

void FusedCalls::AddCall(Instruction* head, const OpKernel& kernel, BlobPtrSpan inputs,
                         BlobPtrSpan outputs, std::shared_ptr<const AttrMap> attrs,
                         bool fresh_outputs) {
  Instruction& step = NewStep();
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  step.inputs.assign(inputs.begin(), inputs.end());
  step.outputs.assign(outputs.begin(), outputs.end());
  step.attrs = std::move(attrs);
  ++op_calls_;
  NoteOperands(head, step, fresh_outputs);
}

void FusedCalls::AddRelease(Instruction* head, Blob* blob) {
  Instruction& step = NewStep();
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
  if (blob->fuse_mark_ == mark_ && blob->fuse_roles_ == kBorn) {
    // Born in this run and released in it: the run's steps are its only users.
    blob->fuse_roles_ = kBorn | kPrivate;
    blob->MakeRunPrivate();
    private_.push_back(blob);
    return;
  }
  NoteOperands(head, step, /*fresh_outputs=*/false);
}

absl::Status FusedCalls::Launch(KernelContext& ctx) const {
  for (size_t i = 0; i < size_; ++i) {
    // const_cast: steps are this run's scratch (the worker fills stream and seq); the
    // kernel interface is const because kernels are shared.
    ctx.RunStep(const_cast<Instruction*>(&steps_[i]));
  }
  return absl::OkStatus();
}

}  // namespace sluice::vm
