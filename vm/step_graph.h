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
// A member's Launch joins the current run (the first member of a run resets the counts),
// then loops: take the ready task with the smallest index (program order: the oldest work
// first), run its steps through KernelContext::RunStep on the member's own stream, count
// down its successors, and make those that reach zero ready. It leaves once every task of
// the run is done. A member that arrives after that leaves at once, so no member waits for
// another to arrive.
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
#include "core/waker.h"
#include "vm/kernel.h"
#include "vm/step_sequence.h"

namespace sluice::vm {

// Thread-compatible while it is built (AddTask, Close). Then its tasks and edges are
// immutable and the members of one run share the per-run state under `mu_`.
class StepGraph {
 public:
  // `run_counter`: the run number every member reads at Launch (as
  // StepSequence::set_run_counter); must outlive the graph.
  explicit StepGraph(const std::atomic<uint32_t>* run_counter);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Appends a task (a closed, static StepSequence without waits) that may run once each of
  // `predecessors` (indices of earlier tasks) has run. Returns its index.
  int AddTask(std::unique_ptr<StepSequence> task, absl::Span<const int> predecessors);
  // Ends the build: `members` (>= 1) kernels, one for each worker of the team.
  void Close(int members);

  int tasks() const { return static_cast<int>(tasks_.size()); }
  int edges() const { return edges_; }
  // The kernel of the team's i-th member (0 <= i < members), valid while the graph lives.
  const OpKernel& member(int i) const;

 private:
  class Member;

  // A member's Launch.
  void Work(KernelContext& ctx) const;
  // Under mu_: the first member of the run tagged `run_tag` restores the counts.
  void JoinRun(uint64_t run_tag) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: `done` (or -1) finished; returns the next task to run, or -1 when none is
  // ready. Sets `more` when others are still ready after it.
  int FinishAndTake(int done, bool& more) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Until a task is ready or the run is done; false once the VM cancels its work.
  bool AwaitWork(KernelContext& ctx) const;

  const std::atomic<uint32_t>* const run_;
  std::vector<std::unique_ptr<StepSequence>> tasks_;
  std::vector<std::vector<int>> predecessors_;
  std::vector<std::vector<int>> successors_;
  std::vector<int> initial_pending_;
  std::vector<int> roots_;
  int edges_ = 0;
  std::vector<std::unique_ptr<Member>> members_;
  bool closed_ = false;

  // Per-run state.
  mutable absl::Mutex mu_;
  mutable uint64_t run_tag_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  mutable std::vector<int> pending_ ABSL_GUARDED_BY(mu_);  // predecessors not yet done
  mutable std::vector<int> ready_ ABSL_GUARDED_BY(mu_);    // a min-heap of task indices
  // Mirrors for parked members' conditions (written under mu_, read without it).
  mutable std::atomic<int> ready_count_{0};
  mutable std::atomic<int> done_{0};
  mutable Waker work_waker_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_STEP_GRAPH_H_
