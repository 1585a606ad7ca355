#include "vm/step_sequence.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/prefetch.h"
#include "core/status.h"
#include "vm/internal/blob_lifecycle.h"
#include "vm/step_log.h"

namespace sluice::vm {

void StepSequenceDeleter::operator()(StepSequence* run) const { delete run; }

using internal::BlobLifecycle;
using Marks = BlobLifecycle::Producer;

namespace {

// The lines of a step the producer writes: kind to attrs (Instruction's hot group).
constexpr size_t kStepLines = (offsetof(Instruction, attrs) + sizeof(Instruction::attrs) + 63) / 64;
static_assert(kStepLines == 2, "a step's producer-written fields should fill two lines");

// Role bits (BlobLifecycle::Producer::fuse_roles), valid while the blob's fuse_mark is the
// note pass's mark.
constexpr uint8_t kRead = 1;       // among the union inputs
constexpr uint8_t kWritten = 2;    // among the union outputs
constexpr uint8_t kBorn = 4;       // created for a step of the run (not in the union yet)
constexpr uint8_t kPrivate = 8;    // born and released in the run: never in the union
constexpr uint8_t kStepless = 16;  // private, and its Release has no step (MarkKept keeps it)

// A cross-sequence wait usually ends within an op or two: spin that long, then park.
constexpr std::chrono::nanoseconds kWaitSpin{20000};
// A parked waiter looks at the VM's cancel flag this often (the source may never run).
constexpr absl::Duration kCancelPoll = absl::Milliseconds(1);

// Bumped by every producer as it begins a run: a line of its own.
alignas(64) std::atomic<uint64_t> next_mark{1};

// Worker, ahead of a step: start moving its lines (written by the producer) to this core.
void PrefetchStep(const Instruction& step) {
  for (size_t line = 0; line < kStepLines; ++line) {
    PrefetchForRead(reinterpret_cast<const char*>(&step) + 64 * line);
  }
}

// Then the lines of its operands that a kernel reads (which needs the step's lines).
void PrefetchOperands(const Instruction& step) {
  for (const Blob* blob : step.inputs) BlobLifecycle::Worker::PrefetchForKernel(*blob);
  for (const Blob* blob : step.outputs) BlobLifecycle::Worker::PrefetchForKernel(*blob);
}

}  // namespace

StepSequence::~StepSequence() = default;

uint64_t StepSequence::NewMark() { return next_mark.fetch_add(1, std::memory_order_relaxed); }

Instruction& StepSequence::NewStep() {
  if (size_ == steps_.size()) {
    ++size_;
    Instruction& step = steps_.emplace_back();
    if (head_ != nullptr) {
      step.outer = head_;
      step.stream = head_->stream;
    }
    return step;
  }
  // A reused step (eager): clear what steps use (kind and kernel are always set by the
  // caller; outer and stream below; a step has no seq of its own), not a whole instruction.
  Instruction& step = steps_[size_++];
  // The worker read these steps last (its core shares their lines): start taking the
  // lines of the step after next, which the op after this one fills, so that the writes
  // there find them here.
  if (size_ + 1 < steps_.size()) PrefetchForWrite(&steps_[size_ + 1], kStepLines);
  if (!step.inputs.empty()) step.inputs.clear();
  if (!step.outputs.empty()) step.outputs.clear();
  if (step.attrs != nullptr) step.attrs.reset();
  if (!step.status.ok()) step.status = absl::OkStatus();
  if (step.origin != nullptr) step.origin = nullptr;  // set again by a caller that names one
  if (step.outer != head_) step.outer = head_;
  if (step.stream != head_->stream) step.stream = head_->stream;
  return step;
}

void StepSequence::NoteOperands(const Instruction& step, bool fresh_outputs) {
  BlobPtrs& union_in = head_ != nullptr ? head_->inputs : own_inputs_;
  BlobPtrs& union_out = head_ != nullptr ? head_->outputs : own_outputs_;
  for (Blob* blob : step.inputs) {
    uint8_t& roles = Marks::fuse_roles(blob);
    if (Marks::fuse_mark(blob) != mark_) {
      Marks::fuse_mark(blob) = mark_;
      roles = 0;
    }
    // A read of what an earlier step wrote (or created) is internal to the sequence.
    if ((roles & (kRead | kWritten | kBorn)) != 0) continue;
    roles |= kRead;
    union_in.push_back(blob);
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
    union_out.push_back(blob);
  }
}

void StepSequence::Begin(Instruction* head) {
  SLUICE_CHECK(head->kind == InstructionKind::kOpCall || head->kind == InstructionKind::kRelease);
  SLUICE_CHECK(born_.empty() && private_.empty() && waits_.empty());
  size_ = 0;
  op_calls_ = 0;
  stepless_releases_ = 0;
  closed_ = false;
  mark_ = NewMark();
  head_ = head;
  Instruction& first = NewStep();
  first.kind = head->kind;
  first.kernel = head->kernel;
  first.inputs = std::move(head->inputs);
  first.outputs = std::move(head->outputs);
  first.attrs = std::move(head->attrs);
  first.keeps_storage = head->keeps_storage;
  if (head->origin != nullptr) {  // the call's, not the run's (InstructionsBuilder::set_origin)
    first.origin = head->origin;
    head->origin = nullptr;
  }
  if (first.kind == InstructionKind::kOpCall) ++op_calls_;
  head->kind = InstructionKind::kOpCall;
  head->kernel = this;
  head->keeps_storage = false;
  head->inputs.clear();
  head->outputs.clear();
  NoteOperands(first, head->fresh_outputs);
  head->fresh_outputs = false;
}

void StepSequence::AddCall(const OpKernel& kernel, BlobPtrSpan inputs, BlobPtrSpan outputs,
                           std::shared_ptr<const AttrMap> attrs, bool fresh_outputs) {
  SLUICE_CHECK(!closed_);
  Instruction& step = NewStep();
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  // NewStep left both empty: appending stays on InlinedVector's inline fast path.
  for (Blob* blob : inputs) step.inputs.push_back(blob);
  for (Blob* blob : outputs) step.outputs.push_back(blob);
  step.attrs = std::move(attrs);
  ++op_calls_;
  if (head_ != nullptr) NoteOperands(step, fresh_outputs);
}

bool StepSequence::AddRelease(Blob* blob, bool take_hold) {
  SLUICE_CHECK(!closed_);
  // Born in this run and released in it: the run's steps are its only users.
  const bool becomes_private =
      head_ != nullptr && Marks::fuse_mark(blob) == mark_ && Marks::fuse_roles(blob) == kBorn;
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
  Instruction& step = NewStep();
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
  step.keeps_storage = Marks::ParksStorage(*blob);
  if (head_ != nullptr && !becomes_private) NoteOperands(step, /*fresh_outputs=*/false);
  return becomes_private && take_hold;
}

void StepSequence::AddSharedRelease(Blob* blob, ReleaseCount* count) {
  SLUICE_CHECK(!closed_ && head_ == nullptr && count != nullptr);
  Instruction& step = NewStep();
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
  step.release_count = count;
}

void StepSequence::Close() {
  if (closed_) return;
  closed_ = true;
  if (head_ == nullptr) {
    // Static: one note pass over every step, with a mark of its own.
    mark_ = NewMark();
    for (size_t i = 0; i < size_; ++i) NoteOperands(steps_[i], /*fresh_outputs=*/false);
    return;
  }
  for (Blob* blob : born_) {
    uint8_t& roles = Marks::fuse_roles(blob);
    if (Marks::fuse_mark(blob) == mark_ && (roles & kPrivate) != 0) continue;
    roles = static_cast<uint8_t>((roles & ~kBorn) | kWritten);
    head_->outputs.push_back(blob);
  }
  born_.clear();
}

const BlobPtrs& StepSequence::union_inputs() const {
  SLUICE_CHECK(closed_ && head_ == nullptr);
  return own_inputs_;
}

const BlobPtrs& StepSequence::union_outputs() const {
  SLUICE_CHECK(closed_ && head_ == nullptr);
  return own_outputs_;
}

void StepSequence::AddWait(StepSequence* source, int steps) {
  SLUICE_CHECK(head_ == nullptr && !closed_);
  SLUICE_CHECK(source != nullptr && source != this && run_ != nullptr && source->run_ == run_ &&
               steps > 0 && steps <= source->steps());
  // A wait with no step after it would order nothing; Launch still honours it at the end.
  waits_.push_back({size_, source, static_cast<uint32_t>(steps)});
  std::vector<uint32_t>& points = source->announcements_;
  const auto at = std::lower_bound(points.begin(), points.end(), static_cast<uint32_t>(steps));
  if (at == points.end() || *at != static_cast<uint32_t>(steps)) {
    points.insert(at, static_cast<uint32_t>(steps));
  }
}

void StepSequence::AnnounceAt(int steps) {
  SLUICE_CHECK(head_ == nullptr && !closed_ && run_ != nullptr && steps > 0 &&
               steps <= this->steps());
  const auto at =
      std::lower_bound(announcements_.begin(), announcements_.end(), static_cast<uint32_t>(steps));
  if (at == announcements_.end() || *at != static_cast<uint32_t>(steps)) {
    announcements_.insert(at, static_cast<uint32_t>(steps));
  }
}

void StepSequence::MarkKept() {
  for (Blob* blob : private_) {
    // A released blob's roles stay as its run left them (nobody may name it again). No
    // storage: something outside the builder released it again (a batch naming a released
    // blob), and the storage is gone.
    if ((Marks::fuse_roles(blob) & kStepless) != 0 && blob->raw_storage() != nullptr) {
      BlobLifecycle::Scheduler::MarkKept(blob);
    }
  }
}

void StepSequence::DropPrivateHolds(absl::FunctionRef<void(Blob*)> last) {
  for (Blob* blob : private_) {
    if (BlobLifecycle::Holds::DropPrivateHold(blob)) last(blob);
  }
  private_.clear();
}

bool StepSequence::Await(const Wait& wait, uint64_t run_tag, KernelContext& ctx) const {
  const StepSequence& source = *wait.source;
  // This run's tag, and at least `steps` passed: a value another run left (older, or — once
  // the run number wrapped — numerically larger) never matches the tag.
  auto passed = [&source, run_tag, steps = wait.steps] {
    // seq_cst: the Waker protocol needs the waiter's look in the single total order.
    const uint64_t progress = source.progress_.load(std::memory_order_seq_cst);
    return (progress & ~uint64_t{0xFFFFFFFF}) == run_tag &&
           static_cast<uint32_t>(progress) >= steps;
  };
  if (Waker::SpinWithBackoff(passed, kWaitSpin)) return true;
  while (!source.progress_waker_.WaitFor(passed, kCancelPoll)) {
    if (ctx.vm_cancelling()) return false;
  }
  return true;
}

void StepSequence::Announce(uint32_t passed, uint64_t run_tag, KernelContext& ctx,
                            bool check) const {
  // The clock goes out before the progress that lets a waiter read it.
  if (check) ctx.NoteSequencePassed(this, run_tag, passed);
  // seq_cst, then Notify: the Waker protocol (a parked waiter is seen or sees this).
  progress_.store(run_tag | passed, std::memory_order_seq_cst);
  progress_waker_.Notify();
}

int64_t StepSequence::RunSteps(size_t begin, size_t end, KernelContext& ctx, bool check) const {
  // Every step and most operands were last written on the producer's core, or — in a
  // static sequence — last touched a run ago (steps live in separate deque blocks, out of
  // the hardware prefetcher's reach): start moving the lines of the step after next and
  // the operands of the next step while this one runs.
  const size_t n = size_;
  for (size_t i = begin; i < n && i < begin + 2; ++i) PrefetchStep(steps_[i]);
  int64_t launched = 0;
  StepLog* const log = StepLog::Current();  // a control-flow kernel recording what it ran
  for (size_t i = begin; i < end; ++i) {
    if (i + 2 < n) PrefetchStep(steps_[i + 2]);
    if (i + 1 < n) PrefetchOperands(steps_[i + 1]);
    Instruction* step = &steps_[i];
    if (step->kind == InstructionKind::kOpCall) {
      // Relaxed: cancellation is a request; a step that misses it just runs.
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) continue;
      ++launched;
    }
    if (log != nullptr && (step->kernel == nullptr || !step->kernel->logs_own_steps())) {
      log->Add(step);
    }
    ctx.RunStep(step, check);
  }
  return launched;
}

int64_t StepSequence::RunUncounted(KernelContext& ctx) const {
  SLUICE_CHECK(waits_.empty() && announcements_.empty());
  return RunSteps(0, size_, ctx, ctx.sync_checker() != nullptr);
}

absl::Status StepSequence::Launch(KernelContext& ctx) const {
  const bool check = ctx.sync_checker() != nullptr;
  const size_t n = size_;
  if (waits_.empty() && announcements_.empty()) {
    // No lane: the steps, nothing between them (every eager run).
    const int64_t launched = RunSteps(0, n, ctx, check);
    if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  const uint64_t run_tag =
      run_ != nullptr ? uint64_t{run_->load(std::memory_order_relaxed)} << 32 : 0;
  int64_t launched = 0;
  bool abandoned = false;  // the VM cancelled while this sequence waited
  size_t next_wait = 0;
  size_t next_announcement = 0;
  for (size_t i = 0;;) {
    // At point i (i steps passed): announce it if another sequence waits for it, then the
    // waits before step i. After each wait, a cancelling VM abandons the rest: the source
    // may have abandoned too and announced steps it skipped (it saw the flag before
    // announcing, so this look sees it as well).
    if (next_announcement < announcements_.size() && announcements_[next_announcement] == i) {
      Announce(static_cast<uint32_t>(i), run_tag, ctx, check);
      ++next_announcement;
    }
    for (; next_wait < waits_.size() && waits_[next_wait].before_step == i; ++next_wait) {
      if (abandoned) continue;
      const Wait& wait = waits_[next_wait];
      if (!Await(wait, run_tag, ctx) || ctx.vm_cancelling()) {
        abandoned = true;
      } else if (check) {
        ctx.NoteSequenceWaited(wait.source, run_tag, wait.steps);
      }
    }
    if (i == n) break;
    size_t stop = n;
    if (next_announcement < announcements_.size()) {
      stop = std::min<size_t>(stop, announcements_[next_announcement]);
    }
    if (next_wait < waits_.size()) stop = std::min(stop, waits_[next_wait].before_step);
    // Abandoned: skip Releases too — the wait that ordered a Release after another
    // sequence's last use did not finish, and storage is freed with its blob anyway.
    if (!abandoned) launched += RunSteps(i, stop, ctx, check);
    i = stop;
  }
  if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace sluice::vm
