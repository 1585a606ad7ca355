// InstructionExecutor: what each instruction kind does when a ThreadCtx worker launches it
// on its ep::Stream — run the kernel, record and wait pooled events, free storage, run host
// code on a blob's bytes — plus the error rules: an instruction whose input is poisoned is
// skipped, and a failure poisons the outputs and reaches the ErrorSink.
#ifndef SLUICE_VM_INTERNAL_INSTRUCTION_EXECUTOR_H_
#define SLUICE_VM_INTERNAL_INSTRUCTION_EXECUTOR_H_

#include <atomic>

#include "absl/status/status.h"
#include "vm/counters.h"
#include "vm/error_sink.h"
#include "vm/instruction.h"
#include "vm/tracer.h"

namespace sluice::vm {

class ExecutionObserver;
class Recorder;
class SyncChecker;

// Thread-safe: workers of different ThreadCtx call Run concurrently (on different streams).
class InstructionExecutor {
 public:
  // `observer` (may be null) hears the workers' events (vm/execution_observer.h). `checker`
  // and `recorder` (each may be null) are what kernels reach through KernelContext for
  // their own reports; the executor's own events go to `observer` only. `cancel`, when
  // true, makes Run skip every instruction with Cancelled (shutdown with cancellation).
  InstructionExecutor(ErrorSink* errors, VmCounters* counters, ExecutionObserver* observer,
                      SyncChecker* checker, Recorder* recorder, const std::atomic<bool>* cancel)
      : errors_(errors),
        counters_(counters),
        observer_(observer),
        checker_(checker),
        recorder_(recorder),
        cancel_(cancel) {}

  // Worker thread of the instruction's stream. Never fails: an error is stored in
  // `instruction->status`, poisons its outputs and is reported to the ErrorSink.
  void Run(Instruction* instruction);

  // Marks `instruction` failed with `error` (annotated with the instruction), poisons its
  // outputs and reports it. Any thread that runs the instruction's work.
  void Fail(Instruction* instruction, const absl::Status& error);
  // Marks `instruction` skipped because of `cause` (a poisoned input or cancellation).
  void Skip(Instruction* instruction, const absl::Status& cause);
  // Poisons the outputs with `cause`: in stream order on streams the host can run work on,
  // at once elsewhere.
  void PoisonOutputs(Instruction* instruction, const absl::Status& cause);
  // The first poisoned input's error, or OK.
  static absl::Status InputPoison(const Instruction& instruction);

  ErrorSink* errors() const { return errors_; }
  // True once the VM cancels its work (shutdown with cancellation). Any thread.
  bool cancelling() const { return cancel_ != nullptr && cancel_->load(std::memory_order_acquire); }
  // Null unless the VM records (KernelContext::recorder).
  Recorder* recorder() const { return recorder_; }
  // Installs (or, with null, removes) the tracer that times every OpCall from now on. Any
  // thread; work already launched may still add to the previous tracer, which must stay
  // alive until that work is complete (remove it after a sync).
  void set_tracer(Tracer* tracer) { tracer_.store(tracer, std::memory_order_release); }
  Tracer* tracer() const { return tracer_.load(std::memory_order_acquire); }

  // A step of a StepSequence (see KernelContext::RunStep), on `outer`'s stream. `check`:
  // report the step's events to the observer (requires the sync checker, which implies an
  // observer).
  void RunStep(Instruction* step, Instruction* outer, bool check = false);
  // Null unless the VM checks synchronization (KernelContext::sync_checker).
  SyncChecker* checker() const { return checker_; }
  // One copy between host memory and a device (KernelContext::CountHostCopy). Any thread.
  // A kernel's parallel regions on `pool` (KernelContext::parallel): cancelled with the VM,
  // counted in its statistics. Any thread.
  ParallelScope parallel_scope(IntraOpPool* pool) const {
    return ParallelScope(pool, cancel_, &counters_->parallel);
  }
  void CountHostCopy(bool to_device) {
    VmCounters::Add(to_device ? counters_->host_to_device_copies
                              : counters_->device_to_host_copies);
  }

 private:
  void RunOpCall(Instruction* instruction);
  // An OpCall's kernel with the poison, lazy-storage and error rules (not a sequence).
  void RunKernel(Instruction* instruction);
  void RunStreamWait(Instruction* instruction);
  void RunRecordEvent(Instruction* instruction);
  void RunAccessBlob(Instruction* instruction);
  void CountBorrow(bool reused);

  ErrorSink* const errors_;
  VmCounters* const counters_;
  ExecutionObserver* const observer_;
  SyncChecker* const checker_;
  Recorder* const recorder_;
  const std::atomic<bool>* const cancel_;
  std::atomic<Tracer*> tracer_{nullptr};  // release on install, acquire per OpCall
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_INTERNAL_INSTRUCTION_EXECUTOR_H_
