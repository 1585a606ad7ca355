// StepLog: the steps a kernel that runs steps of its own launched, in launch order — how a
// control-flow kernel (framework/interpreter/control_flow) tells the recorder what it
// executed: a loop's iterations unrolled, the branch a cond took. The kernel installs a log
// for the current thread (StepLogScope) while it runs; StepSequence::Launch appends each
// step it launches there (a step whose kernel logs its own steps is not itself appended:
// its steps are). Nested kernels that find a log installed add to it, so the log is the
// flattened stream. The recorder writes it as an expansion of the kernel's line
// (Recorder::RecordExpansion; docs/instruction_record_format.md).
//
// Thread-compatible: a log is filled by the one thread that installed it. Steps must stay
// alive and unchanged until the log is written.
#ifndef SLUICE_VM_STEP_LOG_H_
#define SLUICE_VM_STEP_LOG_H_

#include <vector>

#include "absl/status/status.h"
#include "vm/instruction.h"
#include "vm/kernel.h"
#include "vm/recorder.h"

namespace sluice::vm {

class StepLog {
 public:
  void Add(const Instruction* step) { steps_.push_back(step); }
  const std::vector<const Instruction*>& steps() const { return steps_; }

  // The log installed on this thread, or null.
  static StepLog* Current();

 private:
  friend class StepLogScope;
  static StepLog*& Slot();
  std::vector<const Instruction*> steps_;
};

// Installs `log` on this thread for its lifetime (and restores what was there before).
class StepLogScope {
 public:
  explicit StepLogScope(StepLog* log) : previous_(StepLog::Slot()) { StepLog::Slot() = log; }
  ~StepLogScope() { StepLog::Slot() = previous_; }
  StepLogScope(const StepLogScope&) = delete;
  StepLogScope& operator=(const StepLogScope&) = delete;

 private:
  StepLog* const previous_;
};

inline StepLog*& StepLog::Slot() {
  thread_local StepLog* current = nullptr;
  return current;
}

inline StepLog* StepLog::Current() { return Slot(); }

// Runs `run` (a kernel's body that launches steps of its own) for the kernel running in
// `ctx`: with the VM recording and no log installed yet, under a log of its own, which the
// recorder then writes as the expansion of ctx's instruction; otherwise as is (a nested
// kernel adds to the enclosing log). Returns what `run` returns.
template <typename Run>
absl::Status RunLoggingSteps(KernelContext& ctx, Run run) {
  Recorder* const recorder = ctx.recorder();
  if (recorder == nullptr || StepLog::Current() != nullptr) return run();
  StepLog log;
  absl::Status status;
  {
    StepLogScope scope(&log);
    status = run();
  }
  recorder->RecordExpansion(*ctx.instruction(), log.steps());
  return status;
}

}  // namespace sluice::vm

#endif  // SLUICE_VM_STEP_LOG_H_
