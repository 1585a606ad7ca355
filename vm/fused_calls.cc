#include "vm/fused_calls.h"

#include <utility>

#include "core/status.h"

namespace sluice::vm {
namespace {

// Blob::fuse_roles_ bits, valid while Blob::fuse_mark_ is the run's mark.
constexpr uint8_t kRead = 1;     // among the run's union inputs
constexpr uint8_t kWritten = 2;  // among the run's union outputs

}  // namespace

Instruction& FusedCalls::NewStep() {
  if (size_ == steps_.size()) {
    ++size_;
    return steps_.emplace_back();
  }
  // A reused step: clear what steps use (kind and kernel are always set by the caller;
  // stream and seq by the worker), not a whole instruction.
  Instruction& step = steps_[size_++];
  if (!step.inputs.empty()) step.inputs.clear();
  if (!step.outputs.empty()) step.outputs.clear();
  if (step.attrs != nullptr) step.attrs.reset();
  if (!step.status.ok()) step.status = absl::OkStatus();
  return step;
}

void FusedCalls::NoteOperands(Instruction* head, const Instruction& step) {
  for (Blob* blob : step.inputs) {
    if (blob->fuse_mark_ != mark_) {
      blob->fuse_mark_ = mark_;
      blob->fuse_roles_ = 0;
    }
    // A read of what an earlier step wrote is internal to the run.
    if ((blob->fuse_roles_ & (kRead | kWritten)) != 0) continue;
    blob->fuse_roles_ |= kRead;
    head->inputs.push_back(blob);
  }
  for (Blob* blob : step.outputs) {
    if (blob->fuse_mark_ != mark_) {
      blob->fuse_mark_ = mark_;
      blob->fuse_roles_ = 0;
    }
    if ((blob->fuse_roles_ & kWritten) != 0) continue;
    blob->fuse_roles_ |= kWritten;
    head->outputs.push_back(blob);
  }
}

void FusedCalls::Begin(Instruction* head, uint64_t mark) {
  SLUICE_CHECK(head->kind == InstructionKind::kOpCall || head->kind == InstructionKind::kRelease);
  size_ = 0;
  op_calls_ = 0;
  mark_ = mark;
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
  NoteOperands(head, first);
}

void FusedCalls::AddCall(Instruction* head, const OpKernel& kernel, BlobPtrSpan inputs,
                         BlobPtrSpan outputs, std::shared_ptr<const AttrMap> attrs) {
  Instruction& step = NewStep();
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  step.inputs.assign(inputs.begin(), inputs.end());
  step.outputs.assign(outputs.begin(), outputs.end());
  step.attrs = std::move(attrs);
  ++op_calls_;
  NoteOperands(head, step);
}

void FusedCalls::AddRelease(Instruction* head, Blob* blob) {
  Instruction& step = NewStep();
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
  NoteOperands(head, step);
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
