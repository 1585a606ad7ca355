// Engine: the VM's scheduler. Instructions arrive through a multi-producer queue; the engine
// resolves their dependences — derived from the blobs they touch (eager) or given with a
// precomputed batch (interpreter) — dispatches ready ones to their stream's ThreadCtx, and
// releases successors as instructions are dispatched or complete.
//
// The edge rule. An edge A -> B is satisfied
//  - once A is *dispatched*, when dispatch order alone guarantees B sees A's effects:
//    A and B on the same stream (the ThreadCtx launches in dispatch order and the stream
//    runs in launch order); A a StreamWait whose target is B's stream (the device wait is
//    enqueued before B); A on a synchronous (cpu) stream of B's ThreadCtx (A has finished
//    before B launches);
//  - once A is *dispatched*, too, when A is an ordinary instruction on an asynchronous
//    stream and B is elsewhere: the engine adds no device order of its own there. Ordering
//    such a pair is the job of the sync instructions the builder (soft sync) or the
//    interpreter (stream analysis) emits, and the sync checker verifies they did. Waiting
//    for completion here would need a completion point per cross-stream edge: a host round
//    trip that hides the missing sync instead of reporting it;
//  - otherwise once A is *done*: A is a RecordEvent or StreamWait point (B waits on the host
//    for the stream to pass it) or cpu work of another ThreadCtx.
// "Dispatched" implies "launched" for B's purpose: B cannot launch before A on one ThreadCtx.
//
// Dispatch order. Ready instructions go out earliest received first (a heap on the receive
// number), not in the order they became ready. Streams run work in launch order, so for a
// precomputed batch that arrives whole this makes every stream's launch order the batch's
// order: the interpreter places each StreamWait in its batch just before the consumer it
// serves, and that is where the device-side wait lands on the consumer's stream — not
// wherever a breadth-first walk of the edges happens to reach it, which can block a stream
// on a wait long before the work that needs it.
//
// Scheduling runs either on a dedicated thread or on the threads that hand the engine work
// (submitters and workers reporting completions), one at a time through a combining counter:
// a thread that finds the scheduler busy leaves its work for the busy one.
#ifndef SLUICE_VM_INTERNAL_ENGINE_H_
#define SLUICE_VM_INTERNAL_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "core/intrusive_queue.h"
#include "core/waker.h"
#include "vm/instruction.h"
#include "vm/internal/completion_sink.h"

namespace sluice::vm {

class ExecutionObserver;
class ThreadCtx;
namespace internal {
class BlobPool;
class InstructionPool;
}  // namespace internal

struct EngineOptions {
  bool dedicated_thread = true;
  std::chrono::nanoseconds spin{20000};
  // Marks the edges a synchronous stream's worker orders (Instruction::joins_worker_clock)
  // for the sync checker, which joins its worker's clock there. Set when the checker is on.
  bool marks_worker_order = false;
};

// Thread-safe as documented per method. Workers reach it only as their CompletionSink.
class Engine final : public CompletionSink {
 public:
  // `observer` (may be null) hears the scheduler's events (vm/execution_observer.h), on the
  // scheduling thread; `pool` recycles retired instructions, `blobs` dead blobs' memory.
  Engine(EngineOptions options, ExecutionObserver* observer, internal::InstructionPool* pool,
         internal::BlobPool* blobs);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // `hand_over` (may be null): hands over the instructions producers hold back
  // (internal::SubmitBuffer) by submitting them. Dedicated mode calls it on the scheduler
  // thread each time it runs out of work (after WantsWork() turned true, before it waits)
  // and before it decides the fate of buried blobs.
  void Start(absl::AnyInvocable<void()> hand_over = nullptr);
  // Any thread: true while the scheduler thread is out of work (or there is none): a
  // producer holding instructions back should hand them over now. seq_cst: set before
  // `hand_over` runs, so that a producer that appends after the scheduler's last look at its
  // buffer sees it (see VirtualMachine::SubmitBuffered).
  bool WantsWork() const {
    return !options_.dedicated_thread || wants_work_.load(std::memory_order_seq_cst);
  }
  // True on the dedicated scheduler thread. Any thread, after Start.
  bool OnSchedulerThread() const { return thread_.get_id() == std::this_thread::get_id(); }
  // Any thread: submitted instructions, in order (room reserved in the pool).
  void Submit(Chain<Instruction> chain);
  // ThreadCtx workers: completed instructions.
  void Complete(Chain<Instruction> chain) override;
  // Any thread, once every instruction retired: stops the scheduler thread.
  void Stop();
  // Any thread: wakes the scheduler thread, or (caller-thread mode) schedules now unless
  // another thread is already scheduling.
  void Kick() override;
  // Any thread (a BlobRef's deleter): deletes `blob` once no unretired instruction uses it,
  // at the next scheduling pass. Never schedules inline. Every instruction using the blob
  // must have been accepted before (submitted, or held back by a producer: the pass hands
  // those over before it counts the blob's uses).
  void Bury(Blob* blob);
  // After Stop, with nothing in flight: deletes buried blobs.
  void DeleteBuried();
  // Any thread: deletes a blob no instruction can use any more (a run-private blob whose
  // last hold was dropped), keeping its memory for new blobs.
  void DeleteUnused(Blob* blob);

 private:
  bool DispatchSatisfies(const Instruction& from, const Instruction& to) const;
  // `from` is a StreamWait between synchronous streams of two ThreadCtxs and `to` runs on
  // its target: `to` carries a HostWait for it (see Instruction::host_waits).
  static bool IsHostWait(const Instruction& from, const Instruction& to);
  void SchedulerLoop();
  // One scheduling pass. Exclusive: the scheduler thread, or the combining-counter owner.
  void Step();
  void Receive(Instruction* instruction);
  // Receives everything in incoming_, in order.
  void ReceiveIncoming();
  void AddEdge(Instruction* from, Instruction* to);
  void Retire(Instruction* instruction);
  void ForgetReader(Blob* blob, Instruction* instruction);
  void ReleaseUse(Blob* blob);
  void FireBarrier(Instruction* barrier);
  void MakeReady(Instruction* instruction);
  // Dispatches every ready instruction, earliest received first (see the class comment).
  void DispatchReady();

  // How long an out-of-work scheduler waits for producers to hand over what they hold
  // back before it takes it itself (the most a held-back instruction waits).
  static constexpr std::chrono::nanoseconds kHoldBackWindow{2000};

  const EngineOptions options_;
  ExecutionObserver* const observer_;
  internal::InstructionPool* const pool_;
  internal::BlobPool* const blobs_;

  IntrusiveQueue<Instruction> incoming_;
  IntrusiveQueue<Instruction> completed_;
  IntrusiveQueue<Blob> graveyard_;

  // Caller-thread mode: kicks not yet served; the thread that raises it from 0 schedules.
  std::atomic<int64_t> requests_{0};
  // Dedicated mode.
  Waker waker_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> wants_work_{true};
  absl::AnyInvocable<void()> hand_over_;
  std::thread thread_;

  // Scheduler state (Step only).
  std::vector<Instruction*> ready_;
  std::vector<std::pair<ThreadCtx*, Chain<Instruction>>> outgoing_;
  std::vector<std::pair<Instruction*, int64_t>> barriers_;  // barrier, earlier unretired
  std::vector<Instruction*> fired_;
  Chain<Instruction> recycled_;
  std::vector<Blob*> dead_private_;  // run-private blobs the recycled runs held last
  uint64_t received_ = 0;
  int open_batches_ = 0;  // batches whose first part arrived and last part did not
  int64_t unretired_ = 0;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_ENGINE_H_
