// StepLog: the steps a kernel that runs steps of its own launched, in launch order — how a
// control-flow kernel (framework/interpreter/control_flow) tells the recorder what it
// executed: a loop's iterations unrolled, the branch a cond took. The kernel installs a log
// for the current thread (StepLogScope) while it runs; StepSequence::Launch appends each
// step it launches there (a step whose kernel logs its own steps is not itself appended:
// its steps are). Nested kernels that find a log installed add to it, so the log is the
// flattened stream. The recorder writes it as an expansion of the kernel's line
// (Recorder::RecordExpansion; docs/instruction_record_format.md). RunLoggingSteps
// (vm/recorder.h) installs a log for a kernel's body.
//
// Thread-compatible: a log is filled by the one thread that installed it. Steps must stay
// alive and unchanged until the log is written.
#ifndef SLUICE_VM_STEP_LOG_H_
#define SLUICE_VM_STEP_LOG_H_

#include <vector>

#include "vm/instruction.h"

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

}  // namespace sluice::vm

#endif  // SLUICE_VM_STEP_LOG_H_
