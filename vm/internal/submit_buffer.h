// SubmitBuffer: instructions a producer had accepted (room reserved, numbered nowhere yet)
// but holds back, so that the scheduler receives a producer's burst of small ops as a few
// chains instead of one cross-core hand-off per op. Each hand-off costs a cache-line
// transfer on both sides — the producer's push and the scheduler's take of the queue head —
// which at a few hundred nanoseconds an op was the largest single cost of an eager no-op.
//
// Nothing waits on its producer: the VM's scheduler hands every attached buffer over
// itself whenever it runs out of work (VirtualMachine::HandOverBuffers), and producers
// hand over at once while the scheduler is idle. See VirtualMachine::SubmitBuffered.
#ifndef SLUICE_VM_INTERNAL_SUBMIT_BUFFER_H_
#define SLUICE_VM_INTERNAL_SUBMIT_BUFFER_H_

#include "absl/base/thread_annotations.h"
#include "core/intrusive_queue.h"
#include "core/plain_mutex.h"
#include "vm/instruction.h"

namespace sluice::vm::internal {

// Thread-safe through `mu`: the producer appends, the scheduler (or any thread that needs
// everything handed over) takes. Uncontended in the common case, so the lock stays in the
// producer's cache.
struct SubmitBuffer {
  PlainMutex mu;
  Chain<Instruction> chain ABSL_GUARDED_BY(mu);
  // The chain's last instruction may still take steps (eager fusion: an OpCall, Release or
  // StepSequence run of this producer). Whoever takes the chain clears it: from then on the
  // instruction is the engine's.
  bool tail_open ABSL_GUARDED_BY(mu) = false;
};

}  // namespace sluice::vm::internal

#endif  // SLUICE_VM_INTERNAL_SUBMIT_BUFFER_H_
