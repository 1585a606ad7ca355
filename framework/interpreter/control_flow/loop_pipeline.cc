#include "framework/interpreter/control_flow/loop_pipeline.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/status.h"
#include "framework/interpreter/control_flow/frame.h"
#include "vm/recorder.h"
#include "vm/tracer.h"

namespace sluice::framework::control_flow {
namespace {

constexpr uint64_t kTagMask = ~uint64_t{0xFFFFFFFF};
// An iteration's stage usually ends within microseconds: spin that long, then park.
constexpr std::chrono::nanoseconds kSpin{20000};
// A parked participant looks again this often (a helper also watches its lane's progress
// and the cancel flags, which do not wake it).
constexpr absl::Duration kPoll = absl::Milliseconds(1);

uint32_t Low(uint64_t word) { return static_cast<uint32_t>(word); }
bool Tagged(uint64_t word, uint64_t tag) { return (word & kTagMask) == tag; }

}  // namespace

class LoopPipeline::Helper final : public vm::OpKernel {
 public:
  Helper(LoopPipeline* pipeline, const vm::StepSequence* driver_lane, uint32_t driver_passed)
      : pipeline_(pipeline), driver_lane_(driver_lane), driver_passed_(driver_passed) {}

  absl::string_view name() const override { return "while_helper"; }
  // Its steps are reported one by one; it lists no operands of its own.
  bool checks_own_steps() const override { return true; }
  // Recorded as an empty expansion: replay runs the loop's iterations in the driver's.
  bool logs_own_steps() const override { return true; }

  absl::Status Launch(vm::KernelContext& ctx) const override {
    LoopPipeline& p = *pipeline_;
    const uint64_t tag = p.RunTag();
    const std::atomic<bool>* cancel = p.loop_.cancel;
    bool open = false;
    p.Await([&] {
      open = Tagged(p.published_.load(std::memory_order_seq_cst), tag);
      return open || driver_lane_->Passed(tag, driver_passed_) ||
             (cancel != nullptr && cancel->load(std::memory_order_relaxed)) || ctx.vm_cancelling();
    });
    if (open && !p.solo_.load(std::memory_order_seq_cst)) p.Participate(ctx, tag);
    if (vm::Recorder* recorder = ctx.recorder(); recorder != nullptr) {
      recorder->RecordExpansion(*ctx.instruction(), {});
    }
    return absl::OkStatus();
  }

 private:
  LoopPipeline* const pipeline_;
  const vm::StepSequence* const driver_lane_;
  const uint32_t driver_passed_;
};

LoopPipeline::LoopPipeline(std::string where, const LoopFrames& loop)
    : where_(std::move(where)), loop_(loop), slots_(static_cast<uint32_t>(loop.slots())) {}

LoopPipeline::~LoopPipeline() = default;

const vm::OpKernel& LoopPipeline::NewHelper(const vm::StepSequence* driver_lane, int driver_step) {
  helpers_.push_back(
      std::make_unique<Helper>(this, driver_lane, static_cast<uint32_t>(driver_step + 1)));
  return *helpers_.back();
}

uint64_t LoopPipeline::RunTag() const {
  return uint64_t{loop_.run_number->load(std::memory_order_relaxed)} << 32;
}

template <typename Pred>
void LoopPipeline::Await(Pred ready) {
  if (Waker::SpinWithBackoff(ready, kSpin)) return;
  while (!waker_.WaitFor(ready, kPoll)) {
  }
}

void LoopPipeline::Publish(std::atomic<uint64_t>& word, uint64_t value) {
  // seq_cst, then Notify: the Waker protocol (a parked participant is seen or sees this).
  word.store(value, std::memory_order_seq_cst);
  waker_.Notify();
}

bool LoopPipeline::TryClaimAndRun(vm::KernelContext& ctx, uint64_t tag) {
  uint64_t claim = claim_.load(std::memory_order_seq_cst);
  while (true) {
    const uint64_t published = published_.load(std::memory_order_seq_cst);
    if (!Tagged(claim, tag) || !Tagged(published, tag) || Low(claim) >= Low(published)) {
      return false;
    }
    if (claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_seq_cst)) {
      RunIteration(ctx, tag, Low(claim));
      return true;
    }
  }
}

void LoopPipeline::RunIteration(vm::KernelContext& ctx, uint64_t tag, uint32_t index) {
  const bool check = ctx.sync_checker() != nullptr;
  vm::Tracer* const tracer = ctx.tracer();
  const int64_t begin = tracer != nullptr ? vm::Tracer::NowNs() : 0;
  const Frame& body = loop_.body[index % slots_];
  // What the driver stage wrote (and every capture, which the driver's lane waited for).
  if (check) ctx.NoteSequenceWaited(&published_, tag, index + 1);
  // A static sequence reports its steps' errors itself (poisoning what they write) and
  // returns OK; anything else is the loop's failure.
  absl::Status status = body.stages[1]->Launch(ctx);
  Await([&] { return Low(completed_.load(std::memory_order_seq_cst)) >= index; });
  if (check && index > 0) ctx.NoteSequenceWaited(&completed_, tag, index);
  if (status.ok()) status = body.stages[2]->Launch(ctx);
  if (!status.ok()) Fail(status);
  if (tracer != nullptr) {
    tracer->Add({ctx.instruction()->stream, tracer->Intern(where_), begin, vm::Tracer::NowNs(),
                 static_cast<int64_t>(index)});
  }
  if (check) ctx.NoteSequencePassed(&completed_, tag, index + 1);
  Publish(completed_, tag | (index + 1));
}

void LoopPipeline::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (failure_.ok()) failure_ = status;
}

void LoopPipeline::EndAt(vm::KernelContext& ctx, uint64_t tag, uint32_t trip) {
  if (ctx.sync_checker() != nullptr) ctx.NoteSequencePassed(&end_, tag, 1);
  Publish(end_, tag | (trip + 1));
}

LoopPipeline::Advance LoopPipeline::AdvanceDriver(vm::KernelContext& ctx, uint64_t tag) {
  if (driving_.exchange(true, std::memory_order_seq_cst)) return Advance::kBusy;
  const bool check = ctx.sync_checker() != nullptr;
  const uint32_t in_flight = static_cast<uint32_t>(loop_.in_flight);
  Advance result = Advance::kNothing;
  bool joined_published = false;
  uint32_t joined_completed = 0;
  while (true) {
    if (Low(end_.load(std::memory_order_seq_cst)) != 0) break;
    const uint32_t next = Low(published_.load(std::memory_order_seq_cst));
    const uint32_t done = Low(completed_.load(std::memory_order_seq_cst));
    if (next >= done + in_flight) break;  // slot next + 1 is still read
    if (check) {
      // After the previous driver stage (perhaps on another lane), and after the
      // iterations whose slot this one overwrites.
      if (!joined_published) ctx.NoteSequenceWaited(&published_, tag, next);
      joined_published = true;
      if (done > joined_completed) ctx.NoteSequenceWaited(&completed_, tag, done);
      joined_completed = done;
    }
    if (loop_.cancel != nullptr && loop_.cancel->load(std::memory_order_relaxed)) {
      EndAt(ctx, tag, next);
      break;
    }
    const uint32_t slot = next % slots_;
    loop_.iterations[slot]->set_value(next);
    const Frame& check_frame = loop_.check[slot];
    if (absl::Status checked = check_frame.steps->Launch(ctx); !checked.ok()) {
      Fail(checked);
      EndAt(ctx, tag, next);
      break;
    }
    const vm::Blob* pred = check_frame.results[0];
    const std::optional<bool> again = ReadPredicate(pred);
    if (!again.has_value() && pred->poisoned()) {
      absl::MutexLock lock(&mu_);
      poison_ = pred->poison();
    }
    if (!again.has_value() || !*again) {
      EndAt(ctx, tag, next);
      break;
    }
    if (loop_.max_iterations.has_value() && next >= *loop_.max_iterations) {
      Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": more than ", *loop_.max_iterations,
                                                   " iterations (max_iterations)")));
      EndAt(ctx, tag, next);
      break;
    }
    if (absl::Status driven = loop_.body[slot].stages[0]->Launch(ctx); !driven.ok()) {
      Fail(driven);
      EndAt(ctx, tag, next);
      break;
    }
    if (check) ctx.NoteSequencePassed(&published_, tag, next + 1);
    Publish(published_, tag | (next + 1));
    result = Advance::kProgressed;
  }
  driving_.store(false, std::memory_order_seq_cst);
  waker_.Notify();
  return result;
}

bool LoopPipeline::Participate(vm::KernelContext& ctx, uint64_t tag) {
  while (true) {
    const uint64_t published = published_.load(std::memory_order_seq_cst);
    const uint64_t completed = completed_.load(std::memory_order_seq_cst);
    const uint64_t end = end_.load(std::memory_order_seq_cst);
    if (!Tagged(published, tag)) return false;  // a later run opened: this one is over
    if (TryClaimAndRun(ctx, tag)) continue;
    const Advance advanced = AdvanceDriver(ctx, tag);
    if (advanced == Advance::kProgressed) continue;
    if (Low(end_.load(std::memory_order_seq_cst)) != 0 &&
        Low(claim_.load(std::memory_order_seq_cst)) >=
            Low(published_.load(std::memory_order_seq_cst))) {
      return true;  // ended, and every published iteration is claimed
    }
    // Nothing to do now: wait for something to change (or for the token, if busy).
    const bool busy = advanced == Advance::kBusy;
    Await([&] {
      return published_.load(std::memory_order_seq_cst) != published ||
             completed_.load(std::memory_order_seq_cst) != completed ||
             end_.load(std::memory_order_seq_cst) != end ||
             (busy && !driving_.load(std::memory_order_seq_cst));
    });
  }
}

absl::Status LoopPipeline::Drive(vm::KernelContext& ctx) {
  const uint64_t tag = RunTag();
  const bool check = ctx.sync_checker() != nullptr;
  {
    absl::MutexLock lock(&mu_);
    failure_ = absl::OkStatus();
    poison_ = absl::OkStatus();
  }
  const absl::Status entered = loop_.entry.steps->Launch(ctx);
  if (!entered.ok()) Fail(entered);
  // Open the run: the other words first, published_ last (a helper reads them after it).
  // A failed entry opens the run ended, before anyone can advance it.
  claim_.store(tag, std::memory_order_seq_cst);
  completed_.store(tag, std::memory_order_seq_cst);
  if (check && !entered.ok()) ctx.NoteSequencePassed(&end_, tag, 1);
  end_.store(entered.ok() ? tag : tag | 1, std::memory_order_seq_cst);
  solo_.store(ctx.recorder() != nullptr, std::memory_order_seq_cst);
  if (check) ctx.NoteSequencePassed(&published_, tag, 0);  // the entry and the captures
  Publish(published_, tag);
  Participate(ctx, tag);
  // Every iteration is claimed; wait for the ones helpers run.
  const uint32_t trip = Low(end_.load(std::memory_order_seq_cst)) - 1;
  Await([&] { return Low(completed_.load(std::memory_order_seq_cst)) >= trip; });
  if (check) {
    ctx.NoteSequenceWaited(&end_, tag, 1);
    if (trip > 0) ctx.NoteSequenceWaited(&completed_, tag, trip);
  }
  absl::Status failure, poison;
  {
    absl::MutexLock lock(&mu_);
    failure = failure_;
    poison = poison_;
  }
  if (!failure.ok()) return failure;
  if (!poison.ok()) {
    // The condition failed, or read a value a failed body op left (reported then).
    PoisonAll(ctx.outputs(), poison);
    return absl::OkStatus();
  }
  return loop_.exit[trip % slots_].steps->Launch(ctx);
}

}  // namespace sluice::framework::control_flow
