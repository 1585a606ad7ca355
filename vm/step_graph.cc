#include "vm/step_graph.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "core/status.h"

namespace sluice::vm {

namespace {

// A member with nothing ready usually gets work within a task or two: spin that long
// (yielding after the first microsecond), then park.
constexpr std::chrono::nanoseconds kMemberIdleSpin{20000};
// A parked member looks at the VM's cancel flag this often.
constexpr absl::Duration kMemberCancelPoll = absl::Milliseconds(1);

}  // namespace

class StepGraph::Member final : public OpKernel {
 public:
  explicit Member(const StepGraph* graph) : graph_(graph) {}
  absl::string_view name() const override { return "step_graph"; }
  absl::Status Launch(KernelContext& ctx) const override {
    graph_->Work(ctx);
    return absl::OkStatus();
  }
  // Each task's steps settle their own poison and report their own accesses.
  bool handles_poison() const override { return true; }
  bool checks_own_steps() const override { return true; }

 private:
  const StepGraph* const graph_;
};

StepGraph::StepGraph(const std::atomic<uint32_t>* run_counter) : run_(run_counter) {
  SLUICE_CHECK(run_counter != nullptr);
}

StepGraph::~StepGraph() = default;

int StepGraph::AddTask(std::unique_ptr<StepSequence> task, absl::Span<const int> predecessors) {
  SLUICE_CHECK(!closed_ && task != nullptr && task->waits() == 0);
  const int index = static_cast<int>(tasks_.size());
  std::vector<int> preds(predecessors.begin(), predecessors.end());
  std::sort(preds.begin(), preds.end());
  preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
  for (int p : preds) {
    SLUICE_CHECK(p >= 0 && p < index);
    successors_[static_cast<size_t>(p)].push_back(index);
  }
  edges_ += static_cast<int>(preds.size());
  if (preds.empty()) roots_.push_back(index);
  initial_pending_.push_back(static_cast<int>(preds.size()));
  predecessors_.push_back(std::move(preds));
  successors_.emplace_back();
  tasks_.push_back(std::move(task));
  return index;
}

void StepGraph::Close(int members) {
  SLUICE_CHECK(!closed_ && members >= 1);
  closed_ = true;
  for (int i = 0; i < members; ++i) members_.push_back(std::make_unique<Member>(this));
}

const OpKernel& StepGraph::member(int i) const {
  SLUICE_CHECK(closed_ && i >= 0 && i < static_cast<int>(members_.size()));
  return *members_[static_cast<size_t>(i)];
}

void StepGraph::JoinRun(uint64_t run_tag) const {
  if (run_tag_ == run_tag) return;
  run_tag_ = run_tag;
  pending_ = initial_pending_;
  ready_ = roots_;  // ascending: already a min-heap
  ready_count_.store(static_cast<int>(ready_.size()), std::memory_order_seq_cst);
  done_.store(0, std::memory_order_seq_cst);
}

int StepGraph::FinishAndTake(int done, bool& more) const {
  if (done >= 0) {
    for (int s : successors_[static_cast<size_t>(done)]) {
      if (--pending_[static_cast<size_t>(s)] == 0) {
        ready_.push_back(s);
        std::push_heap(ready_.begin(), ready_.end(), std::greater<int>());
      }
    }
    done_.fetch_add(1, std::memory_order_seq_cst);
  }
  int next = -1;
  if (!ready_.empty()) {
    std::pop_heap(ready_.begin(), ready_.end(), std::greater<int>());
    next = ready_.back();
    ready_.pop_back();
  }
  // seq_cst, then (outside the lock) Notify: the Waker protocol.
  ready_count_.store(static_cast<int>(ready_.size()), std::memory_order_seq_cst);
  more = !ready_.empty();
  return next;
}

bool StepGraph::AwaitWork(KernelContext& ctx) const {
  const int n = tasks();
  auto work = [this, n] {
    return ready_count_.load(std::memory_order_seq_cst) > 0 ||
           done_.load(std::memory_order_seq_cst) == n;
  };
  if (Waker::SpinWithBackoff(work, kMemberIdleSpin)) return true;
  while (!work_waker_.WaitFor(work, kMemberCancelPoll)) {
    if (ctx.vm_cancelling()) return false;
  }
  return true;
}

void StepGraph::Work(KernelContext& ctx) const {
  const bool check = ctx.sync_checker() != nullptr;
  const uint64_t run_tag = uint64_t{run_->load(std::memory_order_relaxed)} << 32;
  const int n = tasks();
  int task = -1;
  while (true) {
    bool more = false;
    int finished_count = 0;
    {
      absl::MutexLock lock(&mu_);
      JoinRun(run_tag);
      task = FinishAndTake(task, more);
      finished_count = done_.load(std::memory_order_relaxed);
    }
    if (task < 0) {
      if (finished_count == n) {
        work_waker_.Notify();  // the last task's members leave too
        return;
      }
      if (!AwaitWork(ctx) || ctx.vm_cancelling()) return;
      continue;
    }
    if (more) work_waker_.Notify();
    if (check) {
      for (int p : predecessors_[static_cast<size_t>(task)]) {
        ctx.NoteSequenceWaited(this, run_tag, static_cast<uint32_t>(p) + 1);
      }
    }
    // A task has no waits: Launch runs its steps and never fails (step errors go to the
    // error sink under each step's name).
    (void)tasks_[static_cast<size_t>(task)]->Launch(ctx);
    // The clock goes out before the count that lets a successor run.
    if (check) ctx.NoteSequencePassed(this, run_tag, static_cast<uint32_t>(task) + 1);
  }
}

}  // namespace sluice::vm
