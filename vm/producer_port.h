// ProducerPort: the VM's door for code that fills instructions itself — InstructionsBuilder
// (eager calls, held back and fused), PrecomputedBatch (a precomputed graph, handed over in
// pieces) and the Replayer. The user's front door, VirtualMachine, creates blobs, syncs
// and shuts down; everything that moves Instruction chains in and out of the VM's pool goes
// through a port. A port is a handle (two pointers: the front and the machine behind it,
// internal::VmCore): make one where it is needed.
//
// Lifecycle of what passes through a port: Allocate takes a free instruction from the
// producer's private cache; the producer fills it and hands a chain of them over with
// Submit (or ReserveBatch + SubmitBatchPart, or SubmitBuffered); whatever it filled but
// will not submit goes back with Free, and a cache it no longer needs with ReturnUnused.
// From Submit on, the instructions are the engine's: it recycles them when they retire.
#ifndef SLUICE_VM_PRODUCER_PORT_H_
#define SLUICE_VM_PRODUCER_PORT_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "core/intrusive_queue.h"
#include "core/prefetch.h"
#include "vm/instruction.h"
#include "vm/step_sequence.h"
#include "vm/stream.h"
#include "vm/virtual_machine.h"

namespace sluice::vm {

namespace internal {
struct SubmitBuffer;
class VmCore;
}  // namespace internal

// Thread-safe as the VM is, with the per-method rules below: a `cache` and a `buffer`
// belong to one producer thread at a time. The VM must outlive the port.
class ProducerPort {
 public:
  explicit ProducerPort(VirtualMachine* vm) : vm_(vm), core_(vm->core_.get()) {}

  VirtualMachine* vm() const { return vm_; }

  // A free instruction from the producer's private cache, refilled from the VM's pool.
  // Inline: every eager op takes one or more.
  Instruction* Allocate(Chain<Instruction>& cache) {
    if (cache.empty()) Refill(cache);
    Instruction* instruction = cache.PopFront();
    // The next one was last written by the scheduler (recycled at retirement): start moving
    // its lines to this core now, while the caller fills this one.
    if (cache.head != nullptr) PrefetchForWrite(cache.head);
    instruction->state = Instruction::State::kSubmitted;
    return instruction;
  }
  // Instructions the producer allocated and filled but will not submit.
  void Free(Chain<Instruction> chain);
  // A cache of instructions never handed out (returned in O(1)).
  void ReturnUnused(Chain<Instruction> cache);

  // Submits a chain of filled instructions as one unit, in order: assigns their seq,
  // records them, waits for room (backpressure). On error the instructions are freed.
  absl::Status Submit(Chain<Instruction> chain);
  // A large batch, handed over in pieces so that the scheduler and the workers start on
  // its head while the producer still fills its tail: ReserveBatch(n) waits for room for
  // all n instructions at once (the same errors as Submit; nothing is reserved on error);
  // then SubmitBatchPart hands over each piece in order, `last` on the final one, which
  // must bring the total to exactly n. Instructions may name earlier pieces' instructions
  // as predecessors: the engine recycles nothing while a batch is partly received.
  absl::Status ReserveBatch(int64_t n);
  void SubmitBatchPart(Chain<Instruction> part, bool first, bool last);

  // Held-back submission (see internal::SubmitBuffer). A producer attaches its buffer once
  // and detaches it (which hands it over) before the buffer goes away.
  void AttachBuffer(internal::SubmitBuffer* buffer);
  void DetachBuffer(internal::SubmitBuffer* buffer);
  // Like Submit — room is reserved now, with the same errors, and on error the chain is
  // freed — but the chain may wait in `buffer` behind earlier ones. It is handed over when
  // the buffer reaches max_buffered() or when the scheduler is out of work; the scheduler
  // also takes every buffer itself whenever it runs out of work or a blob's last reference
  // goes away, and Sync, stats(), barriers and every other submit path hand all buffers
  // over first. `open`: the chain's last instruction (an OpCall or Release) may take later
  // calls of this producer on its stream while it is held back (AppendToOpenRun).
  absl::Status SubmitBuffered(internal::SubmitBuffer* buffer, Chain<Instruction> chain,
                              bool open = false);
  // Eager fusion. When the last instruction held back in `buffer` is open (see
  // SubmitBuffered) and runs on `stream`, makes it a StepSequence run if it is not one yet,
  // calls `add(run, head)` to append a step, and returns true; otherwise does nothing and
  // returns false. The caller must have checked that the step needs no sync before it and
  // that the VM fuses (VirtualMachine::fusion()). A run that reaches the VM's
  // max_fused_steps is handed over at once.
  bool AppendToOpenRun(internal::SubmitBuffer* buffer, const Stream* stream,
                       absl::FunctionRef<void(StepSequence& run, Instruction* head)> add);
  // Hands every attached buffer over. Any thread.
  void HandOverBuffers();
  // Instructions accepted but still held back in buffers: a snapshot, for tests and
  // diagnostics.
  int64_t held_back();
  // The most instructions a buffer holds back (1: none; so in caller-thread mode, where no
  // scheduler thread would come for them).
  int64_t max_buffered() const;

  // A host thread waited for `instruction`'s completion (for the sync checker).
  void NoteHostWaited(const Instruction& instruction);

 private:
  // Fills an empty cache from the VM's pool (recycled instructions, or a new block).
  void Refill(Chain<Instruction>& cache);

  VirtualMachine* vm_;
  internal::VmCore* core_;  // vm_'s machine (vm/internal/vm_core.h)
};

}  // namespace sluice::vm

#endif  // SLUICE_VM_PRODUCER_PORT_H_
