#include "vm/fused_calls.h"

#include <cstddef>
#include <utility>

#include "core/prefetch.h"
#include "core/status.h"
#include "vm/internal/blob_lifecycle.h"

namespace sluice::vm {

using internal::BlobLifecycle;
using Marks = BlobLifecycle::Producer;

namespace {

// The lines of a step the producer writes: kind to attrs (Instruction's hot group).
constexpr size_t kStepLines = (offsetof(Instruction, attrs) + sizeof(Instruction::attrs) + 63) / 64;
static_assert(kStepLines == 2, "a step's producer-written fields should fill two lines");

// Role bits (BlobLifecycle::Producer::fuse_roles), valid while the blob's fuse_mark is the
// run's mark.
constexpr uint8_t kRead = 1;       // among the run's union inputs
constexpr uint8_t kWritten = 2;    // among the run's union outputs
constexpr uint8_t kBorn = 4;       // created for a step of the run (not in the union yet)
constexpr uint8_t kPrivate = 8;    // born and released in the run: never in the union
constexpr uint8_t kStepless = 16;  // private, and its Release has no step (MarkKept keeps it)

}  // namespace

void FusedCalls::PrefetchStep(const Instruction& step) {
  for (size_t line = 0; line < kStepLines; ++line) {
    PrefetchForRead(reinterpret_cast<const char*>(&step) + 64 * line);
  }
}

void FusedCalls::PrefetchOperands(const Instruction& step) {
  for (const Blob* blob : step.inputs) BlobLifecycle::Worker::PrefetchForKernel(*blob);
  for (const Blob* blob : step.outputs) BlobLifecycle::Worker::PrefetchForKernel(*blob);
}

Instruction& FusedCalls::NewStep(const Instruction* head) {
  if (size_ == steps_.size()) {
    ++size_;
    Instruction& step = steps_.emplace_back();
    step.outer = head;
    step.stream = head->stream;
    return step;
  }
  // A reused step: clear what steps use (kind and kernel are always set by the caller;
  // outer and stream below; a fused step has no seq of its own), not a whole instruction.
  Instruction& step = steps_[size_++];
  // The worker read these steps last (its core shares their lines): start taking the
  // lines of the step after next, which the op after this one fills, so that the writes
  // there find them here.
  if (size_ + 1 < steps_.size()) PrefetchForWrite(&steps_[size_ + 1], kStepLines);
  if (!step.inputs.empty()) step.inputs.clear();
  if (!step.outputs.empty()) step.outputs.clear();
  if (step.attrs != nullptr) step.attrs.reset();
  if (!step.status.ok()) step.status = absl::OkStatus();
  if (step.outer != head) step.outer = head;
  if (step.stream != head->stream) step.stream = head->stream;
  return step;
}

void FusedCalls::NoteOperands(Instruction* head, const Instruction& step, bool fresh_outputs) {
  for (Blob* blob : step.inputs) {
    uint8_t& roles = Marks::fuse_roles(blob);
    if (Marks::fuse_mark(blob) != mark_) {
      Marks::fuse_mark(blob) = mark_;
      roles = 0;
    }
    // A read of what an earlier step wrote (or created) is internal to the run.
    if ((roles & (kRead | kWritten | kBorn)) != 0) continue;
    roles |= kRead;
    head->inputs.push_back(blob);
  }
  for (Blob* blob : step.outputs) {
    uint8_t& roles = Marks::fuse_roles(blob);
    if (Marks::fuse_mark(blob) != mark_) {
      Marks::fuse_mark(blob) = mark_;
      roles = 0;
    } else if ((roles & (kWritten | kBorn)) != 0) {
      continue;
    }
    if (fresh_outputs && roles == 0) {
      // First seen here, created for this step: the union learns of it only if it is
      // still alive when the run closes.
      roles = kBorn;
      born_.push_back(blob);
      continue;
    }
    roles |= kWritten;
    head->outputs.push_back(blob);
  }
}

void FusedCalls::Close(Instruction* head) {
  for (Blob* blob : born_) {
    uint8_t& roles = Marks::fuse_roles(blob);
    if (Marks::fuse_mark(blob) == mark_ && (roles & kPrivate) != 0) continue;
    roles = static_cast<uint8_t>((roles & ~kBorn) | kWritten);
    head->outputs.push_back(blob);
  }
  born_.clear();
}

void FusedCalls::DropPrivateHolds(absl::FunctionRef<void(Blob*)> last) {
  for (Blob* blob : private_) {
    if (BlobLifecycle::Holds::DropPrivateHold(blob)) last(blob);
  }
  private_.clear();
}

void FusedCalls::Begin(Instruction* head, uint64_t mark) {
  SLUICE_CHECK(head->kind == InstructionKind::kOpCall || head->kind == InstructionKind::kRelease);
  size_ = 0;
  op_calls_ = 0;
  stepless_releases_ = 0;
  mark_ = mark;
  SLUICE_CHECK(born_.empty() && private_.empty());
  Instruction& first = NewStep(head);
  first.kind = head->kind;
  first.kernel = head->kernel;
  first.inputs = std::move(head->inputs);
  first.outputs = std::move(head->outputs);
  first.attrs = std::move(head->attrs);
  first.keeps_storage = head->keeps_storage;
  if (first.kind == InstructionKind::kOpCall) ++op_calls_;
  head->kind = InstructionKind::kOpCall;
  head->kernel = this;
  head->keeps_storage = false;
  head->inputs.clear();
  head->outputs.clear();
  NoteOperands(head, first, head->fresh_outputs);
  head->fresh_outputs = false;
}

void FusedCalls::AddCall(Instruction* head, const OpKernel& kernel, BlobPtrSpan inputs,
                         BlobPtrSpan outputs, std::shared_ptr<const AttrMap> attrs,
                         bool fresh_outputs) {
  Instruction& step = NewStep(head);
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  // NewStep left both empty: appending stays on InlinedVector's inline fast path.
  for (Blob* blob : inputs) step.inputs.push_back(blob);
  for (Blob* blob : outputs) step.outputs.push_back(blob);
  step.attrs = std::move(attrs);
  ++op_calls_;
  NoteOperands(head, step, fresh_outputs);
}

bool FusedCalls::AddRelease(Instruction* head, Blob* blob, bool take_hold) {
  // Born in this run and released in it: the run's steps are its only users.
  const bool becomes_private = Marks::fuse_mark(blob) == mark_ && Marks::fuse_roles(blob) == kBorn;
  if (becomes_private) {
    Marks::fuse_roles(blob) = kBorn | kPrivate;
    Marks::MakeRunPrivate(blob, take_hold ? 1 : 2);
    private_.push_back(blob);
    if (Marks::ParksStorage(*blob)) {
      // The Release would only mark the storage kept: MarkKept does that as the run
      // retires, and the worker has no step to run.
      Marks::fuse_roles(blob) |= kStepless;
      ++stepless_releases_;
      return take_hold;
    }
  }
  Instruction& step = NewStep(head);
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
  step.keeps_storage = Marks::ParksStorage(*blob);
  if (!becomes_private) NoteOperands(head, step, /*fresh_outputs=*/false);
  return becomes_private && take_hold;
}

void FusedCalls::MarkKept() {
  for (Blob* blob : private_) {
    // A released blob's roles stay as its run left them (nobody may name it again). No
    // storage: something outside the builder released it again (a batch naming a released
    // blob), and the storage is gone.
    if ((Marks::fuse_roles(blob) & kStepless) != 0 && blob->raw_storage() != nullptr) {
      BlobLifecycle::Scheduler::MarkKept(blob);
    }
  }
}

absl::Status FusedCalls::Launch(KernelContext& ctx) const {
  // Every step and most operands were last written on the producer's core (steps live in
  // separate deque blocks, out of the hardware prefetcher's reach): start moving the lines
  // of the step after next and the operands of the next step while this one runs.
  for (size_t i = 0; i < size_ && i < 2; ++i) PrefetchStep(steps_[i]);
  for (size_t i = 0; i < size_; ++i) {
    if (i + 2 < size_) PrefetchStep(steps_[i + 2]);
    if (i + 1 < size_) PrefetchOperands(steps_[i + 1]);
    ctx.RunStep(&steps_[i]);
  }
  return absl::OkStatus();
}

}  // namespace sluice::vm
