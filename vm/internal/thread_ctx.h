// ThreadCtx: one worker thread and the streams it launches on. Its loop
// waits for work, takes the whole queue as one batch, runs each instruction through its
// stream's policy, and reports completed instructions to the engine in one hand-off.
//
// Grouping (VirtualMachine): one ThreadCtx per device *type* — one for cpu, one for all sim
// devices, one for all cuda devices — as OneFlow does. Launching on an asynchronous stream
// only enqueues, so one thread keeps every device of a type fed, and on small machines every
// extra thread competes for the cores the streams themselves run on. cpu gets its own
// because cpu kernels run on the worker and would delay launches to accelerators; and each
// cpu compute stream past the first has a worker of its own, so that cpu streams can run
// side by side (ordered among themselves by host waits: Instruction::HostWait).
#ifndef SLUICE_VM_INTERNAL_THREAD_CTX_H_
#define SLUICE_VM_INTERNAL_THREAD_CTX_H_

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/intrusive_queue.h"
#include "core/waker.h"
#include "vm/instruction.h"
#include "vm/internal/completion_sink.h"

namespace sluice::vm {

class InstructionExecutor;
class Stream;

// Thread-safe as documented per method. Start once; Stop before destruction. Completed
// work goes to its CompletionSink (the engine); streams' completion points poke it as their
// CompletionWatcher.
class ThreadCtx final : public CompletionWatcher {
 public:
  // `spin`: how long a host wait (AwaitRan) polls before parking; `idle_spin`: how long
  // the worker polls its empty queue before parking.
  ThreadCtx(std::string name, InstructionExecutor* executor, CompletionSink* sink,
            std::chrono::nanoseconds spin, std::chrono::nanoseconds idle_spin);
  ~ThreadCtx();
  ThreadCtx(const ThreadCtx&) = delete;
  ThreadCtx& operator=(const ThreadCtx&) = delete;

  const std::string& name() const { return name_; }
  void Start();
  // Scheduler: instructions to launch, in order.
  void Dispatch(Chain<Instruction> chain);
  // Any thread (an ep stream reaching a completion point): look for completed work.
  void Poke() override;
  // Any thread, once no more work will be dispatched and all of it retired: ends the loop
  // and joins the thread.
  void Stop();

  // Caller-thread scheduling: a submitter whose instruction targets this ThreadCtx while its
  // worker is running a batch may leave scheduling to the worker, which kicks the engine
  // when the batch ends (the instruction could not launch sooner anyway). Returns false
  // when the worker is idle: the caller must schedule itself. Any thread.
  bool DeferKickToWorker();
  // True on this ThreadCtx's worker thread. Any thread, ordered after Start (the VM starts
  // and reads it under its streams lock).
  bool OnWorkerThread() const { return thread_.get_id() == std::this_thread::get_id(); }

 private:
  void Loop();
  bool HasWork() const;
  // Blocks until `wait.stream` (a synchronous stream of another ThreadCtx) has run through
  // `wait.seq`. Cannot deadlock: the awaited instruction was dispatched before the waiting
  // one, and every wait points to earlier-dispatched work.
  void AwaitRan(const Instruction::HostWait& wait) const;

  const std::string name_;
  InstructionExecutor* const executor_;
  CompletionSink* const sink_;
  const std::chrono::nanoseconds spin_;
  const std::chrono::nanoseconds idle_spin_;

  IntrusiveQueue<Instruction> queue_;
  // Set by Poke (seq_cst, see Waker), cleared by the worker before it collects.
  std::atomic<bool> poked_{false};
  std::atomic<bool> stop_{false};
  // busy_: the worker is inside a batch. kick_requested_: a submitter deferred its kick.
  // Both seq_cst: DeferKickToWorker and the end of a batch form a Dekker pair (each stores
  // its flag, then loads the other's), so a deferred kick is never lost.
  std::atomic<bool> busy_{false};
  std::atomic<bool> kick_requested_{false};
  Waker waker_;
  // Asynchronous streams this worker has launched on. Worker only.
  std::vector<Stream*> async_streams_;
  std::thread thread_;
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_THREAD_CTX_H_
