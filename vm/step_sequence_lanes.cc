// StepSequence as a lane: waits, announcements and helping (see "Helping" in
// step_sequence.h).
#include <chrono>
#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "core/waker.h"
#include "vm/step_sequence.h"

namespace sluice::vm {

namespace {

// A cross-sequence wait usually ends within an op or two: spin that long, then park.
constexpr std::chrono::nanoseconds kWaitSpin{20000};
// A parked waiter looks at the VM's cancel flag this often (the source may never run).
constexpr absl::Duration kCancelPoll = absl::Milliseconds(1);
// Helping nests at most this deep (a lane that waits for a lane that waits ...); deeper,
// the helper waits as the lane's owner would.
constexpr int kMaxHelpDepth = 4;

constexpr size_t kToTheEnd = std::numeric_limits<size_t>::max();

}  // namespace

bool StepSequence::Passed(uint32_t steps, uint64_t run_tag) const {
  // This run's tag, and at least `steps` passed: a value another run left (older, or — once
  // the run number wrapped — numerically larger) never matches the tag. seq_cst: the Waker
  // protocol needs the waiter's look in the single total order.
  const uint64_t progress = progress_.load(std::memory_order_seq_cst);
  return (progress & ~uint64_t{0xFFFFFFFF}) == run_tag && static_cast<uint32_t>(progress) >= steps;
}

bool StepSequence::TryTakeBaton(uint64_t run_tag) const {
  if (open_.load(std::memory_order_acquire) != (run_tag | 1)) return false;
  uint32_t down = 0;
  if (!baton_.compare_exchange_strong(down, 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
    return false;
  }
  // The owner closes the run holding the baton: once we hold it, a run still open is ours
  // to help (and the cursor is the one its last holder left).
  if (open_.load(std::memory_order_relaxed) != (run_tag | 1)) {
    DropBaton();
    return false;
  }
  return true;
}

void StepSequence::TakeBaton() const {
  // The wait's condition must not take the baton itself: absl::Mutex may evaluate it on
  // the notifying thread, and more than once.
  auto down = [this] { return baton_.load(std::memory_order_seq_cst) == 0; };
  for (;;) {
    uint32_t expected = 0;
    if (baton_.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) return;
    baton_waker_.Wait(down, kWaitSpin);
  }
}

void StepSequence::DropBaton() const {
  // seq_cst, then Notify: the Waker protocol (an owner parked for the baton).
  baton_.store(0, std::memory_order_seq_cst);
  baton_waker_.Notify();
}

void StepSequence::Announce(uint32_t passed, uint64_t run_tag, KernelContext& ctx,
                            bool check) const {
  // The clock goes out before the progress that lets a waiter read it.
  if (check) ctx.NoteSequencePassed(this, run_tag, passed);
  // seq_cst, then Notify: the Waker protocol (a parked waiter is seen or sees this).
  progress_.store(run_tag | passed, std::memory_order_seq_cst);
  progress_waker_.Notify();
}

StepSequence::Stop StepSequence::Advance(size_t until) const {
  Cursor& cursor = cursor_;
  KernelContext& ctx = *ctx_;
  const size_t n = size_;
  for (;;) {
    // At point i (i steps passed): announce it if another sequence waits for it, then the
    // waits before step i. After each wait, a cancelling VM abandons the rest: the source
    // may have abandoned too and announced steps it skipped (it saw the flag before
    // announcing, so this look sees it as well).
    const size_t i = cursor.at;
    if (cursor.next_announcement < announcements_.size() &&
        announcements_[cursor.next_announcement] == i) {
      Announce(static_cast<uint32_t>(i), run_tag_, ctx, check_);
      ++cursor.next_announcement;
    }
    if (i >= until) return Stop::kReached;
    for (; cursor.next_wait < waits_.size() && waits_[cursor.next_wait].before_step == i;
         ++cursor.next_wait) {
      if (cursor.abandoned) continue;
      const Wait& wait = waits_[cursor.next_wait];
      const bool passed = wait.source->Passed(wait.steps, run_tag_);
      if (ctx.vm_cancelling()) {
        cursor.abandoned = true;
      } else if (!passed) {
        return Stop::kBlocked;
      } else if (check_) {
        ctx.NoteSequenceWaited(wait.source, run_tag_, wait.steps);
      }
    }
    if (i == n) return Stop::kDone;
    size_t stop = n;
    if (cursor.next_announcement < announcements_.size()) {
      stop = std::min<size_t>(stop, announcements_[cursor.next_announcement]);
    }
    if (cursor.next_wait < waits_.size()) stop = std::min(stop, waits_[cursor.next_wait].before_step);
    // Abandoned: skip Releases too — the wait that ordered a Release after another
    // sequence's last use did not finish, and storage is freed with its blob anyway.
    if (!cursor.abandoned) cursor.launched += RunSteps(i, stop, ctx, check_);
    cursor.at = stop;
  }
}

bool StepSequence::HelpUntil(uint32_t steps, uint64_t run_tag, int depth) const {
  if (Passed(steps, run_tag)) return true;
  if (!TryTakeBaton(run_tag)) return false;
  bool reached = false;
  for (;;) {
    if (Advance(steps) != Stop::kBlocked) {
      reached = true;
      break;
    }
    // This lane waits in turn: help its source, then go on here (still holding the baton).
    const Wait& wait = waits_[cursor_.next_wait];
    if (depth >= kMaxHelpDepth || !wait.source->HelpUntil(wait.steps, run_tag, depth + 1)) break;
  }
  DropBaton();
  return reached || Passed(steps, run_tag);
}

void StepSequence::AwaitSource(const Wait& wait, uint64_t run_tag, KernelContext& ctx) const {
  const StepSequence& source = *wait.source;
  auto passed = [&source, &wait, run_tag] { return source.Passed(wait.steps, run_tag); };
  // Spin while the source runs; when its baton goes down (its owner waits, or was woken
  // and has no core yet), run it here instead.
  auto passed_or_down = [&] {
    return passed() || (source.baton_.load(std::memory_order_relaxed) == 0 &&
                        source.open_.load(std::memory_order_relaxed) == (run_tag | 1));
  };
  const auto deadline = std::chrono::steady_clock::now() + kWaitSpin;
  for (auto left = kWaitSpin; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::nanoseconds>(
           deadline - std::chrono::steady_clock::now())) {
    if (!Waker::SpinWithBackoff(passed_or_down, left)) break;
    if (passed() || source.HelpUntil(wait.steps, run_tag, /*depth=*/1)) return;
  }
  while (!source.progress_waker_.WaitFor(passed, kCancelPoll)) {
    if (ctx.vm_cancelling()) return;
  }
}

absl::Status StepSequence::LaunchLane(KernelContext& ctx) const {
  const uint64_t run_tag =
      run_ != nullptr ? uint64_t{run_->load(std::memory_order_relaxed)} << 32 : 0;
  // A helper that looked at the previous run may still hold the baton for a moment.
  TakeBaton();
  cursor_ = Cursor{};
  ctx_ = &ctx;
  run_tag_ = run_tag;
  check_ = ctx.sync_checker() != nullptr;
  open_.store(run_tag | 1, std::memory_order_release);
  for (;;) {
    if (Advance(kToTheEnd) == Stop::kDone) break;
    const Wait& wait = waits_[cursor_.next_wait];
    if (wait.source->HelpUntil(wait.steps, run_tag, /*depth=*/1)) continue;
    // Put the baton down while waiting: a lane this one is waited for may run its steps.
    DropBaton();
    AwaitSource(wait, run_tag, ctx);
    TakeBaton();
  }
  open_.store(0, std::memory_order_relaxed);
  const int64_t launched = cursor_.launched;
  ctx_ = nullptr;
  DropBaton();
  if (ops_run_ != nullptr) ops_run_->fetch_add(launched, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace sluice::vm
