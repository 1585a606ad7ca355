// StepGraph: a static graph of tasks — each a StepSequence whose steps run in order — that a
// team of host workers runs by counting dependences, as a task scheduler would, instead of
// giving each worker a fixed share (lanes, vm/step_sequence.h).
//
// Why. A lane belongs to one worker. When that worker loses its core (another process, a
// spinning thread) in the middle of a step, its lane stops, and the other lanes stop soon
// after, at their first wait for it. With a team, a member that loses its core holds up only
// the task it is running and what depends on that; the others go on taking whatever is
// ready. A member that finds nothing ready spins briefly and then parks, so a busy machine
// keeps as many members running as there is work for.
//
// How it runs. The graph is handed to the VM as one OpCall per member (member(i)), each on a
// host stream of its own worker (the same condition as lanes: VirtualMachine::CanRunLanes).
// A member's Launch joins the current run (the first member of a run resets the counts and
// deals the root tasks to the members' queues), then loops: take the newest task of its own
// queue, or else steal the oldest of another member's; run its steps through
// KernelContext::RunStep on the member's own stream; count down each successor's pending
// predecessors and queue, on its own queue, those that reach zero. A member whose search
// finds nothing spins briefly, then parks; it leaves once every task of the run is done. A
// member that arrives after that leaves at once, so no member waits for another to arrive.
// Each member keeps its queue and its count of finished tasks on a cache line of its own:
// the members share a line only where a task's successor was made ready by another member,
// or where one steals (a single shared queue, tried first, cost every task a few line
// transfers between cores, and ran the unloaded random DAG 7% slower than lanes).
//
// Runs of one graph follow one another (the interpreter submits a run after the previous
// one completed, and every member's instruction belongs to its run), so a member of run k+1
// never meets a member of run k.
//
// The sync checker. A task's predecessors were run by any member, so every task reports,
// before it runs, an ordering edge from each predecessor (KernelContext::NoteSequenceWaited)
// and, after it ran, that it passed (NoteSequencePassed): the checker then sees the
// dependence edges, not just each member's stream order. The recorder cannot write a graph
// (it writes sequences and waits), so a recording VM gets lanes instead.
//
// Cancellation. A task's steps follow the StepSequence rules (a cancelled interpreter run
// skips OpCalls and still runs Releases). A VM cancelling its work (shutdown) makes members
// stop taking tasks; a member parked for work looks at that flag every millisecond.
#ifndef SLUICE_VM_STEP_GRAPH_H_
#define SLUICE_VM_STEP_GRAPH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "core/spin_lock.h"
#include "core/waker.h"
#include "vm/kernel.h"
#include "vm/step_sequence.h"

namespace sluice::vm {

// Thread-compatible while it is built (AddTask, Close). Then its tasks and edges are
// immutable, and the members of one run share the per-run state: the pending counts
// (atomics), the queues (each under its lock) and the finished counts (atomics).
class StepGraph {
 public:
  // `run_counter`: the run number every member reads at Launch (as
  // StepSequence::set_run_counter); must outlive the graph. `ops_run` (may be null): each
  // member adds the OpCall steps it launched, once, as it leaves (the tasks' own counters
  // are not used).
  explicit StepGraph(const std::atomic<uint32_t>* run_counter,
                     std::atomic<int64_t>* ops_run = nullptr);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Appends a task (a closed, static StepSequence without waits) that may run once each of
  // `predecessors` (indices of earlier tasks) has run. Returns its index.
  int AddTask(std::unique_ptr<StepSequence> task, absl::Span<const int> predecessors);
  // Ends the build: `members` (>= 1) kernels, one for each worker of the team.
  void Close(int members);

  int tasks() const { return static_cast<int>(tasks_.size()); }
  // The kernel of the team's i-th member (0 <= i < members), valid while the graph lives.
  const OpKernel& member(int i) const;

 private:
  class Member;
  // A member's ready tasks, and how many tasks it finished in the run. Its owner pushes and
  // pops at the back (the task it just made ready runs next, its operands in this core's
  // cache); thieves take the front (the oldest). A line of its own.
  struct alignas(64) Queue {
    SpinLock lock;
    std::vector<int> tasks ABSL_GUARDED_BY(lock);
    size_t head ABSL_GUARDED_BY(lock) = 0;  // tasks before it were stolen
    // Mirrors for members looking for work without the lock (seq_cst: the Waker protocol).
    std::atomic<int> size{0};
    std::atomic<int> finished{0};

    // Under `lock`, after tasks were taken or added: an emptied queue starts over at the
    // front, and `size` mirrors what is left.
    void SettleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lock) {
      if (tasks.size() == head) {
        tasks.clear();
        head = 0;
      }
      size.store(static_cast<int>(tasks.size() - head), std::memory_order_seq_cst);
    }
  };

  // Member `self`'s Launch.
  void Work(KernelContext& ctx, int self) const;
  // The first member of the run tagged `run_tag` resets the counts and deals the roots.
  void JoinRun(uint64_t run_tag) const;
  // The newest task of `self`'s queue, else the oldest of another's; -1 when all are empty.
  int Take(int self) const;
  // Queues `ready` (tasks whose last predecessor just finished) on `self`'s queue.
  void Push(int self, const std::vector<int>& ready) const;
  bool AnyQueued() const;
  bool AllDone() const;
  // Until a task is queued or the run is done; false once the VM cancels its work.
  bool AwaitWork(KernelContext& ctx) const;

  const std::atomic<uint32_t>* const run_;
  std::atomic<int64_t>* const ops_run_;
  std::vector<std::unique_ptr<StepSequence>> tasks_;
  std::vector<std::vector<int>> predecessors_;
  std::vector<std::vector<int>> successors_;
  std::vector<int> initial_pending_;
  std::vector<int> roots_;
  std::vector<std::unique_ptr<Member>> members_;
  bool closed_ = false;

  // Per-run state.
  mutable absl::Mutex run_mu_;
  mutable uint64_t run_tag_ ABSL_GUARDED_BY(run_mu_) = ~uint64_t{0};
  std::unique_ptr<std::atomic<int>[]> pending_;  // predecessors not yet finished, per task
  std::unique_ptr<Queue[]> queues_;              // one per member
  mutable Waker work_waker_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_STEP_GRAPH_H_
