#include "vm/op_sequence.h"

#include "core/status.h"
#include "vm/sync_checker.h"

namespace sluice::vm {
namespace {

// A cross-sequence wait usually ends within an op or two: spin that long, then park.
constexpr std::chrono::nanoseconds kWaitSpin{20000};
// A parked waiter looks at the VM's cancel flag this often (the source may never run).
constexpr absl::Duration kCancelPoll = absl::Milliseconds(1);

}  // namespace

OpSequence::~OpSequence() = default;

void OpSequence::AddOpCall(const OpKernel& kernel, BlobPtrs inputs, BlobPtrs outputs,
                           std::shared_ptr<const AttrMap> attrs) {
  for (Blob* blob : inputs) {
    if (!written_set_.contains(blob) && external_set_.insert(blob).second) {
      external_inputs_.push_back(blob);
    }
  }
  for (Blob* blob : outputs) {
    if (written_set_.insert(blob).second) all_outputs_.push_back(blob);
  }
  Instruction& step = steps_.emplace_back();
  announce_.push_back(0);
  step.kind = InstructionKind::kOpCall;
  step.kernel = &kernel;
  step.inputs = std::move(inputs);
  step.outputs = std::move(outputs);
  step.attrs = std::move(attrs);
  ++op_calls_;
}

void OpSequence::AddRelease(Blob* blob) {
  if (written_set_.insert(blob).second) all_outputs_.push_back(blob);
  Instruction& step = steps_.emplace_back();
  announce_.push_back(0);
  step.kind = InstructionKind::kRelease;
  step.outputs.push_back(blob);
}

void OpSequence::AddWait(OpSequence* source, int steps) {
  SLUICE_CHECK(source != nullptr && source != this && run_ != nullptr && source->run_ == run_ &&
               steps > 0 && steps <= source->size());
  // A wait with no step after it would order nothing; Launch still honours it at the end.
  waits_.push_back({steps_.size(), source, static_cast<uint32_t>(steps)});
  source->announce_[steps - 1] = 1;
}

bool OpSequence::Await(const Wait& wait, uint64_t run_tag, KernelContext& ctx) const {
  const OpSequence& source = *wait.source;
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

absl::Status OpSequence::Launch(KernelContext& ctx) const {
  SyncChecker* const checker = ctx.sync_checker();
  const uint64_t run_tag =
      run_ != nullptr ? uint64_t{run_->load(std::memory_order_relaxed)} << 32 : 0;
  int64_t launched = 0;
  bool abandoned = false;  // the VM cancelled while this sequence waited
  size_t next_wait = 0;
  const size_t n = steps_.size();
  // Waits before step `i`. After each, a cancelling VM abandons the rest: the source may
  // have abandoned too and announced steps it skipped (it saw the flag before announcing,
  // so this look sees it as well).
  auto await_before = [&](size_t i) {
    for (; next_wait < waits_.size() && waits_[next_wait].before_step == i; ++next_wait) {
      if (abandoned) continue;
      const Wait& wait = waits_[next_wait];
      if (!Await(wait, run_tag, ctx) || ctx.vm_cancelling()) {
        abandoned = true;
      } else if (checker != nullptr) {
        ctx.NoteSequenceWaited(wait.source, run_tag, wait.steps);
      }
    }
  };
  for (size_t i = 0; i < n; ++i) {
    await_before(i);
    Instruction* step = &steps_[i];
    if (i + 1 < n) {
      // The next step's header and operand lists, and the blob it writes: a sequence walks
      // thousands of steps once per run, mostly out of cache.
      const Instruction& next = steps_[i + 1];
      __builtin_prefetch(&next);
      __builtin_prefetch(reinterpret_cast<const char*>(&next) + 64);
      __builtin_prefetch(reinterpret_cast<const char*>(&next) + 128);
      if (!next.outputs.empty()) __builtin_prefetch(next.outputs.front());
    }
    // Abandoned: skip Releases too — the wait that ordered a Release after another
    // sequence's last use did not finish, and storage is freed with its blob anyway.
    bool run = !abandoned;
    if (run && step->kind == InstructionKind::kOpCall) {
      // Relaxed: cancellation is a request; a step that misses it just runs.
      run = cancel_ == nullptr || !cancel_->load(std::memory_order_relaxed);
      if (run) ++launched;
    }
    if (run) ctx.RunStep(step, /*check=*/checker != nullptr);
    if (announce_[i]) {
      // The clock goes out before the progress that lets a waiter read it.
      if (checker != nullptr) ctx.NoteSequencePassed(this, run_tag, static_cast<uint32_t>(i + 1));
      // seq_cst, then Notify: the Waker protocol (a parked waiter is seen or sees this).
      progress_.store(run_tag | (i + 1), std::memory_order_seq_cst);
      progress_waker_.Notify();
    }
  }
  await_before(n);
  if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace sluice::vm
