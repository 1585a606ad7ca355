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
  Member(const StepGraph* graph, int index) : graph_(graph), index_(index) {}
  absl::string_view name() const override { return "step_graph"; }
  absl::Status Launch(KernelContext& ctx) const override {
    graph_->Work(ctx, index_);
    return absl::OkStatus();
  }
  // Each task's steps settle their own poison and report their own accesses.
  bool handles_poison() const override { return true; }
  bool checks_own_steps() const override { return true; }

 private:
  const StepGraph* const graph_;
  const int index_;
};

StepGraph::StepGraph(const std::atomic<uint32_t>* run_counter, std::atomic<int64_t>* ops_run)
    : run_(run_counter), ops_run_(ops_run) {
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
  for (int i = 0; i < members; ++i) members_.push_back(std::make_unique<Member>(this, i));
  pending_ = std::make_unique<std::atomic<int>[]>(tasks_.size());
  queues_ = std::make_unique<Queue[]>(static_cast<size_t>(members));
  for (int i = 0; i < members; ++i) {
    Queue& queue = queues_[static_cast<size_t>(i)];
    SpinLockHolder lock(&queue.lock);
    queue.tasks.reserve(tasks_.size());
  }
}

const OpKernel& StepGraph::member(int i) const {
  SLUICE_CHECK(closed_ && i >= 0 && i < static_cast<int>(members_.size()));
  return *members_[static_cast<size_t>(i)];
}

void StepGraph::JoinRun(uint64_t run_tag) const {
  absl::MutexLock run_lock(&run_mu_);
  if (run_tag_ == run_tag) return;
  run_tag_ = run_tag;
  // Every member of the previous run has left (its instruction completed before this run
  // was submitted): nobody else touches the counts or the queues now.
  for (size_t t = 0; t < tasks_.size(); ++t) {
    pending_[t].store(initial_pending_[t], std::memory_order_relaxed);
  }
  const size_t members = members_.size();
  for (size_t i = 0; i < members; ++i) {
    Queue& queue = queues_[i];
    SpinLockHolder lock(&queue.lock);
    queue.tasks.clear();
    queue.head = 0;
    for (size_t r = i; r < roots_.size(); r += members) queue.tasks.push_back(roots_[r]);
    queue.finished.store(0, std::memory_order_seq_cst);
    queue.SettleLocked();
  }
}

int StepGraph::Take(int self) const {
  const int members = static_cast<int>(members_.size());
  {
    Queue& own = queues_[static_cast<size_t>(self)];
    SpinLockHolder lock(&own.lock);
    if (own.tasks.size() > own.head) {
      const int task = own.tasks.back();
      own.tasks.pop_back();
      own.SettleLocked();
      return task;
    }
  }
  for (int k = 1; k < members; ++k) {
    Queue& victim = queues_[static_cast<size_t>((self + k) % members)];
    if (victim.size.load(std::memory_order_relaxed) == 0) continue;
    SpinLockHolder lock(&victim.lock);
    if (victim.tasks.size() == victim.head) continue;
    const int task = victim.tasks[victim.head++];
    victim.SettleLocked();
    return task;
  }
  return -1;
}

void StepGraph::Push(int self, const std::vector<int>& ready) const {
  Queue& own = queues_[static_cast<size_t>(self)];
  {
    SpinLockHolder lock(&own.lock);
    own.tasks.insert(own.tasks.end(), ready.begin(), ready.end());
    own.SettleLocked();  // seq_cst, then Notify: the Waker protocol
  }
  work_waker_.Notify();
}

bool StepGraph::AnyQueued() const {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (queues_[i].size.load(std::memory_order_seq_cst) > 0) return true;
  }
  return false;
}

bool StepGraph::AllDone() const {
  int finished = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    finished += queues_[i].finished.load(std::memory_order_seq_cst);
  }
  return finished == tasks();
}

bool StepGraph::AwaitWork(KernelContext& ctx) const {
  auto work = [this] { return AnyQueued() || AllDone(); };
  if (Waker::SpinWithBackoff(work, kMemberIdleSpin)) return true;
  while (!work_waker_.WaitFor(work, kMemberCancelPoll)) {
    if (ctx.vm_cancelling()) return false;
  }
  return true;
}

void StepGraph::Work(KernelContext& ctx, int self) const {
  const bool check = ctx.sync_checker() != nullptr;
  const uint64_t run_tag = uint64_t{run_->load(std::memory_order_relaxed)} << 32;
  JoinRun(run_tag);
  Queue& own = queues_[static_cast<size_t>(self)];
  std::vector<int> ready;
  int64_t launched = 0;
  while (!ctx.vm_cancelling()) {
    const int task = Take(self);
    if (task < 0) {
      if (AllDone()) {
        work_waker_.Notify();  // the members waiting for work leave too
        break;
      }
      if (!AwaitWork(ctx)) break;
      continue;
    }
    if (check) {
      for (int p : predecessors_[static_cast<size_t>(task)]) {
        ctx.NoteSequenceWaited(this, run_tag, static_cast<uint32_t>(p) + 1);
      }
    }
    // A task has no waits: its steps run in order and report their own errors.
    launched += tasks_[static_cast<size_t>(task)]->RunUncounted(ctx);
    // The clock goes out before the count that lets a successor run.
    if (check) ctx.NoteSequencePassed(this, run_tag, static_cast<uint32_t>(task) + 1);
    ready.clear();
    for (int s : successors_[static_cast<size_t>(task)]) {
      // acq_rel: the member that makes a task ready has seen every predecessor's writes.
      if (pending_[static_cast<size_t>(s)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        ready.push_back(s);
      }
    }
    // Oldest last: the owner pops the back, so it runs the oldest it made ready first.
    std::reverse(ready.begin(), ready.end());
    if (!ready.empty()) Push(self, ready);
    // After the push: a member that sees every task finished finds no work left behind.
    own.finished.fetch_add(1, std::memory_order_seq_cst);
  }
  if (ops_run_ != nullptr && launched > 0) ops_run_->fetch_add(launched, std::memory_order_relaxed);
}

}  // namespace sluice::vm
